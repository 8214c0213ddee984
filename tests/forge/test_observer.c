/*
 * CPU node-dispatch observer on a generated tiny model: the event count
 * equals the graph's non-empty compute nodes as a plain counting callback
 * (written here, not the observer's code) sees them; tokens are identical
 * with and without the observer; without it no cb_eval is installed; a
 * small buffer counts dropped_events; sequences strictly increase; core
 * attributes every weight source of this model (whose names are unique).
 * Pre-dispatch sampling: every weight source of every event is sampled and
 * resident after load (llama.cpp prefetches the mapping), sampling_complete;
 * one page per source leaves multi-page tensors partial; off, no sample and
 * sampling_complete false; tokens identical with it on; a model file no
 * longer at its path gives failed samples with unknown pages.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "ggml.h"

#include "forge_test_util.h"
#include "ramforge/core/dispatch.h"
#include "ramforge/core/inventory.h"
#include "ramforge/forge/forge.h"
#include "ramforge/forge/forge_observer.h"
#include "ramforge/forge/forge_pages.h"

#define N_PREDICT 8
#define PROMPT "The quick brown fox"
#define CAPACITY 65536 /* events: far more than 8 decodes of a 2-layer graph */

static char model_path[256];
static struct forge_model *model;

/* Token ids decoded in both contexts of the count test: a 4-token batch, then 3 singles. */
static int32_t batch_tokens[4] = {1, 450, 4996, 17354};
static int32_t single_tokens[3] = {1701, 29916, 432};

/* What the counting callback saw, in graph order. */
struct counter {
    uint64_t asked;               /* every node asked about */
    uint64_t kernel;              /* nodes ggml-cpu runs a kernel for */
    char (*names)[GGML_MAX_NAME]; /* node name per kernel node (CAPACITY) */
    char (*ops)[32];
};

/*
 * The expectation, stated independently of src/forge/observer.c: ggml-cpu's
 * ggml_graph_compute_thread skips a node whose op is a no-op (by name here:
 * NONE, RESHAPE, VIEW, PERMUTE, TRANSPOSE) or that lacks
 * GGML_TENSOR_FLAG_COMPUTE, and ggml_compute_forward returns at once for an
 * empty tensor (ggml_is_empty).
 */
static bool count_cb(struct ggml_tensor *t, bool ask, void *user_data)
{
    static const char *const noop[] = {"NONE", "RESHAPE", "VIEW", "PERMUTE", "TRANSPOSE"};
    struct counter *c = user_data;

    if (!ask)
        return true;
    c->asked++;
    for (size_t i = 0; i < sizeof(noop) / sizeof(noop[0]); i++)
        if (strcmp(ggml_op_name(t->op), noop[i]) == 0)
            return false;
    if (!(t->flags & GGML_TENSOR_FLAG_COMPUTE) || ggml_is_empty(t))
        return false;
    if (c->kernel < CAPACITY) {
        snprintf(c->names[c->kernel], sizeof(c->names[0]), "%s", t->name);
        snprintf(c->ops[c->kernel], sizeof(c->ops[0]), "%s", ggml_op_desc(t));
    }
    c->kernel++;
    return false;
}

/* Decodes the fixed token sequence on a fresh context made with cp; returns decodes done. */
static int decode_fixed(const struct forge_context_params *cp, struct forge_observer *obs)
{
    struct forge_context *fc;
    char err[FORGE_ERR_MAX];
    int decodes = 0;

    assert_int_equal(forge_context_create(model, cp, &fc, err), 0);
    assert_true(forge_context_has_cb_eval(fc));
    if (obs)
        forge_observer_bind(obs, fc);
    assert_int_equal(forge_context_decode(fc, batch_tokens, 4), 0);
    forge_context_synchronize(fc);
    decodes++;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(forge_context_decode(fc, &single_tokens[i], 1), 0);
        forge_context_synchronize(fc);
        decodes++;
    }
    if (obs)
        forge_observer_bind(obs, NULL);
    forge_context_free(fc);
    return decodes;
}

static int generate(struct forge_observer *obs, int32_t *tokens, size_t *n)
{
    struct forge_generate_params gp = {
        .prompt = PROMPT, .n_predict = N_PREDICT, .n_threads = 1, .observer = obs};
    struct forge_generate_result r;
    char err[FORGE_ERR_MAX];
    int rc = forge_generate(model, &gp, &r, err);
    if (rc < 0)
        return rc;
    memcpy(tokens, r.tokens, r.n_tokens * sizeof(int32_t));
    *n = r.n_tokens;
    forge_generate_result_free(&r);
    return 0;
}

static int setup(void **state)
{
    (void)state;
    snprintf(model_path, sizeof(model_path), "/tmp/ramforge-test-observer-%ld.gguf",
             (long)getpid());
    if (forge_test_mkmodel(model_path, FORGE_PRESET_TINY, "q8_0", 5) < 0 ||
        forge_test_load(model_path, true, &model) < 0)
        return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    forge_model_free(model);
    unlink(model_path);
    return 0;
}

/* One event per node ggml-cpu runs, same nodes, same order, as the counting callback. */
static void test_event_count_equals_compute_nodes(void **state)
{
    (void)state;
    struct counter c = {0};
    struct forge_observer *obs;
    struct forge_observer_stats st;
    size_t n;

    c.names = calloc(CAPACITY, sizeof(*c.names));
    c.ops = calloc(CAPACITY, sizeof(*c.ops));
    assert_non_null(c.names);
    assert_non_null(c.ops);
    struct forge_context_params cp = {
        .n_ctx = 64, .n_batch = 8, .n_threads = 1, .cb_eval = count_cb, .cb_eval_user_data = &c};
    decode_fixed(&cp, NULL);

    assert_int_equal(forge_observer_create(CAPACITY, &obs), 0);
    struct forge_context_params op = {.n_ctx = 64, .n_batch = 8, .n_threads = 1};
    forge_observer_context_params(obs, &op);
    int decodes = decode_fixed(&op, obs);

    forge_observer_stats(obs, &st);
    const struct rf_dispatch_event *ev = forge_observer_events(obs, &n);
    printf("nodes asked %llu, kernel nodes %llu, events %zu, skipped %llu\n",
           (unsigned long long)c.asked, (unsigned long long)c.kernel, n,
           (unsigned long long)st.skipped_nodes);
    assert_true(c.kernel > 0 && c.kernel < CAPACITY);
    assert_true(c.kernel < c.asked); /* the graph has views and reshapes: they are skipped */
    assert_int_equal(n, c.kernel);
    assert_int_equal(st.events, c.kernel);
    assert_int_equal(st.dropped_events, 0);
    assert_int_equal(st.events + st.skipped_nodes, c.asked);
    assert_int_equal(st.unbound_asks, 0);
    uint64_t last_gen = 0;
    for (size_t i = 0; i < n; i++) {
        assert_string_equal(ev[i].node_name, c.names[i]);
        assert_string_equal(ev[i].op_name, c.ops[i]);
        assert_true(ev[i].execution_generation >= last_gen);
        last_gen = ev[i].execution_generation;
    }
    assert_int_equal(last_gen, decodes - 1);
    forge_observer_free(obs);
    free(c.names);
    free(c.ops);
}

/* Greedy tokens are the same with and without the observer. */
static void test_tokens_identical(void **state)
{
    (void)state;
    int32_t off[N_PREDICT], on[N_PREDICT];
    size_t n_off = 0, n_on = 0;
    struct forge_observer *obs;
    struct forge_observer_stats st;

    assert_int_equal(forge_observer_create(CAPACITY, &obs), 0);
    assert_int_equal(generate(NULL, off, &n_off), 0);
    assert_int_equal(generate(obs, on, &n_on), 0);
    assert_true(n_off > 0);
    assert_int_equal(n_on, n_off);
    assert_memory_equal(on, off, n_off * sizeof(int32_t));
    forge_observer_stats(obs, &st);
    assert_true(st.events > 0);
    assert_int_equal(st.dropped_events, 0);

    size_t n;
    const struct rf_dispatch_event *ev = forge_observer_events(obs, &n);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(ev[i].model_instance_id, forge_model_instance_id(model));
        assert_int_equal(ev[i].context_id, ev[0].context_id);
        assert_true(ev[i].op_name[0] != '\0');
        assert_true(ev[i].n_src <= RF_DISPATCH_MAX_SRC);
    }
    /* One decode for the prompt, then one per generated token but the last
     * (an end-of-generation token, not kept, would end the loop one later). */
    assert_int_equal(ev[n - 1].execution_generation, n_on == N_PREDICT ? n_on - 1 : n_on);
    forge_observer_free(obs);
}

/* Disabled: no context gets a cb_eval, from forge_generate or forge_context_create. */
static void test_disabled_installs_no_callback(void **state)
{
    (void)state;
    int32_t tokens[N_PREDICT];
    size_t n;
    struct forge_context *fc;
    char err[FORGE_ERR_MAX];
    struct forge_observer *obs;

    uint64_t before = forge_cb_eval_contexts_opened();
    assert_int_equal(generate(NULL, tokens, &n), 0);
    assert_int_equal(forge_cb_eval_contexts_opened(), before);

    struct forge_context_params cp = {.n_ctx = 32, .n_batch = 8, .n_threads = 1};
    assert_int_equal(forge_context_create(model, &cp, &fc, err), 0);
    assert_false(forge_context_has_cb_eval(fc));
    forge_context_free(fc);
    assert_int_equal(forge_cb_eval_contexts_opened(), before);

    /* Enabled, for contrast: exactly one context with a callback per generation. */
    assert_int_equal(forge_observer_create(16, &obs), 0);
    assert_int_equal(generate(obs, tokens, &n), 0);
    assert_int_equal(forge_cb_eval_contexts_opened(), before + 1);
    forge_observer_context_params(obs, &cp);
    assert_int_equal(forge_context_create(model, &cp, &fc, err), 0);
    assert_true(forge_context_has_cb_eval(fc));
    assert_true(forge_context_id(fc) > 0);
    forge_context_free(fc);
    forge_observer_free(obs);
}

/* A buffer smaller than the capture keeps the first events and counts the rest. */
static void test_dropped_events_counted(void **state)
{
    (void)state;
    int32_t tokens[N_PREDICT];
    size_t n;
    struct forge_observer *full, *small;
    struct forge_observer_stats fs, ss;

    assert_int_equal(forge_observer_create(CAPACITY, &full), 0);
    assert_int_equal(forge_observer_create(5, &small), 0);
    assert_int_equal(generate(full, tokens, &n), 0);
    assert_int_equal(generate(small, tokens, &n), 0);
    forge_observer_stats(full, &fs);
    forge_observer_stats(small, &ss);
    assert_int_equal(fs.dropped_events, 0);
    assert_int_equal(ss.capacity_events, 5);
    assert_int_equal(ss.events, 5);
    assert_int_equal(ss.dropped_events, fs.events - 5);

    size_t nf, ns;
    const struct rf_dispatch_event *ef = forge_observer_events(full, &nf);
    const struct rf_dispatch_event *es = forge_observer_events(small, &ns);
    assert_int_equal(ns, 5);
    for (size_t i = 0; i < ns; i++)
        assert_string_equal(es[i].node_name, ef[i].node_name);

    forge_observer_reset(small);
    forge_observer_stats(small, &ss);
    assert_int_equal(ss.events, 0);
    assert_int_equal(ss.dropped_events, 0);
    forge_observer_free(full);
    forge_observer_free(small);
    assert_int_equal(forge_observer_create(0, &small), -EINVAL);
    assert_null(small);
    forge_observer_free(NULL);
}

/* Sequence numbers strictly increase, across generations too, and stay below capacity. */
static void test_sequence_strictly_increasing(void **state)
{
    (void)state;
    int32_t tokens[N_PREDICT];
    size_t n, n_ev;
    struct forge_observer *obs;

    assert_int_equal(forge_observer_create(CAPACITY, &obs), 0);
    assert_int_equal(generate(obs, tokens, &n), 0);
    size_t first_run;
    forge_observer_events(obs, &first_run);
    assert_int_equal(generate(obs, tokens, &n), 0);
    const struct rf_dispatch_event *ev = forge_observer_events(obs, &n_ev);
    assert_int_equal(n_ev, 2 * first_run);
    for (size_t i = 1; i < n_ev; i++)
        assert_true(ev[i].sequence > ev[i - 1].sequence);
    assert_true(ev[n_ev - 1].sequence < CAPACITY);
    /* Two generations, two contexts. */
    assert_true(ev[first_run].context_id != ev[0].context_id);
    assert_int_equal(ev[first_run].execution_generation, 0);
    forge_observer_free(obs);
}

/* Core attributes this model's weight sources: its tensor names are unique. */
static void test_weights_attributed(void **state)
{
    (void)state;
    int32_t tokens[N_PREDICT];
    size_t n, nt, nm;
    struct forge_observer *obs;
    struct rf_inventory inv;
    struct rf_dispatch_summary s;

    assert_int_equal(forge_observer_create(CAPACITY, &obs), 0);
    assert_int_equal(generate(obs, tokens, &n), 0);
    const struct rf_tensor_meta *t = forge_model_tensors(model, &nt);
    const struct rf_mapping_meta *mm = forge_model_mappings(model, &nm);
    rf_inventory_init(&inv);
    assert_int_equal(rf_inventory_build(t, nt, mm, nm, (uint64_t)sysconf(_SC_PAGESIZE), 1, &inv),
                     0);
    struct forge_observer_stats st;
    forge_observer_stats(obs, &st);
    const struct rf_dispatch_event *ev = forge_observer_events(obs, &n);
    assert_int_equal(
        rf_dispatch_summarize(&inv, forge_model_instance_id(model), ev, n, st.dropped_events, &s),
        0);
    printf("refs %llu, attributed %llu, weight refs %llu, tensors named %llu of %zu\n",
           (unsigned long long)s.source_refs, (unsigned long long)s.attributed_refs,
           (unsigned long long)s.weight_refs, (unsigned long long)s.tensors_named, nt);
    assert_true(s.complete);
    assert_true(s.weight_refs > 0);
    assert_int_equal(s.attributed_refs, s.weight_refs);
    assert_int_equal(s.unattributed_weight_refs, 0);
    /* The first weight the graph uses is the token embedding. */
    for (size_t i = 0; i < inv.n; i++)
        if (s.tensors[i].first_order == 0)
            assert_string_equal(inv.entries[i].name, "token_embd.weight");
    rf_dispatch_summary_free(&s);
    rf_inventory_free(&inv);
    forge_observer_free(obs);
}

/* Summarizes obs's events against the model's inventory into *s. */
static void summarize(struct forge_observer *obs, struct rf_dispatch_summary *s)
{
    size_t nt, nm, n;
    struct rf_inventory inv;
    struct forge_observer_stats st;
    const struct rf_tensor_meta *t = forge_model_tensors(model, &nt);
    const struct rf_mapping_meta *mm = forge_model_mappings(model, &nm);

    rf_inventory_init(&inv);
    assert_int_equal(rf_inventory_build(t, nt, mm, nm, (uint64_t)sysconf(_SC_PAGESIZE), 1, &inv),
                     0);
    forge_observer_stats(obs, &st);
    const struct rf_dispatch_event *ev = forge_observer_events(obs, &n);
    assert_int_equal(
        rf_dispatch_summarize(&inv, forge_model_instance_id(model), ev, n, st.dropped_events, s),
        0);
    rf_inventory_free(&inv);
}

/* Pages of the file page range of the model tensor named name (computed here, outward). */
static uint64_t tensor_pages(const char *name)
{
    size_t nt;
    const struct rf_tensor_meta *t = forge_model_tensors(model, &nt);
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);

    for (size_t i = 0; i < nt; i++) {
        if (strcmp(t[i].name, name) != 0)
            continue;
        uint64_t first = t[i].file_offset_bytes / page;
        uint64_t end = (t[i].file_offset_bytes + t[i].logical_bytes + page - 1) / page;
        return end - first;
    }
    fail_msg("no tensor %s", name);
    return 0;
}

/* Sampling on: every weight source of every event sampled, complete, resident after load. */
static void test_sampling_every_weight_source(void **state)
{
    (void)state;
    int32_t tokens[N_PREDICT];
    size_t n, n_ev;
    struct forge_observer *obs;
    struct rf_dispatch_summary s;
    uint64_t weight_srcs = 0, pages = 0;

    assert_int_equal(forge_observer_create(CAPACITY, &obs), 0);
    assert_int_equal(forge_observer_set_sampling(obs, model, RF_PAGE_WINDOW_PAGES), 0);
    assert_int_equal(generate(obs, tokens, &n), 0);
    const struct rf_dispatch_event *ev = forge_observer_events(obs, &n_ev);
    assert_true(n_ev > 0);
    for (size_t e = 0; e < n_ev; e++) {
        assert_int_equal(ev[e].sample_max_pages, RF_PAGE_WINDOW_PAGES);
        for (unsigned i = 0; i < ev[e].n_src; i++) {
            const struct rf_dispatch_sample *x = &ev[e].samples[i];
            if (!((ev[e].src_weight_mask >> i) & 1u)) {
                assert_int_equal(x->status, RF_DISPATCH_SAMPLE_NONE);
                continue;
            }
            if (x->status != RF_DISPATCH_SAMPLE_COMPLETE)
                fail_msg("event %zu source %s: %s", e, ev[e].src_names[i],
                         rf_dispatch_sample_status_name(x->status));
            assert_int_equal(x->inspected_pages, tensor_pages(ev[e].src_names[i]));
            assert_int_equal(x->resident_pages, x->inspected_pages);
            assert_int_equal(x->unknown_pages, 0);
            weight_srcs++;
            pages += x->inspected_pages;
        }
    }
    summarize(obs, &s);
    printf("events %zu, weight sources sampled %llu, pages %llu\n", n_ev,
           (unsigned long long)weight_srcs, (unsigned long long)pages);
    assert_true(weight_srcs > 0);
    assert_true(s.sampling.enabled);
    assert_true(s.sampling.sampling_complete);
    assert_int_equal(s.sampling.samples, s.weight_refs);
    assert_int_equal(s.sampling.complete, weight_srcs);
    assert_int_equal(s.sampling.pages_inspected, pages);
    assert_int_equal(s.sampling.pages_resident, pages);
    assert_int_equal(s.sampling.max_pages_per_source, RF_PAGE_WINDOW_PAGES);
    rf_dispatch_summary_free(&s);
    forge_observer_free(obs);
}

/* One page per source: tensors of more than one page are partial; sampling_complete false. */
static void test_sampling_budget_partial(void **state)
{
    (void)state;
    int32_t tokens[N_PREDICT];
    size_t n, n_ev;
    struct forge_observer *obs;
    struct rf_dispatch_summary s;
    uint64_t partial = 0, complete = 0;

    assert_int_equal(forge_observer_create(CAPACITY, &obs), 0);
    assert_int_equal(forge_observer_set_sampling(obs, model, 1), 0);
    assert_int_equal(generate(obs, tokens, &n), 0);
    const struct rf_dispatch_event *ev = forge_observer_events(obs, &n_ev);
    for (size_t e = 0; e < n_ev; e++) {
        for (unsigned i = 0; i < ev[e].n_src; i++) {
            if (!((ev[e].src_weight_mask >> i) & 1u))
                continue;
            const struct rf_dispatch_sample *x = &ev[e].samples[i];
            bool large = tensor_pages(ev[e].src_names[i]) > 1;
            assert_int_equal(x->status,
                             large ? RF_DISPATCH_SAMPLE_PARTIAL : RF_DISPATCH_SAMPLE_COMPLETE);
            assert_int_equal(x->inspected_pages, 1);
            assert_int_equal(x->resident_pages, 1);
            if (large)
                partial++;
            else
                complete++;
        }
    }
    summarize(obs, &s);
    printf("one page per source: partial %llu, complete %llu\n", (unsigned long long)partial,
           (unsigned long long)complete);
    assert_true(partial > 0); /* token_embd.weight alone spans hundreds of pages */
    assert_true(s.sampling.enabled);
    assert_false(s.sampling.sampling_complete);
    assert_int_equal(s.sampling.partial, partial);
    assert_int_equal(s.sampling.complete, complete);
    assert_int_equal(s.sampling.max_pages_per_source, 1);
    rf_dispatch_summary_free(&s);
    forge_observer_free(obs);
}

/* Off (the default, or turned off again): no sample in any event, sampling_complete false. */
static void test_sampling_disabled(void **state)
{
    (void)state;
    int32_t tokens[N_PREDICT];
    size_t n, n_ev;
    struct forge_observer *obs;
    struct rf_dispatch_summary s;
    static const struct rf_dispatch_sample none;

    assert_int_equal(forge_observer_create(CAPACITY, &obs), 0);
    assert_int_equal(forge_observer_set_sampling(obs, model, 16), 0);
    assert_int_equal(forge_observer_set_sampling(obs, NULL, 0), 0); /* off again */
    assert_int_equal(generate(obs, tokens, &n), 0);
    const struct rf_dispatch_event *ev = forge_observer_events(obs, &n_ev);
    for (size_t e = 0; e < n_ev; e++) {
        assert_int_equal(ev[e].sample_max_pages, 0);
        for (unsigned i = 0; i < RF_DISPATCH_MAX_SRC; i++)
            assert_memory_equal(&ev[e].samples[i], &none, sizeof(none));
    }
    summarize(obs, &s);
    assert_true(s.weight_refs > 0);
    assert_false(s.sampling.enabled);
    assert_false(s.sampling.sampling_complete);
    assert_int_equal(s.sampling.samples, 0);
    assert_int_equal(s.sampling.pages_inspected, 0);
    assert_int_equal(s.sampling.disabled, s.weight_refs);
    rf_dispatch_summary_free(&s);

    /* Bad arguments change nothing. */
    assert_int_equal(forge_observer_set_sampling(obs, model, RF_PAGE_WINDOW_PAGES + 1), -EINVAL);
    assert_int_equal(forge_observer_set_sampling(obs, NULL, 1), -EINVAL);
    assert_int_equal(forge_observer_set_sampling(NULL, model, 1), -EINVAL);
    forge_observer_free(obs);
}

/* Greedy tokens are the same with sampling on as with no observer. */
static void test_sampling_tokens_identical(void **state)
{
    (void)state;
    int32_t off[N_PREDICT], on[N_PREDICT];
    size_t n_off = 0, n_on = 0;
    struct forge_observer *obs;

    assert_int_equal(forge_observer_create(CAPACITY, &obs), 0);
    assert_int_equal(forge_observer_set_sampling(obs, model, RF_PAGE_WINDOW_PAGES), 0);
    assert_int_equal(generate(NULL, off, &n_off), 0);
    assert_int_equal(generate(obs, on, &n_on), 0);
    assert_true(n_off > 0);
    assert_int_equal(n_on, n_off);
    assert_memory_equal(on, off, n_off * sizeof(int32_t));
    forge_observer_free(obs);
}

/*
 * The model file moved away from its path: the mapping can no longer be
 * checked against it, so every sample fails with its pages unknown (never
 * guessed resident); sampling_complete false.
 */
static void test_sampling_failed_unknown(void **state)
{
    (void)state;
    int32_t tokens[N_PREDICT];
    size_t n, n_ev;
    struct forge_observer *obs;
    struct rf_dispatch_summary s;
    char moved[sizeof(model_path) + 8];

    snprintf(moved, sizeof(moved), "%s.moved", model_path);
    assert_int_equal(forge_observer_create(CAPACITY, &obs), 0);
    assert_int_equal(forge_observer_set_sampling(obs, model, 8), 0);
    assert_int_equal(rename(model_path, moved), 0);
    int rc = generate(obs, tokens, &n);
    assert_int_equal(rename(moved, model_path), 0);
    assert_int_equal(rc, 0);
    const struct rf_dispatch_event *ev = forge_observer_events(obs, &n_ev);
    for (size_t e = 0; e < n_ev; e++) {
        for (unsigned i = 0; i < ev[e].n_src; i++) {
            if (!((ev[e].src_weight_mask >> i) & 1u))
                continue;
            assert_int_equal(ev[e].samples[i].status, RF_DISPATCH_SAMPLE_FAILED);
            assert_true(ev[e].samples[i].inspected_pages > 0);
            assert_int_equal(ev[e].samples[i].unknown_pages, ev[e].samples[i].inspected_pages);
            assert_int_equal(ev[e].samples[i].resident_pages, 0);
        }
    }
    summarize(obs, &s);
    assert_true(s.sampling.enabled);
    assert_false(s.sampling.sampling_complete);
    assert_int_equal(s.sampling.failed, s.weight_refs);
    assert_int_equal(s.sampling.pages_unknown, s.sampling.pages_inspected);
    assert_int_equal(s.sampling.pages_resident, 0);
    rf_dispatch_summary_free(&s);
    forge_observer_free(obs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_event_count_equals_compute_nodes),
        cmocka_unit_test(test_tokens_identical),
        cmocka_unit_test(test_disabled_installs_no_callback),
        cmocka_unit_test(test_dropped_events_counted),
        cmocka_unit_test(test_sequence_strictly_increasing),
        cmocka_unit_test(test_weights_attributed),
        cmocka_unit_test(test_sampling_every_weight_source),
        cmocka_unit_test(test_sampling_budget_partial),
        cmocka_unit_test(test_sampling_disabled),
        cmocka_unit_test(test_sampling_tokens_identical),
        cmocka_unit_test(test_sampling_failed_unknown),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
