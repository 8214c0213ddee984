/*
 * Tests for the plain-value cgroup helpers: which levels enforce a limit,
 * the error texts of figures, and the kernel's verdict as counter deltas
 * (matched by directory; missing or backwards counters give no delta).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "ramforge/core/cgroup_levels.h"

/* A v1-style level: failcnt and oom_kill present. */
static struct rf_cgroup_level v1_level(const char *dir, uint64_t failcnt, uint64_t oom_kill)
{
    struct rf_cgroup_level l;

    memset(&l, 0, sizeof(l));
    snprintf(l.dir, sizeof(l.dir), "%s", dir);
    l.counters.has_failcnt = true;
    l.counters.failcnt = failcnt;
    l.counters.has_oom_kill = true;
    l.counters.oom_kill = oom_kill;
    return l;
}

static void test_enforced_and_errors(void **state)
{
    struct rf_cgroup_level l = v1_level("/a", 0, 0);

    (void)state;
    assert_false(rf_cgroup_level_enforced(NULL));
    assert_false(rf_cgroup_level_enforced(&l)); /* no limit read */
    l.limit.has = true;
    l.limit.unlimited = true;
    assert_false(rf_cgroup_level_enforced(&l));
    l.limit.unlimited = false;
    l.limit.bytes = 0; /* a limit of 0 bytes is enforced */
    assert_true(rf_cgroup_level_enforced(&l));

    assert_string_equal(rf_cgroup_error_text(0), "");
    assert_string_equal(rf_cgroup_error_text(-ENOENT), "absent");
    assert_string_equal(rf_cgroup_error_text(-EBADMSG), "malformed");
    assert_string_equal(rf_cgroup_error_text(-EACCES), strerror(EACCES));
}

static void test_verdict(void **state)
{
    struct rf_cgroup_level before[3] = {v1_level("/a/run", 0, 0), v1_level("/a", 10, 0),
                                        v1_level("/gone", 1, 1)};
    struct rf_cgroup_level after[3] = {v1_level("/a/run", 0, 0), v1_level("/a", 15, 1),
                                       v1_level("/new", 9, 9)};
    struct rf_cgroup_verdict v;

    (void)state;
    assert_int_equal(rf_cgroup_verdict_build(before, 3, after, 3, &v), 0);
    assert_int_equal(v.n, 2); /* /gone and /new are on one side only */
    assert_string_equal(v.levels[0].dir, "/a/run");
    assert_int_equal(v.levels[0].delta.failcnt, 0);
    assert_string_equal(v.levels[1].dir, "/a");
    assert_int_equal(v.levels[1].delta.failcnt, 5);
    assert_int_equal(v.levels[1].delta.oom_kill, 1);
    assert_false(v.levels[1].delta.has_events_high);
    assert_true(v.hit_limit);
    assert_true(v.oom_killed);
    assert_false(v.throttled);
    assert_true(v.complete);

    /* Nothing happened: no flag. */
    assert_int_equal(rf_cgroup_verdict_build(before, 1, after, 1, &v), 0);
    assert_false(v.hit_limit || v.oom_killed || v.throttled);

    /* A counter that went backwards (the cgroup was recreated) or vanished has no delta. */
    after[1].counters.failcnt = 2;
    after[0].counters.has_oom_kill = false;
    assert_int_equal(rf_cgroup_verdict_build(before, 2, after, 2, &v), 0);
    assert_false(v.levels[1].delta.has_failcnt);
    assert_false(v.levels[0].delta.has_oom_kill);
    assert_true(v.levels[1].delta.has_oom_kill);
    assert_false(v.complete);
    assert_false(v.hit_limit);
    assert_true(v.oom_killed);

    /* v2 events. */
    memset(&after[0].counters, 0, sizeof(after[0].counters));
    memset(&before[0].counters, 0, sizeof(before[0].counters));
    before[0].counters.has_events_high = after[0].counters.has_events_high = true;
    before[0].counters.events_high = 3;
    after[0].counters.events_high = 7;
    before[0].counters.has_events_max = after[0].counters.has_events_max = true;
    assert_int_equal(rf_cgroup_verdict_build(before, 1, after, 1, &v), 0);
    assert_int_equal(v.levels[0].delta.events_high, 4);
    assert_true(v.throttled);
    assert_false(v.hit_limit);

    assert_int_equal(rf_cgroup_verdict_build(before, 1, after, 1, NULL), -EINVAL);
    assert_int_equal(rf_cgroup_verdict_build(NULL, 1, after, 1, &v), -EINVAL);
    assert_int_equal(rf_cgroup_verdict_build(before, RF_CGROUP_MAX_LEVELS + 1, after, 1, &v),
                     -EINVAL);
    assert_int_equal(v.n, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_enforced_and_errors),
        cmocka_unit_test(test_verdict),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
