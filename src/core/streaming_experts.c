/*
 * The expert policy's part of the streaming plan (streaming.h, docs/MOE.md):
 * on a mixture-of-experts model the routed expert tensors are neither
 * pinned nor streamed by the window; an LRU cache of c experts a layer
 * (src/forge/expert_cache.c) reads the slices the router chooses. The
 * planner reserves the cache's minimum (n experts: what a prompt batch may
 * select in one layer; a token's k of a layer fit in it) before it pins,
 * and what is left after the pins becomes the cache: T experts held at
 * once, c a layer (rf_expert_lru_fit; c may be below k). A layer above c
 * takes its room from the others' least recently used experts, so no
 * prompt batch's room is held beside c of every layer.
 */
#include "ramforge/core/expert_cache.h"
#include "ramforge/core/streaming.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* n slots x expert_bytes: *out. -EOVERFLOW. */
static int slot_bytes(const struct rf_stream_plan *p, uint64_t slots, uint64_t *out)
{
    return __builtin_mul_overflow(slots, p->expert_bytes, out) ? -EOVERFLOW : 0;
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
    return slot_bytes(out,
                      rf_expert_lru_slots(out->expert_layers, out->n_expert, out->n_expert_used, 0),
                      &out->expert_min_bytes);
}

void rf_stream_plan_experts_cache(struct rf_stream_plan *out)
{
    if (!out->n_expert || !out->expert_bytes || !out->expert_layers)
        return;
    uint64_t left = out->pin_budget_bytes + out->expert_min_bytes; /* R - window */
    left = left > out->pinned_bytes ? left - out->pinned_bytes : 0;
    uint32_t c = 0;
    uint64_t slots = 0;
    if (out->fits && rf_expert_lru_fit(out->expert_layers, out->n_expert, out->n_expert_used,
                                       left / out->expert_bytes, &c) == 0)
        slots = rf_expert_lru_slots(out->expert_layers, out->n_expert, out->n_expert_used, c);
    out->expert_cache_per_layer = c;
    out->expert_cache_slots = slots <= UINT32_MAX ? (uint32_t)slots : 0;
    if (!out->expert_cache_slots || slot_bytes(out, slots, &out->expert_cache_bytes) < 0) {
        out->expert_cache_slots = 0;
        out->expert_cache_bytes = 0;
    }
    size_t len = strnlen(out->reason, sizeof(out->reason));
    snprintf(out->reason + len, sizeof(out->reason) - len,
             "; the routed experts are read into an LRU cache of %" PRIu32 " of the %" PRIu32
             " experts of each of %" PRIu32 " layers (%" PRIu32 " experts held at once, %" PRIu64
             " bytes: a layer above %" PRIu32 ", a token's %" PRIu32
             " or a prompt batch's, takes room from the others; at least %" PRIu32
             ", what a prompt batch may select in one layer)",
             c, out->n_expert, out->expert_layers, out->expert_cache_slots, out->expert_cache_bytes,
             c, out->n_expert_used, out->n_expert);
}
