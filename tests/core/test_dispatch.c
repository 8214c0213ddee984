/*
 * Dispatch attribution: unique names are attributed, duplicated, unknown,
 * truncated and foreign ones are not; first-dispatch order follows the
 * sequence; a naive linear-scan model agrees over seeded random captures;
 * pre-dispatch samples are summed per status and sampling_complete is true
 * only when sampling was on and every weight reference was sampled complete.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "ramforge/core/dispatch.h"

#define INSTANCE 7

static struct rf_inventory_entry entries[16];

static struct rf_inventory inventory(const char *const *names, size_t n)
{
    struct rf_inventory inv;
    memset(&inv, 0, sizeof(inv));
    memset(entries, 0, sizeof(entries));
    for (size_t i = 0; i < n; i++) {
        entries[i].key.tensor_index = (uint32_t)i;
        snprintf(entries[i].name, sizeof(entries[i].name), "%s", names[i]);
    }
    inv.generation = 1;
    inv.entries = entries;
    inv.n = n;
    return inv;
}

/* An event of INSTANCE with sequence seq and the given sources (NULL-terminated). */
static struct rf_dispatch_event event(uint64_t seq, const char *const *srcs)
{
    struct rf_dispatch_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.model_instance_id = INSTANCE;
    ev.context_id = 1;
    ev.sequence = seq;
    snprintf(ev.node_name, sizeof(ev.node_name), "node-%llu", (unsigned long long)seq);
    snprintf(ev.op_name, sizeof(ev.op_name), "MUL_MAT");
    for (; srcs[ev.n_src]; ev.n_src++)
        snprintf(ev.src_names[ev.n_src], sizeof(ev.src_names[0]), "%s", srcs[ev.n_src]);
    return ev;
}

static void test_unique_names_attributed(void **state)
{
    (void)state;
    const char *names[] = {"a.weight", "b.weight", "c.weight"};
    struct rf_inventory inv = inventory(names, 3);
    struct rf_dispatch_event ev[3] = {
        event(0, (const char *[]){"inp_embd", "b.weight", NULL}),
        event(1, (const char *[]){"a.weight", "attn_norm-0", NULL}),
        event(2, (const char *[]){"b.weight", NULL}),
    };
    ev[0].src_weight_mask = 2;
    ev[1].src_weight_mask = 1;
    ev[2].src_weight_mask = 1;
    struct rf_dispatch_summary s;

    assert_int_equal(rf_dispatch_summarize(&inv, INSTANCE, ev, 3, 0, &s), 0);
    assert_int_equal(s.events, 3);
    assert_int_equal(s.dropped_events, 0);
    assert_true(s.complete);
    assert_int_equal(s.source_refs, 5);
    assert_int_equal(s.attributed_refs, 3);
    assert_int_equal(s.unattributed_refs, 2);
    assert_int_equal(s.weight_refs, 3);
    assert_int_equal(s.unattributed_weight_refs, 0);
    assert_int_equal(s.n_tensors, 3);
    assert_int_equal(s.tensors_named, 2);
    /* b first (sequence 0), a second (sequence 1), c never. */
    assert_int_equal(s.tensors[1].first_sequence, 0);
    assert_int_equal(s.tensors[1].first_order, 0);
    assert_int_equal(s.tensors[1].references, 2);
    assert_int_equal(s.tensors[0].first_sequence, 1);
    assert_int_equal(s.tensors[0].first_order, 1);
    assert_true(s.tensors[2].first_sequence == RF_DISPATCH_NEVER);
    assert_int_equal(s.tensors[2].first_order, UINT32_MAX);
    assert_int_equal(s.tensors[2].references, 0);
    assert_string_equal(s.caveat, RF_DISPATCH_CAVEAT);
    assert_non_null(strstr(s.caveat, "dispatch-start evidence only"));
    rf_dispatch_summary_free(&s);
    assert_null(s.tensors);
}

static void test_duplicate_names_unattributed(void **state)
{
    (void)state;
    const char *names[] = {"dup.weight", "u.weight", "dup.weight"};
    struct rf_inventory inv = inventory(names, 3);
    struct rf_dispatch_event ev[2] = {
        event(0, (const char *[]){"dup.weight", NULL}),
        event(1, (const char *[]){"u.weight", "dup.weight", NULL}),
    };
    ev[0].src_weight_mask = 1;
    ev[1].src_weight_mask = 3;
    struct rf_dispatch_summary s;

    assert_int_equal(rf_dispatch_summarize(&inv, INSTANCE, ev, 2, 0, &s), 0);
    assert_int_equal(s.source_refs, 3);
    assert_int_equal(s.attributed_refs, 1);
    assert_int_equal(s.duplicate_name_refs, 2);
    assert_int_equal(s.unattributed_refs, 2);
    assert_int_equal(s.unattributed_weight_refs, 2);
    assert_true(s.tensors[0].first_sequence == RF_DISPATCH_NEVER);
    assert_true(s.tensors[2].first_sequence == RF_DISPATCH_NEVER);
    assert_int_equal(s.tensors[1].first_sequence, 1);
    assert_int_equal(s.tensors[1].first_order, 0);
    rf_dispatch_summary_free(&s);
}

static void test_unknown_truncated_foreign_unattributed(void **state)
{
    (void)state;
    const char *names[] = {"blk.0.ffn_up.weight", "w"};
    struct rf_inventory inv = inventory(names, 2);
    struct rf_dispatch_event ev[4] = {
        /* no such name; a prefix of a real one; a differently cased one */
        event(0, (const char *[]){"blk.0.ffn_up", "blk.0.ffn_up.weight (view)",
                                  "BLK.0.FFN_UP.WEIGHT", "", NULL}),
        event(1, (const char *[]){"w", NULL}),
        event(2, (const char *[]){"w", NULL}),
        event(3, (const char *[]){"w", "w", NULL}),
    };
    ev[1].truncated_mask = 1;                              /* the observer cut this name short */
    memset(ev[2].src_names[0], 'w', RF_DISPATCH_NAME_MAX); /* no NUL in the field */
    ev[3].model_instance_id = INSTANCE + 1;                /* another model instance */
    struct rf_dispatch_summary s;

    assert_int_equal(rf_dispatch_summarize(&inv, INSTANCE, ev, 4, 5, &s), 0);
    assert_int_equal(s.events, 4);
    assert_int_equal(s.dropped_events, 5);
    assert_false(s.complete);
    assert_int_equal(s.foreign_events, 1);
    assert_int_equal(s.source_refs, 8);
    assert_int_equal(s.attributed_refs, 0);
    assert_int_equal(s.unattributed_refs, 8);
    assert_int_equal(s.truncated_refs, 2);
    assert_int_equal(s.tensors_named, 0);
    rf_dispatch_summary_free(&s);
}

static void test_bad_input(void **state)
{
    (void)state;
    const char *names[] = {"a"};
    struct rf_inventory inv = inventory(names, 1);
    struct rf_dispatch_event ev = event(0, (const char *[]){"a", NULL});
    struct rf_dispatch_summary s;

    ev.n_src = RF_DISPATCH_MAX_SRC + 1;
    assert_int_equal(rf_dispatch_summarize(&inv, INSTANCE, &ev, 1, 0, &s), -EINVAL);
    assert_null(s.tensors);
    assert_int_equal(rf_dispatch_summarize(&inv, INSTANCE, NULL, 1, 0, &s), -EINVAL);
    assert_int_equal(rf_dispatch_summarize(NULL, INSTANCE, NULL, 0, 0, &s), -EINVAL);
    assert_int_equal(rf_dispatch_summarize(&inv, INSTANCE, NULL, 0, 0, NULL), -EINVAL);
    /* No events: an empty, complete summary over the inventory. */
    assert_int_equal(rf_dispatch_summarize(&inv, INSTANCE, NULL, 0, 0, &s), 0);
    assert_int_equal(s.n_tensors, 1);
    assert_true(s.complete);
    assert_true(s.tensors[0].first_sequence == RF_DISPATCH_NEVER);
    rf_dispatch_summary_free(&s);
    rf_dispatch_summary_free(NULL);
}

/* Sets weight source i of ev to a sample of the given status and counts. */
static void set_sample(struct rf_dispatch_event *ev, unsigned i, enum rf_dispatch_sample_status st,
                       uint16_t inspected, uint16_t resident, uint16_t unknown)
{
    ev->src_weight_mask |= (uint16_t)(1u << i);
    ev->samples[i] = (struct rf_dispatch_sample){
        .status = (uint8_t)st,
        .inspected_pages = inspected,
        .resident_pages = resident,
        .unknown_pages = unknown,
    };
}

/* Per-status counts, page sums, and sampling_complete false for anything but complete. */
static void test_sampling_aggregated(void **state)
{
    (void)state;
    const char *names[] = {"a", "b", "c"};
    struct rf_inventory inv = inventory(names, 3);
    struct rf_dispatch_event ev[3] = {
        event(0, (const char *[]){"a", "x", "b", NULL}),
        event(1, (const char *[]){"c", "a", "b", NULL}),
        event(2, (const char *[]){"c", NULL}),
    };
    struct rf_dispatch_summary s;

    for (int e = 0; e < 3; e++)
        ev[e].sample_max_pages = 8;
    set_sample(&ev[0], 0, RF_DISPATCH_SAMPLE_COMPLETE, 3, 3, 0);
    ev[0].samples[1].status = RF_DISPATCH_SAMPLE_COMPLETE; /* not a weight: ignored */
    ev[0].samples[1].inspected_pages = 5;
    set_sample(&ev[0], 2, RF_DISPATCH_SAMPLE_PARTIAL, 8, 6, 0);
    set_sample(&ev[1], 0, RF_DISPATCH_SAMPLE_MISSING, 0, 0, 0);
    set_sample(&ev[1], 1, RF_DISPATCH_SAMPLE_FAILED, 2, 0, 2);
    set_sample(&ev[1], 2, RF_DISPATCH_SAMPLE_NONE, 0, 0, 0); /* no sample: missing */
    set_sample(&ev[2], 0, RF_DISPATCH_SAMPLE_TRUNCATED, 8, 7, 0);
    assert_int_equal(rf_dispatch_summarize(&inv, INSTANCE, ev, 3, 0, &s), 0);
    const struct rf_dispatch_sampling *sp = &s.sampling;
    assert_true(sp->enabled);
    assert_false(sp->sampling_complete);
    assert_int_equal(sp->max_pages_per_source, 8);
    assert_int_equal(s.weight_refs, 6);
    assert_int_equal(sp->samples, 6);
    assert_int_equal(sp->complete, 1);
    assert_int_equal(sp->partial, 1);
    assert_int_equal(sp->truncated, 1);
    assert_int_equal(sp->missing, 2);
    assert_int_equal(sp->failed, 1);
    assert_int_equal(sp->disabled, 0);
    assert_int_equal(sp->pages_inspected, 3 + 8 + 2 + 8);
    assert_int_equal(sp->pages_resident, 3 + 6 + 7);
    assert_int_equal(sp->pages_unknown, 2);
    assert_int_equal(sp->pages_nonresident, 2 + 1);
    assert_string_equal(sp->note, RF_DISPATCH_SAMPLING_NOTE);
    rf_dispatch_summary_free(&s);

    /* Every weight reference complete: sampling_complete ... */
    struct rf_dispatch_event ok[2] = {
        event(0, (const char *[]){"a", "x", NULL}),
        event(1, (const char *[]){"b", "c", NULL}),
    };
    for (int e = 0; e < 2; e++)
        ok[e].sample_max_pages = 4096;
    set_sample(&ok[0], 0, RF_DISPATCH_SAMPLE_COMPLETE, 4096, 4000, 0);
    set_sample(&ok[1], 0, RF_DISPATCH_SAMPLE_COMPLETE, 1, 1, 0);
    set_sample(&ok[1], 1, RF_DISPATCH_SAMPLE_COMPLETE, 0, 0, 0);
    assert_int_equal(rf_dispatch_summarize(&inv, INSTANCE, ok, 2, 0, &s), 0);
    assert_true(s.sampling.sampling_complete);
    assert_int_equal(s.sampling.samples, 3);
    assert_int_equal(s.sampling.pages_nonresident, 96);
    rf_dispatch_summary_free(&s);
    /* ... but not when events were dropped (their sources went unsampled) ... */
    assert_int_equal(rf_dispatch_summarize(&inv, INSTANCE, ok, 2, 1, &s), 0);
    assert_false(s.sampling.sampling_complete);
    rf_dispatch_summary_free(&s);
    /* ... nor when one event was recorded with sampling off. */
    ok[1].sample_max_pages = 0;
    memset(ok[1].samples, 0, sizeof(ok[1].samples));
    assert_int_equal(rf_dispatch_summarize(&inv, INSTANCE, ok, 2, 0, &s), 0);
    assert_true(s.sampling.enabled);
    assert_false(s.sampling.sampling_complete);
    assert_int_equal(s.sampling.samples, 1);
    assert_int_equal(s.sampling.disabled, 2);
    rf_dispatch_summary_free(&s);
}

/* Sampling off: every weight reference disabled, nothing sampled, not complete. */
static void test_sampling_disabled(void **state)
{
    (void)state;
    const char *names[] = {"a", "b"};
    struct rf_inventory inv = inventory(names, 2);
    struct rf_dispatch_event ev[2] = {
        event(0, (const char *[]){"a", "x", NULL}),
        event(1, (const char *[]){"b", NULL}),
    };
    struct rf_dispatch_summary s;

    ev[0].src_weight_mask = 1;
    ev[1].src_weight_mask = 1;
    assert_int_equal(rf_dispatch_summarize(&inv, INSTANCE, ev, 2, 0, &s), 0);
    assert_false(s.sampling.enabled);
    assert_false(s.sampling.sampling_complete);
    assert_int_equal(s.sampling.max_pages_per_source, 0);
    assert_int_equal(s.sampling.samples, 0);
    assert_int_equal(s.sampling.disabled, 2);
    assert_int_equal(s.sampling.pages_inspected, 0);
    rf_dispatch_summary_free(&s);
    /* No events at all: nothing was sampled either. */
    assert_int_equal(rf_dispatch_summarize(&inv, INSTANCE, NULL, 0, 0, &s), 0);
    assert_false(s.sampling.enabled);
    assert_false(s.sampling.sampling_complete);
    rf_dispatch_summary_free(&s);
    assert_string_equal(rf_dispatch_sample_status_name(RF_DISPATCH_SAMPLE_PARTIAL), "partial");
    assert_string_equal(rf_dispatch_sample_status_name(RF_DISPATCH_SAMPLE_STATUS_COUNT), "invalid");
}

/* Samples that cannot be: out-of-range status, counts over the budget or the inspected pages. */
static void test_sampling_bad_input(void **state)
{
    (void)state;
    const char *names[] = {"a"};
    struct rf_inventory inv = inventory(names, 1);
    struct rf_dispatch_summary s;
    struct rf_dispatch_event ev = event(0, (const char *[]){"a", NULL});

    ev.sample_max_pages = 4;
    set_sample(&ev, 0, RF_DISPATCH_SAMPLE_STATUS_COUNT, 0, 0, 0);
    assert_int_equal(rf_dispatch_summarize(&inv, INSTANCE, &ev, 1, 0, &s), -EINVAL);
    assert_null(s.tensors);
    set_sample(&ev, 0, RF_DISPATCH_SAMPLE_COMPLETE, 5, 0, 0); /* over the budget */
    assert_int_equal(rf_dispatch_summarize(&inv, INSTANCE, &ev, 1, 0, &s), -EINVAL);
    set_sample(&ev, 0, RF_DISPATCH_SAMPLE_FAILED, 3, 2, 2); /* resident + unknown > inspected */
    assert_int_equal(rf_dispatch_summarize(&inv, INSTANCE, &ev, 1, 0, &s), -EINVAL);
    set_sample(&ev, 0, RF_DISPATCH_SAMPLE_COMPLETE, 4, 4, 0);
    ev.sample_max_pages = RF_PAGE_WINDOW_PAGES + 1;
    assert_int_equal(rf_dispatch_summarize(&inv, INSTANCE, &ev, 1, 0, &s), -EINVAL);
    ev.sample_max_pages = 4;
    assert_int_equal(rf_dispatch_summarize(&inv, INSTANCE, &ev, 1, 0, &s), 0);
    assert_true(s.sampling.sampling_complete);
    rf_dispatch_summary_free(&s);
}

static uint64_t rng_state;

static uint64_t rng(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Random inventories (with repeated names) and captures against a linear scan. */
static void test_random_against_naive(void **state)
{
    (void)state;
    static const char *pool[] = {"t0", "t1", "t2", "t3", "t4", "t5", "t6", "t7", "x", "y"};
    static struct rf_dispatch_event ev[64];

    rng_state = 42;
    for (int round = 0; round < 500; round++) {
        size_t n_inv = 1 + rng() % 12, n_ev = rng() % 64;
        const char *names[16];
        for (size_t i = 0; i < n_inv; i++)
            names[i] = pool[rng() % 8]; /* t0..t7: duplicates likely */
        struct rf_inventory inv = inventory(names, n_inv);
        for (size_t e = 0; e < n_ev; e++) {
            const char *srcs[RF_DISPATCH_MAX_SRC + 1];
            size_t k = rng() % (RF_DISPATCH_MAX_SRC + 1);
            for (size_t j = 0; j < k; j++)
                srcs[j] = pool[rng() % 10];
            srcs[k] = NULL;
            ev[e] = event(e * 3, srcs);
        }
        struct rf_dispatch_summary s;
        assert_int_equal(rf_dispatch_summarize(&inv, INSTANCE, ev, n_ev, 0, &s), 0);

        uint64_t attributed = 0, refs = 0, first[16], count[16];
        for (size_t i = 0; i < n_inv; i++) {
            first[i] = RF_DISPATCH_NEVER;
            count[i] = 0;
        }
        for (size_t e = 0; e < n_ev; e++) {
            for (size_t j = 0; j < ev[e].n_src; j++) {
                size_t matches = 0, at = 0;
                refs++;
                for (size_t i = 0; i < n_inv; i++)
                    if (strcmp(ev[e].src_names[j], names[i]) == 0) {
                        matches++;
                        at = i;
                    }
                if (matches != 1)
                    continue;
                attributed++;
                count[at]++;
                if (first[at] == RF_DISPATCH_NEVER)
                    first[at] = ev[e].sequence;
            }
        }
        assert_int_equal(s.source_refs, refs);
        assert_int_equal(s.attributed_refs, attributed);
        assert_int_equal(s.unattributed_refs, refs - attributed);
        for (size_t i = 0; i < n_inv; i++) {
            assert_true(s.tensors[i].first_sequence == first[i]);
            assert_int_equal(s.tensors[i].references, count[i]);
            /* first_order ranks by first_sequence: count those strictly earlier. */
            if (first[i] != RF_DISPATCH_NEVER) {
                uint32_t earlier = 0;
                for (size_t k = 0; k < n_inv; k++)
                    if (first[k] != RF_DISPATCH_NEVER &&
                        (first[k] < first[i] || (first[k] == first[i] && k < i)))
                        earlier++;
                assert_int_equal(s.tensors[i].first_order, earlier);
            }
        }
        rf_dispatch_summary_free(&s);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unique_names_attributed),
        cmocka_unit_test(test_duplicate_names_unattributed),
        cmocka_unit_test(test_unknown_truncated_foreign_unattributed),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_random_against_naive),
        cmocka_unit_test(test_sampling_aggregated),
        cmocka_unit_test(test_sampling_disabled),
        cmocka_unit_test(test_sampling_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
