/*
 * Tests for the expert policy's part of the streaming plan
 * (streaming_experts.c): on a hand-built MoE inventory the routed expert
 * tensors are neither pinned nor in W nor window units; the cache's
 * minimum (the n experts of one layer a prompt batch may select) is
 * reserved before the pins; what is left becomes T slots, c experts a
 * layer (0 <= c <= n), and pinned + fixed + window + margin + the cache
 * never exceed the limit. Worked out on paper below.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ramforge/core/experts.h"
#include "ramforge/core/inventory.h"
#include "ramforge/core/stream_window.h"
#include "ramforge/core/streaming.h"
#include "test_util.h"

#define PAGE 4096
#define MIB (1ull << 20)
#define N_EXPERT 16
#define K 4
#define SLICE 100000 /* 24.4 pages: a span of at most 26 */

static struct rf_tensor_meta named(uint32_t index, const char *name, uint64_t off, uint64_t len)
{
    struct rf_tensor_meta t = fixture_tensor(index, 0, off, len, RF_ACCESS_FILE_BACKED);
    snprintf(t.name, sizeof(t.name), "%s", name);
    return t;
}

/*
 * token_embd 4 MiB; 2 layers of attn 1 MiB + 32 bytes (so the routed
 * tensors start mid-page), ffn_gate_inp 64 KiB and gate/up/down _exps of
 * 16 x SLICE; output 2 MiB.
 *   expert_bytes = 3 x 26 pages = 319488; min = (4 x 2 + 12) x 319488 = 6389760
 *   W = dense pages: attn + router of 2 layers + output (+ its page edges)
 */
static void build_moe(struct rf_inventory *inv, struct rf_expert_map *map)
{
    static const char *kinds[] = {"gate", "up", "down"};
    struct rf_tensor_meta t[16];
    uint64_t off = 0;
    uint32_t n = 0;
    char name[64];
    t[n] = named(n, "token_embd.weight", off, 4 * MIB);
    off += 4 * MIB, n++;
    for (int l = 0; l < 2; l++) {
        snprintf(name, sizeof(name), "blk.%d.attn_q.weight", l);
        t[n] = named(n, name, off, MIB + 32);
        off += MIB + 32, n++;
        snprintf(name, sizeof(name), "blk.%d.ffn_gate_inp.weight", l);
        t[n] = named(n, name, off, 64 * 1024);
        off += 64 * 1024, n++;
        for (int k = 0; k < 3; k++) {
            snprintf(name, sizeof(name), "blk.%d.ffn_%s_exps.weight", l, kinds[k]);
            t[n] = named(n, name, off, (uint64_t)N_EXPERT * SLICE);
            off += (uint64_t)N_EXPERT * SLICE, n++;
        }
    }
    t[n] = named(n, "output.weight", off, 2 * MIB);
    off += 2 * MIB, n++;
    struct rf_mapping_meta m = fixture_mapping(0, off);
    rf_inventory_init(inv);
    assert_int_equal(rf_inventory_build(t, n, &m, 1, PAGE, 1, inv), 0);
    rf_expert_map_init(map);
    assert_int_equal(rf_expert_map_build(inv, N_EXPERT, K, map), 0);
    assert_int_equal(map->n, 6);
}

static struct rf_stream_params params(uint64_t limit, const struct rf_expert_map *map)
{
    struct rf_stream_params p;
    memset(&p, 0, sizeof(p));
    p.limit_bytes = limit;
    p.anonymous_bytes = 10 * MIB;
    p.window_bytes = 16 * MIB; /* the minimum window: 32 MiB / 2 */
    p.margin_bytes = MIB;
    p.experts = map;
    return p;
}

static void check_invariants(const struct rf_inventory *inv, const struct rf_stream_plan *plan,
                             uint64_t limit)
{
    for (size_t i = 0; i < plan->n_pinned; i++)
        assert_false(rf_expert_tensor_name(inv->entries[plan->pinned[i]].name));
    assert_true(plan->pinned_bytes + plan->fixed_bytes + plan->window_bytes + plan->margin_bytes +
                    plan->expert_cache_bytes <=
                limit);
    assert_true(plan->expert_cache_per_layer <= N_EXPERT);
    assert_int_equal(plan->expert_cache_bytes,
                     (uint64_t)plan->expert_cache_slots * plan->expert_bytes);
    if (plan->fits) {
        assert_true(plan->expert_cache_slots >= N_EXPERT);
        assert_true(plan->expert_cache_slots >= 2 * plan->expert_cache_per_layer);
    } else {
        assert_int_equal(plan->expert_cache_slots, 0);
    }
}

static void test_plan_experts(void **state)
{
    (void)state;
    struct rf_inventory inv;
    struct rf_expert_map map;
    struct rf_stream_plan plan;
    build_moe(&inv, &map);
    rf_stream_plan_init(&plan);
    /* the minimum: the n experts of one layer a prompt batch may select (a token's k of both
       layers fit in them) */
    const uint64_t expert = 3 * 26 * PAGE, min = N_EXPERT * expert;

    /* a dense plan sees the routed tensors as layer weights: W holds them */
    struct rf_stream_params p = params(1024 * MIB, NULL);
    assert_int_equal(rf_stream_plan_build(&inv, &p, &plan), 0);
    const uint64_t dense_w_with_routed = plan.working_set_bytes;
    assert_int_equal(plan.expert_cache_per_layer, 0);

    /* plenty of room: every dense weight pinned, c = n */
    p = params(1024 * MIB, &map);
    assert_int_equal(rf_stream_plan_build(&inv, &p, &plan), 0);
    assert_int_equal(plan.n_expert, N_EXPERT);
    assert_int_equal(plan.expert_layers, 2);
    assert_int_equal(plan.expert_bytes, expert);
    assert_int_equal(plan.expert_min_bytes, min);
    assert_true(plan.working_set_bytes < dense_w_with_routed - 6 * N_EXPERT * SLICE + 12 * PAGE);
    assert_true(plan.nothing_streams);
    assert_int_equal(plan.expert_cache_per_layer, N_EXPERT);
    assert_non_null(strstr(plan.reason, "LRU cache of 16 of the 16 experts"));
    check_invariants(&inv, &plan, p.limit_bytes);
    const uint64_t dense = plan.pinned_bytes;

    /* dense pinned and 12 experts a layer: 24 slots fit, 13 a layer (26) do not; a prompt
       batch's 16 of one layer take room from the other layer, none is held beside them */
    uint64_t limit = 10 * MIB + MIB + 16 * MIB + dense + 25 * expert + 1000;
    p = params(limit, &map);
    assert_int_equal(rf_stream_plan_build(&inv, &p, &plan), 0);
    assert_int_equal(plan.pinned_bytes, dense);
    assert_int_equal(plan.expert_cache_per_layer, 12);
    assert_int_equal(plan.expert_cache_slots, 24);
    assert_int_equal(plan.expert_cache_bytes, 24 * expert);
    check_invariants(&inv, &plan, limit);

    /* the minimum is reserved before the pins: fewer dense pins, c = n / 2 (16 slots) */
    limit = 10 * MIB + MIB + 16 * MIB + min + 3 * MIB;
    p = params(limit, &map);
    assert_int_equal(rf_stream_plan_build(&inv, &p, &plan), 0);
    assert_true(plan.fits);
    assert_true(plan.pinned_bytes < dense);
    assert_true(plan.expert_cache_per_layer >= K);
    check_invariants(&inv, &plan, limit);
    /* and the window's units hold no routed tensor */
    struct rf_stream_window w;
    assert_int_equal(rf_stream_window_build(&inv, &plan, 2, 2 * MIB, &w), 0);
    assert_true(w.n_units > 0);
    for (size_t i = 0; i < w.n_units; i++)
        assert_false(rf_expert_tensor_name(inv.entries[w.units[i].entry].name));
    rf_stream_window_free(&w);

    /* below the minimum: it does not fit, no cache */
    limit = 10 * MIB + MIB + 16 * MIB + min - PAGE;
    p = params(limit, &map);
    assert_int_equal(rf_stream_plan_build(&inv, &p, &plan), 0);
    assert_false(plan.fits);
    check_invariants(&inv, &plan, limit);

    rf_stream_plan_free(&plan);
    rf_expert_map_free(&map);
    rf_inventory_free(&inv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plan_experts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
