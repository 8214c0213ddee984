/*
 * Tests for the experts of a MoE model (experts.h): the routed tensor
 * names, per-expert slices worked out on paper and checked against a naive
 * per-byte page model over seeded random cases, the dense / routed split
 * of a hand-made inventory, and what one token reads against a naive
 * per-page union.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "ramforge/core/admission.h"
#include "ramforge/core/experts.h"
#include "test_util.h"

#define PAGE 4096

static void test_names(void **state)
{
    (void)state;
    assert_true(rf_expert_tensor_name("blk.0.ffn_gate_exps.weight"));
    assert_true(rf_expert_tensor_name("blk.12.ffn_up_exps.weight"));
    assert_true(rf_expert_tensor_name("blk.3.ffn_down_exps.weight"));
    assert_true(rf_expert_tensor_name("blk.3.ffn_gate_up_exps.weight"));
    assert_true(rf_expert_tensor_name("blk.3.ffn_down_exps.bias"));
    assert_false(rf_expert_tensor_name("blk.3.ffn_gate_shexp.weight"));  /* shared: dense */
    assert_false(rf_expert_tensor_name("blk.3.ffn_gate_inp.weight"));    /* the router */
    assert_false(rf_expert_tensor_name("blk.3.ffn_gate_chexps.weight")); /* not "_exps" */
    assert_false(rf_expert_tensor_name("blk.3.attn_exps.weight"));       /* not ffn_ */
    assert_false(rf_expert_tensor_name("blk.3.ffn_exps.weight"));        /* no kind */
    assert_false(rf_expert_tensor_name("blk.3.ffn_gate_exps"));          /* no dot after */
    assert_false(rf_expert_tensor_name("output.ffn_gate_exps.weight"));  /* not a layer */
    assert_false(rf_expert_tensor_name("blk.x.ffn_gate_exps.weight"));
    assert_false(rf_expert_tensor_name(NULL));
}

/*
 * A tensor at 4000 with slices of 34816 bytes (8.5 pages):
 *   e0 [4000, 38816)   pages [0, 10)  first page shared (0..3999 precede it), last too
 *   e1 [38816, 73632)  pages [9, 18)  9 shared with e0; 73632 = 17.97.. pages: 17 shared
 *   e2 [73632, 108448) pages [17, 27)
 * An aligned tensor at 8192 with 8192-byte slices shares nothing.
 */
static void test_slice_paper(void **state)
{
    struct rf_expert_slice s;
    (void)state;

    assert_int_equal(rf_expert_slice_of(4000, 34816, 0, PAGE, &s), 0);
    assert_int_equal(s.file_offset_bytes, 4000);
    assert_int_equal(s.bytes, 34816);
    assert_int_equal(s.pages.first_page, 0);
    assert_int_equal(s.pages.end_page, 10);
    assert_true(s.shared_first && s.shared_last);
    assert_int_equal(s.shared_page_bytes, 2 * PAGE);

    assert_int_equal(rf_expert_slice_of(4000, 34816, 1, PAGE, &s), 0);
    assert_int_equal(s.expert, 1);
    assert_int_equal(s.file_offset_bytes, 38816);
    assert_int_equal(s.pages.first_page, 9);
    assert_int_equal(s.pages.end_page, 18);

    assert_int_equal(rf_expert_slice_of(4000, 34816, 2, PAGE, &s), 0);
    assert_int_equal(s.pages.first_page, 17);
    assert_int_equal(s.pages.end_page, 27);

    assert_int_equal(rf_expert_slice_of(8192, 8192, 3, PAGE, &s), 0);
    assert_int_equal(s.file_offset_bytes, 8192 + 3 * 8192);
    assert_int_equal(s.pages.first_page, 8);
    assert_int_equal(s.pages.end_page, 10);
    assert_false(s.shared_first || s.shared_last);
    assert_int_equal(s.shared_page_bytes, 0);

    /* both edges inside one page: that page once */
    assert_int_equal(rf_expert_slice_of(100, 200, 0, PAGE, &s), 0);
    assert_int_equal(rf_page_range_pages(s.pages), 1);
    assert_int_equal(s.shared_page_bytes, PAGE);

    /* an empty slice has no page */
    assert_int_equal(rf_expert_slice_of(100, 0, 5, PAGE, &s), 0);
    assert_int_equal(rf_page_range_pages(s.pages), 0);
    assert_int_equal(s.shared_page_bytes, 0);

    assert_int_equal(rf_expert_slice_of(0, 1, 0, 3000, &s), -EINVAL);
    assert_int_equal(rf_expert_slice_of(0, 1, 0, 0, &s), -EINVAL);
    assert_int_equal(rf_expert_slice_of(0, 1, 0, PAGE, NULL), -EINVAL);
    assert_int_equal(rf_expert_slice_of(UINT64_MAX - 10, 8, 1, PAGE, &s), -EOVERFLOW);
    assert_int_equal(rf_expert_slice_of(0, UINT64_MAX / 2 + 1, 2, PAGE, &s), -EOVERFLOW);
}

/* Seeded random slices against a per-byte model: which pages the bytes touch, which are partial. */
static void test_slice_random(void **state)
{
    (void)state;
    rng_state = 33;
    for (int round = 0; round < 2000; round++) {
        uint64_t page = 1ull << (9 + rng_below(5)); /* 512 .. 8192 */
        uint64_t off = rng_below(64 * page), slice = 1 + rng_below(6 * page);
        uint32_t e = (uint32_t)rng_below(8);
        uint64_t start = off + e * slice, end = start + slice;
        struct rf_expert_slice s;

        assert_int_equal(rf_expert_slice_of(off, slice, e, page, &s), 0);
        assert_int_equal(s.file_offset_bytes, start);
        /* naive: the pages holding bytes of the slice; a page is shared when one of its bytes
           lies outside [start, end) */
        uint64_t first = UINT64_MAX, last = 0, shared = 0;
        for (uint64_t b = start; b < end; b++) {
            uint64_t p = b / page;
            if (first == UINT64_MAX)
                first = p;
            if (p != last || b == start) {
                last = p;
                shared += p * page < start || (p + 1) * page > end;
            }
        }
        assert_int_equal(s.pages.first_page, first);
        assert_int_equal(s.pages.end_page, last + 1);
        assert_int_equal(s.shared_page_bytes, shared * page);
        assert_int_equal(s.shared_first, first * page < start);
        assert_int_equal(s.shared_last, (last + 1) * page > end);
    }
}

static void test_share(void **state)
{
    uint64_t v;
    (void)state;

    assert_int_equal(rf_expert_share(640, 8, 64, &v), 0);
    assert_int_equal(v, 80);
    assert_int_equal(rf_expert_share(641, 8, 64, &v), 0);
    assert_int_equal(v, 81); /* 80.125 rounded up */
    assert_int_equal(rf_expert_share(UINT64_MAX, 8, 64, &v), 0);
    assert_int_equal(v, 1ull << 61); /* (2^64 - 1) / 8 rounded up, no 128-bit product */
    assert_int_equal(rf_expert_share(UINT64_MAX, 64, 64, &v), 0);
    assert_int_equal(v, UINT64_MAX);
    assert_int_equal(rf_expert_share(100, 0, 0, &v), 0);
    assert_int_equal(v, 0);
    assert_int_equal(rf_expert_share(100, 9, 8, &v), -EINVAL);
    assert_int_equal(rf_expert_share(100, 1, 8, NULL), -EINVAL);
}

/*
 * One layer of a 4-expert model, 4 KiB pages, file of 65536 bytes:
 *   0 token_embd          [0, 4096)        dense (unreferenced: not read per token)
 *   1 blk.0.attn_q        [4096, 6000)     dense
 *   2 blk.0.ffn_gate_inp  [6000, 7000)     dense (the router)
 *   3 blk.0.ffn_gate_exps [7000, 27000)    4 slices of 5000: edges 12000, 17000, 22000
 *                                          in pages 2, 4, 5: 3 interior shared pages
 *   4 blk.0.ffn_up_exps   [28672, 45056)   4 slices of 4096, aligned: none shared
 *   5 blk.0.ffn_down_exps [45056, 45059)   3 bytes: not a multiple of 4, so dense
 *   6 blk.0.ffn_up_shexp  [49152, 53248)   dense (the shared expert)
 */
static void build_layer(struct rf_inventory *inv, enum rf_weight_access up_access)
{
    struct rf_tensor_meta t[] = {
        fixture_tensor(0, 0, 0, 4096, RF_ACCESS_UNREFERENCED),
        fixture_tensor(1, 0, 4096, 1904, RF_ACCESS_FILE_BACKED),
        fixture_tensor(2, 0, 6000, 1000, RF_ACCESS_FILE_BACKED),
        fixture_tensor(3, 0, 7000, 20000, RF_ACCESS_FILE_BACKED),
        fixture_tensor(4, 0, 28672, 16384, up_access),
        fixture_tensor(5, 0, 45056, 3, RF_ACCESS_FILE_BACKED),
        fixture_tensor(6, 0, 49152, 4096, RF_ACCESS_FILE_BACKED),
    };
    static const char *names[] = {
        "token_embd.weight",          "blk.0.attn_q.weight",      "blk.0.ffn_gate_inp.weight",
        "blk.0.ffn_gate_exps.weight", "blk.0.ffn_up_exps.weight", "blk.0.ffn_down_exps.weight",
        "blk.0.ffn_up_shexp.weight",
    };
    struct rf_mapping_meta m = fixture_mapping(0, 65536);
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
        snprintf(t[i].name, sizeof(t[i].name), "%s", names[i]);
    rf_inventory_init(inv);
    assert_int_equal(rf_inventory_build(t, sizeof(t) / sizeof(t[0]), &m, 1, PAGE, 1, inv), 0);
}

static void test_map_paper(void **state)
{
    struct rf_inventory inv;
    struct rf_expert_map m;
    uint64_t dense, routed, total;
    (void)state;

    build_layer(&inv, RF_ACCESS_FILE_BACKED);
    rf_expert_map_init(&m);
    assert_int_equal(rf_expert_map_build(&inv, 4, 1, &m), 0);
    assert_int_equal(m.n, 2);
    assert_int_equal(m.tensors[0].tensor_index, 3);
    assert_int_equal(m.tensors[0].layer, 0);
    assert_int_equal(m.tensors[0].slice_bytes, 5000);
    assert_int_equal(m.tensors[0].edge_shared_pages, 3);
    assert_true(m.tensors[0].file_read);
    assert_int_equal(m.tensors[1].tensor_index, 4);
    assert_int_equal(m.tensors[1].slice_bytes, 4096);
    assert_int_equal(m.tensors[1].edge_shared_pages, 0);
    assert_int_equal(m.routed_bytes, 20000 + 16384);
    assert_int_equal(m.dense_bytes, 4096 + 1904 + 1000 + 3 + 4096);
    assert_int_equal(m.token_routed_bytes, (20000 + 16384) / 4);
    assert_int_equal(m.edge_shared_bytes, 3 * PAGE);

    /*
     * A token: dense pages 1 (attn_q, router: [4096, 7000) = pages 1), 11 (down_exps),
     * 12 (shexp) = 3 pages; the routed tensors' pages: gate [7000, 27000) = pages 1..6,
     * page 1 dense already: 5 (2..6), up pages 7..10 = 4: 9 pages, a quarter rounded up: 3.
     */
    assert_int_equal(rf_expert_token_read(&inv, &m, &dense, &routed, &total), 0);
    assert_int_equal(dense, 3 * PAGE);
    assert_int_equal(routed, (9 * PAGE + 3) / 4);
    assert_int_equal(total, dense + routed);

    /* A repacked routed tensor is not read from the file: not in a token's file read. */
    rf_inventory_free(&inv);
    build_layer(&inv, RF_ACCESS_ANONYMOUS);
    assert_int_equal(rf_expert_map_build(&inv, 4, 1, &m), 0);
    assert_false(m.tensors[1].file_read);
    assert_int_equal(rf_expert_token_read(&inv, &m, &dense, &routed, &total), 0);
    assert_int_equal(dense, 3 * PAGE);
    assert_int_equal(routed, (5 * PAGE + 3) / 4);

    /* A dense model: no expert tensor, every byte dense, a token reads every read page. */
    assert_int_equal(rf_expert_map_build(&inv, 0, 0, &m), 0);
    assert_int_equal(m.n, 0);
    assert_int_equal(m.routed_bytes, 0);
    assert_int_equal(m.dense_bytes, inv.totals.logical_bytes);
    assert_int_equal(rf_expert_token_read(&inv, &m, &dense, &routed, &total), 0);
    uint64_t ws;
    assert_int_equal(rf_admission_file_working_set(&inv, &ws), 0);
    assert_int_equal(total, ws);
    assert_int_equal(routed, 0);

    assert_int_equal(rf_expert_map_build(&inv, 4, 5, &m), -EINVAL);
    assert_int_equal(rf_expert_map_build(NULL, 4, 1, &m), -EINVAL);
    assert_int_equal(rf_expert_token_read(&inv, NULL, &dense, &routed, &total), -EINVAL);
    rf_expert_map_free(&m);
    rf_expert_map_free(NULL);
    rf_inventory_free(&inv);
}

/* Random expert layouts: a token's read against a per-page union computed here. */
static void test_token_read_random(void **state)
{
    (void)state;
    rng_state = 3333;
    for (int round = 0; round < 300; round++) {
        struct rf_tensor_meta t[12];
        struct rf_inventory inv;
        struct rf_expert_map m;
        uint32_t n_expert = 1 + (uint32_t)rng_below(16), k = (uint32_t)rng_below(n_expert + 1);
        uint64_t off = rng_below(3 * PAGE);
        bool dense_page[256] = {false}, routed_page[256] = {false};
        size_t n = sizeof(t) / sizeof(t[0]);

        for (size_t i = 0; i < n; i++) {
            bool routed = rng_below(2);
            uint64_t len = routed ? n_expert * (1 + rng_below(PAGE)) : 1 + rng_below(2 * PAGE);
            enum rf_weight_access a = rng_below(5) ? RF_ACCESS_FILE_BACKED : RF_ACCESS_ANONYMOUS;
            t[i] = fixture_tensor((uint32_t)i, 0, off, len, a);
            snprintf(t[i].name, sizeof(t[i].name), "blk.%zu.%s.weight", i,
                     routed ? "ffn_up_exps" : "ffn_up");
            for (uint64_t p = off / PAGE; a == RF_ACCESS_FILE_BACKED && p * PAGE < off + len; p++)
                (routed ? routed_page : dense_page)[p] = true;
            off += len + rng_below(PAGE);
        }
        struct rf_mapping_meta mm = fixture_mapping(0, off + PAGE);
        rf_inventory_init(&inv);
        rf_expert_map_init(&m);
        assert_int_equal(rf_inventory_build(t, n, &mm, 1, PAGE, 1, &inv), 0);
        assert_int_equal(rf_expert_map_build(&inv, n_expert, k, &m), 0);
        uint64_t d = 0, r = 0, dense, routed, total;
        for (size_t p = 0; p < 256; p++) {
            d += dense_page[p];
            r += routed_page[p] && !dense_page[p];
        }
        assert_int_equal(rf_expert_token_read(&inv, &m, &dense, &routed, &total), 0);
        assert_int_equal(dense, d * PAGE);
        assert_int_equal(routed, (r * PAGE * k + n_expert - 1) / n_expert);
        assert_int_equal(total, dense + routed);
        rf_expert_map_free(&m);
        rf_inventory_free(&inv);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),        cmocka_unit_test(test_slice_paper),
        cmocka_unit_test(test_slice_random), cmocka_unit_test(test_share),
        cmocka_unit_test(test_map_paper),    cmocka_unit_test(test_token_read_random),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
