/*
 * The observed routing of a MoE model (routing.h): per layer, selection
 * counts, a recency list of the experts and the reuse-distance histogram.
 *
 * Expected sizes: tens of layers, up to a few hundred experts, k up to
 * tens: a token costs O(k x n) per layer (a linear search of the recency
 * list), a few thousand steps for a Qwen3-30B-A3B-shaped model.
 */
#include "ramforge/core/routing.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

void rf_routing_zero(struct rf_routing *r)
{
    memset(r, 0, sizeof(*r));
}

void rf_routing_free(struct rf_routing *r)
{
    if (!r)
        return;
    free(r->counts);
    free(r->tokens);
    free(r->distance);
    free(r->recency);
    free(r->n_recent);
    rf_routing_zero(r);
}

int rf_routing_init(struct rf_routing *r, uint32_t n_layer, uint32_t n_expert, uint32_t k)
{
    uint64_t cells, dcells;

    if (!r)
        return -EINVAL;
    rf_routing_zero(r);
    if (!n_layer || !n_expert || !k || k > n_expert)
        return -EINVAL;
    if (__builtin_mul_overflow((uint64_t)n_layer, (uint64_t)n_expert, &cells) ||
        __builtin_mul_overflow((uint64_t)n_layer, (uint64_t)n_expert + 1, &dcells) ||
        dcells > SIZE_MAX / sizeof(uint64_t))
        return -EOVERFLOW;
    r->n_layer = n_layer;
    r->n_expert = n_expert;
    r->n_expert_used = k;
    r->counts = calloc((size_t)cells, sizeof(uint64_t));
    r->tokens = calloc(n_layer, sizeof(uint64_t));
    r->distance = calloc((size_t)dcells, sizeof(uint64_t));
    r->recency = calloc((size_t)cells, sizeof(uint32_t));
    r->n_recent = calloc(n_layer, sizeof(uint32_t));
    if (!r->counts || !r->tokens || !r->distance || !r->recency || !r->n_recent) {
        rf_routing_free(r);
        return -ENOMEM;
    }
    return 0;
}

/* Expert e's place in the layer's recency list, or n when it was never selected. */
static uint32_t recency_of(const uint32_t *list, uint32_t n, uint32_t e)
{
    for (uint32_t i = 0; i < n; i++)
        if (list[i] == e)
            return i;
    return n;
}

int rf_routing_add(struct rf_routing *r, uint32_t layer, const int32_t *ids, uint32_t n)
{
    if (!r || !ids || layer >= r->n_layer)
        return -EINVAL;
    const uint32_t ne = r->n_expert;
    uint32_t *list = r->recency + (size_t)layer * ne, *used = &r->n_recent[layer];
    uint64_t *dist = r->distance + (size_t)layer * (ne + 1);

    for (uint32_t i = 0; i < n; i++) { /* distances against the recency before the token */
        if (ids[i] < 0 || (uint32_t)ids[i] >= ne) {
            r->bad_ids++;
            continue;
        }
        uint32_t at = recency_of(list, *used, (uint32_t)ids[i]);
        dist[at == *used ? ne : at]++;
        r->counts[(size_t)layer * ne + (uint32_t)ids[i]]++;
    }
    for (uint32_t i = 0; i < n; i++) { /* then the token's experts are the most recent */
        if (ids[i] < 0 || (uint32_t)ids[i] >= ne)
            continue;
        uint32_t at = recency_of(list, *used, (uint32_t)ids[i]);
        if (at == *used)
            (*used)++;
        memmove(list + 1, list, at * sizeof(*list));
        list[0] = (uint32_t)ids[i];
    }
    r->tokens[layer]++;
    return 0;
}

int rf_routing_copy(const struct rf_routing *src, struct rf_routing *dst)
{
    if (!src || !dst)
        return -EINVAL;
    rf_routing_zero(dst);
    if (!src->n_layer)
        return 0;
    int rc = rf_routing_init(dst, src->n_layer, src->n_expert, src->n_expert_used);
    if (rc < 0)
        return rc;
    size_t cells = (size_t)src->n_layer * src->n_expert;
    memcpy(dst->counts, src->counts, cells * sizeof(uint64_t));
    memcpy(dst->tokens, src->tokens, src->n_layer * sizeof(uint64_t));
    memcpy(dst->distance, src->distance, (cells + src->n_layer) * sizeof(uint64_t));
    memcpy(dst->recency, src->recency, cells * sizeof(uint32_t));
    memcpy(dst->n_recent, src->n_recent, src->n_layer * sizeof(uint32_t));
    dst->bad_ids = src->bad_ids;
    return 0;
}

int rf_routing_lru_hits(const struct rf_routing *r, int32_t layer, uint32_t cache_experts,
                        uint64_t *hits, uint64_t *selections)
{
    if (!r || !hits || !selections || layer < -1 || (layer >= 0 && (uint32_t)layer >= r->n_layer))
        return -EINVAL;
    *hits = *selections = 0;
    for (uint32_t l = 0; l < r->n_layer; l++) {
        if (layer >= 0 && l != (uint32_t)layer)
            continue;
        const uint64_t *dist = r->distance + (size_t)l * (r->n_expert + 1);
        for (uint32_t d = 0; d <= r->n_expert; d++) {
            *selections += dist[d];
            if (d < cache_experts && d < r->n_expert)
                *hits += dist[d];
        }
    }
    return 0;
}

size_t rf_routing_report_sizes(const struct rf_routing *r, uint32_t out[RF_ROUTING_REPORT_SIZES])
{
    const uint32_t k = r->n_expert_used, n = r->n_expert;
    const uint32_t sizes[RF_ROUTING_REPORT_SIZES] = {k, 2 * k, 4 * k, n / 4, n / 2};
    size_t n_out = 0;

    for (size_t i = 0; i < RF_ROUTING_REPORT_SIZES; i++) {
        bool seen = false;
        for (size_t j = 0; j < n_out; j++)
            seen |= out[j] == sizes[i];
        if (!seen && sizes[i] && sizes[i] < n)
            out[n_out++] = sizes[i];
    }
    return n_out;
}
