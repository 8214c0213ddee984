/*
 * Tests for ramforge/session/metrics.h on hand-built reports (no model): the
 * model labels, an unknown ledger value absent and flagged, families
 * without a figure left without samples, releases summed over the
 * attempted applications only, and the atomic file write. Expected lines
 * are written out by hand from the report built here.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "ramforge/session/metrics.h"

static void test_model_labels(void **state)
{
    (void)state;
    struct rf_prom p;
    char *buf = NULL;
    rf_prom_init(&p);
    rf_prom_sample(&p, "x");
    rf_metrics_model_labels(&p, "/d/a\"b\\c\nd");
    rf_prom_u64(&p, 1);
    rf_prom_sample(&p, "x");
    rf_metrics_model_labels(&p, NULL);
    rf_prom_u64(&p, 2);
    assert_int_equal(rf_prom_take(&p, &buf), 0);
    assert_string_equal(buf, "x{model=\"a\\\"b\\\\c\\nd\",path=\"/d/a\\\"b\\\\c\\nd\"} 1\n"
                             "x{model=\"\",path=\"\"} 2\n");
    free(buf);
}

static bool has_line(const char *text, const char *line)
{
    size_t n = strlen(line);
    for (const char *p = text; (p = strstr(p, line)); p++)
        if ((p == text || p[-1] == '\n') && p[n] == '\n')
            return true;
    return false;
}

static void test_report_text(void **state)
{
    (void)state;
    struct rf_ledger l;
    rf_ledger_init(&l);
    assert_int_equal(rf_ledger_set(&l, RF_LEDGER_FILE_BACKED_RESIDENT, 8192, RF_PROV_EXACT_MEASURED,
                                   "smaps", ""),
                     0);
    assert_int_equal(rf_ledger_set_unknown(&l, RF_LEDGER_KV_CACHE, "native", "no context"), 0);
    struct rf_residency_sample samples[2] = {
        {.taken = true,
         .label = "after_load",
         .has_mapping = true,
         .mapping_rss_bytes = 1,
         .has_process_rss = true,
         .process_rss_bytes = 2},
        {.taken = true,
         .label = "after_release",
         .has_mapping = true,
         .mapping_rss_bytes = 4096,
         .has_process_rss = false},
    };
    struct rf_report_application apps[3] = {
        {.boundary = "after_load", .attempted = false, .requested_bytes = 999},
        {.boundary = "after_session",
         .attempted = true,
         .requested_bytes = 12288,
         .accepted_bytes = 8192,
         .mapping_delta = {.has_value = true, .value = -8192}},
        {.boundary = "after_verify",
         .attempted = true,
         .requested_bytes = 4096,
         .accepted_bytes = 4096,
         .mapping_delta = {.has_value = true, .value = -4096},
         .rss_delta = {.has_value = true, .value = 100}},
    };
    struct rf_admission_result adm = {.outcome = RF_ADMIT_WARNING, .refused = false};
    struct rf_report op = {.ledger = &l, .samples = samples, .n_samples = 2, .admission = &adm};
    struct rf_report session = {.applications = apps, .n_applications = 3};
    char *t = NULL;

    assert_int_equal(rf_metrics_text(NULL, &session, "m", &t), -EINVAL);
    assert_int_equal(rf_metrics_text(&op, &session, "dir/m \"1\".gguf", &t), 0);
    const char *lines[] = {
        "ramforge_ledger_bytes{model=\"m \\\"1\\\".gguf\",path=\"dir/m "
        "\\\"1\\\".gguf\",category=\"FileBackedResident\","
        "provenance=\"exact_measured\"} 8192",
        "ramforge_ledger_unknown{model=\"m \\\"1\\\".gguf\",path=\"dir/m "
        "\\\"1\\\".gguf\",category=\"KvCache\"} 1",
        "ramforge_mapping_rss_bytes{model=\"m \\\"1\\\".gguf\",path=\"dir/m \\\"1\\\".gguf\"} 4096",
        "ramforge_operation_last_sample_info{model=\"m \\\"1\\\".gguf\",path=\"dir/m "
        "\\\"1\\\".gguf\","
        "sample=\"after_release\"} 1",
        "ramforge_operation_admission{model=\"m \\\"1\\\".gguf\",path=\"dir/m \\\"1\\\".gguf\","
        "outcome=\"admitted_with_warning\"} 1",
        "ramforge_operation_admission{model=\"m \\\"1\\\".gguf\",path=\"dir/m "
        "\\\"1\\\".gguf\",outcome=\"admitted\"} 0",
        "ramforge_operation_admission_refused{model=\"m \\\"1\\\".gguf\",path=\"dir/m "
        "\\\"1\\\".gguf\"} 0",
        "ramforge_release_applications_total{model=\"m \\\"1\\\".gguf\",path=\"dir/m "
        "\\\"1\\\".gguf\"} 2",
        "ramforge_release_requested_bytes_total{model=\"m \\\"1\\\".gguf\",path=\"dir/m "
        "\\\"1\\\".gguf\"} 16384",
        "ramforge_release_accepted_bytes_total{model=\"m \\\"1\\\".gguf\",path=\"dir/m "
        "\\\"1\\\".gguf\"} 12288",
        "ramforge_release_observed_delta_bytes{model=\"m \\\"1\\\".gguf\",path=\"dir/m "
        "\\\"1\\\".gguf\","
        "measure=\"mapping_rss\"} -12288",
        "ramforge_release_observed_delta_bytes{model=\"m \\\"1\\\".gguf\",path=\"dir/m "
        "\\\"1\\\".gguf\","
        "measure=\"process_rss\"} 100",
        "# TYPE ramforge_operation_staging_selected_bytes gauge",
    };
    for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++)
        if (!has_line(t, lines[i]))
            fail_msg("missing line: %s\n--- text:\n%s", lines[i], t);
    /* Unknown: no sample and no zero. No process RSS at the last sample, no staging plan, no
       cgroup delta measured. */
    assert_null(strstr(t, "category=\"KvCache\",provenance"));
    assert_null(strstr(t, "ramforge_process_rss_bytes{"));
    assert_null(strstr(t, "ramforge_operation_staging_selected_bytes{"));
    assert_null(strstr(t, "measure=\"cgroup_current\""));
    /* Every category is either a value or flagged unknown, never both. */
    size_t n_values = 0, n_unknown = 0;
    for (const char *p = t; (p = strstr(p, "\nramforge_ledger_")); p++)
        strncmp(p + 1, "ramforge_ledger_bytes{", 22) == 0 ? n_values++ : n_unknown++;
    assert_int_equal(n_values + n_unknown, RF_LEDGER_N_CATEGORIES);
    assert_int_equal(n_values, 1);
    free(t);
}

static void test_write_file(void **state)
{
    (void)state;
    char dir[] = "/tmp/rf-metrics-XXXXXX", path[64], bad[80];
    struct stat st;
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/m.prom", dir);
    assert_int_equal(rf_metrics_write_file("a 1\n", path), 0);
    assert_int_equal(rf_metrics_write_file("b 2\n", path), 0); /* replaced */
    FILE *f = fopen(path, "r");
    char buf[16] = {0};
    assert_non_null(f);
    assert_int_equal(fread(buf, 1, sizeof(buf) - 1, f), 4);
    fclose(f);
    assert_string_equal(buf, "b 2\n");
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0644);
    snprintf(bad, sizeof(bad), "%s/missing/m.prom", dir);
    assert_int_equal(rf_metrics_write_file("a 1\n", bad), -ENOENT);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(rmdir(dir), 0); /* nothing else left: no temporary file */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_labels),
        cmocka_unit_test(test_report_text),
        cmocka_unit_test(test_write_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
