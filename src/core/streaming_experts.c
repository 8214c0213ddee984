/*
 * The expert policy's part of the streaming plan (streaming.h, docs/MOE.md):
 * on a mixture-of-experts model the routed expert tensors are neither
 * pinned nor streamed by the window; an LRU cache of c experts a layer
 * (src/forge/expert_cache.c) reads the slices the router chooses. The
 * planner reserves the cache's minimum (k experts of every layer, what
 * admission refuses without) before it pins, and what is left after the
 * pins becomes the cache.
 */
#include "ramforge/core/streaming.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * The most a cache of c experts a layer holds: c experts of every layer and,
 * while a prompt batch selects more than c in one layer (all are read: it
 * stays lossless; the layer is trimmed at the next layer's router), the
 * other n - c of that layer. -EOVERFLOW.
 */
static int cache_bytes(const struct rf_stream_plan *p, uint32_t c, uint64_t *out)
{
    uint64_t n;
    if (__builtin_mul_overflow((uint64_t)c, (uint64_t)p->expert_layers, &n) ||
        __builtin_add_overflow(n, (uint64_t)(p->n_expert - c), &n) ||
        __builtin_mul_overflow(n, p->expert_bytes, out))
        return -EOVERFLOW;
    return 0;
}

int rf_stream_plan_experts_size(const struct rf_inventory *inv, const struct rf_stream_params *p,
                                bool *routed, struct rf_stream_plan *out)
{
    const struct rf_expert_map *m = p->experts;
    if (!m || !m->n || !m->n_expert || !m->n_expert_used)
        return 0;
    int32_t max_layer = -1;
    for (size_t t = 0; t < m->n; t++)
        if (m->tensors[t].layer > max_layer)
            max_layer = m->tensors[t].layer;
    if (max_layer < 0)
        return 0;
    uint64_t *per_layer = calloc((size_t)max_layer + 1, sizeof(*per_layer)); /* one expert */
    if (!per_layer)
        return -ENOMEM;
    for (size_t t = 0; t < m->n; t++) {
        const struct rf_expert_tensor *x = &m->tensors[t];
        uint64_t span = (x->slice_bytes + inv->page_bytes - 1) / inv->page_bytes + 1;
        if (__builtin_mul_overflow(span, inv->page_bytes, &span) ||
            __builtin_add_overflow(per_layer[x->layer], span, &per_layer[x->layer])) {
            free(per_layer);
            return -EOVERFLOW;
        }
        for (size_t i = 0; i < inv->n; i++)
            if (inv->entries[i].key.tensor_index == x->tensor_index)
                routed[i] = true;
    }
    out->n_expert = m->n_expert;
    out->n_expert_used = m->n_expert_used;
    for (int32_t l = 0; l <= max_layer; l++) {
        out->expert_layers += per_layer[l] > 0;
        if (per_layer[l] > out->expert_bytes)
            out->expert_bytes = per_layer[l];
    }
    free(per_layer);
    return cache_bytes(out, m->n_expert_used, &out->expert_min_bytes);
}

void rf_stream_plan_experts_cache(struct rf_stream_plan *out)
{
    if (!out->n_expert || !out->expert_bytes || !out->expert_layers)
        return;
    uint64_t left = out->pin_budget_bytes + out->expert_min_bytes, need = 0; /* R - window */
    left = left > out->pinned_bytes ? left - out->pinned_bytes : 0;
    uint32_t c = out->n_expert;
    while (c >= out->n_expert_used && (cache_bytes(out, c, &need) < 0 || need > left))
        c--; /* at most n steps: n is tens to hundreds */
    if (!out->fits || c < out->n_expert_used)
        c = 0;
    out->expert_cache_per_layer = c;
    if (c == 0 || cache_bytes(out, c, &out->expert_cache_bytes) < 0)
        out->expert_cache_bytes = 0;
    size_t len = strnlen(out->reason, sizeof(out->reason));
    snprintf(out->reason + len, sizeof(out->reason) - len,
             "; the routed experts are read into an LRU cache of %" PRIu32 " of the %" PRIu32
             " experts of each of %" PRIu32 " layers (%" PRIu64 " bytes with the other experts "
             "of one layer a prompt batch may select; at least %" PRIu32
             ", the experts a token selects, admission's minimum)",
             out->expert_cache_per_layer, out->n_expert, out->expert_layers,
             out->expert_cache_bytes, out->n_expert_used);
}
