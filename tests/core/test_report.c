/*
 * Tests for the operation report (rf_report_to_json) built from hand-made
 * structs, read back with jansson: every top-level key, the ledger in
 * category order with unknown entries null and explained, values above
 * INT64_MAX null, signed reconciliation differences, absent timers null,
 * the token fingerprint against an independent FNV-1a 64 and a pinned
 * literal, the absent ledger form of policy off; the policy, admission,
 * plan, application, native and lifetime sections filled from real
 * rf_plan_build / rf_admission_decide / rf_lifetime results (checked sums,
 * null totals, the 17 lifetime states, ReleaseFailed with its errno, plan
 * names through the inventory) and the verify session; and
 * rf_json_write_file, which leaves neither a partial file nor its temporary
 * file on failure.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "ramforge/core/admission.h"
#include "ramforge/core/inventory.h"
#include "ramforge/core/ledger.h"
#include "ramforge/core/lifetime.h"
#include "ramforge/core/policy.h"
#include "ramforge/core/report.h"
#include "ramforge/core/report_json.h"
#include "ramforge/core/timing.h"
#include "test_util.h"

#define PAGE 4096

static const char *const top_keys[] = {
    "schema_version",
    "kind",
    "operation",
    "ramforge_version",
    "llama_cpp_version",
    "model",
    "policy",
    "admission",
    "plan",
    "ledger",
    "staging",
    "application",
    "native",
    "lifetime",
    "profile",
    "prediction",
    "residency",
    "timing",
    "output",
    "warnings",
    "streaming",
};
#define N_TOP_KEYS (sizeof(top_keys) / sizeof(top_keys[0]))

/* The spec's names, in category order, written out independently of ledger.c. */
static const char *const category_names[RF_LEDGER_N_CATEGORIES] = {
    "FileBackedLogical", "FileBackedResident", "AnonymousWeights", "MappingPss",
    "ProcessRss",        "ProcessRssPeak",     "CgroupCurrent",    "CgroupPeak",
    "StagingRequested",  "StagingAccepted",    "KvCache",          "GraphScratch",
    "Runtime",           "PromptCache",        "ExpertCache",
};

static const int32_t tokens[] = {1, -1, 256, INT32_MAX, 15043};
#define N_TOKENS (sizeof(tokens) / sizeof(tokens[0]))
static const int32_t prompt[] = {1, 15043, 590};

/*
 * Pinned fingerprint of `tokens`, computed outside C with:
 *   python3 -c 'import struct;h=0xcbf29ce484222325
 *   for b in struct.pack("<5i",1,-1,256,2147483647,15043): h=((h^b)*0x100000001b3)%2**64
 *   print("fnv1a64:%016x"%h)'
 */
#define TOKENS_FINGERPRINT "fnv1a64:e99004cc3f8d7a62"

/* A second implementation of FNV-1a 64 over the little-endian int32 bytes. */
static void naive_fingerprint(const int32_t *t, size_t n, char out[32])
{
    uint64_t h = 14695981039346656037ull; /* offset basis */

    for (size_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)t[i];
        unsigned char le[4] = {(unsigned char)u, (unsigned char)(u >> 8), (unsigned char)(u >> 16),
                               (unsigned char)(u >> 24)};
        for (int b = 0; b < 4; b++) {
            h ^= le[b];
            h *= 1099511628211ull; /* 64-bit FNV prime */
        }
    }
    snprintf(out, 32, "fnv1a64:%016llx", (unsigned long long)h);
}

/* Everything a report points at; lives in the test's frame. */
struct fixture {
    struct rf_inventory inv;
    struct rf_ledger ledger;
    struct rf_reconciliation rc;
    struct rf_timing timing;
    struct rf_residency_sample samples[2];
    struct rf_report_application apps[2];
    const char *warnings[1];
    struct rf_report r;
};

/*
 * One 40960-byte file mapped whole, 4 KiB pages:
 *   t0 [4096, 8192)    page {1}    file-backed
 *   t1 [8192, 14192)   pages {2,3} file-backed
 *   t2 [14192, 16192)  page {3}    anonymous copy (page 3 shared with t1)
 * mapped virtual: pages {1,2,3} = 12288 bytes.
 */
static void build_inventory_at(struct rf_inventory *inv, uint32_t index_base)
{
    struct rf_tensor_meta t[3];
    struct rf_mapping_meta m;
    static const struct {
        const char *name;
        uint64_t off, len;
        enum rf_weight_access access;
    } spec[3] = {
        {"tok_embd.weight", 4096, 4096, RF_ACCESS_FILE_BACKED},
        {"blk.0.attn_q.weight", 8192, 6000, RF_ACCESS_FILE_BACKED},
        {"output_norm.weight", 14192, 2000, RF_ACCESS_ANONYMOUS},
    };

    memset(&m, 0, sizeof(m));
    m.index = 0;
    snprintf(m.path, sizeof(m.path), "%s", "/models/tiny.gguf");
    m.file_size_bytes = 40960;
    m.dev_major = 0xfd;
    m.dev_minor = 1;
    m.inode = 2097153;
    m.validated = true;
    m.map_offset_bytes = 0;
    m.map_length_bytes = 40960;
    for (uint32_t i = 0; i < 3; i++) {
        memset(&t[i], 0, sizeof(t[i]));
        t[i].index = index_base ? index_base + 3 * i : i;
        snprintf(t[i].name, sizeof(t[i].name), "%s", spec[i].name);
        snprintf(t[i].type_name, sizeof(t[i].type_name), "%s", "q8_0");
        t[i].mapping_index = 0;
        t[i].file_offset_bytes = spec[i].off;
        t[i].logical_bytes = spec[i].len;
        t[i].access = spec[i].access;
    }
    rf_inventory_init(inv);
    assert_int_equal(rf_inventory_build(t, 3, &m, 1, PAGE, 7, inv), 0);
    assert_int_equal(inv->totals.mapped_virtual_bytes, 3 * PAGE);
}

static void build_inventory(struct rf_inventory *inv)
{
    build_inventory_at(inv, 0);
}

/*
 * Ledger: FileBackedLogical from the inventory, FileBackedResident 8192,
 * ProcessRss 4096 (below the mapping: a negative difference),
 * ProcessRssPeak UINT64_MAX (a value above INT64_MAX), CgroupCurrent
 * unknown with a reason; the rest keep rf_ledger_init's unknowns.
 * Timing: model_load and ttft only.
 */
static void build_observe(struct fixture *f)
{
    memset(f, 0, sizeof(*f));
    build_inventory(&f->inv);
    rf_ledger_init(&f->ledger);
    assert_int_equal(rf_ledger_set(&f->ledger, RF_LEDGER_FILE_BACKED_LOGICAL,
                                   f->inv.totals.file_backed_logical_bytes, RF_PROV_NATIVE_LOGICAL,
                                   "GGUF tensor table", "not residency"),
                     0);
    assert_int_equal(rf_ledger_set(&f->ledger, RF_LEDGER_FILE_BACKED_RESIDENT, 8192,
                                   RF_PROV_EXACT_MEASURED, "/proc/self/smaps Rss", NULL),
                     0);
    assert_int_equal(rf_ledger_set(&f->ledger, RF_LEDGER_PROCESS_RSS, 4096, RF_PROV_EXACT_MEASURED,
                                   "/proc/self/status VmRSS", NULL),
                     0);
    assert_int_equal(rf_ledger_set(&f->ledger, RF_LEDGER_PROCESS_RSS_PEAK, UINT64_MAX,
                                   RF_PROV_EXACT_MEASURED, "/proc/self/status VmHWM", NULL),
                     0);
    assert_int_equal(rf_ledger_set_unknown(&f->ledger, RF_LEDGER_CGROUP_CURRENT, "cgroup",
                                           "no cgroup memory controller found"),
                     0);
    rf_ledger_reconcile(&f->ledger, true, f->inv.totals.mapped_virtual_bytes, &f->rc);

    rf_timing_init(&f->timing);
    rf_timing_set(&f->timing, RF_TIMER_MODEL_LOAD, 123456789);
    rf_timing_set(&f->timing, RF_TIMER_TTFT, 42);

    f->r.ramforge_version = "0.1.0-test";
    f->r.llama_cpp_version = "test";
    f->r.model_path = "/models/tiny.gguf";
    f->r.model_desc = "llama test";
    f->r.model_file_size_bytes = 40960;
    f->r.model_native_size_bytes = 12096;
    f->r.model_n_params = 1000;
    f->r.instance_id = 3;
    f->r.access_probed = true;
    f->r.access_basis = RF_ACCESS_BASIS_GRAPH_PROBE;
    f->r.policy = "observe";
    f->r.inventory = &f->inv;
    f->r.ledger = &f->ledger;
    f->r.reconciliation = &f->rc;
    f->r.cgroup_version = "v2";
    f->r.cgroup_dir = "/sys/fs/cgroup/a";
    f->r.has_cgroup_limit = true;
    f->r.cgroup_limit_bytes = 1 << 20;
    f->samples[0].taken = true;
    f->samples[0].label = "after_load";
    f->samples[0].has_process_rss = true;
    f->samples[0].process_rss_bytes = 4096;
    f->samples[1].taken = false; /* not taken: left out of samples[] */
    f->r.samples = f->samples;
    f->r.n_samples = 2;
    f->r.applications = f->apps;
    f->r.timing = &f->timing;
    f->r.has_native = true;
    f->r.native.has_contract = true;
    f->r.native.contract_version = 1;
    f->r.native.instance_id = 9;
    f->r.native.active_contexts = 1;
    f->r.native_boundary = "after_session";
    f->r.prompt_tokens = prompt;
    f->r.n_prompt = 3;
    f->r.tokens = tokens;
    f->r.n_tokens = N_TOKENS;
    f->r.text = "hello";
    f->r.n_ctx = 256;
    f->r.n_threads = 4;
    f->warnings[0] = "a warning";
    f->r.warnings = f->warnings;
    f->r.n_warnings = 1;
}

static json_t *report_of(const struct rf_report *r)
{
    json_t *doc = NULL;

    assert_int_equal(rf_report_to_json(r, &doc), 0);
    assert_non_null(doc);
    return doc;
}

/* doc.a.b (NULL for a missing key); never NULL for a JSON null. */
static json_t *at(json_t *o, const char *a, const char *b)
{
    json_t *v = json_object_get(o, a);
    return b && v ? json_object_get(v, b) : v;
}

static void assert_json_int(json_t *v, json_int_t want)
{
    assert_non_null(v);
    assert_true(json_is_integer(v));
    assert_int_equal(json_integer_value(v), want);
}

static void assert_json_null(json_t *v)
{
    assert_non_null(v);           /* present ... */
    assert_true(json_is_null(v)); /* ... and null */
}

static void assert_reason(json_t *section)
{
    json_t *reason = json_object_get(section, "reason");

    assert_non_null(reason);
    assert_true(json_is_string(reason));
    assert_true(strlen(json_string_value(reason)) > 0);
}

static void test_top_level_keys(void **state)
{
    struct fixture f;
    json_t *doc;

    (void)state;
    build_observe(&f);
    doc = report_of(&f.r);
    assert_int_equal(json_object_size(doc), N_TOP_KEYS);
    for (size_t i = 0; i < N_TOP_KEYS; i++)
        assert_non_null(json_object_get(doc, top_keys[i]));
    assert_json_int(at(doc, "schema_version", NULL), 1);
    assert_string_equal(json_string_value(at(doc, "kind", NULL)),
                        "ramforge.residency.operation_report");
    assert_string_equal(json_string_value(at(doc, "policy", "profile")), "observe");
    assert_json_int(at(doc, "model", "file_size_bytes"), 40960);
    /* No prediction recorded: release_authorized is false all the same, with the reason. */
    assert_true(json_is_false(at(doc, "prediction", "release_authorized")));
    assert_reason(json_object_get(doc, "prediction"));
    assert_json_null(at(doc, "profile", "persisted")); /* no --profile */
    assert_json_int(at(doc, "model", "inventory_generation"), 7);
    assert_null(at(doc, "model", "reason"));
    assert_string_equal(json_string_value(at(doc, "model", "access_basis")), "graph_probe");
    assert_non_null(strstr(json_string_value(at(doc, "model", "access_note")), "decode graph"));
    assert_json_int(at(doc, "native", "active_contexts"), 1);
    assert_json_int(at(doc, "native", "contract_version"), 1);
    assert_string_equal(json_string_value(at(doc, "native", "observed_at")), "after_session");
    assert_json_int(json_object_get(at(doc, "admission", "hard_limit"), "limit_bytes"), 1 << 20);
    assert_int_equal(json_array_size(at(doc, "warnings", NULL)), 1);

    /* Sections this version does not fill: value keys null, with a reason. */
    static const struct {
        const char *section, *keys[5];
    } absent[] = {
        {"admission", {"outcome", "soft_target_bytes"}},
        {"plan", {"profile_used", "selected_count", "selected_bytes"}},
        {"staging",
         {"budget_bytes", "selected_bytes", "accepted_bytes", "observed_mapping_delta_bytes"}},
        {"application",
         {"requested_bytes", "accepted_bytes", "observed_mapping_delta_bytes",
          "observed_cgroup_delta_bytes"}},
        {"lifetime", {"state_counts"}},
        {"profile", {"source", "profile_used"}},
    };
    for (size_t i = 0; i < sizeof(absent) / sizeof(absent[0]); i++) {
        json_t *s = at(doc, absent[i].section, NULL);
        assert_true(json_is_object(s));
        for (size_t k = 0; k < 5 && absent[i].keys[k]; k++)
            assert_json_null(json_object_get(s, absent[i].keys[k]));
        assert_reason(s);
    }

    /* Only the taken sample is listed; its absent figures are null. */
    json_t *samples = at(doc, "residency", "samples");
    assert_int_equal(json_array_size(samples), 1);
    assert_string_equal(json_string_value(at(json_array_get(samples, 0), "label", NULL)),
                        "after_load");
    assert_json_int(at(json_array_get(samples, 0), "process_rss_bytes", NULL), 4096);
    assert_json_null(at(json_array_get(samples, 0), "mapping_rss_bytes", NULL));
    json_decref(doc);
    rf_inventory_free(&f.inv);
}

static void test_ledger_entries(void **state)
{
    struct fixture f;
    json_t *doc, *entries;

    (void)state;
    build_observe(&f);
    doc = report_of(&f.r);
    entries = at(doc, "ledger", "entries");
    assert_true(json_is_array(entries));
    assert_int_equal(json_array_size(entries), RF_LEDGER_N_CATEGORIES);
    for (size_t c = 0; c < RF_LEDGER_N_CATEGORIES; c++) {
        json_t *e = json_array_get(entries, c);
        const char *prov = json_string_value(json_object_get(e, "provenance"));

        assert_int_equal(json_object_size(e), 5);
        assert_string_equal(json_string_value(json_object_get(e, "category")), category_names[c]);
        assert_non_null(prov);
        assert_true(json_is_string(json_object_get(e, "source")));
        if (strcmp(prov, "unknown") == 0) {
            const char *note = json_string_value(json_object_get(e, "note"));
            assert_json_null(json_object_get(e, "value_bytes"));
            assert_non_null(note);
            assert_true(strlen(note) > 0);
        }
    }
    /* 3 file-backed tensors: 4096 + 6000 + 2000 payload bytes. */
    assert_json_int(
        json_object_get(json_array_get(entries, RF_LEDGER_FILE_BACKED_LOGICAL), "value_bytes"),
        12096);
    assert_json_int(
        json_object_get(json_array_get(entries, RF_LEDGER_FILE_BACKED_RESIDENT), "value_bytes"),
        8192);
    /* A value above INT64_MAX is null, but keeps its provenance. */
    json_t *peak = json_array_get(entries, RF_LEDGER_PROCESS_RSS_PEAK);
    assert_json_null(json_object_get(peak, "value_bytes"));
    assert_string_equal(json_string_value(json_object_get(peak, "provenance")), "exact_measured");
    json_t *cg = json_array_get(entries, RF_LEDGER_CGROUP_CURRENT);
    assert_string_equal(json_string_value(json_object_get(cg, "provenance")), "unknown");
    assert_string_equal(json_string_value(json_object_get(cg, "note")),
                        "no cgroup memory controller found");
    /* Never-set categories are unknown (the spec's KV-cache reason). */
    json_t *kv = json_array_get(entries, RF_LEDGER_KV_CACHE);
    assert_json_null(json_object_get(kv, "value_bytes"));
    assert_non_null(strstr(json_string_value(json_object_get(kv, "note")), "KV-cache"));
    json_decref(doc);
    rf_inventory_free(&f.inv);
}

static void test_reconciliation_signed(void **state)
{
    struct fixture f;
    json_t *doc, *rec;

    (void)state;
    build_observe(&f);
    doc = report_of(&f.r);
    rec = at(doc, "ledger", "reconciliation");
    assert_true(json_is_object(rec));
    assert_json_int(json_object_get(rec, "mapped_virtual_bytes"), 12288);
    assert_json_int(json_object_get(rec, "mapped_resident_bytes"), 8192);
    assert_json_int(json_object_get(rec, "process_rss_bytes"), 4096);
    /* 4096 - 8192: negative, not clamped to zero. */
    assert_json_int(json_object_get(rec, "rss_minus_mapping_resident_bytes"), -4096);
    /* CgroupCurrent unknown: the figure and its difference are null. */
    assert_json_null(json_object_get(rec, "cgroup_current_bytes"));
    assert_json_null(json_object_get(rec, "cgroup_current_minus_rss_bytes"));
    assert_json_null(json_object_get(rec, "cgroup_peak_bytes"));
    json_decref(doc);

    /* A ledger without its reconciliation: derived from the ledger, no crash. */
    f.r.reconciliation = NULL;
    doc = report_of(&f.r);
    rec = at(doc, "ledger", "reconciliation");
    assert_json_int(json_object_get(rec, "mapped_virtual_bytes"), 12288);
    assert_json_int(json_object_get(rec, "process_rss_bytes"), 4096);
    assert_json_int(json_object_get(rec, "rss_minus_mapping_resident_bytes"), -4096);
    assert_json_null(json_object_get(rec, "cgroup_current_minus_rss_bytes"));
    json_decref(doc);
    rf_inventory_free(&f.inv);
}

static void test_timing_absent_null(void **state)
{
    struct fixture f;
    json_t *doc, *t;

    (void)state;
    build_observe(&f);
    doc = report_of(&f.r);
    t = at(doc, "timing", NULL);
    assert_int_equal(json_object_size(t), RF_TIMER_N + 1); /* + note */
    for (int k = 0; k < RF_TIMER_N; k++) {
        json_t *v = json_object_get(t, rf_timer_name((enum rf_timer)k));
        if (k == RF_TIMER_MODEL_LOAD)
            assert_json_int(v, 123456789);
        else if (k == RF_TIMER_TTFT)
            assert_json_int(v, 42);
        else
            assert_json_null(v);
    }
    assert_json_null(json_object_get(t, "end_to_end_ns"));
    assert_true(json_is_string(json_object_get(t, "note")));
    json_decref(doc);

    /* No timing struct at all: every timer null, keys still present. */
    f.r.timing = NULL;
    doc = report_of(&f.r);
    for (int k = 0; k < RF_TIMER_N; k++)
        assert_json_null(at(doc, "timing", rf_timer_name((enum rf_timer)k)));
    json_decref(doc);
    rf_inventory_free(&f.inv);
}

static void test_token_fingerprint(void **state)
{
    struct fixture f;
    char mine[32], theirs[32];
    json_t *doc, *out, *ids;

    (void)state;
    naive_fingerprint(tokens, N_TOKENS, mine);
    rf_token_fingerprint(tokens, N_TOKENS, theirs);
    assert_string_equal(theirs, mine);
    assert_string_equal(theirs, TOKENS_FINGERPRINT);
    /* No tokens: the offset basis. */
    rf_token_fingerprint(NULL, 0, theirs);
    assert_string_equal(theirs, "fnv1a64:cbf29ce484222325");
    /* Order matters. */
    const int32_t swapped[] = {-1, 1, 256, INT32_MAX, 15043};
    rf_token_fingerprint(swapped, N_TOKENS, theirs);
    assert_string_not_equal(theirs, TOKENS_FINGERPRINT);

    build_observe(&f);
    doc = report_of(&f.r);
    out = at(doc, "output", NULL);
    assert_string_equal(json_string_value(json_object_get(out, "token_fingerprint")),
                        TOKENS_FINGERPRINT);
    assert_json_int(json_object_get(out, "n_generated_tokens"), N_TOKENS);
    assert_json_int(json_object_get(out, "n_prompt_tokens"), 3);
    ids = json_object_get(out, "token_ids");
    assert_int_equal(json_array_size(ids), N_TOKENS);
    for (size_t i = 0; i < N_TOKENS; i++)
        assert_json_int(json_array_get(ids, i), tokens[i]);
    assert_int_equal(json_array_size(json_object_get(out, "prompt_token_ids")), 3);
    json_decref(doc);
    rf_inventory_free(&f.inv);
}

static void test_policy_off_absent_ledger(void **state)
{
    struct fixture f;
    json_t *doc, *ledger;

    (void)state;
    build_observe(&f);
    f.r.policy = "off";
    f.r.inventory = NULL;
    f.r.ledger = NULL;
    f.r.reconciliation = NULL;
    f.samples[0].taken = false;
    f.r.not_built_reason = "residency policy off";
    doc = report_of(&f.r);
    assert_int_equal(json_object_size(doc), N_TOP_KEYS);
    ledger = at(doc, "ledger", NULL);
    assert_int_equal(json_object_size(ledger), 3);
    assert_json_null(json_object_get(ledger, "entries"));
    assert_json_null(json_object_get(ledger, "reconciliation"));
    assert_string_equal(json_string_value(json_object_get(ledger, "reason")),
                        "residency policy off");
    assert_json_null(at(doc, "model", "inventory"));
    assert_json_null(at(doc, "model", "inventory_generation"));
    assert_string_equal(json_string_value(at(doc, "model", "reason")), "residency policy off");
    assert_int_equal(json_array_size(at(doc, "residency", "samples")), 0);
    json_decref(doc);

    /* Placement: the note says what was not observed and how to get it. */
    f.r.access_probed = false;
    f.r.access_basis = RF_ACCESS_BASIS_PLACEMENT;
    doc = report_of(&f.r);
    assert_string_equal(json_string_value(at(doc, "model", "access_basis")), "placement");
    assert_non_null(strstr(json_string_value(at(doc, "model", "access_note")), "not observed"));
    assert_non_null(strstr(json_string_value(at(doc, "model", "access_note")), "--access-probe"));
    json_decref(doc);
    f.r.access_basis = RF_ACCESS_BASIS_NONE;
    doc = report_of(&f.r);
    assert_string_equal(json_string_value(at(doc, "model", "access_basis")), "none");
    assert_non_null(strstr(json_string_value(at(doc, "model", "access_note")), "not classified"));
    json_decref(doc);

    /* No reason given: still a non-empty reason, never null. */
    f.r.not_built_reason = NULL;
    doc = report_of(&f.r);
    assert_reason(at(doc, "ledger", NULL));
    assert_reason(at(doc, "model", NULL));
    json_decref(doc);
    rf_inventory_free(&f.inv);
}

/* The 17 states of rf_lifetime_state_name, in enum order, written out independently. */
static const char *const state_names[RF_LT_N] = {
    "Discovered",
    "Owned",
    "Referenced",
    "ExecutionSubmitted",
    "ExecutionCompleted",
    "OperationBoundarySynchronized",
    "ReleaseEligible",
    "ReleaseSelected",
    "ReleaseRequested",
    "NativeAccepted",
    "NativeFailure",
    "Reconciled",
    "ReleaseFailed",
    "FinalUseProven",
    "Invalidated",
    "SharedOrReused",
    "Unknown",
};

/* Advances resource i of lt along path (legal transitions only). */
/* Everything a mutating run adds to the observe fixture. */
struct mutating {
    struct fixture f;
    struct rf_inventory sparse; /* tensor indices 5, 8, 11: not positions */
    struct rf_plan plan;
    struct rf_admission_result adm;
    struct rf_lifetime lt;
};

/*
 * memory-bound with an 8192-byte target over a 12288-byte resident mapping;
 * admission over a 20000-byte request (AdmittedWithWarning); releases at
 * after_load (not attempted) and after_session (attempted, one range
 * refused with EINVAL, negative deltas); lifetimes: t0 ReleaseFailed
 * (-EINVAL), t1 Reconciled, t2 Unknown.
 */
static void build_mutating(struct mutating *m)
{
    static const enum rf_lifetime_state to_requested[] = {RF_LT_RELEASE_SELECTED,
                                                          RF_LT_RELEASE_REQUESTED};
    static const enum rf_lifetime_state to_reconciled[] = {RF_LT_NATIVE_ACCEPTED, RF_LT_RECONCILED};
    struct fixture *f = &m->f;
    struct rf_plan_params pp = rf_plan_default_params();
    struct rf_admission_input in;

    memset(m, 0, sizeof(*m));
    build_observe(f);
    build_inventory_at(&m->sparse, 5);
    f->r.inventory = &m->sparse;
    f->r.policy = "memory-bound";
    f->r.policy_plans = true;
    f->r.policy_mutates = true;
    f->r.has_target = true;
    f->r.target_bytes = 2 * PAGE;
    f->r.release_mode = "dontneed";

    pp.profile = RF_POLICY_MEMORY_BOUND;
    pp.has_target = true;
    pp.target_bytes = 2 * PAGE;
    pp.has_mapping_resident = true;
    pp.mapping_resident_bytes = 3 * PAGE;
    pp.binding_ok = true;
    rf_plan_init(&m->plan);
    assert_int_equal(rf_plan_build(&m->sparse, &pp, &m->plan), 0);
    assert_true(m->plan.n_selected > 0);
    f->r.plan = &m->plan;
    f->r.plan_boundary = "after_session";

    memset(&in, 0, sizeof(in));
    in.process_rss = rf_admission_figure_of(15000, RF_PROV_EXACT_MEASURED, "status VmRSS");
    in.kv_cache = rf_admission_figure_of(5000, RF_PROV_ESTIMATED, "hyperparameters");
    in.has_target = true;
    in.target_bytes = 2 * PAGE;
    assert_int_equal(rf_admission_decide(&in, &m->adm), 0);
    assert_int_equal(m->adm.outcome, RF_ADMIT_WARNING);
    f->r.admission = &m->adm;

    f->apps[0] = (struct rf_report_application){
        .boundary = "after_load",
        .attempted = false,
        .refused_reason = "the plan selected nothing",
    };
    f->apps[1] = (struct rf_report_application){
        .boundary = "after_session",
        .attempted = true,
        .requested_bytes = 3 * PAGE,
        .accepted_bytes = 2 * PAGE,
        .n_failed = 1,
        .first_error = -EINVAL,
        .mapping_delta = {true, -2 * PAGE},
        .rss_delta = {true, -3 * PAGE},
        .cgroup_delta = {true, -100},
    };
    f->r.n_applications = 2;

    f->r.has_native = true;
    f->r.native = (struct rf_native_lifetime){
        .has_contract = true,
        .contract_version = 1,
        .instance_id = 3,
        .quiescent = true,
        .in_flight_contexts = 0,
        .active_contexts = 0,
        .execution_generation = 17,
    };
    f->r.native_boundary = "after_session";

    assert_int_equal(rf_lifetime_init(&m->lt, 3), 0);
    for (size_t i = 0; i < 2; i++) {
        assert_int_equal(fixture_walk(&m->lt, i, fixture_to_eligible, FIXTURE_TO_ELIGIBLE_N), 0);
        assert_int_equal(fixture_walk(&m->lt, i, to_requested, 2), 0);
    }
    assert_int_equal(rf_lifetime_fail(&m->lt, 0, -EINVAL), 0);
    assert_int_equal(fixture_walk(&m->lt, 1, to_reconciled, 2), 0);
    assert_int_equal(rf_lifetime_advance(&m->lt, 2, RF_LT_UNKNOWN), 0);
    f->r.lifetime = &m->lt;
}

static void free_mutating(struct mutating *m)
{
    rf_lifetime_free(&m->lt);
    rf_plan_free(&m->plan);
    rf_inventory_free(&m->sparse);
    rf_inventory_free(&m->f.inv);
}

static void test_policy_and_admission(void **state)
{
    struct mutating m;
    json_t *doc, *pol, *adm;

    (void)state;
    build_mutating(&m);
    m.f.r.reserve_bytes = 1024;
    doc = report_of(&m.f.r);
    pol = at(doc, "policy", NULL);
    assert_int_equal(json_object_size(pol), 8);
    assert_string_equal(json_string_value(json_object_get(pol, "profile")), "memory-bound");
    assert_true(json_is_true(json_object_get(pol, "plans")));
    assert_true(json_is_true(json_object_get(pol, "mutates")));
    assert_json_int(json_object_get(pol, "target_bytes"), 2 * PAGE);
    assert_json_int(json_object_get(pol, "reserve_bytes"), 1024);
    assert_json_int(json_object_get(pol, "soft_target_bytes"), 2 * PAGE - 1024);
    assert_string_equal(json_string_value(json_object_get(pol, "release_mode")), "dontneed");

    adm = at(doc, "admission", NULL);
    assert_string_equal(json_string_value(json_object_get(adm, "outcome")),
                        "admitted_with_warning");
    assert_json_int(json_object_get(adm, "soft_target_bytes"), 2 * PAGE);
    assert_json_int(json_object_get(adm, "excess_bytes"), 20000 - 2 * PAGE);
    assert_json_null(json_object_get(adm, "reclaimable_bytes"));
    assert_json_null(json_object_get(adm, "projected_charge_bytes"));
    assert_true(json_is_false(json_object_get(adm, "hard_limit_checked")));
    assert_true(json_is_object(json_object_get(adm, "hard_limit")));
    /* Absent figures are listed, never counted as zero. */
    assert_int_equal(json_array_size(json_object_get(adm, "unknown_components")), 3);
    assert_string_equal(
        json_string_value(json_array_get(json_object_get(adm, "unknown_components"), 0)),
        "GraphScratch");
    assert_string_equal(
        json_string_value(json_array_get(json_object_get(adm, "unknown_components"), 1)),
        "Runtime");
    assert_string_equal(
        json_string_value(json_array_get(json_object_get(adm, "unknown_components"), 2)),
        "FileWorkingSet");
    assert_string_equal(json_string_value(json_object_get(adm, "reason")), m.adm.reason);
    json_decref(doc);

    /* Each outcome by its name. */
    static const char *const outcomes[] = {"admitted", "admitted_with_warning", "rejected",
                                           "unknown"};
    for (int o = RF_ADMIT_ADMITTED; o <= RF_ADMIT_UNKNOWN; o++) {
        m.adm.outcome = (enum rf_admission_outcome)o;
        doc = report_of(&m.f.r);
        assert_string_equal(json_string_value(at(doc, "admission", "outcome")), outcomes[o]);
        json_decref(doc);
    }

    /* Not mutating, no target: release_mode and the soft target are null. */
    m.f.r.policy_mutates = false;
    m.f.r.release_mode = NULL;
    m.f.r.has_target = false;
    doc = report_of(&m.f.r);
    assert_json_null(at(doc, "policy", "release_mode"));
    assert_json_null(at(doc, "policy", "target_bytes"));
    assert_json_null(at(doc, "policy", "soft_target_bytes"));
    json_decref(doc);
    free_mutating(&m);
}

static void test_plan_section(void **state)
{
    struct mutating m;
    json_t *doc, *plan, *names;

    (void)state;
    build_mutating(&m);
    doc = report_of(&m.f.r);
    plan = at(doc, "plan", NULL);
    assert_true(json_is_false(json_object_get(plan, "profile_used")));
    assert_json_int(json_object_get(plan, "selected_count"), (json_int_t)m.plan.n_selected);
    assert_json_int(json_object_get(plan, "selected_bytes"),
                    (json_int_t)m.plan.selected_logical_bytes);
    assert_json_int(json_object_get(plan, "generation"), 7);
    assert_json_int(json_object_get(plan, "release_bytes"), (json_int_t)m.plan.release_bytes);
    assert_string_equal(json_string_value(json_object_get(plan, "boundary")), "after_session");
    assert_true(json_is_true(json_object_get(plan, "applied")));
    assert_true(json_is_false(json_object_get(plan, "selected_truncated")));
    assert_string_equal(json_string_value(json_object_get(plan, "reason")), m.plan.reason);
    /* Names by tensor index through the inventory (indices 5, 8, 11 are not positions). */
    names = json_object_get(plan, "selected");
    assert_int_equal(json_array_size(names), m.plan.n_selected);
    for (size_t k = 0; k < m.plan.n_selected; k++) {
        const struct rf_inventory_entry *e = NULL;
        struct rf_resource_key key = {m.plan.generation, m.plan.selected[k]};
        assert_true(m.plan.selected[k] >= 5);
        assert_int_equal(rf_inventory_lookup(&m.sparse, key, &e), 0);
        assert_string_equal(json_string_value(json_array_get(names, k)), e->name);
    }
    json_decref(doc);

    /* No plan: the absent form, with the caller's reason. */
    m.f.r.plan = NULL;
    m.f.r.plan_reason = "the run was rejected before the session";
    doc = report_of(&m.f.r);
    plan = at(doc, "plan", NULL);
    assert_int_equal(json_object_size(plan), 4);
    assert_json_null(json_object_get(plan, "profile_used"));
    assert_json_null(json_object_get(plan, "selected_count"));
    assert_json_null(json_object_get(plan, "selected_bytes"));
    assert_string_equal(json_string_value(json_object_get(plan, "reason")),
                        "the run was rejected before the session");
    json_decref(doc);
    free_mutating(&m);
}

static void test_application_sums(void **state)
{
    struct mutating m;
    json_t *doc, *app, *b;

    (void)state;
    build_mutating(&m);
    doc = report_of(&m.f.r);
    app = at(doc, "application", NULL);
    assert_null(json_object_get(app, "reason"));
    assert_string_equal(json_string_value(json_object_get(app, "release_mode")), "dontneed");
    assert_int_equal(json_array_size(json_object_get(app, "boundaries")), 2);
    /* Only the attempted boundary counts. */
    assert_json_int(json_object_get(app, "requested_bytes"), 3 * PAGE);
    assert_json_int(json_object_get(app, "accepted_bytes"), 2 * PAGE);
    assert_json_int(json_object_get(app, "observed_mapping_delta_bytes"), -2 * PAGE);
    assert_json_int(json_object_get(app, "observed_cgroup_delta_bytes"), -100);

    b = json_array_get(json_object_get(app, "boundaries"), 0);
    assert_int_equal(json_object_size(b), 12); /* requested_by (null: the policy) among them */
    assert_true(json_is_null(json_object_get(b, "requested_by")));
    assert_string_equal(json_string_value(json_object_get(b, "boundary")), "after_load");
    assert_true(json_is_false(json_object_get(b, "attempted")));
    assert_string_equal(json_string_value(json_object_get(b, "refused_reason")),
                        "the plan selected nothing");
    static const char *const figures[] = {
        "requested_bytes",
        "accepted_bytes",
        "failed_ranges",
        "protected_bytes",
        "error",
        "observed_mapping_delta_bytes",
        "observed_rss_delta_bytes",
        "observed_cgroup_delta_bytes",
    };
    for (size_t k = 0; k < sizeof(figures) / sizeof(figures[0]); k++)
        assert_json_null(json_object_get(b, figures[k]));

    b = json_array_get(json_object_get(app, "boundaries"), 1);
    assert_true(json_is_true(json_object_get(b, "attempted")));
    assert_json_null(json_object_get(b, "refused_reason"));
    assert_json_int(json_object_get(b, "requested_bytes"), 3 * PAGE);
    assert_json_int(json_object_get(b, "accepted_bytes"), 2 * PAGE);
    assert_json_int(json_object_get(b, "failed_ranges"), 1);
    assert_string_equal(json_string_value(json_object_get(b, "error")), "Invalid argument");
    assert_json_int(json_object_get(b, "observed_mapping_delta_bytes"), -2 * PAGE);
    assert_json_int(json_object_get(b, "observed_rss_delta_bytes"), -3 * PAGE);
    assert_json_int(json_object_get(b, "observed_cgroup_delta_bytes"), -100);
    json_decref(doc);

    /* Both attempted: the totals add up; a missing cgroup delta nulls its total only. */
    m.f.apps[0] = (struct rf_report_application){
        .boundary = "after_load",
        .attempted = true,
        .requested_bytes = PAGE,
        .accepted_bytes = PAGE,
        .mapping_delta = {true, -PAGE},
        .rss_delta = {true, -PAGE},
        .cgroup_delta = {false, 0},
    };
    doc = report_of(&m.f.r);
    app = at(doc, "application", NULL);
    assert_json_int(json_object_get(app, "requested_bytes"), 4 * PAGE);
    assert_json_int(json_object_get(app, "accepted_bytes"), 3 * PAGE);
    assert_json_int(json_object_get(app, "observed_mapping_delta_bytes"), -3 * PAGE);
    assert_json_null(json_object_get(app, "observed_cgroup_delta_bytes"));
    assert_json_null(
        json_object_get(json_array_get(json_object_get(app, "boundaries"), 0), "error"));
    json_decref(doc);

    /* Sums that overflow (uint64 bytes, int64 deltas) are null, never wrapped. */
    m.f.apps[0].requested_bytes = UINT64_MAX - PAGE;
    m.f.apps[0].mapping_delta = (struct rf_recon_value){true, INT64_MIN + 1};
    doc = report_of(&m.f.r);
    assert_json_null(at(doc, "application", "requested_bytes"));
    assert_json_null(at(doc, "application", "observed_mapping_delta_bytes"));
    json_decref(doc);

    /* Nothing attempted: the absent form with every boundary's reason. */
    m.f.apps[0].attempted = false;
    m.f.apps[0].refused_reason = "the plan selected nothing";
    m.f.apps[1].attempted = false;
    m.f.apps[1].refused_reason = "the execution gate was busy";
    doc = report_of(&m.f.r);
    app = at(doc, "application", NULL);
    assert_int_equal(json_object_size(app), 5);
    assert_json_null(json_object_get(app, "requested_bytes"));
    assert_json_null(json_object_get(app, "accepted_bytes"));
    assert_json_null(json_object_get(app, "observed_mapping_delta_bytes"));
    assert_json_null(json_object_get(app, "observed_cgroup_delta_bytes"));
    assert_string_equal(json_string_value(json_object_get(app, "reason")),
                        "after_load: the plan selected nothing; "
                        "after_session: the execution gate was busy");
    json_decref(doc);

    /* Only one boundary, refused without a reason: still a reason. */
    m.f.r.n_applications = 1;
    m.f.apps[0].refused_reason = NULL;
    doc = report_of(&m.f.r);
    assert_string_equal(json_string_value(at(doc, "application", "reason")),
                        "after_load: not attempted");
    json_decref(doc);

    /* No release requested at all (n_applications 0). */
    m.f.r.n_applications = 0;
    doc = report_of(&m.f.r);
    assert_reason(at(doc, "application", NULL));
    assert_json_null(at(doc, "application", "requested_bytes"));
    json_decref(doc);

    /* One attempted, the other refused without a reason: still a reason, never null. */
    m.f.r.n_applications = 2;
    m.f.apps[1].refused_reason = NULL;
    m.f.apps[0].attempted = true;
    doc = report_of(&m.f.r);
    b = json_array_get(at(doc, "application", "boundaries"), 1);
    assert_true(json_is_string(json_object_get(b, "refused_reason")));
    assert_true(strlen(json_string_value(json_object_get(b, "refused_reason"))) > 0);
    json_decref(doc);
    free_mutating(&m);
}

/*
 * A session report of many boundaries (40, above the 32 listed): the
 * newest 32 are listed in order and the 8 older counted; the totals still
 * cover the dropped ones. The only boundaries attempted are the 8 oldest
 * (1 page each, dropped) and the newest (2 pages, listed): the present form
 * even though 31 of the 32 listed were not attempted.
 */
static void test_application_bounded(void **state)
{
    enum { N = 40, LISTED = 32 };
    static struct rf_report_application apps[N];
    static char labels[N][16];
    struct mutating m;

    (void)state;
    build_mutating(&m);
    for (int i = 0; i < N; i++) {
        snprintf(labels[i], sizeof(labels[i]), "b%02d", i);
        bool tried = i < N - LISTED || i == N - 1;
        uint64_t pages = i == N - 1 ? 2 : 1;
        apps[i] = (struct rf_report_application){
            .boundary = labels[i],
            .attempted = tried,
            .refused_reason = tried ? NULL : "the plan selected nothing",
            .requested_bytes = tried ? pages * PAGE : 0,
            .accepted_bytes = tried ? pages * PAGE : 0,
            .mapping_delta = {tried, tried ? -(int64_t)(pages * PAGE) : 0},
            .rss_delta = {tried, 0},
            .cgroup_delta = {tried, 0},
        };
    }
    m.f.r.applications = apps;
    m.f.r.n_applications = N;
    json_t *doc = report_of(&m.f.r);
    json_t *app = at(doc, "application", NULL), *list = json_object_get(app, "boundaries");
    assert_int_equal(json_array_size(list), LISTED);
    assert_json_int(json_object_get(app, "boundaries_dropped"), N - LISTED);
    for (int k = 0; k < LISTED; k++)
        assert_string_equal(json_string_value(json_object_get(json_array_get(list, k), "boundary")),
                            labels[N - LISTED + k]);
    assert_true(json_is_true(json_object_get(json_array_get(list, LISTED - 1), "attempted")));
    assert_json_int(json_object_get(app, "requested_bytes"), 10 * PAGE);
    assert_json_int(json_object_get(app, "accepted_bytes"), 10 * PAGE);
    assert_json_int(json_object_get(app, "observed_mapping_delta_bytes"), -10 * PAGE);
    json_decref(doc);

    /* At the bound nothing is dropped. */
    m.f.r.applications = apps + (N - LISTED);
    m.f.r.n_applications = LISTED;
    doc = report_of(&m.f.r);
    assert_int_equal(json_array_size(at(doc, "application", "boundaries")), LISTED);
    assert_json_int(at(doc, "application", "boundaries_dropped"), 0);
    assert_json_int(at(doc, "application", "requested_bytes"), 2 * PAGE);
    json_decref(doc);
    free_mutating(&m);
}

static void test_native_section(void **state)
{
    struct mutating m;
    json_t *doc, *n;

    (void)state;
    build_mutating(&m);
    doc = report_of(&m.f.r);
    n = at(doc, "native", NULL);
    assert_int_equal(json_object_size(n), 9);
    assert_json_null(json_object_get(n, "context_execution_generation")); /* not reported */
    assert_json_int(json_object_get(n, "contract_version"), 1);
    assert_json_int(json_object_get(n, "instance_id"), 3);
    assert_true(json_is_true(json_object_get(n, "quiescent")));
    assert_json_int(json_object_get(n, "in_flight_contexts"), 0);
    assert_json_int(json_object_get(n, "active_contexts"), 0);
    assert_json_int(json_object_get(n, "execution_generation"), 17);
    assert_string_equal(json_string_value(json_object_get(n, "observed_at")), "after_session");
    assert_json_null(json_object_get(n, "reason"));
    json_decref(doc);
    m.f.r.context_execution_generation = 5;
    doc = report_of(&m.f.r);
    assert_json_int(at(doc, "native", "context_execution_generation"), 5);
    json_decref(doc);

    /* Observed, but no contract: the version is null and says why. */
    m.f.r.native.has_contract = false;
    doc = report_of(&m.f.r);
    assert_json_null(at(doc, "native", "contract_version"));
    assert_reason(at(doc, "native", NULL));
    json_decref(doc);

    /* Not observed: every fact null but the model's instance, with a reason. */
    m.f.r.has_native = false;
    doc = report_of(&m.f.r);
    n = at(doc, "native", NULL);
    assert_int_equal(json_object_size(n), 9);
    assert_json_int(json_object_get(n, "instance_id"), 3);
    static const char *const facts[] = {"contract_version",     "quiescent",
                                        "in_flight_contexts",   "active_contexts",
                                        "execution_generation", "context_execution_generation",
                                        "observed_at"};
    for (size_t k = 0; k < sizeof(facts) / sizeof(facts[0]); k++)
        assert_json_null(json_object_get(n, facts[k]));
    assert_reason(n);
    json_decref(doc);
    free_mutating(&m);
}

static void test_lifetime_section(void **state)
{
    struct mutating m;
    json_t *doc, *lt, *counts, *failed;
    json_int_t sum = 0;

    (void)state;
    build_mutating(&m);
    m.f.r.inventory = &m.f.inv; /* names by position, as the lifetime is indexed */
    doc = report_of(&m.f.r);
    lt = at(doc, "lifetime", NULL);
    assert_null(json_object_get(lt, "reason"));
    assert_json_int(json_object_get(lt, "resources"), 3);
    counts = json_object_get(lt, "state_counts");
    assert_int_equal(json_object_size(counts), RF_LT_N);
    assert_int_equal(RF_LT_N, 17);
    for (int s = 0; s < RF_LT_N; s++) {
        json_t *v = json_object_get(counts, state_names[s]);
        assert_string_equal(rf_lifetime_state_name((enum rf_lifetime_state)s), state_names[s]);
        assert_non_null(v);
        assert_true(json_is_integer(v));
        sum += json_integer_value(v);
    }
    assert_int_equal(sum, 3);
    assert_json_int(json_object_get(counts, "ReleaseFailed"), 1);
    assert_json_int(json_object_get(counts, "Reconciled"), 1);
    assert_json_int(json_object_get(counts, "Unknown"), 1);
    assert_json_int(json_object_get(counts, "Discovered"), 0);

    failed = json_object_get(lt, "release_failed");
    assert_int_equal(json_array_size(failed), 1);
    assert_int_equal(json_object_size(json_array_get(failed, 0)), 2);
    assert_string_equal(json_string_value(at(json_array_get(failed, 0), "name", NULL)),
                        "tok_embd.weight");
    assert_string_equal(json_string_value(at(json_array_get(failed, 0), "error", NULL)),
                        "Invalid argument");
    json_decref(doc);

    /* Not tracked: the absent form. */
    m.f.r.lifetime = NULL;
    doc = report_of(&m.f.r);
    lt = at(doc, "lifetime", NULL);
    assert_int_equal(json_object_size(lt), 2);
    assert_json_null(json_object_get(lt, "state_counts"));
    assert_reason(lt);
    json_decref(doc);
    free_mutating(&m);
}

/*
 * The streaming object: storage traffic with provenance for every policy;
 * under streaming the plan (pinned tensor names from the inventory), the
 * pin and the bound with its ratio.
 */
static void test_streaming_section(void **state)
{
    struct fixture f;
    struct rf_stream_plan plan;
    struct rf_stream_report sr;
    size_t pinned[1] = {1};
    json_t *doc, *st;

    (void)state;
    build_observe(&f);
    memset(&sr, 0, sizeof(sr));
    sr.has_read_bytes = true;
    sr.read_bytes = 5000;
    sr.plan_reason = "the residency policy is not streaming";
    f.r.streaming = &sr;
    doc = report_of(&f.r);
    st = at(doc, "streaming", NULL);
    assert_json_int(at(at(st, "io", NULL), "read_bytes", NULL), 5000);
    assert_string_equal(json_string_value(at(at(st, "io", NULL), "read_bytes_provenance", NULL)),
                        "exact_measured");
    assert_json_null(at(at(st, "io", NULL), "major_faults", NULL));
    assert_json_null(at(at(st, "io", NULL), "major_faults_provenance", NULL));
    assert_json_null(at(st, "plan", NULL));
    assert_json_null(at(st, "pin", NULL));
    json_decref(doc);

    rf_stream_plan_init(&plan);
    plan.working_set_bytes = 12288;
    plan.pinned_bytes = 8192;
    plan.streamed_bytes = 4096;
    plan.pinned = pinned;
    plan.n_pinned = 1;
    sr.active = true;
    sr.plan = &plan;
    sr.inv = &f.inv;
    sr.pin_attempted = sr.pinned = true;
    sr.has_locked = true;
    sr.locked_bytes = 8192;
    sr.has_bound = sr.has_achieved = true;
    sr.bound_token_ns = 100;
    sr.achieved_token_ns = 150;
    doc = report_of(&f.r);
    st = at(doc, "streaming", NULL);
    assert_json_int(at(at(st, "plan", NULL), "streamed_bytes_per_token", NULL), 4096);
    json_t *names = at(at(st, "plan", NULL), "pinned_tensors", NULL);
    assert_int_equal(json_array_size(names), 1);
    assert_string_equal(json_string_value(json_array_get(names, 0)), "blk.0.attn_q.weight");
    assert_json_int(at(at(st, "pin", NULL), "locked_bytes", NULL), 8192);
    assert_json_null(at(at(st, "pin", NULL), "error", NULL));
    assert_true(json_real_value(at(at(st, "bound", NULL), "ratio_to_bound", NULL)) == 1.5);
    assert_json_null(at(at(st, "bound", NULL), "overlap_limit_token_ns", NULL));
    /* no decode figures given: the object's values are null; no read-ahead: no overlap */
    assert_json_null(at(at(st, "decode", NULL), "read_bandwidth_bytes_per_s", NULL));
    assert_json_null(at(at(st, "decode", NULL), "overlapped_fraction", NULL));
    assert_true(strlen(json_string_value(at(at(st, "decode", NULL), "overlapped_reason", NULL))) >
                0);
    json_decref(doc);

    /* the decode's reads: 600 MB in 0.5 s is 1.2 GB/s; the overlap limit 120 ns: 1.25x */
    sr.has_overlap_limit = true;
    sr.overlap_limit_token_ns = 120;
    sr.decode = (struct rf_stream_decode){.on = true,
                                          .decode_ns = 500000000,
                                          .tokens = 3,
                                          .has_io = true,
                                          .read_bytes = 600000000,
                                          .major_faults = 7,
                                          .has_cpu = true,
                                          .user_ns = 9,
                                          .system_ns = 4};
    doc = report_of(&f.r);
    st = at(doc, "streaming", NULL);
    json_t *d = at(st, "decode", NULL);
    assert_json_int(at(d, "read_bandwidth_bytes_per_s", NULL), 1200000000);
    assert_json_int(at(d, "read_bytes_per_token", NULL), 200000000);
    assert_json_int(at(d, "system_ns", NULL), 4);
    assert_json_null(at(d, "overlapped_fraction", NULL));
    assert_json_int(at(at(st, "bound", NULL), "overlap_limit_token_ns", NULL), 120);
    assert_true(json_real_value(at(at(st, "bound", NULL), "ratio_to_overlap_limit", NULL)) == 1.25);
    json_decref(doc);
    rf_inventory_free(&f.inv);
}

static void test_verify_session(void **state)
{
    struct fixture f;
    json_t *doc, *v;
    const int32_t other[] = {1, -1, 256, INT32_MAX, 15044};

    (void)state;
    build_observe(&f);
    doc = report_of(&f.r);
    v = at(doc, "output", "verify_session");
    assert_int_equal(json_object_size(v), 4);
    assert_true(json_is_false(json_object_get(v, "run")));
    assert_json_null(json_object_get(v, "token_ids"));
    assert_json_null(json_object_get(v, "token_fingerprint"));
    assert_json_null(json_object_get(v, "tokens_identical"));
    json_decref(doc);

    f.r.verified = true;
    f.r.verify_tokens = other;
    f.r.n_verify_tokens = N_TOKENS;
    f.r.verify_tokens_equal = false;
    doc = report_of(&f.r);
    v = at(doc, "output", "verify_session");
    assert_true(json_is_true(json_object_get(v, "run")));
    assert_int_equal(json_array_size(json_object_get(v, "token_ids")), N_TOKENS);
    assert_json_int(json_array_get(json_object_get(v, "token_ids"), 4), 15044);
    char fp[32];
    naive_fingerprint(other, N_TOKENS, fp);
    assert_string_equal(json_string_value(json_object_get(v, "token_fingerprint")), fp);
    assert_true(json_is_false(json_object_get(v, "tokens_identical")));
    json_decref(doc);
    rf_inventory_free(&f.inv);
}

static void make_tmpdir(char dir[PATH_MAX])
{
    const char *base = getenv("TMPDIR");

    snprintf(dir, PATH_MAX, "%s/rf-report-XXXXXX", base && *base ? base : "/tmp");
    assert_non_null(mkdtemp(dir));
}

static void test_write_file(void **state)
{
    char dir[PATH_MAX], path[PATH_MAX + 32], names[4][256];
    struct fixture f;
    json_error_t err;
    json_t *doc, *back;
    struct stat st;

    (void)state;
    build_observe(&f);
    doc = report_of(&f.r);
    make_tmpdir(dir);
    snprintf(path, sizeof(path), "%s/r.json", dir);
    assert_int_equal(rf_json_write_file(doc, path), 0);
    back = json_load_file(path, JSON_REJECT_DUPLICATES, &err);
    assert_non_null(back);
    assert_true(json_equal(doc, back));
    json_decref(back);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0644);
    /* Only the report: the temporary file was renamed, not left beside it. */
    assert_int_equal(test_list_dir(dir, names, 4), 1);
    assert_string_equal(names[0], "r.json");

    /* Rewriting replaces the file in place. */
    assert_int_equal(rf_json_write_file(doc, path), 0);
    assert_int_equal(test_list_dir(dir, names, 4), 1);
    assert_int_equal(unlink(path), 0);
    json_decref(doc);
    rf_inventory_free(&f.inv);
    assert_int_equal(rmdir(dir), 0);
}

static void test_write_file_failures(void **state)
{
    char dir[PATH_MAX], path[PATH_MAX + 32], names[4][256];
    json_t *doc = json_pack("{s:i}", "schema_version", 1);
    int rc;

    (void)state;
    assert_non_null(doc);
    make_tmpdir(dir);

    /* Under a directory that does not exist: the temporary file cannot be made. */
    snprintf(path, sizeof(path), "%s/missing/r.json", dir);
    rc = rf_json_write_file(doc, path);
    assert_int_equal(rc, -ENOENT);
    assert_int_equal(test_list_dir(dir, names, 4), 0);

    /* The target is an existing directory: rename fails after the temporary
     * file was written; it must be removed and the directory left alone. */
    snprintf(path, sizeof(path), "%s/target", dir);
    assert_int_equal(mkdir(path, 0755), 0);
    rc = rf_json_write_file(doc, path);
    assert_true(rc < 0);
    assert_true(rc == -EISDIR || rc == -ENOTEMPTY || rc == -EEXIST);
    assert_int_equal(test_list_dir(dir, names, 4), 1);
    assert_string_equal(names[0], "target");
    assert_int_equal(test_list_dir(path, names, 4), 0);

    assert_int_equal(rmdir(path), 0);
    assert_int_equal(rmdir(dir), 0);
    json_decref(doc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_top_level_keys),
        cmocka_unit_test(test_ledger_entries),
        cmocka_unit_test(test_reconciliation_signed),
        cmocka_unit_test(test_timing_absent_null),
        cmocka_unit_test(test_token_fingerprint),
        cmocka_unit_test(test_policy_off_absent_ledger),
        cmocka_unit_test(test_policy_and_admission),
        cmocka_unit_test(test_plan_section),
        cmocka_unit_test(test_application_sums),
        cmocka_unit_test(test_application_bounded),
        cmocka_unit_test(test_native_section),
        cmocka_unit_test(test_lifetime_section),
        cmocka_unit_test(test_verify_session),
        cmocka_unit_test(test_streaming_section),
        cmocka_unit_test(test_write_file),
        cmocka_unit_test(test_write_file_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
