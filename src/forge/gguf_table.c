/*
 * The GGUF tensor table and file identity without loading llama.cpp.
 *
 * `ramforge inspect --page-cache` must not load the model through
 * llama.cpp: its mmap load prefetches (MAP_POPULATE + WILLNEED) every page
 * and would destroy the page-cache state it is asked to report. gguf reads
 * only the header (no_alloc); the data section is never read.
 */
#include "forge_internal.h"

#include "ramforge/forge_pages.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>

#include "ggml.h"
#include "gguf.h"

int forge_gguf_read_table(const char *path, struct forge_gguf_table *out, char err[FORGE_ERR_MAX])
{
    struct gguf_context *g = NULL;
    struct stat st;
    int rc;

    memset(out, 0, sizeof(*out));
    rc = forge_gguf_open(path, &g, &st, err);
    if (rc < 0)
        return rc;
    int64_t n = gguf_get_n_tensors(g);
    uint64_t data_offset = gguf_get_data_offset(g);
    out->tensors = calloc(n > 0 ? (size_t)n : 1, sizeof(*out->tensors));
    if (!out->tensors) {
        snprintf(err, FORGE_ERR_MAX, "%s: out of memory", path);
        gguf_free(g);
        return -ENOMEM;
    }
    forge_tensor_table_fill(g, out->tensors);
    out->n_tensors = (size_t)n;
    out->data_offset_bytes = data_offset;
    struct rf_mapping_meta *mm = &out->mapping;
    mm->index = 0;
    snprintf(mm->path, sizeof(mm->path), "%s", path);
    mm->file_size_bytes = (uint64_t)st.st_size;
    mm->dev_major = major(st.st_dev);
    mm->dev_minor = minor(st.st_dev);
    mm->inode = (uint64_t)st.st_ino;
    mm->validated = false;
    gguf_free(g);
    return 0;
}

void forge_gguf_table_free(struct forge_gguf_table *t)
{
    if (!t)
        return;
    free(t->tensors);
    memset(t, 0, sizeof(*t));
}
