/*
 * The GGUF tensor table and file identity without loading llama.cpp.
 *
 * `ramforge inspect --page-cache` must not load the model through
 * llama.cpp: its mmap load prefetches (MAP_POPULATE + WILLNEED) every page
 * and would destroy the page-cache state it is asked to report. gguf reads
 * only the header (no_alloc); the data section is never read.
 */
#include "forge_internal.h"

#include "ramforge/core/experts.h"
#include "ramforge/core/fs_profile.h"
#include "ramforge/core/inventory.h"
#include "ramforge/error.h"
#include "ramforge/forge/forge_pages.h"
#include "ramforge/sys/pages.h"

#include <errno.h>
#include <stdint.h>
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

    uint64_t magic = 0;
    memset(out, 0, sizeof(*out));
    const char *in_memory =
        rfsys_fs_magic_path(path, &magic) == 0 ? rf_fs_in_memory_reason(magic) : NULL;
    rc = forge_gguf_open_measured(path, &g, &st, &out->header_read_bytes,
                                  in_memory ? NULL : &out->header_direct_reason, err);
    if (rc < 0)
        return rc;
    if (in_memory)
        out->header_direct_reason = "the file's pages are memory (tmpfs, ramfs): O_DIRECT is "
                                    "not used, and the header read brings in no page that was "
                                    "not already there";
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

/* A uint32 hyperparameter "<arch>.<key>"; 0 when absent or of another type. */
static uint32_t arch_u32(const struct gguf_context *g, const char *arch, const char *key)
{
    char name[128];
    snprintf(name, sizeof(name), "%s.%s", arch, key);
    int64_t k = gguf_find_key(g, name);
    if (k < 0)
        return 0;
    switch (gguf_get_kv_type(g, k)) {
    case GGUF_TYPE_UINT32:
        return gguf_get_val_u32(g, k);
    case GGUF_TYPE_INT32:
        return gguf_get_val_i32(g, k) > 0 ? (uint32_t)gguf_get_val_i32(g, k) : 0;
    default:
        return 0;
    }
}

/* Types llama.cpp's CPU backend repacks into CPU_REPACK buffers on x86 with AVX2. */
static const enum ggml_type repacked_types[] = {GGML_TYPE_Q4_0, GGML_TYPE_Q4_K, GGML_TYPE_IQ4_NL};

bool forge_gguf_tensor_copied(const char *name, const char *type_name)
{
    /* Matrices of a repacked type (layers' and output.weight) are copied; token_embd is read
       by rows. */
    if (!name || !type_name || !__builtin_cpu_supports("avx2") ||
        (strncmp(name, "blk.", 4) != 0 && strcmp(name, "output.weight") != 0))
        return false;
    for (size_t i = 0; i < sizeof(repacked_types) / sizeof(repacked_types[0]); i++)
        if (!strcmp(type_name, ggml_type_name(repacked_types[i])))
            return true;
    return false;
}

int forge_gguf_estimate(const char *path, bool use_extra_bufts, struct forge_gguf_estimate *out,
                        char err[FORGE_ERR_MAX])
{
    struct gguf_context *g = NULL;
    struct stat st;

    if (!path || !out)
        return -EINVAL;
    memset(out, 0, sizeof(*out));
    int rc = forge_gguf_open(path, &g, &st, err);
    if (rc < 0)
        return rc;
    out->file_size_bytes = (uint64_t)st.st_size;
    int64_t ka = gguf_find_key(g, "general.architecture");
    if (ka >= 0 && gguf_get_kv_type(g, ka) == GGUF_TYPE_STRING) {
        const char *arch = gguf_get_val_str(g, ka);
        out->n_layer = arch_u32(g, arch, "block_count");
        out->n_embd = arch_u32(g, arch, "embedding_length");
        out->n_head = arch_u32(g, arch, "attention.head_count");
        out->n_head_kv = arch_u32(g, arch, "attention.head_count_kv");
        out->n_ctx_train = arch_u32(g, arch, "context_length");
        if (!out->n_head_kv)
            out->n_head_kv = out->n_head;
        out->n_expert = arch_u32(g, arch, "expert_count");
        out->n_expert_used = arch_u32(g, arch, "expert_used_count");
        if (out->n_expert_used > out->n_expert) /* not a model a token can route in */
            out->n_expert = out->n_expert_used = 0;
    }
    int64_t kt = gguf_find_key(g, "tokenizer.ggml.tokens");
    if (kt >= 0 && gguf_get_kv_type(g, kt) == GGUF_TYPE_ARRAY)
        out->n_vocab = (uint64_t)gguf_get_arr_n(g, kt);
    out->n_tensors = (uint64_t)gguf_get_n_tensors(g);
    bool *xl = out->n_expert && out->n_layer ? calloc(out->n_layer, sizeof(*xl)) : NULL;
    for (int64_t i = 0; i < gguf_get_n_tensors(g); i++) {
        const char *name = gguf_get_tensor_name(g, i);
        uint64_t bytes = gguf_get_tensor_size(g, i);
        bool copied = use_extra_bufts &&
                      forge_gguf_tensor_copied(name, ggml_type_name(gguf_get_tensor_type(g, i)));
        bool rows_only = strcmp(name, "token_embd.weight") == 0;
        bool routed = out->n_expert && bytes % out->n_expert == 0 && rf_expert_tensor_name(name);
        uint64_t *sum = copied      ? &out->repacked_bytes
                        : rows_only ? NULL
                        : routed    ? &out->routed_read_bytes
                                    : &out->dense_read_bytes;
        if (copied && bytes > out->repacked_max_bytes)
            out->repacked_max_bytes = bytes;
        int32_t layer = routed && !copied && xl ? rf_tensor_layer_of(name) : -1;
        if (layer >= 0 && (uint32_t)layer < out->n_layer && !xl[layer]) {
            xl[layer] = true;
            out->expert_layers++;
        }
        if (sum && __builtin_add_overflow(*sum, bytes, sum)) {
            snprintf(err, FORGE_ERR_MAX, "%s: tensor sizes overflow", path);
            free(xl);
            gguf_free(g);
            return -EOVERFLOW;
        }
    }
    free(xl);
    gguf_free(g);
    uint64_t routed;
    if (rf_expert_share(out->routed_read_bytes, out->n_expert_used, out->n_expert, &routed) < 0 ||
        __builtin_add_overflow(out->dense_read_bytes, routed, &out->file_working_set_bytes)) {
        snprintf(err, FORGE_ERR_MAX, "%s: tensor sizes overflow", path);
        return -EOVERFLOW;
    }
    return 0;
}

#define IDENTITY_MAX_HEADER_BYTES                                                                  \
    (256ull << 20) /* a header (metadata + tensor table) above                                     \
                      this is refused, not hashed */

int forge_gguf_identity(const char *path, char out[RF_PROFILE_IDENTITY_MAX],
                        uint64_t *file_size_bytes, char err[FORGE_ERR_MAX])
{
    struct gguf_context *g = NULL;
    struct stat st;
    int rc;

    if (!path || !out || !file_size_bytes)
        return -EINVAL;
    rc = forge_gguf_open(path, &g, &st, err);
    if (rc < 0)
        return rc;
    uint64_t header = gguf_get_data_offset(g);
    gguf_free(g);
    if (header > IDENTITY_MAX_HEADER_BYTES || header > (uint64_t)st.st_size) {
        snprintf(err, FORGE_ERR_MAX, "%s: a header of %llu bytes is not hashed", path,
                 (unsigned long long)header);
        return -EFBIG;
    }
    char *buf = malloc(header ? header : 1);
    FILE *f = fopen(path, "rb");
    rc = 0;
    if (!buf || !f) {
        rc = !buf ? -ENOMEM : -errno;
        snprintf(err, FORGE_ERR_MAX, "%s: %s", path, rf_strerror(rc));
    } else if (fread(buf, 1, header, f) != header) {
        rc = -EIO;
        snprintf(err, FORGE_ERR_MAX, "%s: the header changed while it was read", path);
    } else {
        rc = rf_profile_identity(buf, header, (uint64_t)st.st_size, out);
        *file_size_bytes = (uint64_t)st.st_size;
    }
    if (f)
        fclose(f);
    free(buf);
    return rc;
}
