/*
 * The session's boundary sequence on a fake native layer (no llama.cpp, no
 * /proc): a scripted "kernel" that drops only part of what is advised, so
 * the measurement misses the plan's estimate and the session re-plans; a
 * gate that can be busy; ranges that can be refused; executions that
 * re-fault released pages. Every figure checked here is derived from the
 * fake's script, not from the code under test.
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
#include <jansson.h>
#include <linux/magic.h>

#include "ramforge/core/kv_types.h"
#include "ramforge/core/report.h"
#include "ramforge/error.h"
#include "ramforge/session/host.h"

#include "../core/test_util.h"
#include "fake_native.h"

#define PAGE 4096u
#define TENSOR_PAGES 8u
#define TENSOR_BYTES (TENSOR_PAGES * PAGE)
#define N_TENSORS 16u
#define N_DEAD 2u /* the last two are read from anonymous repacked copies */

/* nat first: the shared operations read it through the same user data. */
struct fake {
    struct fake_native nat;      /* resident_bytes: mapping RSS the next sample reports */
    uint64_t drop_num, drop_den; /* share of the accepted bytes the "kernel" drops */
    uint64_t refault_bytes;      /* mapping RSS an execution brings back */
    int release_rc;              /* nonzero: forge_model_release's return (e.g. -EBUSY) */
    int refuse_range;            /* index of a range refused with -EINVAL; -1: none */
    const char *file_changed;    /* non-NULL: the model file changed, this is why */
    uint64_t releases;           /* release calls that reached the "kernel" */
};
_Static_assert(offsetof(struct fake, nat) == 0, "the shared operations' user data");

/* An execution ends: it re-faulted refault_bytes of released pages. */
static void refault(struct fake_native *n)
{
    struct fake *f = (struct fake *)n;
    n->resident_bytes += f->refault_bytes;
    f->refault_bytes = 0;
}

/*
 * The script of every sample: the mapping plus 1 MiB plus one page per
 * sample, so each sample has its own process RSS; executions re-fault.
 */
static struct fake *script(struct fake *f)
{
    f->nat.page_bytes = PAGE;
    f->nat.other_rss_bytes = 1u << 20;
    f->nat.rss_step_bytes = PAGE;
    f->nat.on_lease_end = refault;
    return f;
}

static int f_release(void *ud, const struct rf_file_range *r, size_t n,
                     enum forge_release_mode mode, struct forge_release_result *out, int *errs)
{
    struct fake *f = ud;
    (void)mode;
    if (f->release_rc)
        return f->release_rc;
    memset(out, 0, sizeof(*out));
    f->releases++;
    for (size_t i = 0; i < n; i++) {
        uint64_t bytes = rf_page_range_pages(r[i].pages) * PAGE;
        out->requested_bytes += bytes;
        errs[i] = (int)i == f->refuse_range ? -EINVAL : 0;
        if (errs[i]) {
            out->n_failed++;
            out->first_error = out->first_error ? out->first_error : errs[i];
            continue;
        }
        out->accepted_bytes += bytes;
    }
    uint64_t drop = out->accepted_bytes * f->drop_num / f->drop_den;
    f->nat.resident_bytes = f->nat.resident_bytes > drop ? f->nat.resident_bytes - drop : 0;
    return 0;
}

static int f_prefetch(void *ud, const struct rf_file_range *r, size_t n,
                      struct forge_prefetch_result *out)
{
    (void)ud;
    memset(out, 0, sizeof(*out));
    for (size_t i = 0; i < n; i++)
        out->requested_bytes += rf_page_range_pages(r[i].pages) * PAGE;
    out->accepted_bytes = out->requested_bytes;
    out->n_ranges = n;
    out->n_calls = n;
    out->chunk_bytes = PAGE;
    return 0;
}

static int f_file_changed(void *ud, bool *changed, char *why, size_t size)
{
    struct fake *f = ud;
    *changed = f->file_changed != NULL;
    if (f->file_changed)
        snprintf(why, size, "%s", f->file_changed);
    return 0;
}

static const struct rf_session_native fake_ops = {
    FAKE_NATIVE_OPS,
    .release = f_release,
    .prefetch = f_prefetch,
    .file_changed = f_file_changed,
};

static struct rf_tensor_meta tensors[N_TENSORS];
static struct rf_mapping_meta mapping;

/* 16 tensors of 8 pages each, page-aligned (no shared page), after one header page. */
static struct rf_session_model fake_model(void)
{
    for (uint32_t i = 0; i < N_TENSORS; i++)
        tensors[i] =
            fixture_tensor(i, 0, PAGE + (uint64_t)i * TENSOR_BYTES, TENSOR_BYTES,
                           i >= N_TENSORS - N_DEAD ? RF_ACCESS_ANONYMOUS : RF_ACCESS_FILE_BACKED);
    mapping = fixture_mapping(0, PAGE + (uint64_t)N_TENSORS * TENSOR_BYTES);
    struct rf_session_model m = fake_native_model(tensors, N_TENSORS, &mapping, 2, PAGE);
    snprintf(m.info.desc, sizeof(m.info.desc), "fake 16-tensor model");
    return m;
}

static struct rf_session_params memory_bound(uint64_t target)
{
    struct rf_session_params p = rf_session_default_params();
    p.policy = RF_POLICY_MEMORY_BOUND;
    p.has_target = true;
    p.target_bytes = target;
    return p;
}

/* A session over the fake model (kept in static storage for the session's life). */
static struct rf_session *start(struct fake *f, struct rf_session_params p)
{
    static struct rf_session_model m;
    struct rf_session *s = NULL;
    m = fake_model();
    assert_int_equal(rf_session_create_native(&m, &fake_ops, script(f), p, &s), 0);
    return s;
}

/* memory_bound(target) without the after-load release of dead file pages. */
static struct rf_session_params keep_dead(uint64_t target)
{
    struct rf_session_params p = memory_bound(target);
    p.release_dead_file_pages = false;
    return p;
}

static json_t *path(json_t *o, const char *a, const char *b)
{
    json_t *v = json_object_get(o, a);
    return b ? json_object_get(v, b) : v;
}

/* One "session" of the application: a lease around one decode. */
static void execute(struct rf_session *s, struct fake *f, uint64_t refault)
{
    f->refault_bytes = refault;
    assert_int_equal(rf_session_lease_begin(s), 0);
    rf_session_lease_end(s);
}

static uint64_t state_count(json_t *doc, const char *state)
{
    return (uint64_t)json_integer_value(path(path(doc, "lifetime", "state_counts"), state, NULL));
}

/*
 * One operation with staging, a session, a verify session and three
 * release rounds at each after-session boundary: 13 samples, each in the
 * report with its own label and its own value, in order.
 */
static void test_thirteen_samples_one_operation(void **state)
{
    (void)state;
    /* Resident: 5 tensors' pages. Target 2 tensors. The kernel drops half of what it accepts. */
    struct fake f = {
        .nat.resident_bytes = 5 * TENSOR_BYTES, .drop_num = 1, .drop_den = 2, .refuse_range = -1};
    struct rf_session *s = start(&f, memory_bound(2 * TENSOR_BYTES));
    /* after_load + after_load_release (the two dead tensors: 16 pages accepted, 8 dropped). */
    assert_int_equal(f.nat.samples, 2);
    assert_int_equal(f.nat.resident_bytes, 5 * TENSOR_BYTES - TENSOR_BYTES);

    assert_int_equal(rf_session_stage(s, 4 * TENSOR_BYTES), 0);
    execute(s, &f, 0);
    assert_int_equal(rf_session_boundary(s, RF_BOUNDARY_END_OF_SESSION), 0);
    /*
     * after_session: 4 tensors resident, target 2: round 1 selects 2 (estimate
     * exactly at target), the kernel drops 1 -> 3 resident; round 2 selects 1,
     * drops 0.5 -> 2.5; round 3 selects 1 more, drops 0.5 -> 2: met.
     */
    assert_int_equal(rf_session_boundary(s, RF_BOUNDARY_AFTER_SESSION), 0);
    assert_int_equal(f.nat.resident_bytes, 2 * TENSOR_BYTES);
    /* The verify session re-faults 2 tensors: the same three rounds again. */
    execute(s, &f, 2 * TENSOR_BYTES);
    assert_int_equal(rf_session_boundary(s, RF_BOUNDARY_END_OF_SESSION), 0);
    assert_int_equal(rf_session_boundary(s, RF_BOUNDARY_AFTER_VERIFY), 0);
    assert_int_equal(rf_session_operation_end(s, NULL), 0);

    static const char *const labels[] = {"after_load",
                                         "after_load_release",
                                         "after_staging",
                                         "end_of_session",
                                         "after_session",
                                         "after_release",
                                         "after_release_2",
                                         "after_release_3",
                                         "end_of_session_2",
                                         "after_verify",
                                         "after_verify_release",
                                         "after_verify_release_2",
                                         "after_verify_release_3"};
    const size_t n_labels = sizeof(labels) / sizeof(labels[0]);
    assert_int_equal(f.nat.samples, n_labels);
    json_t *doc = fake_report(s, RF_REPORT_OPERATION);
    json_t *samples = path(path(doc, "residency", NULL), "samples", NULL);
    assert_int_equal(json_array_size(samples), n_labels);
    for (size_t i = 0; i < n_labels; i++) {
        json_t *smp = json_array_get(samples, i);
        assert_string_equal(json_string_value(json_object_get(smp, "label")), labels[i]);
        /* The fake's script: sample k (1-based) has RSS = mapping + 1 MiB + k pages. */
        uint64_t rss = (uint64_t)json_integer_value(json_object_get(smp, "process_rss_bytes"));
        uint64_t map = (uint64_t)json_integer_value(json_object_get(smp, "mapping_rss_bytes"));
        assert_int_equal(rss, map + (1u << 20) + (i + 1) * PAGE);
    }
    /* 1 (after_load) + 3 + 3 attempted releases, each with a measured, non-zero drop. */
    json_t *bounds = path(path(doc, "application", NULL), "boundaries", NULL);
    assert_int_equal(json_array_size(bounds), 7);
    for (size_t i = 0; i < 7; i++) {
        json_t *b = json_array_get(bounds, i);
        assert_true(json_is_true(json_object_get(b, "attempted")));
        assert_true(json_integer_value(json_object_get(b, "observed_mapping_delta_bytes")) < 0);
    }
    /* Every plan is summarized, not only the last one that selected something. */
    json_t *plans = path(path(doc, "plan", NULL), "plans", NULL);
    assert_int_equal(json_array_size(plans), 7);
    /* 2 dead + (2 + 1 + 1) + (2 + 1 + 1) selections. */
    assert_int_equal(
        json_integer_value(path(path(doc, "plan", NULL), "selected_count_all_plans", NULL)), 10);
    assert_int_equal(json_integer_value(path(doc, "operation", "index")), 1);
    json_decref(doc);
    rf_session_free(s);
}

static const struct rf_admission_record *record(const struct rf_admission_result *a,
                                                const char *name)
{
    for (size_t i = 0; i < a->n_records; i++)
        if (strcmp(a->records[i].name, name) == 0)
            return &a->records[i];
    fail_msg("no %s record", name);
    return NULL;
}

/* An operation in a context that exists (exec's llama-server) counts its KV cache, and once
   the context decoded its compute buffers, as measured inside the RSS, not as growth again
   (the old session added the KV cache and the scratch estimate to the RSS that held them). */
static void test_admission_in_context(void **state)
{
    (void)state;
    struct fake f = {
        .nat.resident_bytes = TENSOR_BYTES, .drop_num = 1, .drop_den = 1, .refuse_range = -1};
    struct rf_session *s = start(&f, memory_bound(64 * TENSOR_BYTES));
    struct rf_operation_request req = {.n_prompt = 10, .n_predict = 1};
    struct rf_admission_result *adm = calloc(1, sizeof(*adm));
    assert_non_null(adm);
    assert_int_equal(rf_session_admit_result(s, &req, adm), 0);
    assert_true(record(adm, "kv_cache")->has && record(adm, "kv_cache")->bytes > 0);
    uint64_t growth = adm->growth_bytes;
    req.in_context = true;
    assert_int_equal(rf_session_admit_result(s, &req, adm), 0);
    assert_true(record(adm, "kv_cache")->has);
    assert_int_equal(record(adm, "kv_cache")->bytes, 0);
    assert_non_null(strstr(record(adm, "kv_cache")->source, "creation"));
    assert_true(adm->growth_bytes < growth);
    /* before its first decode: the context's own compute buffers (llama.cpp's memory
       breakdown), not the estimate of a 10-token batch (the old session counted that) */
    req.compute_bytes = 7 * TENSOR_BYTES;
    assert_int_equal(rf_session_admit_result(s, &req, adm), 0);
    assert_int_equal(record(adm, "graph_scratch")->bytes, 7 * TENSOR_BYTES);
    assert_non_null(strstr(record(adm, "graph_scratch")->source, "memory_breakdown"));
    req.context_warm = true;
    assert_int_equal(rf_session_admit_result(s, &req, adm), 0);
    assert_true(record(adm, "graph_scratch")->has && record(adm, "runtime")->has);
    assert_int_equal(record(adm, "graph_scratch")->bytes + record(adm, "runtime")->bytes, 0);
    free(adm);
    rf_session_free(s);
}

/* An operation in a context that exists counts the context's KV cache inside the measured RSS,
   so admission reads the process now, not the latest sample: that may be after_load's, before
   the context was made (the old session decided from it: exec's two contexts' KV caches were
   left out of the streaming plan's fixed part, which pinned that much more and the program was
   OOM-killed under 0.75x the file). An operation not in a context keeps the latest sample. */
static void test_admission_in_context_reads_now(void **state)
{
    (void)state;
    struct fake f = {.nat.resident_bytes = TENSOR_BYTES,
                     .nat.has_anon = true,
                     .nat.anon_bytes = TENSOR_BYTES,
                     .drop_num = 1,
                     .drop_den = 1,
                     .refuse_range = -1};
    struct rf_session *s = start(&f, memory_bound(64 * TENSOR_BYTES));
    struct rf_operation_request req = {.n_prompt = 10, .n_predict = 1, .in_context = true};
    struct rf_admission_result *adm = calloc(1, sizeof(*adm));
    assert_non_null(adm);
    f.nat.anon_bytes = 5 * TENSOR_BYTES; /* contexts made since the last sample */
    assert_int_equal(rf_session_admit_result(s, &req, adm), 0);
    assert_int_equal(record(adm, "anonymous")->bytes, 5 * TENSOR_BYTES);
    assert_int_equal(adm->anonymous_bytes, 5 * TENSOR_BYTES + adm->growth_bytes);
    req.in_context = false; /* admission before its context: the latest sample's */
    assert_int_equal(rf_session_admit_result(s, &req, adm), 0);
    assert_int_equal(record(adm, "anonymous")->bytes, TENSOR_BYTES);
    free(adm);
    rf_session_free(s);
}

/* Without the memory breakdown (another libllama) the ledger's KV cache is estimated in the
   context's cache types: a q8_0 cache as q8_0 (the old ledger assumed f16). */
static void test_ledger_kv_in_cache_types(void **state)
{
    (void)state;
    struct fake f = {
        .nat.resident_bytes = TENSOR_BYTES, .drop_num = 1, .drop_den = 1, .refuse_range = -1};
    struct rf_session *s = start(&f, memory_bound(64 * TENSOR_BYTES));
    struct rf_operation_output out = {.n_ctx = 512,
                                      .has_cache_types = true,
                                      .type_k = RF_KV_TYPE_Q8_0,
                                      .type_v = RF_KV_TYPE_Q8_0};
    uint64_t q8, f16;
    /* fake_model: 2 layers, n_embd 64, as many KV heads as heads */
    assert_int_equal(rf_kv_cache_bytes(2, 512, 64, 64, RF_KV_TYPE_Q8_0, RF_KV_TYPE_Q8_0, &q8), 0);
    assert_int_equal(rf_kv_cache_bytes(2, 512, 64, 64, RF_KV_TYPE_F16, RF_KV_TYPE_F16, &f16), 0);
    assert_int_equal(rf_session_operation_end(s, &out), 0);
    const struct rf_ledger_entry *kv =
        &rf_session_report(s, RF_REPORT_OPERATION)->ledger->entries[RF_LEDGER_KV_CACHE];
    assert_true(kv->has_value);
    assert_int_equal(kv->value_bytes, q8);
    assert_non_null(strstr(kv->source, "cache types"));
    out.has_cache_types = false; /* not given: llama.cpp's default, f16 */
    assert_int_equal(rf_session_operation_end(s, &out), 0);
    kv = &rf_session_report(s, RF_REPORT_OPERATION)->ledger->entries[RF_LEDGER_KV_CACHE];
    assert_int_equal(kv->value_bytes, f16);
    rf_session_free(s);
}

/* Operation 2's report holds its own samples; the session report holds all of them. */
static void test_operations_have_their_own_reports(void **state)
{
    (void)state;
    struct fake f = {
        .nat.resident_bytes = 5 * TENSOR_BYTES, .drop_num = 1, .drop_den = 1, .refuse_range = -1};
    struct rf_session *s = start(&f, memory_bound(2 * TENSOR_BYTES));
    execute(s, &f, 0);
    assert_int_equal(rf_session_boundary(s, RF_BOUNDARY_AFTER_SESSION), 0);
    assert_int_equal(rf_session_operation_end(s, NULL), 0);
    uint64_t first_samples = f.nat.samples;

    struct rf_operation_request req = {.n_prompt = 10, .n_predict = 8};
    struct rf_admission_result adm, before = {0};
    before.outcome = RF_ADMIT_WARNING;
    before.cause = RF_ADMIT_CAUSE_THRASH;
    snprintf(before.reason, sizeof(before.reason), "header estimate: will thrash");
    assert_int_equal(rf_session_set_preload_admission(s, &before), 0);
    assert_int_equal(rf_session_admit_result(s, &req, &adm), 0);
    execute(s, &f, TENSOR_BYTES);
    assert_int_equal(rf_session_boundary(s, RF_BOUNDARY_IDLE), 0);
    assert_int_equal(rf_session_operation_end(s, NULL), 0);
    assert_int_equal(rf_session_operations(s), 2);

    json_t *doc = fake_report(s, RF_REPORT_OPERATION);
    assert_int_equal(json_integer_value(path(doc, "operation", "index")), 2);
    assert_string_equal(json_string_value(path(doc, "operation", "scope")), "operation");
    json_t *samples = path(path(doc, "residency", NULL), "samples", NULL);
    assert_int_equal(json_array_size(samples), f.nat.samples - first_samples);
    assert_string_equal(json_string_value(json_object_get(json_array_get(samples, 0), "label")),
                        "idle");
    assert_false(json_is_null(path(doc, "admission", "outcome")));
    /* The decision before the load sits beside the one after it, as recorded. */
    json_t *bl = path(doc, "admission", "before_load");
    assert_string_equal(json_string_value(json_object_get(bl, "outcome")), "admitted_with_warning");
    assert_string_equal(json_string_value(json_object_get(bl, "cause")), "thrash");
    assert_string_equal(json_string_value(json_object_get(bl, "reason")),
                        "header estimate: will thrash");
    json_decref(doc);

    doc = fake_report(s, RF_REPORT_SESSION);
    assert_string_equal(json_string_value(path(doc, "operation", "scope")), "session");
    assert_int_equal(json_array_size(path(path(doc, "residency", NULL), "samples", NULL)),
                     f.nat.samples);
    json_decref(doc);
    rf_session_free(s);
}

/*
 * ramforge exec's idle boundary: with a context alive (and none in flight)
 * the strict idle boundary selects nothing, the idle_alive one releases to
 * the target, and the report's native section says the context was alive;
 * a lease in flight refuses both.
 */
static void test_idle_alive_boundary(void **state)
{
    (void)state;
    struct fake f = {
        .nat.resident_bytes = 5 * TENSOR_BYTES, .drop_num = 1, .drop_den = 1, .refuse_range = -1};
    struct rf_session *s = start(&f, keep_dead(2 * TENSOR_BYTES));
    assert_int_equal(rf_session_context_alive(s, true), 0);
    assert_int_equal(f.nat.alive, 1);
    execute(s, &f, 0);
    assert_int_equal(rf_session_boundary(s, RF_BOUNDARY_IDLE), 0);
    assert_int_equal(rf_session_released_bytes(s), 0);
    json_t *doc = fake_report(s, RF_REPORT_OPERATION);
    assert_string_equal(json_string_value(path(doc, "native", "observed_at")), "idle");
    json_decref(doc);

    assert_int_equal(rf_session_idle_alive_boundary(s), 0);
    assert_true(rf_session_released_bytes(s) > 0);
    doc = fake_report(s, RF_REPORT_OPERATION);
    assert_string_equal(json_string_value(path(doc, "native", "observed_at")), "idle_alive");
    assert_int_equal(json_integer_value(path(doc, "native", "active_contexts")), 1);
    json_decref(doc);
    assert_int_equal(rf_session_operation_end(s, NULL), 0);

    /* In flight: nothing may be selected, contexts alive or not. */
    assert_int_equal(rf_session_lease_begin(s), 0);
    assert_int_equal(rf_session_idle_alive_boundary(s), 0);
    assert_int_equal(rf_session_released_bytes(s), 0);
    rf_session_lease_end(s);
    assert_int_equal(rf_session_context_alive(s, false), 0);
    assert_int_equal(f.nat.alive, 0);
    assert_int_equal(rf_session_context_alive(NULL, true), -EINVAL);
    assert_int_equal(rf_session_idle_alive_boundary(NULL), -EINVAL);
    rf_session_free(s);
}

/* The admission record named name; fails when absent. */
static const struct rf_admission_record *record_of(const struct rf_admission_result *a,
                                                   const char *name)
{
    for (size_t i = 0; i < a->n_records; i++)
        if (strcmp(a->records[i].name, name) == 0)
            return &a->records[i];
    fail_msg("no admission record %s", name);
    return NULL;
}

/*
 * Admission's `locked` (the fake's samples read no Locked, as a
 * PAGEMAP_SCAN sample): the mapping's Locked re-read for admission (3
 * pages, never the sample's unread 0), and reclaimable leaves the locked
 * mapping out; when the re-read fails too, Locked is unknown with the
 * reason, and so is what a release could reclaim (issue 20, fault 5).
 */
static void test_admission_locked_read_or_unknown(void **state)
{
    (void)state;
    struct rf_operation_request req = {.n_prompt = 10, .n_predict = 8};
    struct rf_admission_result adm;
    for (int lost = 0; lost < 2; lost++) {
        struct fake f = {.nat.resident_bytes = 5 * TENSOR_BYTES,
                         .nat.locked_bytes = 3 * PAGE,
                         .nat.no_locked = lost,
                         .drop_num = 1,
                         .drop_den = 1,
                         .refuse_range = -1};
        struct rf_session *s = start(&f, memory_bound(2 * TENSOR_BYTES));
        assert_int_equal(rf_session_admit_result(s, &req, &adm), 0);
        const struct rf_admission_record *locked = record_of(&adm, "locked");
        const struct rf_admission_record *rec = record_of(&adm, "reclaimable");
        if (!lost) {
            assert_true(locked->has);
            assert_int_equal(locked->bytes, 3 * PAGE);
            assert_int_equal(locked->provenance, RF_PROV_EXACT_MEASURED);
            assert_true(rec->has);
            assert_int_equal(rec->bytes, 0); /* the one mapping is locked */
        } else {
            assert_false(locked->has);
            assert_int_equal(locked->provenance, RF_PROV_UNKNOWN);
            assert_non_null(strstr(locked->source, "could not be read"));
            assert_false(rec->has);
            assert_non_null(strstr(rec->source, "locked is not known"));
        }
        rf_session_free(s);
    }
}

/* A gate taken between the observation and the release: EBUSY, nothing advised, ReleaseFailed. */
static void test_busy_gate(void **state)
{
    (void)state;
    struct fake f = {
        .nat.resident_bytes = 5 * TENSOR_BYTES, .drop_num = 1, .drop_den = 1, .refuse_range = -1};
    struct rf_session *s = start(&f, keep_dead(2 * TENSOR_BYTES));
    execute(s, &f, 0);
    f.release_rc = -EBUSY;
    assert_int_equal(rf_session_boundary(s, RF_BOUNDARY_AFTER_SESSION), 0);
    assert_int_equal(f.nat.resident_bytes, 5 * TENSOR_BYTES);
    assert_int_equal(rf_session_operation_end(s, NULL), 0);
    json_t *doc = fake_report(s, RF_REPORT_OPERATION);
    /* The operation's one boundary attempted no release, so the application section is in
     * its absent form (no boundaries listed, nothing requested or accepted) and its reason
     * names the boundary and the gate. */
    assert_null(path(path(doc, "application", NULL), "boundaries", NULL));
    assert_true(json_is_null(path(doc, "application", "requested_bytes")));
    assert_true(json_is_null(path(doc, "application", "accepted_bytes")));
    assert_non_null(strstr(json_string_value(path(doc, "application", "reason")),
                           "the execution gate was busy"));
    assert_string_equal(json_string_value(path(doc, "application", "reason")),
                        "after_session: the execution gate was busy");
    assert_int_equal(state_count(doc, "ReleaseFailed"), 3); /* the 3 tensors the plan selected */
    json_t *failed = path(path(doc, "lifetime", NULL), "release_failed", NULL);
    assert_string_equal(json_string_value(json_object_get(json_array_get(failed, 0), "error")),
                        strerror(EBUSY));
    assert_false(json_is_true(path(doc, "policy", "release_dead_file_pages")));
    json_decref(doc);

    /* The next execution re-references them: the failure stays in their history. */
    f.release_rc = 0;
    execute(s, &f, 0);
    assert_int_equal(rf_session_boundary(s, RF_BOUNDARY_AFTER_SESSION), 0);
    assert_int_equal(rf_session_operation_end(s, NULL), 0);
    doc = fake_report(s, RF_REPORT_OPERATION);
    assert_int_equal(json_integer_value(path(doc, "lifetime", "resources_failed_before")), 3);
    assert_int_equal(state_count(doc, "ReleaseFailed"), 0);
    json_decref(doc);
    rf_session_free(s);
}

/* The kernel refuses one range: its tensors are ReleaseFailed with EINVAL, the rest reconciled. */
static void test_refused_range(void **state)
{
    (void)state;
    struct fake f = {
        .nat.resident_bytes = 16 * TENSOR_BYTES, .drop_num = 1, .drop_den = 1, .refuse_range = 0};
    struct rf_session *s = start(&f, keep_dead(2 * TENSOR_BYTES));
    execute(s, &f, 0);
    assert_int_equal(rf_session_boundary(s, RF_BOUNDARY_AFTER_SESSION), 0);
    assert_int_equal(rf_session_operation_end(s, NULL), 0);
    json_t *doc = fake_report(s, RF_REPORT_OPERATION);
    /* Adjacent selected tensors merge into one range: the refused one covers all of them. */
    assert_true(state_count(doc, "ReleaseFailed") > 0);
    json_t *failed = path(path(doc, "lifetime", NULL), "release_failed", NULL);
    assert_string_equal(json_string_value(json_object_get(json_array_get(failed, 0), "error")),
                        strerror(EINVAL));
    assert_true(fake_report_warnings(doc, "refused part of a release") > 0);
    json_decref(doc);
    rf_session_free(s);
}

/*
 * The apply path's refusals: a plan of another generation (-ESTALE), a
 * tensor the inventory does not hold (-ENOENT, never resource 0), a
 * selection whose pages are all protected (SharedOrReused), a resource
 * that is not ReleaseEligible (an illegal transition: -EPROTO).
 */
static void test_apply_refusals(void **state)
{
    (void)state;
    struct fake f = {
        .nat.resident_bytes = 16 * TENSOR_BYTES, .drop_num = 1, .drop_den = 1, .refuse_range = -1};
    struct rf_session *s = start(&f, keep_dead(2 * TENSOR_BYTES));

    uint32_t sel[1] = {999};
    struct rf_plan plan;
    rf_plan_init(&plan);
    plan.generation = 2;
    plan.page_bytes = PAGE;
    plan.selected = sel;
    plan.n_selected = 1;
    assert_int_equal(rf_session_apply_plan(s, "test_stale", &plan), -RF_ESTALE);
    plan.generation = 1;
    assert_int_equal(rf_session_apply_plan(s, "test_lookup", &plan), -ENOENT);
    assert_int_equal(f.releases, 0);

    /* Tensor 0 selected, no release range: every page protected -> SharedOrReused. */
    sel[0] = 0;
    assert_int_equal(rf_session_apply_plan(s, "test_shared", &plan), 0);
    json_t *doc = fake_report(s, RF_REPORT_OPERATION);
    assert_int_equal(state_count(doc, "SharedOrReused"), 1);
    json_decref(doc);

    /* Tensor 0 again: SharedOrReused is not ReleaseEligible -> illegal, refused. */
    assert_int_equal(rf_session_apply_plan(s, "test_illegal", &plan), -EPROTO);
    assert_int_equal(f.releases, 0);
    assert_int_equal(rf_session_operation_end(s, NULL), 0);
    doc = fake_report(s, RF_REPORT_OPERATION);
    assert_true(fake_report_warnings(doc, "illegal resource-lifetime transition") > 0);
    json_decref(doc);
    rf_session_free(s);
}

/* A boundary while a lease is held selects nothing and says why; nothing walks to Synchronized. */
static void test_boundary_not_quiescent(void **state)
{
    (void)state;
    struct fake f = {
        .nat.resident_bytes = 16 * TENSOR_BYTES, .drop_num = 1, .drop_den = 1, .refuse_range = -1};
    struct rf_session *s = start(&f, memory_bound(2 * TENSOR_BYTES));
    uint64_t releases = f.releases;
    assert_int_equal(rf_session_lease_begin(s), 0);
    assert_int_equal(rf_session_boundary(s, RF_BOUNDARY_AFTER_SESSION), 0);
    assert_int_equal(f.releases, releases);
    rf_session_lease_end(s);
    rf_session_lease_end(s); /* unmatched: ignored, the gate's counters stay right */
    assert_int_equal(f.nat.in_flight, 0);
    assert_int_equal(rf_session_operation_end(s, NULL), 0);
    json_t *doc = fake_report(s, RF_REPORT_OPERATION);
    json_t *bounds = path(path(doc, "application", NULL), "boundaries", NULL);
    json_t *last = json_array_get(bounds, json_array_size(bounds) - 1);
    assert_non_null(last);
    assert_false(json_is_true(json_object_get(last, "attempted")));
    json_decref(doc);
    rf_session_free(s);
}

/*
 * A refresh makes a new inventory generation: every old resource is
 * Invalidated, a plan of the old generation is refused, and the new
 * generation's resources can be released at the next boundary.
 */
static void test_refresh_invalidates(void **state)
{
    (void)state;
    struct fake f = {
        .nat.resident_bytes = 16 * TENSOR_BYTES, .drop_num = 1, .drop_den = 1, .refuse_range = -1};
    struct rf_session *s = start(&f, keep_dead(2 * TENSOR_BYTES));
    assert_int_equal(rf_session_refresh(s), 0);

    uint32_t sel[1] = {0};
    struct rf_plan plan;
    rf_plan_init(&plan);
    plan.generation = 1; /* the generation before the refresh */
    plan.page_bytes = PAGE;
    plan.selected = sel;
    plan.n_selected = 1;
    assert_int_equal(rf_session_apply_plan(s, "stale", &plan), -RF_ESTALE);
    assert_int_equal(f.releases, 0);

    execute(s, &f, 0);
    assert_int_equal(rf_session_boundary(s, RF_BOUNDARY_AFTER_SESSION), 0);
    assert_int_equal(f.releases, 1);
    assert_int_equal(rf_session_operation_end(s, NULL), 0);
    json_t *doc = fake_report(s, RF_REPORT_OPERATION);
    assert_int_equal(json_integer_value(path(doc, "lifetime", "invalidated_resources")), N_TENSORS);
    assert_int_equal(json_integer_value(path(doc, "plan", "generation")), 2);
    assert_true(state_count(doc, "Reconciled") > 0);
    json_decref(doc);
    rf_session_free(s);
}

/*
 * A long-lived program caps the history: with history_operations 2, five
 * operations leave the last two in the session report, and the three
 * dropped are counted, not silently lost.
 */
static void test_history_cap(void **state)
{
    (void)state;
    struct fake f = {
        .nat.resident_bytes = 5 * TENSOR_BYTES, .drop_num = 1, .drop_den = 1, .refuse_range = -1};
    struct rf_session_params p = keep_dead(2 * TENSOR_BYTES);
    p.history_operations = 2;
    struct rf_session *s = start(&f, p);
    uint64_t before_op5 = 0;
    for (int op = 1; op <= 5; op++) {
        if (op == 5)
            before_op5 = f.nat.samples;
        execute(s, &f, TENSOR_BYTES);
        assert_int_equal(rf_session_boundary(s, RF_BOUNDARY_AFTER_SESSION), 0);
        assert_int_equal(rf_session_operation_end(s, NULL), 0);
    }
    /* Dropping happens when the next operation opens: open the sixth. */
    assert_int_equal(rf_session_boundary(s, RF_BOUNDARY_END_OF_SESSION), 0);
    json_t *doc = fake_report(s, RF_REPORT_SESSION);
    assert_int_equal(json_integer_value(path(doc, "operation", "dropped")), 4);
    /* Operations 5 and 6 remain: every sample since operation 5 opened. */
    json_t *samples = path(path(doc, "residency", NULL), "samples", NULL);
    assert_int_equal(json_array_size(samples), f.nat.samples - before_op5);
    json_decref(doc);
    doc = fake_report(s, RF_REPORT_OPERATION);
    assert_int_equal(json_integer_value(path(doc, "operation", "dropped")), 0);
    assert_int_equal(json_integer_value(path(doc, "operation", "index")), 6);
    json_decref(doc);
    rf_session_free(s);
}

/*
 * The cap with residency policy off (serve's default): no sample, plan or
 * release is ever kept, so the history's arrays are never allocated, and
 * dropping operations moves nothing (memmove is never given their NULL).
 * UBSan (make asan) checks the NULL; the counts are checked here.
 */
static void test_history_cap_policy_off(void **state)
{
    (void)state;
    struct fake f = {.drop_den = 1, .refuse_range = -1};
    struct rf_session_params p = rf_session_default_params();
    p.policy = RF_POLICY_OFF;
    p.history_operations = 1;
    struct rf_session *s = start(&f, p);
    for (int op = 1; op <= 3; op++) {
        execute(s, &f, 0);
        assert_int_equal(rf_session_operation_end(s, NULL), 0);
    }
    /* No boundary with policy off: a fourth (empty) operation opens and ends. */
    assert_int_equal(rf_session_operation_end(s, NULL), 0);
    json_t *doc = fake_report(s, RF_REPORT_SESSION);
    assert_int_equal(json_integer_value(path(doc, "operation", "dropped")), 3);
    assert_int_equal(json_array_size(path(path(doc, "residency", NULL), "samples", NULL)), 0);
    assert_int_equal(f.nat.samples, 0);
    json_decref(doc);
    rf_session_free(s);
}

/*
 * The model file changes between the load and a release boundary
 * (replaced by a rename, or truncated): the boundary plans, but nothing
 * reaches the "kernel"; the application is not attempted and gives the
 * native layer's reason; the plan's tensors stay ReleaseEligible; the
 * warning says so. Once the file is the loaded one again, the next
 * boundary releases as before.
 */
static void test_model_file_changed(void **state)
{
    (void)state;
    const char *why = "inode 11 -> 12";
    struct fake f = {
        .nat.resident_bytes = 5 * TENSOR_BYTES, .drop_num = 1, .drop_den = 1, .refuse_range = -1};
    struct rf_session *s = start(&f, keep_dead(2 * TENSOR_BYTES));
    execute(s, &f, 0);
    f.file_changed = why;
    assert_int_equal(rf_session_boundary(s, RF_BOUNDARY_AFTER_SESSION), 0);
    assert_int_equal(f.releases, 0);
    assert_int_equal(f.nat.resident_bytes, 5 * TENSOR_BYTES);
    assert_int_equal(rf_session_operation_end(s, NULL), 0);
    json_t *doc = fake_report(s, RF_REPORT_OPERATION);
    const char *reason = json_string_value(path(doc, "application", "reason"));
    assert_non_null(reason);
    assert_non_null(strstr(reason, "after_session: the model file changed since the load"));
    assert_non_null(strstr(reason, why));
    assert_int_equal(json_integer_value(path(doc, "plan", "selected_count")), 3);
    assert_int_equal(state_count(doc, "ReleaseSelected") + state_count(doc, "ReleaseFailed") +
                         state_count(doc, "Reconciled"),
                     0);
    assert_true(
        fake_report_warnings(doc, "the model file changed since the load (inode 11 -> 12)") > 0);
    json_decref(doc);

    f.file_changed = NULL;
    execute(s, &f, 0);
    assert_int_equal(rf_session_boundary(s, RF_BOUNDARY_AFTER_SESSION), 0);
    assert_int_equal(f.releases, 1);
    assert_true(f.nat.resident_bytes < 5 * TENSOR_BYTES);
    assert_int_equal(rf_session_operation_end(s, NULL), 0);
    doc = fake_report(s, RF_REPORT_OPERATION);
    assert_int_equal(fake_report_warnings(doc, "the model file changed"), 0);
    json_decref(doc);
    rf_session_free(s);
}

/* Observe (no release): the report still says the file changed. */
static void test_model_file_changed_observe(void **state)
{
    (void)state;
    struct fake f = {.nat.resident_bytes = 5 * TENSOR_BYTES, .drop_den = 1, .refuse_range = -1};
    struct rf_session_params p = rf_session_default_params();
    struct rf_session *s = start(&f, p);
    execute(s, &f, 0);
    f.file_changed = "size 135168 -> 4096 bytes";
    assert_int_equal(rf_session_operation_end(s, NULL), 0);
    json_t *doc = fake_report(s, RF_REPORT_OPERATION);
    assert_true(fake_report_warnings(doc, "the model file changed since the load (size 135168 -> "
                                          "4096 bytes): nothing is released") > 0);
    json_decref(doc);
    rf_session_free(s);
}

/* Bad arguments: no session, a missing target, reserve >= target, NULL free. */
static void test_bad_arguments(void **state)
{
    (void)state;
    struct rf_session_model m = fake_model();
    struct fake f = {.drop_den = 1, .refuse_range = -1};
    struct rf_session *s = (struct rf_session *)&f;
    struct rf_session_params p = rf_session_default_params();
    p.policy = RF_POLICY_MEMORY_BOUND;
    assert_int_equal(rf_session_create_native(&m, &fake_ops, &f, p, &s), -EINVAL);
    assert_null(s);
    p.has_target = true;
    p.target_bytes = 10;
    p.reserve_bytes = 10;
    assert_int_equal(rf_session_create_native(&m, &fake_ops, &f, p, &s), -EINVAL);
    /* A target above INT64_MAX could not be written as a JSON integer: refused. */
    p.target_bytes = (uint64_t)INT64_MAX + 1;
    p.reserve_bytes = 0;
    assert_int_equal(rf_session_create_native(&m, &fake_ops, &f, p, &s), -EINVAL);
    assert_int_equal(rf_session_boundary(NULL, RF_BOUNDARY_IDLE), -EINVAL);
    assert_int_equal(rf_session_operation_end(NULL, NULL), -EINVAL);
    assert_null(rf_session_report(NULL, RF_REPORT_OPERATION)); /* issue 20: it crashed */
    assert_null(rf_session_report(NULL, RF_REPORT_SESSION));
    rf_session_free(NULL);
}

/* Odd file pages resident, even pages not. */
static int f_sampler_odd(void *ud, int32_t mapping, uint64_t first, uint64_t n, uint8_t *states)
{
    (void)ud;
    (void)mapping;
    for (uint64_t i = 0; i < n; i++)
        states[i] = (first + i) % 2 ? RF_PAGE_RESIDENT : RF_PAGE_NONRESIDENT;
    return 0;
}

/* A snapshot on demand: the sampler's states per tensor, within the budget, report untouched. */
static void test_page_snapshot_now(void **state)
{
    (void)state;
    static struct rf_session_model m;
    struct rf_session_native native = fake_ops;
    struct fake f = {.drop_den = 1, .refuse_range = -1};
    struct rf_residency_snapshot snap;
    struct rf_session *s = NULL;
    struct rf_session_params p = keep_dead(1u << 20);

    native.page_sampler = f_sampler_odd;
    p.page_budget_pages = 2 * TENSOR_PAGES + TENSOR_PAGES / 2; /* two tensors and a half */
    m = fake_model();
    assert_int_equal(rf_session_create_native(&m, &native, script(&f), p, &s), 0);
    rf_residency_snapshot_init(&snap);
    assert_int_equal(rf_session_page_snapshot(s, &snap), 0);
    assert_int_equal(snap.n, N_TENSORS);
    assert_string_equal(snap.source, "mincore");
    /* tensor i covers file pages [1 + 8i, 9 + 8i): four odd, four even */
    for (size_t i = 0; i < 2; i++) {
        assert_int_equal(snap.resources[i].resident_pages, TENSOR_PAGES / 2);
        assert_int_equal(snap.resources[i].nonresident_pages, TENSOR_PAGES / 2);
        assert_int_equal(snap.resources[i].unknown_pages, 0);
    }
    assert_int_equal(snap.resources[2].resident_pages + snap.resources[2].nonresident_pages,
                     TENSOR_PAGES / 2);
    assert_int_equal(snap.resources[2].unknown_pages, TENSOR_PAGES / 2);
    assert_int_equal(snap.resources[3].unknown_pages, TENSOR_PAGES);
    assert_null(rf_session_report(s, RF_REPORT_OPERATION)->page_snapshot);
    assert_int_equal(rf_session_page_snapshot(s, NULL), -EINVAL);
    assert_int_equal(rf_session_page_snapshot(NULL, &snap), -EINVAL);
    rf_residency_snapshot_free(&snap);
    rf_session_free(s);
}

/*
 * A model on tmpfs (the f_type of <linux/magic.h>): a release would drop
 * RSS and free nothing, so neither the after-load release of dead pages nor
 * the after-session rounds reach the kernel; each application says why,
 * one warning says it once, and model.filesystem names tmpfs.
 */
static void test_tmpfs_release_not_attempted(void **state)
{
    (void)state;
    static struct rf_session_model m;
    struct fake f = {.nat.resident_bytes = 5 * TENSOR_BYTES, .drop_den = 1, .refuse_range = -1};
    struct rf_session *s = NULL;
    m = fake_model();
    m.info.fs_magic = TMPFS_MAGIC;
    assert_int_equal(
        rf_session_create_native(&m, &fake_ops, script(&f), memory_bound(TENSOR_BYTES), &s), 0);
    execute(s, &f, 0);
    assert_int_equal(rf_session_boundary(s, RF_BOUNDARY_END_OF_SESSION), 0);
    assert_int_equal(rf_session_boundary(s, RF_BOUNDARY_AFTER_SESSION), 0);
    assert_int_equal(rf_session_operation_end(s, NULL), 0);
    assert_int_equal(f.releases, 0);
    assert_int_equal(f.nat.resident_bytes, 5 * TENSOR_BYTES);
    json_t *doc = fake_report(s, RF_REPORT_OPERATION);
    json_t *fs = path(doc, "model", "filesystem");
    assert_non_null(fs);
    assert_string_equal(json_string_value(json_object_get(fs, "type")), "tmpfs");
    assert_int_equal(fake_report_warnings(doc, "release not attempted"), 1);
    /* nothing attempted anywhere: the absent form, one reason per boundary */
    json_t *app = path(doc, "application", NULL);
    assert_true(json_is_null(json_object_get(app, "accepted_bytes")));
    const char *why = json_string_value(json_object_get(app, "reason"));
    assert_non_null(why);
    assert_non_null(strstr(why, "after_load: the model file is on a filesystem whose pages"));
    assert_non_null(strstr(why, "after_session: the model file is on a filesystem whose pages"));
    json_decref(doc);
    rf_session_free(s);
}

/*
 * The installed interface's accessors agree with the report: the admission
 * (none before rf_session_admit), the bytes released (the sum of the
 * boundaries' accepted bytes), and rf_version's strings.
 */
static void test_public_accessors(void **state)
{
    (void)state;
    struct fake f = {
        .nat.resident_bytes = 5 * TENSOR_BYTES, .drop_num = 1, .drop_den = 1, .refuse_range = -1};
    struct rf_session *s = start(&f, memory_bound(2 * TENSOR_BYTES));
    enum rf_admission_outcome outcome = RF_ADMIT_UNKNOWN;
    bool refused = true;
    const char *reason = NULL;

    assert_int_equal(rf_session_admission(NULL, NULL, NULL, NULL), -EINVAL);
    assert_int_equal(rf_session_admission(s, &outcome, &refused, &reason), -ENODATA);
    struct rf_operation_request req = {.n_prompt = 10, .n_predict = 8};
    assert_int_equal(rf_session_admit(s, &req), 0);
    assert_int_equal(rf_session_admission(s, &outcome, &refused, &reason), 0);
    execute(s, &f, 0);
    assert_int_equal(rf_session_boundary(s, RF_BOUNDARY_AFTER_SESSION), 0);
    assert_int_equal(rf_session_operation_end(s, NULL), 0);

    json_t *doc = fake_report(s, RF_REPORT_OPERATION);
    json_t *adm = path(doc, "admission", NULL);
    assert_string_equal(json_string_value(json_object_get(adm, "outcome")),
                        rf_admission_outcome_name(outcome));
    assert_int_equal(json_boolean_value(json_object_get(adm, "refused")), refused);
    assert_non_null(reason);
    assert_string_equal(json_string_value(json_object_get(adm, "reason")), reason);
    json_t *bounds = path(doc, "application", "boundaries");
    uint64_t accepted = 0;
    for (size_t i = 0; i < json_array_size(bounds); i++)
        accepted += (uint64_t)json_integer_value(
            json_object_get(json_array_get(bounds, i), "accepted_bytes"));
    assert_true(accepted > 0);
    assert_int_equal(rf_session_released_bytes(s), accepted);
    assert_int_equal(rf_session_released_bytes(NULL), 0);
    json_decref(doc);
    rf_session_free(s);

    const struct rf_version_info *v = rf_version();
    assert_non_null(v->ramforge);
    assert_non_null(v->llama_cpp);
    assert_non_null(v->llama_soname);
    assert_non_null(v->llama_build_id);
    assert_string_equal(v->llama_cpp, forge_llama_version());
}

/*
 * The host's idle boundary (ramforge/session/host.h): its outcome read from the
 * releases (released with the bytes madvise accepted; a policy that does
 * not mutate; a release the native layer refused), and the next operation's
 * start stages only after an idle boundary that released.
 */
static void test_host_idle_and_start(void **state)
{
    (void)state;
    struct fake f = {
        .nat.resident_bytes = 5 * TENSOR_BYTES, .drop_num = 1, .drop_den = 1, .refuse_range = -1};
    struct rf_session *s = start(&f, keep_dead(2 * TENSOR_BYTES));
    struct rf_idle_result r;
    struct rf_operation_start st;
    struct rf_operation_start_params sp = {.staging_budget_bytes = TENSOR_BYTES};

    assert_int_equal(rf_session_context_alive(s, true), 0);
    execute(s, &f, 0);
    assert_int_equal(rf_session_idle(s, true, &r), 0);
    assert_int_equal(r.outcome, RF_IDLE_RELEASED);
    assert_string_equal(r.reason, "");
    assert_true(r.attempted);
    assert_true(r.accepted_bytes > 0);
    assert_int_equal(r.accepted_bytes, rf_session_released_bytes(s));
    assert_true(r.requested_bytes >= r.accepted_bytes);
    assert_true(r.has_mapping_change && r.mapping_change_bytes < 0); /* the fake drops all */
    assert_int_equal(rf_session_operation_end(s, NULL), 0);
    /* after a release, the next start stages; the one after does not */
    assert_int_equal(rf_session_operation_start(s, &sp, &st), 0);
    assert_true(st.staged);
    assert_int_equal(st.staging_error, 0);
    assert_true(st.staging_requested_bytes > 0 && st.staging_requested_bytes <= TENSOR_BYTES);
    assert_false(st.admission_decided);
    assert_int_equal(rf_session_operation_end(s, NULL), 0);
    assert_int_equal(rf_session_operation_start(s, &sp, &st), 0);
    assert_false(st.staged);
    assert_int_equal(rf_session_operation_end(s, NULL), 0);

    /* the native layer refuses the release: wanted, not done, and why */
    f.release_rc = -EBUSY;
    execute(s, &f, 3 * TENSOR_BYTES);
    assert_int_equal(rf_session_idle(s, true, &r), 0);
    assert_int_equal(r.outcome, RF_IDLE_REFUSED);
    assert_true(r.reason[0] != '\0');
    assert_int_equal(r.accepted_bytes, 0);
    assert_int_equal(rf_session_operation_end(s, NULL), 0);
    assert_int_equal(rf_session_operation_start(s, &sp, &st), 0);
    assert_false(st.staged);
    assert_int_equal(rf_session_context_alive(s, false), 0);
    assert_int_equal(rf_session_idle(NULL, false, &r), -EINVAL);
    assert_int_equal(rf_session_operation_start(s, NULL, &st), -EINVAL);
    rf_session_free(s);

    /* observe: nothing to release, and the reason says the policy does not mutate */
    struct rf_session_params p = rf_session_default_params();
    f = (struct fake){.nat.resident_bytes = 5 * TENSOR_BYTES, .drop_den = 1, .refuse_range = -1};
    s = start(&f, p);
    assert_int_equal(rf_session_idle(s, false, &r), 0);
    assert_int_equal(r.outcome, RF_IDLE_NOTHING);
    assert_string_equal(r.reason, "the policy does not mutate");
    assert_false(r.attempted);
    assert_string_equal(rf_idle_outcome_name(r.outcome), "nothing");
    rf_session_free(s);
}

/* rf_session_foreach_warning's callback: counts the lines, keeps the last. */
struct seen_warnings {
    size_t n;
    const char *last;
};
static void count_warning(const char *w, void *ud)
{
    struct seen_warnings *seen = ud;
    seen->n++;
    seen->last = w;
}

/* The same warning text from two places (two pointers) is one warning, in the report and
   through rf_session_foreach_warning alike. */
static void test_warning_once_by_text(void **state)
{
    (void)state;
    static char a[64], b[64];
    struct fake f = {.drop_den = 1, .refuse_range = -1};
    struct rf_session *s = start(&f, rf_session_default_params());
    snprintf(a, sizeof(a), "the same warning, twice");
    snprintf(b, sizeof(b), "the same warning, twice");
    ses_add_warning(s, a);
    ses_add_warning(s, b);
    ses_add_warning(s, a);
    json_t *doc = fake_report(s, RF_REPORT_OPERATION);
    assert_int_equal(fake_report_warnings(doc, "the same warning, twice"), 1);
    struct seen_warnings seen = {0};
    rf_session_foreach_warning(s, count_warning, &seen);
    assert_int_equal(seen.n, json_array_size(json_object_get(doc, "warnings")));
    assert_non_null(seen.last);
    assert_string_equal(seen.last, "the same warning, twice");
    rf_session_foreach_warning(s, NULL, &seen); /* no callback: nothing, no crash */
    json_decref(doc);
    rf_session_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_admission_locked_read_or_unknown),
        cmocka_unit_test(test_thirteen_samples_one_operation),
        cmocka_unit_test(test_operations_have_their_own_reports),
        cmocka_unit_test(test_admission_in_context),
        cmocka_unit_test(test_admission_in_context_reads_now),
        cmocka_unit_test(test_ledger_kv_in_cache_types),
        cmocka_unit_test(test_idle_alive_boundary),
        cmocka_unit_test(test_busy_gate),
        cmocka_unit_test(test_refused_range),
        cmocka_unit_test(test_apply_refusals),
        cmocka_unit_test(test_boundary_not_quiescent),
        cmocka_unit_test(test_refresh_invalidates),
        cmocka_unit_test(test_history_cap),
        cmocka_unit_test(test_history_cap_policy_off),
        cmocka_unit_test(test_model_file_changed),
        cmocka_unit_test(test_model_file_changed_observe),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_page_snapshot_now),
        cmocka_unit_test(test_tmpfs_release_not_attempted),
        cmocka_unit_test(test_warning_once_by_text),
        cmocka_unit_test(test_host_idle_and_start),
        cmocka_unit_test(test_public_accessors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
