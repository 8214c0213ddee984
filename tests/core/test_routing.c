/*
 * Tests for the observed routing (routing.h): a selection sequence worked
 * out on paper, and seeded random sequences against a naive model that
 * keeps each expert's last-use time and counts, for every cache size, the
 * selections an LRU cache of that size holds.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "ramforge/core/routing.h"
#include "test_util.h"

/*
 * One layer of 4 experts, k 2:
 *   token 0: {0, 1}  both first uses                 recency after: 1 0
 *   token 1: {1, 2}  1 at distance 0, 2 first use    recency after: 2 1 0
 *   token 2: {0, 3}  0 at distance 2, 3 first use    recency after: 3 0 2 1
 *   token 3: {1, 1}  1 at distance 3 (twice)
 */
static void test_paper(void **state)
{
    struct rf_routing r;
    uint64_t hits, sel;
    (void)state;

    assert_int_equal(rf_routing_init(&r, 2, 4, 2), 0);
    assert_int_equal(rf_routing_add(&r, 0, (const int32_t[]){0, 1}, 2), 0);
    assert_int_equal(rf_routing_add(&r, 0, (const int32_t[]){1, 2}, 2), 0);
    assert_int_equal(rf_routing_add(&r, 0, (const int32_t[]){0, 3}, 2), 0);
    assert_int_equal(rf_routing_add(&r, 0, (const int32_t[]){1, 1}, 2), 0);
    assert_int_equal(rf_routing_add(&r, 1, (const int32_t[]){7, -1}, 2), 0); /* bad ids */
    assert_int_equal(r.tokens[0], 4);
    assert_int_equal(r.tokens[1], 1);
    assert_int_equal(r.bad_ids, 2);
    const uint64_t counts[] = {2, 4, 1, 1};
    for (int e = 0; e < 4; e++)
        assert_int_equal(r.counts[e], counts[e]);
    const uint64_t dist[] = {1, 0, 1, 2, 4}; /* d = 0, 1, 2, 3, first use */
    for (int d = 0; d <= 4; d++)
        assert_int_equal(r.distance[d], dist[d]);
    assert_int_equal(rf_routing_lru_hits(&r, 0, 1, &hits, &sel), 0);
    assert_int_equal(hits, 1);
    assert_int_equal(sel, 8);
    assert_int_equal(rf_routing_lru_hits(&r, 0, 4, &hits, &sel), 0);
    assert_int_equal(hits, 4); /* every reuse; first uses miss whatever the size */
    assert_int_equal(rf_routing_lru_hits(&r, -1, 100, &hits, &sel), 0);
    assert_int_equal(hits, 4);
    assert_int_equal(sel, 8); /* layer 1 had only bad ids */

    struct rf_routing c;
    assert_int_equal(rf_routing_copy(&r, &c), 0);
    assert_memory_equal(c.distance, r.distance, 10 * sizeof(uint64_t));
    assert_int_equal(c.bad_ids, 2);
    rf_routing_free(&c);

    assert_int_equal(rf_routing_add(&r, 2, (const int32_t[]){0}, 1), -EINVAL);
    assert_int_equal(rf_routing_lru_hits(&r, 2, 1, &hits, &sel), -EINVAL);
    assert_int_equal(rf_routing_lru_hits(&r, -2, 1, &hits, &sel), -EINVAL);
    rf_routing_free(&r);
    rf_routing_free(NULL);
    assert_int_equal(rf_routing_init(&r, 1, 4, 5), -EINVAL);
    assert_int_equal(rf_routing_init(&r, 0, 4, 1), -EINVAL);
    assert_int_equal(rf_routing_init(&r, 1, 0, 0), -EINVAL);
    rf_routing_zero(&c);
    assert_int_equal(rf_routing_copy(&c, &r), 0); /* an empty one copies to an empty one */
    assert_int_equal(r.n_layer, 0);
}

#define NE 12
#define NL 3

/* Random sequences: the hits of every cache size against last-use times kept here. */
static void test_random(void **state)
{
    (void)state;
    rng_state = 3300;
    for (int round = 0; round < 40; round++) {
        uint32_t k = 1 + (uint32_t)rng_below(4);
        struct rf_routing r;
        int64_t last[NL][NE];
        uint64_t hits[NL][NE + 2] = {{0}}, sel[NL] = {0};
        uint32_t skewed = (uint32_t)rng_below(2);

        memset(last, 0xff, sizeof(last)); /* -1: never */
        assert_int_equal(rf_routing_init(&r, NL, NE, k), 0);
        for (int64_t t = 0; t < 300; t++) {
            uint32_t layer = (uint32_t)rng_below(NL);
            int32_t ids[4];
            for (uint32_t i = 0; i < k; i++) { /* k distinct experts, skewed to low ids or not */
                int32_t e;
                bool dup;
                do {
                    e = (int32_t)(skewed ? rng_below(1 + rng_below(NE)) : rng_below(NE));
                    dup = false;
                    for (uint32_t j = 0; j < i; j++)
                        dup |= ids[j] == e;
                } while (dup);
                ids[i] = e;
            }
            /* naive: distance = experts of the layer used after e's last use */
            for (uint32_t i = 0; i < k; i++) {
                int64_t le = last[layer][ids[i]];
                uint32_t d = 0;
                for (int e = 0; e < NE; e++)
                    d += le >= 0 && last[layer][e] > le;
                for (uint32_t c = 0; c <= NE + 1; c++)
                    hits[layer][c] += le >= 0 && d < c;
                sel[layer]++;
            }
            for (uint32_t i = 0; i < k; i++)
                last[layer][ids[i]] = t * 8 + i; /* later ids of the token are more recent */
            assert_int_equal(rf_routing_add(&r, layer, ids, k), 0);
        }
        for (uint32_t l = 0; l < NL; l++) {
            for (uint32_t c = 0; c <= NE + 1; c++) {
                uint64_t h, s;
                assert_int_equal(rf_routing_lru_hits(&r, (int32_t)l, c, &h, &s), 0);
                assert_int_equal(s, sel[l]);
                assert_int_equal(h, hits[l][c]);
            }
        }
        rf_routing_free(&r);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_paper),
        cmocka_unit_test(test_random),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
