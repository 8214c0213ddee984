/*
 * The routing of a mixture-of-experts model as observed: for each token
 * and MoE layer, the k experts the router selected (forge reads them from
 * the graph node ffn_moe_topk-<layer> through the eval callback). Kept per
 * layer: how often each expert was selected, and each selection's reuse
 * distance, the number of distinct experts of that layer selected since
 * this expert's last selection (the LRU stack distance). A per-layer LRU
 * cache of c experts that loads a token's misses at the token holds every
 * selection whose distance is below c: the hit rate of any cache size
 * follows from the distance histogram (rf_routing_lru_hits).
 *
 * Plain C, no model: tested against a naive LRU simulation.
 */
#ifndef RAMFORGE_ROUTING_H
#define RAMFORGE_ROUTING_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct rf_routing {
    uint32_t n_layer;       /* layers 0 .. n_layer - 1 */
    uint32_t n_expert;      /* experts per layer (n) */
    uint32_t n_expert_used; /* experts a token selects per layer (k) */
    uint64_t *counts;       /* n_layer x n_expert: selections of expert e in layer l */
    uint64_t *tokens;       /* n_layer: tokens routed in layer l */
    uint64_t *distance;     /* n_layer x (n_expert + 1): selections at reuse distance d;
                               d = n_expert: the expert's first selection in that layer */
    uint32_t *recency;      /* n_layer x n_expert: the layer's experts, most recent first */
    uint32_t *n_recent;     /* n_layer: experts of the layer selected so far */
    uint64_t bad_ids;       /* selected ids outside [0, n_expert): not counted */
};

/* An empty routing (no allocation): rf_routing_free is a no-op on it. */
void rf_routing_zero(struct rf_routing *r);

/*
 * Allocates *r for n_layer layers of n_expert experts of which a token
 * selects k. Errors: -EINVAL (n_layer or n_expert 0, k 0 or > n_expert),
 * -EOVERFLOW, -ENOMEM; *r is then zeroed.
 */
int rf_routing_init(struct rf_routing *r, uint32_t n_layer, uint32_t n_expert, uint32_t k);

/* Frees and zeroes *r. NULL is a no-op. */
void rf_routing_free(struct rf_routing *r);

/*
 * One token's selection in layer: ids[0 .. n) (n is k; another n is
 * accepted). Each id's reuse distance is taken against the layer's
 * recency before this token (the token's experts are selected at once),
 * then they become the most recent. An id outside [0, n_expert) counts in
 * bad_ids only. Errors: -EINVAL (layer out of range, NULL).
 */
int rf_routing_add(struct rf_routing *r, uint32_t layer, const int32_t *ids, uint32_t n);

/* A deep copy of src into *dst (zeroed first; src may be empty). -ENOMEM. */
int rf_routing_copy(const struct rf_routing *src, struct rf_routing *dst);

/*
 * Selections of layer (or of every layer, layer -1) a per-layer LRU cache
 * of cache_experts experts would have held (*hits: distance below it) and
 * all selections (*selections). -EINVAL for a layer out of range or NULL.
 */
int rf_routing_lru_hits(const struct rf_routing *r, int32_t layer, uint32_t cache_experts,
                        uint64_t *hits, uint64_t *selections);

#define RF_ROUTING_REPORT_SIZES 5 /* cache sizes the report and the metrics give rates for */

/*
 * The cache sizes (experts per layer) whose LRU hit rate the report and
 * /metrics give: k, 2k, 4k, n/4, n/2, each once, nonzero and below n; into
 * out, their count returned.
 */
size_t rf_routing_report_sizes(const struct rf_routing *r, uint32_t out[RF_ROUTING_REPORT_SIZES]);

#ifdef __cplusplus
}
#endif

#endif
