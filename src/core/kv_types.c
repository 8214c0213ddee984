/*
 * The KV cache's element types and the bytes a cache of them takes
 * (ramforge/core/kv_types.h): a table of ggml's block sizes for the types
 * llama.cpp accepts for K and V.
 */
#include "ramforge/core/kv_types.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>

static const struct kv_type {
    uint32_t id;
    const char *name;
    uint32_t block_elems; /* elements per block (ggml_blck_size) */
    uint32_t block_bytes; /* bytes per block (ggml_type_size) */
} kv_types[] = {
    {RF_KV_TYPE_F32, "f32", 1, 4},         {RF_KV_TYPE_F16, "f16", 1, 2},
    {RF_KV_TYPE_BF16, "bf16", 1, 2},       {RF_KV_TYPE_Q8_0, "q8_0", 32, 34},
    {RF_KV_TYPE_Q4_0, "q4_0", 32, 18},     {RF_KV_TYPE_Q4_1, "q4_1", 32, 20},
    {RF_KV_TYPE_IQ4_NL, "iq4_nl", 32, 18}, {RF_KV_TYPE_Q5_0, "q5_0", 32, 22},
    {RF_KV_TYPE_Q5_1, "q5_1", 32, 24},
};

static const struct kv_type *kv_type_of(uint32_t type)
{
    for (size_t i = 0; i < sizeof(kv_types) / sizeof(kv_types[0]); i++)
        if (kv_types[i].id == type)
            return &kv_types[i];
    return NULL;
}

const char *rf_kv_type_name(uint32_t type)
{
    const struct kv_type *t = kv_type_of(type);
    return t ? t->name : NULL;
}

int rf_kv_type_of_name(const char *name, uint32_t *out)
{
    for (size_t i = 0; name && out && i < sizeof(kv_types) / sizeof(kv_types[0]); i++)
        if (strcmp(kv_types[i].name, name) == 0) {
            *out = kv_types[i].id;
            return 0;
        }
    return -EINVAL;
}

int rf_kv_row_bytes(uint32_t type, uint64_t n_elems, uint64_t *out)
{
    const struct kv_type *t = kv_type_of(type);

    if (!out)
        return -EINVAL;
    *out = 0;
    if (!t || n_elems % t->block_elems)
        return -EINVAL;
    if (__builtin_mul_overflow(n_elems / t->block_elems, (uint64_t)t->block_bytes, out))
        return -EOVERFLOW;
    return 0;
}

int rf_kv_cache_bytes(uint64_t n_layer, uint64_t n_ctx, uint64_t n_embd_k, uint64_t n_embd_v,
                      uint32_t type_k, uint32_t type_v, uint64_t *out)
{
    uint64_t k, v, cell;

    if (!out)
        return -EINVAL;
    *out = 0;
    if (!n_layer || !n_ctx || !n_embd_k || !n_embd_v)
        return -EINVAL;
    int rc = rf_kv_row_bytes(type_k, n_embd_k, &k);
    if (rc == 0)
        rc = rf_kv_row_bytes(type_v, n_embd_v, &v);
    if (rc < 0)
        return rc;
    if (__builtin_add_overflow(k, v, &cell) || __builtin_mul_overflow(cell, n_ctx, &cell) ||
        __builtin_mul_overflow(cell, n_layer, &cell))
        return -EOVERFLOW;
    *out = cell;
    return 0;
}
