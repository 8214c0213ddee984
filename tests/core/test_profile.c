/*
 * Access profiles: a complete trace makes one, an incomplete or
 * unattributed one does not; the cold/hot orders; the document
 * round-trips and the parser refuses truncated, corrupt, oversized,
 * foreign-version and over-bound input; the history stays bounded and
 * identity-validated; the per-page prediction counts agree with a naive
 * per-page bool model over seeded random cases.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ramforge/core/profile.h"
#include "ramforge/core/report_json.h"
#include "ramforge/core/residency.h"
#include "test_util.h"

#define ID_A "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define ID_B "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

static struct rf_inventory_entry entries[8];
static struct rf_dispatch_tensor dt[8];

/* Inventory of names (tensor index = position) and a trace over it: rank[i] (UINT32_MAX:
   never), refs[i]. */
static void fixture(const char *const *names, const uint32_t *rank, const uint64_t *refs, size_t n,
                    struct rf_inventory *inv, struct rf_dispatch_summary *d)
{
    memset(inv, 0, sizeof(*inv));
    memset(entries, 0, sizeof(entries));
    rf_dispatch_summary_init(d);
    for (size_t i = 0; i < n; i++) {
        entries[i].key.tensor_index = (uint32_t)(10 + i);
        entries[i].key.generation = 1;
        snprintf(entries[i].name, sizeof(entries[i].name), "%s", names[i]);
        dt[i].first_order = rank[i];
        dt[i].first_sequence = rank[i] == UINT32_MAX ? RF_DISPATCH_NEVER : rank[i];
        dt[i].references = refs[i];
    }
    inv->generation = 1;
    inv->entries = entries;
    inv->n = n;
    d->tensors = dt;
    d->n_tensors = n;
    d->events = 5;
}

static void test_update_and_orders(void **state)
{
    (void)state;
    const char *names[] = {"a", "b", "c", "d"};
    uint32_t rank[] = {2, UINT32_MAX, 0, 1};
    uint64_t refs[] = {3, 0, 1, 2};
    struct rf_inventory inv;
    struct rf_dispatch_summary d;
    struct rf_profile p;
    char why[160] = "";
    fixture(names, rank, refs, 4, &inv, &d);
    rf_profile_init(&p);
    assert_int_equal(rf_profile_update(&p, &inv, &d, ID_A, 1000, why, sizeof(why)), 0);
    assert_int_equal(p.n_tensors, 4);
    assert_int_equal(p.operations, 1);
    assert_string_equal(p.identity, ID_A);

    uint32_t *cold = NULL, *hot = NULL;
    size_t nc = 0, nh = 0, unmatched = 9;
    assert_int_equal(rf_profile_orders(&p, &inv, &cold, &nc, &hot, &nh, &unmatched), 0);
    /* cold: b (never), then latest first use: a (2), d (1), c (0) */
    uint32_t want_cold[] = {11, 10, 13, 12}, want_hot[] = {12, 13, 10};
    assert_int_equal(nc, 4);
    assert_memory_equal(cold, want_cold, sizeof(want_cold));
    assert_int_equal(nh, 3);
    assert_memory_equal(hot, want_hot, sizeof(want_hot));
    assert_int_equal(unmatched, 0);
    free(cold);
    free(hot);

    /* Another inventory (another model): names it lacks are unmatched, not guessed. */
    const char *other[] = {"a", "x"};
    struct rf_dispatch_summary d2;
    fixture(other, (uint32_t[]){0, 1}, (uint64_t[]){1, 1}, 2, &inv, &d2);
    assert_int_equal(rf_profile_orders(&p, &inv, &cold, &nc, NULL, NULL, &unmatched), 0);
    assert_int_equal(nc, 1);
    assert_int_equal(cold[0], 10);
    assert_int_equal(unmatched, 3);
    free(cold);
    rf_profile_free(&p);
}

static void test_incomplete_trace_refused(void **state)
{
    (void)state;
    const char *names[] = {"a", "b"};
    struct rf_inventory inv;
    struct rf_dispatch_summary d;
    struct rf_profile p;
    char why[160] = "";
    fixture(names, (uint32_t[]){0, 1}, (uint64_t[]){1, 1}, 2, &inv, &d);
    rf_profile_init(&p);
    d.complete = false;
    d.dropped_events = 4;
    assert_int_equal(rf_profile_update(&p, &inv, &d, ID_A, 1, why, sizeof(why)), -ENODATA);
    assert_non_null(strstr(why, "4 events dropped"));
    d.complete = true;
    d.unattributed_weight_refs = 2;
    assert_int_equal(rf_profile_update(&p, &inv, &d, ID_A, 1, why, sizeof(why)), -ENODATA);
    assert_non_null(strstr(why, "not attributed"));
    assert_int_equal(p.n_tensors, 0);
    assert_int_equal(p.operations, 0);
    d.unattributed_weight_refs = 0;
    assert_int_equal(rf_profile_update(&p, &inv, &d, "sha256:short", 1, why, sizeof(why)), -EINVAL);
    rf_profile_free(&p);
}

static void test_identity(void **state)
{
    (void)state;
    char a[RF_PROFILE_IDENTITY_MAX], b[RF_PROFILE_IDENTITY_MAX], c[RF_PROFILE_IDENTITY_MAX];
    /* SHA-256 of 8 zero bytes (the empty header, size 0), from `head -c8 /dev/zero | sha256sum` */
    assert_int_equal(rf_profile_identity(NULL, 0, 0, a), 0);
    assert_string_equal(a,
                        "sha256:af5570f5a1810b7af78caf4bc70a660f0df51e42baf91d4de5b2328de0e83dfc");
    assert_int_equal(rf_profile_identity("GGUF", 4, 100, b), 0);
    assert_int_equal(rf_profile_identity("GGUF", 4, 101, c), 0);
    assert_string_not_equal(b, c); /* the size is part of it */
    assert_int_equal(rf_profile_identity("GGUF", 4, 100, c), 0);
    assert_string_equal(b, c);

    struct rf_profile p;
    char why[160];
    rf_profile_init(&p);
    snprintf(p.identity, sizeof(p.identity), "%s", ID_A);
    p.file_size_bytes = 5;
    assert_int_equal(rf_profile_matches(&p, ID_A, 5, why, sizeof(why)), 1);
    assert_int_equal(rf_profile_matches(&p, ID_B, 5, why, sizeof(why)), 0);
    assert_non_null(strstr(why, "another model"));
    assert_int_equal(rf_profile_matches(&p, ID_A, 6, why, sizeof(why)), 0);
}

static struct rf_prediction entry(uint64_t op, const char *id)
{
    struct rf_prediction e;
    memset(&e, 0, sizeof(e));
    e.operation = op;
    snprintf(e.identity, sizeof(e.identity), "%s", id);
    e.selected_bytes = 4096 * op;
    e.has_accepted = true;
    e.accepted_bytes = 4096;
    e.has_mapping_delta = true;
    e.mapping_delta_bytes = -8192;
    e.has_pages = op % 2 == 0;
    if (!e.has_pages)
        return e; /* page counts absent */
    e.page_bytes = 4096;
    e.hit_pages = 1;
    e.miss_pages = 2;
    e.wasted_pages = 3;
    e.unknown_pages = 0;
    e.used_pages = 3;
    e.resident_staged_pages = 2;
    return e;
}

static void test_round_trip_and_history_bound(void **state)
{
    (void)state;
    const char *names[] = {"blk.0.attn_q.weight", "blk.0.ffn_up.weight", "output.weight"};
    struct rf_inventory inv;
    struct rf_dispatch_summary d;
    struct rf_profile p, q;
    char why[200] = "", *text = NULL;
    fixture(names, (uint32_t[]){1, UINT32_MAX, 0}, (uint64_t[]){7, 0, 2}, 3, &inv, &d);
    rf_profile_init(&p);
    p.max_history = 3;
    assert_int_equal(rf_profile_update(&p, &inv, &d, ID_A, 123456, why, sizeof(why)), 0);
    for (uint64_t op = 1; op <= 5; op++) {
        struct rf_prediction e = entry(op, ID_A);
        assert_int_equal(rf_profile_history_push(&p, &e), 0);
        assert_true(p.n_history <= 3);
    }
    assert_int_equal(p.n_history, 3);
    assert_int_equal(p.history[0].operation, 3); /* the oldest were dropped */
    assert_int_equal(rf_profile_to_text(&p, &text), 0);
    assert_int_equal(rf_profile_parse(text, strlen(text), 3, &q, why, sizeof(why)), 0);
    assert_string_equal(q.identity, ID_A);
    assert_int_equal(q.file_size_bytes, 123456);
    assert_int_equal(q.operations, 1);
    assert_int_equal(q.n_tensors, 3);
    for (size_t i = 0; i < 3; i++) {
        assert_string_equal(q.tensors[i].name, p.tensors[i].name);
        assert_int_equal(q.tensors[i].first_rank, p.tensors[i].first_rank);
        assert_int_equal(q.tensors[i].accesses, p.tensors[i].accesses);
    }
    assert_int_equal(q.n_history, 3);
    for (size_t i = 0; i < 3; i++)
        assert_memory_equal(&q.history[i], &p.history[i], sizeof(q.history[i]));
    rf_profile_free(&q);

    /* A smaller bound at load keeps the newest. */
    assert_int_equal(rf_profile_parse(text, strlen(text), 2, &q, why, sizeof(why)), 0);
    assert_int_equal(q.n_history, 2);
    assert_int_equal(q.history[0].operation, 4);
    rf_profile_free(&q);

    /* Every truncation is refused. */
    for (size_t len = 0; len < strlen(text); len += 7)
        assert_true(rf_profile_parse(text, len, 3, &q, why, sizeof(why)) < 0);
    assert_int_equal(q.n_tensors, 0);
    free(text);
    rf_profile_free(&p);
}

/* Parses text and returns the error; why must mention needle. */
/*
 * Two processes read one profile (2 operations, history 1), each adds what
 * its run made; the second to save merges into what the first saved: no
 * update lost. Without a trace of its own the file's tensors stay.
 */
static void test_merge(void **state)
{
    (void)state;
    const char *names[] = {"a", "b"};
    struct rf_inventory inv;
    struct rf_dispatch_summary d;
    struct rf_profile base, a, b;
    char why[160] = "";
    fixture(names, (uint32_t[]){0, 1}, (uint64_t[]){1, 1}, 2, &inv, &d);
    rf_profile_init(&base);
    assert_int_equal(rf_profile_update(&base, &inv, &d, ID_A, 1000, why, sizeof(why)), 0);
    assert_int_equal(rf_profile_update(&base, &inv, &d, ID_A, 1000, why, sizeof(why)), 0);
    struct rf_prediction e0 = entry(1, ID_A), e1 = entry(2, ID_A), e2 = entry(3, ID_A);
    assert_int_equal(rf_profile_history_push(&base, &e0), 0);
    char *text = NULL;
    assert_int_equal(rf_profile_to_text(&base, &text), 0);
    /* a and b: the file as both read it */
    assert_int_equal(rf_profile_parse(text, strlen(text), 3, &a, why, sizeof(why)), 0);
    assert_int_equal(rf_profile_parse(text, strlen(text), 3, &b, why, sizeof(why)), 0);
    free(text);
    /* a: one traced operation (b first now) and a history entry; saved first */
    fixture(names, (uint32_t[]){1, 0}, (uint64_t[]){1, 1}, 2, &inv, &d);
    assert_int_equal(rf_profile_update(&a, &inv, &d, ID_A, 1000, why, sizeof(why)), 0);
    assert_int_equal(rf_profile_history_push(&a, &e1), 0);
    /* b: one traced operation of the old order, two entries; merged into a's file */
    fixture(names, (uint32_t[]){0, 1}, (uint64_t[]){1, 1}, 2, &inv, &d);
    assert_int_equal(rf_profile_update(&b, &inv, &d, ID_A, 1000, why, sizeof(why)), 0);
    assert_int_equal(rf_profile_history_push(&b, &e1), 0);
    assert_int_equal(rf_profile_history_push(&b, &e2), 0);
    assert_int_equal(rf_profile_merge(&a, &b, 2, true, 2), 0);
    assert_int_equal(a.operations, 4);
    /* bound 3: the oldest of e0, e1 (a's), e1, e2 (b's) dropped */
    assert_int_equal(a.n_history, 3);
    assert_int_equal(a.history[0].operation, 2);
    assert_int_equal(a.history[2].operation, 3);
    /* b's trace is the latest: "a" first again */
    assert_string_equal(a.tensors[0].name, "a");
    assert_int_equal(a.tensors[0].first_rank, 0);
    /* not traced: the file's tensors stay; no operation added */
    a.tensors[0].first_rank = 7;
    assert_int_equal(rf_profile_merge(&a, &b, b.operations, false, 0), 0);
    assert_int_equal(a.operations, 4);
    assert_int_equal(a.tensors[0].first_rank, 7);
    assert_int_equal(a.n_history, 3);
    assert_int_equal(rf_profile_merge(&a, &b, b.operations + 1, true, 0), -EINVAL);
    assert_int_equal(rf_profile_merge(NULL, &b, 0, true, 0), -EINVAL);
    rf_profile_free(&a);
    rf_profile_free(&b);
    rf_profile_free(&base);
}

static int parse_err(const char *text, const char *needle)
{
    struct rf_profile q;
    char why[200] = "";
    int rc = rf_profile_parse(text, strlen(text), 0, &q, why, sizeof(why));
    if (rc == 0)
        rf_profile_free(&q);
    else if (needle && !strstr(why, needle))
        fail_msg("reason \"%s\" lacks \"%s\"", why, needle);
    return rc;
}

#define DOC(version, identity, tensors, history)                                                   \
    "{\"kind\":\"ramforge.access_profile\",\"format_version\":" version                            \
    ",\"identity\":\"" identity "\",\"file_size_bytes\":10,\"operations\":1,\"tensors\":[" tensors \
    "],\"history\":[" history "]}"

static void test_parse_refusals(void **state)
{
    (void)state;
    assert_int_equal(
        parse_err(DOC("1", ID_A, "{\"name\":\"a\",\"first_rank\":0,\"accesses\":1}", ""), NULL), 0);
    assert_int_equal(parse_err(DOC("2", ID_A, "", ""), "format version 2"), -EPROTO);
    assert_int_equal(parse_err("{\"kind\":\"x\"}", "not an access profile"), -EBADMSG);
    assert_int_equal(parse_err("\x01\x02garbage", "not a JSON"), -EBADMSG);
    assert_int_equal(parse_err(DOC("1", "sha256:xyz", "", ""), "identity"), -EBADMSG);
    assert_int_equal(
        parse_err(DOC("1", ID_A, "{\"name\":\"a\",\"first_rank\":-1,\"accesses\":1}", ""),
                  "first_rank"),
        -EBADMSG);
    assert_int_equal(parse_err(DOC("1", ID_A,
                                   "{\"name\":\"a\",\"first_rank\":0,\"accesses\":1},"
                                   "{\"name\":\"a\",\"first_rank\":1,\"accesses\":1}",
                                   ""),
                               "twice"),
                     -EBADMSG);
    assert_int_equal(parse_err(DOC("1", ID_A,
                                   "{\"name\":\"a\\u0000b\",\"first_rank\":0,"
                                   "\"accesses\":1}",
                                   ""),
                               "NUL"),
                     -EBADMSG);
    char longname[200];
    memset(longname, 'n', sizeof(longname));
    longname[sizeof(longname) - 1] = 0;
    char doc[1024];
    snprintf(doc, sizeof(doc),
             DOC("1", ID_A, "{\"name\":\"%s\",\"first_rank\":0,\"accesses\":1}", ""), longname);
    assert_int_equal(parse_err(doc, "too long"), -EBADMSG);
    /* duplicate keys (JSON_REJECT_DUPLICATES) */
    assert_int_equal(parse_err("{\"kind\":\"ramforge.access_profile\",\"kind\":\"x\"}", "JSON"),
                     -EBADMSG);

    /* Oversized: refused before parsing (the buffer is not even JSON). */
    size_t big = RF_PROFILE_MAX_FILE_BYTES + 1;
    char *huge = malloc(big);
    assert_non_null(huge);
    memset(huge, ' ', big);
    struct rf_profile q;
    char why[200];
    assert_int_equal(rf_profile_parse(huge, big, 0, &q, why, sizeof(why)), -EFBIG);
    free(huge);

    /* A history entry of another identity is dropped, not trusted. */
    const char *mixed = DOC("1", ID_A, "",
                            "{\"operation\":1,\"identity\":\"" ID_B "\",\"selected_bytes\":0,"
                            "\"accepted_bytes\":null,\"mapping_delta_bytes\":null,"
                            "\"page_bytes\":null},"
                            "{\"operation\":2,\"identity\":\"" ID_A "\",\"selected_bytes\":0,"
                            "\"accepted_bytes\":null,\"mapping_delta_bytes\":null,"
                            "\"page_bytes\":null}");
    assert_int_equal(rf_profile_parse(mixed, strlen(mixed), 0, &q, why, sizeof(why)), 0);
    assert_int_equal(q.n_history, 1);
    assert_int_equal(q.history[0].operation, 2);
    rf_profile_free(&q);
    /* hits above used pages: inconsistent, refused */
    const char *bad = DOC("1", ID_A, "",
                          "{\"operation\":1,\"identity\":\"" ID_A "\",\"selected_bytes\":0,"
                          "\"accepted_bytes\":null,\"mapping_delta_bytes\":null,"
                          "\"page_bytes\":4096,\"hit_pages\":5,\"miss_pages\":0,"
                          "\"wasted_pages\":0,\"unknown_pages\":0,\"used_pages\":1,"
                          "\"resident_staged_pages\":0}");
    assert_int_equal(parse_err(bad, "history entry 0"), -EBADMSG);
}

/* Per-page model: the prediction counts over random ranges and states. */
static void test_prediction_counts_per_page_model(void **state)
{
    (void)state;
    enum { MAPS = 2, PAGES = 96 };
    rng_state = 11;
    for (int round = 0; round < 400; round++) {
        struct rf_file_range staged[6], used[8];
        size_t ns = rng_below(7), nu = rng_below(9);
        uint8_t before[MAPS][PAGES], *bp[MAPS] = {before[0], before[1]};
        uint64_t nb[MAPS] = {rng_below(PAGES + 1), PAGES};
        bool s_bit[MAPS][PAGES] = {{0}}, u_bit[MAPS][PAGES] = {{0}};
        for (int m = 0; m < MAPS; m++)
            for (int pg = 0; pg < PAGES; pg++)
                before[m][pg] = (uint8_t)rng_below(4); /* 3: out of the enum, unknown */
        for (size_t i = 0; i < ns; i++) {
            uint64_t a = rng_below(PAGES), b = a + rng_below(PAGES - a + 1);
            staged[i] = (struct rf_file_range){(int32_t)rng_below(MAPS), {a, b}};
            for (uint64_t pg = a; pg < b; pg++)
                s_bit[staged[i].mapping_index][pg] = true;
        }
        for (size_t i = 0; i < nu; i++) {
            uint64_t a = rng_below(PAGES), b = a + rng_below(PAGES - a + 1);
            used[i] = (struct rf_file_range){(int32_t)rng_below(MAPS), {a, b}};
            for (uint64_t pg = a; pg < b; pg++)
                u_bit[used[i].mapping_index][pg] = true;
        }
        uint64_t hit = 0, miss = 0, wasted = 0, unknown = 0, n_used = 0, n_staged = 0, pre = 0;
        for (int m = 0; m < MAPS; m++) {
            for (uint64_t pg = 0; pg < PAGES; pg++) {
                uint8_t st = pg < nb[m] ? before[m][pg] : RF_PAGE_UNKNOWN;
                n_used += u_bit[m][pg];
                n_staged += s_bit[m][pg];
                pre += s_bit[m][pg] && st == RF_PAGE_RESIDENT;
                if (s_bit[m][pg] && u_bit[m][pg])
                    hit++;
                else if (s_bit[m][pg])
                    wasted++;
                else if (u_bit[m][pg] && st == RF_PAGE_NONRESIDENT)
                    miss++;
                else if (u_bit[m][pg] && st != RF_PAGE_RESIDENT)
                    unknown++;
            }
        }
        struct rf_prediction out;
        memset(&out, 0, sizeof(out));
        assert_int_equal(
            rf_prediction_count(staged, ns, used, nu, (const uint8_t *const *)bp, nb, MAPS, &out),
            0);
        assert_true(out.has_pages);
        assert_int_equal(out.hit_pages, hit);
        assert_int_equal(out.miss_pages, miss);
        assert_int_equal(out.wasted_pages, wasted);
        assert_int_equal(out.unknown_pages, unknown);
        assert_int_equal(out.used_pages, n_used);
        assert_int_equal(out.resident_staged_pages, pre);
        /* consistency: every staged page is a hit or wasted; no used page is counted twice */
        assert_int_equal(out.hit_pages + out.wasted_pages, n_staged);
        assert_true(out.hit_pages + out.miss_pages + out.unknown_pages <= out.used_pages);
    }
    struct rf_file_range neg = {-1, {0, 1}};
    struct rf_prediction out;
    assert_int_equal(rf_prediction_count(&neg, 1, NULL, 0, NULL, NULL, 0, &out), -EINVAL);
}

/* The report's prediction section: bytes are pages x page size, each with a provenance. */
static void test_prediction_report(void **state)
{
    (void)state;
    struct rf_report r;
    memset(&r, 0, sizeof(r));
    struct rf_prediction e = entry(2, ID_A); /* has_pages: 4096-byte pages */
    r.prediction = &e;
    r.prediction_evidence = "evidence";
    json_t *o = rf_prediction_json(&r);
    assert_non_null(o);
    assert_true(json_is_false(json_object_get(o, "release_authorized")));
    assert_true(json_is_null(json_object_get(o, "reason")));
    json_t *hit = json_object_get(o, "hit_bytes"), *miss = json_object_get(o, "miss_bytes");
    assert_int_equal(json_integer_value(json_object_get(hit, "value")), 1 * 4096);
    assert_int_equal(json_integer_value(json_object_get(miss, "value")), 2 * 4096);
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(o, "wasted_bytes"), "value")), 3 * 4096);
    assert_non_null(strstr(json_string_value(json_object_get(miss, "provenance")), "mincore"));
    json_decref(o);
    e = entry(1, ID_A); /* no page counts: null values */
    o = rf_prediction_json(&r);
    assert_true(json_is_null(json_object_get(json_object_get(o, "hit_bytes"), "value")));
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(o, "selected_bytes"), "value")), 4096);
    json_decref(o);
    r.prediction = NULL;
    r.prediction_reason = "none here";
    o = rf_prediction_json(&r);
    assert_string_equal(json_string_value(json_object_get(o, "reason")), "none here");
    assert_true(json_is_false(json_object_get(o, "release_authorized")));
    json_decref(o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_update_and_orders),
        cmocka_unit_test(test_incomplete_trace_refused),
        cmocka_unit_test(test_identity),
        cmocka_unit_test(test_round_trip_and_history_bound),
        cmocka_unit_test(test_merge),
        cmocka_unit_test(test_parse_refusals),
        cmocka_unit_test(test_prediction_counts_per_page_model),
        cmocka_unit_test(test_prediction_report),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
