/*
 * The bounded staging controller: which file pages of the model to
 * prefetch (MADV_WILLNEED, forge_prefetch.h) before inference, within a
 * byte budget that is a strict maximum.
 *
 * A staging plan is pure arithmetic over an rf_inventory, like a release
 * plan (policy.h): building one never touches memory. Its figures are page
 * bytes the planner selected ("requested" in the ledger's
 * StagingRequested), never bytes the kernel accepted or pages that became
 * resident: forge reports acceptance, and observation reports residency,
 * separately.
 */
#ifndef RAMFORGE_STAGING_H
#define RAMFORGE_STAGING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ramforge/core/intervals.h"
#include "ramforge/core/inventory.h"
#include "ramforge/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Inputs of rf_staging_plan_build. Start from rf_staging_default_params(). */
struct rf_staging_params {
    uint64_t budget_bytes;  /* strict maximum of selected_bytes; floored to whole pages;
                               0 stages nothing */
    const uint32_t *order;  /* tensor indices in graph order of first use (e.g. by
                               rf_dispatch_tensor.first_order); NULL or empty: file order.
                               Borrowed */
    size_t n_order;         /* entries in order */
    const uint8_t *exclude; /* inv->n flags by entry position, nonzero: never a candidate
                               (its pages may still be staged for another candidate);
                               NULL: none. Borrowed */
};

struct rf_staging_plan {
    uint64_t generation;   /* inventory generation the plan was built from */
    uint64_t page_bytes;   /* the inventory's page size */
    uint64_t budget_bytes; /* as requested */
    uint64_t budget_pages; /* budget_bytes / page_bytes: the strict page maximum */
    bool order_used;       /* a valid graph order ordered the candidates */
    size_t n_candidates;   /* entries considered (see rf_staging_plan_build) */
    size_t n_staged;       /* candidates with every page selected */
    size_t n_partial;      /* candidates with some, not all, of their new pages selected
                              (0 or 1: the one the budget ran out in) */
    size_t n_skipped;      /* candidates with new pages, none selected (budget) */
    uint32_t *staged;      /* n_staged tensor indices, in staging order; owned */
    bool has_partial;
    uint32_t partial_tensor_index;  /* the partial candidate; meaningful when has_partial */
    uint64_t candidate_bytes;       /* sum of the candidates' page bytes (not a union) */
    uint64_t candidate_union_bytes; /* union of the candidates' page ranges, bytes */
    uint64_t selected_pages;        /* pages in ranges: the union, <= budget_pages */
    uint64_t selected_bytes;        /* selected_pages * page_bytes, <= budget_bytes */
    uint64_t overlap_bytes_avoided; /* per candidate, its page bytes an earlier selection
                                       already covered; summed over candidates */
    uint64_t skipped_bytes;         /* per candidate, its page bytes neither covered
                                       earlier nor selected (the budget ran out); summed
                                       over candidates, so a page two candidates miss
                                       counts twice */
    struct rf_file_range *ranges;   /* sorted by (mapping, first page), disjoint and
                                          non-adjacent within a mapping; owned */
    size_t n_ranges;
    char reason[RF_ERR_MAX]; /* one line: what was selected and why, or why nothing was */
};

/* Budget 0, file order, no exclusions. */
struct rf_staging_params rf_staging_default_params(void);

void rf_staging_plan_init(struct rf_staging_plan *plan);

/* Frees the staged and ranges arrays; leaves an empty plan. NULL is a no-op. */
void rf_staging_plan_free(struct rf_staging_plan *plan);

/*
 * Builds the staging plan of inv under p into *out (initialised; old
 * content freed on success, unchanged on error).
 *
 * Candidates: entries of inv's current generation that are file-backed,
 * have a non-empty page range, are read by the graph from the file
 * (access RF_ACCESS_FILE_BACKED; a repacked weight's file pages are never
 * read, an unreferenced or unobserved one is not known to be), and are not
 * flagged in exclude.
 *
 * Order: with p->order, the candidates it names in its order, then the
 * rest in file order; file order is (mapping, first page, file offset,
 * tensor index). An order naming a tensor twice or one not in inv is
 * ignored: file order, order_used false, and the reason says so. Entries
 * of p->order that are not candidates are passed over.
 *
 * Selection fills the budget in candidate order, page by page: each
 * candidate's pages already selected count as overlap_bytes_avoided; its
 * remaining ("new") pages are taken in ascending page order while the
 * budget has pages left; the rest count as skipped_bytes. So a candidate
 * that does not fit entirely is staged partially, its lowest new pages
 * first, and every later candidate's new pages are skipped: the budget is
 * never spent on a later tensor while an earlier one misses pages, and the
 * budget is used up to the last whole page. Per mapping the selection is
 * an interval union (intervals.h): selected_bytes is the union, never the
 * sum of tensor sizes.
 *
 * Identities (tested): selected_bytes <= budget_bytes;
 * candidate_bytes == selected_bytes + overlap_bytes_avoided + skipped_bytes;
 * selected_bytes <= candidate_union_bytes;
 * n_staged + n_partial + n_skipped == n_candidates.
 * Cost O(c log c + c log r), c candidates, r ranges.
 *
 * Errors: -EINVAL (NULL inv/p/out, order NULL with n_order > 0, an
 * inventory with entries but no page size, a file-backed entry with a bad
 * mapping index), -EOVERFLOW (a byte figure), -ENOMEM.
 */
int rf_staging_plan_build(const struct rf_inventory *inv, const struct rf_staging_params *p,
                          struct rf_staging_plan *out);

#ifdef __cplusplus
}
#endif

#endif
