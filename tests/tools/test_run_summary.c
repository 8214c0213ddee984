/*
 * The human summary's limit line and the report's hard_limit section when
 * the memory controller exists but its usage file cannot be read (issue 20
 * fault 11), from fixture trees read as a run reads them:
 *
 *   cg-v2-unread   v2, memory.max 512 MiB, memory.current a directory (EISDIR)
 *   cg-v1-nousage  v1, memory.limit_in_bytes 1 GiB, no memory.usage_in_bytes
 *
 * Both used to say "no memory limit binds this run (cgroup none)". They
 * must name the controller, the file and why, and admission stays Unknown.
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

#include "ramforge/core/admission.h"
#include "ramforge/core/report.h"
#include "ramforge/core/report_json.h"
#include "ramforge/sys/sys.h"
#include "run/run.h"

#define ROOT(name) RF_TEST_DATA "/sys/" name
#define MIB UINT64_C(1048576)

static struct rfsys_cgroup_memory cg;  /* large: not on the stack */
static struct rfsys_cgroup_tree tree;  /* likewise */
static struct rf_admission_result res; /* likewise */

/* Reads the fixture as a run does, then checks the summary and the report. */
static void check_unread(const char *root, int want_ret, const char *version, const char *dir,
                         const char *file, const char *why)
{
    struct rf_admission_input in;
    struct rf_report r;
    char *text = NULL, want[1024];
    size_t len = 0;
    FILE *f;
    json_t *doc = NULL, *adm, *hard;

    assert_int_equal(rfsys_read_cgroup_memory(root, "self", &cg), want_ret);
    assert_int_not_equal(cg.version, RFSYS_CGROUP_NONE);
    assert_string_equal(cg.dir, dir);
    assert_false(cg.has_current);
    assert_int_not_equal(cg.error, 0);
    assert_string_equal(cg.error_source, file);

    assert_int_equal(rfsys_read_cgroup_tree(root, "self", &tree), 0);
    memset(&in, 0, sizeof(in));
    in.cgroups = tree.levels;
    in.n_cgroups = tree.n;
    in.host = &tree.host;
    in.process_rss = rf_admission_figure_of(100 * MIB, RF_PROV_EXACT_MEASURED, "test");
    in.kv_cache = rf_admission_figure_of(10 * MIB, RF_PROV_ESTIMATED, "test");
    assert_int_equal(rf_admission_decide(&in, &res), 0);
    assert_int_equal(res.outcome, RF_ADMIT_UNKNOWN);

    /* The report view as report_view.c fills it from the session's cgroup figures. */
    memset(&r, 0, sizeof(r));
    r.cgroup_version = version;
    r.cgroup_dir = cg.dir;
    r.cgroup_error = cg.error;
    r.cgroup_error_source = cg.error_source;
    r.admission = &res;

    f = open_memstream(&text, &len);
    assert_non_null(f);
    run_print_summary(f, &r);
    assert_int_equal(fclose(f), 0);
    snprintf(want, sizeof(want),
             "memory limit: unknown: cgroup %s %s has a memory controller, but %s could not be "
             "read (%s)",
             version, dir, file, why);
    if (!strstr(text, want))
        fail_msg("summary without \"%s\":\n%s", want, text);
    assert_null(strstr(text, "no memory limit binds"));
    assert_null(strstr(text, "cgroup none"));
    free(text);

    assert_int_equal(rf_report_to_json(&r, &doc), 0);
    adm = json_object_get(doc, "admission");
    assert_non_null(adm);
    hard = json_object_get(adm, "hard_limit");
    assert_string_equal(json_string_value(json_object_get(hard, "cgroup_version")), version);
    assert_string_equal(json_string_value(json_object_get(hard, "cgroup_dir")), dir);
    snprintf(want, sizeof(want), "%s: %s", file, why);
    assert_string_equal(json_string_value(json_object_get(hard, "read_error")), want);
    assert_non_null(strstr(json_string_value(json_object_get(adm, "reason")),
                           "is enforced but the usage of cgroup"));
    json_decref(doc);
}

static void test_v2_usage_unreadable(void **state)
{
    (void)state;
    check_unread(ROOT("cg-v2-unread"), -EISDIR, "v2", "/sys/fs/cgroup/kubepods.slice/pod 7/ctr",
                 "/sys/fs/cgroup/kubepods.slice/pod 7/ctr/memory.current", "Is a directory");
}

static void test_v1_usage_missing(void **state)
{
    (void)state;
    check_unread(ROOT("cg-v1-nousage"), 0, "v1", "/sys/fs/cgroup/cpu,memory/batch/job42",
                 "/sys/fs/cgroup/cpu,memory/batch/job42/memory.usage_in_bytes", "absent");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_v2_usage_unreadable),
        cmocka_unit_test(test_v1_usage_missing),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
