/*
 * Tests for the operation report (rf_report_to_json) built from hand-made
 * structs, read back with jansson: every top-level key, the ledger in
 * category order with unknown entries null and explained, values above
 * INT64_MAX null, signed reconciliation differences, absent timers null,
 * the token fingerprint against an independent FNV-1a 64 and a pinned
 * literal, the absent ledger form of policy off; and rf_json_write_file,
 * which leaves neither a partial file nor its temporary file on failure.
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

#include "ramforge/inventory.h"
#include "ramforge/ledger.h"
#include "ramforge/report.h"
#include "ramforge/timing.h"

#define PAGE 4096

static const char *const top_keys[] = {
    "schema_version", "kind",     "ramforge_version", "llama_cpp_version",
    "model",          "policy",   "admission",        "plan",
    "ledger",         "staging",  "application",      "native",
    "lifetime",       "profile",  "residency",        "timing",
    "output",         "warnings",
};
#define N_TOP_KEYS (sizeof(top_keys) / sizeof(top_keys[0]))

/* The spec's names, in category order, written out independently of ledger.c. */
static const char *const category_names[RF_LEDGER_N_CATEGORIES] = {
    "FileBackedLogical", "FileBackedResident", "AnonymousWeights", "MappingPss",
    "ProcessRss",        "ProcessRssPeak",     "CgroupCurrent",    "CgroupPeak",
    "StagingRequested",  "StagingAccepted",    "KvCache",          "GraphScratch",
    "Runtime",
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
    struct rf_report r;
};

/*
 * One 40960-byte file mapped whole, 4 KiB pages:
 *   t0 [4096, 8192)    page {1}    file-backed
 *   t1 [8192, 14192)   pages {2,3} file-backed
 *   t2 [14192, 16192)  page {3}    anonymous copy (page 3 shared with t1)
 * mapped virtual: pages {1,2,3} = 12288 bytes.
 */
static void build_inventory(struct rf_inventory *inv)
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
        t[i].index = i;
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
    f->r.policy = "observe";
    f->r.inventory = &f->inv;
    f->r.ledger = &f->ledger;
    f->r.reconciliation = &f->rc;
    f->r.cgroup_version = "v2";
    f->r.cgroup_dir = "/sys/fs/cgroup/a";
    f->r.has_cgroup_limit = true;
    f->r.cgroup_limit_bytes = 1 << 20;
    f->r.samples[0].taken = true;
    f->r.samples[0].label = "after_load";
    f->r.samples[0].has_process_rss = true;
    f->r.samples[0].process_rss_bytes = 4096;
    f->r.samples[1].taken = false; /* not taken: left out of samples[] */
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
    f->r.warnings[0] = "a warning";
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
    assert_json_int(at(doc, "model", "inventory_generation"), 7);
    assert_null(at(doc, "model", "reason"));
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
    assert_int_equal(json_array_size(entries), 13);
    for (size_t c = 0; c < 13; c++) {
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
    f.r.samples[0].taken = false;
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

    /* No reason given: still a non-empty reason, never null. */
    f.r.not_built_reason = NULL;
    doc = report_of(&f.r);
    assert_reason(at(doc, "ledger", NULL));
    assert_reason(at(doc, "model", NULL));
    json_decref(doc);
    rf_inventory_free(&f.inv);
}

/* Counts the entries of dir other than "." and ".."; copies the first max names. */
static size_t list_dir(const char *dir, char names[][256], size_t max)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    size_t n = 0;

    assert_non_null(d);
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (n < max)
            snprintf(names[n], 256, "%s", de->d_name);
        n++;
    }
    closedir(d);
    return n;
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
    assert_int_equal(list_dir(dir, names, 4), 1);
    assert_string_equal(names[0], "r.json");

    /* Rewriting replaces the file in place. */
    assert_int_equal(rf_json_write_file(doc, path), 0);
    assert_int_equal(list_dir(dir, names, 4), 1);
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
    assert_int_equal(list_dir(dir, names, 4), 0);

    /* The target is an existing directory: rename fails after the temporary
     * file was written; it must be removed and the directory left alone. */
    snprintf(path, sizeof(path), "%s/target", dir);
    assert_int_equal(mkdir(path, 0755), 0);
    rc = rf_json_write_file(doc, path);
    assert_true(rc < 0);
    assert_true(rc == -EISDIR || rc == -ENOTEMPTY || rc == -EEXIST);
    assert_int_equal(list_dir(dir, names, 4), 1);
    assert_string_equal(names[0], "target");
    assert_int_equal(list_dir(path, names, 4), 0);

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
        cmocka_unit_test(test_write_file),
        cmocka_unit_test(test_write_file_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
