/*
 * The byte budget's plan (ramforge/core/budget.h) on synthetic entries: the
 * least recently active asked first, --keep, unknown activity, a gated
 * request waiting and a stuck entry passed over, a file two processes map
 * counted once, the memory that never asks the same pages twice; and over
 * seeded random cases, the plan against its invariants.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "ramforge/core/budget.h"

#define MiB (1024ull * 1024ull)

static struct rf_budget_entry entry(size_t file, uint64_t held, uint64_t releasable, double idle,
                                    enum rf_budget_activity a)
{
    struct rf_budget_entry e = {0};
    e.file = file;
    e.held_bytes = held;
    e.releasable_bytes = releasable;
    e.idle_s = idle;
    e.activity = a;
    return e;
}

static void test_under_budget(void **state)
{
    (void)state;
    struct rf_budget_entry e[] = {entry(0, 50 * MiB, 50 * MiB, 9, RF_BUDGET_ACTIVITY_CPU)};
    uint64_t held[] = {50 * MiB};
    struct rf_budget_plan p;
    assert_int_equal(rf_budget_plan(e, 1, held, 1, 100 * MiB, 0, &p), 0);
    assert_int_equal(p.n_steps, 0);
    assert_int_equal(p.held_bytes, 50 * MiB);
    assert_int_equal(p.headroom_bytes, (int64_t)(50 * MiB));
    assert_int_equal(p.excess_bytes, 0);
    rf_budget_plan_free(&p);
}

static void test_least_recently_active_first(void **state)
{
    (void)state;
    /* three processes of 100 MiB, budget 150: 150 over; the idlest (entry 2) gives all it
       may (80), the next idlest (entry 0) the rest (70); entry 1, the busiest, nothing */
    struct rf_budget_entry e[] = {
        entry(0, 100 * MiB, 100 * MiB, 5, RF_BUDGET_ACTIVITY_EXEC),
        entry(1, 100 * MiB, 100 * MiB, 1, RF_BUDGET_ACTIVITY_CPU),
        entry(2, 100 * MiB, 80 * MiB, 30, RF_BUDGET_ACTIVITY_CPU),
    };
    uint64_t held[] = {100 * MiB, 100 * MiB, 100 * MiB};
    struct rf_budget_plan p;
    assert_int_equal(rf_budget_plan(e, 3, held, 3, 150 * MiB, 0, &p), 0);
    assert_int_equal(p.headroom_bytes, -(int64_t)(150 * MiB));
    assert_int_equal(p.excess_bytes, 150 * MiB);
    assert_int_equal(p.n_steps, 2);
    assert_int_equal(p.steps[0].entry, 2);
    assert_int_equal(p.steps[0].bytes, 80 * MiB);
    assert_int_equal(p.steps[0].next, 0);
    assert_int_equal(p.steps[1].entry, 0);
    assert_int_equal(p.steps[1].bytes, 70 * MiB);
    assert_int_equal(p.steps[1].next, 1);
    assert_int_equal(p.short_bytes, 0);
    rf_budget_plan_free(&p);
}

static void test_busy(void **state)
{
    (void)state;
    /* the idlest by CPU time moved 0.4 s ago: busy under a 1 s minimum, passed over; an
       exec'd entry as recent is asked (its engine waits for the idle moment) */
    struct rf_budget_entry e[] = {
        entry(0, 100 * MiB, 100 * MiB, 0.4, RF_BUDGET_ACTIVITY_CPU),
        entry(1, 100 * MiB, 100 * MiB, 0.2, RF_BUDGET_ACTIVITY_EXEC),
    };
    uint64_t held[] = {100 * MiB, 100 * MiB};
    struct rf_budget_plan p;
    assert_int_equal(rf_budget_plan(e, 2, held, 2, 150 * MiB, 1.0, &p), 0);
    assert_int_equal(p.n_steps, 1);
    assert_int_equal(p.steps[0].entry, 1);
    assert_int_equal(p.skipped[RF_BUDGET_SKIP_BUSY], 1);
    rf_budget_plan_free(&p);
    assert_int_equal(rf_budget_plan(e, 2, held, 2, 150 * MiB, 0.3, &p), 0);
    assert_int_equal(p.steps[0].entry, 0);
    rf_budget_plan_free(&p);
}

static void test_keep_unknown_pending_stuck(void **state)
{
    (void)state;
    struct rf_budget_memory stuck = {0};
    rf_budget_asked(&stuck, 100 * MiB, 40 * MiB);
    assert_true(rf_budget_observe(&stuck, 99 * MiB)); /* moved 1 of 40: stuck */
    struct rf_budget_entry e[] = {
        entry(0, 100 * MiB, 100 * MiB, 100, RF_BUDGET_ACTIVITY_CPU),    /* kept */
        entry(1, 100 * MiB, 100 * MiB, 90, RF_BUDGET_ACTIVITY_UNKNOWN), /* unknown */
        entry(2, 99 * MiB, 99 * MiB, 80, RF_BUDGET_ACTIVITY_EXEC),      /* stuck */
        entry(3, 100 * MiB, 100 * MiB, 70, RF_BUDGET_ACTIVITY_EXEC),    /* pending 10 */
        entry(4, 100 * MiB, 100 * MiB, 0.5, RF_BUDGET_ACTIVITY_CPU),    /* the one left */
    };
    e[0].keep = true;
    e[2].memory = &stuck;
    e[3].pending = true;
    e[3].pending_bytes = 10 * MiB;
    uint64_t held[] = {100 * MiB, 100 * MiB, 99 * MiB, 100 * MiB, 100 * MiB};
    struct rf_budget_plan p;
    assert_int_equal(rf_budget_plan(e, 5, held, 5, 300 * MiB, 0, &p), 0);
    assert_int_equal(p.pending_bytes, 10 * MiB);
    assert_int_equal(p.excess_bytes, 499 * MiB - 300 * MiB - 10 * MiB);
    assert_int_equal(p.n_steps, 1);
    assert_int_equal(p.steps[0].entry, 4);
    assert_int_equal(p.steps[0].bytes, 100 * MiB);
    assert_int_equal(p.steps[0].next, 5); /* none */
    assert_int_equal(p.short_bytes, 89 * MiB);
    assert_int_equal(p.skipped[RF_BUDGET_SKIP_KEEP], 1);
    assert_int_equal(p.skipped[RF_BUDGET_SKIP_UNKNOWN], 1);
    assert_int_equal(p.skipped[RF_BUDGET_SKIP_STUCK], 1);
    assert_int_equal(p.skipped[RF_BUDGET_SKIP_PENDING], 1);
    rf_budget_plan_free(&p);
    /* the stuck entry holds more again: asked again */
    e[2].held_bytes = 100 * MiB;
    assert_int_equal(rf_budget_plan(e, 5, held, 5, 300 * MiB, 0, &p), 0);
    assert_int_equal(p.steps[0].entry, 2);
    rf_budget_plan_free(&p);
    assert_false(rf_budget_observe(&stuck, 100 * MiB));
    assert_false(stuck.stuck);
}

static void test_shared_file_counted_once(void **state)
{
    (void)state;
    /* two processes map one 100 MiB file: 100 held, not 200; under a 150 budget */
    struct rf_budget_entry e[] = {
        entry(0, 100 * MiB, 0, 50, RF_BUDGET_ACTIVITY_CPU),
        entry(0, 100 * MiB, 0, 40, RF_BUDGET_ACTIVITY_CPU),
    };
    uint64_t held[] = {100 * MiB};
    struct rf_budget_plan p;
    assert_int_equal(rf_budget_plan(e, 2, held, 1, 150 * MiB, 0, &p), 0);
    assert_int_equal(p.held_bytes, 100 * MiB);
    assert_int_equal(p.n_steps, 0);
    rf_budget_plan_free(&p);
    /* under 50: every page shared (nothing releasable): nothing asked, said short */
    assert_int_equal(rf_budget_plan(e, 2, held, 1, 50 * MiB, 0, &p), 0);
    assert_int_equal(p.n_steps, 0);
    assert_int_equal(p.short_bytes, 50 * MiB);
    assert_int_equal(p.skipped[RF_BUDGET_SKIP_NOTHING], 2);
    rf_budget_plan_free(&p);
}

static void test_memory(void **state)
{
    (void)state;
    struct rf_budget_memory m = {0};
    assert_false(rf_budget_observe(&m, 10 * MiB)); /* never asked */
    rf_budget_asked(&m, 100 * MiB, 40 * MiB);
    assert_false(rf_budget_observe(&m, 70 * MiB)); /* moved 30 of 40: not stuck */
    assert_int_equal(m.released_bytes, 30 * MiB);
    assert_false(m.stuck);
    rf_budget_asked(&m, 70 * MiB, 40 * MiB);
    assert_true(rf_budget_observe(&m, 70 * MiB)); /* moved nothing */
    assert_true(m.stuck);
    assert_int_equal(m.stuck_bytes, 70 * MiB);
    assert_false(rf_budget_observe(&m, 70 * MiB)); /* said once */
    assert_true(m.stuck);
    assert_false(rf_budget_observe(&m, 71 * MiB)); /* holds more: free again */
    assert_false(m.stuck);
    assert_int_equal(m.releases, 2);
}

static void test_errors(void **state)
{
    (void)state;
    struct rf_budget_plan p;
    struct rf_budget_entry e = entry(1, 1, 1, 1, RF_BUDGET_ACTIVITY_CPU);
    uint64_t held[] = {UINT64_MAX, 1};
    assert_int_equal(rf_budget_plan(NULL, 0, NULL, 0, 0, 0, NULL), -EINVAL);
    assert_int_equal(rf_budget_plan(&e, 1, held, 1, 0, 0, &p), -EINVAL); /* file 1 of 1 */
    assert_int_equal(rf_budget_plan(&e, 1, held, 2, 0, 0, &p), -EOVERFLOW);
    assert_int_equal(rf_budget_plan(NULL, 0, NULL, 0, 0, 0, &p), 0);
    assert_int_equal(p.n_steps, 0);
    rf_budget_plan_free(&p);
    rf_budget_plan_free(NULL);
    assert_string_equal(rf_budget_activity_name(RF_BUDGET_ACTIVITY_EXEC), "exec");
    assert_string_equal(rf_budget_skip_name(RF_BUDGET_SKIP_STUCK), "stuck");
}

/* Random cases: the plan's invariants, against a naive reading of the rules. */
static void test_random(void **state)
{
    (void)state;
    srand(35);
    for (int round = 0; round < 2000; round++) {
        size_t n = (size_t)(rand() % 8), nf = 1 + (size_t)(rand() % 4);
        struct rf_budget_entry e[8];
        uint64_t held[4] = {0}, eligible = 0;
        for (size_t i = 0; i < n; i++) {
            e[i] = entry((size_t)rand() % nf, (uint64_t)(rand() % 100) * MiB, 0,
                         (double)(rand() % 5), (enum rf_budget_activity)(rand() % 3));
            e[i].releasable_bytes = e[i].held_bytes ? (uint64_t)rand() % e[i].held_bytes : 0;
            e[i].keep = rand() % 5 == 0;
            e[i].pending = rand() % 6 == 0;
            e[i].pending_bytes = e[i].pending ? (uint64_t)(rand() % 10) * MiB : 0;
            held[e[i].file] += e[i].held_bytes;
            if (!e[i].keep && e[i].activity && !e[i].pending)
                eligible += e[i].releasable_bytes;
        }
        uint64_t budget = (uint64_t)(rand() % 300) * MiB, total = 0, pending = 0, asked = 0;
        for (size_t f = 0; f < nf; f++)
            total += held[f];
        for (size_t i = 0; i < n; i++)
            pending += e[i].pending ? e[i].pending_bytes : 0;
        struct rf_budget_plan p;
        assert_int_equal(rf_budget_plan(e, n, held, nf, budget, 0, &p), 0);
        uint64_t excess = total > budget + pending ? total - budget - pending : 0;
        assert_int_equal(p.excess_bytes, excess);
        for (size_t s = 0; s < p.n_steps; s++) {
            const struct rf_budget_entry *x = &e[p.steps[s].entry];
            assert_false(x->keep || x->pending || x->activity == RF_BUDGET_ACTIVITY_UNKNOWN);
            assert_true(p.steps[s].bytes > 0 && p.steps[s].bytes <= x->releasable_bytes);
            if (s > 0)
                assert_true(e[p.steps[s - 1].entry].idle_s >= x->idle_s);
            asked += p.steps[s].bytes;
        }
        assert_int_equal(asked, excess < eligible ? excess : eligible);
        assert_int_equal(p.short_bytes, excess - asked);
        rf_budget_plan_free(&p);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_under_budget),
        cmocka_unit_test(test_least_recently_active_first),
        cmocka_unit_test(test_busy),
        cmocka_unit_test(test_keep_unknown_pending_stuck),
        cmocka_unit_test(test_shared_file_counted_once),
        cmocka_unit_test(test_memory),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_random),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
