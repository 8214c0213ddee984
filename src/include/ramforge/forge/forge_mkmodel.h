/*
 * Model generation (ramforge mkmodel; rfforge_app, not libramforge): the
 * presets, dense (llama) and mixtures of experts (qwen3moe, qwen2moe;
 * docs/MOE.md), and the one call that writes a preset's GGUF file.
 */
#ifndef RAMFORGE_FORGE_MKMODEL_H
#define RAMFORGE_FORGE_MKMODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "ramforge/forge/forge.h"

#ifdef __cplusplus
extern "C" {
#endif

enum forge_mkmodel_preset {
    FORGE_PRESET_TINY = 0,       /* 2 layers, n_embd 64: a few MiB */
    FORGE_PRESET_SMALL,          /* 4 layers, n_embd 256: tens of MiB */
    FORGE_PRESET_TINYLLAMA,      /* TinyLlama-1.1B shapes: 22 layers, n_embd 2048 */
    FORGE_PRESET_QWEN3MOE_SMALL, /* qwen3moe, 4 layers, 16 experts (4 used): tens of MiB */
    FORGE_PRESET_QWEN3MOE_A3B,   /* Qwen3-30B-A3B-shaped qwen3moe scaled: 16 layers, 64
                                    experts (8 used), about 1.8 GiB in q8_0 */
    FORGE_PRESET_QWEN2MOE_SMALL, /* qwen2moe with a shared expert, 4 layers, 16 experts */
};

/* The routing skew a generated MoE model was made with (f32; 0: uniform). */
#define FORGE_KEY_ROUTE_SKEW "ramforge.route_skew"
/* The most experts a generated model may have (its router skew's permutation). */
#define FORGE_MKMODEL_MAX_EXPERTS 256

struct forge_mkmodel_params {
    enum forge_mkmodel_preset preset;
    const char *type;       /* "f32", "f16", "q8_0", "q4_0" for 2-D weights */
    uint64_t seed;          /* PRNG seed: same arguments, byte-identical file */
    float route_skew;       /* MoE presets: router rows scaled by (rank + 1)^-route_skew
                               (mkmodel_router_scales); 0: random rows, near-uniform routing */
    const char *vocab_path; /* GGUF holding the tokenizer (ggml-vocab-llama-spm.gguf) */
    const char *out_path;
    /* Called with (done, total) tensors while writing data; may be NULL. */
    void (*progress)(uint64_t done, uint64_t total, void *user_data);
    void *progress_user_data;
};

/*
 * Builds the preset's model with llama_model_init_from_user (every
 * standard tensor listed in the metadata with its type; weights from a
 * splitmix64 stream seeded by seed and the tensor name, quantized with
 * ggml_quantize_chunk; optional tensors llama.cpp adds on its own are filled
 * with neutral values) and writes it with llama_model_save_to_file to a
 * temporary file renamed over out_path, so a failure leaves no partial file.
 * Errors: -EINVAL (bad type), -errno / -RF_EBADMODEL (vocab), -EIO.
 */
int forge_mkmodel(const struct forge_mkmodel_params *params, char err[FORGE_ERR_MAX]);

/* Parses a preset's name ("tiny", "small", "tinyllama", "qwen3moe-small", "qwen3moe-a3b",
   "qwen2moe-small"); -EINVAL otherwise. */
int forge_mkmodel_preset_parse(const char *s, enum forge_mkmodel_preset *out);

/* Whether preset is a mixture of experts (it takes a routing skew); false outside the enum. */
bool forge_mkmodel_preset_is_moe(enum forge_mkmodel_preset preset);

#ifdef __cplusplus
}
#endif

#endif
