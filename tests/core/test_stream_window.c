/*
 * Tests for the read-ahead window's layout (stream_window.h): a small
 * hand-built model whose layout was worked out on paper (pinned tensors
 * left out, outward pages, offsets within a page kept), the limits (a
 * tensor larger than a slot, several mappings, bad arguments), the
 * planner's ring term, and seeded random inventories checked against a
 * naive per-byte model: every streamed tensor is one unit, and each of its
 * bytes lands in the slot at the offset its pointer gets, read from the
 * same file byte.
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

#include "ramforge/core/inventory.h"
#include "ramforge/core/stream_window.h"
#include "ramforge/core/streaming.h"
#include "test_util.h"

#define PAGE 4096
#define MIB (1ull << 20)
#define MAX_T 64

/* n tensors named names[i] at off[i], len[i] bytes, mapping 0 of a file of file_bytes. */
static void build(struct rf_inventory *inv, size_t n, char names[][32], const uint64_t *off,
                  const uint64_t *len, uint64_t file_bytes)
{
    struct rf_tensor_meta t[MAX_T];
    for (size_t i = 0; i < n; i++) {
        t[i] = fixture_tensor((uint32_t)i, 0, off[i], len[i], RF_ACCESS_FILE_BACKED);
        snprintf(t[i].name, sizeof(t[i].name), "%s", names[i]);
    }
    struct rf_mapping_meta m = fixture_mapping(0, file_bytes);
    rf_inventory_init(inv);
    assert_int_equal(rf_inventory_build(t, n, &m, 1, PAGE, 1, inv), 0);
}

/*
 * blk.0: a 100-byte norm at 0, a 3-page-and-a-bit matrix at 128; blk.1 the
 * same from 5 pages on. blk.0 is pinned whole, blk.1's norm too.
 */
static void test_small_model(void **state)
{
    char names[4][32] = {"blk.0.norm.weight", "blk.0.q.weight", "blk.1.norm.weight",
                         "blk.1.q.weight"};
    uint64_t off[4] = {0, 128, 5 * PAGE + 64, 5 * PAGE + 256};
    uint64_t len[4] = {100, 3 * PAGE + 10, 100, 3 * PAGE + 10};
    struct rf_inventory inv;
    struct rf_stream_window w;
    size_t pinned[3] = {0, 1, 2};
    struct rf_stream_plan plan;
    (void)state;
    build(&inv, 4, names, off, len, 9 * PAGE);
    rf_stream_plan_init(&plan);
    plan.pinned = pinned;
    plan.n_pinned = 3;
    assert_int_equal(rf_stream_window_build(&inv, &plan, 2, 4 * PAGE, &w), 0);
    assert_int_equal(w.n_units, 1);
    assert_int_equal(w.units[0].layer, 1);
    assert_int_equal(w.units[0].entry, 3);
    /* blk.1.q spans [5 PAGE + 256, 8 PAGE + 266): pages 5..8, 4 pages */
    assert_int_equal(w.units[0].file_offset_bytes, 5 * PAGE);
    assert_int_equal(w.units[0].bytes, 4 * PAGE);
    assert_int_equal(w.units[0].slot_offset_bytes, 256);
    assert_int_equal(w.streamed_bytes, 4 * PAGE);
    rf_stream_window_free(&w);

    /* nothing pinned: 4 units in (layer, offset) order; blk.0's two share page 0 */
    plan.n_pinned = 0;
    assert_int_equal(rf_stream_window_build(&inv, &plan, 3, 4 * PAGE, &w), 0);
    assert_int_equal(w.n_units, 4);
    assert_int_equal(w.units[0].bytes, PAGE);
    assert_int_equal(w.units[1].file_offset_bytes, 0);
    assert_int_equal(w.units[1].slot_offset_bytes, 128);
    assert_int_equal(w.units[2].slot_offset_bytes, 64);
    assert_int_equal(w.streamed_bytes, 10 * PAGE);
    rf_stream_window_free(&w);

    /* a slot of 3 pages holds neither matrix: both are left to the mapping */
    assert_int_equal(rf_stream_window_build(&inv, &plan, 2, 3 * PAGE, &w), 0);
    assert_int_equal(w.n_units, 2);
    assert_int_equal(w.units_too_large, 2);
    rf_stream_window_free(&w);

    assert_int_equal(rf_stream_window_build(&inv, &plan, 1, 4 * PAGE, &w), -EINVAL);
    assert_int_equal(rf_stream_window_build(&inv, &plan, 9, 4 * PAGE, &w), -EINVAL);
    assert_int_equal(rf_stream_window_build(&inv, &plan, 2, 4 * PAGE + 1, &w), -EINVAL);
    assert_int_equal(rf_stream_window_build(NULL, &plan, 2, 4 * PAGE, &w), -EINVAL);
    inv.n_mappings = 2; /* a split model: not read ahead */
    assert_int_equal(rf_stream_window_build(&inv, &plan, 2, 4 * PAGE, &w), -ENOTSUP);
    inv.n_mappings = 1;
    rf_inventory_free(&inv);
}

/* The planner: with slots, the window and its minimum are slots largest layer tensors. */
static void test_plan_ring(void **state)
{
    char names[4][32] = {"blk.0.a.weight", "blk.0.b.weight", "blk.1.a.weight", "output.weight"};
    uint64_t off[4] = {0, 5 * MIB, 10 * MIB, 20 * MIB};
    uint64_t len[4] = {5 * MIB, 5 * MIB, 10 * MIB, 4 * MIB};
    struct rf_inventory inv;
    struct rf_stream_plan plan;
    struct rf_stream_params p;
    (void)state;
    build(&inv, 4, names, off, len, 24 * MIB);
    rf_stream_plan_init(&plan);
    memset(&p, 0, sizeof(p));
    p.limit_bytes = 64 * MIB;
    p.margin_bytes = MIB;
    p.read_ahead_slots = 2;
    assert_int_equal(rf_stream_plan_build(&inv, &p, &plan), 0);
    assert_int_equal(plan.read_ahead_slots, 2);
    assert_int_equal(plan.read_ahead_bytes, 20 * MIB);
    assert_int_equal(plan.window_bytes, 20 * MIB);
    assert_int_equal(plan.min_window_bytes, 20 * MIB);
    assert_int_equal(plan.pin_budget_bytes, 64 * MIB - MIB - 20 * MIB);
    /* 40 MiB of fixed part leaves 23 MiB: the ring of 20 MiB and the margin fit, 24 would not */
    p.anonymous_bytes = 43 * MIB;
    assert_int_equal(rf_stream_plan_build(&inv, &p, &plan), 0);
    assert_true(plan.fits);
    p.anonymous_bytes = 44 * MIB;
    assert_int_equal(rf_stream_plan_build(&inv, &p, &plan), 0);
    assert_false(plan.fits);
    p.window_bytes = 8 * MIB; /* the ring is the window: both is refused */
    assert_int_equal(rf_stream_plan_build(&inv, &p, &plan), -EINVAL);
    assert_int_equal(rf_stream_window_ring_bytes(3, 7), 21);
    assert_int_equal(rf_stream_window_ring_bytes(2, UINT64_MAX), UINT64_MAX);
    rf_stream_plan_free(&plan);
    rf_inventory_free(&inv);
}

/* Random layouts against a per-byte model of each unit's slot. */
static void test_random(void **state)
{
    (void)state;
    rng_state = 25;
    for (int round = 0; round < 300; round++) {
        char names[MAX_T][32];
        uint64_t off[MAX_T], len[MAX_T], pos = 0, file_end = 0;
        size_t n = 2 + (size_t)rng_below(MAX_T - 2), pinned[MAX_T], n_pinned = 0;
        uint32_t n_layers = 1 + (uint32_t)rng_below(6);
        for (size_t i = 0; i < n; i++) {
            uint32_t l = (uint32_t)(i * n_layers / n);
            if (rng_below(8) == 0)
                snprintf(names[i], sizeof(names[i]), "output.%zu", i);
            else
                snprintf(names[i], sizeof(names[i]), "blk.%u.t%zu", l, i);
            pos += 32 * rng_below(200); /* gaps, 32-byte aligned */
            if (i && rng_below(6) == 0) /* sometimes overlapping its neighbour */
                pos = off[i - 1] + 32 * rng_below(1 + len[i - 1] / 32);
            off[i] = pos;
            len[i] = 1 + rng_below(5 * PAGE);
            pos += len[i];
            file_end = pos > file_end ? pos : file_end;
            if (rng_below(4) == 0)
                pinned[n_pinned++] = i;
        }
        struct rf_inventory inv;
        struct rf_stream_plan plan;
        struct rf_stream_window w;
        build(&inv, n, names, off, len, file_end + PAGE);
        rf_stream_plan_init(&plan);
        plan.pinned = pinned;
        plan.n_pinned = n_pinned;
        uint64_t slot = PAGE * (1 + rng_below(6));
        assert_int_equal(rf_stream_window_build(&inv, &plan, 2, slot, &w), 0);
        uint8_t *got = calloc(slot, 1);
        uint64_t sum = 0;
        bool *placed = calloc(n, sizeof(*placed));
        for (size_t k = 0; k < w.n_units; k++) {
            const struct rf_stream_window_unit *u = &w.units[k];
            size_t e = u->entry;
            assert_true(e < n && !placed[e]);
            placed[e] = true;
            assert_int_equal(rf_tensor_layer_of(names[e]), u->layer);
            assert_true(k == 0 || u->layer > w.units[k - 1].layer ||
                        (u->layer == w.units[k - 1].layer && off[e] >= off[w.units[k - 1].entry]));
            assert_int_equal(u->file_offset_bytes % PAGE, 0);
            assert_int_equal(u->bytes % PAGE, 0);
            assert_true(u->bytes <= slot && u->slot_offset_bytes < PAGE);
            /* a per-byte copy of the read: slot byte b holds file byte file_offset + b */
            for (uint64_t b = 0; b < u->bytes; b++)
                got[b] = (uint8_t)((u->file_offset_bytes + b) * 7);
            /* every byte of the tensor is where its pointer (slot + slot_offset) says */
            for (uint64_t b = 0; b < len[e]; b++)
                assert_int_equal(got[u->slot_offset_bytes + b], (uint8_t)((off[e] + b) * 7));
            sum += u->bytes;
        }
        assert_int_equal(sum, w.streamed_bytes);
        /* every streamed tensor is placed, or counted too large for a slot */
        size_t expected = 0;
        for (size_t i = 0; i < n; i++) {
            bool pin = false;
            for (size_t k = 0; k < n_pinned; k++)
                pin |= pinned[k] == i;
            expected += !pin && rf_tensor_layer_of(names[i]) >= 0;
            assert_true(!placed[i] || (!pin && rf_tensor_layer_of(names[i]) >= 0));
        }
        assert_int_equal(w.n_units + w.units_too_large, expected);
        free(placed);
        free(got);
        rf_stream_window_free(&w);
        rf_inventory_free(&inv);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small_model),
        cmocka_unit_test(test_plan_ring),
        cmocka_unit_test(test_random),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
