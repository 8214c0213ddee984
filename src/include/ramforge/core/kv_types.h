/*
 * The KV cache's element types: the bytes a cache of llama.cpp's
 * type_k/type_v (llama_context_params, `-ctk`/`-ctv`) really takes, so
 * admission counts a q8_0 cache as q8_0 and not as f16. The type ids are
 * ggml's (enum ggml_type; src/forge checks they match the pinned build);
 * only the types llama.cpp accepts for a KV cache are known.
 */
#ifndef RAMFORGE_CORE_KV_TYPES_H
#define RAMFORGE_CORE_KV_TYPES_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ggml_type ids of the cache types llama.cpp's --cache-type-k/v allow. */
enum rf_kv_type {
    RF_KV_TYPE_F32 = 0,
    RF_KV_TYPE_F16 = 1, /* llama.cpp's default */
    RF_KV_TYPE_Q4_0 = 2,
    RF_KV_TYPE_Q4_1 = 3,
    RF_KV_TYPE_Q5_0 = 6,
    RF_KV_TYPE_Q5_1 = 7,
    RF_KV_TYPE_Q8_0 = 8,
    RF_KV_TYPE_IQ4_NL = 20,
    RF_KV_TYPE_BF16 = 30,
};

/* The type's name as llama.cpp's -ctk spells it ("q8_0"), or NULL for an unknown id. */
const char *rf_kv_type_name(uint32_t type);

/* The id of the type llama.cpp's -ctk calls name ("q8_0"): 0, or -EINVAL (NULL, unknown). */
int rf_kv_type_of_name(const char *name, uint32_t *out);

/*
 * Bytes of n_elems elements of type (ggml_row_size): n_elems / block *
 * block bytes (q8_0: 34 bytes per 32 elements). Errors: -EINVAL (NULL out,
 * an unknown type, n_elems not a whole number of blocks), -EOVERFLOW.
 */
int rf_kv_row_bytes(uint32_t type, uint64_t n_elems, uint64_t *out);

/*
 * KV-cache bytes of n_ctx cells: n_layer * n_ctx * (row of n_embd_k in
 * type_k + row of n_embd_v in type_v), as llama.cpp allocates them (K and
 * V per layer; split in streams or not, the cells are n_ctx). Errors:
 * -EINVAL (a zero argument, NULL out, see rf_kv_row_bytes), -EOVERFLOW.
 */
int rf_kv_cache_bytes(uint64_t n_layer, uint64_t n_ctx, uint64_t n_embd_k, uint64_t n_embd_v,
                      uint32_t type_k, uint32_t type_v, uint64_t *out);

#ifdef __cplusplus
}
#endif

#endif
