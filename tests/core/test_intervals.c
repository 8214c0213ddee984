/*
 * Tests for page ranges and interval sets, checked against a naive model: a
 * per-byte bool array for rounding and a per-page bool array (or counter)
 * for sets, over many seeded random cases in pages [0, 200).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "ramforge/core/intervals.h"
#include "test_util.h"

#define N_CASES 2000
#define N_PAGES 200 /* the model's universe: pages [0, N_PAGES) */
#define MAX_PAGE_BYTES 64
#define N_BYTES (N_PAGES * MAX_PAGE_BYTES)

static struct rf_page_range random_range(void)
{
    struct rf_page_range r;
    uint64_t a = rng_below(N_PAGES), len;

    /* Mostly short ranges so they collide, sometimes long, sometimes empty. */
    switch (rng_below(4)) {
    case 0:
        len = 0;
        break;
    case 1:
        len = rng_below(N_PAGES - a + 1);
        break;
    default:
        len = rng_below(8);
        if (a + len > N_PAGES)
            len = N_PAGES - a;
        break;
    }
    r.first_page = a;
    r.end_page = a + len;
    return r;
}

/* The set must be sorted, disjoint, non-adjacent and equal the runs of model[]. */
static void assert_set_equals_model(const struct rf_interval_set *s, const bool *model,
                                    size_t n_pages)
{
    size_t p = 0, k = 0;

    while (p < n_pages) {
        size_t start;

        if (!model[p]) {
            p++;
            continue;
        }
        start = p;
        while (p < n_pages && model[p])
            p++;
        assert_true(k < s->n);
        assert_int_equal(s->v[k].first_page, start);
        assert_int_equal(s->v[k].end_page, p);
        k++;
    }
    assert_int_equal(s->n, k);
}

static void test_outward_inward_random(void **state)
{
    static bool in_range[N_BYTES];
    int c;

    (void)state;
    rng_state = 1;
    for (c = 0; c < N_CASES; c++) {
        uint64_t pb = 1ULL << rng_below(7); /* 1 .. 64 */
        uint64_t total = N_PAGES * pb;
        uint64_t off = rng_below(total), len = rng_below(4) == 0 ? 0 : rng_below(total - off + 1);
        struct rf_page_range out, in;
        int64_t any_first = -1, any_last = -1, all_first = -1, all_last = -1;
        uint64_t p, b;

        memset(in_range, 0, sizeof(in_range));
        for (b = off; b < off + len; b++)
            in_range[b] = true;
        for (p = 0; p < N_PAGES; p++) {
            bool any = false, all = true;

            for (b = p * pb; b < (p + 1) * pb; b++) {
                any |= in_range[b];
                all &= in_range[b];
            }
            if (any) {
                if (any_first < 0)
                    any_first = (int64_t)p;
                any_last = (int64_t)p;
            }
            if (all) {
                if (all_first < 0)
                    all_first = (int64_t)p;
                all_last = (int64_t)p;
            }
        }

        assert_int_equal(rf_page_range_outward(off, len, pb, &out), 0);
        assert_int_equal(rf_page_range_inward(off, len, pb, &in), 0);
        if (any_first < 0) {
            /* Nothing touched: an empty range at the page holding byte off. */
            uint64_t floor_page = 0;

            while ((floor_page + 1) * pb <= off)
                floor_page++;
            assert_int_equal(len, 0);
            assert_int_equal(out.first_page, floor_page);
            assert_int_equal(out.end_page, floor_page);
        } else {
            assert_int_equal(out.first_page, (uint64_t)any_first);
            assert_int_equal(out.end_page, (uint64_t)any_last + 1);
        }
        if (all_first < 0) {
            assert_int_equal(rf_page_range_pages(in), 0);
            assert_true(in.first_page == in.end_page);
        } else {
            assert_int_equal(in.first_page, (uint64_t)all_first);
            assert_int_equal(in.end_page, (uint64_t)all_last + 1);
        }
    }
}

static void test_range_edges(void **state)
{
    struct rf_page_range r;

    (void)state;
    /* len 0 */
    assert_int_equal(rf_page_range_outward(5000, 0, 4096, &r), 0);
    assert_int_equal(r.first_page, 1);
    assert_int_equal(r.end_page, 1);
    assert_int_equal(rf_page_range_inward(5000, 0, 4096, &r), 0);
    assert_int_equal(rf_page_range_pages(r), 0);

    /* Overflow of offset + len */
    assert_int_equal(rf_page_range_outward(UINT64_MAX, 1, 4096, &r), -EOVERFLOW);
    assert_int_equal(rf_page_range_inward(UINT64_MAX, 1, 4096, &r), -EOVERFLOW);
    assert_int_equal(rf_page_range_outward(UINT64_MAX - 10, 11, 4096, &r), -EOVERFLOW);
    assert_int_equal(rf_page_range_outward(1, UINT64_MAX, 4096, &r), -EOVERFLOW);

    /* Offset at UINT64_MAX with len 0 is representable: floor page 2^52 - 1. */
    assert_int_equal(rf_page_range_outward(UINT64_MAX, 0, 4096, &r), 0);
    assert_int_equal(r.first_page, (1ULL << 52) - 1);
    assert_int_equal(r.end_page, (1ULL << 52) - 1);

    /* A range ending at byte 2^64 - 1 rounds outward to page 2^52 (no wrap). */
    assert_int_equal(rf_page_range_outward(UINT64_MAX - 10, 10, 4096, &r), 0);
    assert_int_equal(r.first_page, (1ULL << 52) - 1);
    assert_int_equal(r.end_page, 1ULL << 52);
    /* ... and holds no whole page inward. */
    assert_int_equal(rf_page_range_inward(UINT64_MAX - 10, 10, 4096, &r), 0);
    assert_int_equal(rf_page_range_pages(r), 0);
    /* The whole address space: inward pages [0, 2^52 - 1). */
    assert_int_equal(rf_page_range_inward(0, UINT64_MAX, 4096, &r), 0);
    assert_int_equal(r.first_page, 0);
    assert_int_equal(r.end_page, (1ULL << 52) - 1);

    /* Page sizes that are not powers of two */
    assert_int_equal(rf_page_range_outward(0, 10, 3000, &r), -EINVAL);
    assert_int_equal(rf_page_range_inward(0, 10, 3000, &r), -EINVAL);
    assert_int_equal(rf_page_range_outward(0, 10, 0, &r), -EINVAL);
    assert_int_equal(rf_page_range_inward(0, 10, 4097, &r), -EINVAL);

    /* Inward: a sub-page range, an exact page, a range spanning a page. */
    assert_int_equal(rf_page_range_inward(100, 200, 4096, &r), 0);
    assert_int_equal(rf_page_range_pages(r), 0);
    assert_int_equal(rf_page_range_inward(4096, 4096, 4096, &r), 0);
    assert_int_equal(r.first_page, 1);
    assert_int_equal(r.end_page, 2);
    assert_int_equal(rf_page_range_inward(4095, 4098, 4096, &r), 0);
    assert_int_equal(r.first_page, 1);
    assert_int_equal(r.end_page, 2);

    /* rf_page_range_pages of a malformed range is 0 */
    assert_int_equal(rf_page_range_pages((struct rf_page_range){7, 3}), 0);
}

static void test_intersect_random(void **state)
{
    int c;

    (void)state;
    rng_state = 2;
    for (c = 0; c < N_CASES; c++) {
        struct rf_page_range a = random_range(), b = random_range(), r;
        uint64_t p, count = 0;
        int64_t first = -1;

        for (p = 0; p < N_PAGES; p++) {
            if (p >= a.first_page && p < a.end_page && p >= b.first_page && p < b.end_page) {
                if (first < 0)
                    first = (int64_t)p;
                count++;
            }
        }
        r = rf_page_range_intersect(a, b);
        assert_int_equal(rf_page_range_pages(r), count);
        assert_true(r.end_page >= r.first_page);
        if (count) {
            assert_int_equal(r.first_page, (uint64_t)first);
            assert_int_equal(r.end_page, (uint64_t)first + count);
        }
    }
}

static void test_set_random(void **state)
{
    int c;

    (void)state;
    rng_state = 3;
    for (c = 0; c < N_CASES; c++) {
        struct rf_interval_set s;
        bool model[N_PAGES + 10] = {false};
        int n_add = (int)rng_below(30), i, q;

        rf_interval_set_init(&s);
        for (i = 0; i < n_add; i++) {
            struct rf_page_range r = random_range();
            uint64_t p, expect_pages = 0;

            assert_int_equal(rf_interval_set_add(&s, r), 0);
            for (p = r.first_page; p < r.end_page; p++)
                model[p] = true;
            assert_set_equals_model(&s, model, N_PAGES + 10);
            for (p = 0; p < N_PAGES + 10; p++) {
                expect_pages += model[p];
                assert_int_equal(rf_interval_set_contains(&s, p), model[p]);
            }
            assert_int_equal(rf_interval_set_pages(&s), expect_pages);
        }
        for (q = 0; q < 20; q++) {
            struct rf_page_range r = random_range();
            uint64_t p, expect = 0;

            for (p = r.first_page; p < r.end_page; p++)
                expect += model[p];
            assert_int_equal(rf_interval_set_overlap_pages(&s, r), expect);
        }
        rf_interval_set_free(&s);
        assert_null(s.v);
        assert_int_equal(s.n, 0);
    }
}

static void test_set_edges(void **state)
{
    struct rf_interval_set s = {0};

    (void)state;
    rf_interval_set_free(NULL);
    assert_int_equal(rf_interval_set_pages(&s), 0);
    assert_false(rf_interval_set_contains(&s, 0));
    assert_int_equal(rf_interval_set_overlap_pages(&s, (struct rf_page_range){0, 10}), 0);

    /* Empty and malformed ranges are ignored. */
    assert_int_equal(rf_interval_set_add(&s, (struct rf_page_range){4, 4}), 0);
    assert_int_equal(rf_interval_set_add(&s, (struct rf_page_range){9, 2}), 0);
    assert_int_equal(s.n, 0);

    /* Adjacent ranges merge into one; a gap of one page does not. */
    assert_int_equal(rf_interval_set_add(&s, (struct rf_page_range){0, 5}), 0);
    assert_int_equal(rf_interval_set_add(&s, (struct rf_page_range){5, 10}), 0);
    assert_int_equal(s.n, 1);
    assert_int_equal(rf_interval_set_add(&s, (struct rf_page_range){11, 12}), 0);
    assert_int_equal(s.n, 2);
    assert_int_equal(rf_interval_set_pages(&s), 11);
    assert_false(rf_interval_set_contains(&s, 10));
    /* Filling the gap merges all three. */
    assert_int_equal(rf_interval_set_add(&s, (struct rf_page_range){10, 11}), 0);
    assert_int_equal(s.n, 1);
    assert_int_equal(s.v[0].end_page, 12);

    /* Pages at the top of the range space. */
    assert_int_equal(rf_interval_set_add(&s, (struct rf_page_range){UINT64_MAX - 3, UINT64_MAX}),
                     0);
    assert_true(rf_interval_set_contains(&s, UINT64_MAX - 1));
    assert_false(rf_interval_set_contains(&s, UINT64_MAX));
    assert_int_equal(rf_interval_set_pages(&s), 15);
    assert_int_equal(
        rf_interval_set_overlap_pages(&s, (struct rf_page_range){UINT64_MAX - 2, UINT64_MAX}), 2);
    rf_interval_set_free(&s);

    /* Many disjoint adds force the array to grow (run under ASan/valgrind). */
    for (uint64_t i = 0; i < 1000; i++)
        assert_int_equal(
            rf_interval_set_add(&s, (struct rf_page_range){3 * (999 - i), 3 * (999 - i) + 1}), 0);
    assert_int_equal(s.n, 1000);
    assert_int_equal(rf_interval_set_pages(&s), 1000);
    rf_interval_set_free(&s);
}

static void test_multi_covered_random(void **state)
{
    int c;

    (void)state;
    rng_state = 4;
    for (c = 0; c < N_CASES; c++) {
        struct rf_page_range ranges[40];
        unsigned count[N_PAGES] = {0};
        bool model[N_PAGES];
        struct rf_interval_set out;
        size_t n = (size_t)rng_below(41), i;
        uint64_t p;

        for (i = 0; i < n; i++) {
            ranges[i] = random_range();
            if (rng_below(10) == 0) /* the same range twice: fully shared */
                ranges[i] = ranges[rng_below(i + 1)];
            for (p = ranges[i].first_page; p < ranges[i].end_page; p++)
                count[p]++;
        }
        for (p = 0; p < N_PAGES; p++)
            model[p] = count[p] >= 2;

        /* Start from a non-empty set: its old content must be replaced. */
        rf_interval_set_init(&out);
        assert_int_equal(rf_interval_set_add(&out, (struct rf_page_range){500, 600}), 0);
        assert_int_equal(rf_interval_multi_covered(ranges, n, &out), 0);
        assert_set_equals_model(&out, model, N_PAGES);
        rf_interval_set_free(&out);
    }
}

static void test_multi_covered_edges(void **state)
{
    struct rf_interval_set out = {0};
    const struct rf_page_range r[] = {{0, 10},  {10, 20}, {5, 15},  {30, 30},
                                      {30, 30}, {40, 41}, {40, 41}, {40, 41}};

    (void)state;
    assert_int_equal(rf_interval_multi_covered(NULL, 0, &out), 0);
    assert_int_equal(out.n, 0);
    /* Touching ranges do not share a page; empty ranges never count. */
    assert_int_equal(rf_interval_multi_covered(r, 2, &out), 0);
    assert_int_equal(out.n, 0);
    assert_int_equal(rf_interval_multi_covered(r, sizeof(r) / sizeof(r[0]), &out), 0);
    assert_int_equal(out.n, 2);
    assert_int_equal(out.v[0].first_page, 5);
    assert_int_equal(out.v[0].end_page, 15);
    assert_int_equal(out.v[1].first_page, 40);
    assert_int_equal(out.v[1].end_page, 41);
    rf_interval_set_free(&out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_outward_inward_random),
        cmocka_unit_test(test_range_edges),
        cmocka_unit_test(test_intersect_random),
        cmocka_unit_test(test_set_random),
        cmocka_unit_test(test_set_edges),
        cmocka_unit_test(test_multi_covered_random),
        cmocka_unit_test(test_multi_covered_edges),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
