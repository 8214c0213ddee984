/*
 * Tests for rfsys_read_cgroup_tree on fixture sysroots: a v1 and a v2
 * hierarchy with a limited parent, a sibling holding memory and the run in
 * another child (tests/data/sys/cg-v1-tree, cg-v2-tree); a garbled and a
 * missing usage file (the limit is kept); a hierarchy deeper than
 * RF_CGROUP_MAX_LEVELS; and the kernel's verdict between a tree read
 * before and one read after a run (cg-v*-tree-after: only counters differ).
 *
 * Fixture figures (MiB unless said):
 *   v1 /sys/fs/cgroup/memory              sentinel limit, usage 8192, total_inactive_file 2048
 *      pod      limit 1536, usage 1400, total_inactive_file 100 (inactive_file 1: not it),
 *               failcnt 3 -> 250 after, oom_kill 1
 *      pod/sibling  usage 900          pod/run  usage 400, total_inactive_file 50
 *      pod/garbled  limit 1024, usage "12abc"   pod/nousage  limit 1024, no usage file
 *   v2 /sys/fs/cgroup (root: memory.stat only)  kubepods.slice  max, usage 3072
 *      pod1     max 1024, usage 900, inactive_file 200, events max 12 -> 40, oom 1 -> 2,
 *               oom_kill 1 -> 2
 *      pod1/ctr-sibling  usage 600
 *      pod1/ctr-run      max "max", high 700, usage 300, inactive_file 100, events high 5 -> 9
 *      pod1/ctr-garbled  max 512, usage "garbage", inactive_file "x"
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
#define MIB UINT64_C(1048576)
#define V1 "/sys/fs/cgroup/memory"
#define V2 "/sys/fs/cgroup/kubepods.slice"

static struct rfsys_cgroup_tree tree, after; /* 100 KiB each: not on the stack */

static void assert_figure(const struct rf_cgroup_figure *f, uint64_t bytes, const char *source)
{
    assert_true(f->has);
    assert_false(f->unlimited);
    assert_int_equal(f->error, 0);
    assert_int_equal(f->bytes, bytes);
    assert_string_equal(f->source, source);
}

static void test_v1_tree(void **state)
{
    const struct rf_cgroup_level *run, *pod, *top;

    (void)state;
    assert_int_equal(rfsys_read_cgroup_tree(ROOT("cg-v1-tree"), "self", &tree), 0);
    assert_int_equal(tree.version, RFSYS_CGROUP_V1);
    assert_string_equal(tree.mount_point, V1);
    assert_int_equal(tree.n, 3);
    assert_false(tree.truncated);
    run = &tree.levels[0];
    pod = &tree.levels[1];
    top = &tree.levels[2];
    assert_string_equal(run->dir, V1 "/pod/run");
    assert_string_equal(pod->dir, V1 "/pod");
    assert_string_equal(top->dir, V1);

    /* The run's own limit is the sentinel: no limit there. */
    assert_true(run->limit.has);
    assert_true(run->limit.unlimited);
    assert_int_equal(run->limit.bytes, 0);
    assert_string_equal(run->limit.source, V1 "/pod/run/memory.limit_in_bytes");
    assert_false(run->high.has); /* v1 has no memory.high */
    assert_int_equal(run->high.error, -ENOENT);
    assert_figure(&run->usage, 400 * MIB, V1 "/pod/run/memory.usage_in_bytes");
    assert_figure(&run->inactive_file, 50 * MIB, V1 "/pod/run/memory.stat total_inactive_file");
    assert_true(run->counters.has_failcnt);
    assert_int_equal(run->counters.failcnt, 0);
    assert_true(run->counters.has_oom_kill);
    assert_false(run->counters.has_events_max);

    /* The limit sits on the parent, whose usage includes the sibling's 900 MiB. */
    assert_figure(&pod->limit, 1536 * MIB, V1 "/pod/memory.limit_in_bytes");
    assert_figure(&pod->usage, 1400 * MIB, V1 "/pod/memory.usage_in_bytes");
    assert_figure(&pod->inactive_file, 100 * MIB, V1 "/pod/memory.stat total_inactive_file");
    assert_int_equal(pod->counters.failcnt, 3);
    assert_int_equal(pod->counters.oom_kill, 1);

    assert_true(top->limit.unlimited);
    assert_figure(&top->usage, 8192 * MIB, V1 "/memory.usage_in_bytes");
    assert_int_equal(top->inactive_file.bytes, 2048 * MIB);
}

static void test_v1_usage_unknown_keeps_limit(void **state)
{
    const struct rf_cgroup_level *l = &tree.levels[0];

    (void)state;
    /* memory.usage_in_bytes "12abc", memory.stat "total_inactive_file" without a value. */
    assert_int_equal(rfsys_read_cgroup_tree(ROOT("cg-v1-tree"), "401", &tree), 0);
    assert_int_equal(tree.n, 3);
    assert_string_equal(l->dir, V1 "/pod/garbled");
    assert_figure(&l->limit, 1024 * MIB, V1 "/pod/garbled/memory.limit_in_bytes");
    assert_false(l->usage.has);
    assert_int_equal(l->usage.error, -EBADMSG);
    assert_string_equal(l->usage.source, V1 "/pod/garbled/memory.usage_in_bytes");
    assert_false(l->inactive_file.has);
    assert_int_equal(l->inactive_file.error, -EBADMSG);
    assert_false(l->counters.has_failcnt);  /* "x" */
    assert_false(l->counters.has_oom_kill); /* no file */
    /* The parent is read as ever. */
    assert_int_equal(tree.levels[1].usage.bytes, 1400 * MIB);

    /* No usage file at all. */
    assert_int_equal(rfsys_read_cgroup_tree(ROOT("cg-v1-tree"), "402", &tree), 0);
    assert_figure(&l->limit, 1024 * MIB, V1 "/pod/nousage/memory.limit_in_bytes");
    assert_false(l->usage.has);
    assert_int_equal(l->usage.error, -ENOENT);
    assert_int_equal(l->inactive_file.error, -ENOENT);
}

static void test_v1_deep_truncated(void **state)
{
    (void)state;
    /* /deep/l1/.../l17: 19 levels with the root, 16 read, the nearest first. */
    assert_int_equal(rfsys_read_cgroup_tree(ROOT("cg-v1-tree"), "403", &tree), 0);
    assert_int_equal(tree.n, RF_CGROUP_MAX_LEVELS);
    assert_true(tree.truncated);
    assert_non_null(strstr(tree.levels[0].dir, "/l16/l17"));
    assert_int_equal(tree.levels[0].limit.bytes, (4096 - 17) * MIB);
    assert_non_null(strstr(tree.levels[15].dir, "/deep/l1/l2"));
    assert_int_equal(tree.levels[15].usage.bytes, 2 * MIB);
}

static void test_v2_tree(void **state)
{
    const struct rf_cgroup_level *run = &tree.levels[0], *pod = &tree.levels[1],
                                 *top = &tree.levels[3];

    (void)state;
    assert_int_equal(rfsys_read_cgroup_tree(ROOT("cg-v2-tree"), "self", &tree), 0);
    assert_int_equal(tree.version, RFSYS_CGROUP_V2);
    assert_string_equal(tree.mount_point, "/sys/fs/cgroup");
    assert_int_equal(tree.n, 4);
    assert_string_equal(run->dir, V2 "/pod1/ctr-run");
    assert_string_equal(tree.levels[2].dir, V2);
    assert_string_equal(top->dir, "/sys/fs/cgroup");

    assert_true(run->limit.has);
    assert_true(run->limit.unlimited);
    assert_figure(&run->high, 700 * MIB, V2 "/pod1/ctr-run/memory.high");
    assert_figure(&run->usage, 300 * MIB, V2 "/pod1/ctr-run/memory.current");
    assert_figure(&run->inactive_file, 100 * MIB, V2 "/pod1/ctr-run/memory.stat inactive_file");
    assert_true(run->counters.has_events_high);
    assert_int_equal(run->counters.events_high, 5);
    assert_false(run->counters.has_failcnt);

    assert_figure(&pod->limit, 1024 * MIB, V2 "/pod1/memory.max");
    assert_true(pod->high.unlimited);
    assert_figure(&pod->usage, 900 * MIB, V2 "/pod1/memory.current");
    assert_int_equal(pod->inactive_file.bytes, 200 * MIB);
    assert_int_equal(pod->counters.events_max, 12);
    assert_int_equal(pod->counters.events_oom, 1);
    assert_int_equal(pod->counters.oom_kill, 1);

    /* The v2 root has neither memory.max nor memory.current. */
    assert_false(top->limit.has);
    assert_int_equal(top->limit.error, -ENOENT);
    assert_false(top->usage.has);
    assert_int_equal(top->inactive_file.bytes, 3072 * MIB);
    assert_false(top->counters.has_events_max);
}

static void test_v2_usage_unknown_keeps_limit(void **state)
{
    const struct rf_cgroup_level *l = &tree.levels[0];

    (void)state;
    assert_int_equal(rfsys_read_cgroup_tree(ROOT("cg-v2-tree"), "411", &tree), 0);
    assert_string_equal(l->dir, V2 "/pod1/ctr-garbled");
    assert_figure(&l->limit, 512 * MIB, V2 "/pod1/ctr-garbled/memory.max");
    assert_false(l->usage.has);
    assert_int_equal(l->usage.error, -EBADMSG);
    assert_false(l->inactive_file.has);
    assert_int_equal(l->inactive_file.error, -EBADMSG);
    assert_false(l->counters.has_events_max); /* no memory.events */
}

static void test_no_controller_and_errors(void **state)
{
    (void)state;
    assert_int_equal(rfsys_read_cgroup_tree(ROOT("cg-none"), "self", &tree), 0);
    assert_int_equal(tree.version, RFSYS_CGROUP_NONE);
    assert_int_equal(tree.n, 0);
    assert_int_equal(rfsys_read_cgroup_tree(ROOT("cg-v1-tree"), "../1", &tree), -EINVAL);
    assert_int_equal(tree.n, 0);
    assert_int_equal(rfsys_read_cgroup_tree(ROOT("cg-v1-tree"), "self", NULL), -EINVAL);
    assert_int_equal(rfsys_read_cgroup_tree(ROOT("no-such-root"), "self", &tree), -ENOENT);
}

/* The kernel's verdict over a run: counters read before and after. */
static void test_verdict_from_trees(void **state)
{
    struct rf_cgroup_verdict v;

    (void)state;
    assert_int_equal(rfsys_read_cgroup_tree(ROOT("cg-v1-tree"), "self", &tree), 0);
    assert_int_equal(rfsys_read_cgroup_tree(ROOT("cg-v1-tree-after"), "self", &after), 0);
    assert_int_equal(rf_cgroup_verdict_build(tree.levels, tree.n, after.levels, after.n, &v), 0);
    assert_int_equal(v.n, 3);
    assert_string_equal(v.levels[1].dir, V1 "/pod");
    assert_true(v.levels[1].delta.has_failcnt);
    assert_int_equal(v.levels[1].delta.failcnt, 247);
    assert_int_equal(v.levels[1].delta.oom_kill, 0);
    assert_int_equal(v.levels[0].delta.failcnt, 0);
    assert_true(v.hit_limit);
    assert_false(v.oom_killed);
    assert_false(v.throttled);
    assert_true(v.complete);

    assert_int_equal(rfsys_read_cgroup_tree(ROOT("cg-v2-tree"), "self", &tree), 0);
    assert_int_equal(rfsys_read_cgroup_tree(ROOT("cg-v2-tree-after"), "self", &after), 0);
    assert_int_equal(rf_cgroup_verdict_build(tree.levels, tree.n, after.levels, after.n, &v), 0);
    assert_int_equal(v.n, 4);
    assert_int_equal(v.levels[0].delta.events_high, 4);
    assert_int_equal(v.levels[1].delta.events_max, 28);
    assert_int_equal(v.levels[1].delta.events_oom, 1);
    assert_int_equal(v.levels[1].delta.oom_kill, 1);
    assert_false(v.levels[3].delta.has_events_max); /* the root has no memory.events */
    assert_true(v.hit_limit);
    assert_true(v.oom_killed);
    assert_true(v.throttled);
    assert_true(v.complete);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_v1_tree),
        cmocka_unit_test(test_v1_usage_unknown_keeps_limit),
        cmocka_unit_test(test_v1_deep_truncated),
        cmocka_unit_test(test_v2_tree),
        cmocka_unit_test(test_v2_usage_unknown_keeps_limit),
        cmocka_unit_test(test_no_controller_and_errors),
        cmocka_unit_test(test_verdict_from_trees),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
