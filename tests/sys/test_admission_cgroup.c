/*
 * Admission fed from real cgroup fixture trees read with
 * rfsys_read_cgroup_tree: single-level v1 and v2 limits reject, the v1
 * "unlimited" sentinel is not a limit, the soft target warns, an unknown
 * figure stays unknown, an overflowing reserve rejects; and on the
 * hierarchies of tests/data/sys/cg-v1-tree and cg-v2-tree (see
 * test_cgroup_tree.c for their figures) a limited parent with a busy
 * sibling binds the run, inactive file cache is headroom, a working set
 * over the room thrashes, and a garbled usage keeps its limit and gives
 * Unknown.
 *
 * Single-level fixture figures (bytes):
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

#include "ramforge/core/admission.h"
#include "ramforge/sys/sys.h"

#define ROOT(name) RF_TEST_DATA "/sys/" name
#define MIB UINT64_C(1048576)

static struct rfsys_cgroup_tree tree;  /* large: not on the stack */
static struct rf_admission_result res; /* likewise */

static struct rf_admission_figure fig(uint64_t bytes)
{
    return rf_admission_figure_of(bytes, RF_PROV_EXACT_MEASURED, "test");
}

/* Reads the fixture's tree into an admission input with RSS and KV cache; nothing else known. */
static void read_tree(const char *root, const char *pid, struct rf_admission_input *in,
                      uint64_t rss, uint64_t kv)
{
    assert_int_equal(rfsys_read_cgroup_tree(root, pid, &tree), 0);
    memset(in, 0, sizeof(*in));
    in->cgroups = tree.levels;
    in->n_cgroups = tree.n;
    in->cgroups_truncated = tree.truncated;
    in->process_rss = fig(rss);
    in->kv_cache = fig(kv);
}

static void test_v1_limit_rejects(void **state)
{
    struct rf_admission_input in;

    (void)state;
    /* 256 + 1000 = 1256 MiB > 1024 MiB; the 8 GiB target would admit it. */
    read_tree(ROOT("cg-v1-limit"), "self", &in, 200 * MIB, 1000 * MIB);
    assert_int_equal(tree.version, RFSYS_CGROUP_V1);
    in.has_target = true;
    in.target_bytes = 8192 * MIB;
    in.reserve_bytes = 512 * MIB;
    assert_int_equal(rf_admission_decide(&in, &res), 0);
    assert_int_equal(res.outcome, RF_ADMIT_REJECTED);
    assert_true(res.refused);
    assert_int_equal(res.binding, 0);
    assert_int_equal(res.projected_charge_bytes, 1256 * MIB);
    assert_int_equal(res.hard_excess_bytes, 232 * MIB);
    assert_false(res.has_excess);
    assert_string_equal(res.hard_limit_source,
                        "/sys/fs/cgroup/cpu,memory/batch/job42/memory.limit_in_bytes");
    /* No memory.stat there: nothing counted as reclaimable, and the reason says so. */
    assert_non_null(strstr(res.reason, "is unknown (/sys/fs/cgroup/cpu,memory/batch/job42/"
                                       "memory.stat total_active_file: absent)"));

    /* 256 + 700 = 956 MiB fits. */
    in.kv_cache = fig(700 * MIB);
    assert_int_equal(rf_admission_decide(&in, &res), 0);
    assert_int_equal(res.outcome, RF_ADMIT_ADMITTED);
    assert_int_equal(res.projected_charge_bytes, 956 * MIB);
}

static void test_v2_limit_rejects(void **state)
{
    struct rf_admission_input in;

    (void)state;
    /* 100 + 450 = 550 MiB > 512 MiB; no target: the hard check alone. */
    read_tree(ROOT("cg-v2-limit"), "self", &in, 150 * MIB, 450 * MIB);
    assert_int_equal(tree.version, RFSYS_CGROUP_V2);
    assert_int_equal(rf_admission_decide(&in, &res), 0);
    assert_int_equal(res.outcome, RF_ADMIT_REJECTED);
    assert_int_equal(res.projected_charge_bytes, 550 * MIB);
    assert_int_equal(res.hard_excess_bytes, 38 * MIB);
    assert_false(res.has_soft_target);
    assert_string_equal(res.hard_limit_source,
                        "/sys/fs/cgroup/kubepods.slice/pod 7/ctr/memory.max");
}

static void test_v1_unlimited_sentinel(void **state)
{
    struct rf_admission_input in;

    (void)state;
    /* 64 GiB would exceed any reading of the sentinel as a small number. */
    read_tree(ROOT("cg-v1-unlimited"), "self", &in, 0, 65536 * MIB);
    assert_true(tree.levels[0].limit.unlimited);
    assert_int_equal(rf_admission_decide(&in, &res), 0);
    assert_int_equal(res.outcome, RF_ADMIT_ADMITTED);
    assert_false(res.hard_limit_checked);
    assert_false(res.has_hard_excess);
    assert_non_null(strstr(res.reason, "no cgroup of the hierarchy enforces a hard limit"));
}

static void test_soft_target_warns(void **state)
{
    struct rf_admission_input in;

    (void)state;
    /* v2 "max": the soft target alone decides. 3000 MiB vs 3072 - 512 = 2560 MiB. */
    read_tree(ROOT("cg-v2-nopeak"), "self", &in, 700 * MIB, 2300 * MIB);
    in.has_target = true;
    in.target_bytes = 3072 * MIB;
    in.reserve_bytes = 512 * MIB;
    in.reclaimable = fig(300 * MIB); /* cannot cover 440 MiB */
    assert_int_equal(rf_admission_decide(&in, &res), 0);
    assert_int_equal(res.outcome, RF_ADMIT_WARNING);
    assert_int_equal(res.excess_bytes, 440 * MIB);
    assert_true(res.excess_likely_anonymous);
    assert_non_null(strstr(res.reason, "page release may not address it"));
}

static void test_unknown_stays_unknown(void **state)
{
    struct rf_admission_input in;

    (void)state;
    /* A limit is known but the request is not measured. */
    read_tree(ROOT("cg-v2-limit"), "self", &in, 0, 0);
    in.process_rss.has = false;
    assert_int_equal(rf_admission_decide(&in, &res), 0);
    assert_int_equal(res.outcome, RF_ADMIT_UNKNOWN);

    /* No controller at all, no request. */
    read_tree(ROOT("cg-none"), "self", &in, 0, 0);
    in.kv_cache.has = false;
    assert_int_equal(in.n_cgroups, 0);
    assert_int_equal(rf_admission_decide(&in, &res), 0);
    assert_int_equal(res.outcome, RF_ADMIT_UNKNOWN);
}

static void test_reserve_overflow_rejects(void **state)
{
    struct rf_admission_input in;

    (void)state;
    read_tree(ROOT("cg-v1-unlimited"), "self", &in, 0, 1024 * MIB);
    in.reserve_bytes = UINT64_MAX;
    assert_int_equal(rf_admission_decide(&in, &res), 0);
    assert_int_equal(res.outcome, RF_ADMIT_REJECTED);
    assert_non_null(strstr(res.reason, "overflows"));
}

/*
 * Fault 3 on v1: the run's own cgroup is unlimited and holds 400 MiB; the
 * parent pod is limited to 1536 MiB and holds 1400 (its other child 900).
 * The flat reader compares the run's own usage with the inherited limit
 * (400 + 300 <= 1536); the hierarchy checks the pod: 1400 - 100 + 300 =
 * 1600 MiB > 1536.
 */
static void test_v1_parent_binds(void **state)
{
    struct rfsys_cgroup_memory flat;
    struct rf_admission_input in;

    (void)state;
    assert_int_equal(rfsys_read_cgroup_memory(ROOT("cg-v1-tree"), "self", &flat), 0);
    assert_true(flat.limit_inherited);
    assert_int_equal(flat.limit_bytes, 1536 * MIB);
    assert_int_equal(flat.current_bytes, 400 * MIB);

    read_tree(ROOT("cg-v1-tree"), "self", &in, 380 * MIB, 300 * MIB);
    assert_int_equal(rf_admission_decide(&in, &res), 0);
    assert_int_equal(res.outcome, RF_ADMIT_REJECTED);
    assert_true(res.has_binding);
    assert_int_equal(res.binding, 1);
    assert_int_equal(res.projected_charge_bytes, 1600 * MIB);
    assert_int_equal(res.hard_excess_bytes, 64 * MIB);
    assert_true(res.excess_likely_anonymous); /* 300 MiB of KV growth explains 64 MiB */
    assert_string_equal(res.hard_limit_source, "/sys/fs/cgroup/memory/pod/memory.limit_in_bytes");
    assert_non_null(strstr(res.reason, "of cgroup /sys/fs/cgroup/memory/pod by 67108864 bytes"));
    assert_false(res.cgroups[0].enforced);
    assert_false(res.cgroups[2].enforced);
}

/* Fault 2 on v1: the pod's 100 MiB of inactive file cache is headroom. */
static void test_v1_inactive_file_is_headroom(void **state)
{
    struct rf_admission_input in;

    (void)state;
    /* 1400 - 100 + 200 = 1500 MiB <= 1536 */
    read_tree(ROOT("cg-v1-tree"), "self", &in, 380 * MIB, 200 * MIB);
    assert_int_equal(rf_admission_decide(&in, &res), 0);
    assert_int_equal(res.outcome, RF_ADMIT_ADMITTED);
    assert_int_equal(res.binding, 1);
    assert_int_equal(res.projected_charge_bytes, 1500 * MIB);
    assert_non_null(strstr(res.reason, "104857600 bytes of clean unmapped file cache of "
                                       "/sys/fs/cgroup/memory/pod (active and inactive lists) "
                                       "count as headroom: reclaimable, not free "
                                       "(/sys/fs/cgroup/memory/pod/memory.stat total_active_file "
                                       "+ total_inactive_file - total_mapped_file)"));

    /* Counted as used, the same run is over by 64 MiB. */
    tree.levels[1].reclaimable_file.has = false;
    tree.levels[1].reclaimable_file.error = -ENOENT;
    assert_int_equal(rf_admission_decide(&in, &res), 0);
    assert_int_equal(res.outcome, RF_ADMIT_REJECTED);
    assert_int_equal(res.hard_excess_bytes, 64 * MIB);
}

/*
 * Issue 20 fault 2, v1 and v2: a cgroup of 1536 MiB whose 1120 MiB of usage
 * holds 1000 MiB of file cache all on the active list (inactive_file 0),
 * 100 MiB of it mapped and 4 MiB dirty: 896 MiB can be dropped under the
 * limit. A growth of 643 MiB was refused when only the inactive list
 * counted (1120 + 643 > 1536) and fits now (1120 - 896 + 643 = 867 MiB).
 * The mapped pages are not headroom: a growth of 1350 MiB would fit if
 * they were (1120 - 1000 + 1350 = 1470) and is over by 38 MiB.
 */
static void test_active_file_is_headroom(void **state)
{
    static const struct {
        const char *root, *source;
    } cases[] = {
        {ROOT("cg-v1-active"), "/sys/fs/cgroup/cpu,memory/batch/job42/memory.stat "
                               "total_active_file + total_inactive_file - total_mapped_file - "
                               "total_dirty - total_writeback"},
        {ROOT("cg-v2-active"), "/sys/fs/cgroup/kubepods.slice/pod 7/ctr/memory.stat file - "
                               "file_mapped - file_dirty - file_writeback - shmem - unevictable"},
    };
    struct rf_admission_input in;

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        read_tree(cases[i].root, "self", &in, 200 * MIB, 643 * MIB);
        assert_true(tree.levels[0].inactive_file.has);
        assert_int_equal(tree.levels[0].inactive_file.bytes, 0);
        assert_true(tree.levels[0].reclaimable_file.has);
        assert_int_equal(tree.levels[0].reclaimable_file.bytes, 896 * MIB);
        assert_string_equal(tree.levels[0].reclaimable_file.source, cases[i].source);
        in.mode = RF_ADMISSION_ENFORCE;
        assert_int_equal(rf_admission_decide(&in, &res), 0);
        assert_int_equal(res.outcome, RF_ADMIT_ADMITTED);
        assert_false(res.refused);
        assert_int_equal(res.cgroups[0].reclaimable_bytes, 896 * MIB);
        assert_int_equal(res.projected_charge_bytes, 867 * MIB);
        assert_non_null(strstr(res.reason, "939524096 bytes of clean unmapped file cache of "));
        assert_non_null(strstr(res.reason, cases[i].source));

        in.kv_cache = fig(1350 * MIB);
        assert_int_equal(rf_admission_decide(&in, &res), 0);
        assert_int_equal(res.outcome, RF_ADMIT_REJECTED);
        assert_int_equal(res.hard_excess_bytes, 38 * MIB);
    }
}

/*
 * Issue 20 fault 4: no cgroup enforces a limit (cg-none-host: no memory
 * controller; /proc/meminfo of a 23.5 GiB host without swap, MemAvailable
 * 23770620 kB). The KV cache of tinyllama at -c 1187520 (26752696320
 * bytes) was admitted; the host binds now and refuses it, naming itself.
 */
static void test_host_binds_without_a_cgroup_limit(void **state)
{
    const uint64_t avail = UINT64_C(23770620) * 1024, kv = UINT64_C(26752696320);
    struct rf_admission_input in;

    (void)state;
    read_tree(ROOT("cg-none-host"), "self", &in, 100 * MIB, kv);
    assert_int_equal(tree.version, RFSYS_CGROUP_NONE);
    assert_true(tree.host.read);
    assert_true(tree.host.available.has);
    assert_int_equal(tree.host.available.bytes, avail);
    assert_string_equal(tree.host.available.source, "/proc/meminfo MemAvailable");
    assert_int_equal(tree.host.total.bytes, UINT64_C(24684084) * 1024);
    assert_true(tree.host.swap_free.has);
    assert_int_equal(tree.host.swap_free.bytes, 0);
    in.host = &tree.host;
    in.mode = RF_ADMISSION_ENFORCE;
    assert_int_equal(rf_admission_decide(&in, &res), 0);
    assert_int_equal(res.outcome, RF_ADMIT_REJECTED);
    assert_int_equal(res.cause, RF_ADMIT_CAUSE_HARD_LIMIT);
    assert_true(res.refused);
    assert_true(res.host_binding);
    assert_false(res.has_binding);
    assert_int_equal(res.host_room_bytes, avail);
    assert_int_equal(res.hard_excess_bytes, kv - avail);
    assert_int_equal(res.excess_over, RF_ADMIT_BOUND_HARD_LIMIT);
    assert_true(res.excess_likely_anonymous);
    assert_string_equal(res.hard_limit_source, "/proc/meminfo MemAvailable + SwapFree");
    assert_non_null(strstr(res.reason, "the host is the binding level"));
    in.mode = RF_ADMISSION_WARN; /* the kernel would kill it: refused in warn too */
    assert_int_equal(rf_admission_decide(&in, &res), 0);
    assert_true(res.refused);

    /* Swap counts as room; what fits is admitted, the host named. */
    tree.host.swap_free.bytes = 4096 * MIB;
    assert_int_equal(rf_admission_decide(&in, &res), 0);
    assert_int_equal(res.outcome, RF_ADMIT_ADMITTED);
    assert_int_equal(res.host_room_bytes, avail + 4096 * MIB);
    assert_non_null(strstr(res.reason, "the host is the binding level, and the anonymous growth "
                                       "of 26752696320 bytes fits"));
    tree.host.swap_free.bytes = 0;

    /* Without MemAvailable: the projected process memory against MemTotal + SwapTotal. */
    tree.host.available.has = false;
    tree.host.available.error = -ENOENT;
    assert_int_equal(rf_admission_decide(&in, &res), 0);
    assert_int_equal(res.outcome, RF_ADMIT_REJECTED);
    assert_int_equal(res.host_projected_bytes, kv + 100 * MIB);
    assert_non_null(strstr(res.host_source, "MemTotal + SwapTotal (MemAvailable: absent)"));

    /* Nothing known of the host: unknown, never admitted. */
    tree.host.total.has = false;
    tree.host.total.error = -ENOENT;
    in.kv_cache = fig(1 * MIB);
    in.mode = RF_ADMISSION_ENFORCE;
    assert_int_equal(rf_admission_decide(&in, &res), 0);
    assert_int_equal(res.outcome, RF_ADMIT_UNKNOWN);
    assert_true(res.refused);
    assert_non_null(strstr(res.reason, "the host's memory is unknown (/proc/meminfo: "
                                       "MemAvailable absent, MemTotal absent)"));

    /* A cgroup that binds keeps the host out of the decision. */
    read_tree(ROOT("cg-v2-limit"), "self", &in, 150 * MIB, 300 * MIB);
    in.host = &tree.host;
    assert_int_equal(rf_admission_decide(&in, &res), 0);
    assert_true(res.has_binding);
    assert_false(res.host_binding);
}

/* Fault 1 on v1: 1116 MiB of weights read from the file cannot stay beside the sibling. */
static void test_v1_working_set_thrashes(void **state)
{
    struct rf_admission_input in;

    (void)state;
    read_tree(ROOT("cg-v1-tree"), "self", &in, 380 * MIB, 11 * MIB);
    in.anonymous = fig(50 * MIB);
    in.file_working_set = fig(1116 * MIB);
    /* pod: others 1300 - 380 = 920, run room 1536 - 920 = 616 < 1116 + 61 */
    assert_int_equal(rf_admission_decide(&in, &res), 0);
    assert_int_equal(res.outcome, RF_ADMIT_WARNING);
    assert_int_equal(res.cause, RF_ADMIT_CAUSE_THRASH);
    assert_int_equal(res.thrash_level, 1);
    assert_int_equal(res.cgroups[1].run_room_bytes, 616 * MIB);
    assert_int_equal(res.working_set_fit_bytes, 555 * MIB);
    in.mode = RF_ADMISSION_ENFORCE;
    assert_int_equal(rf_admission_decide(&in, &res), 0);
    assert_int_equal(res.outcome, RF_ADMIT_REJECTED);
    assert_true(res.refused);
}

/* Fault 3 on v2, with the run's memory.high below the pod's limit. */
static void test_v2_parent_binds(void **state)
{
    struct rf_admission_input in;

    (void)state;
    /* pod1: 900 - 200 + 300 = 1000 <= 1024; ctr-run: 300 - 100 + 300 = 500 <= high 700 */
    read_tree(ROOT("cg-v2-tree"), "self", &in, 280 * MIB, 300 * MIB);
    assert_int_equal(rf_admission_decide(&in, &res), 0);
    assert_int_equal(res.outcome, RF_ADMIT_ADMITTED);
    assert_int_equal(res.binding, 1);
    assert_int_equal(res.cgroups[1].room_bytes, 324 * MIB);
    assert_true(res.cgroups[0].high_checked);
    assert_true(res.cgroups[0].high_fits);

    /* 400 MiB: pod1 1100 > 1024. */
    in.kv_cache = fig(400 * MIB);
    assert_int_equal(rf_admission_decide(&in, &res), 0);
    assert_int_equal(res.outcome, RF_ADMIT_REJECTED);
    assert_int_equal(res.binding, 1);
    assert_int_equal(res.hard_excess_bytes, 76 * MIB);
    assert_string_equal(res.hard_limit_source, "/sys/fs/cgroup/kubepods.slice/pod1/memory.max");
}

/* A garbled usage keeps its limit: Unknown, refused only under enforce. */
static void test_garbled_usage_is_unknown(void **state)
{
    struct rf_admission_input in;

    (void)state;
    read_tree(ROOT("cg-v1-tree"), "401", &in, 100 * MIB, 10 * MIB);
    assert_int_equal(rf_admission_decide(&in, &res), 0);
    assert_int_equal(res.outcome, RF_ADMIT_UNKNOWN);
    assert_false(res.refused);
    assert_non_null(strstr(res.reason, "/sys/fs/cgroup/memory/pod/garbled/"
                                       "memory.usage_in_bytes: malformed"));
    in.mode = RF_ADMISSION_ENFORCE;
    assert_int_equal(rf_admission_decide(&in, &res), 0);
    assert_true(res.refused);

    read_tree(ROOT("cg-v2-tree"), "411", &in, 100 * MIB, 10 * MIB);
    assert_int_equal(rf_admission_decide(&in, &res), 0);
    assert_int_equal(res.outcome, RF_ADMIT_UNKNOWN);
    assert_non_null(strstr(res.reason, "the hard limit of 536870912 bytes"));

    /* A deeper hierarchy than was read is unknown too. */
    read_tree(ROOT("cg-v1-tree"), "403", &in, 1 * MIB, 1 * MIB);
    assert_true(in.cgroups_truncated);
    assert_int_equal(rf_admission_decide(&in, &res), 0);
    assert_int_equal(res.outcome, RF_ADMIT_UNKNOWN);
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
        cmocka_unit_test(test_v1_parent_binds),
        cmocka_unit_test(test_v1_inactive_file_is_headroom),
        cmocka_unit_test(test_active_file_is_headroom),
        cmocka_unit_test(test_host_binds_without_a_cgroup_limit),
        cmocka_unit_test(test_v1_working_set_thrashes),
        cmocka_unit_test(test_v2_parent_binds),
        cmocka_unit_test(test_garbled_usage_is_unknown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
