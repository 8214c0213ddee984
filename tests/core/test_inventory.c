/*
 * Tests for the resource inventory: hand-built tensor tables whose expected
 * shared/unique bytes and totals were worked out on paper, error and
 * staleness paths, and seeded random inventories checked against a naive
 * per-byte / per-page counter model.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "ramforge/core/inventory.h"
#include "ramforge/error.h"
#include "test_util.h"

#define PAGE 4096

static struct rf_tensor_meta tensor(uint32_t index, const char *name, int32_t mapping, uint64_t off,
                                    uint64_t len, enum rf_weight_access access)
{
    struct rf_tensor_meta t;

    memset(&t, 0, sizeof(t));
    t.index = index;
    snprintf(t.name, sizeof(t.name), "%s", name);
    snprintf(t.type_name, sizeof(t.type_name), "%s", "q8_0");
    t.mapping_index = mapping;
    t.file_offset_bytes = off;
    t.logical_bytes = len;
    t.access = access;
    return t;
}

static struct rf_mapping_meta mapping(uint32_t index, uint64_t file_size, bool validated,
                                      uint64_t map_off, uint64_t map_len)
{
    struct rf_mapping_meta m;

    memset(&m, 0, sizeof(m));
    m.index = index;
    snprintf(m.path, sizeof(m.path), "/models/m-%u.gguf", index);
    m.file_size_bytes = file_size;
    m.validated = validated;
    m.map_offset_bytes = map_off;
    m.map_length_bytes = map_len;
    m.inode = 1000 + index;
    return m;
}

/*
 * Case A, one 20000-byte file mapped whole (20480 bytes), 4 KiB pages:
 *   t0 [0, 5000)       pages {0,1}  file-backed
 *   t1 [5000, 9000)    pages {1,2}  file-backed   (page 1 shared with t0)
 *   t2 [12288, 16384)  pages {3}    file-backed, same name as t1
 *   t3 [19000, 20100)  past the end of the file (not of the mapping): not mapped
 *   t4 [16384, 16484)  pages {4}    anonymous copy: dead file pages
 */
static void case_a(struct rf_tensor_meta *t, struct rf_mapping_meta *m)
{
    t[0] = tensor(0, "tok_embd.weight", 0, 0, 5000, RF_ACCESS_FILE_BACKED);
    t[1] = tensor(1, "blk.0.w", 0, 5000, 4000, RF_ACCESS_FILE_BACKED);
    t[2] = tensor(2, "blk.0.w", 0, 12288, 4096, RF_ACCESS_FILE_BACKED);
    t[3] = tensor(3, "past_end", 0, 19000, 1100, RF_ACCESS_FILE_BACKED);
    t[4] = tensor(4, "anon", 0, 16384, 100, RF_ACCESS_ANONYMOUS);
    m[0] = mapping(0, 20000, true, 0, 20480);
}

static void test_shared_pages_hand_built(void **state)
{
    struct rf_tensor_meta t[5];
    struct rf_mapping_meta m[1];
    struct rf_inventory inv;
    const struct rf_inventory_entry *e;

    (void)state;
    case_a(t, m);
    rf_inventory_init(&inv);
    assert_int_equal(rf_inventory_build(t, 5, m, 1, PAGE, 1, &inv), 0);
    assert_int_equal(inv.n, 5);
    assert_int_equal(inv.n_mappings, 1);
    assert_int_equal(inv.page_bytes, PAGE);
    e = inv.entries;

    /* t0: 2 pages, page 1 shared. */
    assert_true(e[0].file_backed);
    assert_int_equal(e[0].mapping_index, 0);
    assert_int_equal(e[0].mapping_size_bytes, 20480);
    assert_int_equal(e[0].pages.first_page, 0);
    assert_int_equal(e[0].pages.end_page, 2);
    assert_int_equal(e[0].shared_page_bytes, 4096);
    assert_int_equal(e[0].unique_reclaimable_bytes, 4096);
    assert_int_equal(e[0].eligibility, RF_ELIGIBLE);
    assert_int_equal(e[0].confidence, RF_CONFIDENCE_HIGH);
    assert_string_equal(e[0].name, "tok_embd.weight");
    assert_string_equal(e[0].type_name, "q8_0");
    /* t1: 2 pages, page 1 shared. */
    assert_int_equal(e[1].pages.first_page, 1);
    assert_int_equal(e[1].pages.end_page, 3);
    assert_int_equal(e[1].shared_page_bytes, 4096);
    assert_int_equal(e[1].unique_reclaimable_bytes, 4096);
    /* t2: 1 page, not shared. */
    assert_int_equal(e[2].pages.first_page, 3);
    assert_int_equal(e[2].pages.end_page, 4);
    assert_int_equal(e[2].shared_page_bytes, 0);
    assert_int_equal(e[2].unique_reclaimable_bytes, 4096);
    /* t3: past the end of the file. */
    assert_false(e[3].file_backed);
    assert_int_equal(e[3].eligibility, RF_INELIGIBLE_NOT_MAPPED);
    assert_int_equal(e[3].confidence, RF_CONFIDENCE_LOW);
    assert_int_equal(e[3].mapping_index, -1);
    assert_int_equal(e[3].mapping_size_bytes, 0);
    assert_int_equal(e[3].shared_page_bytes, 0);
    assert_int_equal(e[3].unique_reclaimable_bytes, 0);
    assert_int_equal(rf_page_range_pages(e[3].pages), 0);
    /* t4: anonymous copy, its file page is dead. */
    assert_true(e[4].file_backed);
    assert_int_equal(e[4].eligibility, RF_ELIGIBLE_DEAD_FILE_PAGES);
    assert_int_equal(e[4].confidence, RF_CONFIDENCE_HIGH);
    assert_int_equal(e[4].access, RF_ACCESS_ANONYMOUS);
    assert_int_equal(e[4].unique_reclaimable_bytes, 4096);

    assert_int_equal(inv.totals.n_tensors, 5);
    assert_int_equal(inv.totals.n_file_backed, 4);
    assert_int_equal(inv.totals.n_anonymous, 1);
    assert_int_equal(inv.totals.n_eligible, 4);
    assert_int_equal(inv.totals.logical_bytes, 5000 + 4000 + 4096 + 1100 + 100);
    assert_int_equal(inv.totals.file_backed_logical_bytes, 5000 + 4000 + 4096 + 100);
    assert_int_equal(inv.totals.anonymous_logical_bytes, 100);
    assert_int_equal(inv.totals.mapped_virtual_bytes, 5 * 4096); /* pages 0..4 */
    assert_int_equal(inv.totals.shared_page_bytes, 4096);        /* page 1 */
    assert_int_equal(inv.totals.unique_reclaimable_bytes, 4 * 4096);
    assert_string_equal(inv.mappings[0].path, "/models/m-0.gguf");
    rf_inventory_free(&inv);
    rf_inventory_free(NULL);
}

/*
 * Case B: mapping 0 maps only [4096, 12288) of a 1 MiB file; mapping 1 is
 * not validated.
 */
static void test_classification(void **state)
{
    struct rf_tensor_meta t[9];
    struct rf_mapping_meta m[2];
    struct rf_inventory inv;
    const struct rf_inventory_entry *e;

    (void)state;
    m[0] = mapping(0, 1 << 20, true, 4096, 8192);
    m[1] = mapping(1, 1 << 20, false, 0, 1 << 20);
    t[0] = tensor(0, "unknown", 0, 4096, 100, RF_ACCESS_UNKNOWN);
    t[1] = tensor(1, "unref", 0, 8192, 10, RF_ACCESS_UNREFERENCED);
    t[2] = tensor(2, "before", 0, 0, 10, RF_ACCESS_FILE_BACKED);
    t[3] = tensor(3, "across_end", 0, 12000, 1000, RF_ACCESS_FILE_BACKED);
    t[4] = tensor(4, "empty", 0, 5000, 0, RF_ACCESS_FILE_BACKED);
    t[5] = tensor(5, "unvalidated", 1, 0, 10, RF_ACCESS_FILE_BACKED);
    t[6] = tensor(6, "no_mapping", -1, 0, 10, RF_ACCESS_FILE_BACKED);
    t[7] = tensor(7, "anon_only", -1, 0, 50, RF_ACCESS_ANONYMOUS);
    t[8] = tensor(8, "last_byte", 0, 12287, 1, RF_ACCESS_FILE_BACKED);

    rf_inventory_init(&inv);
    assert_int_equal(rf_inventory_build(t, 9, m, 2, PAGE, 3, &inv), 0);
    e = inv.entries;
    assert_int_equal(e[0].eligibility, RF_INELIGIBLE_UNKNOWN_ACCESS);
    assert_int_equal(e[0].confidence, RF_CONFIDENCE_MEDIUM);
    assert_true(e[0].file_backed);
    assert_int_equal(e[1].eligibility, RF_INELIGIBLE_UNREFERENCED);
    assert_int_equal(e[1].confidence, RF_CONFIDENCE_HIGH);
    for (int i = 2; i <= 3; i++) {
        assert_int_equal(e[i].eligibility, RF_INELIGIBLE_NOT_MAPPED);
        assert_int_equal(e[i].confidence, RF_CONFIDENCE_LOW);
        assert_false(e[i].file_backed);
    }
    assert_int_equal(e[4].eligibility, RF_INELIGIBLE_EMPTY_RANGE);
    assert_true(e[4].file_backed);
    assert_int_equal(rf_page_range_pages(e[4].pages), 0);
    for (int i = 5; i <= 7; i++) {
        assert_int_equal(e[i].eligibility, RF_INELIGIBLE_NOT_MAPPED);
        assert_int_equal(e[i].confidence, RF_CONFIDENCE_LOW);
        assert_false(e[i].file_backed);
        assert_int_equal(e[i].mapping_index, -1);
    }
    assert_int_equal(e[8].eligibility, RF_ELIGIBLE);
    assert_int_equal(e[8].pages.first_page, 2);
    assert_int_equal(e[8].pages.end_page, 3);
    /* Page 2 is shared by t1 (unreferenced, still file-backed) and t8. */
    assert_int_equal(e[1].shared_page_bytes, 4096);
    assert_int_equal(e[1].unique_reclaimable_bytes, 0);
    assert_int_equal(e[8].shared_page_bytes, 4096);
    assert_int_equal(e[8].unique_reclaimable_bytes, 0);
    assert_int_equal(e[0].unique_reclaimable_bytes, 4096);

    assert_int_equal(inv.totals.n_tensors, 9);
    assert_int_equal(inv.totals.n_file_backed, 4);
    assert_int_equal(inv.totals.n_anonymous, 1);
    assert_int_equal(inv.totals.n_eligible, 1);
    assert_int_equal(inv.totals.logical_bytes, 100 + 10 + 10 + 1000 + 0 + 10 + 10 + 50 + 1);
    assert_int_equal(inv.totals.file_backed_logical_bytes, 100 + 10 + 0 + 1);
    assert_int_equal(inv.totals.anonymous_logical_bytes, 50);
    assert_int_equal(inv.totals.mapped_virtual_bytes, 2 * 4096);
    assert_int_equal(inv.totals.shared_page_bytes, 4096);
    assert_int_equal(inv.totals.unique_reclaimable_bytes, 0); /* only t8 is eligible */
    rf_inventory_free(&inv);
}

static void test_duplicate_names_and_lookup(void **state)
{
    struct rf_tensor_meta t[5];
    struct rf_mapping_meta m[1];
    struct rf_inventory inv;
    const struct rf_inventory_entry *a, *b;

    (void)state;
    case_a(t, m);
    rf_inventory_init(&inv);
    assert_int_equal(rf_inventory_build(t, 5, m, 1, PAGE, 7, &inv), 0);
    assert_int_equal(rf_inventory_lookup(&inv, (struct rf_resource_key){7, 1}, &a), 0);
    assert_int_equal(rf_inventory_lookup(&inv, (struct rf_resource_key){7, 2}, &b), 0);
    assert_ptr_not_equal(a, b);
    assert_string_equal(a->name, "blk.0.w");
    assert_string_equal(b->name, "blk.0.w");
    assert_int_equal(a->file_offset_bytes, 5000);
    assert_int_equal(b->file_offset_bytes, 12288);
    assert_int_equal(a->key.tensor_index, 1);
    assert_int_equal(b->key.tensor_index, 2);
    assert_int_equal(b->key.generation, 7);

    /* A refresh to generation 8 makes generation-7 keys stale. */
    assert_int_equal(rf_inventory_build(t, 5, m, 1, PAGE, 8, &inv), 0);
    a = (const void *)1;
    assert_int_equal(rf_inventory_lookup(&inv, (struct rf_resource_key){7, 2}, &a), -RF_ESTALE);
    assert_null(a);
    assert_string_equal(rf_strerror(-RF_ESTALE), "inventory generation is out of date");
    assert_int_equal(rf_inventory_lookup(&inv, (struct rf_resource_key){8, 2}, &a), 0);
    assert_int_equal(a->file_offset_bytes, 12288);
    assert_int_equal(rf_inventory_lookup(&inv, (struct rf_resource_key){8, 99}, &a), -ENOENT);
    assert_int_equal(rf_inventory_lookup(NULL, (struct rf_resource_key){8, 0}, &a), -EINVAL);
    rf_inventory_free(&inv);
}

static void test_native_index_order(void **state)
{
    struct rf_tensor_meta t[3];
    struct rf_mapping_meta m[1];
    struct rf_inventory inv;
    const struct rf_inventory_entry *e;

    (void)state;
    m[0] = mapping(0, 1 << 20, true, 0, 1 << 20);
    t[0] = tensor(10, "c", 0, 8192, 10, RF_ACCESS_FILE_BACKED);
    t[1] = tensor(3, "a", 0, 0, 10, RF_ACCESS_FILE_BACKED);
    t[2] = tensor(7, "b", 0, 4096, 10, RF_ACCESS_FILE_BACKED);
    rf_inventory_init(&inv);
    assert_int_equal(rf_inventory_build(t, 3, m, 1, PAGE, 1, &inv), 0);
    assert_int_equal(inv.entries[0].key.tensor_index, 3);
    assert_int_equal(inv.entries[1].key.tensor_index, 7);
    assert_int_equal(inv.entries[2].key.tensor_index, 10);
    assert_int_equal(rf_inventory_lookup(&inv, (struct rf_resource_key){1, 7}, &e), 0);
    assert_string_equal(e->name, "b");
    assert_int_equal(rf_inventory_lookup(&inv, (struct rf_resource_key){1, 10}, &e), 0);
    assert_string_equal(e->name, "c");
    assert_int_equal(rf_inventory_lookup(&inv, (struct rf_resource_key){1, 2}, &e), -ENOENT);
    rf_inventory_free(&inv);
}

static void test_build_errors(void **state)
{
    struct rf_tensor_meta t[5];
    struct rf_mapping_meta m[1];
    struct rf_inventory inv;

    (void)state;
    case_a(t, m);
    rf_inventory_init(&inv);
    assert_int_equal(rf_inventory_build(t, 5, m, 1, PAGE, 1, &inv), 0);

    /* Each failure leaves the old inventory (generation 1) in place. */
    assert_int_equal(rf_inventory_build(t, 5, m, 1, 3000, 2, &inv), -EINVAL);
    assert_int_equal(rf_inventory_build(t, 5, m, 1, 0, 2, &inv), -EINVAL);
    t[2].mapping_index = 1; /* only one mapping */
    assert_int_equal(rf_inventory_build(t, 5, m, 1, PAGE, 2, &inv), -EINVAL);
    t[2].mapping_index = -2;
    assert_int_equal(rf_inventory_build(t, 5, m, 1, PAGE, 2, &inv), -EINVAL);
    t[2].mapping_index = 0;
    t[2].index = 1; /* duplicate key */
    assert_int_equal(rf_inventory_build(t, 5, m, 1, PAGE, 2, &inv), -EINVAL);
    t[2].index = 2;
    m[0].index = 4; /* mapping 0 claims another index */
    assert_int_equal(rf_inventory_build(t, 5, m, 1, PAGE, 2, &inv), -EINVAL);
    m[0].index = 0;
    t[2].access = (enum rf_weight_access)9;
    assert_int_equal(rf_inventory_build(t, 5, m, 1, PAGE, 2, &inv), -EINVAL);
    t[2].access = RF_ACCESS_FILE_BACKED;

    assert_int_equal(inv.generation, 1);
    assert_int_equal(inv.n, 5);
    assert_int_equal(inv.totals.shared_page_bytes, 4096);
    rf_inventory_free(&inv);

    /* An empty inventory is fine. */
    assert_int_equal(rf_inventory_build(NULL, 0, NULL, 0, PAGE, 5, &inv), 0);
    assert_int_equal(inv.n, 0);
    assert_int_equal(inv.generation, 5);
    assert_int_equal(inv.totals.mapped_virtual_bytes, 0);
    rf_inventory_free(&inv);
}

static void test_overflow(void **state)
{
    struct rf_tensor_meta t[2];
    struct rf_mapping_meta m[1];
    struct rf_inventory inv;

    (void)state;
    rf_inventory_init(&inv);

    /* One tensor spanning [0, 2^64 - 1): 2^52 pages of 4096 bytes = 2^64 bytes. */
    m[0] = mapping(0, UINT64_MAX, true, 0, UINT64_MAX);
    t[0] = tensor(0, "huge", 0, 0, UINT64_MAX, RF_ACCESS_FILE_BACKED);
    assert_int_equal(rf_inventory_build(t, 1, m, 1, PAGE, 1, &inv), -EOVERFLOW);

    /* Two overlapping tensors of 2^63 + 1 bytes: the logical sums overflow. */
    t[0] = tensor(0, "a", 0, 0, (1ULL << 63) + 1, RF_ACCESS_FILE_BACKED);
    t[1] = tensor(1, "b", 0, 0, (1ULL << 63) + 1, RF_ACCESS_FILE_BACKED);
    assert_int_equal(rf_inventory_build(t, 2, m, 1, 1ULL << 40, 1, &inv), -EOVERFLOW);

    /* Unmapped tensors: the all-tensor logical sum overflows too. */
    t[0] = tensor(0, "a", -1, 0, UINT64_MAX, RF_ACCESS_UNKNOWN);
    t[1] = tensor(1, "b", -1, 0, 1, RF_ACCESS_UNKNOWN);
    assert_int_equal(rf_inventory_build(t, 2, m, 1, PAGE, 1, &inv), -EOVERFLOW);

    /* A mapping whose offset + length wraps. */
    m[0] = mapping(0, UINT64_MAX, true, 4096, UINT64_MAX);
    t[0] = tensor(0, "a", 0, 4096, 1, RF_ACCESS_FILE_BACKED);
    assert_int_equal(rf_inventory_build(t, 1, m, 1, PAGE, 1, &inv), -EOVERFLOW);

    /* A tensor whose offset + length wraps is simply not in the file. */
    m[0] = mapping(0, 1 << 20, true, 0, 1 << 20);
    t[0] = tensor(0, "a", 0, 4096, UINT64_MAX, RF_ACCESS_FILE_BACKED);
    assert_int_equal(rf_inventory_build(t, 1, m, 1, PAGE, 1, &inv), 0);
    assert_int_equal(inv.entries[0].eligibility, RF_INELIGIBLE_NOT_MAPPED);
    rf_inventory_free(&inv);
}

static void test_names(void **state)
{
    (void)state;
    assert_string_equal(rf_weight_access_name(RF_ACCESS_FILE_BACKED), "file_backed");
    assert_string_equal(rf_weight_access_name(RF_ACCESS_ANONYMOUS), "anonymous");
    assert_string_equal(rf_weight_access_name(RF_ACCESS_UNREFERENCED), "unreferenced");
    assert_string_equal(rf_weight_access_name(RF_ACCESS_UNKNOWN), "unknown");
    assert_null(rf_weight_access_name((enum rf_weight_access)42));
    assert_string_equal(rf_access_basis_name(RF_ACCESS_BASIS_NONE), "none");
    assert_string_equal(rf_access_basis_name(RF_ACCESS_BASIS_GRAPH_PROBE), "graph_probe");
    assert_string_equal(rf_access_basis_name(RF_ACCESS_BASIS_PLACEMENT), "placement");
    assert_null(rf_access_basis_name((enum rf_access_basis)42));
    assert_string_equal(rf_eligibility_name(RF_ELIGIBLE), "eligible");
    assert_string_equal(rf_eligibility_name(RF_ELIGIBLE_DEAD_FILE_PAGES),
                        "eligible_dead_file_pages");
    assert_string_equal(rf_eligibility_name(RF_INELIGIBLE_NOT_MAPPED), "ineligible_not_mapped");
    assert_null(rf_eligibility_name((enum rf_eligibility)42));
    assert_string_equal(rf_confidence_name(RF_CONFIDENCE_HIGH), "high");
    assert_string_equal(rf_confidence_name(RF_CONFIDENCE_MEDIUM), "medium");
    assert_string_equal(rf_confidence_name(RF_CONFIDENCE_LOW), "low");
    assert_null(rf_confidence_name((enum rf_confidence)42));
}

/* ---- random inventories against a naive model ---- */

#define N_CASES 2000
#define N_PAGES 200
#define MAX_T 30
#define MAX_M 3

/* Byte-by-byte: is every byte of the tensor inside the fragment and the file? */
static bool naive_inside(const struct rf_tensor_meta *t, const struct rf_mapping_meta *m)
{
    uint64_t map_end = m->map_offset_bytes + m->map_length_bytes, b;

    if (t->logical_bytes == 0)
        return t->file_offset_bytes >= m->map_offset_bytes && t->file_offset_bytes <= map_end &&
               t->file_offset_bytes <= m->file_size_bytes;
    for (b = t->file_offset_bytes; b < t->file_offset_bytes + t->logical_bytes; b++) {
        if (b < m->map_offset_bytes || b >= map_end || b >= m->file_size_bytes)
            return false;
    }
    return true;
}

static void test_random_inventories(void **state)
{
    int c;

    (void)state;
    rng_state = 42;
    for (c = 0; c < N_CASES; c++) {
        uint64_t pb = 1ULL << rng_below(7), total = N_PAGES * pb;
        size_t n_m = 1 + (size_t)rng_below(MAX_M), n = (size_t)rng_below(MAX_T + 1), i, j, m;
        struct rf_mapping_meta maps[MAX_M];
        struct rf_tensor_meta t[MAX_T];
        static bool touched[MAX_T][N_PAGES];
        unsigned count[MAX_M][N_PAGES];
        bool fb[MAX_T];
        uint32_t perm[MAX_T];
        struct rf_inventory_totals want = {0};
        struct rf_inventory inv;
        uint64_t p, b;

        for (m = 0; m < n_m; m++) {
            uint64_t off = pb * rng_below(N_PAGES / 2);

            maps[m] = mapping((uint32_t)m, rng_below(total + 1), rng_below(5) != 0, off,
                              rng_below(total - off + 1));
        }
        for (i = 0; i < n; i++)
            perm[i] = (uint32_t)i;
        for (i = n; i > 1; i--) { /* Fisher-Yates: tensors arrive out of index order */
            uint32_t tmp;

            j = (size_t)rng_below(i);
            tmp = perm[i - 1];
            perm[i - 1] = perm[j];
            perm[j] = tmp;
        }
        for (i = 0; i < n; i++) {
            uint64_t off = rng_below(total), len;
            char name[16];

            switch (rng_below(8)) {
            case 0:
                len = 0;
                break;
            case 1:
                len = rng_below(total - off + 1);
                break;
            default:
                len = 1 + rng_below(3 * pb);
                if (off + len > total)
                    len = total - off;
                break;
            }
            snprintf(name, sizeof(name), "w%u", (unsigned)rng_below(5)); /* repeats */
            t[i] = tensor(perm[i], name, (int32_t)rng_below(n_m + 1) - 1, off, len,
                          (enum rf_weight_access)rng_below(4));
        }

        /* The naive model. */
        memset(count, 0, sizeof(count));
        for (i = 0; i < n; i++) {
            memset(touched[i], 0, sizeof(touched[i]));
            fb[i] = t[i].mapping_index >= 0 && maps[t[i].mapping_index].validated &&
                    naive_inside(&t[i], &maps[t[i].mapping_index]);
            want.logical_bytes += t[i].logical_bytes;
            if (t[i].access == RF_ACCESS_ANONYMOUS) {
                want.n_anonymous++;
                want.anonymous_logical_bytes += t[i].logical_bytes;
            }
            if (!fb[i])
                continue;
            want.n_file_backed++;
            want.file_backed_logical_bytes += t[i].logical_bytes;
            for (b = t[i].file_offset_bytes; b < t[i].file_offset_bytes + t[i].logical_bytes; b++)
                touched[i][b / pb] = true;
            for (p = 0; p < N_PAGES; p++)
                count[t[i].mapping_index][p] += touched[i][p];
        }
        for (m = 0; m < n_m; m++) {
            for (p = 0; p < N_PAGES; p++) {
                want.mapped_virtual_bytes += count[m][p] >= 1 ? pb : 0;
                want.shared_page_bytes += count[m][p] >= 2 ? pb : 0;
            }
        }

        rf_inventory_init(&inv);
        assert_int_equal(rf_inventory_build(t, n, maps, n_m, pb, (uint64_t)c + 1, &inv), 0);
        assert_int_equal(inv.n, n);
        for (i = 0; i < n; i++) {
            const struct rf_inventory_entry *e = NULL;
            enum rf_eligibility el;
            enum rf_confidence conf;
            uint64_t pages = 0, shared = 0;
            int64_t first = -1, last = -1;

            assert_int_equal(
                rf_inventory_lookup(&inv, (struct rf_resource_key){c + 1, perm[i]}, &e), 0);
            assert_ptr_equal(e, &inv.entries[perm[i]]); /* sorted by native index */
            assert_string_equal(e->name, t[i].name);
            assert_int_equal(e->file_backed, fb[i]);
            if (!fb[i]) {
                el = RF_INELIGIBLE_NOT_MAPPED;
                conf = RF_CONFIDENCE_LOW;
            } else {
                if (t[i].logical_bytes == 0)
                    el = RF_INELIGIBLE_EMPTY_RANGE;
                else if (t[i].access == RF_ACCESS_FILE_BACKED)
                    el = RF_ELIGIBLE;
                else if (t[i].access == RF_ACCESS_ANONYMOUS)
                    el = RF_ELIGIBLE_DEAD_FILE_PAGES;
                else if (t[i].access == RF_ACCESS_UNREFERENCED)
                    el = RF_INELIGIBLE_UNREFERENCED;
                else
                    el = RF_INELIGIBLE_UNKNOWN_ACCESS;
                conf = t[i].access == RF_ACCESS_UNKNOWN ? RF_CONFIDENCE_MEDIUM : RF_CONFIDENCE_HIGH;
            }
            assert_int_equal(e->eligibility, el);
            assert_int_equal(e->confidence, conf);
            if (fb[i]) {
                for (p = 0; p < N_PAGES; p++) {
                    if (!touched[i][p])
                        continue;
                    if (first < 0)
                        first = (int64_t)p;
                    last = (int64_t)p;
                    pages++;
                    shared += count[t[i].mapping_index][p] >= 2;
                }
                assert_int_equal(e->mapping_index, t[i].mapping_index);
                assert_int_equal(e->mapping_size_bytes, maps[t[i].mapping_index].map_length_bytes);
                if (pages) {
                    assert_int_equal(e->pages.first_page, (uint64_t)first);
                    assert_int_equal(e->pages.end_page, (uint64_t)last + 1);
                }
            } else {
                assert_int_equal(e->mapping_index, -1);
            }
            assert_int_equal(rf_page_range_pages(e->pages), pages);
            assert_int_equal(e->shared_page_bytes, shared * pb);
            assert_int_equal(e->unique_reclaimable_bytes, (pages - shared) * pb);
            if (el == RF_ELIGIBLE || el == RF_ELIGIBLE_DEAD_FILE_PAGES) {
                want.n_eligible++;
                want.unique_reclaimable_bytes += (pages - shared) * pb;
            }
        }
        assert_int_equal(inv.totals.n_tensors, n);
        assert_int_equal(inv.totals.n_file_backed, want.n_file_backed);
        assert_int_equal(inv.totals.n_anonymous, want.n_anonymous);
        assert_int_equal(inv.totals.n_eligible, want.n_eligible);
        assert_int_equal(inv.totals.logical_bytes, want.logical_bytes);
        assert_int_equal(inv.totals.file_backed_logical_bytes, want.file_backed_logical_bytes);
        assert_int_equal(inv.totals.anonymous_logical_bytes, want.anonymous_logical_bytes);
        assert_int_equal(inv.totals.mapped_virtual_bytes, want.mapped_virtual_bytes);
        assert_int_equal(inv.totals.shared_page_bytes, want.shared_page_bytes);
        assert_int_equal(inv.totals.unique_reclaimable_bytes, want.unique_reclaimable_bytes);
        rf_inventory_free(&inv);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shared_pages_hand_built),
        cmocka_unit_test(test_classification),
        cmocka_unit_test(test_duplicate_names_and_lookup),
        cmocka_unit_test(test_native_index_order),
        cmocka_unit_test(test_build_errors),
        cmocka_unit_test(test_overflow),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_random_inventories),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
