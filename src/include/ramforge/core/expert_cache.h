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
 * batch (a prompt) selects the union of its rows, and a token k > c: the
 * layer then holds more than c until the next layer's select (or
 * rf_expert_lru_trim), so the decode stays lossless. The cache's slots
 * bound every layer together (T, rf_expert_lru_slots): a layer above c
 * takes its room from the least recently used experts of the others, so
 * a prompt batch needs no reservation of its own beyond n, and c may be
 * below k (down to 0: every selection read). Every selection is counted:
 * the first selection of an expert not cached is a miss, every other a
 * hit.
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
    uint32_t capacity;                 /* c: experts a layer kept after a trim (0 .. n) */
    uint32_t slots;                    /* T: the most cached in every layer together (>= n) */
    uint32_t n_total;                  /* cached now in every layer together */
    uint64_t clock;                    /* the last stamp given */
    uint64_t *stamp;                   /* n_layer x n_expert: the last use; 0: not cached */
    uint32_t *n_cached;                /* n_layer: experts cached in the layer */
    uint64_t selections, hits, misses; /* every selection: a hit or a miss */
};

/*
 * The slots (experts held at once, every layer together) a cache of c
 * experts a layer needs when a token selects k: c of every layer and the
 * k - c more of the layer being decoded when c < k, and at least n (a
 * prompt batch may select all of one layer). 0 on a zero size or c > n.
 */
uint64_t rf_expert_lru_slots(uint32_t n_layer, uint32_t n_expert, uint32_t k, uint32_t c);

/*
 * The largest c whose rf_expert_lru_slots fit in slots: *c. -ENOSPC when
 * slots < n (the cache's minimum), -EINVAL (NULL, a zero size, k > n).
 */
int rf_expert_lru_fit(uint32_t n_layer, uint32_t n_expert, uint32_t k, uint64_t slots, uint32_t *c);

/* An empty cache of c experts a layer and T slots in all (n_layer may count layers without
   experts, blk.N numbers below the highest: they hold none). -EINVAL (NULL, a zero size, c > n,
   T < n), -ENOMEM. */
int rf_expert_lru_init(struct rf_expert_lru *c, uint32_t n_layer, uint32_t n_expert,
                       uint32_t capacity, uint32_t slots);

/* Frees the arrays; NULL is a no-op. */
void rf_expert_lru_free(struct rf_expert_lru *c);

/* Whether expert e of layer l is cached (false out of range). */
bool rf_expert_lru_cached(const struct rf_expert_lru *c, uint32_t l, uint32_t e);

/*
 * One batch of layer l selected ids[n_ids] (rows x k, repeats allowed; an
 * id out of range is ignored). The experts of the batch not cached are
 * written to load[] (*n_load, at most n_expert; expert numbers of layer
 * l) and counted cached. Then, least recently used first, experts leave:
 * every other layer's above c, layer l's not selected by the batch above
 * c, and while more than T are cached any layer's not selected by the
 * batch; they are written to evict[] as slot numbers (layer x n_expert +
 * expert, *n_evict). A batch of more than c distinct experts leaves the
 * layer above c. load holds n_expert entries, evict n_layer x n_expert.
 * Stamps follow ids' order. -EINVAL (NULL, l out of range).
 */
int rf_expert_lru_select(struct rf_expert_lru *c, uint32_t l, const int32_t *ids, size_t n_ids,
                         uint32_t *load, uint32_t *n_load, uint32_t *evict, uint32_t *n_evict);

/* Evicts every layer's least recently used experts while it holds more than c: evict[]
   (n_layer x n_expert entries, slot numbers), *n_evict. -EINVAL (NULL). */
int rf_expert_lru_trim(struct rf_expert_lru *c, uint32_t *evict, uint32_t *n_evict);

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
