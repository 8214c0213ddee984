/*
 * Page ranges and interval sets: the arithmetic under the inventory, the
 * shared-page dedup and staging.
 *
 * A page range is half-open, [first_page, end_page), in units of pages of
 * page_bytes each, counted from the start of the file (so two ranges of
 * one mapping compare directly). An interval set is a sorted list of
 * disjoint, non-adjacent ranges: the union of what was added.
 */
#ifndef RAMFORGE_INTERVALS_H
#define RAMFORGE_INTERVALS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The page window: the most pages one page-state call inspects (mincore
 * through a mapping), 16 MiB of file and 4 KiB of states at 4 KiB pages
 * (the spec: "bounded to 4,096 pages per call"). The residency snapshot
 * asks its sampler for at most this many pages per call, a pre-dispatch
 * sample and forge_sample_tensor_pages inspect at most this many.
 */
#define RF_PAGE_WINDOW_PAGES 4096u

struct rf_page_range {
    uint64_t first_page; /* first page in the range */
    uint64_t end_page;   /* one past the last page; == first_page when empty */
};

/*
 * One run of file pages in one mapping of the inventory: what the release
 * plan advises away, what the staging plan prefetches, and what forge's
 * native calls take.
 */
struct rf_file_range {
    int32_t mapping_index;      /* position in the inventory's mappings */
    struct rf_page_range pages; /* file pages, half-open */
};

static inline uint64_t rf_page_range_pages(struct rf_page_range r)
{
    return r.end_page > r.first_page ? r.end_page - r.first_page : 0;
}

/*
 * The pages that hold any byte of [offset_bytes, offset_bytes + len_bytes)
 * (rounded outward). len_bytes == 0 gives an empty range at the floor page.
 * page_bytes must be a power of two. Errors: -EINVAL (page_bytes not a power
 * of two), -EOVERFLOW (offset + len overflows).
 */
int rf_page_range_outward(uint64_t offset_bytes, uint64_t len_bytes, uint64_t page_bytes,
                          struct rf_page_range *out);

/*
 * The pages wholly inside [offset_bytes, offset_bytes + len_bytes) (rounded
 * inward: what madvise may touch without affecting a neighbour's bytes).
 * May be empty. Errors as rf_page_range_outward.
 */
int rf_page_range_inward(uint64_t offset_bytes, uint64_t len_bytes, uint64_t page_bytes,
                         struct rf_page_range *out);

/* The intersection of a and b (empty, first == end, if they do not meet). */
struct rf_page_range rf_page_range_intersect(struct rf_page_range a, struct rf_page_range b);

/* A union of page ranges. Zero-initialise or rf_interval_set_init. */
struct rf_interval_set {
    struct rf_page_range *v; /* sorted, disjoint, non-adjacent; owned */
    size_t n;
    size_t cap;
};

void rf_interval_set_init(struct rf_interval_set *s);

/* Frees the ranges; leaves an empty set. NULL is a no-op. */
void rf_interval_set_free(struct rf_interval_set *s);

/* Adds r (empty ranges are ignored), merging neighbours. Errors: -ENOMEM. */
int rf_interval_set_add(struct rf_interval_set *s, struct rf_page_range r);

/* Number of pages in the union. */
uint64_t rf_interval_set_pages(const struct rf_interval_set *s);

/* Number of pages of r already in s. O(log n + k). */
uint64_t rf_interval_set_overlap_pages(const struct rf_interval_set *s, struct rf_page_range r);

/*
 * Index of the first range of s whose end_page > page (s->n when there is
 * none): the range holding page, or the next one after it. O(log n).
 */
size_t rf_interval_set_first_end_above(const struct rf_interval_set *s, uint64_t page);

/* True when page is in s. */
bool rf_interval_set_contains(const struct rf_interval_set *s, uint64_t page);

/*
 * Pages covered by at least two of the n ranges (the ranges may overlap in
 * any way and come in any order), as a set written to *out (initialised by
 * the caller; any old content is freed). This is the "shared pages" of a
 * mapping. Empty or reversed ranges count for nothing. Errors: -ENOMEM
 * (then *out is unchanged).
 */
int rf_interval_multi_covered(const struct rf_page_range *ranges, size_t n,
                              struct rf_interval_set *out);

#ifdef __cplusplus
}
#endif

#endif
