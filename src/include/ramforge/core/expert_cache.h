/*
 * The expert cache's bookkeeping (docs/MOE.md, "The expert policy"): a
 * per-layer LRU of c experts of a mixture-of-experts model (an expert is
 * its gate, up and down slices together), and which pages of an evicted
 * slice may be dropped when its edge pages hold bytes of a neighbouring
 * slice still cached.
 *
 * The model is admission's (rf_routing_lru_hits): a decode of one token
 * selects k experts a layer; those not cached are loaded, and the least
 * recently used experts the decode did not select leave to make room. A
 * batch (a prompt) selects the union of its rows: when it exceeds c the
 * layer holds more than c until rf_expert_lru_trim, so the decode stays
 * lossless. Every selection is counted: the first selection of an expert
 * not cached is a miss, every other a hit.
 *
 * Plain C, no OS calls; the caller (src/forge/expert_cache.c) reads and
 * drops the pages.
 */
#ifndef RAMFORGE_EXPERT_CACHE_H
#define RAMFORGE_EXPERT_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct rf_expert_lru {
    uint32_t n_layer;                  /* layers (blk.N: 0 .. n_layer - 1) */
    uint32_t n_expert;                 /* experts a layer (n) */
    uint32_t capacity;                 /* c: experts a layer kept after a trim (1 .. n) */
    uint64_t clock;                    /* the last stamp given */
    uint64_t *stamp;                   /* n_layer x n_expert: the last use; 0: not cached */
    uint32_t *n_cached;                /* n_layer: experts cached in the layer */
    uint64_t selections, hits, misses; /* every selection: a hit or a miss */
};

/* An empty cache of capacity c per layer. -EINVAL (NULL, a zero size, c > n), -ENOMEM. */
int rf_expert_lru_init(struct rf_expert_lru *c, uint32_t n_layer, uint32_t n_expert,
                       uint32_t capacity);

/* Frees the arrays; NULL is a no-op. */
void rf_expert_lru_free(struct rf_expert_lru *c);

/* Whether expert e of layer l is cached (false out of range). */
bool rf_expert_lru_cached(const struct rf_expert_lru *c, uint32_t l, uint32_t e);

/*
 * One batch of layer l selected ids[n_ids] (rows x k, repeats allowed; an
 * id out of range is ignored). The experts of the batch not cached are
 * written to load[] (*n_load, at most n_expert) and counted cached; the
 * least recently used experts not selected by the batch leave, written to
 * evict[] (*n_evict), while the layer holds more than c; a batch of more
 * than c distinct experts leaves the layer above c. Both arrays hold
 * n_expert entries. Stamps follow ids' order. -EINVAL (NULL, l out of range).
 */
int rf_expert_lru_select(struct rf_expert_lru *c, uint32_t l, const int32_t *ids, size_t n_ids,
                         uint32_t *load, uint32_t *n_load, uint32_t *evict, uint32_t *n_evict);

/* Evicts layer l's least recently used experts while it holds more than c: evict[] (n_expert
   entries), *n_evict. -EINVAL (NULL, l out of range). */
int rf_expert_lru_trim(struct rf_expert_lru *c, uint32_t l, uint32_t *evict, uint32_t *n_evict);

/*
 * The pages of expert e's slice to drop when it leaves the cache, relative
 * to the first page of its tensor (at file offset tensor_offset_bytes,
 * n_expert slices of slice_bytes, pages of page_bytes): its outward page
 * range, less each edge page that a slice of another expert for which
 * cached(ud, j) is true covers too. *first == *end: none. -EINVAL (NULL,
 * e >= n_expert, page_bytes not a power of two), -EOVERFLOW.
 */
int rf_expert_drop_range(uint64_t tensor_offset_bytes, uint64_t slice_bytes, uint32_t n_expert,
                         uint32_t e, uint64_t page_bytes, bool (*cached)(void *ud, uint32_t j),
                         void *ud, uint64_t *first, uint64_t *end);

#ifdef __cplusplus
}
#endif

#endif
