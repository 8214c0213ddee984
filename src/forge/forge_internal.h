/* Private state shared by the forge modules (never installed). */
#ifndef RAMFORGE_FORGE_INTERNAL_H
#define RAMFORGE_FORGE_INTERNAL_H

#include <stdint.h>
#include <sys/stat.h>

#include "ramforge/forge.h"

#include "gate.h"

struct ggml_tensor;
struct gguf_context;
struct llama_context;
struct llama_context_params;
struct llama_model;
struct name_index;
struct rfsys_maps;

struct forge_model {
    uint64_t instance_id;
    struct llama_model *model;
    struct forge_model_info info;
    struct rf_tensor_meta *tensors; /* n_tensors, GGUF order */
    size_t n_tensors;
    struct name_index *by_name;     /* n_tensors, sorted by name */
    struct rf_mapping_meta mapping; /* the model file's mapping */
    uintptr_t map_start, map_end;   /* its virtual address range; 0,0 if not found */
    struct forge_gate gate;         /* execution gate, contract version 1 */
    bool gate_ready;                /* gate initialised (for forge_model_free) */
};

struct forge_context {
    struct forge_model *m;
    struct llama_context *ctx;
    uint64_t id;                   /* process-unique context id (1, 2, ...) */
    bool has_cb_eval;              /* created with a cb_eval callback installed */
    bool in_flight;                /* holds a lease: submitted, completion not observed */
    uint64_t execution_generation; /* completed executions of this context */
};

/* Creates a context from full llama.cpp parameters (the probe sets cb_eval). */
int forge_context_open(struct forge_model *m, const struct llama_context_params *cp,
                       struct forge_context **out, char err[FORGE_ERR_MAX]);

/*
 * Sums llama_get_memory_breakdown(ctx) over buffer types: context (KV
 * cache) and compute (graph scratch) bytes. -ENOSYS where the build has no
 * llama-ext.h, -EIO when llama.cpp throws.
 */
#ifdef __cplusplus
extern "C"
#endif
int forge_memory_breakdown(const struct llama_context *ctx, uint64_t *context_bytes,
                           uint64_t *compute_bytes);

/*
 * Calls fn(ud, t) for every tensor llama.cpp's model holds
 * (llama_internal_get_tensor_map: name, buffer, data). Returns 0, -ENOSYS
 * where the build has no internal llama-model.h, -EIO when llama.cpp
 * throws.
 */
#ifdef __cplusplus
extern "C"
#endif
int forge_model_tensor_map(const struct llama_model *model,
                           void (*fn)(void *ud, const struct ggml_tensor *t), void *ud);

/*
 * Validates file pages [r->pages.first_page, r->pages.end_page) (non-empty) of the
 * model's mapping for an madvise call (release.c; shared with prefetch.c):
 * the range must lie inside the validated mapping fragment and, in maps (a
 * fresh read of /proc/self/maps), wholly inside one r--s VMA of the model
 * file (same device+inode) at the file offset it claims. Returns 0 with its
 * address in *va; -EOVERFLOW (pages * page_bytes; *len_bytes 0) or -EFAULT
 * (*va 0). *len_bytes is the range's length whenever it fits in 64 bits.
 */
int forge_range_validate(const struct forge_model *m, const struct rfsys_maps *maps,
                         const struct rf_file_range *r, uint64_t page_bytes, uint64_t *va,
                         uint64_t *len_bytes);

/*
 * forge_gguf_check, keeping the parsed header: on success *out is a gguf
 * context (no tensor data) the caller frees with gguf_free, and *st the
 * file's stat.
 */
int forge_gguf_open(const char *path, struct gguf_context **out, struct stat *st,
                    char err[FORGE_ERR_MAX]);

/*
 * Fills t[0 .. gguf_get_n_tensors(g)) from a header forge_gguf_open
 * accepted: index, name, type, absolute file offset (data offset + tensor
 * offset), payload bytes; mapping 0, access unknown.
 */
void forge_tensor_table_fill(const struct gguf_context *g, struct rf_tensor_meta *t);

#endif
