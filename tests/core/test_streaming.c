/*
 * Tests for the streaming policy's resident-set planner: a hand-built
 * tinyllama-shaped inventory whose plans were worked out on paper (the
 * head group, whole layers in order, then single tensors of the next layer, token_embd never pinned
 * unless tied, anonymous and unmapped weights never pinned), the budget arithmetic and its
 * overflow, and seeded random inventories checked against a naive per-page model: the pinned ranges
 * are exactly the union of the pinned entries' pages, and pinned + fixed + window + margin never
 * exceeds the limit.
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
#include "ramforge/core/streaming.h"
#include "test_util.h"

#define PAGE 4096
#define MIB (1ull << 20)

static void test_layer_of(void **state)
{
    (void)state;
    assert_int_equal(rf_tensor_layer_of("blk.0.attn_q.weight"), 0);
    assert_int_equal(rf_tensor_layer_of("blk.21.ffn_up.weight"), 21);
    assert_int_equal(rf_tensor_layer_of("blk..x"), -1);
    assert_int_equal(rf_tensor_layer_of("blk.3"), -1);
    assert_int_equal(rf_tensor_layer_of("blk.-1.x"), -1);
    assert_int_equal(rf_tensor_layer_of("blk.1234567890.x"), -1);
    assert_int_equal(rf_tensor_layer_of("output.weight"), -1);
    assert_int_equal(rf_tensor_layer_of(NULL), -1);
}

/*
 * The pin order. In order without spread. Spread: for n = 8 the reverse of
 * the van der Corput sequence 0 4 2 6 1 5 3 7 (worked by hand: j's three
 * bits reversed); for every n up to 200 a permutation, and for every m the
 * last m of it (what streams when n - m layers fit) leave no cyclic gap
 * between two of them over twice the even spacing ceil(n / m).
 */
static void test_layer_order(void **state)
{
    int32_t o[200];
    (void)state;
    o[0] = -7;
    rf_stream_layer_order(0, true, o); /* no layer: nothing written */
    assert_int_equal(o[0], -7);
    rf_stream_layer_order(8, false, o);
    for (int32_t l = 0; l < 8; l++)
        assert_int_equal(o[l], l);
    rf_stream_layer_order(8, true, o);
    const int32_t want[8] = {7, 3, 5, 1, 6, 2, 4, 0};
    assert_memory_equal(o, want, sizeof(want));
    for (int32_t n = 1; n <= 200; n++) {
        bool seen[200] = {false};
        rf_stream_layer_order(n, true, o);
        for (int32_t k = 0; k < n; k++) {
            assert_true(o[k] >= 0 && o[k] < n);
            assert_false(seen[o[k]]);
            seen[o[k]] = true;
        }
        for (int32_t m = 1; m <= n; m++) {
            bool streamed[200] = {false};
            for (int32_t k = n - m; k < n; k++)
                streamed[o[k]] = true;
            int32_t first = -1, prev = -1, widest = 0;
            for (int32_t l = 0; l < n; l++) {
                if (!streamed[l])
                    continue;
                if (prev >= 0 && l - prev > widest)
                    widest = l - prev;
                if (first < 0)
                    first = l;
                prev = l;
            }
            if (first + n - prev > widest) /* across the end of a token */
                widest = first + n - prev;
            assert_true(widest <= 2 * ((n + m - 1) / m));
        }
    }
}

/* A tensor named name at [off, off + len) of mapping 0. */
static struct rf_tensor_meta named(uint32_t index, const char *name, uint64_t off, uint64_t len,
                                   enum rf_weight_access access)
{
    struct rf_tensor_meta t = fixture_tensor(index, 0, off, len, access);
    snprintf(t.name, sizeof(t.name), "%s", name);
    return t;
}

/*
 * token_embd 40 MiB, then 4 layers of 2 tensors of 5 MiB (10 MiB a layer),
 * output_norm 4 KiB, output 20 MiB; all page aligned, file-backed. With
 * tied, there is no output tensor.
 *   W (untied) = 4 * 10 + 20 + 4 KiB (token_embd excluded)
 */
static void build_model(struct rf_inventory *inv, bool tied, enum rf_weight_access layer1)
{
    struct rf_tensor_meta t[12];
    uint64_t off = 0;
    uint32_t n = 0;
    char name[64];

    t[n] = named(n, "token_embd.weight", off, 40 * MIB, RF_ACCESS_FILE_BACKED);
    off += 40 * MIB;
    n++;
    for (int l = 0; l < 4; l++)
        for (int k = 0; k < 2; k++) {
            snprintf(name, sizeof(name), "blk.%d.%s.weight", l, k ? "ffn" : "attn");
            t[n] = named(n, name, off, 5 * MIB, l == 1 ? layer1 : RF_ACCESS_FILE_BACKED);
            off += 5 * MIB;
            n++;
        }
    t[n] = named(n, "output_norm.weight", off, PAGE, RF_ACCESS_FILE_BACKED);
    off += PAGE;
    n++;
    if (!tied) {
        t[n] = named(n, "output.weight", off, 20 * MIB, RF_ACCESS_FILE_BACKED);
        off += 20 * MIB;
        n++;
    }
    struct rf_mapping_meta m = fixture_mapping(0, off);
    rf_inventory_init(inv);
    assert_int_equal(rf_inventory_build(t, n, &m, 1, PAGE, 1, inv), 0);
}

static struct rf_stream_params params(uint64_t limit, uint64_t fixed, uint64_t window,
                                      uint64_t margin)
{
    struct rf_stream_params p;
    memset(&p, 0, sizeof(p));
    p.limit_bytes = limit;
    p.anonymous_bytes = fixed;
    p.window_bytes = window;
    p.margin_bytes = margin;
    return p;
}

static bool is_pinned(const struct rf_stream_plan *plan, const struct rf_inventory *inv,
                      const char *name)
{
    for (size_t i = 0; i < plan->n_pinned; i++)
        if (strcmp(inv->entries[plan->pinned[i]].name, name) == 0)
            return true;
    return false;
}

/* Budget 46 MiB: head and 2 layers (40 MiB + 4 KiB), then blk.2.attn (5 MiB) alone fits */
static void test_partial_layer(void **state)
{
    struct rf_inventory inv;
    struct rf_stream_plan plan;
    (void)state;
    build_model(&inv, false, RF_ACCESS_FILE_BACKED);
    rf_stream_plan_init(&plan);
    struct rf_stream_params p = params(101 * MIB, 30 * MIB, 20 * MIB, 5 * MIB);
    assert_int_equal(rf_stream_plan_build(&inv, &p, &plan), 0);
    assert_int_equal(plan.pin_budget_bytes, 46 * MIB);
    assert_int_equal(plan.layers_pinned, 2);
    assert_int_equal(plan.partial_layer_tensors, 1);
    assert_true(is_pinned(&plan, &inv, "blk.2.attn.weight"));
    assert_false(is_pinned(&plan, &inv, "blk.2.ffn.weight"));
    assert_false(is_pinned(&plan, &inv, "blk.3.attn.weight"));
    assert_int_equal(plan.pinned_bytes, 45 * MIB + PAGE);
    assert_int_equal(plan.streamed_bytes, 15 * MIB);
    assert_int_equal(plan.n_pinned, 7);
    assert_non_null(strstr(plan.reason, "2 of 4 layers (the first) and 1 tensor(s) of blk.2"));
    /* the streamed ranges are blk.2.ffn and blk.3: one run of 15 MiB */
    assert_int_equal(plan.n_stream_ranges, 1);
    assert_int_equal(rf_page_range_pages(plan.stream_ranges[0].pages), 15 * MIB / PAGE);
    rf_stream_plan_free(&plan);
    rf_inventory_free(&inv);
}

static void test_head_then_layers(void **state)
{
    struct rf_inventory inv;
    struct rf_stream_plan plan;
    (void)state;
    build_model(&inv, false, RF_ACCESS_FILE_BACKED);
    rf_stream_plan_init(&plan);
    /* limit 100 MiB, fixed 30, window 20, margin 5: budget 45 MiB =
       head (20 MiB + 4 KiB) + 2 layers (20 MiB); the third layer would be 50 MiB + 4 KiB */
    struct rf_stream_params p = params(100 * MIB, 30 * MIB, 20 * MIB, 5 * MIB);
    assert_int_equal(rf_stream_plan_build(&inv, &p, &plan), 0);
    assert_true(plan.fits);
    assert_int_equal(plan.working_set_bytes, 60 * MIB + PAGE);
    assert_int_equal(plan.resident_bytes, 65 * MIB);
    assert_int_equal(plan.pin_budget_bytes, 45 * MIB);
    assert_true(plan.head_pinned);
    assert_int_equal(plan.layers_pinned, 2);
    assert_int_equal(plan.n_layers, 4);
    assert_int_equal(plan.pinned_bytes, 40 * MIB + PAGE);
    assert_int_equal(plan.streamed_bytes, 20 * MIB);
    assert_int_equal(plan.largest_layer_bytes, 10 * MIB);
    assert_int_equal(plan.n_pinned, 6); /* 4 layer tensors, output_norm, output */
    assert_false(is_pinned(&plan, &inv, "token_embd.weight"));
    assert_true(is_pinned(&plan, &inv, "output.weight"));
    assert_true(is_pinned(&plan, &inv, "blk.1.ffn.weight"));
    assert_false(is_pinned(&plan, &inv, "blk.2.attn.weight"));
    /* contiguous: blk.0-1 [40, 60) MiB and output_norm + output [80 MiB, end) */
    assert_int_equal(plan.n_ranges, 2);
    assert_int_equal(plan.ranges[0].pages.first_page, 40 * MIB / PAGE);
    assert_int_equal(plan.ranges[0].pages.end_page, 60 * MIB / PAGE);
    /* what streams: blk.2-3, [60, 80) MiB */
    assert_int_equal(plan.n_stream_ranges, 1);
    assert_int_equal(plan.stream_ranges[0].pages.first_page, 60 * MIB / PAGE);
    assert_int_equal(plan.stream_ranges[0].pages.end_page, 80 * MIB / PAGE);
    rf_stream_plan_free(&plan);

    /* a budget of a whole model: nothing streams */
    p = params(1000 * MIB, 30 * MIB, 20 * MIB, 5 * MIB);
    assert_int_equal(rf_stream_plan_build(&inv, &p, &plan), 0);
    assert_int_equal(plan.layers_pinned, 4);
    assert_true(plan.nothing_streams);
    assert_int_equal(plan.pinned_bytes, plan.working_set_bytes);
    rf_stream_plan_free(&plan);
    rf_inventory_free(&inv);
}

/*
 * With the read-ahead (2 slots of the largest tensor, 5 MiB: a 10 MiB
 * window) the layers are tried in the spread order 3 1 2 0: limit 91 MiB,
 * fixed 30, margin 5, so the pin budget is 46 MiB: the head (20 MiB +
 * 4 KiB), blk.3 and blk.1 (20 MiB), then blk.2's attn alone (5 MiB); blk.0
 * and blk.2.ffn stream. token_embd is the rows range: [0, 40 MiB).
 */
static void test_spread_with_read_ahead(void **state)
{
    struct rf_inventory inv;
    struct rf_stream_plan plan;
    (void)state;
    build_model(&inv, false, RF_ACCESS_FILE_BACKED);
    rf_stream_plan_init(&plan);
    struct rf_stream_params p = params(91 * MIB, 30 * MIB, 0, 5 * MIB);
    p.read_ahead_slots = 2;
    assert_int_equal(rf_stream_plan_build(&inv, &p, &plan), 0);
    assert_int_equal(plan.window_bytes, 10 * MIB);
    assert_int_equal(plan.pin_budget_bytes, 46 * MIB);
    assert_true(plan.layers_spread);
    assert_int_equal(plan.layers_pinned, 2);
    assert_int_equal(plan.partial_layer, 2);
    assert_int_equal(plan.partial_layer_tensors, 1);
    assert_true(is_pinned(&plan, &inv, "blk.3.ffn.weight"));
    assert_true(is_pinned(&plan, &inv, "blk.1.attn.weight"));
    assert_true(is_pinned(&plan, &inv, "blk.2.attn.weight"));
    assert_false(is_pinned(&plan, &inv, "blk.2.ffn.weight"));
    assert_false(is_pinned(&plan, &inv, "blk.0.attn.weight"));
    assert_int_equal(plan.pinned_bytes, 45 * MIB + PAGE);
    assert_non_null(strstr(plan.reason, "2 of 4 layers (spread"));
    assert_non_null(strstr(plan.reason, "1 tensor(s) of blk.2"));
    /* streamed: blk.0 [40, 50) MiB and blk.2.ffn [65, 70) MiB */
    assert_int_equal(plan.n_stream_ranges, 2);
    assert_int_equal(plan.stream_ranges[0].pages.first_page, 40 * MIB / PAGE);
    assert_int_equal(plan.stream_ranges[1].pages.first_page, 65 * MIB / PAGE);
    assert_int_equal(plan.n_rows_ranges, 1);
    assert_int_equal(plan.rows_ranges[0].pages.first_page, 0);
    assert_int_equal(plan.rows_ranges[0].pages.end_page, 40 * MIB / PAGE);
    rf_stream_plan_free(&plan);
    assert_int_equal(plan.partial_layer, -1); /* freed: an empty plan */
    rf_inventory_free(&inv);
}

static void test_tied_embeddings_pinned(void **state)
{
    struct rf_inventory inv;
    struct rf_stream_plan plan;
    (void)state;
    build_model(&inv, true, RF_ACCESS_FILE_BACKED);
    rf_stream_plan_init(&plan);
    /* no output tensor: token_embd (40 MiB) is the output projection, read whole */
    struct rf_stream_params p = params(200 * MIB, 10 * MIB, 20 * MIB, 5 * MIB);
    assert_int_equal(rf_stream_plan_build(&inv, &p, &plan), 0);
    assert_int_equal(plan.working_set_bytes, 80 * MIB + PAGE);
    assert_true(is_pinned(&plan, &inv, "token_embd.weight"));
    assert_true(plan.head_pinned);
    assert_int_equal(plan.n_rows_ranges, 0); /* read whole: not a rows range */
    rf_stream_plan_free(&plan);
    rf_inventory_free(&inv);
}

static void test_anonymous_never_pinned(void **state)
{
    struct rf_inventory inv;
    struct rf_stream_plan plan;
    (void)state;
    /* layer 1 is read from an anonymous (repacked) copy: its file pages are not pinned,
       and it costs nothing in the budget, so layer 2 follows */
    build_model(&inv, false, RF_ACCESS_ANONYMOUS);
    rf_stream_plan_init(&plan);
    struct rf_stream_params p = params(100 * MIB, 30 * MIB, 20 * MIB, 5 * MIB);
    assert_int_equal(rf_stream_plan_build(&inv, &p, &plan), 0);
    assert_false(is_pinned(&plan, &inv, "blk.1.attn.weight"));
    assert_false(is_pinned(&plan, &inv, "blk.1.ffn.weight"));
    assert_true(is_pinned(&plan, &inv, "blk.2.ffn.weight"));
    assert_int_equal(plan.layers_pinned, 3);
    assert_int_equal(plan.working_set_bytes, 50 * MIB + PAGE);
    for (size_t i = 0; i < plan.n_ranges; i++) {
        /* [50, 60) MiB is layer 1's */
        assert_true(plan.ranges[i].pages.end_page <= 50 * MIB / PAGE ||
                    plan.ranges[i].pages.first_page >= 60 * MIB / PAGE);
    }
    rf_stream_plan_free(&plan);
    rf_inventory_free(&inv);
}

static void test_does_not_fit(void **state)
{
    struct rf_inventory inv;
    struct rf_stream_plan plan;
    (void)state;
    build_model(&inv, false, RF_ACCESS_FILE_BACKED);
    rf_stream_plan_init(&plan);
    /* fixed 90 + min window 16 (max(10 MiB layer, 16 MiB floor)) + margin 5 > 100 */
    struct rf_stream_params p = params(100 * MIB, 90 * MIB, 0, 5 * MIB);
    assert_int_equal(rf_stream_plan_build(&inv, &p, &plan), 0);
    assert_false(plan.fits);
    assert_int_equal(plan.min_window_bytes, 16 * MIB);
    assert_int_equal(plan.n_pinned, 0);
    assert_int_equal(plan.n_ranges, 0);
    assert_int_equal(plan.pinned_bytes, 0);
    assert_int_equal(plan.streamed_bytes, plan.working_set_bytes);
    rf_stream_plan_free(&plan);
    /* fixed 79: 79 + 16 + 5 = 100 fits; default window 32 MiB leaves no pin budget
       (100 - 5 - 79 = 16 < 32) */
    p = params(100 * MIB, 79 * MIB, 0, 5 * MIB);
    assert_int_equal(rf_stream_plan_build(&inv, &p, &plan), 0);
    assert_true(plan.fits);
    assert_int_equal(plan.window_bytes, 32 * MIB);
    assert_int_equal(plan.pin_budget_bytes, 0);
    assert_int_equal(plan.n_pinned, 0);
    rf_stream_plan_free(&plan);
    rf_inventory_free(&inv);
}

static void test_errors_and_overflow(void **state)
{
    struct rf_inventory inv;
    struct rf_stream_plan plan;
    (void)state;
    build_model(&inv, false, RF_ACCESS_FILE_BACKED);
    rf_stream_plan_init(&plan);
    struct rf_stream_params p = params(100 * MIB, UINT64_MAX - 1, 0, 0);
    p.kv_bytes = 2;
    assert_int_equal(rf_stream_plan_build(&inv, &p, &plan), -EOVERFLOW);
    assert_int_equal(plan.n_pinned, 0);
    assert_null(plan.pinned);
    p = params(UINT64_MAX, UINT64_MAX - 10 * MIB, 0, 0);
    /* fixed + min window overflows */
    assert_int_equal(rf_stream_plan_build(&inv, &p, &plan), -EOVERFLOW);
    p = params(0, 0, 0, 0);
    assert_int_equal(rf_stream_plan_build(&inv, &p, &plan), -EINVAL);
    assert_int_equal(rf_stream_plan_build(NULL, &p, &plan), -EINVAL);
    assert_int_equal(rf_stream_plan_build(&inv, NULL, &plan), -EINVAL);
    assert_int_equal(rf_stream_plan_build(&inv, &p, NULL), -EINVAL);
    assert_int_equal(rf_stream_default_window(UINT64_MAX), UINT64_MAX);
    assert_int_equal(rf_stream_default_window(1), RF_STREAM_MIN_WINDOW_BYTES);
    assert_int_equal(rf_stream_default_margin(6400 * MIB), 100 * MIB);
    assert_int_equal(rf_stream_default_margin(MIB), RF_STREAM_MIN_MARGIN_BYTES);
    rf_inventory_free(&inv);
}

/*
 * Random inventories: tensors of random names (layers, head, token_embd),
 * random sizes and offsets (overlapping pages), accesses and mappings
 * (some not validated). Checked against a per-page bool array. Pages of
 * 1 MiB keep the model sizes (64 to 575 MiB) at the scale of the default
 * window and margin floors.
 */
#define RPAGE MIB

static void test_random(void **state)
{
    (void)state;
    int pinned_some = 0, pinned_none = 0;
    rng_state = 12;
    for (int iter = 0; iter < 400; iter++) {
        struct rf_tensor_meta t[40];
        struct rf_mapping_meta m[2];
        uint32_t n = 1 + (uint32_t)rng_below(40);
        uint64_t size = (64 + rng_below(512)) * RPAGE;
        for (uint32_t k = 0; k < 2; k++) {
            m[k] = fixture_mapping(k, size);
            m[k].validated = rng_below(5) != 0;
        }
        for (uint32_t i = 0; i < n; i++) {
            uint64_t off = rng_below(size - RPAGE), len = 1 + rng_below(size - off);
            static const enum rf_weight_access acc[] = {
                RF_ACCESS_FILE_BACKED, RF_ACCESS_FILE_BACKED,  RF_ACCESS_FILE_BACKED,
                RF_ACCESS_ANONYMOUS,   RF_ACCESS_UNREFERENCED, RF_ACCESS_UNKNOWN};
            t[i] = fixture_tensor(i, (int32_t)rng_below(2), off, len, acc[rng_below(6)]);
            switch (rng_below(5)) {
            case 0:
                snprintf(t[i].name, sizeof(t[i].name), "token_embd.weight");
                break;
            case 1:
                snprintf(t[i].name, sizeof(t[i].name), "output.weight");
                break;
            default:
                snprintf(t[i].name, sizeof(t[i].name), "blk.%u.w%u", (unsigned)rng_below(6), i);
            }
        }
        struct rf_inventory inv;
        rf_inventory_init(&inv);
        assert_int_equal(rf_inventory_build(t, n, m, 2, RPAGE, 1, &inv), 0);
        struct rf_stream_params p = {
            .limit_bytes = 1 + rng_below(2 * size),
            .anonymous_bytes = rng_below(size / 2),
            .kv_bytes = rng_below(size / 8),
            .scratch_bytes = rng_below(size / 8),
            .runtime_bytes = rng_below(size / 8),
            .window_bytes = rng_below(3) ? rng_below(size / 4) : 0,
            .margin_bytes = rng_below(3) ? rng_below(size / 16) : 0,
        };
        if (p.window_bytes == 0 && rng_below(2))
            p.read_ahead_slots = 2 + (uint32_t)rng_below(7); /* the spread order */
        struct rf_stream_plan plan;
        rf_stream_plan_init(&plan);
        assert_int_equal(rf_stream_plan_build(&inv, &p, &plan), 0);

        /* the budget: pinned + fixed + window + margin <= limit whenever anything is pinned */
        assert_true(plan.pinned_bytes <= plan.pin_budget_bytes);
        if (plan.pinned_bytes > 0) {
            assert_true(plan.fits);
            assert_true(plan.pinned_bytes + plan.fixed_bytes + plan.window_bytes +
                            plan.margin_bytes <=
                        p.limit_bytes);
        }
        /* naive model: pages of the pinned entries, per mapping */
        bool naive[2][600] = {{false}}, got[2][600] = {{false}};
        for (size_t k = 0; k < plan.n_pinned; k++) {
            const struct rf_inventory_entry *e = &inv.entries[plan.pinned[k]];
            assert_true(e->file_backed);
            assert_int_equal(e->access, RF_ACCESS_FILE_BACKED);
            assert_int_equal(e->eligibility, RF_ELIGIBLE);
            assert_true(m[e->mapping_index].validated);
            for (uint64_t pg = e->pages.first_page; pg < e->pages.end_page; pg++)
                naive[e->mapping_index][pg] = true;
        }
        uint64_t pages = 0;
        for (size_t k = 0; k < plan.n_ranges; k++) {
            const struct rf_file_range *r = &plan.ranges[k];
            assert_true(r->pages.end_page > r->pages.first_page);
            for (uint64_t pg = r->pages.first_page; pg < r->pages.end_page; pg++) {
                assert_false(got[r->mapping_index][pg]);
                got[r->mapping_index][pg] = true;
                pages++;
            }
        }
        assert_memory_equal(naive, got, sizeof(naive));
        /* naive W minus the pinned pages: the streamed ranges, disjoint and in order */
        bool has_output = false, w[2][600] = {{false}}, streamed[2][600] = {{false}};
        for (size_t k = 0; k < inv.n; k++)
            has_output |= strcmp(inv.entries[k].name, "output.weight") == 0;
        for (size_t k = 0; k < inv.n; k++) {
            const struct rf_inventory_entry *e = &inv.entries[k];
            if (!e->file_backed || e->access != RF_ACCESS_FILE_BACKED ||
                (has_output && strcmp(e->name, "token_embd.weight") == 0))
                continue;
            for (uint64_t pg = e->pages.first_page; pg < e->pages.end_page; pg++)
                w[e->mapping_index][pg] = !naive[e->mapping_index][pg];
        }
        for (size_t k = 0; k < plan.n_stream_ranges; k++) {
            const struct rf_file_range *r = &plan.stream_ranges[k];
            assert_true(r->pages.end_page > r->pages.first_page);
            if (k > 0 && plan.stream_ranges[k - 1].mapping_index == r->mapping_index)
                assert_true(plan.stream_ranges[k - 1].pages.end_page <= r->pages.first_page);
            for (uint64_t pg = r->pages.first_page; pg < r->pages.end_page; pg++) {
                assert_false(streamed[r->mapping_index][pg]);
                streamed[r->mapping_index][pg] = true;
            }
        }
        assert_memory_equal(w, streamed, sizeof(w));
        /* naive rows: token_embd's pages when an output tensor exists (eligible file pages) */
        bool rows[2][600] = {{false}}, rows_got[2][600] = {{false}};
        for (size_t k = 0; has_output && k < inv.n; k++) {
            const struct rf_inventory_entry *e = &inv.entries[k];
            if (e->file_backed && e->access == RF_ACCESS_FILE_BACKED &&
                e->eligibility == RF_ELIGIBLE && strcmp(e->name, "token_embd.weight") == 0)
                for (uint64_t pg = e->pages.first_page; pg < e->pages.end_page; pg++)
                    rows[e->mapping_index][pg] = true;
        }
        for (size_t k = 0; k < plan.n_rows_ranges; k++)
            for (uint64_t pg = plan.rows_ranges[k].pages.first_page;
                 pg < plan.rows_ranges[k].pages.end_page; pg++)
                rows_got[plan.rows_ranges[k].mapping_index][pg] = true;
        assert_memory_equal(rows, rows_got, sizeof(rows));
        assert_int_equal(pages * RPAGE, plan.pinned_bytes);
        assert_true(plan.streamed_bytes + plan.pinned_bytes == plan.working_set_bytes);
        if (plan.n_pinned)
            pinned_some++;
        else
            pinned_none++;
        rf_stream_plan_free(&plan);
        rf_inventory_free(&inv);
    }
    /* the cases cover both outcomes */
    assert_true(pinned_some > 40);
    assert_true(pinned_none > 40);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layer_of),
        cmocka_unit_test(test_layer_order),
        cmocka_unit_test(test_spread_with_read_ahead),
        cmocka_unit_test(test_head_then_layers),
        cmocka_unit_test(test_partial_layer),
        cmocka_unit_test(test_tied_embeddings_pinned),
        cmocka_unit_test(test_anonymous_never_pinned),
        cmocka_unit_test(test_does_not_fit),
        cmocka_unit_test(test_errors_and_overflow),
        cmocka_unit_test(test_random),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
