/*
 * ramforge's own check of a GGUF header, before llama.cpp or gguf sees the
 * file: every size derived from the header (element count, row size of a
 * block type, byte size, offset + size, alignment padding) is computed
 * with overflow-checked arithmetic, and a tensor whose shape or type
 * cannot describe real data is rejected with its name.
 *
 * Plain C without OS calls: the bytes come through a read callback, so the
 * CLI reads a file with pread and the fuzz harness and tests a buffer.
 */
#ifndef RAMFORGE_GGUF_HEADER_H
#define RAMFORGE_GGUF_HEADER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RF_GGUF_MAX_DIMS 4           /* ggml's GGML_MAX_DIMS */
#define RF_GGUF_MAX_NAME 64          /* ggml's GGML_MAX_NAME, NUL included */
#define RF_GGUF_DEFAULT_ALIGNMENT 32 /* bytes, gguf's GGUF_DEFAULT_ALIGNMENT */

/*
 * Reads len bytes at offset_bytes of the file into buf. Returns the bytes
 * read (fewer than len only at the end of the file) or a negative errno.
 */
typedef long (*rf_gguf_read_fn)(void *ctx, uint64_t offset_bytes, void *buf, size_t len);

/* What the check proved about the header. */
struct rf_gguf_header_info {
    uint32_t version;
    uint64_t n_kv;
    uint64_t n_tensors;
    uint64_t alignment_bytes;   /* general.alignment, or RF_GGUF_DEFAULT_ALIGNMENT */
    uint64_t header_bytes;      /* end of the tensor infos */
    uint64_t data_offset_bytes; /* header_bytes padded to alignment_bytes */
    uint64_t data_end_bytes;    /* largest data_offset + tensor offset + bytes; <= file bytes
                                   when there is a tensor */
};

/*
 * Block size (elements) and block bytes of ggml type id type, as ggml
 * defines them; false for an id that is not a type a GGUF file may hold
 * (unknown, removed or deprecated).
 */
bool rf_gguf_type_layout(uint32_t type, uint64_t *block_elems, uint64_t *block_bytes);

/*
 * Checks the GGUF header of a file of file_bytes bytes, read through
 * read(ctx, ...) (at most 64 KiB per call, in increasing offsets):
 * magic, version 2 or 3, counts, every key and value (strings and arrays
 * must lie inside the file; nested arrays and unknown value types are
 * rejected), general.alignment (a u32 power of two), then per tensor:
 * name (1..63 bytes), 1..4 dimensions each in [1, INT64_MAX], a known
 * type, ne[0] a multiple of the type's block size, the element count and
 * byte size without overflow, an offset that is a multiple of the
 * alignment, and data_offset + offset + bytes inside the file.
 *
 * On success returns 0 and fills *info (may be NULL). Errors:
 * -RF_EBADMODEL with one line in err (err_size bytes, NUL-terminated,
 * naming the tensor when one is at fault; no file name: the caller adds
 * it), a negative errno of read (err says "read error"), -ENOMEM, -EINVAL
 * for a NULL read.
 */
int rf_gguf_header_check(rf_gguf_read_fn read, void *ctx, uint64_t file_bytes,
                         struct rf_gguf_header_info *info, char *err, size_t err_size);

/* rf_gguf_header_check of the bytes buf[0 .. bytes), a whole file in memory. */
int rf_gguf_header_check_buffer(const void *buf, size_t bytes, struct rf_gguf_header_info *info,
                                char *err, size_t err_size);

#ifdef __cplusplus
}
#endif

#endif
