/*
 * Tests for the bounded staging controller: hand-built inventories whose
 * plans were worked out on paper (union vs sum, the budget as a strict
 * maximum, partial staging, graph order, exclusions, which entries are
 * candidates), parameter errors, and seeded random inventories checked
 * against a naive per-page model (a bool per page: selected or not).
 *
 * The accounting identity tested on every plan:
 *   candidate_bytes == selected_bytes + overlap_bytes_avoided + skipped_bytes
 * (each candidate page is either already selected when its candidate comes,
 * newly selected, or left out by the budget), with selected_bytes <=
 * budget_bytes and selected_bytes <= candidate_union_bytes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ramforge/core/inventory.h"
#include "ramforge/core/staging.h"
#include "test_util.h"

#define PAGE 4096

/* ---- helpers ----------------------------------------------------------- */

static void check_identities(const struct rf_staging_plan *plan)
{
    assert_true(plan->selected_bytes <= plan->budget_bytes);
    assert_true(plan->selected_pages <= plan->budget_pages);
    assert_int_equal(plan->selected_bytes, plan->selected_pages * plan->page_bytes);
    assert_int_equal(plan->candidate_bytes,
                     plan->selected_bytes + plan->overlap_bytes_avoided + plan->skipped_bytes);
    assert_true(plan->selected_bytes <= plan->candidate_union_bytes);
    assert_int_equal(plan->n_staged + plan->n_partial + plan->n_skipped, plan->n_candidates);
    assert_true(plan->n_partial <= 1);
    assert_int_equal(plan->has_partial, plan->n_partial == 1);
    for (size_t i = 0; i < plan->n_ranges; i++) {
        const struct rf_file_range *r = &plan->ranges[i];

        assert_true(r->pages.end_page > r->pages.first_page);
        if (i > 0) {
            const struct rf_file_range *q = &plan->ranges[i - 1];

            assert_true(q->mapping_index <= r->mapping_index);
            if (q->mapping_index == r->mapping_index)
                assert_true(q->pages.end_page < r->pages.first_page); /* disjoint, not adjacent */
        }
    }
}

/*
 * Three tensors in one mapping sharing pages:
 *   t0 [0, 6000)      pages [0, 2)
 *   t1 [6000, 12000)  pages [1, 3)
 *   t2 [12000, 12100) pages [2, 3)
 * Sum of page ranges: 5 pages; union: 3 pages.
 */
static void build_three(struct rf_inventory *inv)
{
    struct rf_tensor_meta t[3] = {
        fixture_tensor(0, 0, 0, 6000, RF_ACCESS_FILE_BACKED),
        fixture_tensor(1, 0, 6000, 6000, RF_ACCESS_FILE_BACKED),
        fixture_tensor(2, 0, 12000, 100, RF_ACCESS_FILE_BACKED),
    };
    struct rf_mapping_meta m = fixture_mapping(0, 16 * PAGE);

    rf_inventory_init(inv);
    assert_int_equal(rf_inventory_build(t, 3, &m, 1, PAGE, 7, inv), 0);
}

static struct rf_staging_params budget(uint64_t bytes)
{
    struct rf_staging_params p = rf_staging_default_params();

    p.budget_bytes = bytes;
    return p;
}

/* ---- hand-built cases -------------------------------------------------- */

static void test_union_not_sum(void **state)
{
    struct rf_inventory inv;
    struct rf_staging_plan plan;
    struct rf_staging_params p = budget(UINT64_MAX);

    (void)state;
    build_three(&inv);
    rf_staging_plan_init(&plan);
    assert_int_equal(rf_staging_plan_build(&inv, &p, &plan), 0);
    check_identities(&plan);
    assert_int_equal(plan.generation, 7);
    assert_int_equal(plan.n_candidates, 3);
    assert_int_equal(plan.candidate_bytes, 5 * PAGE);       /* the sum */
    assert_int_equal(plan.candidate_union_bytes, 3 * PAGE); /* the union */
    assert_int_equal(plan.selected_bytes, 3 * PAGE);
    assert_int_equal(plan.overlap_bytes_avoided, 2 * PAGE); /* t1's page 1, t2's page 2 */
    assert_int_equal(plan.skipped_bytes, 0);
    assert_int_equal(plan.n_staged, 3);
    assert_int_equal(plan.n_ranges, 1);
    assert_int_equal(plan.ranges[0].mapping_index, 0);
    assert_int_equal(plan.ranges[0].pages.first_page, 0);
    assert_int_equal(plan.ranges[0].pages.end_page, 3);
    assert_false(plan.order_used);
    assert_non_null(strstr(plan.reason, "file order"));
    rf_staging_plan_free(&plan);
    rf_inventory_free(&inv);
}

/* 2.5 pages of budget: two pages, never a third. */
static void test_budget_strict_and_skips(void **state)
{
    struct rf_inventory inv;
    struct rf_staging_plan plan;
    struct rf_staging_params p = budget(2 * PAGE + PAGE / 2);

    (void)state;
    build_three(&inv);
    rf_staging_plan_init(&plan);
    assert_int_equal(rf_staging_plan_build(&inv, &p, &plan), 0);
    check_identities(&plan);
    assert_int_equal(plan.budget_pages, 2);
    assert_int_equal(plan.selected_bytes, 2 * PAGE);
    /* t0 takes pages 0-1; t1's page 1 is covered, its page 2 skipped; t2's page 2 skipped */
    assert_int_equal(plan.overlap_bytes_avoided, 1 * PAGE);
    assert_int_equal(plan.skipped_bytes, 2 * PAGE);
    assert_int_equal(plan.n_staged, 1);
    assert_int_equal(plan.staged[0], 0);
    assert_int_equal(plan.n_partial, 0);
    assert_int_equal(plan.n_skipped, 2);
    rf_staging_plan_free(&plan);

    /* budget 0 and budget below a page: nothing */
    p = budget(PAGE - 1);
    assert_int_equal(rf_staging_plan_build(&inv, &p, &plan), 0);
    check_identities(&plan);
    assert_int_equal(plan.selected_bytes, 0);
    assert_int_equal(plan.n_ranges, 0);
    assert_int_equal(plan.skipped_bytes, 5 * PAGE);
    assert_int_equal(plan.n_skipped, 3);
    rf_staging_plan_free(&plan);
    rf_inventory_free(&inv);
}

/* A candidate that does not fit is staged partially, lowest new pages first. */
static void test_partial(void **state)
{
    struct rf_tensor_meta t[2] = {
        fixture_tensor(0, 0, 0, PAGE, RF_ACCESS_FILE_BACKED),            /* [0, 1) */
        fixture_tensor(1, 0, 2 * PAGE, 4 * PAGE, RF_ACCESS_FILE_BACKED), /* [2, 6) */
    };
    struct rf_mapping_meta m = fixture_mapping(0, 16 * PAGE);
    struct rf_inventory inv;
    struct rf_staging_plan plan;
    struct rf_staging_params p = budget(3 * PAGE);

    (void)state;
    rf_inventory_init(&inv);
    assert_int_equal(rf_inventory_build(t, 2, &m, 1, PAGE, 1, &inv), 0);
    rf_staging_plan_init(&plan);
    assert_int_equal(rf_staging_plan_build(&inv, &p, &plan), 0);
    check_identities(&plan);
    assert_int_equal(plan.selected_bytes, 3 * PAGE);
    assert_int_equal(plan.n_staged, 1);
    assert_int_equal(plan.n_partial, 1);
    assert_true(plan.has_partial);
    assert_int_equal(plan.partial_tensor_index, 1);
    assert_int_equal(plan.skipped_bytes, 2 * PAGE);
    assert_int_equal(plan.n_ranges, 2);
    assert_int_equal(plan.ranges[1].pages.first_page, 2);
    assert_int_equal(plan.ranges[1].pages.end_page, 4);
    rf_staging_plan_free(&plan);
    rf_inventory_free(&inv);
}

/* Partial staging fills the gaps of a range around an earlier selection. */
static void test_partial_around_selection(void **state)
{
    struct rf_tensor_meta t[2] = {
        fixture_tensor(0, 0, 3 * PAGE, PAGE, RF_ACCESS_FILE_BACKED), /* [3, 4) */
        fixture_tensor(1, 0, 0, 8 * PAGE, RF_ACCESS_FILE_BACKED),    /* [0, 8) */
    };
    struct rf_mapping_meta m = fixture_mapping(0, 16 * PAGE);
    struct rf_inventory inv;
    struct rf_staging_plan plan;
    struct rf_staging_params p = budget(6 * PAGE);
    const uint32_t order[] = {0, 1};

    (void)state;
    p.order = order;
    p.n_order = 2;
    rf_inventory_init(&inv);
    assert_int_equal(rf_inventory_build(t, 2, &m, 1, PAGE, 1, &inv), 0);
    rf_staging_plan_init(&plan);
    assert_int_equal(rf_staging_plan_build(&inv, &p, &plan), 0);
    check_identities(&plan);
    /* t0 page 3; t1: page 3 covered, new pages 0-2 and 4-7, five fit: 0-2, 4-5 */
    assert_int_equal(plan.selected_bytes, 6 * PAGE);
    assert_int_equal(plan.overlap_bytes_avoided, PAGE);
    assert_int_equal(plan.skipped_bytes, 2 * PAGE);
    assert_int_equal(plan.n_ranges, 1);
    assert_int_equal(plan.ranges[0].pages.first_page, 0);
    assert_int_equal(plan.ranges[0].pages.end_page, 6);
    assert_int_equal(plan.partial_tensor_index, 1);
    rf_staging_plan_free(&plan);
    rf_inventory_free(&inv);
}

static void test_order_respected(void **state)
{
    struct rf_inventory inv;
    struct rf_staging_plan plan;
    struct rf_staging_params p = budget(PAGE);
    const uint32_t order[] = {2, 0};

    (void)state;
    build_three(&inv);
    rf_staging_plan_init(&plan);

    /* file order: t0's first page */
    assert_int_equal(rf_staging_plan_build(&inv, &p, &plan), 0);
    check_identities(&plan);
    assert_int_equal(plan.ranges[0].pages.first_page, 0);
    assert_int_equal(plan.partial_tensor_index, 0);
    rf_staging_plan_free(&plan);

    /* graph order: t2 (page 2) first */
    p.order = order;
    p.n_order = 2;
    assert_int_equal(rf_staging_plan_build(&inv, &p, &plan), 0);
    check_identities(&plan);
    assert_true(plan.order_used);
    assert_non_null(strstr(plan.reason, "graph order"));
    assert_int_equal(plan.n_ranges, 1);
    assert_int_equal(plan.ranges[0].pages.first_page, 2);
    assert_int_equal(plan.ranges[0].pages.end_page, 3);
    assert_int_equal(plan.n_staged, 1);
    assert_int_equal(plan.staged[0], 2);
    rf_staging_plan_free(&plan);

    /* named ones in graph order, then the unnamed one in file order */
    p.budget_bytes = UINT64_MAX;
    assert_int_equal(rf_staging_plan_build(&inv, &p, &plan), 0);
    check_identities(&plan);
    assert_int_equal(plan.n_staged, 3);
    assert_int_equal(plan.staged[0], 2);
    assert_int_equal(plan.staged[1], 0);
    assert_int_equal(plan.staged[2], 1);
    assert_int_equal(plan.overlap_bytes_avoided, 2 * PAGE); /* t1's pages 1 and 2 */
    rf_staging_plan_free(&plan);
    rf_inventory_free(&inv);
}

static void test_bad_order_ignored(void **state)
{
    struct rf_inventory inv;
    struct rf_staging_plan plan;
    struct rf_staging_params p = budget(PAGE);
    const uint32_t dup[] = {2, 2}, unknown[] = {9};

    (void)state;
    build_three(&inv);
    rf_staging_plan_init(&plan);
    p.order = dup;
    p.n_order = 2;
    assert_int_equal(rf_staging_plan_build(&inv, &p, &plan), 0);
    assert_false(plan.order_used);
    assert_non_null(strstr(plan.reason, "named twice"));
    assert_int_equal(plan.ranges[0].pages.first_page, 0); /* file order */
    rf_staging_plan_free(&plan);
    p.order = unknown;
    p.n_order = 1;
    assert_int_equal(rf_staging_plan_build(&inv, &p, &plan), 0);
    assert_false(plan.order_used);
    assert_non_null(strstr(plan.reason, "not in inventory"));
    rf_staging_plan_free(&plan);
    rf_inventory_free(&inv);
}

static void test_exclude_honoured(void **state)
{
    struct rf_inventory inv;
    struct rf_staging_plan plan;
    struct rf_staging_params p = budget(UINT64_MAX);
    const uint8_t exclude[3] = {1, 0, 0};

    (void)state;
    build_three(&inv);
    rf_staging_plan_init(&plan);
    p.exclude = exclude;
    assert_int_equal(rf_staging_plan_build(&inv, &p, &plan), 0);
    check_identities(&plan);
    assert_int_equal(plan.n_candidates, 2);
    assert_int_equal(plan.n_ranges, 1);
    assert_int_equal(plan.ranges[0].pages.first_page, 1); /* t1 and t2: [1, 3) */
    assert_int_equal(plan.ranges[0].pages.end_page, 3);
    for (size_t i = 0; i < plan.n_staged; i++)
        assert_int_not_equal(plan.staged[i], 0);
    rf_staging_plan_free(&plan);
    rf_inventory_free(&inv);
}

/* Only file-backed, non-empty, current entries the graph reads from the file. */
static void test_candidates(void **state)
{
    struct rf_tensor_meta t[7] = {
        fixture_tensor(0, 0, 0, PAGE, RF_ACCESS_FILE_BACKED),      /* candidate */
        fixture_tensor(1, 0, 1 * PAGE, PAGE, RF_ACCESS_ANONYMOUS), /* repacked: file pages unread */
        fixture_tensor(2, 0, 2 * PAGE, PAGE, RF_ACCESS_UNREFERENCED), /* never read */
        fixture_tensor(3, 0, 3 * PAGE, PAGE, RF_ACCESS_UNKNOWN),      /* not observed */
        fixture_tensor(4, -1, 4 * PAGE, PAGE, RF_ACCESS_FILE_BACKED), /* not mapped */
        fixture_tensor(5, 0, 5 * PAGE, 0, RF_ACCESS_FILE_BACKED),     /* empty */
        fixture_tensor(6, 1, 0, PAGE, RF_ACCESS_FILE_BACKED),         /* candidate, mapping 1 */
    };
    struct rf_mapping_meta m[2] = {fixture_mapping(0, 16 * PAGE), fixture_mapping(1, 16 * PAGE)};
    struct rf_inventory inv;
    struct rf_staging_plan plan;
    struct rf_staging_params p = budget(UINT64_MAX);

    (void)state;
    rf_inventory_init(&inv);
    assert_int_equal(rf_inventory_build(t, 7, m, 2, PAGE, 3, &inv), 0);
    rf_staging_plan_init(&plan);
    assert_int_equal(rf_staging_plan_build(&inv, &p, &plan), 0);
    check_identities(&plan);
    assert_int_equal(plan.n_candidates, 2);
    assert_int_equal(plan.n_ranges, 2);
    assert_int_equal(plan.ranges[0].mapping_index, 0);
    assert_int_equal(plan.ranges[0].pages.first_page, 0);
    assert_int_equal(plan.ranges[0].pages.end_page, 1);
    assert_int_equal(plan.ranges[1].mapping_index, 1);
    rf_staging_plan_free(&plan);

    /* an entry of an older generation is stale: not a candidate */
    inv.entries[0].key.generation = 2;
    assert_int_equal(rf_staging_plan_build(&inv, &p, &plan), 0);
    assert_int_equal(plan.n_candidates, 1);
    assert_int_equal(plan.ranges[0].mapping_index, 1);
    rf_staging_plan_free(&plan);
    rf_inventory_free(&inv);
}

static void test_errors(void **state)
{
    struct rf_inventory inv, empty;
    struct rf_staging_plan plan;
    struct rf_staging_params p = budget(PAGE);

    (void)state;
    build_three(&inv);
    rf_inventory_init(&empty);
    rf_staging_plan_init(&plan);
    assert_int_equal(rf_staging_plan_build(NULL, &p, &plan), -EINVAL);
    assert_int_equal(rf_staging_plan_build(&inv, NULL, &plan), -EINVAL);
    assert_int_equal(rf_staging_plan_build(&inv, &p, NULL), -EINVAL);
    p.n_order = 1;
    assert_int_equal(rf_staging_plan_build(&inv, &p, &plan), -EINVAL);
    p.n_order = 0;
    inv.entries[1].mapping_index = 5;
    assert_int_equal(rf_staging_plan_build(&inv, &p, &plan), -EINVAL);
    inv.entries[1].mapping_index = 0;
    assert_int_equal(plan.n_ranges, 0); /* unchanged on error */
    assert_int_equal(rf_staging_plan_build(&empty, &p, &plan), 0);
    assert_int_equal(plan.n_candidates, 0);
    assert_int_equal(plan.selected_bytes, 0);
    rf_staging_plan_free(&plan);
    rf_staging_plan_free(NULL);
    rf_inventory_free(&inv);
}

/* ---- random inventories against a naive per-page model ----------------- */

#define N_CASES 2000
#define MAX_M 3
#define MAX_T 40
#define N_PAGES 256

static const struct rf_inventory *sort_inv;

/* File order of entry positions: (mapping, first page, offset, index). */
static int file_order_cmp(const void *pa, const void *pb)
{
    const struct rf_inventory_entry *a = &sort_inv->entries[*(const size_t *)pa];
    const struct rf_inventory_entry *b = &sort_inv->entries[*(const size_t *)pb];

    if (a->mapping_index != b->mapping_index)
        return a->mapping_index < b->mapping_index ? -1 : 1;
    if (a->pages.first_page != b->pages.first_page)
        return a->pages.first_page < b->pages.first_page ? -1 : 1;
    if (a->file_offset_bytes != b->file_offset_bytes)
        return a->file_offset_bytes < b->file_offset_bytes ? -1 : 1;
    return a->key.tensor_index < b->key.tensor_index ? -1 : 1;
}

/*
 * Up to MAX_M mappings of N_PAGES pages, up to MAX_T tensors packed with
 * random gaps (possibly negative: overlap) and random access, some stale,
 * some excluded; a random budget (0, sub-page, around the candidates'
 * size, or unlimited) and a random graph order (sometimes invalid). The
 * naive model walks the expected candidate order page by page.
 */
static void test_random_plans(void **state)
{
    (void)state;
    rng_state = 20240611;
    for (int c = 0; c < N_CASES; c++) {
        uint64_t pb = 1ULL << rng_below(7), total = N_PAGES * pb;
        size_t n_m = 1 + (size_t)rng_below(MAX_M), n = (size_t)rng_below(MAX_T + 1), i, k, m;
        struct rf_mapping_meta maps[MAX_M];
        struct rf_tensor_meta t[MAX_T];
        uint64_t cursor[MAX_M] = {0};
        static bool want_sel[MAX_M][N_PAGES], got_sel[MAX_M][N_PAGES], want_any[MAX_M][N_PAGES];
        uint32_t order[MAX_T + 1];
        size_t n_order = 0, seq[MAX_T], n_seq = 0, rest[MAX_T], n_rest = 0;
        uint8_t exclude[MAX_T];
        bool use_order = false, order_valid = true, named[MAX_T] = {false};
        struct rf_inventory inv;
        struct rf_staging_plan plan;
        struct rf_staging_params p = rf_staging_default_params();
        uint64_t remaining, w_cand = 0, w_over = 0, w_skip = 0, w_sel = 0, w_union = 0;
        size_t w_staged = 0, w_partial = 0, w_skipped = 0;
        uint32_t w_staged_idx[MAX_T], w_partial_idx = 0;

        for (m = 0; m < n_m; m++)
            maps[m] = fixture_mapping((uint32_t)m, total);
        for (i = 0; i < n; i++) {
            uint64_t len = 1 + rng_below(6 * pb), gap, off;

            m = (size_t)rng_below(n_m);
            switch (rng_below(4)) {
            case 0: /* overlap the previous tensor's tail */
                gap = rng_below(3 * pb + 1);
                off = cursor[m] > gap ? cursor[m] - gap : 0;
                break;
            case 1:
                off = cursor[m];
                break;
            default:
                off = cursor[m] + rng_below(2 * pb);
                break;
            }
            if (rng_below(12) == 0)
                len = 0;
            if (off + len > total) {
                off = total - 1 - rng_below(pb);
                len = total - off;
            }
            cursor[m] = off + len;
            t[i] = fixture_tensor((uint32_t)i, rng_below(12) == 0 ? -1 : (int32_t)m, off, len,
                                  (enum rf_weight_access)rng_below(4));
            if (rng_below(2) == 0)
                t[i].access = RF_ACCESS_FILE_BACKED;
            exclude[i] = rng_below(8) == 0;
        }
        rf_inventory_init(&inv);
        assert_int_equal(rf_inventory_build(t, n, maps, n_m, pb, (uint64_t)c + 10, &inv), 0);
        for (i = 0; i < n; i++) {
            if (rng_below(15) == 0)
                inv.entries[i].key.generation--; /* stale */
        }

        switch (rng_below(5)) {
        case 0:
            p.budget_bytes = 0;
            break;
        case 1:
            p.budget_bytes = rng_below(pb); /* below a page */
            break;
        case 2:
            p.budget_bytes = UINT64_MAX;
            break;
        default:
            p.budget_bytes = rng_below(total * 2 + 1);
            break;
        }
        if (rng_below(4) != 0)
            p.exclude = exclude;
        if (rng_below(2)) {
            use_order = true;
            for (i = 0; i < n; i++) {
                if (rng_below(3) != 0)
                    order[n_order++] = (uint32_t)i;
            }
            for (i = n_order; i > 1; i--) {
                uint32_t tmp;

                k = (size_t)rng_below(i);
                tmp = order[i - 1];
                order[i - 1] = order[k];
                order[k] = tmp;
            }
            if (rng_below(10) == 0) { /* invalid: a duplicate or an unknown tensor */
                order_valid = false;
                order[n_order] = n_order > 0 && rng_below(2) ? order[0] : (uint32_t)(n + 3);
                n_order++;
            }
            p.order = order;
            p.n_order = n_order;
        }

        /* Expected candidate order. */
        for (i = 0; i < n; i++) {
            const struct rf_inventory_entry *e = &inv.entries[i];

            if (e->key.generation != inv.generation || !e->file_backed ||
                e->pages.end_page <= e->pages.first_page || e->access != RF_ACCESS_FILE_BACKED ||
                (p.exclude && exclude[i]))
                continue;
            rest[n_rest++] = i;
        }
        if (use_order && order_valid) {
            for (k = 0; k < n_order; k++) {
                for (i = 0; i < n_rest; i++) {
                    if (inv.entries[rest[i]].key.tensor_index == order[k]) {
                        seq[n_seq++] = rest[i];
                        named[rest[i]] = true;
                    }
                }
            }
        }
        {
            size_t unnamed[MAX_T], n_unnamed = 0;

            for (i = 0; i < n_rest; i++) {
                if (!named[rest[i]])
                    unnamed[n_unnamed++] = rest[i];
            }
            sort_inv = &inv;
            qsort(unnamed, n_unnamed, sizeof(unnamed[0]), file_order_cmp);
            for (i = 0; i < n_unnamed; i++)
                seq[n_seq++] = unnamed[i];
        }

        /* The naive model. */
        memset(want_sel, 0, sizeof(want_sel));
        memset(got_sel, 0, sizeof(got_sel));
        memset(want_any, 0, sizeof(want_any));
        remaining = p.budget_bytes / pb;
        for (k = 0; k < n_seq; k++) {
            const struct rf_inventory_entry *e = &inv.entries[seq[k]];
            uint64_t taken = 0, fresh = 0;

            for (uint64_t pg = e->pages.first_page; pg < e->pages.end_page; pg++) {
                bool *s = &want_sel[e->mapping_index][pg];

                w_cand++;
                want_any[e->mapping_index][pg] = true;
                if (*s) {
                    w_over++;
                    continue;
                }
                fresh++;
                if (remaining > 0) {
                    *s = true;
                    remaining--;
                    taken++;
                    w_sel++;
                } else {
                    w_skip++;
                }
            }
            if (taken == fresh) {
                w_staged_idx[w_staged++] = e->key.tensor_index;
            } else if (taken > 0) {
                w_partial++;
                w_partial_idx = e->key.tensor_index;
            } else {
                w_skipped++;
            }
        }
        for (m = 0; m < n_m; m++) {
            for (i = 0; i < N_PAGES; i++)
                w_union += want_any[m][i];
        }

        rf_staging_plan_init(&plan);
        assert_int_equal(rf_staging_plan_build(&inv, &p, &plan), 0);
        check_identities(&plan);
        assert_int_equal(plan.order_used, use_order && order_valid && n_order > 0);
        assert_int_equal(plan.n_candidates, n_seq);
        assert_int_equal(plan.candidate_bytes, w_cand * pb);
        assert_int_equal(plan.candidate_union_bytes, w_union * pb);
        assert_int_equal(plan.selected_bytes, w_sel * pb);
        assert_int_equal(plan.overlap_bytes_avoided, w_over * pb);
        assert_int_equal(plan.skipped_bytes, w_skip * pb);
        assert_int_equal(plan.n_staged, w_staged);
        assert_int_equal(plan.n_partial, w_partial);
        assert_int_equal(plan.n_skipped, w_skipped);
        if (w_partial)
            assert_int_equal(plan.partial_tensor_index, w_partial_idx);
        for (k = 0; k < w_staged; k++)
            assert_int_equal(plan.staged[k], w_staged_idx[k]);
        for (k = 0; k < plan.n_ranges; k++) {
            const struct rf_file_range *r = &plan.ranges[k];

            assert_true(r->mapping_index >= 0 && (size_t)r->mapping_index < n_m);
            assert_true(r->pages.end_page <= N_PAGES);
            for (uint64_t pg = r->pages.first_page; pg < r->pages.end_page; pg++)
                got_sel[r->mapping_index][pg] = true;
        }
        assert_memory_equal(got_sel, want_sel, sizeof(want_sel));
        rf_staging_plan_free(&plan);
        rf_inventory_free(&inv);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_union_not_sum),    cmocka_unit_test(test_budget_strict_and_skips),
        cmocka_unit_test(test_partial),          cmocka_unit_test(test_partial_around_selection),
        cmocka_unit_test(test_order_respected),  cmocka_unit_test(test_bad_order_ignored),
        cmocka_unit_test(test_exclude_honoured), cmocka_unit_test(test_candidates),
        cmocka_unit_test(test_errors),           cmocka_unit_test(test_random_plans),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
