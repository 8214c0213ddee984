/*
 * Tests for the memory ledger: defaults, set/unknown, checked totals
 * (overflow and absent values are errors, never a saturated or zero sum)
 * and the signed reconciliation.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "ramforge/core/ledger.h"

static void test_init_defaults(void **state)
{
    static const char *const names[RF_LEDGER_N_CATEGORIES] = {
        "FileBackedLogical", "FileBackedResident", "AnonymousWeights", "MappingPss",
        "ProcessRss",        "ProcessRssPeak",     "CgroupCurrent",    "CgroupPeak",
        "StagingRequested",  "StagingAccepted",    "KvCache",          "GraphScratch",
        "Runtime",           "PromptCache",        "ExpertCache",
    };
    struct rf_ledger l;
    int c;

    (void)state;
    assert_int_equal(RF_LEDGER_N_CATEGORIES, 15);
    memset(&l, 0xa5, sizeof(l));
    rf_ledger_init(&l);
    for (c = 0; c < RF_LEDGER_N_CATEGORIES; c++) {
        const struct rf_ledger_entry *e = &l.entries[c];

        assert_int_equal(e->category, c);
        assert_false(e->has_value);
        assert_int_equal(e->provenance, RF_PROV_UNKNOWN);
        assert_true(strlen(e->note) > 0);
        assert_true(strlen(e->note) < sizeof(e->note));
        assert_true(strlen(e->source) < sizeof(e->source));
        assert_string_equal(rf_ledger_category_name((enum rf_ledger_category)c), names[c]);
        if (c == RF_LEDGER_KV_CACHE || c == RF_LEDGER_GRAPH_SCRATCH || c == RF_LEDGER_RUNTIME)
            assert_non_null(strstr(e->note, "not available from the pinned llama.cpp C API"));
        else if (c == RF_LEDGER_PROMPT_CACHE)
            assert_string_equal(e->note, RF_LEDGER_PROMPT_CACHE_NOT_OBSERVED);
        else if (c == RF_LEDGER_EXPERT_CACHE)
            assert_string_equal(e->note, RF_LEDGER_EXPERT_CACHE_NOT_RUN);
        else
            assert_string_equal(e->note, "not measured");
    }
    assert_null(rf_ledger_category_name(RF_LEDGER_N_CATEGORIES));
    assert_null(rf_ledger_category_name((enum rf_ledger_category) - 1));
}

static void test_provenance_names(void **state)
{
    (void)state;
    assert_string_equal(rf_provenance_name(RF_PROV_EXACT_MEASURED), "exact_measured");
    assert_string_equal(rf_provenance_name(RF_PROV_NATIVE_LOGICAL), "native_logical");
    assert_string_equal(rf_provenance_name(RF_PROV_ESTIMATED), "estimated");
    assert_string_equal(rf_provenance_name(RF_PROV_UNKNOWN), "unknown");
    assert_string_equal(rf_provenance_name(RF_PROV_REQUESTED), "requested");
    assert_string_equal(rf_provenance_name(RF_PROV_NATIVE_ACCEPTED), "native_accepted");
    assert_null(rf_provenance_name((enum rf_provenance)17));
}

static void test_set_and_unknown(void **state)
{
    struct rf_ledger l;
    char long_src[2000];

    (void)state;
    rf_ledger_init(&l);
    assert_int_equal(rf_ledger_set(&l, RF_LEDGER_PROCESS_RSS, 123456, RF_PROV_EXACT_MEASURED,
                                   "/proc/self/status VmRSS", NULL),
                     0);
    assert_true(l.entries[RF_LEDGER_PROCESS_RSS].has_value);
    assert_int_equal(l.entries[RF_LEDGER_PROCESS_RSS].value_bytes, 123456);
    assert_int_equal(l.entries[RF_LEDGER_PROCESS_RSS].provenance, RF_PROV_EXACT_MEASURED);
    assert_string_equal(l.entries[RF_LEDGER_PROCESS_RSS].source, "/proc/self/status VmRSS");
    assert_string_equal(l.entries[RF_LEDGER_PROCESS_RSS].note, "");

    /* Zero is a value, distinct from unknown. */
    assert_int_equal(rf_ledger_set(&l, RF_LEDGER_STAGING_ACCEPTED, 0, RF_PROV_NATIVE_ACCEPTED,
                                   "llama prefetch", "nothing accepted"),
                     0);
    assert_true(l.entries[RF_LEDGER_STAGING_ACCEPTED].has_value);
    assert_int_equal(l.entries[RF_LEDGER_STAGING_ACCEPTED].value_bytes, 0);
    assert_string_equal(l.entries[RF_LEDGER_STAGING_ACCEPTED].note, "nothing accepted");

    assert_int_equal(
        rf_ledger_set_unknown(&l, RF_LEDGER_PROCESS_RSS, "/proc/self/status", "VmRSS missing"), 0);
    assert_false(l.entries[RF_LEDGER_PROCESS_RSS].has_value);
    assert_int_equal(l.entries[RF_LEDGER_PROCESS_RSS].provenance, RF_PROV_UNKNOWN);
    assert_string_equal(l.entries[RF_LEDGER_PROCESS_RSS].note, "VmRSS missing");

    /* Bad arguments. */
    assert_int_equal(rf_ledger_set(&l, RF_LEDGER_PROCESS_RSS, 1, RF_PROV_UNKNOWN, "x", NULL),
                     -EINVAL);
    assert_int_equal(rf_ledger_set(&l, RF_LEDGER_N_CATEGORIES, 1, RF_PROV_ESTIMATED, "x", NULL),
                     -EINVAL);
    assert_int_equal(rf_ledger_set(&l, RF_LEDGER_PROCESS_RSS, 1, (enum rf_provenance)99, "x", NULL),
                     -EINVAL);
    assert_int_equal(rf_ledger_set_unknown(&l, (enum rf_ledger_category) - 1, "x", "y"), -EINVAL);
    assert_false(l.entries[RF_LEDGER_PROCESS_RSS].has_value); /* failed set changed nothing */

    /* Long strings are truncated, NUL-terminated. */
    memset(long_src, 'x', sizeof(long_src) - 1);
    long_src[sizeof(long_src) - 1] = '\0';
    assert_int_equal(
        rf_ledger_set(&l, RF_LEDGER_MAPPING_PSS, 7, RF_PROV_EXACT_MEASURED, long_src, long_src), 0);
    assert_int_equal(strlen(l.entries[RF_LEDGER_MAPPING_PSS].source), RF_LEDGER_SOURCE_MAX - 1);
    assert_int_equal(strlen(l.entries[RF_LEDGER_MAPPING_PSS].note), RF_LEDGER_NOTE_MAX - 1);
}

static void test_checked_total(void **state)
{
    struct rf_ledger l;
    uint64_t sum = 77;
    const enum rf_ledger_category two[] = {RF_LEDGER_FILE_BACKED_LOGICAL,
                                           RF_LEDGER_ANONYMOUS_WEIGHTS};
    const enum rf_ledger_category twice[] = {RF_LEDGER_FILE_BACKED_LOGICAL,
                                             RF_LEDGER_FILE_BACKED_LOGICAL};
    const enum rf_ledger_category with_kv[] = {RF_LEDGER_FILE_BACKED_LOGICAL, RF_LEDGER_KV_CACHE};
    const enum rf_ledger_category bad[] = {RF_LEDGER_FILE_BACKED_LOGICAL,
                                           (enum rf_ledger_category)40};

    (void)state;
    rf_ledger_init(&l);
    assert_int_equal(rf_ledger_set(&l, RF_LEDGER_FILE_BACKED_LOGICAL, 1000, RF_PROV_NATIVE_LOGICAL,
                                   "gguf", NULL),
                     0);
    assert_int_equal(
        rf_ledger_set(&l, RF_LEDGER_ANONYMOUS_WEIGHTS, 234, RF_PROV_NATIVE_LOGICAL, "repack", NULL),
        0);
    assert_int_equal(rf_ledger_checked_total(&l, two, 2, &sum), 0);
    assert_int_equal(sum, 1234);
    assert_int_equal(rf_ledger_checked_total(&l, twice, 2, &sum), 0);
    assert_int_equal(sum, 2000);
    assert_int_equal(rf_ledger_checked_total(&l, NULL, 0, &sum), 0);
    assert_int_equal(sum, 0);

    /* An unknown category is an error, not a zero. */
    sum = 77;
    assert_int_equal(rf_ledger_checked_total(&l, with_kv, 2, &sum), -ENODATA);
    assert_int_equal(sum, 77);
    assert_int_equal(rf_ledger_checked_total(&l, bad, 2, &sum), -EINVAL);

    /* UINT64_MAX + 1 overflows; no saturation. */
    assert_int_equal(rf_ledger_set(&l, RF_LEDGER_FILE_BACKED_LOGICAL, UINT64_MAX,
                                   RF_PROV_NATIVE_LOGICAL, "gguf", NULL),
                     0);
    assert_int_equal(
        rf_ledger_set(&l, RF_LEDGER_ANONYMOUS_WEIGHTS, 1, RF_PROV_NATIVE_LOGICAL, "repack", NULL),
        0);
    assert_int_equal(rf_ledger_checked_total(&l, two, 2, &sum), -EOVERFLOW);
    assert_int_equal(sum, 77);
    assert_int_equal(rf_ledger_checked_total(&l, two, 1, &sum), 0);
    assert_int_equal(sum, UINT64_MAX);
}

static void assert_recon(struct rf_recon_value v, bool has, int64_t value)
{
    assert_int_equal(v.has_value, has);
    if (has)
        assert_int_equal(v.value, value);
}

static void test_reconcile(void **state)
{
    struct rf_ledger l;
    struct rf_reconciliation r;

    (void)state;
    rf_ledger_init(&l);
    rf_ledger_reconcile(&l, false, 0, &r);
    assert_recon(r.mapped_virtual_bytes, false, 0);
    assert_recon(r.mapped_resident_bytes, false, 0);
    assert_recon(r.process_rss_bytes, false, 0);
    assert_recon(r.cgroup_current_bytes, false, 0);
    assert_recon(r.cgroup_peak_bytes, false, 0);
    assert_recon(r.rss_minus_mapping_resident_bytes, false, 0);
    assert_recon(r.cgroup_current_minus_rss_bytes, false, 0);

    /* RSS present, mapping resident absent: no difference. */
    rf_ledger_set(&l, RF_LEDGER_PROCESS_RSS, 500 << 20, RF_PROV_EXACT_MEASURED, "status", NULL);
    rf_ledger_reconcile(&l, true, 4096, &r);
    assert_recon(r.mapped_virtual_bytes, true, 4096);
    assert_recon(r.process_rss_bytes, true, 500 << 20);
    assert_recon(r.rss_minus_mapping_resident_bytes, false, 0);
    assert_recon(r.cgroup_current_minus_rss_bytes, false, 0);

    /* Both present: 500 MiB - 300 MiB; cgroup below RSS gives a negative figure. */
    rf_ledger_set(&l, RF_LEDGER_FILE_BACKED_RESIDENT, 300 << 20, RF_PROV_EXACT_MEASURED, "smaps",
                  NULL);
    rf_ledger_set(&l, RF_LEDGER_CGROUP_CURRENT, 450 << 20, RF_PROV_EXACT_MEASURED, "memory.current",
                  NULL);
    rf_ledger_set(&l, RF_LEDGER_CGROUP_PEAK, 900 << 20, RF_PROV_EXACT_MEASURED, "memory.peak",
                  NULL);
    rf_ledger_reconcile(&l, true, 4096, &r);
    assert_recon(r.mapped_resident_bytes, true, 300 << 20);
    assert_recon(r.cgroup_current_bytes, true, 450 << 20);
    assert_recon(r.cgroup_peak_bytes, true, 900 << 20);
    assert_recon(r.rss_minus_mapping_resident_bytes, true, 200 << 20);
    assert_recon(r.cgroup_current_minus_rss_bytes, true, -(50 << 20));

    /* A value above INT64_MAX is absent, and so is every difference using it. */
    rf_ledger_set(&l, RF_LEDGER_PROCESS_RSS, (uint64_t)INT64_MAX + 1, RF_PROV_EXACT_MEASURED,
                  "status", NULL);
    rf_ledger_reconcile(&l, true, UINT64_MAX, &r);
    assert_recon(r.mapped_virtual_bytes, false, 0);
    assert_recon(r.process_rss_bytes, false, 0);
    assert_recon(r.rss_minus_mapping_resident_bytes, false, 0);
    assert_recon(r.cgroup_current_minus_rss_bytes, false, 0);
    assert_recon(r.mapped_resident_bytes, true, 300 << 20);

    /* INT64_MAX itself fits; INT64_MAX - 0 and 0 - INT64_MAX both fit too. */
    rf_ledger_set(&l, RF_LEDGER_PROCESS_RSS, (uint64_t)INT64_MAX, RF_PROV_EXACT_MEASURED, "status",
                  NULL);
    rf_ledger_set(&l, RF_LEDGER_FILE_BACKED_RESIDENT, 0, RF_PROV_EXACT_MEASURED, "smaps", NULL);
    rf_ledger_set(&l, RF_LEDGER_CGROUP_CURRENT, 0, RF_PROV_EXACT_MEASURED, "memory.current", NULL);
    rf_ledger_reconcile(&l, false, 0, &r);
    assert_recon(r.rss_minus_mapping_resident_bytes, true, INT64_MAX);
    assert_recon(r.cgroup_current_minus_rss_bytes, true, -INT64_MAX);

    /* Unknown again after set_unknown. */
    rf_ledger_set_unknown(&l, RF_LEDGER_CGROUP_CURRENT, "memory.current", "no cgroup v2");
    rf_ledger_reconcile(&l, false, 0, &r);
    assert_recon(r.cgroup_current_bytes, false, 0);
    assert_recon(r.cgroup_current_minus_rss_bytes, false, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init_defaults),   cmocka_unit_test(test_provenance_names),
        cmocka_unit_test(test_set_and_unknown), cmocka_unit_test(test_checked_total),
        cmocka_unit_test(test_reconcile),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
