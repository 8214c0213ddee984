/*
 * The idle clock (ramforge/core/idle_clock.h): due once per quiet period after
 * the last submission's start or end, never while one is in flight, never
 * with idle_ns 0; the monotonic deadline as a CLOCK_REALTIME timespec.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <cmocka.h>

#include "ramforge/core/idle_clock.h"

#define S 1000000000ull

static void test_due_after_quiet(void **state)
{
    (void)state;
    struct rf_idle_clock c;
    uint64_t due = 0;
    rf_idle_clock_init(&c, 2 * S, 100 * S);
    assert_int_equal(rf_idle_clock_due(&c, 500 * S, &due), RF_IDLE_QUIET); /* nothing pending */
    rf_idle_clock_submit(&c, 110 * S);
    assert_true(rf_idle_clock_pending(&c));
    assert_int_equal(rf_idle_clock_due(&c, 200 * S, &due), RF_IDLE_QUIET); /* in flight */
    rf_idle_clock_finish(&c, 150 * S); /* a 40 s decode: the clock runs from its end */
    assert_int_equal(rf_idle_clock_due(&c, 151 * S, &due), RF_IDLE_NOT_DUE);
    assert_int_equal(due, 152 * S);
    assert_int_equal(rf_idle_clock_due(&c, 152 * S, &due), RF_IDLE_DUE);
    rf_idle_clock_closed(&c, c.submits);
    assert_false(rf_idle_clock_pending(&c));
    assert_int_equal(rf_idle_clock_due(&c, 900 * S, &due), RF_IDLE_QUIET); /* once per period */
    /* two in flight: due only when both ended */
    rf_idle_clock_submit(&c, 1000 * S);
    rf_idle_clock_submit(&c, 1001 * S);
    rf_idle_clock_finish(&c, 1002 * S);
    assert_int_equal(rf_idle_clock_due(&c, 2000 * S, &due), RF_IDLE_QUIET);
    rf_idle_clock_finish(&c, 1003 * S);
    assert_int_equal(rf_idle_clock_due(&c, 1004 * S, &due), RF_IDLE_NOT_DUE);
    assert_int_equal(due, 1005 * S);
    rf_idle_clock_finish(&c, 1003 * S); /* an unmatched finish never goes below zero */
    assert_int_equal(c.in_flight, 0);
    /* a submission during the idle boundary stays pending after the operation ends */
    uint64_t covered = c.submits;
    rf_idle_clock_submit(&c, 1006 * S);
    rf_idle_clock_finish(&c, 1006 * S);
    rf_idle_clock_closed(&c, covered);
    assert_true(rf_idle_clock_pending(&c));
    assert_int_equal(rf_idle_clock_due(&c, 1008 * S, &due), RF_IDLE_DUE);
    /* a touch (a load, a wake) restarts the clock with nothing left in flight */
    rf_idle_clock_closed(&c, c.submits);
    rf_idle_clock_touch(&c, 2000 * S);
    assert_int_equal(c.in_flight, 0);
    assert_int_equal(rf_idle_clock_due(&c, 2001 * S, &due), RF_IDLE_NOT_DUE);
    assert_int_equal(due, 2002 * S);
    rf_idle_clock_closed(&c, covered - 1); /* never backwards */
    assert_true(rf_idle_clock_pending(&c));
}

static void test_never_due(void **state)
{
    (void)state;
    struct rf_idle_clock c;
    rf_idle_clock_init(&c, 0, 0);
    rf_idle_clock_submit(&c, 1);
    rf_idle_clock_finish(&c, 2);
    assert_int_equal(rf_idle_clock_due(&c, UINT64_MAX, NULL), RF_IDLE_QUIET);
    rf_idle_clock_init(&c, UINT64_MAX, 0); /* a due time past 2^64 ns never comes */
    rf_idle_clock_submit(&c, 5);
    rf_idle_clock_finish(&c, 5);
    assert_int_equal(rf_idle_clock_due(&c, UINT64_MAX, NULL), RF_IDLE_QUIET);
}

/* The timespec lies deadline - now after CLOCK_REALTIME now (within the calls' spacing). */
static void test_deadline_realtime(void **state)
{
    (void)state;
    struct timespec before, after;
    clock_gettime(CLOCK_REALTIME, &before);
    struct timespec ts = rf_deadline_realtime(10 * S + 999999999ull, 7 * S);
    clock_gettime(CLOCK_REALTIME, &after);
    assert_true(ts.tv_nsec >= 0 && ts.tv_nsec < 1000000000L);
    long double t = ts.tv_sec + ts.tv_nsec / 1e9L, b = before.tv_sec + before.tv_nsec / 1e9L,
                a = after.tv_sec + after.tv_nsec / 1e9L;
    assert_true(t >= b + 3.999999999L && t <= a + 3.999999999L);
    ts = rf_deadline_realtime(5, 9); /* past: now */
    clock_gettime(CLOCK_REALTIME, &after);
    t = ts.tv_sec + ts.tv_nsec / 1e9L;
    assert_true(t <= after.tv_sec + after.tv_nsec / 1e9L);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_due_after_quiet),
        cmocka_unit_test(test_never_due),
        cmocka_unit_test(test_deadline_realtime),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
