/*
 * The shapes ramforge mkmodel writes: its presets, and for each of their
 * architectures the hyperparameter keys and the tensor list with types.
 *
 *   llama     dense: attention + a SwiGLU feed-forward per layer
 *   qwen3moe  routed experts: attention with q/k norms, a router
 *             (ffn_gate_inp, n_embd x n_expert, f32) and the routed experts
 *             ffn_{gate,up,down}_exps, 3-D with the expert on the outer
 *             dimension (expert e's slice is contiguous at e x nb[2])
 *   qwen2moe  routed experts as qwen3moe (no q/k norms; q/k/v biases) plus
 *             a shared expert (ffn_{gate,up,down}_shexp, gated by the
 *             vector ffn_gate_inp_shexp) that every token reads
 *
 * A random model's layers add outputs much larger than a token's
 * embedding to the residual stream, alike for every token: its router
 * would then send every token to the same few experts whatever the
 * router's rows. The MoE presets scale token_embd's values by
 * MKMODEL_MOE_EMBD_SCALE, so that the hidden state the router sees is
 * the token's own (measured: an LRU cache of k of the n experts then
 * holds about k/n of the selections, as uniform routing would).
 *
 * The router skew (mkmodel_router_scales): random router rows route near
 * uniformly; with a skew s > 0 the row of the expert at popularity rank r
 * (a seeded permutation per layer) is scaled by (r + 1)^-s, so its logit's
 * spread, and so how often it is in the top k, falls with r. The value is
 * written as ramforge.route_skew (f32) into every MoE model.
 */
#include "forge_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml.h"
#include "gguf.h"

/* token_embd's scale in the MoE presets (30 was enough for the small ones, 300 for a3b). */
#define MKMODEL_MOE_EMBD_SCALE 300.0f

static const struct mkmodel_shape shapes[] = {
    [FORGE_PRESET_TINY] = {"tiny", "llama", 2, 64, 128, 4, 2, 512},
    [FORGE_PRESET_SMALL] = {"small", "llama", 4, 256, 704, 8, 4, 1024},
    [FORGE_PRESET_TINYLLAMA] = {"tinyllama", "llama", 22, 2048, 5632, 32, 4, 2048},
    /* 16 experts of 256 x 128: a slice is 34 KiB in q8_0, not a whole number of pages */
    [FORGE_PRESET_QWEN3MOE_SMALL] = {"qwen3moe-small", "qwen3moe", 4, 256, 704, 8, 4, 1024, 16, 4,
                                     128, 0, MKMODEL_MOE_EMBD_SCALE},
    /* Qwen3-30B-A3B's proportions (head 128, 4 KV heads, 8 of many experts, an expert's
       ffn much narrower than the width) scaled to 16 layers and 64 experts */
    [FORGE_PRESET_QWEN3MOE_A3B] = {"qwen3moe-a3b", "qwen3moe", 16, 2048, 6144, 16, 4, 4096, 64, 8,
                                   224, 0, MKMODEL_MOE_EMBD_SCALE},
    [FORGE_PRESET_QWEN2MOE_SMALL] = {"qwen2moe-small", "qwen2moe", 4, 256, 704, 8, 4, 1024, 16, 4,
                                     128, 256, MKMODEL_MOE_EMBD_SCALE},
};

const struct mkmodel_shape *mkmodel_shape_of(enum forge_mkmodel_preset preset)
{
    return (unsigned)preset < sizeof(shapes) / sizeof(shapes[0]) ? &shapes[preset] : NULL;
}

int forge_mkmodel_preset_parse(const char *s, enum forge_mkmodel_preset *out)
{
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
        if (strcmp(s, shapes[i].name) == 0) {
            *out = (enum forge_mkmodel_preset)i;
            return 0;
        }
    }
    return -EINVAL;
}

bool forge_mkmodel_preset_is_moe(enum forge_mkmodel_preset preset)
{
    const struct mkmodel_shape *s = mkmodel_shape_of(preset);
    return s && s->n_expert;
}

static void add_tensor(struct gguf_context *g, const char *name, enum ggml_type type)
{
    struct ggml_tensor t;
    memset(&t, 0, sizeof(t));
    t.type = type;
    ggml_set_name(&t, name);
    gguf_add_tensor(g, &t);
}

static void set_u32(struct gguf_context *g, const char *arch, const char *key, uint32_t v)
{
    char name[128];
    snprintf(name, sizeof(name), "%s.%s", arch, key);
    gguf_set_val_u32(g, name, v);
}

static void set_f32(struct gguf_context *g, const char *arch, const char *key, float v)
{
    char name[128];
    snprintf(name, sizeof(name), "%s.%s", arch, key);
    gguf_set_val_f32(g, name, v);
}

/* A layer tensor of one architecture: its name's suffix and whether it is f32. */
struct layer_tensor {
    const char *suffix;
    bool f32; /* norms, biases, routers; the others take the weight type */
};

static const struct layer_tensor llama_layer[] = {
    {"attn_norm.weight", true}, {"ffn_norm.weight", true},
    {"attn_q.weight", false},   {"attn_k.weight", false},
    {"attn_v.weight", false},   {"attn_output.weight", false},
    {"ffn_gate.weight", false}, {"ffn_down.weight", false},
    {"ffn_up.weight", false},   {NULL, false},
};

static const struct layer_tensor qwen3moe_layer[] = {
    {"attn_norm.weight", true},
    {"ffn_norm.weight", true},
    {"attn_q_norm.weight", true},
    {"attn_k_norm.weight", true},
    {"attn_q.weight", false},
    {"attn_k.weight", false},
    {"attn_v.weight", false},
    {"attn_output.weight", false},
    {"ffn_gate_inp.weight", true},
    {"ffn_gate_exps.weight", false},
    {"ffn_down_exps.weight", false},
    {"ffn_up_exps.weight", false},
    {NULL, false},
};

static const struct layer_tensor qwen2moe_layer[] = {
    {"attn_norm.weight", true},
    {"ffn_norm.weight", true},
    {"attn_q.weight", false},
    {"attn_k.weight", false},
    {"attn_v.weight", false},
    {"attn_output.weight", false},
    {"attn_q.bias", true},
    {"attn_k.bias", true},
    {"attn_v.bias", true},
    {"ffn_gate_inp.weight", true},
    {"ffn_gate_exps.weight", false},
    {"ffn_down_exps.weight", false},
    {"ffn_up_exps.weight", false},
    {"ffn_gate_inp_shexp.weight", true},
    {"ffn_gate_shexp.weight", false},
    {"ffn_down_shexp.weight", false},
    {"ffn_up_shexp.weight", false},
    {NULL, false},
};

void mkmodel_describe(struct gguf_context *g, const struct mkmodel_shape *s, int wtype,
                      float route_skew, uint32_t n_vocab)
{
    const char *a = s->arch;
    const struct layer_tensor *layer = !strcmp(a, "qwen3moe")   ? qwen3moe_layer
                                       : !strcmp(a, "qwen2moe") ? qwen2moe_layer
                                                                : llama_layer;

    gguf_set_val_str(g, "general.architecture", a);
    set_u32(g, a, "vocab_size", n_vocab);
    set_u32(g, a, "context_length", s->n_ctx);
    set_u32(g, a, "embedding_length", s->n_embd);
    set_u32(g, a, "block_count", s->n_layer);
    set_u32(g, a, "feed_forward_length", s->n_ff);
    set_u32(g, a, "attention.head_count", s->n_head);
    set_u32(g, a, "attention.head_count_kv", s->n_head_kv);
    set_u32(g, a, "rope.dimension_count", s->n_embd / s->n_head);
    set_f32(g, a, "attention.layer_norm_rms_epsilon", 1e-5f);
    set_f32(g, a, "rope.freq_base", 10000.0f);
    if (s->n_expert) {
        set_u32(g, a, "expert_count", s->n_expert);
        set_u32(g, a, "expert_used_count", s->n_expert_used);
        set_u32(g, a, "expert_feed_forward_length", s->n_ff_exp);
        if (s->n_ff_shexp)
            set_u32(g, a, "expert_shared_feed_forward_length", s->n_ff_shexp);
        gguf_set_val_f32(g, FORGE_KEY_ROUTE_SKEW, route_skew);
    }

    add_tensor(g, "token_embd.weight", (enum ggml_type)wtype);
    add_tensor(g, "output_norm.weight", GGML_TYPE_F32);
    add_tensor(g, "output.weight", (enum ggml_type)wtype);
    for (uint32_t il = 0; il < s->n_layer; il++) {
        for (const struct layer_tensor *t = layer; t->suffix; t++) {
            char tn[GGML_MAX_NAME];
            snprintf(tn, sizeof(tn), "blk.%u.%s", il, t->suffix);
            add_tensor(g, tn, t->f32 ? GGML_TYPE_F32 : (enum ggml_type)wtype);
        }
    }
}

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

bool mkmodel_router_scales(const char *name, uint32_t n_expert, float route_skew, uint64_t seed,
                           float *scales)
{
    int32_t layer = -1;
    int end = 0;
    uint32_t rank[FORGE_MKMODEL_MAX_EXPERTS]; /* each expert's popularity rank */

    if (route_skew <= 0.0f || n_expert == 0 || n_expert > FORGE_MKMODEL_MAX_EXPERTS ||
        sscanf(name, "blk.%d.ffn_gate_inp.weight%n", &layer, &end) != 1 || name[end] != '\0')
        return false;
    for (uint32_t e = 0; e < n_expert; e++)
        rank[e] = e;
    /* Fisher-Yates with a stream of the seed and the layer: each layer has its own hot experts. */
    uint64_t state = seed ^ (0x5eed0000ull + (uint64_t)layer) * 0x9e3779b97f4a7c15ull;
    for (uint32_t e = n_expert - 1; e > 0; e--) {
        state += 0x9e3779b97f4a7c15ull;
        uint32_t j = (uint32_t)(mix64(state) % (e + 1));
        uint32_t t = rank[e];
        rank[e] = rank[j];
        rank[j] = t;
    }
    for (uint32_t e = 0; e < n_expert; e++)
        scales[e] = powf((float)(rank[e] + 1), -route_skew);
    return true;
}
