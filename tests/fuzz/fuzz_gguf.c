/*
 * Fuzz harness: ramforge's own GGUF header check (rf_gguf_header_check,
 * src/core/gguf_header.c), the code that sees a model file before gguf and
 * llama.cpp do. The input is a whole file in memory. On acceptance the
 * figures it proved must hold for the input (the data inside the file,
 * the data offset aligned).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ramforge/core/gguf_header.h"
#include "ramforge/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct rf_gguf_header_info info;
    char err[256];

    int rc = rf_gguf_header_check_buffer(data, size, &info, err, sizeof(err));
    if (rc < 0) {
        /* a rejection always says why, on one line */
        if (rc != -RF_EBADMODEL || err[0] == '\0' || strchr(err, '\n'))
            abort();
        return 0;
    }
    if (info.alignment_bytes == 0 || (info.alignment_bytes & (info.alignment_bytes - 1)) ||
        info.data_offset_bytes % info.alignment_bytes || info.header_bytes > size ||
        info.data_offset_bytes < info.header_bytes ||
        (info.n_tensors > 0 && info.data_end_bytes > size))
        abort();
    return 0;
}
