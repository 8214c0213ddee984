/*
 * The expert cache's bookkeeping (expert_cache.h): a per-layer LRU by
 * stamps within slots shared by every layer, and the edge-page rule of an
 * evicted slice.
 *
 * Workload: one select per MoE layer per batch (tens a token), each over
 * the layer's n stamps (n is 8 to a few hundred): linear scans are cheaper
 * than any list at that size. An eviction for the slots scans every
 * layer's stamps; it happens only while a layer is above c by more than
 * the slots' k - c (a prompt batch), a few times a prompt.
 */
#include "ramforge/core/expert_cache.h"
#include "ramforge/core/experts.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

uint64_t rf_expert_lru_slots(uint32_t n_layer, uint32_t n_expert, uint32_t k, uint32_t c)
{
    if (!n_layer || !n_expert || c > n_expert)
        return 0;
    uint64_t t = (uint64_t)c * n_layer + (k > c ? k - c : 0); /* < 2^33: no overflow */
    return t > n_expert ? t : n_expert;
}

int rf_expert_lru_fit(uint32_t n_layer, uint32_t n_expert, uint32_t k, uint64_t slots, uint32_t *c)
{
    if (!c || !n_layer || !n_expert || k > n_expert)
        return -EINVAL;
    if (slots < n_expert)
        return -ENOSPC;
    uint32_t best = 0;                                /* rf_expert_lru_slots(0) = n fits */
    for (uint32_t lo = 1, hi = n_expert; lo <= hi;) { /* slots grow with c */
        uint32_t mid = lo + (hi - lo) / 2;
        if (rf_expert_lru_slots(n_layer, n_expert, k, mid) <= slots) {
            best = mid;
            lo = mid + 1;
        } else {
            hi = mid - 1;
        }
    }
    *c = best;
    return 0;
}

int rf_expert_lru_init(struct rf_expert_lru *c, uint32_t n_layer, uint32_t n_expert,
                       uint32_t capacity, uint32_t slots)
{
    size_t n;

    if (!c)
        return -EINVAL;
    memset(c, 0, sizeof(*c));
    if (!n_layer || !n_expert || capacity > n_expert || slots < n_expert ||
        __builtin_mul_overflow((size_t)n_layer, (size_t)n_expert, &n))
        return -EINVAL;
    c->stamp = calloc(n, sizeof(*c->stamp));
    c->n_cached = calloc(n_layer, sizeof(*c->n_cached));
    if (!c->stamp || !c->n_cached) {
        rf_expert_lru_free(c);
        return -ENOMEM;
    }
    c->n_layer = n_layer;
    c->n_expert = n_expert;
    c->capacity = capacity;
    c->slots = slots;
    return 0;
}

void rf_expert_lru_free(struct rf_expert_lru *c)
{
    if (!c)
        return;
    free(c->stamp);
    free(c->n_cached);
    memset(c, 0, sizeof(*c));
}

bool rf_expert_lru_cached(const struct rf_expert_lru *c, uint32_t l, uint32_t e)
{
    return c && l < c->n_layer && e < c->n_expert && c->stamp[(size_t)l * c->n_expert + e] != 0;
}

/* The least recently used cached slot of layers [l0, l1) with a stamp below floor; none:
   UINT32_MAX. */
static uint32_t oldest(const struct rf_expert_lru *c, uint32_t l0, uint32_t l1, uint64_t floor)
{
    const uint64_t *s = c->stamp;
    uint32_t best = UINT32_MAX;
    for (uint32_t i = l0 * c->n_expert; i < l1 * c->n_expert; i++)
        if (s[i] && s[i] < floor && (best == UINT32_MAX || s[i] < s[best]))
            best = i;
    return best;
}

static void evict_slot(struct rf_expert_lru *c, uint32_t slot, uint32_t *evict, uint32_t *n_evict)
{
    c->stamp[slot] = 0;
    c->n_cached[slot / c->n_expert]--;
    c->n_total--;
    evict[(*n_evict)++] = slot;
}

/* Evicts layer l's oldest experts stamped before floor while it holds more than c. */
static void shrink(struct rf_expert_lru *c, uint32_t l, uint64_t floor, uint32_t *evict,
                   uint32_t *n_evict)
{
    while (c->n_cached[l] > c->capacity) {
        uint32_t slot = oldest(c, l, l + 1, floor);
        if (slot == UINT32_MAX)
            return; /* every one cached is the batch's: above c until a trim */
        evict_slot(c, slot, evict, n_evict);
    }
}

int rf_expert_lru_select(struct rf_expert_lru *c, uint32_t l, const int32_t *ids, size_t n_ids,
                         uint32_t *load, uint32_t *n_load, uint32_t *evict, uint32_t *n_evict)
{
    if (!c || !c->stamp || l >= c->n_layer || (n_ids && !ids) || !load || !n_load || !evict ||
        !n_evict)
        return -EINVAL;
    uint64_t *s = c->stamp + (size_t)l * c->n_expert;
    const uint64_t batch = c->clock + 1; /* stamps of this batch are >= batch */
    *n_load = *n_evict = 0;
    for (size_t i = 0; i < n_ids; i++) {
        if (ids[i] < 0 || (uint32_t)ids[i] >= c->n_expert)
            continue;
        uint32_t e = (uint32_t)ids[i];
        c->selections++;
        if (s[e]) {
            c->hits++;
        } else {
            c->misses++;
            load[(*n_load)++] = e;
            c->n_cached[l]++;
            c->n_total++;
        }
        s[e] = ++c->clock;
    }
    for (uint32_t o = 0; o < c->n_layer; o++)
        shrink(c, o, o == l ? batch : UINT64_MAX, evict, n_evict);
    while (c->n_total > c->slots) { /* a batch above c by more than the slots leave */
        uint32_t slot = oldest(c, 0, c->n_layer, batch);
        if (slot == UINT32_MAX)
            break; /* the batch alone: more than T distinct (T >= n: never) */
        evict_slot(c, slot, evict, n_evict);
    }
    return 0;
}

int rf_expert_lru_trim(struct rf_expert_lru *c, uint32_t *evict, uint32_t *n_evict)
{
    if (!c || !c->stamp || !evict || !n_evict)
        return -EINVAL;
    *n_evict = 0;
    for (uint32_t l = 0; l < c->n_layer; l++)
        shrink(c, l, UINT64_MAX, evict, n_evict);
    return 0;
}

int rf_expert_drop_range(uint64_t tensor_offset_bytes, uint64_t slice_bytes, uint32_t n_expert,
                         uint32_t e, uint64_t page_bytes, bool (*cached)(void *ud, uint32_t j),
                         void *ud, uint64_t *first, uint64_t *end)
{
    struct rf_expert_slice sl, nb;

    if (!cached || !first || !end || e >= n_expert)
        return -EINVAL;
    int rc = rf_expert_slice_of(tensor_offset_bytes, slice_bytes, e, page_bytes, &sl);
    if (rc < 0)
        return rc;
    const uint64_t base = tensor_offset_bytes / page_bytes;
    uint64_t a = sl.pages.first_page, b = sl.pages.end_page;
    bool keep_first = false, keep_last = false;
    /* the slices below e that reach into its first page, and those above into its last */
    for (uint32_t j = e; !keep_first && j-- > 0;) {
        if ((rc = rf_expert_slice_of(tensor_offset_bytes, slice_bytes, j, page_bytes, &nb)) < 0)
            return rc;
        if (nb.pages.end_page <= a)
            break;
        keep_first = cached(ud, j);
    }
    for (uint32_t j = e + 1; a < b && !keep_last && j < n_expert; j++) {
        if ((rc = rf_expert_slice_of(tensor_offset_bytes, slice_bytes, j, page_bytes, &nb)) < 0)
            return rc;
        if (nb.pages.first_page >= b)
            break;
        keep_last = cached(ud, j);
    }
    a += keep_first;
    if (keep_last && b > a)
        b--;
    if (a > b)
        a = b;
    *first = a - base;
    *end = b - base;
    return 0;
}
