/*
 * Page-residency snapshots with coverage: which file pages of the
 * inventory's tensors are in the page cache, which are not, and which
 * nobody looked at, with the page budget that bounded the looking.
 *
 * The pages are observed by a sampler callback (forge's validated mincore
 * over the model mapping, or sys's observation mapping of the file): this
 * module never touches memory itself, it decides which pages to ask about
 * and keeps the books. Three states are kept apart everywhere: resident,
 * nonresident and unknown. A page past the budget is unknown, never
 * nonresident; a page whose sampler call failed is unknown.
 *
 * Targeted sampling: the resources selected by the current plan (given as
 * tensor indices) are sampled first, in inventory order, then the other
 * resources in inventory order, until page_budget_pages unique pages have
 * been asked about. A page is keyed by (mapping index, file page index):
 * pages two tensors share are asked about once and their state is reused
 * for both, so overlapping ranges do not spend the budget twice.
 *
 * Coverage keeps two populations with their own denominators, never
 * merged: the targeted pages (the union of the targeted resources' pages)
 * and the general pages (every other page of a file-backed resource).
 *
 * Plain C over plain structs: nothing here includes llama.cpp or reads
 * /proc. Errors are negative errno values; nothing prints.
 */
#ifndef RAMFORGE_RESIDENCY_H
#define RAMFORGE_RESIDENCY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ramforge/core/intervals.h"
#include "ramforge/core/inventory.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The state of one file page, as a sampler reports it. Zero is unknown. */
enum rf_page_state {
    RF_PAGE_UNKNOWN = 0,     /* not asked (past the budget), the call failed, or the source
                                cannot tell (e.g. mincore's fake residency) */
    RF_PAGE_NONRESIDENT = 1, /* observed: not in the page cache */
    RF_PAGE_RESIDENT = 2,    /* observed: in the page cache */
};

/* Default page budget: 1 Mi pages (4 GiB of file at 4 KiB pages, 1 MiB of states). */
#define RF_RESIDENCY_DEFAULT_BUDGET_PAGES (1ull << 20)

/* Size of rf_residency_snapshot.source, including the NUL. */
#define RF_RESIDENCY_SOURCE_MAX 256

/*
 * Writes the state of file pages [first_page, first_page + n_pages) of
 * mapping mapping_index into states[0..n_pages) (RF_PAGE_* values).
 * n_pages is 1..RF_PAGE_WINDOW_PAGES. Returns 0, or a negative errno:
 * then every page of the call is taken as unknown whatever states holds.
 * A value outside enum rf_page_state is taken as unknown. Must not fault
 * the pages in.
 */
typedef int (*rf_page_sampler_fn)(void *ud, int32_t mapping_index, uint64_t first_page,
                                  uint64_t n_pages, uint8_t *states);

struct rf_residency_params {
    uint64_t page_budget_pages; /* unique pages the sampler may be asked about; 0: none, every
                                   page unknown. Default RF_RESIDENCY_DEFAULT_BUDGET_PAGES */
    const uint32_t *targeted;   /* tensor indices of the plan's selection (any order, duplicates
                                   allowed); borrowed; NULL when n_targeted is 0 */
    size_t n_targeted;
    rf_page_sampler_fn sample; /* NULL: nothing is asked, every page unknown */
    void *sample_ud;           /* passed to sample; borrowed */
    const char *source;        /* copied into the snapshot: "mincore", "cachestat" or
                                  "unknown: <reason>"; NULL: "unknown: no sampler" without a
                                  sampler, "unspecified" with one */
};

/* Budget RF_RESIDENCY_DEFAULT_BUDGET_PAGES, no targets, no sampler. */
struct rf_residency_params rf_residency_default_params(void);

/* How much of a resource's page range has a known state. */
enum rf_residency_sampled {
    RF_SAMPLED_NONE = 0,     /* no page of the range has a known state */
    RF_SAMPLED_PARTIAL = 1,  /* some pages known, some unknown */
    RF_SAMPLED_FULL = 2,     /* every page known (resident or nonresident) */
    RF_SAMPLED_NO_PAGES = 3, /* no file pages: not file-backed, or an empty range */
};

/* One inventory entry's view (same order and count as the inventory's entries). */
struct rf_residency_resource {
    struct rf_resource_key key;
    int32_t mapping_index;      /* -1 when it has no file pages */
    struct rf_page_range pages; /* its outward file page range (empty: no pages) */
    uint64_t inspected_pages;   /* pages of the range the sampler was asked about (by this
                                   resource or another one sharing the page) */
    uint64_t resident_pages;    /* observed in the page cache */
    uint64_t nonresident_pages; /* observed not in the page cache */
    uint64_t unknown_pages;     /* range pages - resident - nonresident: past the budget or
                                   a failed call */
    enum rf_residency_sampled sampled;
    bool targeted; /* in the plan's selection */
};

/* One population of unique (mapping, page) pairs. */
struct rf_residency_population {
    uint64_t available_pages;   /* unique pages of the population */
    uint64_t sampled_pages;     /* of those, pages the sampler was asked about */
    uint64_t resident_pages;    /* observed resident */
    uint64_t nonresident_pages; /* observed nonresident */
    uint64_t unknown_pages;     /* available - resident - nonresident */
    bool has_coverage;          /* available_pages > 0 */
    uint32_t coverage_bp;       /* (resident + nonresident) * 10000 / available, rounded down
                                   (10000 only when every page is known); 0 without coverage */
};

struct rf_residency_coverage {
    uint64_t page_budget_pages; /* configured budget */
    uint64_t budget_used_pages; /* unique pages the sampler was asked about */
    bool budget_exhausted;      /* some available page was not asked about for lack of budget */
    struct rf_residency_population targeted; /* pages of the targeted resources */
    struct rf_residency_population general;  /* all other file-backed pages */
    uint64_t selected_resources;             /* targeted resources (distinct) */
    uint64_t selected_fully_observed;        /* of those, RF_SAMPLED_FULL */
    uint64_t selected_partially_observed;    /* RF_SAMPLED_PARTIAL */
    uint64_t selected_not_observed;          /* RF_SAMPLED_NONE or RF_SAMPLED_NO_PAGES */
    bool sampling_complete;                  /* every available page of both populations is known */
};

/* A point-in-time observation; it authorizes nothing (release stays the policy's). */
struct rf_residency_snapshot {
    uint64_t generation;                     /* inventory generation it was taken over */
    uint64_t page_bytes;                     /* the inventory's page size */
    char source[RF_RESIDENCY_SOURCE_MAX];    /* where the states came from */
    struct rf_residency_resource *resources; /* n, inventory order; owned */
    size_t n;
    struct rf_residency_coverage coverage;
    uint64_t sampler_calls;    /* calls made to the sampler */
    uint64_t sampler_failures; /* calls that returned an error */
    int first_sampler_error;   /* negative errno of the first failure, 0 if none */
};

void rf_residency_snapshot_init(struct rf_residency_snapshot *s);

/* Frees the resources; leaves an empty snapshot. NULL is a no-op. */
void rf_residency_snapshot_free(struct rf_residency_snapshot *s);

/*
 * Takes a snapshot of inv's file-backed page ranges into *out (initialised;
 * old content freed). Resources with file pages are those whose entry is
 * file_backed with a non-empty range in a mapping of inv. The sampler is
 * called with windows of at most RF_PAGE_WINDOW_PAGES pages, in file
 * order per mapping, at most once per (mapping, page), never for a page
 * outside every resource's range, and never when the budget is 0.
 *
 * Errors: -EINVAL (NULL inv/params/out), -ENOENT (a targeted index names
 * no entry), -EOVERFLOW (a page count sum), -ENOMEM. Sampler errors are
 * not errors of this call: they make pages unknown and are counted in
 * sampler_failures. On error *out is unchanged.
 */
int rf_residency_snapshot_take(const struct rf_inventory *inv, const struct rf_residency_params *p,
                               struct rf_residency_snapshot *out);

/*
 * floor(part * 10000 / whole) in basis points, computed without overflow;
 * 0 when whole is 0. part > whole is clamped to 10000.
 */
uint32_t rf_residency_basis_points(uint64_t part, uint64_t whole);

/* Static names: "unknown", "nonresident", "resident"; NULL outside the enum. */
const char *rf_page_state_name(enum rf_page_state s);

/* Pages counted by state (rf_page_counts_add). */
struct rf_page_counts {
    uint64_t resident_pages;    /* RF_PAGE_RESIDENT */
    uint64_t nonresident_pages; /* RF_PAGE_NONRESIDENT */
    uint64_t unknown_pages;     /* RF_PAGE_UNKNOWN, or any other value */
};

/*
 * Adds the n states (enum rf_page_state values, as the samplers write
 * them) to *c, by state: the one page-counting loop. Cannot fail.
 */
void rf_page_counts_add(struct rf_page_counts *c, const uint8_t *states, uint64_t n);

/* Static names: "none", "partial", "full", "no_pages"; NULL outside the enum. */
const char *rf_residency_sampled_name(enum rf_residency_sampled s);

#ifdef __cplusplus
}
#endif

#endif
