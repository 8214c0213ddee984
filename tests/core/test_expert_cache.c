/*
 * Tests for the expert cache's bookkeeping (expert_cache.h): the LRU's
 * hits against the routing recorder's model (rf_routing_lru_hits, what
 * admission expects) over seeded random tokens, c below k included; the
 * slots a c needs and the largest c slots hold (hand-computed); a batch
 * wider than the capacity, its trim, and its room taken from the other
 * layers' least recently used; and the edge-page rule of an evicted slice
 * against a naive per-page model over random offsets, slice sizes and
 * cached sets.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ramforge/core/expert_cache.h"
#include "ramforge/core/experts.h"
#include "ramforge/core/routing.h"

#define PAGE 4096

static uint64_t rnd_state = 88172645463325252ull;
static uint64_t rnd(void) /* xorshift64: seeded, reproducible */
{
    rnd_state ^= rnd_state << 13;
    rnd_state ^= rnd_state >> 7;
    rnd_state ^= rnd_state << 17;
    return rnd_state;
}

/* One token's k distinct ids of n, skewed towards the low ones when skew. */
static void token_ids(int32_t *ids, uint32_t k, uint32_t n, bool skew)
{
    for (uint32_t i = 0; i < k; i++) {
        bool dup;
        do {
            uint32_t e = (uint32_t)(rnd() % n);
            if (skew && rnd() % 2)
                e = (uint32_t)(rnd() % (k + 2));
            ids[i] = (int32_t)e;
            dup = false;
            for (uint32_t j = 0; j < i; j++)
                dup |= ids[j] == ids[i];
        } while (dup);
    }
}

/* One token at a time: the LRU's hits are the recorder's reuse distances below c, and the
   cache never holds more than its slots. */
static void test_lru_matches_routing_model(void **state)
{
    (void)state;
    const uint32_t n_layer = 3, n = 16, k = 4;
    for (uint32_t c = 0; c <= n; c += c < k ? 1 : 3) {
        for (int skew = 0; skew < 2; skew++) {
            struct rf_expert_lru lru;
            struct rf_routing r;
            uint32_t load[16], evict[48], n_load, n_evict;
            const uint32_t slots = (uint32_t)rf_expert_lru_slots(n_layer, n, k, c);
            assert_int_equal(rf_expert_lru_init(&lru, n_layer, n, c, slots), 0);
            assert_int_equal(rf_routing_init(&r, n_layer, n, k), 0);
            for (int t = 0; t < 200; t++)
                for (uint32_t l = 0; l < n_layer; l++) {
                    int32_t ids[4];
                    token_ids(ids, k, n, skew);
                    assert_int_equal(rf_routing_add(&r, l, ids, k), 0);
                    assert_int_equal(
                        rf_expert_lru_select(&lru, l, ids, k, load, &n_load, evict, &n_evict), 0);
                    assert_true(lru.n_cached[l] <= (c > k ? c : k));
                    assert_true(lru.n_total <= slots);
                    for (uint32_t i = 0; i < k; i++)
                        assert_true(rf_expert_lru_cached(&lru, l, (uint32_t)ids[i]));
                    for (uint32_t i = 0; i < n_evict; i++)
                        assert_false(rf_expert_lru_cached(&lru, evict[i] / n, evict[i] % n));
                }
            uint64_t hits = 0, sel = 0;
            assert_int_equal(rf_routing_lru_hits(&r, -1, c, &hits, &sel), 0);
            assert_int_equal(lru.selections, sel);
            assert_int_equal(lru.hits, hits);
            assert_int_equal(lru.hits + lru.misses, lru.selections);
            rf_routing_free(&r);
            rf_expert_lru_free(&lru);
        }
    }
}

/* The slots of a qwen3moe-a3b-shaped cache (16 layers, 8 of 64), by hand: c of each layer, the
   k - c more of the layer decoded, at least n. */
static void test_slots_and_fit(void **state)
{
    (void)state;
    uint32_t c = 99;
    assert_int_equal(rf_expert_lru_slots(16, 64, 8, 0), 64);
    assert_int_equal(rf_expert_lru_slots(16, 64, 8, 3), 64); /* 48 + 5 below n */
    assert_int_equal(rf_expert_lru_slots(16, 64, 8, 4), 68); /* 64 + 4 */
    assert_int_equal(rf_expert_lru_slots(16, 64, 8, 8), 128);
    assert_int_equal(rf_expert_lru_slots(16, 64, 8, 26), 416);
    assert_int_equal(rf_expert_lru_slots(16, 64, 8, 65), 0);
    assert_int_equal(rf_expert_lru_fit(16, 64, 8, 63, &c), -ENOSPC);
    assert_int_equal(rf_expert_lru_fit(16, 64, 8, 64, &c), 0);
    assert_int_equal(c, 3);
    assert_int_equal(rf_expert_lru_fit(16, 64, 8, 112, &c), 0);
    assert_int_equal(c, 6); /* 96 + 2; 7 needs 112 + 1 */
    assert_int_equal(rf_expert_lru_fit(16, 64, 8, 416, &c), 0);
    assert_int_equal(c, 26);
    assert_int_equal(rf_expert_lru_fit(16, 64, 8, 5000, &c), 0);
    assert_int_equal(c, 64);
    assert_int_equal(rf_expert_lru_fit(16, 64, 65, 100, &c), -EINVAL);
}

/* A batch of more experts than c loads them all (lossless), a trim brings the layer back. */
static void test_batch_wider_than_capacity(void **state)
{
    (void)state;
    struct rf_expert_lru lru;
    uint32_t load[8], evict[16], n_load, n_evict;
    const int32_t batch[] = {0, 1, 2, 1, 3, 4, 0, 5}; /* 6 distinct, repeats are hits */
    const int32_t tok[] = {6, 1};
    assert_int_equal(rf_expert_lru_init(&lru, 2, 8, 2, 8), 0);
    assert_int_equal(rf_expert_lru_select(&lru, 1, batch, 8, load, &n_load, evict, &n_evict), 0);
    assert_int_equal(n_load, 6);
    assert_int_equal(n_evict, 0);
    assert_int_equal(lru.n_cached[1], 6);
    assert_int_equal(lru.misses, 6);
    assert_int_equal(lru.hits, 2);
    assert_int_equal(rf_expert_lru_trim(&lru, evict, &n_evict), 0);
    assert_int_equal(n_evict, 4);      /* by stamps: 2 (3rd), 1 (4th, restamped), 3, 4 */
    assert_int_equal(evict[0], 8 + 2); /* slot numbers: layer 1 x 8 + expert */
    assert_int_equal(evict[1], 8 + 1);
    assert_int_equal(evict[3], 8 + 4);
    assert_int_equal(lru.n_cached[1], 2);
    assert_true(rf_expert_lru_cached(&lru, 1, 0)); /* stamped 7th */
    assert_true(rf_expert_lru_cached(&lru, 1, 5));
    /* a token then: 6 missed, 1 missed, 0 and 5 leave */
    assert_int_equal(rf_expert_lru_select(&lru, 1, tok, 2, load, &n_load, evict, &n_evict), 0);
    assert_int_equal(n_load, 2);
    assert_int_equal(n_evict, 2);
    assert_int_equal(lru.n_cached[1], 2);
    assert_int_equal(lru.n_cached[0], 0);
    assert_int_equal(rf_expert_lru_select(&lru, 2, tok, 2, load, &n_load, evict, &n_evict),
                     -EINVAL);
    rf_expert_lru_free(&lru);
    assert_int_equal(rf_expert_lru_init(&lru, 2, 8, 9, 18), -EINVAL); /* c > n */
    assert_int_equal(rf_expert_lru_init(&lru, 2, 8, 2, 7), -EINVAL);  /* T < n */
    assert_int_equal(rf_expert_lru_init(&lru, 2, 8, 0, 8), 0);        /* c 0: every one read */
    rf_expert_lru_free(&lru);
}

/* A prompt batch above c takes its room from the other layers' least recently used experts
   (T slots in all), never from its own selections; the next layer's select trims it to c. */
static void test_batch_takes_room_from_other_layers(void **state)
{
    (void)state;
    struct rf_expert_lru lru;
    uint32_t load[8], evict[24], n_load, n_evict;
    const int32_t t0[] = {0, 1}, t1[] = {2, 3}, t2[] = {4, 5};
    const int32_t batch[] = {2, 3, 4, 5, 6, 7}; /* 4 new in layer 1 */
    /* 3 layers, 8 experts, k 2, c 2: T = max(6, 8) = 8 */
    assert_int_equal(rf_expert_lru_init(&lru, 3, 8, 2, 8), 0);
    assert_int_equal(rf_expert_lru_select(&lru, 0, t0, 2, load, &n_load, evict, &n_evict), 0);
    assert_int_equal(rf_expert_lru_select(&lru, 1, t1, 2, load, &n_load, evict, &n_evict), 0);
    assert_int_equal(rf_expert_lru_select(&lru, 2, t2, 2, load, &n_load, evict, &n_evict), 0);
    assert_int_equal(lru.n_total, 6);
    assert_int_equal(rf_expert_lru_select(&lru, 1, batch, 6, load, &n_load, evict, &n_evict), 0);
    assert_int_equal(n_load, 4);
    assert_int_equal(lru.n_cached[1], 6);
    assert_int_equal(n_evict, 2); /* 10 held: layer 0's two, the least recently used, leave */
    assert_int_equal(evict[0], 0 * 8 + 0);
    assert_int_equal(evict[1], 0 * 8 + 1);
    assert_int_equal(lru.n_total, 8);
    assert_int_equal(lru.n_cached[0], 0);
    assert_int_equal(lru.n_cached[2], 2);
    /* layer 2's token: layer 1 back to its c (2, 3 the oldest of its batch leave) */
    assert_int_equal(rf_expert_lru_select(&lru, 2, t2, 2, load, &n_load, evict, &n_evict), 0);
    assert_int_equal(lru.hits, 2 + 2); /* layer 1's 2, 3 in the batch; layer 2's 4, 5 now */
    assert_int_equal(n_evict, 4);
    assert_int_equal(lru.n_cached[1], 2);
    assert_true(rf_expert_lru_cached(&lru, 1, 6));
    assert_true(rf_expert_lru_cached(&lru, 1, 7));
    assert_int_equal(lru.n_total, 4);
    rf_expert_lru_free(&lru);
}

static bool cached_of(void *ud, uint32_t j)
{
    return ((const bool *)ud)[j];
}

/* The edge rule against a per-page model: a page drops when no cached slice covers it. */
static void test_drop_range_naive(void **state)
{
    (void)state;
    for (int it = 0; it < 3000; it++) {
        const uint32_t n = 2 + (uint32_t)(rnd() % 14);
        const uint64_t off = (rnd() % 64) * 32 + (rnd() % 4) * PAGE;
        const uint64_t slice = 32 * (1 + rnd() % (it % 2 ? 700 : 60)); /* below and above a page */
        const uint32_t e = (uint32_t)(rnd() % n);
        bool cached[16];
        for (uint32_t j = 0; j < n; j++)
            cached[j] = j != e && rnd() % 2;
        uint64_t first, end;
        assert_int_equal(
            rf_expert_drop_range(off, slice, n, e, PAGE, cached_of, cached, &first, &end), 0);
        const uint64_t base = off / PAGE;
        const uint64_t a = (off + e * slice) / PAGE, b = (off + (e + 1) * slice + PAGE - 1) / PAGE;
        uint64_t want_first = UINT64_MAX, want_end = 0;
        for (uint64_t p = a; p < b; p++) {
            bool covered = false;
            for (uint32_t j = 0; j < n; j++) {
                uint64_t ja = (off + j * slice) / PAGE;
                uint64_t jb = (off + (j + 1) * slice + PAGE - 1) / PAGE;
                covered |= cached[j] && p >= ja && p < jb;
            }
            if (!covered) {
                if (want_first == UINT64_MAX)
                    want_first = p;
                want_end = p + 1;
            }
        }
        if (want_first == UINT64_MAX) {
            assert_int_equal(first, end);
            continue;
        }
        /* the droppable pages are one run: the interior is the slice's own */
        for (uint64_t p = want_first; p < want_end; p++)
            assert_true(p - base >= first && p - base < end);
        assert_int_equal(first, want_first - base);
        assert_int_equal(end, want_end - base);
    }
    uint64_t f, en;
    bool none[2] = {false, false};
    assert_int_equal(rf_expert_drop_range(0, PAGE, 2, 2, PAGE, cached_of, none, &f, &en), -EINVAL);
    assert_int_equal(rf_expert_drop_range(0, PAGE, 2, 0, 3000, cached_of, none, &f, &en), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lru_matches_routing_model),
        cmocka_unit_test(test_slots_and_fit),
        cmocka_unit_test(test_batch_wider_than_capacity),
        cmocka_unit_test(test_batch_takes_room_from_other_layers),
        cmocka_unit_test(test_drop_range_naive),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
