/*
 * Tests for admission: each rule with hand-computed figures (MiB-sized
 * numbers written out in bytes), the order of the rules (hard limit before
 * soft target, unknown request before everything), checked arithmetic and
 * argument errors.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "ramforge/admission.h"

#define MIB UINT64_C(1048576)

/* A request of 1000 MiB with a 2000 MiB target and a 100 MiB reserve, nothing else known. */
static struct rf_admission_input base(void)
{
    struct rf_admission_input in;

    memset(&in, 0, sizeof(in));
    in.has_request = true;
    in.request_bytes = 1000 * MIB;
    in.has_target = true;
    in.target_bytes = 2000 * MIB;
    in.reserve_bytes = 100 * MIB;
    return in;
}

static void test_outcome_names(void **state)
{
    (void)state;
    assert_string_equal(rf_admission_outcome_name(RF_ADMIT_ADMITTED), "admitted");
    assert_string_equal(rf_admission_outcome_name(RF_ADMIT_WARNING), "admitted_with_warning");
    assert_string_equal(rf_admission_outcome_name(RF_ADMIT_REJECTED), "rejected");
    assert_string_equal(rf_admission_outcome_name(RF_ADMIT_UNKNOWN), "unknown");
    assert_null(rf_admission_outcome_name((enum rf_admission_outcome)4));
    assert_null(rf_admission_outcome_name((enum rf_admission_outcome)(-1)));
}

static void test_admitted_under_soft_target(void **state)
{
    struct rf_admission_input in = base();
    struct rf_admission_result r;

    (void)state;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_ADMITTED);
    assert_true(r.has_soft_target);
    assert_int_equal(r.soft_target_bytes, 1900 * MIB); /* 2000 - 100 */
    assert_false(r.has_excess);
    assert_false(r.excess_likely_anonymous);
    assert_false(r.hard_limit_checked);
    assert_false(r.has_reclaimable);
    assert_true(strlen(r.reason) > 0);
    assert_null(strchr(r.reason, '\n'));

    /* Exactly at the soft target still fits. */
    in.request_bytes = 1900 * MIB;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_ADMITTED);
    assert_false(r.has_excess);
}

static void test_warning_over_soft_target(void **state)
{
    struct rf_admission_input in = base();
    struct rf_admission_result r;

    (void)state;
    /* 1950 MiB against 1900: 50 MiB over; reclaimable 80 MiB covers it. */
    in.request_bytes = 1950 * MIB;
    in.has_reclaimable = true;
    in.reclaimable_bytes = 80 * MIB;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_WARNING);
    assert_true(r.has_excess);
    assert_int_equal(r.excess_bytes, 50 * MIB);
    assert_false(r.excess_likely_anonymous);
    assert_true(r.has_reclaimable);
    assert_int_equal(r.reclaimable_bytes, 80 * MIB);
    assert_null(strstr(r.reason, "likely anonymous"));

    /* Reclaimable 49 MiB cannot cover 50 MiB: likely anonymous. */
    in.reclaimable_bytes = 49 * MIB;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_WARNING);
    assert_true(r.excess_likely_anonymous);
    assert_non_null(strstr(r.reason, "page release may not address it"));
    assert_non_null(strstr(r.reason, "likely anonymous"));

    /* Exactly covered: not anonymous. */
    in.reclaimable_bytes = 50 * MIB;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_false(r.excess_likely_anonymous);
}

static void test_reclaimable_unknown_uses_non_file(void **state)
{
    struct rf_admission_input in = base();
    struct rf_admission_result r;

    (void)state;
    in.request_bytes = 2500 * MIB; /* 600 MiB over 1900 */
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_WARNING);
    assert_int_equal(r.excess_bytes, 600 * MIB);
    assert_false(r.has_reclaimable);
    assert_false(r.excess_likely_anonymous); /* nothing says so */

    in.has_non_file = true;
    in.non_file_bytes = 1900 * MIB; /* not above the soft target */
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_false(r.excess_likely_anonymous);

    in.non_file_bytes = 1900 * MIB + 1; /* anonymous memory alone exceeds it */
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_WARNING);
    assert_true(r.excess_likely_anonymous);
    assert_non_null(strstr(r.reason, "page release may not address it"));
}

static void test_unknown_request(void **state)
{
    struct rf_admission_input in = base();
    struct rf_admission_result r;

    (void)state;
    in.has_request = false;
    in.has_hard_limit = true;
    in.hard_limit_bytes = 4096 * MIB;
    in.has_cgroup_current = true;
    in.cgroup_current_bytes = 0;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_UNKNOWN);
    assert_false(r.has_excess);
    assert_false(r.hard_limit_checked);
    assert_true(r.has_soft_target);
    assert_non_null(strstr(r.reason, "could not be measured"));
}

static void test_hard_limit_rejects(void **state)
{
    struct rf_admission_input in = base();
    struct rf_admission_result r;

    (void)state;
    /*
     * Limit 1200 MiB, cgroup at 700 MiB, process RSS 400 MiB, request 1000
     * MiB: charge = 700 + (1000 - 400) = 1300 MiB > 1200, although the
     * request fits the 1900 MiB soft target.
     */
    in.has_hard_limit = true;
    in.hard_limit_bytes = 1200 * MIB;
    in.hard_limit_source = "/sys/fs/cgroup/a/memory.max";
    in.has_cgroup_current = true;
    in.cgroup_current_bytes = 700 * MIB;
    in.has_process_rss = true;
    in.process_rss_bytes = 400 * MIB;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_REJECTED);
    assert_true(r.hard_limit_checked);
    assert_true(r.has_projected_charge);
    assert_int_equal(r.projected_charge_bytes, 1300 * MIB);
    assert_true(r.has_hard_excess);
    assert_int_equal(r.hard_excess_bytes, 100 * MIB);
    assert_false(r.has_excess); /* within the soft target */
    assert_string_equal(r.hard_limit_source, "/sys/fs/cgroup/a/memory.max");
    assert_non_null(strstr(r.reason, "hard limit"));

    /* Exactly at the limit passes the hard check: 700 + 500 = 1200. */
    in.process_rss_bytes = 500 * MIB;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_ADMITTED);
    assert_true(r.hard_limit_checked);
    assert_int_equal(r.projected_charge_bytes, 1200 * MIB);
    assert_false(r.has_hard_excess);

    /* RSS above the request: no growth, charge = current. */
    in.process_rss_bytes = 1500 * MIB;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_ADMITTED);
    assert_int_equal(r.projected_charge_bytes, 700 * MIB);
}

/* The hard limit is authoritative over a soft warning, and a pass leaves the warning. */
static void test_hard_before_soft(void **state)
{
    struct rf_admission_input in = base();
    struct rf_admission_result r;

    (void)state;
    in.request_bytes = 3000 * MIB; /* 1100 MiB over the soft target */
    in.has_hard_limit = true;
    in.hard_limit_bytes = 2048 * MIB;
    in.has_cgroup_current = true;
    in.cgroup_current_bytes = 100 * MIB;
    in.has_process_rss = true;
    in.process_rss_bytes = 100 * MIB; /* charge 100 + 2900 = 3000 MiB */
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_REJECTED);
    assert_int_equal(r.hard_excess_bytes, 952 * MIB);
    assert_true(r.has_excess);
    assert_int_equal(r.excess_bytes, 1100 * MIB);

    in.hard_limit_bytes = 4096 * MIB;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_WARNING);
    assert_true(r.hard_limit_checked);
    assert_int_equal(r.excess_bytes, 1100 * MIB);
}

static void test_hard_limit_unknown_figures(void **state)
{
    struct rf_admission_input in = base();
    struct rf_admission_result r;

    (void)state;
    in.has_hard_limit = true;
    in.hard_limit_bytes = 1200 * MIB;

    /* Limit known, current unknown. */
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_UNKNOWN);
    assert_false(r.hard_limit_checked);
    assert_non_null(strstr(r.reason, "current charge is unknown"));

    /* RSS unknown: bound 100 + 1000 = 1100 <= 1200 passes. */
    in.has_cgroup_current = true;
    in.cgroup_current_bytes = 100 * MIB;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_ADMITTED);
    assert_true(r.hard_limit_checked);
    assert_false(r.has_projected_charge);

    /* RSS unknown: bound 300 + 1000 = 1300 > 1200 is not a rejection. */
    in.cgroup_current_bytes = 300 * MIB;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_UNKNOWN);
    assert_false(r.has_hard_excess);
}

static void test_unlimited_and_no_target(void **state)
{
    struct rf_admission_input in = base();
    struct rf_admission_result r;

    (void)state;
    /* Unlimited: no hard check, current not needed. */
    in.has_hard_limit = true;
    in.hard_unlimited = true;
    in.request_bytes = 1 << 30;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_ADMITTED);
    assert_false(r.hard_limit_checked);

    /* No target: a request over any "soft" figure is admitted. */
    in.has_target = false;
    in.request_bytes = UINT64_MAX - in.reserve_bytes;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_ADMITTED);
    assert_false(r.has_soft_target);
    assert_false(r.has_excess);

    /* No target, finite limit: only the hard check applies. */
    in.hard_unlimited = false;
    in.hard_limit_bytes = 1000 * MIB;
    in.has_cgroup_current = true;
    in.cgroup_current_bytes = 200 * MIB;
    in.has_process_rss = true;
    in.process_rss_bytes = 200 * MIB;
    in.request_bytes = 1000 * MIB; /* charge 200 + 800 = 1000 */
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_ADMITTED);
    in.request_bytes = 1000 * MIB + 1;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_REJECTED);
    assert_int_equal(r.hard_excess_bytes, 1);
}

static void test_checked_arithmetic(void **state)
{
    struct rf_admission_input in = base();
    struct rf_admission_result r;

    (void)state;
    /* request + reserve overflows: rejected, not wrapped. */
    in.request_bytes = UINT64_MAX - 100 * MIB + 1;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_REJECTED);
    assert_non_null(strstr(r.reason, "overflows"));
    in.request_bytes = UINT64_MAX - 100 * MIB; /* exactly fits: a warning */
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_WARNING);

    /* The projected charge overflows: rejected. */
    in = base();
    in.has_hard_limit = true;
    in.hard_limit_bytes = UINT64_MAX;
    in.has_cgroup_current = true;
    in.cgroup_current_bytes = UINT64_MAX - 10;
    in.has_process_rss = true;
    in.process_rss_bytes = in.request_bytes - 11;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_REJECTED);
    assert_non_null(strstr(r.reason, "overflows"));
    in.process_rss_bytes = in.request_bytes - 10; /* UINT64_MAX exactly: fits */
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_ADMITTED);
    assert_int_equal(r.projected_charge_bytes, UINT64_MAX);
}

static void test_unknown_components_copied(void **state)
{
    static const char long_name[] = "AVeryLongComponentNameThatDoesNotFitInSixtyFourBytesOfStorage"
                                    "AtAllReally";
    struct rf_admission_input in = base();
    struct rf_admission_result r;

    (void)state;
    in.unknown_components[0] = "KvCache";
    in.unknown_components[1] = "GraphScratch";
    in.unknown_components[2] = long_name;
    in.n_unknown = 3;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_ADMITTED); /* listed, not an outcome */
    assert_int_equal(r.n_unknown, 3);
    assert_string_equal(r.unknown_components[0], "KvCache");
    assert_string_equal(r.unknown_components[1], "GraphScratch");
    assert_int_equal(strlen(r.unknown_components[2]), RF_ADMISSION_NAME_MAX - 1);
    assert_memory_equal(r.unknown_components[2], long_name, RF_ADMISSION_NAME_MAX - 1);

    /* Listed with an unknown request too. */
    in.has_request = false;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_UNKNOWN);
    assert_int_equal(r.n_unknown, 3);
}

static void test_invalid_arguments(void **state)
{
    struct rf_admission_input in = base();
    struct rf_admission_result r;

    (void)state;
    assert_int_equal(rf_admission_decide(NULL, &r), -EINVAL);
    assert_int_equal(rf_admission_decide(&in, NULL), -EINVAL);

    /* Target below (or at) the safety reserve. */
    in.reserve_bytes = in.target_bytes;
    assert_int_equal(rf_admission_decide(&in, &r), -EINVAL);
    in.reserve_bytes = UINT64_MAX;
    assert_int_equal(rf_admission_decide(&in, &r), -EINVAL);
    in.reserve_bytes = in.target_bytes - 1; /* soft target of one byte */
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.soft_target_bytes, 1);
    assert_int_equal(r.outcome, RF_ADMIT_WARNING);

    in = base();
    in.n_unknown = RF_ADMISSION_MAX_UNKNOWN + 1;
    assert_int_equal(rf_admission_decide(&in, &r), -EINVAL);
    in.n_unknown = 1; /* slot 0 is NULL */
    assert_int_equal(rf_admission_decide(&in, &r), -EINVAL);
    assert_int_equal(r.outcome, 0);
    assert_int_equal(r.n_unknown, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_outcome_names),
        cmocka_unit_test(test_admitted_under_soft_target),
        cmocka_unit_test(test_warning_over_soft_target),
        cmocka_unit_test(test_reclaimable_unknown_uses_non_file),
        cmocka_unit_test(test_unknown_request),
        cmocka_unit_test(test_hard_limit_rejects),
        cmocka_unit_test(test_hard_before_soft),
        cmocka_unit_test(test_hard_limit_unknown_figures),
        cmocka_unit_test(test_unlimited_and_no_target),
        cmocka_unit_test(test_checked_arithmetic),
        cmocka_unit_test(test_unknown_components_copied),
        cmocka_unit_test(test_invalid_arguments),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
