/*
 * Tests for page-residency snapshots, with a fake sampler that holds the
 * "true" state of every page, counts how often each page is asked about
 * (never more than once) and logs what it answered. Hand-made cases cover
 * overlap, partial tensors, a zero budget, targeted priority, sampler
 * failure and basis points; seeded random inventories are checked against
 * a naive per-page model of the same rules.
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
#include "ramforge/core/report_json.h"
#include "ramforge/core/residency.h"
#include "test_util.h"

#define PAGE 16u /* bytes per page in these tests */
#define MAX_MAPPINGS 2
#define MAP_PAGES 600u /* pages per mapping */
#define N_CASES 400
#define FAILED 0xff /* log value: the call covering this page failed */

/* The fake world the sampler observes. */
struct world {
    uint8_t truth[MAX_MAPPINGS][MAP_PAGES];  /* RF_PAGE_RESIDENT / NONRESIDENT */
    uint32_t asked[MAX_MAPPINGS][MAP_PAGES]; /* times each page was asked about */
    uint8_t log[MAX_MAPPINGS][MAP_PAGES];    /* what the sampler answered (FAILED) */
    uint64_t calls;
    uint64_t max_window;
    int fail_every;         /* fail every k-th call (0: never) */
    int fail_rc;            /* error returned by a failing call */
    bool write_garbage;     /* failing calls still write "resident" */
    uint8_t bad_value_page; /* answer 7 (not a state) for pages == this mod 13, if set */
    bool bad_values;
    uint64_t order[64]; /* first_page of the first calls, for order checks */
};

static int fake_sample(void *ud, int32_t mi, uint64_t first, uint64_t n, uint8_t *states)
{
    struct world *w = ud;
    assert_true(mi >= 0 && mi < MAX_MAPPINGS);
    assert_true(n >= 1 && n <= RF_PAGE_WINDOW_PAGES);
    assert_true(first + n <= MAP_PAGES);
    if (w->calls < 64)
        w->order[w->calls] = first;
    w->calls++;
    if (n > w->max_window)
        w->max_window = n;
    bool fail = w->fail_every && w->calls % (uint64_t)w->fail_every == 0;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t p = first + i;
        w->asked[mi][p]++;
        if (fail) {
            w->log[mi][p] = FAILED;
            states[i] = w->write_garbage ? RF_PAGE_RESIDENT : RF_PAGE_UNKNOWN;
        } else if (w->bad_values && p % 13 == w->bad_value_page) {
            w->log[mi][p] = RF_PAGE_UNKNOWN;
            states[i] = 7;
        } else {
            w->log[mi][p] = w->truth[mi][p];
            states[i] = w->truth[mi][p];
        }
    }
    return fail ? w->fail_rc : 0;
}

static struct world *new_world(void)
{
    struct world *w = calloc(1, sizeof(*w));
    assert_non_null(w);
    for (int m = 0; m < MAX_MAPPINGS; m++)
        for (uint32_t p = 0; p < MAP_PAGES; p++)
            w->truth[m][p] = (p % 3 == 0) ? RF_PAGE_NONRESIDENT : RF_PAGE_RESIDENT;
    w->fail_rc = -EIO;
    return w;
}

/* A tensor [first_page, end_page) of mapping mi (-1: not file-backed). */
struct spec {
    int32_t mi;
    uint64_t first_byte;
    uint64_t bytes;
};

static void build(struct rf_inventory *inv, const struct spec *sp, size_t n)
{
    struct rf_tensor_meta *t = calloc(n ? n : 1, sizeof(*t));
    struct rf_mapping_meta maps[MAX_MAPPINGS];
    assert_non_null(t);
    memset(maps, 0, sizeof(maps));
    for (int m = 0; m < MAX_MAPPINGS; m++) {
        maps[m].index = (uint32_t)m;
        snprintf(maps[m].path, sizeof(maps[m].path), "/m%d", m);
        maps[m].file_size_bytes = (uint64_t)MAP_PAGES * PAGE;
        maps[m].validated = true;
        maps[m].map_offset_bytes = 0;
        maps[m].map_length_bytes = (uint64_t)MAP_PAGES * PAGE;
        maps[m].inode = 100 + (uint64_t)m;
    }
    for (size_t i = 0; i < n; i++) {
        t[i].index = (uint32_t)i;
        snprintf(t[i].name, sizeof(t[i].name), "t%zu", i);
        snprintf(t[i].type_name, sizeof(t[i].type_name), "f32");
        t[i].mapping_index = sp[i].mi;
        t[i].file_offset_bytes = sp[i].first_byte;
        t[i].logical_bytes = sp[i].bytes;
        t[i].access = RF_ACCESS_FILE_BACKED;
    }
    rf_inventory_init(inv);
    assert_int_equal(rf_inventory_build(t, n, maps, MAX_MAPPINGS, PAGE, 7, inv), 0);
    free(t);
}

static void take(const struct rf_inventory *inv, struct world *w, uint64_t budget,
                 const uint32_t *targets, size_t n_targets, struct rf_residency_snapshot *s)
{
    struct rf_residency_params p = rf_residency_default_params();
    p.page_budget_pages = budget;
    p.targeted = targets;
    p.n_targeted = n_targets;
    p.sample = fake_sample;
    p.sample_ud = w;
    p.source = "mincore";
    rf_residency_snapshot_init(s);
    assert_int_equal(rf_residency_snapshot_take(inv, &p, s), 0);
}

static void assert_asked_at_most_once(const struct world *w)
{
    for (int m = 0; m < MAX_MAPPINGS; m++)
        for (uint32_t p = 0; p < MAP_PAGES; p++)
            assert_true(w->asked[m][p] <= 1);
}

/* Three tensors sharing boundary pages: every page asked once, states reused. */
static void test_overlap_counted_once(void **state)
{
    (void)state;
    /* pages [0,3), [2,6), [5,9) (bytes rounded outward), and a copy of the middle one */
    const struct spec sp[] = {
        {0, 0, 3 * PAGE - 4},
        {0, 2 * PAGE + 4, 4 * PAGE - 8},
        {0, 5 * PAGE, 4 * PAGE},
        {0, 2 * PAGE + 4, 4 * PAGE - 8},
    };
    struct rf_inventory inv;
    struct rf_residency_snapshot s;
    struct world *w = new_world();

    build(&inv, sp, 4);
    take(&inv, w, 1000, NULL, 0, &s);
    assert_asked_at_most_once(w);
    assert_int_equal(s.coverage.budget_used_pages, 9); /* the union, not 3 + 4 + 4 + 4 */
    assert_int_equal(s.coverage.general.available_pages, 9);
    assert_int_equal(s.coverage.general.sampled_pages, 9);
    assert_int_equal(s.coverage.general.coverage_bp, 10000);
    assert_false(s.coverage.budget_exhausted);
    assert_true(s.coverage.sampling_complete);
    assert_int_equal(s.n, 4);
    for (size_t i = 0; i < s.n; i++) {
        const struct rf_residency_resource *r = &s.resources[i];
        uint64_t res = 0, non = 0;
        for (uint64_t p = r->pages.first_page; p < r->pages.end_page; p++)
            w->truth[0][p] == RF_PAGE_RESIDENT ? res++ : non++;
        assert_int_equal(r->sampled, RF_SAMPLED_FULL);
        assert_int_equal(r->inspected_pages, rf_page_range_pages(r->pages));
        assert_int_equal(r->resident_pages, res);
        assert_int_equal(r->nonresident_pages, non);
        assert_int_equal(r->unknown_pages, 0);
        assert_false(r->targeted);
    }
    /* nobody was targeted: the targeted population is empty, with no coverage figure */
    assert_int_equal(s.coverage.targeted.available_pages, 0);
    assert_false(s.coverage.targeted.has_coverage);
    assert_string_equal(s.source, "mincore");
    rf_residency_snapshot_free(&s);
    rf_inventory_free(&inv);
    free(w);
}

/* A tensor larger than the budget is partial; the rest is unknown, not nonresident. */
static void test_larger_than_budget_is_partial(void **state)
{
    (void)state;
    const struct spec sp[] = {{0, 0, 100 * PAGE}};
    struct rf_inventory inv;
    struct rf_residency_snapshot s;
    struct world *w = new_world();

    build(&inv, sp, 1);
    take(&inv, w, 40, NULL, 0, &s);
    const struct rf_residency_resource *r = &s.resources[0];
    assert_int_equal(r->inspected_pages, 40);
    assert_int_equal(r->resident_pages + r->nonresident_pages, 40);
    assert_int_equal(r->unknown_pages, 60);
    assert_int_equal(r->sampled, RF_SAMPLED_PARTIAL);
    assert_true(s.coverage.budget_exhausted);
    assert_false(s.coverage.sampling_complete);
    assert_int_equal(s.coverage.budget_used_pages, 40);
    assert_int_equal(s.coverage.general.coverage_bp, 4000);
    assert_int_equal(s.coverage.general.unknown_pages, 60);
    for (uint32_t p = 40; p < 100; p++)
        assert_int_equal(w->asked[0][p], 0);
    rf_residency_snapshot_free(&s);
    rf_inventory_free(&inv);
    free(w);
}

/* Budget 0: the sampler is never called and every page is unknown. */
static void test_budget_zero_all_unknown(void **state)
{
    (void)state;
    const struct spec sp[] = {{0, 0, 10 * PAGE}, {1, 0, 5 * PAGE}, {-1, 0, 8}};
    const uint32_t targets[] = {1};
    struct rf_inventory inv;
    struct rf_residency_snapshot s;
    struct world *w = new_world();

    build(&inv, sp, 3);
    take(&inv, w, 0, targets, 1, &s);
    assert_int_equal(w->calls, 0);
    assert_int_equal(s.sampler_calls, 0);
    for (size_t i = 0; i < 2; i++) {
        assert_int_equal(s.resources[i].sampled, RF_SAMPLED_NONE);
        assert_int_equal(s.resources[i].inspected_pages, 0);
        assert_int_equal(s.resources[i].resident_pages, 0);
        assert_int_equal(s.resources[i].nonresident_pages, 0);
        assert_int_equal(s.resources[i].unknown_pages, rf_page_range_pages(s.resources[i].pages));
    }
    assert_int_equal(s.resources[2].sampled, RF_SAMPLED_NO_PAGES);
    assert_int_equal(s.coverage.targeted.available_pages, 5);
    assert_int_equal(s.coverage.targeted.unknown_pages, 5);
    assert_int_equal(s.coverage.targeted.coverage_bp, 0);
    assert_true(s.coverage.targeted.has_coverage);
    assert_int_equal(s.coverage.general.available_pages, 10);
    assert_int_equal(s.coverage.general.unknown_pages, 10);
    assert_int_equal(s.coverage.general.coverage_bp, 0);
    assert_int_equal(s.coverage.selected_resources, 1);
    assert_int_equal(s.coverage.selected_not_observed, 1);
    assert_true(s.coverage.budget_exhausted);
    assert_false(s.coverage.sampling_complete);
    assert_int_equal(s.coverage.page_budget_pages, 0);
    rf_residency_snapshot_free(&s);
    rf_inventory_free(&inv);
    free(w);
}

/* Targeted resources get the budget first, in inventory order, whatever order they are given in. */
static void test_targeted_first(void **state)
{
    (void)state;
    const struct spec sp[] = {
        {0, 0, 10 * PAGE},         /* 0: targeted */
        {0, 10 * PAGE, 10 * PAGE}, /* 1: general, first in inventory order */
        {0, 20 * PAGE, 10 * PAGE}, /* 2: targeted */
        {0, 30 * PAGE, 10 * PAGE}, /* 3: general */
    };
    const uint32_t targets[] = {2, 0, 2}; /* any order, duplicates allowed */
    struct rf_inventory inv;
    struct rf_residency_snapshot s;
    struct world *w = new_world();

    build(&inv, sp, 4);
    take(&inv, w, 25, targets, 3, &s);
    assert_int_equal(s.resources[0].sampled, RF_SAMPLED_FULL);
    assert_int_equal(s.resources[2].sampled, RF_SAMPLED_FULL);
    assert_int_equal(s.resources[1].sampled, RF_SAMPLED_PARTIAL); /* the 5 pages left */
    assert_int_equal(s.resources[1].inspected_pages, 5);
    assert_int_equal(s.resources[3].sampled, RF_SAMPLED_NONE);
    assert_true(s.resources[0].targeted && s.resources[2].targeted);
    assert_false(s.resources[1].targeted || s.resources[3].targeted);
    assert_int_equal(s.coverage.selected_resources, 2);
    assert_int_equal(s.coverage.selected_fully_observed, 2);
    assert_int_equal(s.coverage.selected_partially_observed, 0);
    assert_int_equal(s.coverage.selected_not_observed, 0);
    /* separate denominators */
    assert_int_equal(s.coverage.targeted.available_pages, 20);
    assert_int_equal(s.coverage.targeted.sampled_pages, 20);
    assert_int_equal(s.coverage.targeted.coverage_bp, 10000);
    assert_int_equal(s.coverage.general.available_pages, 20);
    assert_int_equal(s.coverage.general.sampled_pages, 5);
    assert_int_equal(s.coverage.general.coverage_bp, 2500);
    /* the sampler still walks the file in order, adjacent chosen pages in one call:
       [0,15) then [20,30) */
    assert_int_equal(w->calls, 2);
    assert_int_equal(w->order[0], 0);
    assert_int_equal(w->order[1], 20);
    assert_asked_at_most_once(w);
    rf_residency_snapshot_free(&s);

    /* a targeted tensor bigger than the budget is explicitly partial */
    memset(w->asked, 0, sizeof(w->asked));
    take(&inv, w, 4, targets, 1, &s);
    assert_int_equal(s.resources[2].sampled, RF_SAMPLED_PARTIAL);
    assert_int_equal(s.coverage.selected_partially_observed, 1);
    assert_int_equal(s.coverage.targeted.coverage_bp, 4000);
    assert_int_equal(s.resources[0].sampled, RF_SAMPLED_NONE);
    rf_residency_snapshot_free(&s);
    rf_inventory_free(&inv);
    free(w);
}

/* A failing call makes its pages unknown, whatever it wrote; other calls count. */
static void test_sampler_failure_unknown(void **state)
{
    (void)state;
    /* three disjoint chosen ranges: one sampler call each */
    const struct spec sp[] = {{0, 0, 10 * PAGE}, {0, 100 * PAGE, 10 * PAGE}, {1, 0, 10 * PAGE}};
    struct rf_inventory inv;
    struct rf_residency_snapshot s;
    struct world *w = new_world();

    w->fail_every = 2; /* the second call fails */
    w->write_garbage = true;
    build(&inv, sp, 3);
    take(&inv, w, 1000, NULL, 0, &s);
    assert_int_equal(s.sampler_calls, 3);
    assert_int_equal(s.sampler_failures, 1);
    assert_int_equal(s.first_sampler_error, -EIO);
    assert_int_equal(s.resources[0].sampled, RF_SAMPLED_FULL);
    assert_int_equal(s.resources[1].sampled, RF_SAMPLED_NONE);
    assert_int_equal(s.resources[1].inspected_pages, 10);
    assert_int_equal(s.resources[1].resident_pages, 0);
    assert_int_equal(s.resources[1].unknown_pages, 10);
    assert_int_equal(s.resources[2].sampled, RF_SAMPLED_FULL);
    assert_false(s.coverage.sampling_complete);
    assert_int_equal(s.coverage.general.sampled_pages, 30);
    assert_int_equal(s.coverage.general.unknown_pages, 10);
    assert_int_equal(s.coverage.general.coverage_bp, 6666);
    rf_residency_snapshot_free(&s);

    /* values outside the enum are unknown */
    memset(w->asked, 0, sizeof(w->asked));
    w->fail_every = 0;
    w->bad_values = true;
    w->bad_value_page = 1;
    take(&inv, w, 1000, NULL, 0, &s);
    assert_int_equal(s.resources[0].unknown_pages, 1); /* page 1 */
    assert_int_equal(s.resources[0].sampled, RF_SAMPLED_PARTIAL);
    rf_residency_snapshot_free(&s);
    rf_inventory_free(&inv);
    free(w);
}

/* Without a sampler nothing is asked and every page is unknown. */
static void test_no_sampler(void **state)
{
    (void)state;
    struct rf_tensor_meta t = {.index = 0,
                               .name = "big",
                               .type_name = "f32",
                               .mapping_index = 0,
                               .file_offset_bytes = 0,
                               .logical_bytes = 10000ull * 4096,
                               .access = RF_ACCESS_FILE_BACKED};
    struct rf_mapping_meta m = {.index = 0,
                                .path = "/big",
                                .file_size_bytes = 10000ull * 4096,
                                .validated = true,
                                .map_length_bytes = 10000ull * 4096};
    struct rf_inventory inv;
    struct rf_residency_snapshot s;

    rf_inventory_init(&inv);
    assert_int_equal(rf_inventory_build(&t, 1, &m, 1, 4096, 1, &inv), 0);
    struct rf_residency_params p = rf_residency_default_params();
    rf_residency_snapshot_init(&s);
    assert_int_equal(rf_residency_snapshot_take(&inv, &p, &s), 0);
    assert_string_equal(s.source, "unknown: no sampler");
    assert_int_equal(s.resources[0].unknown_pages, 10000);
    assert_false(s.coverage.budget_exhausted); /* nothing was asked: not a budget matter */
    rf_residency_snapshot_free(&s);
    rf_inventory_free(&inv);
}

/* A counting sampler (mapping 0, all resident): windows are at most RF_PAGE_WINDOW_PAGES. */
struct window_log {
    uint64_t calls, max, pages;
};

static int window_sampler(void *ud, int32_t mi, uint64_t first, uint64_t n, uint8_t *st)
{
    struct window_log *l = ud;
    (void)mi;
    (void)first;
    l->calls++;
    l->pages += n;
    if (n > l->max)
        l->max = n;
    memset(st, RF_PAGE_RESIDENT, (size_t)n);
    return 0;
}

static void test_window_calls(void **state)
{
    (void)state;
    struct rf_tensor_meta t = {.index = 0,
                               .name = "big",
                               .type_name = "f32",
                               .mapping_index = 0,
                               .file_offset_bytes = 0,
                               .logical_bytes = 10000ull * 4096,
                               .access = RF_ACCESS_FILE_BACKED};
    struct rf_mapping_meta m = {.index = 0,
                                .path = "/big",
                                .file_size_bytes = 10000ull * 4096,
                                .validated = true,
                                .map_length_bytes = 10000ull * 4096};
    struct rf_inventory inv;
    struct rf_residency_snapshot s;
    struct window_log l = {0, 0, 0};

    rf_inventory_init(&inv);
    assert_int_equal(rf_inventory_build(&t, 1, &m, 1, 4096, 1, &inv), 0);
    struct rf_residency_params p = rf_residency_default_params();
    p.sample = window_sampler;
    p.sample_ud = &l;
    rf_residency_snapshot_init(&s);
    assert_int_equal(rf_residency_snapshot_take(&inv, &p, &s), 0);
    assert_int_equal(l.calls, 3); /* 4096 + 4096 + 1808 */
    assert_int_equal(l.max, RF_PAGE_WINDOW_PAGES);
    assert_int_equal(l.pages, 10000);
    assert_int_equal(s.resources[0].resident_pages, 10000);
    assert_string_equal(s.source, "unspecified");
    rf_residency_snapshot_free(&s);
    rf_inventory_free(&inv);
}

static void test_unknown_target(void **state)
{
    (void)state;
    const struct spec sp[] = {{0, 0, PAGE}};
    const uint32_t targets[] = {5};
    struct rf_inventory inv;
    struct rf_residency_snapshot s;
    struct world *w = new_world();

    build(&inv, sp, 1);
    struct rf_residency_params p = rf_residency_default_params();
    p.targeted = targets;
    p.n_targeted = 1;
    p.sample = fake_sample;
    p.sample_ud = w;
    rf_residency_snapshot_init(&s);
    s.n = 42; /* unchanged on error */
    assert_int_equal(rf_residency_snapshot_take(&inv, &p, &s), -ENOENT);
    assert_int_equal(s.n, 42);
    assert_int_equal(w->calls, 0);
    assert_int_equal(rf_residency_snapshot_take(NULL, &p, &s), -EINVAL);
    assert_int_equal(rf_residency_snapshot_take(&inv, NULL, &s), -EINVAL);
    assert_int_equal(rf_residency_snapshot_take(&inv, &p, NULL), -EINVAL);
    rf_inventory_free(&inv);
    free(w);
}

static void test_basis_points(void **state)
{
    (void)state;
    assert_int_equal(rf_residency_basis_points(0, 0), 0);
    assert_int_equal(rf_residency_basis_points(5, 0), 0);
    assert_int_equal(rf_residency_basis_points(0, 7), 0);
    assert_int_equal(rf_residency_basis_points(1, 3), 3333);
    assert_int_equal(rf_residency_basis_points(2, 3), 6666); /* rounded down */
    assert_int_equal(rf_residency_basis_points(9999, 10000), 9999);
    assert_int_equal(rf_residency_basis_points(99999, 100000), 9999); /* never 10000 early */
    assert_int_equal(rf_residency_basis_points(1, 10001), 0);
    assert_int_equal(rf_residency_basis_points(7, 7), 10000);
    assert_int_equal(rf_residency_basis_points(10, 5), 10000);
    /* part * 10000 overflows 64 bits here */
    assert_int_equal(rf_residency_basis_points(UINT64_MAX - 1, UINT64_MAX), 9999);
    assert_int_equal(rf_residency_basis_points(UINT64_MAX / 2, UINT64_MAX), 4999);
    assert_int_equal(rf_residency_basis_points(UINT64_MAX, UINT64_MAX), 10000);
    assert_string_equal(rf_page_state_name(RF_PAGE_RESIDENT), "resident");
    assert_string_equal(rf_page_state_name(RF_PAGE_NONRESIDENT), "nonresident");
    assert_string_equal(rf_page_state_name(RF_PAGE_UNKNOWN), "unknown");
    assert_null(rf_page_state_name((enum rf_page_state)9));
    assert_string_equal(rf_residency_sampled_name(RF_SAMPLED_PARTIAL), "partial");
    assert_null(rf_residency_sampled_name((enum rf_residency_sampled)9));
}

static void test_json(void **state)
{
    (void)state;
    const struct spec sp[] = {{0, 0, 10 * PAGE}, {-1, 0, 4}};
    struct rf_inventory inv;
    struct rf_residency_snapshot s;
    struct world *w = new_world();
    json_t *doc;

    build(&inv, sp, 2);
    take(&inv, w, 4, NULL, 0, &s);
    assert_int_equal(rf_residency_snapshot_to_json(&s, true, &doc), 0);
    json_t *cov = json_object_get(doc, "coverage");
    assert_true(json_is_null(json_object_get(json_object_get(cov, "targeted"), "coverage_bp")));
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(cov, "general"), "coverage_bp")), 4000);
    json_t *res = json_object_get(doc, "resources");
    assert_int_equal(json_array_size(res), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(res, 0), "sampled")),
                        "partial");
    assert_true(json_is_null(json_object_get(json_array_get(res, 1), "mapping_index")));
    assert_string_equal(json_string_value(json_object_get(doc, "source")), "mincore");
    json_decref(doc);
    rf_residency_snapshot_free(&s);
    rf_inventory_free(&inv);
    free(w);
}

/* --- random cases against a naive per-page model --- */

static void test_random_against_naive(void **state)
{
    (void)state;
    rng_state = 0x5eed5eed;
    for (int c = 0; c < N_CASES; c++) {
        size_t n = 1 + (size_t)rng_below(24);
        struct spec sp[24];
        uint32_t targets[24];
        size_t n_targets = 0;
        bool is_target[24] = {false};
        struct world *w = new_world();
        struct rf_inventory inv;
        struct rf_residency_snapshot s;

        for (int m = 0; m < MAX_MAPPINGS; m++)
            for (uint32_t p = 0; p < MAP_PAGES; p++)
                w->truth[m][p] = rng_below(2) ? RF_PAGE_RESIDENT : RF_PAGE_NONRESIDENT;
        w->fail_every = rng_below(3) == 0 ? 2 + (int)rng_below(4) : 0;
        w->write_garbage = rng_below(2);
        for (size_t i = 0; i < n; i++) {
            uint64_t lim = (uint64_t)MAP_PAGES * PAGE;
            sp[i].mi = rng_below(8) == 0 ? -1 : (int32_t)rng_below(MAX_MAPPINGS);
            sp[i].first_byte = rng_below(lim);
            uint64_t len = rng_below(4) == 0 ? rng_below(lim / 2) : rng_below(12 * PAGE);
            if (sp[i].first_byte + len > lim)
                len = lim - sp[i].first_byte;
            sp[i].bytes = len;
            if (rng_below(3) == 0) {
                targets[n_targets++] = (uint32_t)i;
                is_target[i] = true;
            }
        }
        uint64_t budget = rng_below(4) == 0 ? 0 : rng_below(400);
        build(&inv, sp, n);
        take(&inv, w, budget, targets, n_targets, &s);
        assert_asked_at_most_once(w);

        /* naive: choose pages per (mapping, page) in priority order */
        static bool chosen[MAX_MAPPINGS][MAP_PAGES], in_all[MAX_MAPPINGS][MAP_PAGES],
            in_t[MAX_MAPPINGS][MAP_PAGES];
        memset(chosen, 0, sizeof(chosen));
        memset(in_all, 0, sizeof(in_all));
        memset(in_t, 0, sizeof(in_t));
        uint64_t left = budget;
        bool exhausted = false;
        for (int pass = 0; pass < 2; pass++)
            for (size_t i = 0; i < n; i++) {
                const struct rf_inventory_entry *e = &inv.entries[i];
                if (is_target[i] != (pass == 0) || !e->file_backed)
                    continue;
                for (uint64_t p = e->pages.first_page; p < e->pages.end_page; p++) {
                    in_all[e->mapping_index][p] = true;
                    if (is_target[i])
                        in_t[e->mapping_index][p] = true;
                    if (chosen[e->mapping_index][p])
                        continue;
                    if (left == 0) {
                        exhausted = true;
                        continue;
                    }
                    chosen[e->mapping_index][p] = true;
                    left--;
                }
            }
        /* the sampler was asked about exactly the chosen pages */
        uint64_t used = 0;
        for (int m = 0; m < MAX_MAPPINGS; m++)
            for (uint32_t p = 0; p < MAP_PAGES; p++) {
                assert_int_equal(w->asked[m][p], chosen[m][p] ? 1 : 0);
                used += chosen[m][p];
            }
        assert_int_equal(s.coverage.budget_used_pages, used);
        assert_int_equal(s.coverage.budget_exhausted, exhausted);

        /* the state of a page: what the sampler answered, if it was asked and did not fail */
#define KNOWN_STATE(m, p) (chosen[m][p] && w->log[m][p] != FAILED ? w->log[m][p] : RF_PAGE_UNKNOWN)
        uint64_t sel_full = 0, sel_part = 0, sel_none = 0;
        for (size_t i = 0; i < n; i++) {
            const struct rf_inventory_entry *e = &inv.entries[i];
            const struct rf_residency_resource *r = &s.resources[i];
            assert_int_equal(r->targeted, is_target[i]);
            if (!e->file_backed || rf_page_range_pages(e->pages) == 0) {
                assert_int_equal(r->sampled, RF_SAMPLED_NO_PAGES);
                assert_int_equal(r->mapping_index, -1);
                if (is_target[i])
                    sel_none++;
                continue;
            }
            uint64_t insp = 0, res = 0, non = 0, unk = 0;
            for (uint64_t p = e->pages.first_page; p < e->pages.end_page; p++) {
                int m = e->mapping_index;
                insp += chosen[m][p];
                uint8_t st = KNOWN_STATE(m, p);
                st == RF_PAGE_RESIDENT ? res++ : st == RF_PAGE_NONRESIDENT ? non++ : unk++;
            }
            assert_int_equal(r->inspected_pages, insp);
            assert_int_equal(r->resident_pages, res);
            assert_int_equal(r->nonresident_pages, non);
            assert_int_equal(r->unknown_pages, unk);
            enum rf_residency_sampled want = res + non == 0 ? RF_SAMPLED_NONE
                                             : unk == 0     ? RF_SAMPLED_FULL
                                                            : RF_SAMPLED_PARTIAL;
            assert_int_equal(r->sampled, want);
            if (is_target[i])
                want == RF_SAMPLED_FULL      ? sel_full++
                : want == RF_SAMPLED_PARTIAL ? sel_part++
                                             : sel_none++;
        }
        assert_int_equal(s.coverage.selected_fully_observed, sel_full);
        assert_int_equal(s.coverage.selected_partially_observed, sel_part);
        assert_int_equal(s.coverage.selected_not_observed, sel_none);

        /* populations: targeted pages, and every other page of a resource */
        struct rf_residency_population pt = {0}, pg = {0};
        for (int m = 0; m < MAX_MAPPINGS; m++)
            for (uint32_t p = 0; p < MAP_PAGES; p++) {
                if (!in_all[m][p])
                    continue;
                struct rf_residency_population *pop = in_t[m][p] ? &pt : &pg;
                uint8_t st = KNOWN_STATE(m, p);
                pop->available_pages++;
                pop->sampled_pages += chosen[m][p];
                pop->resident_pages += st == RF_PAGE_RESIDENT;
                pop->nonresident_pages += st == RF_PAGE_NONRESIDENT;
                pop->unknown_pages += st == RF_PAGE_UNKNOWN;
            }
        const struct rf_residency_population *got[2] = {&s.coverage.targeted, &s.coverage.general};
        const struct rf_residency_population *exp[2] = {&pt, &pg};
        for (int k = 0; k < 2; k++) {
            assert_int_equal(got[k]->available_pages, exp[k]->available_pages);
            assert_int_equal(got[k]->sampled_pages, exp[k]->sampled_pages);
            assert_int_equal(got[k]->resident_pages, exp[k]->resident_pages);
            assert_int_equal(got[k]->nonresident_pages, exp[k]->nonresident_pages);
            assert_int_equal(got[k]->unknown_pages, exp[k]->unknown_pages);
            assert_int_equal(got[k]->has_coverage, exp[k]->available_pages > 0);
            uint64_t known = exp[k]->resident_pages + exp[k]->nonresident_pages;
            uint64_t bp = exp[k]->available_pages ? known * 10000 / exp[k]->available_pages : 0;
            assert_int_equal(got[k]->coverage_bp, bp);
        }
        assert_int_equal(s.coverage.sampling_complete,
                         pt.unknown_pages == 0 && pg.unknown_pages == 0);
#undef KNOWN_STATE
        rf_residency_snapshot_free(&s);
        rf_inventory_free(&inv);
        free(w);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_overlap_counted_once),
        cmocka_unit_test(test_larger_than_budget_is_partial),
        cmocka_unit_test(test_budget_zero_all_unknown),
        cmocka_unit_test(test_targeted_first),
        cmocka_unit_test(test_sampler_failure_unknown),
        cmocka_unit_test(test_no_sampler),
        cmocka_unit_test(test_window_calls),
        cmocka_unit_test(test_unknown_target),
        cmocka_unit_test(test_basis_points),
        cmocka_unit_test(test_json),
        cmocka_unit_test(test_random_against_naive),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
