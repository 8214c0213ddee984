/*
 * Tests for rfsys_read_cgroup_memory on fixture sysroots under
 * tests/data/sys/cg-*: v2 with and without limits, v1 unlimited and
 * limited, hybrid, namespaces, no controller, hostile text.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "ramforge/sys.h"

#define ROOT(name) RF_TEST_DATA "/sys/" name

static void test_v2_no_peak(void **state)
{
    struct rfsys_cgroup_memory cg;
    const char *dir = "/sys/fs/cgroup/user.slice/user-1000.slice/session-2.scope";

    (void)state;
    assert_int_equal(rfsys_read_cgroup_memory(ROOT("cg-v2-nopeak"), "self", &cg), 0);
    assert_int_equal(cg.version, RFSYS_CGROUP_V2);
    assert_string_equal(cg.dir, dir);
    assert_true(cg.has_current);
    assert_int_equal(cg.current_bytes, 734003200);
    assert_string_equal(cg.current_source,
                        "/sys/fs/cgroup/user.slice/user-1000.slice/session-2.scope/memory.current");
    assert_false(cg.has_peak);
    assert_string_equal(cg.peak_source, "");
    assert_true(cg.has_limit);
    assert_true(cg.limit_unlimited);
    assert_int_equal(cg.limit_bytes, 0);
    assert_string_equal(cg.limit_source,
                        "/sys/fs/cgroup/user.slice/user-1000.slice/session-2.scope/memory.max");
    assert_true(cg.has_high);
    assert_true(cg.high_unlimited);
    assert_int_equal(cg.high_bytes, 0);
    assert_true(cg.has_events);
    assert_int_equal(cg.events_low, 0);
    assert_int_equal(cg.events_high, 0);
    assert_int_equal(cg.events_max, 0);
    assert_int_equal(cg.events_oom, 0);
    assert_int_equal(cg.events_oom_kill, 0);
}

static void test_v2_limit(void **state)
{
    struct rfsys_cgroup_memory cg;

    (void)state;
    assert_int_equal(rfsys_read_cgroup_memory(ROOT("cg-v2-limit"), "self", &cg), 0);
    assert_int_equal(cg.version, RFSYS_CGROUP_V2);
    assert_string_equal(cg.dir, "/sys/fs/cgroup/kubepods.slice/pod 7/ctr");
    assert_true(cg.has_current);
    assert_int_equal(cg.current_bytes, 104857600);
    assert_true(cg.has_peak);
    assert_int_equal(cg.peak_bytes, 209715200);
    assert_string_equal(cg.peak_source, "/sys/fs/cgroup/kubepods.slice/pod 7/ctr/memory.peak");
    assert_true(cg.has_limit);
    assert_false(cg.limit_unlimited);
    assert_int_equal(cg.limit_bytes, 536870912);
    assert_true(cg.has_high);
    assert_false(cg.high_unlimited);
    assert_int_equal(cg.high_bytes, 402653184);
    /* "low 0\nhigh 17\nmax 4\noom 2\noom_kill 1\noom_group_kill 0", no final newline */
    assert_true(cg.has_events);
    assert_int_equal(cg.events_low, 0);
    assert_int_equal(cg.events_high, 17);
    assert_int_equal(cg.events_max, 4);
    assert_int_equal(cg.events_oom, 2);
    assert_int_equal(cg.events_oom_kill, 1);
}

/* Mount point "/mnt/cgroup\040root"; only memory.current, without newline. */
static void test_v2_escaped_mount(void **state)
{
    struct rfsys_cgroup_memory cg;

    (void)state;
    assert_int_equal(rfsys_read_cgroup_memory(ROOT("cg-v2-escaped"), "self", &cg), 0);
    assert_int_equal(cg.version, RFSYS_CGROUP_V2);
    assert_string_equal(cg.dir, "/mnt/cgroup root/job");
    assert_true(cg.has_current);
    assert_int_equal(cg.current_bytes, 4096);
    assert_string_equal(cg.current_source, "/mnt/cgroup root/job/memory.current");
    assert_false(cg.has_peak);
    assert_false(cg.has_limit);
    assert_string_equal(cg.limit_source, "");
    assert_false(cg.has_high);
    assert_false(cg.has_events);
}

/* The cgroup's directory is not visible: the mount point is used. */
static void test_v2_namespace(void **state)
{
    struct rfsys_cgroup_memory cg;

    (void)state;
    assert_int_equal(rfsys_read_cgroup_memory(ROOT("cg-v2-ns"), "self", &cg), 0);
    assert_int_equal(cg.version, RFSYS_CGROUP_V2);
    assert_string_equal(cg.dir, "/sys/fs/cgroup");
    assert_true(cg.has_current);
    assert_int_equal(cg.current_bytes, 52428800);
    assert_string_equal(cg.current_source, "/sys/fs/cgroup/memory.current");
    assert_true(cg.has_limit);
    assert_false(cg.limit_unlimited);
    assert_int_equal(cg.limit_bytes, 1073741824);
    assert_false(cg.has_peak);
    assert_false(cg.has_high);
    assert_false(cg.has_events);
}

static void test_v1_unlimited(void **state)
{
    struct rfsys_cgroup_memory cg;

    (void)state;
    assert_int_equal(rfsys_read_cgroup_memory(ROOT("cg-v1-unlimited"), "self", &cg), 0);
    assert_int_equal(cg.version, RFSYS_CGROUP_V1);
    assert_string_equal(cg.dir, "/sys/fs/cgroup/memory/docker/3f2a9c");
    assert_true(cg.has_current);
    assert_int_equal(cg.current_bytes, 1073741824);
    assert_string_equal(cg.current_source,
                        "/sys/fs/cgroup/memory/docker/3f2a9c/memory.usage_in_bytes");
    assert_true(cg.has_peak);
    assert_int_equal(cg.peak_bytes, 1610612736);
    assert_string_equal(cg.peak_source,
                        "/sys/fs/cgroup/memory/docker/3f2a9c/memory.max_usage_in_bytes");
    assert_true(cg.has_limit);
    assert_true(cg.limit_unlimited);
    assert_int_equal(cg.limit_bytes, 0);
    assert_string_equal(cg.limit_source,
                        "/sys/fs/cgroup/memory/docker/3f2a9c/memory.limit_in_bytes");
    assert_false(cg.has_high);
    assert_false(cg.has_events);
}

/* memory co-mounted with cpu; a "name=memory" hierarchy is not the controller. */
static void test_v1_limit(void **state)
{
    struct rfsys_cgroup_memory cg;

    (void)state;
    assert_int_equal(rfsys_read_cgroup_memory(ROOT("cg-v1-limit"), "self", &cg), 0);
    assert_int_equal(cg.version, RFSYS_CGROUP_V1);
    assert_string_equal(cg.dir, "/sys/fs/cgroup/cpu,memory/batch/job42");
    assert_true(cg.has_current);
    assert_int_equal(cg.current_bytes, 268435456);
    assert_true(cg.has_peak);
    assert_int_equal(cg.peak_bytes, 536870912);
    assert_true(cg.has_limit);
    assert_false(cg.limit_unlimited);
    assert_int_equal(cg.limit_bytes, 1073741824);
}

/* Mount rooted at the cgroup (docker without cgroupns); limit LONG_MAX. */
static void test_v1_namespace(void **state)
{
    struct rfsys_cgroup_memory cg;

    (void)state;
    assert_int_equal(rfsys_read_cgroup_memory(ROOT("cg-v1-ns"), "self", &cg), 0);
    assert_int_equal(cg.version, RFSYS_CGROUP_V1);
    assert_string_equal(cg.dir, "/sys/fs/cgroup/memory");
    assert_true(cg.has_current);
    assert_int_equal(cg.current_bytes, 33554432);
    assert_false(cg.has_peak); /* no memory.max_usage_in_bytes in the fixture */
    assert_true(cg.has_limit);
    assert_true(cg.limit_unlimited); /* 9223372036854775807 >= the sentinel */
    assert_int_equal(cg.limit_bytes, 0);
}

/* Like the build machine: v1 memory wins over v2 (which has a decoy memory.current). */
static void test_hybrid(void **state)
{
    struct rfsys_cgroup_memory cg;

    (void)state;
    assert_int_equal(rfsys_read_cgroup_memory(ROOT("cg-hybrid"), "self", &cg), 0);
    assert_int_equal(cg.version, RFSYS_CGROUP_V1);
    assert_string_equal(cg.dir,
                        "/sys/fs/cgroup/memory/process_api/1433dffd71d0a03273213ec1fa823e87");
    assert_true(cg.has_current);
    assert_int_equal(cg.current_bytes, 661250048);
    assert_true(cg.has_peak);
    assert_int_equal(cg.peak_bytes, 2273177600);
    assert_true(cg.has_limit);
    assert_false(cg.limit_unlimited);
    assert_int_equal(cg.limit_bytes, 8589934592);
    assert_false(cg.has_events);
}

static void test_no_controller(void **state)
{
    struct rfsys_cgroup_memory cg;

    (void)state;
    assert_int_equal(rfsys_read_cgroup_memory(ROOT("cg-none"), "self", &cg), 0);
    assert_int_equal(cg.version, RFSYS_CGROUP_NONE);
    assert_string_equal(cg.dir, "");
    assert_false(cg.has_current);
    assert_false(cg.has_peak);
    assert_false(cg.has_limit);
    assert_false(cg.has_events);
}

static void test_hostile(void **state)
{
    struct rfsys_cgroup_memory cg;

    (void)state;
    /* Garbage cgroup lines and broken mountinfo lines are skipped. */
    assert_int_equal(rfsys_read_cgroup_memory(ROOT("cg-hostile"), "self", &cg), 0);
    assert_int_equal(cg.version, RFSYS_CGROUP_V2);
    assert_string_equal(cg.dir, "/sys/fs/cgroup/ok");
    assert_int_equal(cg.current_bytes, 8192);
    assert_true(cg.limit_unlimited);

    /* memory.current "12abc" */
    assert_int_equal(rfsys_read_cgroup_memory(ROOT("cg-hostile"), "200", &cg), -EBADMSG);
    assert_int_equal(cg.version, RFSYS_CGROUP_NONE);
    assert_false(cg.has_current);
    /* memory.max with 23 digits */
    assert_int_equal(rfsys_read_cgroup_memory(ROOT("cg-hostile"), "201", &cg), -EBADMSG);
    /* memory.events "oom_kill x" */
    assert_int_equal(rfsys_read_cgroup_memory(ROOT("cg-hostile"), "202", &cg), -EBADMSG);

    /* "0::/../../ok" never leaves the mount: the mount point is used. */
    assert_int_equal(rfsys_read_cgroup_memory(ROOT("cg-hostile"), "203", &cg), 0);
    assert_int_equal(cg.version, RFSYS_CGROUP_V2);
    assert_string_equal(cg.dir, "/sys/fs/cgroup");
    assert_int_equal(cg.current_bytes, 1);

    /* No mountinfo: no controller to find. */
    assert_int_equal(rfsys_read_cgroup_memory(ROOT("cg-hostile"), "204", &cg), 0);
    assert_int_equal(cg.version, RFSYS_CGROUP_NONE);

    /* No /proc/PID/cgroup. */
    assert_int_equal(rfsys_read_cgroup_memory(ROOT("cg-hostile"), "999", &cg), -ENOENT);
    assert_int_equal(rfsys_read_cgroup_memory(ROOT("cg-hostile"), "self/..", &cg), -EINVAL);
    assert_int_equal(rfsys_read_cgroup_memory(ROOT("cg-hostile"), "self", NULL), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_v2_no_peak),       cmocka_unit_test(test_v2_limit),
        cmocka_unit_test(test_v2_escaped_mount), cmocka_unit_test(test_v2_namespace),
        cmocka_unit_test(test_v1_unlimited),     cmocka_unit_test(test_v1_limit),
        cmocka_unit_test(test_v1_namespace),     cmocka_unit_test(test_hybrid),
        cmocka_unit_test(test_no_controller),    cmocka_unit_test(test_hostile),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
