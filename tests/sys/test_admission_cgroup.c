/*
 * Admission fed from real cgroup fixture trees under tests/data/sys/cg-*,
 * read with rfsys_read_cgroup_memory: v1 and v2 limits reject, the v1
 * "unlimited" sentinel is not a limit, the soft target warns, an unknown
 * figure stays unknown, and an overflowing reserve rejects.
 *
 * Fixture figures (bytes):
 *   cg-v1-limit      usage 268435456 (256 MiB), limit 1073741824 (1 GiB)
 *   cg-v1-unlimited  usage 1073741824 (1 GiB), limit 9223372036854771712 (sentinel)
 *   cg-v2-limit      current 104857600 (100 MiB), max 536870912 (512 MiB)
 *   cg-v2-nopeak     current 734003200 (700 MiB), max "max"
 *   cg-none          no memory controller
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "ramforge/admission.h"
#include "ramforge/sys.h"

#define ROOT(name) RF_TEST_DATA "/sys/" name
#define MIB UINT64_C(1048576)

/* Reads the fixture and fills the cgroup half of an admission input; nothing else known. */
static void read_cg(const char *root, struct rfsys_cgroup_memory *cg, struct rf_admission_input *in)
{
    assert_int_equal(rfsys_read_cgroup_memory(root, "self", cg), 0);
    memset(in, 0, sizeof(*in));
    in->has_hard_limit = cg->has_limit;
    in->hard_unlimited = cg->limit_unlimited;
    in->hard_limit_bytes = cg->limit_bytes;
    in->hard_limit_source = cg->limit_source;
    in->has_cgroup_current = cg->has_current;
    in->cgroup_current_bytes = cg->current_bytes;
}

static void set_request(struct rf_admission_input *in, uint64_t request, uint64_t rss)
{
    in->has_request = true;
    in->request_bytes = request;
    in->has_process_rss = true;
    in->process_rss_bytes = rss;
}

static void test_v1_limit_rejects(void **state)
{
    struct rfsys_cgroup_memory cg;
    struct rf_admission_input in;
    struct rf_admission_result r;

    (void)state;
    read_cg(ROOT("cg-v1-limit"), &cg, &in);
    assert_int_equal(cg.version, RFSYS_CGROUP_V1);
    assert_false(cg.limit_unlimited);
    /* 256 + (1200 - 200) = 1256 MiB > 1024 MiB; the 8 GiB target would admit it. */
    set_request(&in, 1200 * MIB, 200 * MIB);
    in.has_target = true;
    in.target_bytes = 8192 * MIB;
    in.reserve_bytes = 512 * MIB;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_REJECTED);
    assert_true(r.hard_limit_checked);
    assert_int_equal(r.projected_charge_bytes, 1256 * MIB);
    assert_int_equal(r.hard_excess_bytes, 232 * MIB);
    assert_false(r.has_excess);
    assert_string_equal(r.hard_limit_source,
                        "/sys/fs/cgroup/cpu,memory/batch/job42/memory.limit_in_bytes");

    /* 256 + (900 - 200) = 956 MiB fits. */
    in.request_bytes = 900 * MIB;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_ADMITTED);
    assert_int_equal(r.projected_charge_bytes, 956 * MIB);
}

static void test_v2_limit_rejects(void **state)
{
    struct rfsys_cgroup_memory cg;
    struct rf_admission_input in;
    struct rf_admission_result r;

    (void)state;
    read_cg(ROOT("cg-v2-limit"), &cg, &in);
    assert_int_equal(cg.version, RFSYS_CGROUP_V2);
    /* 100 + (600 - 150) = 550 MiB > 512 MiB; no target: the hard check alone. */
    set_request(&in, 600 * MIB, 150 * MIB);
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_REJECTED);
    assert_int_equal(r.projected_charge_bytes, 550 * MIB);
    assert_int_equal(r.hard_excess_bytes, 38 * MIB);
    assert_false(r.has_soft_target);
    assert_string_equal(r.hard_limit_source, "/sys/fs/cgroup/kubepods.slice/pod 7/ctr/memory.max");
}

static void test_v1_unlimited_sentinel(void **state)
{
    struct rfsys_cgroup_memory cg;
    struct rf_admission_input in;
    struct rf_admission_result r;

    (void)state;
    read_cg(ROOT("cg-v1-unlimited"), &cg, &in);
    assert_true(cg.has_limit);
    assert_true(cg.limit_unlimited);
    /* 64 GiB would exceed any reading of the sentinel as a small number. */
    set_request(&in, 65536 * MIB, 0);
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_ADMITTED);
    assert_false(r.hard_limit_checked);
    assert_false(r.has_hard_excess);
}

static void test_soft_target_warns(void **state)
{
    struct rfsys_cgroup_memory cg;
    struct rf_admission_input in;
    struct rf_admission_result r;

    (void)state;
    /* v2 "max": the soft target alone decides. 3000 MiB vs 3072 - 512 = 2560 MiB. */
    read_cg(ROOT("cg-v2-nopeak"), &cg, &in);
    assert_true(cg.limit_unlimited);
    set_request(&in, 3000 * MIB, 700 * MIB);
    in.has_target = true;
    in.target_bytes = 3072 * MIB;
    in.reserve_bytes = 512 * MIB;
    in.has_reclaimable = true;
    in.reclaimable_bytes = 300 * MIB; /* cannot cover 440 MiB */
    in.unknown_components[0] = "KvCache";
    in.unknown_components[1] = "GraphScratch";
    in.unknown_components[2] = "Runtime";
    in.n_unknown = 3;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_WARNING);
    assert_int_equal(r.soft_target_bytes, 2560 * MIB);
    assert_int_equal(r.excess_bytes, 440 * MIB);
    assert_true(r.excess_likely_anonymous);
    assert_non_null(strstr(r.reason, "page release may not address it"));
    assert_int_equal(r.n_unknown, 3);
    assert_string_equal(r.unknown_components[0], "KvCache");

    /* v2 limit passed (100 + 200 = 300 <= 512 MiB), soft target 384 - 128 = 256 MiB exceeded. */
    read_cg(ROOT("cg-v2-limit"), &cg, &in);
    set_request(&in, 300 * MIB, 100 * MIB);
    in.has_target = true;
    in.target_bytes = 384 * MIB;
    in.reserve_bytes = 128 * MIB;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_WARNING);
    assert_true(r.hard_limit_checked);
    assert_int_equal(r.excess_bytes, 44 * MIB);
}

static void test_unknown_stays_unknown(void **state)
{
    struct rfsys_cgroup_memory cg;
    struct rf_admission_input in;
    struct rf_admission_result r;

    (void)state;
    /* A limit is known but the request is not measured. */
    read_cg(ROOT("cg-v2-limit"), &cg, &in);
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_UNKNOWN);

    /* The limit read, memory.current not (as if unreadable). */
    set_request(&in, 100 * MIB, 50 * MIB);
    in.has_cgroup_current = false;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_UNKNOWN);
    assert_false(r.hard_limit_checked);

    /* No controller at all, no request. */
    read_cg(ROOT("cg-none"), &cg, &in);
    assert_int_equal(cg.version, RFSYS_CGROUP_NONE);
    assert_false(in.has_hard_limit);
    in.has_target = true;
    in.target_bytes = 1024 * MIB;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_UNKNOWN);
}

static void test_reserve_overflow_rejects(void **state)
{
    struct rfsys_cgroup_memory cg;
    struct rf_admission_input in;
    struct rf_admission_result r;

    (void)state;
    read_cg(ROOT("cg-v1-unlimited"), &cg, &in);
    set_request(&in, 1024 * MIB, 0);
    in.reserve_bytes = UINT64_MAX;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_REJECTED);
    assert_non_null(strstr(r.reason, "overflows"));

    /* With a target, such a reserve is an argument error ("target below the safety reserve"). */
    in.has_target = true;
    in.target_bytes = 4096 * MIB;
    assert_int_equal(rf_admission_decide(&in, &r), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_v1_limit_rejects),
        cmocka_unit_test(test_v2_limit_rejects),
        cmocka_unit_test(test_v1_unlimited_sentinel),
        cmocka_unit_test(test_soft_target_warns),
        cmocka_unit_test(test_unknown_stays_unknown),
        cmocka_unit_test(test_reserve_overflow_rejects),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
