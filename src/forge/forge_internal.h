/* Private state shared by the forge modules (never installed). */
#ifndef RAMFORGE_FORGE_INTERNAL_H
#define RAMFORGE_FORGE_INTERNAL_H

#include <stdint.h>
#include <sys/stat.h>

#include "ramforge/forge.h"

struct gguf_context;
struct llama_model;
struct name_index;

struct forge_model {
    uint64_t instance_id;
    struct llama_model *model;
    struct forge_model_info info;
    struct rf_tensor_meta *tensors; /* n_tensors, GGUF order */
    size_t n_tensors;
    struct name_index *by_name;     /* n_tensors, sorted by name */
    struct rf_mapping_meta mapping; /* the model file's mapping */
    uintptr_t map_start, map_end;   /* its virtual address range; 0,0 if not found */
};


/*
 * forge_gguf_check, keeping the parsed header: on success *out is a gguf
 * context (no tensor data) the caller frees with gguf_free, and *st the
 * file's stat.
 */
int forge_gguf_open(const char *path, struct gguf_context **out, struct stat *st,
                    char err[FORGE_ERR_MAX]);

#endif
