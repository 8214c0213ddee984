/*
 * Tests for the residency picture: where tensor names are placed, and the
 * cell figures a hand-made inventory with two hand-made snapshots gives
 * (read back from the data-* attributes of the SVG text), escaping,
 * argument checks and the atomic file write.
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
#include <unistd.h>

#include "ramforge/core/inventory.h"
#include "ramforge/core/residency.h"
#include "ramforge/core/residency_svg.h"
#include "test_util.h"

#define PAGE 16u /* bytes per page in these tests */

static void test_place(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        enum rf_svg_row_group group;
        uint32_t layer;
        enum rf_svg_kind kind;
    } cases[] = {
        {"blk.0.attn_q.weight", RF_SVG_ROW_LAYER, 0, RF_SVG_ATTN_Q},
        {"blk.21.attn_output.weight", RF_SVG_ROW_LAYER, 21, RF_SVG_ATTN_OUTPUT},
        {"blk.3.ffn_down.weight", RF_SVG_ROW_LAYER, 3, RF_SVG_FFN_DOWN},
        {"blk.3.ffn_gate", RF_SVG_ROW_LAYER, 3, RF_SVG_FFN_GATE},
        {"blk.7.attn_norm.weight", RF_SVG_ROW_LAYER, 7, RF_SVG_NORMS},
        {"blk.7.ffn_norm.weight", RF_SVG_ROW_LAYER, 7, RF_SVG_NORMS},
        {"blk.7.attn_q_norm.weight", RF_SVG_ROW_LAYER, 7, RF_SVG_NORMS},
        {"blk.2.attn_qkv.weight", RF_SVG_ROW_LAYER, 2, RF_SVG_OTHER},
        {"blk.2.attn_q.bias", RF_SVG_ROW_LAYER, 2, RF_SVG_ATTN_Q},
        {"blk.65535.ffn_up.weight", RF_SVG_ROW_LAYER, 65535, RF_SVG_FFN_UP},
        {"blk.65536.ffn_up.weight", RF_SVG_ROW_OTHER, 0, RF_SVG_OTHER},
        {"blk.99999999999999999999.ffn_up.weight", RF_SVG_ROW_OTHER, 0, RF_SVG_OTHER},
        {"blk.x.ffn_up.weight", RF_SVG_ROW_OTHER, 0, RF_SVG_OTHER},
        {"blk.4", RF_SVG_ROW_OTHER, 0, RF_SVG_OTHER},
        {"token_embd.weight", RF_SVG_ROW_EMBEDDINGS, 0, RF_SVG_OTHER},
        {"token_embd_norm.weight", RF_SVG_ROW_EMBEDDINGS, 0, RF_SVG_NORMS},
        {"output.weight", RF_SVG_ROW_OUTPUT, 0, RF_SVG_OTHER},
        {"output_norm.weight", RF_SVG_ROW_OUTPUT, 0, RF_SVG_NORMS},
        {"rope_freqs.weight", RF_SVG_ROW_OTHER, 0, RF_SVG_OTHER},
        {"", RF_SVG_ROW_OTHER, 0, RF_SVG_OTHER},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct rf_svg_place p = rf_residency_svg_place(cases[i].name);
        if (p.group != cases[i].group || p.layer != cases[i].layer || p.kind != cases[i].kind)
            fail_msg("%s: group %d layer %u kind %d", cases[i].name, p.group, p.layer, p.kind);
    }
    assert_int_equal(rf_residency_svg_place(NULL).group, RF_SVG_ROW_OTHER);
    assert_string_equal(rf_svg_kind_name(RF_SVG_ATTN_OUTPUT), "attn_output");
    assert_string_equal(rf_svg_kind_name(RF_SVG_NORMS), "norms");
    assert_null(rf_svg_kind_name(RF_SVG_N_KINDS));
}

/* The model of these tests: name, first page, pages (PAGE bytes each). */
static const struct {
    const char *name;
    uint64_t first, pages;
} model[] = {
    {"token_embd.weight", 0, 4},      {"blk.0.attn_q.weight", 4, 2},
    {"blk.0.attn_norm.weight", 6, 1}, {"blk.0.ffn_norm.weight", 7, 1},
    {"blk.1.ffn_down.weight", 8, 3},  {"output.weight", 11, 2},
};
#define N_MODEL (sizeof(model) / sizeof(model[0]))

static void build_inventory(struct rf_inventory *inv)
{
    struct rf_tensor_meta t[N_MODEL];
    struct rf_mapping_meta m = fixture_mapping(0, 16 * PAGE);
    for (size_t i = 0; i < N_MODEL; i++) {
        t[i] = fixture_tensor((uint32_t)i, 0, model[i].first * PAGE, model[i].pages * PAGE,
                              RF_ACCESS_FILE_BACKED);
        snprintf(t[i].name, sizeof(t[i].name), "%s", model[i].name);
    }
    rf_inventory_init(inv);
    assert_int_equal(rf_inventory_build(t, N_MODEL, &m, 1, PAGE, 1, inv), 0);
}

/* A snapshot of inv with resident[i] resident and unknown[i] unknown pages per tensor. */
static void make_snapshot(const struct rf_inventory *inv, const uint64_t *resident,
                          const uint64_t *unknown, const char *source,
                          struct rf_residency_snapshot *s)
{
    rf_residency_snapshot_init(s);
    s->resources = calloc(inv->n, sizeof(*s->resources));
    assert_non_null(s->resources);
    s->n = inv->n;
    s->generation = inv->generation;
    s->page_bytes = PAGE;
    snprintf(s->source, sizeof(s->source), "%s", source);
    for (size_t i = 0; i < inv->n; i++) {
        struct rf_residency_resource *r = &s->resources[i];
        const struct rf_inventory_entry *e = &inv->entries[i];
        uint64_t pages = e->pages.end_page - e->pages.first_page;
        r->key = e->key;
        r->mapping_index = e->mapping_index;
        r->pages = e->pages;
        r->resident_pages = resident[i];
        r->unknown_pages = unknown[i];
        r->nonresident_pages = pages - resident[i] - unknown[i];
        r->inspected_pages = pages - unknown[i];
    }
}

static void render(const struct rf_inventory *inv, const struct rf_residency_svg_boundary *b,
                   size_t nb, const char *title, char **svg)
{
    struct rf_residency_svg_params p = {
        .title = title, .inventory = inv, .boundaries = b, .n_boundaries = nb};
    size_t len = 0;
    *svg = NULL;
    assert_int_equal(rf_residency_svg_render(&p, svg, &len), 0);
    assert_non_null(*svg);
    assert_int_equal(len, strlen(*svg));
}

/* The figures of the cell (boundary, row, kind) must read exactly `want`. */
static void expect_cell(const char *svg, const char *boundary, const char *row, const char *kind,
                        const char *want)
{
    char key[160];
    snprintf(key, sizeof(key), "data-boundary=\"%s\" data-row=\"%s\" data-kind=\"%s\" ", boundary,
             row, kind);
    const char *at = strstr(svg, key);
    if (!at)
        fail_msg("no cell %s", key);
    if (strncmp(at + strlen(key), want, strlen(want)) != 0)
        fail_msg("cell %s: %.120s, want %s", key, at + strlen(key), want);
    if (strstr(at + 1, key))
        fail_msg("cell %s twice", key);
}

/* Where needle first occurs in s; SIZE_MAX if nowhere. */
static size_t offset_of(const char *s, const char *needle)
{
    const char *at = strstr(s, needle);
    return at ? (size_t)(at - s) : SIZE_MAX;
}

static void test_cells(void **state)
{
    (void)state;
    struct rf_inventory inv;
    struct rf_residency_snapshot load, rel;
    /* after_load: all resident; after_release: figures chosen per tensor */
    static const uint64_t all[N_MODEL] = {4, 2, 1, 1, 3, 2}, none[N_MODEL] = {0};
    static const uint64_t res[N_MODEL] = {1, 0, 1, 0, 0, 2}, unk[N_MODEL] = {0, 0, 0, 0, 3, 0};

    build_inventory(&inv);
    make_snapshot(&inv, all, none, "mincore", &load);
    make_snapshot(&inv, res, unk, "mincore", &rel);
    struct rf_residency_svg_boundary b[] = {{"after_load", &load}, {"after_release", &rel}};
    char *svg;
    render(&inv, b, 2, "m<1>&.gguf", &svg);

    assert_non_null(strstr(svg, "<svg xmlns=\"http://www.w3.org/2000/svg\""));
    assert_non_null(strstr(svg, "m&lt;1&gt;&amp;.gguf"));
    assert_null(strstr(svg, "m<1>"));
    /* both norms of blk.0 in one cell: 2 tensors, 2 pages */
    expect_cell(svg, "after_load", "blk.0", "norms",
                "data-tensors=\"2\" data-pages=\"2\" data-resident-pages=\"2\" "
                "data-nonresident-pages=\"0\" data-unknown-pages=\"0\"");
    expect_cell(svg, "after_release", "blk.0", "norms",
                "data-tensors=\"2\" data-pages=\"2\" data-resident-pages=\"1\" "
                "data-nonresident-pages=\"1\" data-unknown-pages=\"0\"");
    expect_cell(svg, "after_release", "blk.0", "attn_q",
                "data-tensors=\"1\" data-pages=\"2\" data-resident-pages=\"0\" "
                "data-nonresident-pages=\"2\" data-unknown-pages=\"0\"");
    expect_cell(svg, "after_release", "blk.1", "ffn_down",
                "data-tensors=\"1\" data-pages=\"3\" data-resident-pages=\"0\" "
                "data-nonresident-pages=\"0\" data-unknown-pages=\"3\"");
    expect_cell(svg, "after_release", "embeddings", "other",
                "data-tensors=\"1\" data-pages=\"4\" data-resident-pages=\"1\" "
                "data-nonresident-pages=\"3\" data-unknown-pages=\"0\"");
    expect_cell(svg, "after_release", "output", "other",
                "data-tensors=\"1\" data-pages=\"2\" data-resident-pages=\"2\" "
                "data-nonresident-pages=\"0\" data-unknown-pages=\"0\"");
    /* no tensor, no cell */
    assert_null(strstr(svg, "data-row=\"blk.1\" data-kind=\"attn_q\""));
    assert_null(strstr(svg, "data-row=\"output\" data-kind=\"norms\""));
    /* fills: all unknown is grey, fully resident the darkest, none resident the lightest */
    assert_non_null(strstr(svg, "fill=\"#bdbdbd\" data-boundary=\"after_release\" "
                                "data-row=\"blk.1\""));
    assert_non_null(strstr(svg, "fill=\"#08306b\" data-boundary=\"after_release\" "
                                "data-row=\"output\""));
    assert_non_null(strstr(svg, "fill=\"#eff3ff\" data-boundary=\"after_release\" "
                                "data-row=\"blk.0\" data-kind=\"attn_q\""));
    /* rows in model order: embeddings, blk.0, blk.1, output */
    size_t e = offset_of(svg, ">embeddings<"), l0 = offset_of(svg, ">blk.0<"),
           l1 = offset_of(svg, ">blk.1<"), o = offset_of(svg, ">output<");
    assert_true(e < l0 && l0 < l1 && l1 < o && o != SIZE_MAX);
    /* each panel names its source and boundary; the legend is there */
    assert_non_null(strstr(svg, "mincore at after_release"));
    assert_non_null(strstr(svg, "unknown (not observed)"));
    assert_non_null(strstr(svg, "</svg>\n"));
    free(svg);
    rf_residency_snapshot_free(&load);
    rf_residency_snapshot_free(&rel);
    rf_inventory_free(&inv);
}

static void test_errors_and_write(void **state)
{
    (void)state;
    struct rf_inventory inv;
    struct rf_residency_snapshot s, other;
    static const uint64_t all[N_MODEL] = {4, 2, 1, 1, 3, 2}, none[N_MODEL] = {0};
    char *svg = NULL;

    build_inventory(&inv);
    make_snapshot(&inv, all, none, "mincore", &s);
    make_snapshot(&inv, all, none, "mincore", &other);
    struct rf_residency_svg_boundary b[RF_SVG_MAX_BOUNDARIES + 1];
    for (size_t i = 0; i <= RF_SVG_MAX_BOUNDARIES; i++)
        b[i] = (struct rf_residency_svg_boundary){"x", &s};
    struct rf_residency_svg_params p = {.inventory = &inv, .boundaries = b, .n_boundaries = 0};
    assert_int_equal(rf_residency_svg_render(&p, &svg, NULL), -EINVAL);
    p.n_boundaries = RF_SVG_MAX_BOUNDARIES + 1;
    assert_int_equal(rf_residency_svg_render(&p, &svg, NULL), -EINVAL);
    p.n_boundaries = 1;
    assert_int_equal(rf_residency_svg_render(NULL, &svg, NULL), -EINVAL);
    assert_int_equal(rf_residency_svg_render(&p, NULL, NULL), -EINVAL);
    /* a snapshot of another generation, or of fewer tensors, does not match */
    other.resources[2].key.generation = 2;
    b[0].snapshot = &other;
    assert_int_equal(rf_residency_svg_render(&p, &svg, NULL), -EINVAL);
    other.resources[2].key.generation = 1;
    other.n = N_MODEL - 1;
    assert_int_equal(rf_residency_svg_render(&p, &svg, NULL), -EINVAL);
    assert_null(svg);
    other.n = N_MODEL;

    /* the file holds exactly the rendered text, and no temporary file stays */
    char dir[] = "/tmp/rf-svg-XXXXXX", path[64], *want;
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/r.svg", dir);
    b[0].snapshot = &s;
    assert_int_equal(rf_residency_svg_write(&p, path), 0);
    assert_int_equal(rf_residency_svg_render(&p, &want, NULL), 0);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char *got = calloc(1, strlen(want) + 2);
    size_t n = fread(got, 1, strlen(want) + 1, f);
    fclose(f);
    assert_int_equal(n, strlen(want));
    assert_memory_equal(got, want, n);
    assert_int_equal(rf_residency_svg_write(&p, NULL), -EINVAL);
    char bad[80];
    snprintf(bad, sizeof(bad), "%s/missing/r.svg", dir);
    assert_int_equal(rf_residency_svg_write(&p, bad), -ENOENT);
    unlink(path);
    assert_int_equal(rmdir(dir), 0); /* empty: nothing temporary left */
    free(got);
    free(want);
    rf_residency_snapshot_free(&s);
    rf_residency_snapshot_free(&other);
    rf_inventory_free(&inv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_place),
        cmocka_unit_test(test_cells),
        cmocka_unit_test(test_errors_and_write),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
