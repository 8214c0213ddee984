/*
 * Tests for rfsys_read_cgroup_memory on fixture sysroots under
 * tests/data/sys/cg-*: v2 with and without limits, v1 unlimited and
 * limited, hybrid, namespaces, no controller, hostile text, and limits
 * set on an ancestor cgroup (v1 memory.stat, v2 walk to the mount point).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "ramforge/sys/sys.h"

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

    /*
     * memory.current "12abc": the controller exists and says so (issue 20
     * fault 11: it was reported as none); the file and the error are kept.
     */
    assert_int_equal(rfsys_read_cgroup_memory(ROOT("cg-hostile"), "200", &cg), -EBADMSG);
    assert_int_equal(cg.version, RFSYS_CGROUP_V2);
    assert_string_equal(cg.dir, "/sys/fs/cgroup/badcur");
    assert_int_equal(cg.error, -EBADMSG);
    assert_string_equal(cg.error_source, "/sys/fs/cgroup/badcur/memory.current");
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

/*
 * This machine's case: v1 child whose memory.limit_in_bytes is the
 * sentinel, under a parent limited to 600 MiB. memory.stat's
 * hierarchical_memory_limit 629145600 (600 * 1048576) is the limit.
 */
static void test_v1_inherited(void **state)
{
    struct rfsys_cgroup_memory cg;
    const char *dir = "/sys/fs/cgroup/memory/process_api/f247a208c3d9588c19d34ff6f0019ba5";

    (void)state;
    assert_int_equal(rfsys_read_cgroup_memory(ROOT("cg-v1-inherited"), "self", &cg), 0);
    assert_int_equal(cg.version, RFSYS_CGROUP_V1);
    assert_string_equal(cg.dir, dir);
    assert_true(cg.has_current);
    assert_int_equal(cg.current_bytes, 4485120);
    assert_true(cg.has_peak);
    assert_int_equal(cg.peak_bytes, 9437184);
    assert_true(cg.has_limit);
    assert_false(cg.limit_unlimited);
    assert_int_equal(cg.limit_bytes, 629145600);
    assert_true(cg.limit_inherited);
    assert_string_equal(cg.limit_source,
                        "/sys/fs/cgroup/memory/process_api/f247a208c3d9588c19d34ff6f0019ba5"
                        "/memory.stat hierarchical_memory_limit");
    assert_false(cg.has_high);
    assert_string_equal(cg.high_source, "");
}

/* v1 edge cases of memory.stat in the same tree. */
static void test_v1_inherited_edges(void **state)
{
    struct rfsys_cgroup_memory cg;

    (void)state;
    /* hierarchical_memory_limit "6291456OO": hostile value. */
    assert_int_equal(rfsys_read_cgroup_memory(ROOT("cg-v1-inherited"), "300", &cg), -EBADMSG);
    assert_int_equal(cg.version, RFSYS_CGROUP_V1); /* found; its memory.stat is not readable */
    assert_int_equal(cg.error, -EBADMSG);
    assert_non_null(strstr(cg.error_source, "/memory.stat"));
    assert_false(cg.has_limit);
    /* The key without a value. */
    assert_int_equal(rfsys_read_cgroup_memory(ROOT("cg-v1-inherited"), "301", &cg), -EBADMSG);
    /* 23 digits: does not fit 64 bits. */
    assert_int_equal(rfsys_read_cgroup_memory(ROOT("cg-v1-inherited"), "304", &cg), -EBADMSG);

    /* No memory.limit_in_bytes; memory.stat says 9223372036854775807: unlimited, from it. */
    assert_int_equal(rfsys_read_cgroup_memory(ROOT("cg-v1-inherited"), "302", &cg), 0);
    assert_int_equal(cg.version, RFSYS_CGROUP_V1);
    assert_true(cg.has_limit);
    assert_true(cg.limit_unlimited);
    assert_int_equal(cg.limit_bytes, 0);
    assert_true(cg.limit_inherited);
    assert_string_equal(cg.limit_source, "/sys/fs/cgroup/memory/process_api/statonly/memory.stat "
                                         "hierarchical_memory_limit");

    /* No memory.stat: the own limit (1 MiB) alone, as before. */
    assert_int_equal(rfsys_read_cgroup_memory(ROOT("cg-v1-inherited"), "303", &cg), 0);
    assert_true(cg.has_limit);
    assert_false(cg.limit_unlimited);
    assert_int_equal(cg.limit_bytes, 1048576);
    assert_false(cg.limit_inherited);
    assert_string_equal(cg.limit_source,
                        "/sys/fs/cgroup/memory/process_api/nostat/memory.limit_in_bytes");
    assert_false(cg.has_current);
}

/*
 * Own limit 268435456 below hierarchical_memory_limit 536870912 (the
 * kernel's figure includes the own limit, so this is a limit changed
 * between the two reads): the lower, own, value wins.
 */
static void test_v1_own_lower(void **state)
{
    struct rfsys_cgroup_memory cg;

    (void)state;
    assert_int_equal(rfsys_read_cgroup_memory(ROOT("cg-v1-own-lower"), "self", &cg), 0);
    assert_int_equal(cg.version, RFSYS_CGROUP_V1);
    assert_string_equal(cg.dir, "/sys/fs/cgroup/memory/batch/job7");
    assert_int_equal(cg.current_bytes, 104857600);
    assert_int_equal(cg.peak_bytes, 134217728);
    assert_true(cg.has_limit);
    assert_false(cg.limit_unlimited);
    assert_int_equal(cg.limit_bytes, 268435456);
    assert_false(cg.limit_inherited);
    assert_string_equal(cg.limit_source, "/sys/fs/cgroup/memory/batch/job7/memory.limit_in_bytes");
}

/*
 * v2 a/b/c: c and a say "max", b has memory.max 1073741824 and memory.high
 * 939524096; both come from b. /sys/fs/memory.{max,high} (4096, above the
 * mount point) must not be read.
 */
static void test_v2_nested(void **state)
{
    struct rfsys_cgroup_memory cg;

    (void)state;
    assert_int_equal(rfsys_read_cgroup_memory(ROOT("cg-v2-nested"), "self", &cg), 0);
    assert_int_equal(cg.version, RFSYS_CGROUP_V2);
    assert_string_equal(cg.dir, "/sys/fs/cgroup/a/b/c");
    assert_true(cg.has_current);
    assert_int_equal(cg.current_bytes, 314572800);
    assert_string_equal(cg.current_source, "/sys/fs/cgroup/a/b/c/memory.current");
    assert_true(cg.has_peak);
    assert_int_equal(cg.peak_bytes, 335544320);
    assert_true(cg.has_limit);
    assert_false(cg.limit_unlimited);
    assert_int_equal(cg.limit_bytes, 1073741824);
    assert_true(cg.limit_inherited);
    assert_string_equal(cg.limit_source, "/sys/fs/cgroup/a/b/memory.max");
    assert_true(cg.has_high);
    assert_false(cg.high_unlimited);
    assert_int_equal(cg.high_bytes, 939524096);
    assert_true(cg.high_inherited);
    assert_string_equal(cg.high_source, "/sys/fs/cgroup/a/b/memory.high");
    assert_true(cg.has_events);
}

/* v2 ancestors that cannot be read, missing own files, and ties. */
static void test_v2_nested_edges(void **state)
{
    struct rfsys_cgroup_memory cg;

    (void)state;
    /* x/memory.max "12abc" and x/memory.high a directory: no limit there. */
    assert_int_equal(rfsys_read_cgroup_memory(ROOT("cg-v2-nested"), "310", &cg), 0);
    assert_string_equal(cg.dir, "/sys/fs/cgroup/x/y");
    assert_true(cg.has_limit);
    assert_int_equal(cg.limit_bytes, 2147483648);
    assert_false(cg.limit_inherited);
    assert_string_equal(cg.limit_source, "/sys/fs/cgroup/x/y/memory.max");
    assert_true(cg.has_high);
    assert_true(cg.high_unlimited);
    assert_int_equal(cg.high_bytes, 0);
    assert_false(cg.high_inherited);
    assert_string_equal(cg.high_source, "/sys/fs/cgroup/x/y/memory.high");

    /* q has neither file: p's memory.max 3221225472 and memory.high "max". */
    assert_int_equal(rfsys_read_cgroup_memory(ROOT("cg-v2-nested"), "311", &cg), 0);
    assert_string_equal(cg.dir, "/sys/fs/cgroup/p/q");
    assert_true(cg.has_limit);
    assert_false(cg.limit_unlimited);
    assert_int_equal(cg.limit_bytes, 3221225472);
    assert_true(cg.limit_inherited);
    assert_string_equal(cg.limit_source, "/sys/fs/cgroup/p/memory.max");
    assert_true(cg.has_high);
    assert_true(cg.high_unlimited);
    assert_true(cg.high_inherited);
    assert_string_equal(cg.high_source, "/sys/fs/cgroup/p/memory.high");

    /* t and t/u both 1073741824: the nearer (own) file is the source. */
    assert_int_equal(rfsys_read_cgroup_memory(ROOT("cg-v2-nested"), "312", &cg), 0);
    assert_int_equal(cg.limit_bytes, 1073741824);
    assert_false(cg.limit_inherited);
    assert_string_equal(cg.limit_source, "/sys/fs/cgroup/t/u/memory.max");
    assert_false(cg.has_high);
    assert_string_equal(cg.high_source, "");
}

/*
 * v2 kubepods.slice 4294967296 > pod9 2147483648 > ctr 536870912: the
 * leaf's memory.max binds. memory.high: ctr "max", pod9 1610612736,
 * kubepods.slice "max": pod9's.
 */
static void test_v2_leaf_lower(void **state)
{
    struct rfsys_cgroup_memory cg;

    (void)state;
    assert_int_equal(rfsys_read_cgroup_memory(ROOT("cg-v2-leaf-lower"), "self", &cg), 0);
    assert_int_equal(cg.version, RFSYS_CGROUP_V2);
    assert_string_equal(cg.dir, "/sys/fs/cgroup/kubepods.slice/pod9/ctr");
    assert_int_equal(cg.current_bytes, 104857600);
    assert_true(cg.has_limit);
    assert_false(cg.limit_unlimited);
    assert_int_equal(cg.limit_bytes, 536870912);
    assert_false(cg.limit_inherited);
    assert_string_equal(cg.limit_source, "/sys/fs/cgroup/kubepods.slice/pod9/ctr/memory.max");
    assert_true(cg.has_high);
    assert_false(cg.high_unlimited);
    assert_int_equal(cg.high_bytes, 1610612736);
    assert_true(cg.high_inherited);
    assert_string_equal(cg.high_source, "/sys/fs/cgroup/kubepods.slice/pod9/memory.high");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_v2_no_peak),       cmocka_unit_test(test_v2_limit),
        cmocka_unit_test(test_v2_escaped_mount), cmocka_unit_test(test_v2_namespace),
        cmocka_unit_test(test_v1_unlimited),     cmocka_unit_test(test_v1_limit),
        cmocka_unit_test(test_v1_namespace),     cmocka_unit_test(test_hybrid),
        cmocka_unit_test(test_no_controller),    cmocka_unit_test(test_hostile),
        cmocka_unit_test(test_v1_inherited),     cmocka_unit_test(test_v1_inherited_edges),
        cmocka_unit_test(test_v1_own_lower),     cmocka_unit_test(test_v2_nested),
        cmocka_unit_test(test_v2_nested_edges),  cmocka_unit_test(test_v2_leaf_lower),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
