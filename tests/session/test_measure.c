/*
 * Tests for rf_measure_sample and rf_measure_fill_ledger on fixture
 * sysroots: tests/data/sys/measure (pid "self": a full sample; pid 201:
 * the model only mapped r--p and a cgroup without memory.peak) and the
 * cgroup trees cg-v2-nopeak and cg-none. Expected figures are worked out
 * by hand from the fixture text in the comments; an absent figure must be
 * unknown (has_value false, null in the report), never zero.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cmocka.h>

#include <jansson.h>

#include "../test_skip.h"
#include "ramforge/core/inventory.h"
#include "ramforge/core/ledger.h"
#include "ramforge/core/report.h"
#include "ramforge/core/report_json.h"
#include "ramforge/session/measure.h"
#include "ramforge/sys/sys.h"

#include "../test_live_file.h"

#define ROOT(name) RF_TEST_DATA "/sys/" name
#define MEASURE ROOT("measure")
#define KIB 1024ull
#define RUN_SCOPE "/sys/fs/cgroup/ramforge.slice/run-1.scope"

/* The model file of the fixture: dev fd:01, inode 4242. */
static struct rf_mapping_meta model_mapping(uint32_t index, uint32_t major, uint32_t minor,
                                            uint64_t inode, bool validated)
{
    struct rf_mapping_meta m;

    memset(&m, 0, sizeof(m));
    m.index = index;
    snprintf(m.path, sizeof(m.path), "%s", "/models/tiny.gguf");
    m.file_size_bytes = 1344 * KIB;
    m.dev_major = major;
    m.dev_minor = minor;
    m.inode = inode;
    m.validated = validated;
    m.map_offset_bytes = 0;
    m.map_length_bytes = 1344 * KIB;
    return m;
}

/*
 * measure/proc/self:
 *   status  VmRSS 20480 kB, VmHWM 30720 kB
 *   smaps   fd:01 4242 r--s @0        Rss 1024 kB  Pss 512 kB   counted
 *           fd:01 4242 r--p @0x100000 Rss   64 kB  Pss  64 kB   private: not counted
 *           fd:01 4242 r--s @0x110000 Rss  256 kB  Pss 256 kB   counted
 *           fd:01 9999 r--s           Rss 2048 kB               another file
 *           fd:02 4242 r--s           Rss   32 kB               same inode, other device
 *   => mapping Rss (1024 + 256) kB = 1310720, Pss (512 + 256) kB = 786432
 *   cgroup  v2 /ramforge.slice/run-1.scope: current 52428800, peak 104857600,
 *           events high 3, max 1, oom 0, oom_kill 0
 */
static void test_sample_full(void **state)
{
    struct rf_mapping_meta m = model_mapping(0, 0xfd, 0x01, 4242, true);
    struct rf_residency_sample s;
    struct rfsys_cgroup_memory cg;

    (void)state;
    /* A fixture tree has no pagemap to ask PAGEMAP_SCAN: the sample falls back to smaps. */
    assert_int_equal(
        rf_measure_sample(MEASURE, "self", &m, 1, RF_MEASURE_MAPPING_RSS, "after_load", &s, &cg),
        0);
    assert_true(s.taken);
    assert_string_equal(s.label, "after_load");
    assert_true(s.has_process_rss);
    assert_int_equal(s.process_rss_bytes, 20480 * KIB);
    assert_true(s.has_process_rss_peak);
    assert_int_equal(s.process_rss_peak_bytes, 30720 * KIB);
    assert_true(s.has_mapping);
    assert_int_equal(s.mapping_rss_bytes, 1310720);
    assert_true(s.has_mapping_pss);
    assert_int_equal(s.mapping_pss_bytes, 786432);
    assert_string_equal(s.mapping_source, "smaps");
    assert_true(s.has_cgroup_current);
    assert_int_equal(s.cgroup_current_bytes, 52428800);
    assert_true(s.has_cgroup_peak);
    assert_int_equal(s.cgroup_peak_bytes, 104857600);
    assert_true(s.has_cgroup_events);
    assert_int_equal(s.cgroup_events_high, 3);
    assert_int_equal(s.cgroup_events_max, 1);
    assert_int_equal(s.cgroup_events_oom, 0);
    assert_int_equal(s.cgroup_events_oom_kill, 0);
    assert_int_equal(cg.version, RFSYS_CGROUP_V2);
    assert_string_equal(cg.current_source, RUN_SCOPE "/memory.current");
    assert_string_equal(cg.peak_source, RUN_SCOPE "/memory.peak");

    /* cg may be NULL: the same figures, no crash. */
    assert_int_equal(
        rf_measure_sample(MEASURE, "self", &m, 1, RF_MEASURE_MAPPING_SMAPS, "x", &s, NULL), 0);
    assert_int_equal(s.cgroup_peak_bytes, 104857600);
}

/* Two model files (a split model): each file's r--s mappings, summed. */
static void test_sample_two_files(void **state)
{
    struct rf_mapping_meta m[2] = {model_mapping(0, 0xfd, 0x01, 4242, true),
                                   model_mapping(1, 0xfd, 0x01, 9999, true)};
    struct rf_residency_sample s;

    (void)state;
    assert_int_equal(
        rf_measure_sample(MEASURE, "self", m, 2, RF_MEASURE_MAPPING_SMAPS, "l", &s, NULL), 0);
    assert_true(s.has_mapping);
    assert_int_equal(s.mapping_rss_bytes, (1024 + 256 + 2048) * KIB);
    assert_int_equal(s.mapping_pss_bytes, (512 + 256 + 2048) * KIB);
}

/* A model mapping smaps does not show as r--s: no figure, not a zero. */
static void test_sample_mapping_missing(void **state)
{
    struct rf_residency_sample s;
    struct rf_mapping_meta m;

    (void)state;
    /* pid 201 maps inode 4242 only r--p. */
    m = model_mapping(0, 0xfd, 0x01, 4242, true);
    assert_int_equal(
        rf_measure_sample(MEASURE, "201", &m, 1, RF_MEASURE_MAPPING_SMAPS, "l", &s, NULL), 0);
    assert_false(s.has_mapping);
    assert_int_equal(s.mapping_rss_bytes, 0);
    assert_true(s.has_process_rss);
    assert_int_equal(s.process_rss_bytes, 4096 * KIB);

    /* An inode smaps does not have at all. */
    m = model_mapping(0, 0xfd, 0x01, 5555, true);
    assert_int_equal(
        rf_measure_sample(MEASURE, "self", &m, 1, RF_MEASURE_MAPPING_SMAPS, "l", &s, NULL), 0);
    assert_false(s.has_mapping);

    /* One file found, the other not: the sum is not partial, it is absent. */
    struct rf_mapping_meta two[2] = {model_mapping(0, 0xfd, 0x01, 4242, true),
                                     model_mapping(1, 0xfd, 0x01, 5555, true)};
    assert_int_equal(
        rf_measure_sample(MEASURE, "self", two, 2, RF_MEASURE_MAPPING_SMAPS, "l", &s, NULL), 0);
    assert_false(s.has_mapping);
    assert_false(s.has_mapping_pss);
    assert_null(s.mapping_source);
    assert_int_equal(s.mapping_rss_bytes, 0);
    assert_int_equal(s.mapping_pss_bytes, 0);

    /* Not validated, or no mapping at all. */
    m = model_mapping(0, 0xfd, 0x01, 4242, false);
    assert_int_equal(
        rf_measure_sample(MEASURE, "self", &m, 1, RF_MEASURE_MAPPING_SMAPS, "l", &s, NULL), 0);
    assert_false(s.has_mapping);
    assert_int_equal(
        rf_measure_sample(MEASURE, "self", NULL, 0, RF_MEASURE_MAPPING_SMAPS, "l", &s, NULL), 0);
    assert_false(s.has_mapping);
}

/* Nothing readable: taken, every has_* false, the cgroup zeroed (NONE). */
static void test_sample_nothing(void **state)
{
    struct rf_mapping_meta m = model_mapping(0, 0xfd, 0x01, 4242, true);
    struct rf_residency_sample s;
    struct rfsys_cgroup_memory cg;

    (void)state;
    memset(&cg, 0x5a, sizeof(cg));
    assert_int_equal(rf_measure_sample(ROOT("no-such-tree"), "self", &m, 1,
                                       RF_MEASURE_MAPPING_SMAPS, "l", &s, &cg),
                     0);
    assert_true(s.taken);
    assert_false(s.has_process_rss);
    assert_false(s.has_process_rss_peak);
    assert_false(s.has_mapping);
    assert_false(s.has_cgroup_current);
    assert_false(s.has_cgroup_peak);
    assert_false(s.has_cgroup_events);
    assert_int_equal(cg.version, RFSYS_CGROUP_NONE);
    assert_string_equal(cg.current_source, "");
}

/* An inventory of one file-backed and one anonymous tensor on mapping m. */
static void build_inventory(struct rf_inventory *inv, const struct rf_mapping_meta *m)
{
    struct rf_tensor_meta t[2];

    memset(t, 0, sizeof(t));
    t[0].index = 0;
    snprintf(t[0].name, sizeof(t[0].name), "%s", "tok_embd.weight");
    snprintf(t[0].type_name, sizeof(t[0].type_name), "%s", "q8_0");
    t[0].mapping_index = 0;
    t[0].file_offset_bytes = 4096;
    t[0].logical_bytes = 10000;
    t[0].access = RF_ACCESS_FILE_BACKED;
    t[1] = t[0];
    t[1].index = 1;
    snprintf(t[1].name, sizeof(t[1].name), "%s", "blk.0.ffn_up.weight");
    t[1].file_offset_bytes = 16384;
    t[1].logical_bytes = 3000;
    t[1].access = RF_ACCESS_ANONYMOUS;
    rf_inventory_init(inv);
    assert_int_equal(rf_inventory_build(t, 2, m, 1, 4096, 1, inv), 0);
}

static const struct rf_ledger_entry *entry(const struct rf_ledger *l, enum rf_ledger_category c)
{
    return &l->entries[c];
}

static void assert_measured(const struct rf_ledger *l, enum rf_ledger_category c, uint64_t v,
                            const char *source)
{
    const struct rf_ledger_entry *e = entry(l, c);

    assert_true(e->has_value);
    assert_int_equal(e->value_bytes, v);
    assert_int_equal(e->provenance, RF_PROV_EXACT_MEASURED);
    assert_string_equal(e->source, source);
    assert_true(strlen(e->note) > 0);
}

static void assert_unknown(const struct rf_ledger *l, enum rf_ledger_category c,
                           const char *reason_part)
{
    const struct rf_ledger_entry *e = entry(l, c);

    assert_false(e->has_value);
    assert_int_equal(e->provenance, RF_PROV_UNKNOWN);
    assert_true(strlen(e->note) > 0);
    if (reason_part)
        assert_non_null(strstr(e->note, reason_part));
}

static void test_fill_ledger_full(void **state)
{
    struct rf_mapping_meta m = model_mapping(0, 0xfd, 0x01, 4242, true);
    struct rf_residency_sample s;
    struct rfsys_cgroup_memory cg;
    struct rf_inventory inv;
    struct rf_ledger l;

    (void)state;
    build_inventory(&inv, &m);
    assert_int_equal(rf_measure_sample(MEASURE, "self", inv.mappings, inv.n_mappings,
                                       RF_MEASURE_MAPPING_SMAPS, "l", &s, &cg),
                     0);
    rf_ledger_init(&l);
    rf_measure_fill_ledger(&l, &inv, RF_ACCESS_BASIS_GRAPH_PROBE, &s, &cg, "self");

    /* From the inventory: logical sizes, not residency. */
    assert_true(entry(&l, RF_LEDGER_FILE_BACKED_LOGICAL)->has_value);
    assert_int_equal(entry(&l, RF_LEDGER_FILE_BACKED_LOGICAL)->value_bytes, 13000);
    assert_int_equal(entry(&l, RF_LEDGER_FILE_BACKED_LOGICAL)->provenance, RF_PROV_NATIVE_LOGICAL);
    assert_true(entry(&l, RF_LEDGER_ANONYMOUS_WEIGHTS)->has_value);
    assert_int_equal(entry(&l, RF_LEDGER_ANONYMOUS_WEIGHTS)->value_bytes, 3000);
    assert_int_equal(entry(&l, RF_LEDGER_ANONYMOUS_WEIGHTS)->provenance, RF_PROV_NATIVE_LOGICAL);

    /* From the sample, each with its source file. */
    assert_measured(&l, RF_LEDGER_FILE_BACKED_RESIDENT, 1310720,
                    "/proc/self/smaps Rss of r--s mappings of dev fd:01 inode 4242");
    assert_measured(&l, RF_LEDGER_MAPPING_PSS, 786432,
                    "/proc/self/smaps Pss of r--s mappings of dev fd:01 inode 4242");
    assert_measured(&l, RF_LEDGER_PROCESS_RSS, 20971520, "/proc/self/status VmRSS");
    assert_measured(&l, RF_LEDGER_PROCESS_RSS_PEAK, 31457280, "/proc/self/status VmHWM");
    assert_measured(&l, RF_LEDGER_CGROUP_CURRENT, 52428800, RUN_SCOPE "/memory.current");
    assert_measured(&l, RF_LEDGER_CGROUP_PEAK, 104857600, RUN_SCOPE "/memory.peak");

    /* Nothing staged: a real zero with its provenance; the C API's gaps unknown. */
    assert_true(entry(&l, RF_LEDGER_STAGING_REQUESTED)->has_value);
    assert_int_equal(entry(&l, RF_LEDGER_STAGING_REQUESTED)->value_bytes, 0);
    assert_int_equal(entry(&l, RF_LEDGER_STAGING_REQUESTED)->provenance, RF_PROV_REQUESTED);
    assert_int_equal(entry(&l, RF_LEDGER_STAGING_ACCEPTED)->provenance, RF_PROV_NATIVE_ACCEPTED);
    assert_unknown(&l, RF_LEDGER_KV_CACHE, "KV-cache");
    assert_unknown(&l, RF_LEDGER_GRAPH_SCRATCH, NULL);
    assert_unknown(&l, RF_LEDGER_RUNTIME, NULL);

    /* Weights not classified: which are anonymous is unknown. */
    rf_ledger_init(&l);
    rf_measure_fill_ledger(&l, &inv, RF_ACCESS_BASIS_NONE, &s, &cg, "self");
    assert_unknown(&l, RF_LEDGER_ANONYMOUS_WEIGHTS, "not classified");
    rf_inventory_free(&inv);
}

/*
 * measure/proc/201: VmRSS 4096 kB, VmHWM 8192 kB, inode 4242 mapped only
 * r--p; cgroup /ramforge.slice/nopeak.scope has memory.current 8388608 and
 * no memory.peak.
 */
static void test_fill_ledger_mapping_and_peak_missing(void **state)
{
    struct rf_mapping_meta m = model_mapping(0, 0xfd, 0x01, 4242, true);
    struct rf_residency_sample s;
    struct rfsys_cgroup_memory cg;
    struct rf_reconciliation rc;
    struct rf_inventory inv;
    struct rf_ledger l;

    (void)state;
    build_inventory(&inv, &m);
    assert_int_equal(rf_measure_sample(MEASURE, "201", inv.mappings, inv.n_mappings,
                                       RF_MEASURE_MAPPING_SMAPS, "l", &s, &cg),
                     0);
    rf_ledger_init(&l);
    rf_measure_fill_ledger(&l, &inv, RF_ACCESS_BASIS_GRAPH_PROBE, &s, &cg, "201");

    assert_unknown(&l, RF_LEDGER_FILE_BACKED_RESIDENT, "not found in smaps");
    assert_unknown(&l, RF_LEDGER_MAPPING_PSS, "not found in smaps");
    assert_measured(&l, RF_LEDGER_PROCESS_RSS, 4096 * KIB, "/proc/201/status VmRSS");
    assert_measured(&l, RF_LEDGER_PROCESS_RSS_PEAK, 8192 * KIB, "/proc/201/status VmHWM");
    assert_measured(&l, RF_LEDGER_CGROUP_CURRENT, 8388608,
                    "/sys/fs/cgroup/ramforge.slice/nopeak.scope/memory.current");
    assert_unknown(&l, RF_LEDGER_CGROUP_PEAK, "memory.peak");

    /* Downstream: null in the reconciliation and in the report, not 0. */
    rf_ledger_reconcile(&l, true, inv.totals.mapped_virtual_bytes, &rc);
    assert_false(rc.mapped_resident_bytes.has_value);
    assert_false(rc.rss_minus_mapping_resident_bytes.has_value);
    assert_false(rc.cgroup_peak_bytes.has_value);

    struct rf_report r;
    json_t *doc = NULL, *res;

    memset(&r, 0, sizeof(r));
    r.policy = "observe";
    r.inventory = &inv;
    r.ledger = &l;
    r.reconciliation = &rc;
    r.samples = &s;
    r.n_samples = 1;
    assert_int_equal(rf_report_to_json(&r, &doc), 0);
    res = json_object_get(json_array_get(json_object_get(json_object_get(doc, "ledger"), "entries"),
                                         RF_LEDGER_FILE_BACKED_RESIDENT),
                          "value_bytes");
    assert_non_null(res);
    assert_true(json_is_null(res));
    res = json_object_get(
        json_array_get(json_object_get(json_object_get(doc, "residency"), "samples"), 0),
        "mapping_rss_bytes");
    assert_non_null(res);
    assert_true(json_is_null(res));
    json_decref(doc);
    rf_inventory_free(&inv);
}

/* The existing cgroup trees: v2 without memory.peak, and no memory controller. */
static void test_fill_ledger_cgroup_trees(void **state)
{
    struct rf_residency_sample s;
    struct rfsys_cgroup_memory cg;
    struct rf_ledger l;

    (void)state;
    assert_int_equal(rf_measure_sample(ROOT("cg-v2-nopeak"), "self", NULL, 0,
                                       RF_MEASURE_MAPPING_SMAPS, "l", &s, &cg),
                     0);
    rf_ledger_init(&l);
    rf_measure_fill_ledger(&l, NULL, RF_ACCESS_BASIS_NONE, &s, &cg, "self");
    assert_measured(&l, RF_LEDGER_CGROUP_CURRENT, 734003200,
                    "/sys/fs/cgroup/user.slice/user-1000.slice/session-2.scope/memory.current");
    assert_unknown(&l, RF_LEDGER_CGROUP_PEAK, "memory.peak");
    /* That tree has no status or smaps: unknown, with a reason. */
    assert_unknown(&l, RF_LEDGER_PROCESS_RSS, "VmRSS");
    assert_unknown(&l, RF_LEDGER_FILE_BACKED_RESIDENT, NULL);
    /* No inventory: the logical entries keep rf_ledger_init's unknowns. */
    assert_unknown(&l, RF_LEDGER_FILE_BACKED_LOGICAL, NULL);

    assert_int_equal(
        rf_measure_sample(ROOT("cg-none"), "self", NULL, 0, RF_MEASURE_MAPPING_SMAPS, "l", &s, &cg),
        0);
    assert_int_equal(cg.version, RFSYS_CGROUP_NONE);
    rf_ledger_init(&l);
    rf_measure_fill_ledger(&l, NULL, RF_ACCESS_BASIS_NONE, &s, &cg, "self");
    assert_unknown(&l, RF_LEDGER_CGROUP_CURRENT, "no cgroup memory controller");
    assert_unknown(&l, RF_LEDGER_CGROUP_PEAK, "no cgroup memory controller");

    /* cg NULL is allowed. */
    rf_ledger_init(&l);
    rf_measure_fill_ledger(&l, NULL, RF_ACCESS_BASIS_NONE, &s, NULL, "self");
    assert_unknown(&l, RF_LEDGER_CGROUP_CURRENT, NULL);
    assert_string_equal(entry(&l, RF_LEDGER_CGROUP_CURRENT)->source, "cgroup memory controller");
}

/* AnonymousWeights by classification basis: graph probe, placement, none. */
static void test_fill_ledger_access_basis(void **state)
{
    struct rf_mapping_meta m = model_mapping(0, 0xfd, 0x01, 4242, true);
    struct rf_residency_sample s;
    struct rf_inventory inv;
    struct rf_ledger l;

    (void)state;
    build_inventory(&inv, &m);
    memset(&s, 0, sizeof(s));
    rf_ledger_init(&l);
    rf_measure_fill_ledger(&l, &inv, RF_ACCESS_BASIS_PLACEMENT, &s, NULL, "self");
    const struct rf_ledger_entry *e = entry(&l, RF_LEDGER_ANONYMOUS_WEIGHTS);
    assert_true(e->has_value);
    assert_int_equal(e->value_bytes, 3000);
    assert_int_equal(e->provenance, RF_PROV_NATIVE_LOGICAL);
    assert_non_null(strstr(e->source, "placement"));

    rf_ledger_init(&l);
    rf_measure_fill_ledger(&l, &inv, RF_ACCESS_BASIS_GRAPH_PROBE, &s, NULL, "self");
    assert_non_null(strstr(entry(&l, RF_LEDGER_ANONYMOUS_WEIGHTS)->source, "graph probe"));

    rf_ledger_init(&l);
    rf_measure_fill_ledger(&l, &inv, RF_ACCESS_BASIS_NONE, &s, NULL, "self");
    assert_unknown(&l, RF_LEDGER_ANONYMOUS_WEIGHTS, "not classified");
    rf_inventory_free(&inv);
}

/*
 * A sample whose mapping figure came from PAGEMAP_SCAN: FileBackedResident
 * names that source, MappingPss is unknown with the reason, and the
 * report's sample has a null Pss with mapping_pss_reason.
 */
static void test_fill_ledger_pagemap_sample(void **state)
{
    struct rf_residency_sample s;
    struct rf_ledger l;
    struct rf_report r;
    json_t *doc = NULL;

    (void)state;
    memset(&s, 0, sizeof(s));
    s.taken = true;
    s.label = "after_load";
    s.has_mapping = true;
    s.mapping_rss_bytes = 7 * 4096;
    s.mapping_source = "pagemap_scan";
    rf_ledger_init(&l);
    rf_measure_fill_ledger(&l, NULL, RF_ACCESS_BASIS_NONE, &s, NULL, "self");
    assert_measured(&l, RF_LEDGER_FILE_BACKED_RESIDENT, 7 * 4096,
                    "/proc/self/pagemap PAGEMAP_SCAN present pages of r--s mappings of the "
                    "model file");
    assert_unknown(&l, RF_LEDGER_MAPPING_PSS, "did not read smaps");

    memset(&r, 0, sizeof(r));
    r.policy = "observe";
    r.samples = &s; /* the report reads s as it is at each call below */
    r.n_samples = 1;
    assert_int_equal(rf_report_to_json(&r, &doc), 0);
    json_t *js = json_array_get(json_object_get(json_object_get(doc, "residency"), "samples"), 0);
    assert_int_equal(json_integer_value(json_object_get(js, "mapping_rss_bytes")), 7 * 4096);
    assert_true(json_is_null(json_object_get(js, "mapping_pss_bytes")));
    assert_string_equal(json_string_value(json_object_get(js, "mapping_source")), "pagemap_scan");
    assert_non_null(strstr(json_string_value(json_object_get(js, "mapping_reason")), "smaps"));
    json_decref(doc);

    /* The same sample from smaps: both figures, no reason. */
    s.has_mapping_pss = true;
    s.mapping_pss_bytes = 5 * 4096;
    s.mapping_source = "smaps";
    assert_int_equal(rf_report_to_json(&r, &doc), 0);
    js = json_array_get(json_object_get(json_object_get(doc, "residency"), "samples"), 0);
    assert_int_equal(json_integer_value(json_object_get(js, "mapping_pss_bytes")), 5 * 4096);
    assert_null(json_object_get(js, "mapping_reason"));
    json_decref(doc);

    /* Not read by choice: both figures null, the reason says so, and the ledger too. */
    memset(&s, 0, sizeof(s));
    s.taken = true;
    s.label = "end_of_session";
    s.mapping_not_read = true;
    assert_int_equal(rf_report_to_json(&r, &doc), 0);
    js = json_array_get(json_object_get(json_object_get(doc, "residency"), "samples"), 0);
    assert_true(json_is_null(json_object_get(js, "mapping_rss_bytes")));
    assert_true(json_is_null(json_object_get(js, "mapping_source")));
    assert_non_null(strstr(json_string_value(json_object_get(js, "mapping_reason")), "not read"));
    json_decref(doc);
    rf_ledger_init(&l);
    rf_measure_fill_ledger(&l, NULL, RF_ACCESS_BASIS_NONE, &s, NULL, "self");
    assert_unknown(&l, RF_LEDGER_FILE_BACKED_RESIDENT, "did not read the mapping");
    assert_unknown(&l, RF_LEDGER_MAPPING_PSS, "did not read the mapping");
}

/*
 * Live: a file this test maps r--s. The PAGEMAP_SCAN sample and the smaps
 * sample of the same, unchanged mapping agree on the resident bytes; only
 * smaps gives Pss. rf_measure_sample_mapping replaces the mapping figures
 * of a sample and nothing else. Skipped on a kernel without PAGEMAP_SCAN.
 */
static void test_sample_live_pagemap(void **state)
{
    const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), n_pages = 64;
    struct rf_residency_sample a, b;
    struct stat st;
    int fd;

    (void)state;
    void *p = live_file_map(n_pages, &fd, &st);
    assert_true(p != MAP_FAILED);
    struct rf_mapping_meta m =
        model_mapping(0, major(st.st_dev), minor(st.st_dev), (uint64_t)st.st_ino, true);

    assert_int_equal(
        rf_measure_sample(NULL, "self", &m, 1, RF_MEASURE_MAPPING_RSS, "after_load", &a, NULL), 0);
    assert_true(a.has_mapping);
    if (strcmp(a.mapping_source, "smaps") == 0) {
        munmap(p, n_pages * page);
        close(fd);
        print_message("skip: the kernel has no PAGEMAP_SCAN (Linux 6.7+)\n");
        skip();
    }
    assert_string_equal(a.mapping_source, "pagemap_scan");
    assert_false(a.has_mapping_pss);
    assert_true(a.has_process_rss);

    b = a;
    assert_int_equal(rf_measure_sample_mapping(NULL, "self", &m, 1, RF_MEASURE_MAPPING_SMAPS, &b),
                     0);
    assert_string_equal(b.mapping_source, "smaps");
    assert_true(b.has_mapping_pss);
    assert_int_equal(b.mapping_rss_bytes, a.mapping_rss_bytes);
    assert_true(b.mapping_pss_bytes <= b.mapping_rss_bytes);
    assert_string_equal(b.label, "after_load");
    assert_int_equal(b.process_rss_bytes, a.process_rss_bytes);

    /* Not validated: absent from either source. */
    m.validated = false;
    assert_int_equal(rf_measure_sample_mapping(NULL, "self", &m, 1, RF_MEASURE_MAPPING_RSS, &b), 0);
    assert_false(b.has_mapping);
    assert_null(b.mapping_source);
    assert_false(b.mapping_not_read);

    /* Not read by choice: the process figures, no mapping figure, the flag set. */
    m.validated = true;
    assert_int_equal(
        rf_measure_sample(NULL, "self", &m, 1, RF_MEASURE_MAPPING_NONE, "end", &b, NULL), 0);
    assert_true(b.has_process_rss);
    assert_false(b.has_mapping);
    assert_false(b.has_mapping_pss);
    assert_null(b.mapping_source);
    assert_true(b.mapping_not_read);
    munmap(p, n_pages * page);
    close(fd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sample_full),
        cmocka_unit_test(test_sample_two_files),
        cmocka_unit_test(test_sample_mapping_missing),
        cmocka_unit_test(test_sample_nothing),
        cmocka_unit_test(test_fill_ledger_full),
        cmocka_unit_test(test_fill_ledger_mapping_and_peak_missing),
        cmocka_unit_test(test_fill_ledger_cgroup_trees),
        cmocka_unit_test(test_fill_ledger_access_basis),
        cmocka_unit_test(test_fill_ledger_pagemap_sample),
        cmocka_unit_test(test_sample_live_pagemap),
    };
    return rf_run_group_tests(tests, NULL, NULL);
}
