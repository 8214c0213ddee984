/*
 * The bounded staging controller (staging.h): orders the candidates, then
 * fills a page budget with their pages, one interval set (intervals.c) per
 * mapping holding the union selected so far.
 *
 * Expected workload: one plan before inference over an inventory of a few
 * hundred to tens of thousands of tensors in one or a few mappings. Per
 * candidate the cost is one overlap query and one add on its mapping's set
 * (O(log r + k)); the one candidate the budget runs out in walks the gaps
 * of its range once (rf_interval_set_first_end_above finds the first).
 */
#include "ramforge/core/staging.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NO_RANK RF_INVENTORY_NO_RANK /* not named by the graph order */

struct rf_staging_params rf_staging_default_params(void)
{
    struct rf_staging_params p;

    memset(&p, 0, sizeof(p));
    return p;
}

void rf_staging_plan_init(struct rf_staging_plan *plan)
{
    memset(plan, 0, sizeof(*plan));
}

void rf_staging_plan_free(struct rf_staging_plan *plan)
{
    if (!plan)
        return;
    free(plan->staged);
    free(plan->ranges);
    rf_staging_plan_init(plan);
}

/* ---- candidates -------------------------------------------------------- */

/* A candidate with its sort keys. */
struct cand {
    size_t pos;          /* position in inv->entries */
    size_t rank;         /* position in the graph order, NO_RANK when not named */
    int32_t mapping;     /* mapping index */
    uint64_t first_page; /* first page of its range */
    uint64_t offset;     /* file offset */
    uint32_t index;      /* tensor index: the final tie-break */
};

/* Graph order first (named before unnamed); then file order; then index. */
static int cand_cmp(const void *pa, const void *pb)
{
    const struct cand *a = pa, *b = pb;

    if (a->rank != b->rank)
        return a->rank < b->rank ? -1 : 1;
    if (a->mapping != b->mapping)
        return a->mapping < b->mapping ? -1 : 1;
    if (a->first_page != b->first_page)
        return a->first_page < b->first_page ? -1 : 1;
    if (a->offset != b->offset)
        return a->offset < b->offset ? -1 : 1;
    if (a->index != b->index)
        return a->index < b->index ? -1 : 1;
    return 0;
}

static bool is_candidate(const struct rf_inventory *inv, const struct rf_staging_params *p,
                         size_t i)
{
    const struct rf_inventory_entry *e = &inv->entries[i];

    return e->key.generation == inv->generation && e->file_backed &&
           e->pages.end_page > e->pages.first_page && e->access == RF_ACCESS_FILE_BACKED &&
           !(p->exclude && p->exclude[i]);
}

/*
 * Maps the graph order onto entry positions: rank[pos] is the tensor's
 * place in p->order, NO_RANK when absent. Returns 0 (*rank_out NULL
 * when the order is not valid: why in why[]), -ENOMEM.
 */
static int order_ranks(const struct rf_inventory *inv, const struct rf_staging_params *p,
                       size_t **rank_out, char *why, size_t why_size)
{
    uint32_t bad;
    bool twice;
    int rc = rf_inventory_rank(inv, p->order, p->n_order, rank_out, &bad, &twice);

    if (rc == 0 && !*rank_out)
        snprintf(why, why_size, "graph order ignored: tensor %" PRIu32 " %s", bad,
                 twice ? "named twice" : "not in inventory");
    return rc;
}

/* ---- selection --------------------------------------------------------- */

/*
 * Adds to s the lowest `take` pages of r that s does not hold yet (the
 * caller knows r has at least that many). The gaps are collected before
 * any add, since adding moves s's ranges: one before each range of s that
 * meets r, and one after the last. Errors: -ENOMEM.
 */
static int add_lowest_new_pages(struct rf_interval_set *s, struct rf_page_range r, uint64_t take)
{
    struct rf_page_range *gaps;
    size_t i0 = rf_interval_set_first_end_above(s, r.first_page), i, n_gaps = 1, bytes;
    uint64_t cur = r.first_page;
    int rc = 0;

    if (take == 0)
        return 0;
    for (i = i0; i < s->n && s->v[i].first_page < r.end_page; i++)
        n_gaps++; /* <= s->n + 1: no overflow */
    if (__builtin_mul_overflow(n_gaps, sizeof(*gaps), &bytes))
        return -ENOMEM;
    gaps = malloc(bytes);
    if (!gaps)
        return -ENOMEM;
    n_gaps = 0;
    for (i = i0; take > 0 && cur < r.end_page; i++) {
        /* ranges from i0 on end above r.first_page: the gap is [cur, stop) */
        bool meets = i < s->n && s->v[i].first_page < r.end_page;
        uint64_t stop = meets ? s->v[i].first_page : r.end_page;

        if (stop > cur) {
            uint64_t len = stop - cur < take ? stop - cur : take;

            gaps[n_gaps++] = (struct rf_page_range){cur, cur + len};
            take -= len;
        }
        if (!meets)
            break;
        cur = s->v[i].end_page;
    }
    for (i = 0; i < n_gaps && rc == 0; i++)
        rc = rf_interval_set_add(s, gaps[i]);
    free(gaps);
    return rc;
}

static int check_params(const struct rf_inventory *inv, const struct rf_staging_params *p)
{
    if (!p->order && p->n_order > 0)
        return -EINVAL;
    return rf_inventory_check(inv);
}

/* Page count -> bytes, checked. */
static int pages_to_bytes(uint64_t pages, uint64_t page_bytes, uint64_t *out)
{
    return __builtin_mul_overflow(pages, page_bytes, out) ? -EOVERFLOW : 0;
}

/*
 * Work arrays, owned by the build: cands (the ordered candidates), rank
 * (graph order positions, per entry), sel and all (per mapping: the
 * selected union, and the union of every candidate). On error *out is
 * unchanged.
 */
int rf_staging_plan_build(const struct rf_inventory *inv, const struct rf_staging_params *p,
                          struct rf_staging_plan *out)
{
    struct rf_staging_plan plan;
    struct rf_interval_set *sel = NULL, *all = NULL;
    struct cand *cands = NULL;
    size_t *rank = NULL, n_cands = 0, n_sets = 0, n_ranges = 0, i, j;
    uint64_t remaining, cand_pages = 0, overlap_pages = 0, skipped_pages = 0, union_pages = 0;
    char why_order[RF_ERR_MAX] = "";
    int rc;

    rf_staging_plan_init(&plan);
    if (!inv || !p || !out)
        return -EINVAL;
    rc = check_params(inv, p);
    if (rc < 0)
        return rc;

    plan.generation = inv->generation;
    plan.page_bytes = inv->page_bytes;
    plan.budget_bytes = p->budget_bytes;
    plan.budget_pages = inv->page_bytes ? p->budget_bytes / inv->page_bytes : 0;
    remaining = plan.budget_pages;

    if (p->order && p->n_order > 0) {
        rc = order_ranks(inv, p, &rank, why_order, sizeof(why_order));
        if (rc < 0)
            goto out;
        plan.order_used = rank != NULL;
    }

    /* Candidates, ordered. */
    if (inv->n > 0) {
        cands = calloc(inv->n, sizeof(*cands));
        if (!cands) {
            rc = -ENOMEM;
            goto out;
        }
    }
    for (i = 0; i < inv->n; i++) {
        const struct rf_inventory_entry *e = &inv->entries[i];

        if (!is_candidate(inv, p, i))
            continue;
        cands[n_cands].pos = i;
        cands[n_cands].rank = rank ? rank[i] : NO_RANK;
        cands[n_cands].mapping = e->mapping_index;
        cands[n_cands].first_page = e->pages.first_page;
        cands[n_cands].offset = e->file_offset_bytes;
        cands[n_cands].index = e->key.tensor_index;
        n_cands++;
    }
    if (n_cands > 1)
        qsort(cands, n_cands, sizeof(*cands), cand_cmp);
    plan.n_candidates = n_cands;

    /* One selected set and one candidate set per mapping. */
    n_sets = inv->n_mappings;
    if (n_sets > 0) {
        sel = calloc(n_sets, sizeof(*sel));
        all = calloc(n_sets, sizeof(*all));
        if (!sel || !all) {
            rc = -ENOMEM;
            goto out;
        }
    }
    if (n_cands > 0) {
        plan.staged = calloc(n_cands, sizeof(*plan.staged));
        if (!plan.staged) {
            rc = -ENOMEM;
            goto out;
        }
    }

    /* Select: fill the budget in candidate order. */
    for (i = 0; i < n_cands; i++) {
        const struct rf_inventory_entry *e = &inv->entries[cands[i].pos];
        struct rf_interval_set *s = &sel[e->mapping_index];
        uint64_t pages = rf_page_range_pages(e->pages);
        uint64_t covered = rf_interval_set_overlap_pages(s, e->pages);
        uint64_t fresh = pages - covered;
        uint64_t take = fresh < remaining ? fresh : remaining;

        if (__builtin_add_overflow(cand_pages, pages, &cand_pages) ||
            __builtin_add_overflow(overlap_pages, covered, &overlap_pages) ||
            __builtin_add_overflow(skipped_pages, fresh - take, &skipped_pages)) {
            rc = -EOVERFLOW;
            goto out;
        }
        rc = rf_interval_set_add(&all[e->mapping_index], e->pages);
        if (rc == 0)
            rc = take == fresh ? rf_interval_set_add(s, e->pages)
                               : add_lowest_new_pages(s, e->pages, take);
        if (rc < 0)
            goto out;
        remaining -= take;
        if (take == fresh) {
            plan.staged[plan.n_staged++] = e->key.tensor_index;
        } else if (take > 0) {
            plan.n_partial++;
            plan.has_partial = true;
            plan.partial_tensor_index = e->key.tensor_index;
        } else {
            plan.n_skipped++;
        }
    }

    /* Ranges: the sets, mapping by mapping (each already sorted and merged). */
    for (j = 0; j < n_sets; j++) {
        n_ranges += sel[j].n;
        union_pages += rf_interval_set_pages(&all[j]);         /* <= cand_pages: no overflow */
        plan.selected_pages += rf_interval_set_pages(&sel[j]); /* <= budget_pages */
    }
    if (n_ranges > 0) {
        plan.ranges = calloc(n_ranges, sizeof(*plan.ranges));
        if (!plan.ranges) {
            rc = -ENOMEM;
            goto out;
        }
    }
    for (j = 0; j < n_sets; j++) {
        for (i = 0; i < sel[j].n; i++) {
            plan.ranges[plan.n_ranges].mapping_index = (int32_t)j;
            plan.ranges[plan.n_ranges].pages = sel[j].v[i];
            plan.n_ranges++;
        }
    }
    if ((rc = pages_to_bytes(cand_pages, inv->page_bytes, &plan.candidate_bytes)) < 0 ||
        (rc = pages_to_bytes(union_pages, inv->page_bytes, &plan.candidate_union_bytes)) < 0 ||
        (rc = pages_to_bytes(plan.selected_pages, inv->page_bytes, &plan.selected_bytes)) < 0 ||
        (rc = pages_to_bytes(overlap_pages, inv->page_bytes, &plan.overlap_bytes_avoided)) < 0 ||
        (rc = pages_to_bytes(skipped_pages, inv->page_bytes, &plan.skipped_bytes)) < 0)
        goto out;

    /* The reason line. */
    {
        int len = snprintf(plan.reason, sizeof(plan.reason),
                           "staging: of %zu candidates, %zu staged whole, %zu partly, %zu skipped; "
                           "%" PRIu64 " of %" PRIu64 " budget bytes selected",
                           n_cands, plan.n_staged, plan.n_partial, plan.n_skipped,
                           plan.selected_bytes, plan.budget_bytes);
        size_t at = len < 0 ? 0 : (size_t)len;

        if (at < sizeof(plan.reason))
            snprintf(plan.reason + at, sizeof(plan.reason) - at, "; %s",
                     plan.order_used ? "graph order"
                     : why_order[0]  ? why_order
                                     : "file order");
    }

    rf_staging_plan_free(out);
    *out = plan;
    rf_staging_plan_init(&plan);
out:
    for (j = 0; j < n_sets; j++) {
        if (sel)
            rf_interval_set_free(&sel[j]);
        if (all)
            rf_interval_set_free(&all[j]);
    }
    free(all);
    free(sel);
    free(rank);
    free(cands);
    rf_staging_plan_free(&plan);
    return rc;
}
