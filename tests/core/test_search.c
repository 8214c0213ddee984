/*
 * Tests for the one bounded binary search (rf_partition_point) and the one
 * page-counting loop (rf_page_counts_add), against naive models: a linear
 * scan over many seeded random sorted arrays (empty, one element, runs of
 * equal keys), with every probe checked to stay inside [0, n).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "ramforge/core/residency.h"
#include "ramforge/core/search.h"
#include "test_util.h"

#define N_CASES 2000
#define MAX_N 64

struct probe {
    const uint32_t *v;
    size_t n;
    uint32_t key;
    size_t calls;
};

static bool at_least(const void *ctx, size_t i)
{
    struct probe *p = (struct probe *)ctx;
    assert_true(i < p->n);
    p->calls++;
    return p->v[i] >= p->key;
}

static void test_partition_point_matches_linear_scan(void **state)
{
    (void)state;
    uint32_t v[MAX_N];

    rng_state = 19;
    for (int c = 0; c < N_CASES; c++) {
        size_t n = (size_t)rng_below(MAX_N + 1);
        uint32_t x = 0;
        for (size_t i = 0; i < n; i++)
            v[i] = x += (uint32_t)rng_below(3); /* sorted, with runs of equal keys */
        struct probe p = {v, n, (uint32_t)rng_below(x + 3), 0};
        size_t want = 0;
        while (want < n && v[want] < p.key)
            want++;
        assert_int_equal(rf_partition_point(n, at_least, &p), want);
        size_t bound = 0;
        while (((size_t)1 << bound) <= n)
            bound++; /* ceil(log2(n + 1)) */
        assert_true(p.calls <= bound);
    }
}

static void test_page_counts_by_state(void **state)
{
    (void)state;
    uint8_t s[MAX_N];

    rng_state = 20;
    for (int c = 0; c < N_CASES; c++) {
        size_t n = (size_t)rng_below(MAX_N + 1);
        uint64_t want[3] = {0, 0, 0};
        for (size_t i = 0; i < n; i++) {
            s[i] = (uint8_t)rng_below(4); /* 3: not a state, counted unknown */
            want[s[i] == RF_PAGE_RESIDENT ? 0 : s[i] == RF_PAGE_NONRESIDENT ? 1 : 2]++;
        }
        struct rf_page_counts got = {1, 2, 3}; /* it adds */
        rf_page_counts_add(&got, s, n);
        assert_int_equal(got.resident_pages, want[0] + 1);
        assert_int_equal(got.nonresident_pages, want[1] + 2);
        assert_int_equal(got.unknown_pages, want[2] + 3);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_partition_point_matches_linear_scan),
        cmocka_unit_test(test_page_counts_by_state),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
