/*
 * The prompt-cache model (ramforge/core/prompt_cache.h): llama-server's rule
 * (skip an entry over the limit, evict the oldest until the new one fits,
 * a restored entry leaves) checked against a naive list over seeded random
 * cases; the ring's edge; the --cache-ram that fits a room.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "ramforge/core/prompt_cache.h"

#define MIB (1024ull * 1024ull)

static void test_server_rule(void **state)
{
    (void)state;
    struct rf_prompt_cache pc;
    rf_prompt_cache_init(&pc, true, 10 * MIB);
    rf_prompt_cache_save(&pc, 4 * MIB);
    rf_prompt_cache_save(&pc, 4 * MIB);
    assert_int_equal(pc.bytes, 8 * MIB);
    rf_prompt_cache_save(&pc, 11 * MIB); /* larger than the limit: skipped, nothing evicted */
    assert_int_equal(pc.skipped, 1);
    assert_int_equal(pc.bytes, 8 * MIB);
    rf_prompt_cache_save(&pc, 5 * MIB); /* the oldest goes */
    assert_int_equal(pc.evicted, 1);
    assert_int_equal(pc.bytes, 9 * MIB);
    rf_prompt_cache_restore(&pc, 5 * MIB); /* loaded into a slot: out of the cache */
    assert_int_equal(pc.restores, 1);
    assert_int_equal(pc.taken, 1);
    assert_int_equal(pc.bytes, 4 * MIB);
    assert_int_equal(pc.n, 1);
    rf_prompt_cache_restore(&pc, 3 * MIB); /* no entry of that size: counted only */
    assert_int_equal(pc.restores, 2);
    assert_int_equal(pc.bytes, 4 * MIB);
    assert_int_equal(pc.saves, 4);
    assert_int_equal(pc.saved_bytes, 24 * MIB);

    rf_prompt_cache_init(&pc, true, 0); /* --cache-ram 0: every save skipped */
    rf_prompt_cache_save(&pc, 1);
    assert_int_equal(pc.bytes, 0);
    assert_int_equal(pc.skipped, 1);
}

/* The naive model: an array of the live sizes, oldest first. */
static void test_against_naive(void **state)
{
    (void)state;
    static uint64_t live[4096];
    srand(34);
    for (int round = 0; round < 200; round++) {
        struct rf_prompt_cache pc;
        uint64_t limit = (uint64_t)(rand() % 64) * MIB, sum = 0;
        size_t n = 0;
        rf_prompt_cache_init(&pc, true, limit);
        for (int i = 0; i < 300; i++) {
            uint64_t size = (uint64_t)(rand() % (16 * 1024)) * 1024;
            if (n && rand() % 4 == 0) { /* a restore: the newest entry of its size leaves */
                size = live[(size_t)rand() % n];
                rf_prompt_cache_restore(&pc, size);
                size_t k = n;
                while (live[k - 1] != size)
                    k--;
                for (sum -= size, n--, k--; k < n; k++)
                    live[k] = live[k + 1];
                assert_int_equal(pc.bytes, sum);
                assert_int_equal(pc.n, n);
                continue;
            }
            rf_prompt_cache_save(&pc, size);
            if (size > limit)
                continue;
            while (n && sum + size > limit) {
                sum -= live[0];
                for (size_t k = 1; k < n; k++)
                    live[k - 1] = live[k];
                n--;
            }
            live[n++] = size;
            sum += size;
            assert_int_equal(pc.bytes, sum);
            assert_int_equal(pc.n, n);
            assert_true(pc.bytes <= limit);
        }
    }
}

static void test_unlimited_ring(void **state)
{
    (void)state;
    static struct rf_prompt_cache pc;
    rf_prompt_cache_init(&pc, false, 123);
    for (int i = 0; i < RF_PROMPT_CACHE_MAX_ENTRIES + 10; i++)
        rf_prompt_cache_save(&pc, 1000);
    assert_int_equal(pc.evicted, 0);
    assert_int_equal(pc.forgotten, 10);
    assert_int_equal(pc.n, RF_PROMPT_CACHE_MAX_ENTRIES);
    assert_int_equal(pc.bytes, 1000ull * RF_PROMPT_CACHE_MAX_ENTRIES);
}

static void test_fit_mib(void **state)
{
    (void)state;
    assert_int_equal(rf_prompt_cache_fit_mib(100 * MIB, 36 * MIB, 8192), 64);
    assert_int_equal(rf_prompt_cache_fit_mib(100 * MIB + MIB / 2, 36 * MIB, 8192), 64);
    assert_int_equal(rf_prompt_cache_fit_mib(10 * MIB, 36 * MIB, 8192), 0);
    assert_int_equal(rf_prompt_cache_fit_mib(UINT64_MAX, 0, 8192), 8192);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_server_rule),
        cmocka_unit_test(test_against_naive),
        cmocka_unit_test(test_unlimited_ring),
        cmocka_unit_test(test_fit_mib),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
