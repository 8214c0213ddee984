/*
 * Tests for admission on plain structs: each rule with hand-computed
 * figures (MiB-sized numbers written out as n * MIB), the order of the
 * rules, each fault kind of issue 9 (1: a working set that must thrash,
 * 2: reclaimable cache counted as used, 3: a limit on an ancestor, 4: an
 * anonymous excess named without a target, 5: the prompt sets the KV
 * cache, 6: locked and released resources are not reclaimable), unknown
 * figures, the modes, checked arithmetic and argument errors.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "ramforge/core/admission.h"
#include "ramforge/core/fs_profile.h"
#include "test_util.h"

#define MIB UINT64_C(1048576)
#define PAGE UINT64_C(4096)
#define NO_LIMIT UINT64_MAX /* lvl(): the limit file says "max" */

static struct rf_admission_figure fig(uint64_t bytes)
{
    return rf_admission_figure_of(bytes, RF_PROV_EXACT_MEASURED, "test");
}

/*
 * One cgroup level: a limit (NO_LIMIT: "max"), a usage (has_usage false:
 * malformed), a reclaimable file figure (has_inactive false: absent).
 */
static struct rf_cgroup_level lvl(const char *dir, uint64_t limit, bool has_usage, uint64_t usage,
                                  bool has_inactive, uint64_t inactive)
{
    struct rf_cgroup_level l;

    memset(&l, 0, sizeof(l));
    snprintf(l.dir, sizeof(l.dir), "%s", dir);
    l.limit.has = true;
    l.limit.unlimited = limit == NO_LIMIT;
    l.limit.bytes = limit == NO_LIMIT ? 0 : limit;
    snprintf(l.limit.source, sizeof(l.limit.source), "%s/memory.limit_in_bytes", dir);
    l.high.error = -ENOENT;
    l.usage.has = has_usage;
    l.usage.bytes = has_usage ? usage : 0;
    l.usage.error = has_usage ? 0 : -EBADMSG;
    snprintf(l.usage.source, sizeof(l.usage.source), "%s/memory.usage_in_bytes", dir);
    l.reclaimable_file.has = has_inactive;
    l.reclaimable_file.bytes = has_inactive ? inactive : 0;
    l.reclaimable_file.error = has_inactive ? 0 : -ENOENT;
    snprintf(l.reclaimable_file.source, sizeof(l.reclaimable_file.source),
             "%s/memory.stat total_active_file + total_inactive_file - total_mapped_file", dir);
    return l;
}

/* RSS 900 MiB + KV 100 MiB = a 1000 MiB request; target 2000 MiB, reserve 100 MiB. */
/* Whether the result lists name among its unknown components. */
static bool has_unknown(const struct rf_admission_result *r, const char *name)
{
    for (size_t i = 0; i < r->n_unknown; i++)
        if (strcmp(r->unknown_components[i], name) == 0)
            return true;
    return false;
}

static struct rf_admission_input base(void)
{
    struct rf_admission_input in;

    memset(&in, 0, sizeof(in));
    in.process_rss = fig(900 * MIB);
    in.kv_cache = fig(100 * MIB);
    in.has_target = true;
    in.target_bytes = 2000 * MIB;
    in.reserve_bytes = 100 * MIB;
    return in;
}

static void test_names(void **state)
{
    enum rf_admission_mode m;

    (void)state;
    assert_string_equal(rf_admission_outcome_name(RF_ADMIT_ADMITTED), "admitted");
    assert_string_equal(rf_admission_outcome_name(RF_ADMIT_WARNING), "admitted_with_warning");
    assert_string_equal(rf_admission_outcome_name(RF_ADMIT_REJECTED), "rejected");
    assert_string_equal(rf_admission_outcome_name(RF_ADMIT_UNKNOWN), "unknown");
    assert_null(rf_admission_outcome_name((enum rf_admission_outcome)4));
    assert_null(rf_admission_outcome_name((enum rf_admission_outcome)(-1)));
    assert_string_equal(rf_admission_cause_name(RF_ADMIT_CAUSE_THRASH), "thrash");
    assert_string_equal(rf_admission_cause_name(RF_ADMIT_CAUSE_SOFT_TARGET), "soft_target");
    assert_string_equal(rf_admission_cause_name(RF_ADMIT_CAUSE_NOT_BOUND), "not_bound");
    assert_null(rf_admission_cause_name((enum rf_admission_cause)8));
    assert_string_equal(rf_admission_bound_name(RF_ADMIT_BOUND_HARD_LIMIT), "hard_limit");
    assert_null(rf_admission_bound_name((enum rf_admission_bound)4));
    assert_string_equal(rf_admission_phase_name(RF_ADMISSION_PRE_LOAD), "pre_load");
    assert_null(rf_admission_phase_name((enum rf_admission_phase)2));

    assert_int_equal(rf_admission_mode_parse("enforce", &m), 0);
    assert_int_equal(m, RF_ADMISSION_ENFORCE);
    assert_int_equal(rf_admission_mode_parse("warn", &m), 0);
    assert_int_equal(m, RF_ADMISSION_WARN);
    assert_int_equal(rf_admission_mode_parse("off", &m), 0);
    assert_int_equal(m, RF_ADMISSION_OFF);
    assert_int_equal(rf_admission_mode_parse("Enforce", &m), -EINVAL);
    assert_int_equal(rf_admission_mode_parse("", &m), -EINVAL);
    assert_int_equal(rf_admission_mode_parse(NULL, &m), -EINVAL);
    assert_string_equal(rf_admission_mode_name(RF_ADMISSION_OFF), "off");
    assert_null(rf_admission_mode_name((enum rf_admission_mode)3));
}

static void test_admitted_under_soft_target(void **state)
{
    struct rf_admission_input in = base();
    struct rf_admission_result r;

    (void)state;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_ADMITTED);
    assert_int_equal(r.cause, RF_ADMIT_CAUSE_FITS);
    assert_false(r.refused);
    assert_int_equal(r.request_bytes, 1000 * MIB);
    assert_int_equal(r.growth_bytes, 100 * MIB);
    assert_int_equal(r.soft_target_bytes, 1900 * MIB);
    assert_false(r.has_excess);
    assert_int_equal(r.excess_over, RF_ADMIT_BOUND_NONE);
    assert_false(r.excess_likely_anonymous);
    assert_false(r.hard_limit_checked);
    assert_false(r.has_binding);
    assert_non_null(strstr(r.reason, "no cgroup memory controller was found"));
    assert_non_null(strstr(r.reason, "fits the soft target"));
    assert_null(strchr(r.reason, '\n'));

    /* Exactly at the soft target still fits: 1800 + 100 = 1900. */
    in.process_rss = fig(1800 * MIB);
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_ADMITTED);
    assert_false(r.has_excess);
}

static void test_warning_over_soft_target(void **state)
{
    struct rf_admission_input in = base();
    struct rf_admission_result r;

    (void)state;
    /* 1850 + 100 = 1950 MiB against 1900: 50 MiB over; reclaimable 80 MiB covers it. */
    in.process_rss = fig(1850 * MIB);
    in.reclaimable = fig(80 * MIB);
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_WARNING);
    assert_int_equal(r.cause, RF_ADMIT_CAUSE_SOFT_TARGET);
    assert_int_equal(r.excess_bytes, 50 * MIB);
    assert_int_equal(r.excess_over, RF_ADMIT_BOUND_SOFT_TARGET);
    assert_false(r.excess_likely_anonymous);
    assert_true(r.has_reclaimable);
    assert_int_equal(r.reclaimable_bytes, 80 * MIB);
    assert_non_null(strstr(r.reason, "within the eligible-reclaimable estimate"));

    /* Reclaimable 49 MiB cannot cover 50 MiB: likely anonymous. */
    in.reclaimable = fig(49 * MIB);
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_true(r.excess_likely_anonymous);
    assert_non_null(strstr(r.reason, "page release may not address it"));

    /* Exactly covered: not anonymous. A warning never refuses, even under enforce. */
    in.reclaimable = fig(50 * MIB);
    in.mode = RF_ADMISSION_ENFORCE;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_false(r.excess_likely_anonymous);
    assert_false(r.refused);
}

static void test_soft_excess_without_estimate(void **state)
{
    struct rf_admission_input in = base();
    struct rf_admission_result r;

    (void)state;
    /* 2400 + 100 = 2500 MiB: 600 MiB over, more than the 100 MiB of anonymous growth. */
    in.process_rss = fig(2400 * MIB);
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.excess_bytes, 600 * MIB);
    assert_false(r.excess_likely_anonymous);

    /* Anonymous now 1801 MiB + growth 100 = 1901 MiB > the 1900 MiB soft target. */
    in.anonymous = fig(1801 * MIB);
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.anonymous_bytes, 1901 * MIB);
    assert_true(r.excess_likely_anonymous);
    in.anonymous = fig(1800 * MIB); /* 1900 MiB: not above */
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_false(r.excess_likely_anonymous);

    /* 1900 + 600 = 2500 MiB: the 600 MiB excess is all KV growth. */
    in.anonymous.has = false;
    in.process_rss = fig(1900 * MIB);
    in.kv_cache = fig(600 * MIB);
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.excess_bytes, 600 * MIB);
    assert_true(r.excess_likely_anonymous);
}

static void test_unknown_request(void **state)
{
    struct rf_admission_input in = base();
    struct rf_cgroup_level l = lvl("/sys/fs/cgroup/memory/job", 4096 * MIB, true, 0, true, 0);
    struct rf_admission_result r;

    (void)state;
    in.cgroups = &l;
    in.n_cgroups = 1;
    in.process_rss.has = false;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_UNKNOWN);
    assert_int_equal(r.cause, RF_ADMIT_CAUSE_UNKNOWN);
    assert_false(r.has_request);
    assert_false(r.hard_limit_checked);
    assert_true(r.cgroups[0].enforced);
    assert_false(r.refused); /* warn reports it */
    assert_non_null(strstr(r.reason, "process RSS is unknown"));
    assert_non_null(strstr(r.reason, "not admitted"));
    in.mode = RF_ADMISSION_ENFORCE;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_true(r.refused);

    in = base();
    in.kv_cache.has = false;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_UNKNOWN);
    assert_non_null(strstr(r.reason, "KV cache"));

    /* Before the load the mapped and repacked weights are needed too. */
    in = base();
    in.phase = RF_ADMISSION_PRE_LOAD;
    in.repacked_weights = fig(0);
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_UNKNOWN);
    assert_non_null(strstr(r.reason, "will map"));
    in.mapped_weights = fig(1000 * MIB);
    in.repacked_weights.has = false;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_non_null(strstr(r.reason, "repack"));
}

static void test_hard_limit_rejects(void **state)
{
    struct rf_admission_input in = base();
    struct rf_cgroup_level l = lvl("/sys/fs/cgroup/a", 1200 * MIB, true, 700 * MIB, false, 0);
    struct rf_admission_result r;

    (void)state;
    /*
     * Limit 1200 MiB, usage 700 MiB, inactive file unknown (nothing counted
     * reclaimable), RSS 400 MiB, KV 100 + scratch 500 = 600 MiB of growth:
     * 700 + 600 = 1300 MiB > 1200, although the 1000 MiB request fits the
     * 1900 MiB soft target.
     */
    in.process_rss = fig(400 * MIB);
    in.graph_scratch = fig(500 * MIB);
    in.cgroups = &l;
    in.n_cgroups = 1;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_REJECTED);
    assert_int_equal(r.cause, RF_ADMIT_CAUSE_HARD_LIMIT);
    assert_true(r.refused); /* warn refuses a charge over a hard limit */
    assert_true(r.hard_limit_checked);
    assert_true(r.has_binding);
    assert_int_equal(r.binding, 0);
    assert_int_equal(r.projected_charge_bytes, 1300 * MIB);
    assert_int_equal(r.hard_excess_bytes, 100 * MIB);
    assert_int_equal(r.cgroups[0].room_bytes, 500 * MIB);
    assert_false(r.cgroups[0].fits);
    assert_false(r.has_excess); /* within the soft target */
    assert_string_equal(r.hard_limit_source, "/sys/fs/cgroup/a/memory.limit_in_bytes");
    assert_non_null(strstr(r.reason, "hard limit of 1258291200 bytes of cgroup /sys/fs/cgroup/a"));
    assert_non_null(strstr(r.reason, "reclaimable file cache of /sys/fs/cgroup/a is unknown"));
    in.mode = RF_ADMISSION_OFF;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_REJECTED);
    assert_false(r.refused);

    /* Exactly at the limit passes: 700 + 100 + 400 = 1200. */
    in.mode = RF_ADMISSION_WARN;
    in.graph_scratch = fig(400 * MIB);
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_ADMITTED);
    assert_int_equal(r.projected_charge_bytes, 1200 * MIB);
    assert_false(r.has_hard_excess);
    assert_non_null(strstr(r.reason, "the binding one"));
}

/* The hard limit is authoritative over a soft warning, and a pass leaves the warning. */
static void test_hard_before_soft(void **state)
{
    struct rf_admission_input in = base();
    struct rf_cgroup_level l = lvl("/cg", 2048 * MIB, true, 100 * MIB, true, 0);
    struct rf_admission_result r;

    (void)state;
    in.process_rss = fig(100 * MIB);
    in.kv_cache = fig(2900 * MIB); /* request 3000 MiB: 1100 over; charge 100 + 2900 */
    in.cgroups = &l;
    in.n_cgroups = 1;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_REJECTED);
    assert_int_equal(r.hard_excess_bytes, 952 * MIB);
    assert_int_equal(r.excess_bytes, 1100 * MIB);
    assert_int_equal(r.excess_over, RF_ADMIT_BOUND_HARD_LIMIT);

    l.limit.bytes = 4096 * MIB;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_WARNING);
    assert_true(r.hard_limit_checked);
    assert_int_equal(r.excess_over, RF_ADMIT_BOUND_SOFT_TARGET);
    assert_int_equal(r.excess_bytes, 1100 * MIB);
}

/* Fault 2: inactive file cache is headroom, reported as reclaimable, not free. */
static void test_reclaimable_cache_is_headroom(void **state)
{
    struct rf_admission_input in;
    struct rf_cgroup_level l =
        lvl("/sys/fs/cgroup/memory/job", 1536 * MIB, true, 1500 * MIB, false, 0);
    struct rf_admission_result r;

    (void)state;
    memset(&in, 0, sizeof(in));
    in.process_rss = fig(400 * MIB);
    in.anonymous = fig(300 * MIB);
    in.kv_cache = fig(88 * MIB);
    in.graph_scratch = fig(70 * MIB);
    in.file_working_set = fig(100 * MIB);
    in.cgroups = &l;
    in.n_cgroups = 1;

    /* Cache unknown, as on main: 1500 + 158 = 1658 MiB > 1536, rejected by 122 MiB. */
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_REJECTED);
    assert_int_equal(r.hard_excess_bytes, 122 * MIB);

    /* 1000 MiB of it inactive file: 1500 - 1000 + 158 = 658 MiB; room 1536 - 500 = 1036. */
    l.reclaimable_file.has = true;
    l.reclaimable_file.error = 0;
    l.reclaimable_file.bytes = 1000 * MIB;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_ADMITTED);
    assert_int_equal(r.cgroups[0].reclaimable_bytes, 1000 * MIB);
    assert_int_equal(r.projected_charge_bytes, 658 * MIB);
    assert_int_equal(r.cgroups[0].room_bytes, 1036 * MIB);
    /* others 500 - 400 = 100, run room 1436 >= working set 100 + 300 + 158 = 558 */
    assert_int_equal(r.cgroups[0].run_room_bytes, 1436 * MIB);
    assert_int_equal(r.working_set_bytes, 558 * MIB);
    assert_true(r.cgroups[0].working_set_fits);
    assert_non_null(strstr(r.reason, "1048576000 bytes of clean unmapped file cache of "
                                     "/sys/fs/cgroup/memory/job (active and inactive lists) "
                                     "count as headroom: reclaimable, not free "
                                     "(/sys/fs/cgroup/memory/job/memory.stat total_active_file "
                                     "+ total_inactive_file - total_mapped_file)"));

    /* Inactive file above the usage (racy reads) counts at most the usage. */
    l.reclaimable_file.bytes = 2000 * MIB;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.cgroups[0].reclaimable_bytes, 1500 * MIB);
    assert_int_equal(r.projected_charge_bytes, 158 * MIB);
}

/* Fault 3: a limited parent with a sibling holding memory binds the run in another child. */
static void test_ancestor_limit_binds(void **state)
{
    struct rf_admission_input in;
    struct rf_cgroup_level l[3] = {
        lvl("/sys/fs/cgroup/memory/pod/run", NO_LIMIT, true, 300 * MIB, true, 0),
        lvl("/sys/fs/cgroup/memory/pod", 1024 * MIB, true, 900 * MIB, true, 0),
        lvl("/sys/fs/cgroup/memory", NO_LIMIT, true, 8000 * MIB, true, 0),
    };
    struct rf_admission_result r;

    (void)state;
    memset(&in, 0, sizeof(in));
    in.process_rss = fig(280 * MIB);
    in.kv_cache = fig(200 * MIB);
    in.cgroups = l;
    in.n_cgroups = 3;
    /* pod: 900 (its sibling's 600 MiB included) + 200 = 1100 MiB > 1024 */
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_REJECTED);
    assert_int_equal(r.binding, 1);
    assert_int_equal(r.hard_excess_bytes, 76 * MIB);
    assert_false(r.cgroups[0].enforced);
    assert_false(r.cgroups[0].checked);
    assert_false(r.cgroups[2].enforced);
    assert_string_equal(r.hard_limit_source, "/sys/fs/cgroup/memory/pod/memory.limit_in_bytes");
    assert_non_null(strstr(r.reason, "of cgroup /sys/fs/cgroup/memory/pod by 79691776 bytes"));

    /* The run's own looser limit does not bind: room 2048 - 300 = 1748 vs 1024 - 900 = 124. */
    l[0].limit.unlimited = false;
    l[0].limit.bytes = 2048 * MIB;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_REJECTED);
    assert_int_equal(r.binding, 1);
    assert_int_equal(r.cgroups[0].room_bytes, 1748 * MIB);
    assert_int_equal(r.cgroups[1].room_bytes, 124 * MIB);

    /* 100 MiB of the pod's charge is inactive file: 800 + 200 = 1000 MiB fits. */
    l[1].reclaimable_file.bytes = 100 * MIB;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_ADMITTED);
    assert_int_equal(r.binding, 1);
    assert_non_null(strstr(r.reason, "cgroup /sys/fs/cgroup/memory/pod (the binding one"));
}

/* Fault 4: an excess of KV cache over a hard limit is named anonymous without a target. */
static void test_kv_excess_named_without_target(void **state)
{
    struct rf_admission_input in;
    struct rf_cgroup_level l = lvl("/cg", 800 * MIB, true, 700 * MIB, true, 0);
    struct rf_admission_result r;

    (void)state;
    memset(&in, 0, sizeof(in));
    in.process_rss = fig(650 * MIB);
    in.anonymous = fig(600 * MIB);
    in.kv_cache = fig(352 * MIB); /* 22 layers * 16384 cells * 512 * 2 bytes */
    in.cgroups = &l;
    in.n_cgroups = 1;
    /* 700 + 352 = 1052 MiB > 800: 252 over; anonymous 952 MiB > run room 800 - 50 */
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_REJECTED);
    assert_int_equal(r.hard_excess_bytes, 252 * MIB);
    assert_false(r.has_soft_target);
    assert_false(r.has_excess);
    assert_int_equal(r.excess_over, RF_ADMIT_BOUND_HARD_LIMIT);
    assert_int_equal(r.cgroups[0].run_room_bytes, 750 * MIB);
    assert_true(r.excess_likely_anonymous);
    assert_non_null(strstr(r.reason, "likely anonymous"));

    /* Nothing but the growth known: 352 MiB of KV growth explains the 252 MiB. */
    in.anonymous.has = false;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_true(r.excess_likely_anonymous);

    /* An eligible-reclaimable estimate of 600 MiB could cover it. */
    in.reclaimable = fig(600 * MIB);
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_false(r.excess_likely_anonymous);
    assert_non_null(strstr(r.reason, "within the eligible-reclaimable estimate"));
}

/* test_thrash's run: tinyllama Q8_0 (every weight from the file) under the level l. */
static void thrash_input(struct rf_admission_input *in, struct rf_cgroup_level *l)
{
    memset(in, 0, sizeof(*in));
    in->process_rss = fig(760 * MIB);
    in->anonymous = fig(40 * MIB);
    in->kv_cache = fig(11 * MIB);
    in->graph_scratch = fig(5 * MIB);
    in->file_working_set = fig(1116 * MIB);
    in->cgroups = l;
    in->n_cgroups = 1;
}

/*
 * Issue 20, fault 8: the same run as test_thrash with the model on tmpfs:
 * its pages are memory, nothing is re-read from storage, so no thrash
 * verdict; the charge still decides.
 */
static void test_file_in_memory_no_thrash(void **state)
{
    struct rf_admission_input in;
    struct rf_cgroup_level l =
        lvl("/sys/fs/cgroup/memory/t", 800 * MIB, true, 795 * MIB, true, 560 * MIB);
    struct rf_admission_result r;

    (void)state;
    thrash_input(&in, &l);
    in.mode = RF_ADMISSION_ENFORCE;
    in.file_in_memory = rf_fs_in_memory_reason(0x01021994); /* TMPFS_MAGIC */
    assert_non_null(in.file_in_memory);
    assert_null(rf_fs_in_memory_reason(0xEF53)); /* ext4: a cache of storage */
    assert_null(rf_fs_in_memory_reason(0));      /* unknown filesystem */

    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_ADMITTED);
    assert_false(r.refused);
    assert_false(r.thrash);
    assert_false(r.cgroups[0].working_set_checked);
    assert_non_null(strstr(r.reason, "the decode's working set was not compared: the model file "
                                     "is on a filesystem whose pages are memory"));
    /* A charge over the hard limit is still rejected. */
    l.limit.bytes = 200 * MIB;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_REJECTED);
    assert_true(r.refused);
}

/*
 * s24read item 3: test_thrash's run in a fresh cgroup of its own (usage 60
 * MiB) on a warm file: the model mapping holds 720 MiB, 660 MiB more than
 * the cgroup's whole charge, so those pages are charged elsewhere and the
 * limit cannot evict them: not bound, never "will thrash". A cold mapping
 * (100 MiB resident: 40 MiB unbound) still thrashes. Under streaming too:
 * a plan over pages the limit cannot evict would stream nothing, and the
 * read-ahead would read from storage what the page cache holds.
 */
static void test_not_bound(void **state)
{
    struct rf_admission_input in;
    struct rf_cgroup_level l =
        lvl("/sys/fs/cgroup/memory/rf-run-1", 800 * MIB, true, 60 * MIB, true, 0);
    struct rf_admission_result r;
    char head[512], ways[1024];

    (void)state;
    thrash_input(&in, &l);
    in.mapping_rss = fig(720 * MIB);
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_WARNING);
    assert_int_equal(r.cause, RF_ADMIT_CAUSE_NOT_BOUND);
    assert_string_equal(rf_admission_cause_name(r.cause), "not_bound");
    assert_false(r.thrash);
    assert_true(r.has_unbound);
    assert_int_equal(r.unbound_level, 0);
    assert_int_equal(r.cgroups[0].unbound_bytes, 660 * MIB);
    assert_true(r.cgroups[0].working_set_unbound);
    assert_null(strstr(r.reason, "thrash:"));
    assert_non_null(strstr(r.reason, "at least 692060160 bytes of the model's pages are charged to "
                                     "another cgroup"));
    rf_admission_headline(&r, head, sizeof(head));
    assert_true(strncmp(head, "not bound: ", 11) == 0);
    rf_admission_ways_out(&r, ways, sizeof(ways));
    assert_non_null(strstr(ways, "evict the model file"));
    assert_null(strstr(ways, "streaming"));
    in.mode = RF_ADMISSION_ENFORCE; /* a warning, never a refusal */
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_false(r.refused);
    in.mode = RF_ADMISSION_WARN;

    in.mapping_rss = fig(100 * MIB);
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.cause, RF_ADMIT_CAUSE_THRASH);
    assert_true(r.thrash);
    assert_false(r.has_unbound);
    assert_int_equal(r.cgroups[0].unbound_bytes, 40 * MIB);

    in.mapping_rss = fig(720 * MIB);
    in.streaming = true;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_true(r.has_unbound);
    assert_int_equal(r.cause, RF_ADMIT_CAUSE_NOT_BOUND);
    assert_int_equal(r.cgroups[0].unbound_bytes, 660 * MIB);
    in.streaming = false;

    /* Before the load (and inspect's fit check) the same from the file's cached pages: 720
       MiB cached against a whole charge of 60 MiB, as run then finds after its load. */
    in.phase = RF_ADMISSION_PRE_LOAD;
    in.mapped_weights = fig(0);
    in.repacked_weights = fig(0);
    in.mapping_rss.has = false;
    in.model_cached = fig(720 * MIB);
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.cause, RF_ADMIT_CAUSE_NOT_BOUND);
    assert_int_equal(r.cgroups[0].unbound_bytes, 660 * MIB);
    assert_non_null(strstr(r.reason, "the model file's pages in the page cache: 754974720 bytes"));
    in.model_cached = fig(0); /* evicted: it thrashes */
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.cause, RF_ADMIT_CAUSE_THRASH);
}

/*
 * Issue 36 item 2: the small model cached by another cgroup, run under
 * --memory-limit 12MiB, as measured after the load: usage 7.27 MiB, all of
 * it anonymous (memory.stat mapped_file 0: the mapping's 19.60 MiB are
 * charged to the cgroup that cached the file), 9.21 MiB of anonymous memory
 * projected. The usage bounded the model's pages this cgroup could hold:
 * only 12.33 MiB counted unbound, 16.5 MiB of working set left against a
 * 12 MiB room, and "less than a minimum window fits: the kernel would kill
 * the run", rejected (with --admission off it ran, peak 9 MiB). The clean
 * mapped file pages bound it: every page of the mapping is another
 * cgroup's, not bound, admitted with the warning. The whole usage was
 * counted as the mapping's reclaimable pages, too: none of it is.
 */
static void test_not_bound_by_mapped_file(void **state)
{
    struct rf_admission_input in;
    struct rf_cgroup_level l =
        lvl("/sys/fs/cgroup/memory/rf-run-1", 12 * MIB, true, 7623147 /* 7.27 MiB */, true, 0);
    struct rf_admission_result r;

    (void)state;
    memset(&in, 0, sizeof(in));
    in.phase = RF_ADMISSION_AFTER_LOAD;
    in.mode = RF_ADMISSION_WARN;
    in.process_rss = fig(37 * MIB);
    in.anonymous = fig(8 * MIB);
    in.mapping_rss = fig(19 * MIB + 615 * 1024);
    in.locked = fig(0);
    in.kv_cache = fig(512 * 1024);
    in.graph_scratch = fig(254 * 1024);
    in.runtime = fig(640 * 1024);
    in.file_working_set = fig(19 * MIB + 615 * 1024);
    in.cgroups = &l;
    in.n_cgroups = 1;

    /* memory.stat without mapped_file (or not read): the usage bounds it, as before */
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_REJECTED);
    assert_non_null(strstr(r.reason, "the kernel would kill the run"));

    l.mapped_file.has = true;
    l.mapped_file.bytes = 0;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_WARNING);
    assert_int_equal(r.cause, RF_ADMIT_CAUSE_NOT_BOUND);
    assert_false(r.refused);
    assert_int_equal(r.cgroups[0].unbound_bytes, 19 * MIB + 615 * 1024);
    assert_int_equal(r.cgroups[0].mapping_reclaimable_bytes, 0);
    assert_int_equal(r.cgroups[0].reclaimable_bytes, 0);
    assert_non_null(strstr(r.reason, "more than the 0 bytes of it this cgroup can hold, its clean "
                                     "mapped file pages (memory.stat) and the mapping's locked "
                                     "ones"));

    /* A cold mapping read by the run itself is charged here: mapped, so bound; it thrashes. */
    l.usage.bytes = 28 * MIB;
    l.mapped_file.bytes = 19 * MIB;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_not_equal(r.cause, RF_ADMIT_CAUSE_NOT_BOUND);
    assert_int_equal(r.cgroups[0].mapping_reclaimable_bytes, 19 * MIB);
}

/*
 * Issue 36 item 1: before the context exists the compute buffer and the
 * runtime were counted 0. The estimates against the pinned build's
 * measured graph scratch (tinyllama: n_vocab 32000, n_embd 2048; small:
 * n_embd 256), capped at llama.cpp's default n_ubatch, checked.
 */
static void test_scratch_and_runtime_estimates(void **state)
{
    uint64_t v;

    (void)state;
    assert_int_equal(rf_admission_scratch_bytes(2, 32000, 2048, &v), 0);
    assert_int_equal(v, 288800); /* measured: 288800 */
    assert_int_equal(rf_admission_scratch_bytes(101, 32000, 2048, &v), 0);
    assert_int_equal(v, 14584400); /* measured: 14583200 */
    assert_int_equal(rf_admission_scratch_bytes(2, 32000, 256, &v), 0);
    assert_int_equal(v, 260128); /* measured: 260128 */
    assert_int_equal(rf_admission_scratch_bytes(0, 32000, 2048, &v), 0);
    assert_int_equal(v, 144400); /* one token at least */
    assert_int_equal(rf_admission_scratch_bytes(4096, 32000, 2048, &v), 0);
    assert_int_equal(v, 512 * 144400); /* n_ubatch 512 */
    assert_int_equal(rf_admission_scratch_bytes(2, UINT64_MAX, 2048, &v), -EOVERFLOW);
    assert_int_equal(v, 0);
    assert_int_equal(rf_admission_scratch_bytes(2, 1, 1, NULL), -EINVAL);

    assert_int_equal(rf_admission_runtime_bytes(32000, 2, &v), 0);
    assert_int_equal(v, 128000 + 2 * RF_ADMISSION_THREAD_BYTES);
    assert_int_equal(rf_admission_runtime_bytes(32000, 0, &v), 0);
    assert_int_equal(v, 128000 + RF_ADMISSION_THREAD_BYTES);
    assert_int_equal(rf_admission_runtime_bytes(UINT64_MAX, 1, &v), -EOVERFLOW);
}

/* Fault 1: a working set larger than the limit thrashes; the charge alone fits. */
static void test_thrash(void **state)
{
    struct rf_admission_input in;
    struct rf_cgroup_level l =
        lvl("/sys/fs/cgroup/memory/t", 800 * MIB, true, 795 * MIB, true, 560 * MIB);
    struct rf_admission_result r;

    (void)state;
    thrash_input(&in, &l);

    /*
     * Charge: 795 - 560 + 16 = 251 MiB fits. Working set: 1116 + 40 + 16 =
     * 1172 MiB; others max(0, 235 - 760) = 0, run room 800 MiB: thrash.
     * Only 800 - 56 = 744 MiB of weights fit.
     */
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_WARNING);
    assert_int_equal(r.cause, RF_ADMIT_CAUSE_THRASH);
    assert_false(r.refused);
    assert_true(r.cgroups[0].fits);
    assert_int_equal(r.projected_charge_bytes, 251 * MIB);
    assert_true(r.thrash);
    assert_int_equal(r.thrash_level, 0);
    assert_int_equal(r.working_set_bytes, 1172 * MIB);
    assert_int_equal(r.working_set_fit_bytes, 744 * MIB);
    assert_false(r.excess_likely_anonymous); /* 56 MiB of anonymous memory fits */
    assert_non_null(strstr(r.reason, "will thrash: 1170210816 bytes of weights are read from the "
                                     "file each token and only 780140544 bytes fit under the hard "
                                     "limit of 838860800 bytes of cgroup /sys/fs/cgroup/memory/t"));
    assert_non_null(strstr(r.reason, "a smaller model"));
    assert_non_null(strstr(r.reason, "a larger limit"));
    assert_non_null(strstr(r.reason, "or --residency-policy streaming"));
    /* a run already under streaming is not told to use it */
    in.streaming = true;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_true(r.thrash);
    assert_non_null(strstr(r.reason, "a larger limit"));
    assert_null(strstr(r.reason, "--residency-policy streaming"));
    in.streaming = false;

    in.mode = RF_ADMISSION_ENFORCE;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_REJECTED);
    assert_int_equal(r.cause, RF_ADMIT_CAUSE_THRASH);
    assert_true(r.refused);
    in.mode = RF_ADMISSION_OFF;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_WARNING);
    assert_false(r.refused);

    /* Under 1.5 GiB it fits: run room 1536 MiB >= 1172. */
    in.mode = RF_ADMISSION_ENFORCE;
    l.limit.bytes = 1536 * MIB;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_ADMITTED);
    assert_false(r.thrash);
    assert_true(r.cgroups[0].working_set_fits);

    /* Without the working set no thrash check runs, and it is listed unknown. */
    l.limit.bytes = 800 * MIB;
    in.file_working_set.has = false;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_ADMITTED);
    assert_false(r.cgroups[0].working_set_checked);
    assert_string_equal(r.unknown_components[r.n_unknown - 1], "FileWorkingSet");
}

/*
 * Issue 25, fixadm defect 1: a cold load fills the cgroup with the model's
 * own mapped pages (not unmapped cache, so not reclaimable_file). Under
 * every policy they are what the kernel can reclaim (re-read later): the
 * charge fits, the run room (others) is unchanged, the thrash verdict
 * stands; the locked part is not counted, nor anything while Locked is
 * unknown. (Before fixadm, the other policies were rejected here.)
 */
static void test_streaming_own_mapping_reclaimable(void **state)
{
    struct rf_admission_input in;
    struct rf_cgroup_level l =
        lvl("/sys/fs/cgroup/memory/t", 800 * MIB, true, 798 * MIB, true, 1 * MIB);
    struct rf_admission_result r;

    (void)state;
    thrash_input(&in, &l);
    in.mapping_rss = fig(720 * MIB);
    /* Locked unknown: 798 - 1 + 16 = 813 MiB over the limit: rejected, whatever the policy */
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.cause, RF_ADMIT_CAUSE_HARD_LIMIT);
    assert_int_equal(r.cgroups[0].mapping_reclaimable_bytes, 0);
    in.locked = fig(0);
    for (int streaming = 0; streaming <= 1; streaming++) {
        in.streaming = streaming;
        assert_int_equal(rf_admission_decide(&in, &r), 0);
        assert_int_equal(r.cause, RF_ADMIT_CAUSE_THRASH); /* 813 - 720 = 93 MiB fits */
        assert_true(r.cgroups[0].fits);
        assert_int_equal(r.projected_charge_bytes, 93 * MIB);
        assert_int_equal(r.cgroups[0].mapping_reclaimable_bytes, 720 * MIB);
        assert_int_equal(r.cgroups[0].run_room_bytes, (800 - 37) * MIB); /* others 797 - 760 */
        assert_true(r.thrash);
    }
    in.locked = fig(710 * MIB); /* locked pages are not reclaimable: 813 - 10 = 803 */
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.cause, RF_ADMIT_CAUSE_HARD_LIMIT);
    assert_int_equal(r.cgroups[0].mapping_reclaimable_bytes, 10 * MIB);
}

/*
 * fixadm defects 1 and 2: one rule for every policy. The trial's run
 * (tinyllama Q8_0, cold, -n 4 under a 300 MiB limit, default policy): after
 * the load the cgroup holds 298 MiB, 255 MiB of it the model mapping's own
 * unlocked pages. They are reclaimable (re-read: "will thrash", a warning),
 * never "the kernel would kill the run" (the kernel did not, --admission
 * off). Before the load, the same run gets the same outcome and cause.
 * Locked (pinned) pages are not reclaimable, and the same state gives the
 * same figures whether the policy streams or not. Before the load a cached
 * model is reclaimable cache, unless --mlock will lock it; after the load
 * the same pages, mapped, count the same.
 */
static void test_one_rule_every_policy(void **state)
{
    struct rf_cgroup_level l = lvl("/cg/rf-run-1", 300 * MIB, true, 298 * MIB, true, 2 * MIB);
    struct rf_admission_input in;
    struct rf_admission_result r, pre;

    (void)state;
    thrash_input(&in, &l);
    in.process_rss = fig(330 * MIB); /* shared libraries charged elsewhere too */
    in.anonymous = fig(30 * MIB);
    in.kv_cache = fig(6 * MIB);
    in.graph_scratch = fig(2 * MIB);
    in.mapping_rss = fig(255 * MIB);
    in.locked = fig(0);
    for (int mode = RF_ADMISSION_WARN; mode <= RF_ADMISSION_OFF; mode++) {
        in.mode = (enum rf_admission_mode)mode;
        bool enforce = in.mode == RF_ADMISSION_ENFORCE; /* refuses a thrash: its rule */
        assert_int_equal(rf_admission_decide(&in, &r), 0);
        assert_int_equal(r.outcome, enforce ? RF_ADMIT_REJECTED : RF_ADMIT_WARNING);
        assert_int_equal(r.cause, RF_ADMIT_CAUSE_THRASH);
        assert_true(r.refused == enforce);
        assert_true(r.cgroups[0].fits);
        assert_int_equal(r.cgroups[0].mapping_reclaimable_bytes, 255 * MIB);
        assert_int_equal(r.cgroups[0].reclaimable_bytes, 257 * MIB);
        assert_int_equal(r.projected_charge_bytes, (298 - 257 + 8) * MIB);
        assert_null(strstr(r.reason, "kill"));
        assert_non_null(strstr(r.reason, "will thrash"));
    }
    in.mode = RF_ADMISSION_WARN;

    /* Before the load: the process alone (11 MiB) in the fresh cgroup, the file cold. */
    struct rf_cgroup_level l0 = lvl("/cg/rf-run-1", 300 * MIB, true, 11 * MIB, true, 0);
    struct rf_admission_input p = in;
    p.cgroups = &l0;
    p.phase = RF_ADMISSION_PRE_LOAD;
    p.process_rss = fig(11 * MIB);
    p.anonymous = fig(8 * MIB);
    p.mapping_rss.has = false;
    p.mapped_weights = fig(1116 * MIB);
    p.repacked_weights = fig(0);
    p.model_cached = fig(0);
    p.loader_growth = fig(7 * MIB);
    p.page_tables = fig(2 * MIB);
    assert_int_equal(rf_admission_decide(&p, &pre), 0);
    assert_int_equal(pre.outcome, r.outcome);
    assert_int_equal(pre.cause, r.cause);
    assert_null(strstr(pre.reason, "kill"));

    /* Pinned: locked pages are not reclaimable, the same figures under every policy. */
    in.locked = fig(255 * MIB);
    for (int streaming = 0; streaming <= 1; streaming++) {
        in.streaming = streaming;
        assert_int_equal(rf_admission_decide(&in, &r), 0);
        assert_int_equal(r.cgroups[0].mapping_reclaimable_bytes, 0);
        assert_int_equal(r.cgroups[0].reclaimable_bytes, 2 * MIB);
        assert_int_equal(r.projected_charge_bytes, (298 - 2 + 8) * MIB);
        assert_int_equal(r.outcome, RF_ADMIT_REJECTED);
        assert_int_equal(r.cause, RF_ADMIT_CAUSE_HARD_LIMIT);
    }
    in.streaming = false;

    /* Warm: 1116 MiB of the model cached in this cgroup (unmapped cache) before the load. */
    struct rf_cgroup_level w = lvl("/cg", 1536 * MIB, true, 1200 * MIB, true, 1120 * MIB);
    p.cgroups = &w;
    p.model_cached = fig(1116 * MIB);
    p.mapped_weights = fig(0);
    assert_int_equal(rf_admission_decide(&p, &pre), 0);
    assert_int_equal(pre.cgroups[0].reclaimable_bytes, 1120 * MIB);
    assert_int_equal(pre.cgroups[0].run_room_bytes, (1536 - 69) * MIB); /* 1200-4-11-1116 */
    p.mlock_requested = true; /* the load will lock them */
    assert_int_equal(rf_admission_decide(&p, &pre), 0);
    assert_int_equal(pre.cgroups[0].reclaimable_bytes, 4 * MIB);
    assert_true(pre.mlock_requested);
    p.mlock_requested = false;
    /* After it: the same pages mapped (not in reclaimable_file), unlocked: the same figure. */
    w.reclaimable_file.bytes = 4 * MIB;
    in.cgroups = &w;
    in.mapping_rss = fig(1116 * MIB);
    in.locked = fig(0);
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.cgroups[0].reclaimable_bytes, 1120 * MIB);
    assert_int_equal(r.cgroups[0].mapping_reclaimable_bytes, 1116 * MIB);
}

/* Fault 5: the tokenized prompt and llama.cpp's padding set the KV cache. */
static void test_prompt_sets_kv(void **state)
{
    struct rf_admission_input in;
    struct rf_admission_result r;
    uint64_t cells, kv, junk;

    (void)state;
    /* 1100 prompt tokens + 32 generated - 1 = 1131 cells, padded to 256: 1280. */
    assert_int_equal(rf_admission_ctx_cells(0, 1100, 32, 256, &cells), 0);
    assert_int_equal(cells, 1280);
    /* tinyllama: 22 layers, K and V 256 wide (2048 / 32 * 4), f16: 27.5 MiB. */
    assert_int_equal(rf_admission_kv_bytes(22, cells, 256, 256, 2, &kv), 0);
    assert_int_equal(kv, 28835840);
    assert_int_equal(rf_admission_ctx_cells(1000, 1100, 32, 256, &cells), 0);
    assert_int_equal(cells, 1024); /* -c is padded too */
    assert_int_equal(rf_admission_ctx_cells(4096, 1, 1, 256, &cells), 0);
    assert_int_equal(cells, 4096);
    assert_int_equal(rf_admission_ctx_cells(0, 1, 1, 256, &cells), 0);
    assert_int_equal(cells, 256);
    assert_int_equal(rf_admission_ctx_cells(0, 0, 32, 256, &junk), -EINVAL);
    assert_int_equal(rf_admission_ctx_cells(0, 5, 0, 256, &junk), -EINVAL);
    assert_int_equal(rf_admission_ctx_cells(100, 5, 5, 0, &junk), -EINVAL);
    assert_int_equal(rf_admission_ctx_cells(UINT64_MAX, 1, 1, 256, &junk), -EOVERFLOW);
    assert_int_equal(rf_admission_kv_bytes(22, 0, 256, 256, 2, &junk), -EINVAL);
    assert_int_equal(rf_admission_kv_bytes(UINT64_MAX, 2, 256, 256, 2, &junk), -EOVERFLOW);

    /*
     * The run: --memory-target 1160MiB (1216348160 bytes), RSS
     * 1198022656. Main estimated 96 cells (2162688 bytes of KV): 1200185344
     * fits. With 27.5 MiB of KV and 70.5 MiB (73924608) of scratch the
     * request is 1300783104: 84434944 bytes over.
     */
    memset(&in, 0, sizeof(in));
    in.process_rss = fig(1198022656);
    in.kv_cache = fig(2162688);
    in.has_target = true;
    in.target_bytes = 1160 * MIB;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_ADMITTED);
    in.kv_cache = fig(kv);
    in.graph_scratch = fig(73924608);
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_WARNING);
    assert_int_equal(r.request_bytes, 1300783104);
    assert_int_equal(r.excess_bytes, 84434944);
}

/* Four 2-page tensors, no shared pages, walked to ReleaseEligible; a quiescent binding. */
static void reclaim_fixture(struct rf_inventory *inv, struct rf_lifetime *lt, struct rf_binding *b)
{
    struct rf_tensor_meta t[4];
    struct rf_mapping_meta m = fixture_mapping(0, 8 * PAGE);
    struct rf_native_lifetime nl = {true, 1, 1, true, 0, 0, 5};

    for (uint32_t i = 0; i < 4; i++)
        t[i] = fixture_tensor(i, 0, i * 2 * PAGE, 2 * PAGE,
                              i == 3 ? RF_ACCESS_ANONYMOUS : RF_ACCESS_FILE_BACKED);
    rf_inventory_init(inv);
    assert_int_equal(rf_inventory_build(t, 4, &m, 1, PAGE, 1, inv), 0);
    assert_int_equal(rf_lifetime_init(lt, 4), 0);
    for (size_t i = 0; i < 4; i++)
        assert_int_equal(fixture_walk(lt, i, fixture_to_eligible, FIXTURE_TO_ELIGIBLE_N), 0);
    rf_binding_bind(b, 1);
    rf_binding_observe(b, &nl, "after_load");
}

/* Fault 6: locked and released resources are not reclaimable now. */
static void test_reclaimable_now(void **state)
{
    static const enum rf_lifetime_state release[] = {RF_LT_RELEASE_SELECTED,
                                                     RF_LT_RELEASE_REQUESTED};
    struct rf_inventory inv;
    struct rf_lifetime lt;
    struct rf_binding b;
    struct rf_reclaimable_now rn;
    bool unlocked = false, locked = true;
    struct rf_native_lifetime busy = {true, 1, 1, false, 1, 1, 6};

    (void)state;
    memset(&b, 0, sizeof(b));
    reclaim_fixture(&inv, &lt, &b);
    /* Every tensor eligible (the anonymous one's file pages are dead): 4 * 8192. */
    assert_int_equal(rf_admission_reclaimable_now(&inv, &lt, &unlocked, &b, &rn), 0);
    assert_true(rn.has_value);
    assert_int_equal(rn.bytes, 4 * 2 * PAGE);
    assert_int_equal(rn.n_counted, 4);

    /* --mlock: the kernel refuses MADV_DONTNEED on the locked mapping: 0 bytes. */
    assert_int_equal(rf_admission_reclaimable_now(&inv, &lt, &locked, &b, &rn), 0);
    assert_true(rn.has_value);
    assert_int_equal(rn.bytes, 0);
    assert_int_equal(rn.n_locked, 4);

    /* t0 released (Reconciled), t1 failed, t2 shared or reused: only t3 remains. */
    assert_int_equal(fixture_walk(&lt, 0, release, 2), 0);
    assert_int_equal(fixture_walk(&lt, 1, release, 2), 0);
    assert_int_equal(rf_lifetime_advance(&lt, 0, RF_LT_NATIVE_ACCEPTED), 0);
    assert_int_equal(rf_lifetime_advance(&lt, 0, RF_LT_RECONCILED), 0);
    assert_int_equal(rf_lifetime_fail(&lt, 1, -EINVAL), 0);
    assert_int_equal(rf_lifetime_advance(&lt, 2, RF_LT_SHARED_OR_REUSED), 0);
    assert_int_equal(rf_admission_reclaimable_now(&inv, &lt, &unlocked, &b, &rn), 0);
    assert_int_equal(rn.bytes, 2 * PAGE);
    assert_int_equal(rn.n_counted, 1);
    assert_int_equal(rn.n_released, 1);
    assert_int_equal(rn.n_failed, 1);
    assert_int_equal(rn.n_shared, 1);
    assert_int_equal(rn.n_unknown, 0);

    /* Not quiescent: no value, with the binding's reason; counts are still given. */
    rf_binding_observe(&b, &busy, "session");
    assert_int_equal(rf_admission_reclaimable_now(&inv, &lt, &unlocked, &b, &rn), 0);
    assert_false(rn.has_value);
    assert_int_equal(rn.bytes, 0);
    assert_non_null(rn.reason);
    assert_int_equal(rn.n_released, 1);

    /* Argument errors. */
    assert_int_equal(rf_admission_reclaimable_now(&inv, &lt, NULL, &b, &rn), -EINVAL);
    lt.n = 3;
    assert_int_equal(rf_admission_reclaimable_now(&inv, &lt, &unlocked, &b, &rn), -EINVAL);
    lt.n = 4;
    rf_lifetime_free(&lt);
    rf_inventory_free(&inv);
}

static void test_lock_note(void **state)
{
    struct rf_admission_input in = base();
    struct rf_admission_result r;

    (void)state;
    in.mapping_rss = fig(1000 * MIB);
    in.locked = fig(0);
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_string_equal(r.lock_note, ""); /* not requested */
    in.mlock_requested = true;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_non_null(strstr(r.lock_note, "no page of the model mapping is locked"));
    in.locked = fig(500 * MIB);
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_non_null(strstr(r.lock_note, "only 524288000 of the 1048576000"));
    in.locked = fig(1000 * MIB);
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_string_equal(r.lock_note, "");
    in.locked.has = false; /* unknown: no claim either way */
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_string_equal(r.lock_note, "");
}

static void test_file_working_set(void **state)
{
    struct rf_tensor_meta t[4] = {
        fixture_tensor(0, 0, 0, 8192, RF_ACCESS_FILE_BACKED),      /* pages 0-1 */
        fixture_tensor(1, 0, 8192, 8192, RF_ACCESS_ANONYMOUS),     /* pages 2-3 */
        fixture_tensor(2, 0, 16000, 4000, RF_ACCESS_FILE_BACKED),  /* pages 3-4 */
        fixture_tensor(3, 0, 20480, 4096, RF_ACCESS_UNREFERENCED), /* page 5 */
    };
    struct rf_mapping_meta m = fixture_mapping(0, 8 * PAGE);
    struct rf_inventory inv;
    uint64_t ws = 1;

    (void)state;
    rf_inventory_init(&inv);
    assert_int_equal(rf_inventory_build(t, 4, &m, 1, PAGE, 1, &inv), 0);
    /* union of pages {0, 1} and {3, 4}: four pages */
    assert_int_equal(rf_admission_file_working_set(&inv, &ws), 0);
    assert_int_equal(ws, 4 * PAGE);
    assert_int_equal(rf_admission_file_working_set(NULL, &ws), -EINVAL);
    rf_inventory_free(&inv);
}

/* A limit that was read stays authoritative when its usage cannot be read. */
static void test_unknown_usage_keeps_limit(void **state)
{
    struct rf_admission_input in = base();
    struct rf_cgroup_level l[2] = {
        lvl("/sys/fs/cgroup/memory/job", 1024 * MIB, false, 0, true, 0),
        lvl("/sys/fs/cgroup/memory", NO_LIMIT, true, 4096 * MIB, true, 0),
    };
    struct rf_admission_result r;

    (void)state;
    in.cgroups = l;
    in.n_cgroups = 2;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_UNKNOWN);
    assert_int_equal(r.cause, RF_ADMIT_CAUSE_UNKNOWN);
    assert_false(r.refused);
    assert_true(r.cgroups[0].enforced);
    assert_false(r.cgroups[0].checked);
    assert_non_null(strstr(r.reason, "the hard limit of 1073741824 bytes "
                                     "(/sys/fs/cgroup/memory/job/memory.limit_in_bytes) is "
                                     "enforced but the usage of cgroup /sys/fs/cgroup/memory/job "
                                     "is unknown (/sys/fs/cgroup/memory/job/"
                                     "memory.usage_in_bytes: malformed)"));
    in.mode = RF_ADMISSION_ENFORCE;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_true(r.refused);

    /* A definite rejection elsewhere outranks the unknown: the root limited to 1000 MiB. */
    l[1].limit.unlimited = false;
    l[1].limit.bytes = 1000 * MIB;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_REJECTED);
    assert_int_equal(r.binding, 1);

    /* A truncated hierarchy is unknown too. */
    l[0].usage.has = true;
    l[0].usage.bytes = 0;
    l[1].limit.bytes = 8192 * MIB;
    in.cgroups_truncated = true;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_UNKNOWN);
    assert_non_null(strstr(r.reason, "more than 16 levels"));
}

/* v2 memory.high is a soft limit: warnings only, even under enforce. */
static void test_soft_limit_high(void **state)
{
    struct rf_admission_input in;
    struct rf_cgroup_level l = lvl("/sys/fs/cgroup/ctr", NO_LIMIT, true, 650 * MIB, true, 0);
    struct rf_admission_result r;

    (void)state;
    memset(&in, 0, sizeof(in));
    in.mode = RF_ADMISSION_ENFORCE;
    in.process_rss = fig(600 * MIB);
    in.anonymous = fig(100 * MIB);
    in.kv_cache = fig(100 * MIB);
    in.file_working_set = fig(1500 * MIB);
    l.high.has = true;
    l.high.error = 0;
    l.high.bytes = 700 * MIB;
    snprintf(l.high.source, sizeof(l.high.source), "/sys/fs/cgroup/ctr/memory.high");
    in.cgroups = &l;
    in.n_cgroups = 1;
    /* 650 + 100 = 750 MiB > 700 */
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_WARNING);
    assert_int_equal(r.cause, RF_ADMIT_CAUSE_SOFT_LIMIT);
    assert_false(r.refused);
    assert_false(r.hard_limit_checked);
    assert_int_equal(r.high_excess_bytes, 50 * MIB);
    assert_int_equal(r.excess_over, RF_ADMIT_BOUND_SOFT_LIMIT);
    assert_non_null(strstr(r.reason, "soft limit (memory.high) of 734003200 bytes"));

    /* high 2000 MiB: charge fits; working set 1500 + 200 = 1700 <= 2000 - 50 */
    l.high.bytes = 2000 * MIB;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_ADMITTED);
    /* working set 1900 + 200 = 2100 > 1950: will thrash, a warning */
    in.file_working_set = fig(1900 * MIB);
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_WARNING);
    assert_int_equal(r.cause, RF_ADMIT_CAUSE_THRASH);
    assert_true(r.thrash);
    assert_false(r.refused);
    assert_non_null(strstr(r.reason, "will thrash"));
    assert_non_null(strstr(r.reason, "--residency-policy streaming")); /* the way out */
    assert_non_null(strstr(r.reason, "soft limit (memory.high)"));
}

/*
 * Issue 20 fault 13, issue 24 item 3: under streaming a working set over the
 * limit "streams", it does not "thrash", and no way out names a smaller model
 * or streaming; the headline is one short line; the ways out carry figures.
 */
static void test_streaming_words(void **state)
{
    struct rf_admission_input in;
    struct rf_cgroup_level l =
        lvl("/sys/fs/cgroup/memory/t", 800 * MIB, true, 795 * MIB, true, 560 * MIB);
    struct rf_admission_result r;
    char head[512], ways[1024];

    (void)state;
    thrash_input(&in, &l);
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    rf_admission_headline(&r, head, sizeof(head));
    assert_true(strncmp(head, "will thrash: 1170210816 bytes of weights read per token", 55) == 0);
    assert_true(strlen(head) <= 160);
    assert_null(strstr(head, "/sys/fs/cgroup"));
    rf_admission_ways_out(&r, ways, sizeof(ways));
    assert_non_null(strstr(ways, "a limit larger by 390070272 bytes")); /* 1116 - 744 MiB */
    /* s24read item 2: 5.5 MiB is under a tenth of the 372 MiB that do not fit: not named */
    assert_null(strstr(ways, "half the context"));
    assert_non_null(strstr(ways, "--residency-policy streaming"));
    in.kv_cache = fig(100 * MIB); /* 50 MiB saved: over a tenth of the (now 461 MiB) excess */
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    rf_admission_ways_out(&r, ways, sizeof(ways));
    assert_non_null(strstr(ways, "half the context (-c) saves 52428800 bytes"));
    in.kv_cache = fig(11 * MIB);

    in.streaming = true;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.cause, RF_ADMIT_CAUSE_THRASH);
    assert_true(strncmp(r.reason, "streams: 1170210816 bytes of weights", 36) == 0);
    assert_null(strstr(r.reason, "will thrash"));
    assert_null(strstr(r.reason, "smaller model"));
    rf_admission_headline(&r, head, sizeof(head));
    assert_true(strncmp(head, "streams: ", 9) == 0);
    assert_true(strlen(head) <= 160);
    rf_admission_ways_out(&r, ways, sizeof(ways));
    assert_null(strstr(ways, "streaming"));
    assert_non_null(strstr(ways, "a limit larger by"));

    /* a plain fit has no way out */
    l.limit.bytes = 4000 * MIB;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_ADMITTED);
    rf_admission_ways_out(&r, ways, sizeof(ways));
    assert_string_equal(ways, "");
}

/* Issue 20 fault 13: two sentences of the reason are never glued. */
static void test_append_ends_sentence(void **state)
{
    struct rf_admission_result r;

    (void)state;
    memset(&r, 0, sizeof(r));
    snprintf(r.reason, sizeof(r.reason), "the charge fits (memory.stat)");
    rf_admission_append(&r, "Under --residency-policy streaming the admission after the load "
                            "decides.");
    assert_string_equal(r.reason, "the charge fits (memory.stat). Under --residency-policy "
                                  "streaming the admission after the load decides.");
    rf_admission_append(&r, "Next %d.", 2);
    assert_true(strstr(r.reason, "decides. Next 2.") != NULL);
    memset(&r, 0, sizeof(r));
    rf_admission_append(&r, "First.");
    assert_string_equal(r.reason, "First.");
    rf_admission_append(NULL, "nothing");
}

/*
 * Issue 24 (s24read item 1): a reason longer than its buffer is never cut in
 * the middle of a sentence: each sentence is there whole or not at all, and
 * the reason ends saying it was cut.
 */
static void test_append_never_cuts_a_sentence(void **state)
{
    struct rf_admission_result r;
    char want[64];
    int n = 0;

    (void)state;
    memset(&r, 0, sizeof(r));
    snprintf(r.reason, sizeof(r.reason), "the charge fits");
    /* A realistic streaming sentence (the one the trial saw cut) among many. */
    for (int i = 0; i < 200; i++)
        rf_admission_append(&r,
                            "Sentence %03d: admitted under --residency-policy streaming: 1 bytes "
                            "stream each token (an estimate; the file is read again each token).",
                            i);
    assert_true(r.reason_cut);
    size_t rl = strlen(r.reason), cl = strlen(RF_ADMISSION_CUT);
    assert_true(rl > cl);
    assert_string_equal(r.reason + rl - cl, RF_ADMISSION_CUT);
    for (int i = 0; i < 200; i++) {
        snprintf(want, sizeof(want), "Sentence %03d: ", i);
        const char *at = strstr(r.reason, want);
        if (!at)
            break;
        n++;
        assert_non_null(strstr(at, "read again each token). ")); /* whole, then the next */
    }
    assert_true(n > 20 && n < 200);
    snprintf(want, sizeof(want), "Sentence %03d: ", n);
    assert_null(strstr(r.reason, want)); /* nothing after the first one left out */
    rf_admission_append(&r, "Short.");
    assert_string_equal(r.reason + rl - cl, RF_ADMISSION_CUT); /* later ones are left out too */

    /* The headline of a cause without figures: a long first clause ends at a word, said so. */
    char head[512];
    memset(&r, 0, sizeof(r));
    r.outcome = RF_ADMIT_UNKNOWN;
    r.cause = RF_ADMIT_CAUSE_UNKNOWN;
    for (int i = 0; i < 30; i++)
        strcat(r.reason, "wordy ");
    strcat(r.reason, "end; more");
    rf_admission_headline(&r, head, sizeof(head));
    size_t hl = strlen(head), tail = strlen(" ... (the rest: -v)");
    assert_true(hl > tail && hl <= 160);
    assert_string_equal(head + hl - tail, " ... (the rest: -v)");
    assert_true(strncmp(head, r.reason, hl - tail) == 0 && r.reason[hl - tail] == ' ');
}

/*
 * Issue 24 item 2: a cold model under streaming in a cgroup of its own. Its
 * mapped pages are charged to that cgroup (usage 839 MiB of an 840 MiB limit
 * after the load); nothing of them locked, they are reclaimable under every
 * policy (fixadm defect 1: without streaming this was rejected, "the kernel
 * would kill the run", which the kernel did not): will thrash, a warning.
 */
static void test_streaming_cold_cgroup(void **state)
{
    struct rf_admission_input in;
    struct rf_cgroup_level l = lvl("/cg/rf-run-1", 840 * MIB, true, 839 * MIB, true, 0);
    struct rf_admission_result r;

    (void)state;
    thrash_input(&in, &l);
    in.process_rss = fig(839 * MIB);
    in.anonymous = fig(19 * MIB);
    in.mapping_rss = fig(820 * MIB); /* the cold model's pages the load read, unlocked */
    in.locked = fig(0);
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.projected_charge_bytes, (19 + 16) * MIB);
    assert_int_equal(r.cause, RF_ADMIT_CAUSE_THRASH);
    assert_int_equal(r.outcome, RF_ADMIT_WARNING);
    assert_null(strstr(r.reason, "kill"));
    in.streaming = true;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.projected_charge_bytes, (19 + 16) * MIB); /* anonymous + growth */
    assert_int_equal(r.cause, RF_ADMIT_CAUSE_THRASH);
    assert_int_equal(r.outcome, RF_ADMIT_WARNING);
    assert_false(r.refused);
    /* before the load nothing is mapped yet: the rule does not apply */
    in.phase = RF_ADMISSION_PRE_LOAD;
    in.mapped_weights = fig(1116 * MIB);
    in.repacked_weights = fig(0);
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_true(r.projected_charge_bytes > 839 * MIB);
}

/* Admission from GGUF-header estimates before the load. */
static void test_pre_load(void **state)
{
    struct rf_admission_input in;
    struct rf_cgroup_level l = lvl("/cg", 800 * MIB, true, 20 * MIB, true, 0);
    struct rf_admission_result r;

    (void)state;
    memset(&in, 0, sizeof(in));
    in.phase = RF_ADMISSION_PRE_LOAD;
    in.process_rss = fig(10 * MIB);
    in.anonymous = fig(8 * MIB);
    in.mapped_weights = fig(1116 * MIB);
    in.repacked_weights = fig(0);
    in.kv_cache = fig(11 * MIB);
    in.graph_scratch = fig(5 * MIB);
    in.file_working_set = fig(1116 * MIB);
    in.cgroups = &l;
    in.n_cgroups = 1;
    /*
     * request 10 + 16 + 1116 = 1142 MiB; charge 20 + 16 = 36 MiB fits (file
     * pages are the working set's); working set 1116 + 24 = 1140 MiB > run
     * room 800 - (20 - 10) = 790: thrash, before anything is loaded.
     */
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.phase, RF_ADMISSION_PRE_LOAD);
    assert_int_equal(r.request_bytes, 1142 * MIB);
    assert_int_equal(r.growth_bytes, 16 * MIB);
    assert_int_equal(r.projected_charge_bytes, 36 * MIB);
    assert_int_equal(r.cause, RF_ADMIT_CAUSE_THRASH);
    assert_int_equal(r.outcome, RF_ADMIT_WARNING);
    assert_int_equal(r.working_set_fit_bytes, 766 * MIB);
    assert_true(strncmp(r.reason, "before the load, from GGUF-header estimates: will thrash", 56) ==
                0);

    /* Q4_0: 536 MiB repacked into anonymous memory, 64 MiB read from the file, 1.5 GiB. */
    l.limit.bytes = 1536 * MIB;
    in.mapped_weights = fig(600 * MIB);
    in.repacked_weights = fig(536 * MIB);
    in.file_working_set = fig(64 * MIB);
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_ADMITTED);
    assert_int_equal(r.growth_bytes, 552 * MIB);
    assert_int_equal(r.anonymous_bytes, 560 * MIB);
    assert_int_equal(r.request_bytes, 1162 * MIB);

    /*
     * The file already cached in this cgroup (1200 MiB usage, nothing
     * inactive): without model_cached the cached model counts as others'
     * (run room 1536 - 1190 = 346 MiB < 1140: thrash); with it, 1462 MiB.
     */
    l.usage.bytes = 1200 * MIB;
    in.mapped_weights = fig(0);
    in.repacked_weights = fig(0);
    in.file_working_set = fig(1116 * MIB);
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.cause, RF_ADMIT_CAUSE_THRASH);
    assert_int_equal(r.cgroups[0].run_room_bytes, 346 * MIB);
    in.model_cached = fig(1116 * MIB);
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_ADMITTED);
    assert_int_equal(r.cgroups[0].run_room_bytes, 1462 * MIB);
    assert_int_equal(r.request_bytes, 1142 * MIB); /* the cached pages join the RSS too */
}

/*
 * Issue 20 fault 3: before the load, tinyllama Q8_0 (1169824160 bytes, 32000
 * tokens, 201 tensors) in a 20 MiB cgroup holding only the process (11 MiB),
 * -c 256 (KV 5.5 MiB). Without llama.cpp's own load growth and the page
 * tables of the mapping the charge was 16.5 MiB: admitted, then OOM-killed.
 * Counted (7.23 MiB + 2.18 MiB) it is 25.9 MiB: rejected in every mode.
 */
static void test_preload_counts_loader_and_page_tables(void **state)
{
    const uint64_t kv = UINT64_C(22) * 256 * 512 * 2;
    struct rf_cgroup_level l = lvl("/sys/fs/cgroup/child", 20 * MIB, true, 11 * MIB, true, 0);
    struct rf_admission_input in;
    struct rf_admission_result r;
    uint64_t loader, tables;

    (void)state;
    assert_int_equal(rf_admission_loader_bytes(32000, 201, &loader), 0);
    assert_int_equal(loader, UINT64_C(32000) * 224 + 201 * 2048);
    assert_int_equal(rf_admission_page_table_bytes(UINT64_C(1169824160), 4096, &tables), 0);
    assert_int_equal(tables, UINT64_C(285602) * 8); /* 2 KiB per MiB mapped: 2.18 MiB */
    assert_int_equal(rf_admission_page_table_bytes(8192, 4096, &tables), 0);
    assert_int_equal(tables, 16);
    assert_int_equal(rf_admission_page_table_bytes(1, 0, &tables), -EINVAL);
    assert_int_equal(rf_admission_loader_bytes(UINT64_MAX, 1, &loader), -EOVERFLOW);
    assert_int_equal(rf_admission_loader_bytes(32000, 201, &loader), 0);
    assert_int_equal(rf_admission_page_table_bytes(UINT64_C(1169824160), 4096, &tables), 0);

    memset(&in, 0, sizeof(in));
    in.phase = RF_ADMISSION_PRE_LOAD;
    in.process_rss = fig(11 * MIB);
    in.kv_cache = fig(kv);
    in.mapped_weights = fig(UINT64_C(1169824160));
    in.repacked_weights = fig(0);
    in.model_cached = fig(0);
    in.cgroups = &l;
    in.n_cgroups = 1;
    /* Unknown: listed, never counted as 0 silently; the charge alone fits. */
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.projected_charge_bytes, 11 * MIB + kv);
    assert_false(r.has_hard_excess);
    assert_true(has_unknown(&r, "LoaderGrowth"));
    assert_true(has_unknown(&r, "PageTables"));

    in.loader_growth = rf_admission_figure_of(loader, RF_PROV_ESTIMATED, "loader");
    in.page_tables = rf_admission_figure_of(tables, RF_PROV_ESTIMATED, "page tables");
    for (int mode = RF_ADMISSION_WARN; mode <= RF_ADMISSION_OFF; mode++) {
        in.mode = (enum rf_admission_mode)mode;
        assert_int_equal(rf_admission_decide(&in, &r), 0);
        assert_int_equal(r.outcome, RF_ADMIT_REJECTED);
        assert_int_equal(r.growth_bytes, kv + loader + tables);
        assert_int_equal(r.projected_charge_bytes, 11 * MIB + kv + loader + tables);
        assert_int_equal(r.hard_excess_bytes, 11 * MIB + kv + loader + tables - 20 * MIB);
        assert_false(has_unknown(&r, "LoaderGrowth"));
        assert_true(r.refused == (in.mode != RF_ADMISSION_OFF));
    }
}

/* The result lists each input with its provenance and source. */
static void test_records(void **state)
{
    struct rf_admission_input in = base();
    struct rf_admission_result r;

    (void)state;
    in.graph_scratch = rf_admission_figure_of(7, RF_PROV_NATIVE_LOGICAL, "memory breakdown");
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.n_records, 9);
    assert_string_equal(r.records[0].name, "process_rss");
    assert_true(r.records[0].has);
    assert_int_equal(r.records[0].bytes, 900 * MIB);
    assert_int_equal(r.records[0].provenance, RF_PROV_EXACT_MEASURED);
    assert_string_equal(r.records[5].name, "graph_scratch");
    assert_int_equal(r.records[5].provenance, RF_PROV_NATIVE_LOGICAL);
    assert_string_equal(r.records[5].source, "memory breakdown");
    assert_string_equal(r.records[1].name, "anonymous");
    assert_false(r.records[1].has);
    assert_int_equal(r.records[1].provenance, RF_PROV_UNKNOWN);
    assert_string_equal(r.records[1].source, "");

    in.phase = RF_ADMISSION_PRE_LOAD;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.n_records, 13); /* + loader_growth and page_tables (issue 20 fault 3) */
    assert_string_equal(r.records[5].name, "runtime"); /* issue 36: counted, or unknown */
    assert_string_equal(r.records[6].name, "mapped_weights");
    assert_string_equal(r.records[9].name, "loader_growth");
    assert_false(r.records[9].has);
    assert_string_equal(r.records[10].name, "page_tables");
}

/*
 * Issue 36 item 10: released during the load, a repacked weight's file pages leave as its
 * copy arrives, so the pre-load request (the load's peak) holds the copies once, plus the
 * largest weight twice; without the figure, the file and every copy. Recorded as an input.
 */
static void test_preload_release_during_load(void **state)
{
    struct rf_admission_input in;
    struct rf_admission_result r;

    (void)state;
    memset(&in, 0, sizeof(in));
    in.phase = RF_ADMISSION_PRE_LOAD;
    in.process_rss = fig(30 * MIB);
    in.kv_cache = fig(11 * MIB);
    in.mapped_weights = fig(591 * MIB);
    in.repacked_weights = fig(555 * MIB);
    in.model_cached = fig(0);
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.request_bytes, (30 + 11 + 591 + 555) * MIB);
    assert_int_equal(r.growth_bytes, (11 + 555) * MIB);

    in.load_release = rf_admission_figure_of(6 * MIB, RF_PROV_ESTIMATED, "largest");
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.request_bytes, (30 + 11 + 591 + 6) * MIB);
    assert_int_equal(r.growth_bytes, (11 + 555) * MIB); /* the copies stay: steady state */
    size_t k = 0;
    while (k < r.n_records && strcmp(r.records[k].name, "load_release") != 0)
        k++;
    assert_true(k < r.n_records);
    assert_int_equal(r.records[k].bytes, 6 * MIB);

    in.phase = RF_ADMISSION_AFTER_LOAD; /* after the load: nothing to count */
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    for (size_t i = 0; i < r.n_records; i++)
        assert_string_not_equal(r.records[i].name, "load_release");
}

static void test_checked_arithmetic(void **state)
{
    struct rf_admission_input in = base();
    struct rf_cgroup_level l = lvl("/cg", 4096 * MIB, true, UINT64_MAX - 10, true, 0);
    struct rf_admission_result r;

    (void)state;
    /* request + reserve overflows: rejected, not wrapped. */
    in.process_rss = fig(UINT64_MAX - 200 * MIB + 1);
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_REJECTED);
    assert_int_equal(r.cause, RF_ADMIT_CAUSE_OVERFLOW);
    assert_non_null(strstr(r.reason, "overflows"));
    in.process_rss = fig(UINT64_MAX - 200 * MIB); /* exactly fits: a warning */
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_WARNING);

    /* The request itself overflows. */
    in.process_rss = fig(UINT64_MAX - 99 * MIB);
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_REJECTED);
    assert_int_equal(r.cause, RF_ADMIT_CAUSE_OVERFLOW);

    /* A level's projected charge overflows. */
    in = base();
    in.has_target = false;
    in.cgroups = &l;
    in.n_cgroups = 1;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_REJECTED);
    assert_non_null(strstr(r.reason, "projected charge of cgroup /cg overflows"));
}

static void test_unknown_components_copied(void **state)
{
    static const char long_name[] = "AVeryLongComponentNameThatDoesNotFitInSixtyFourBytesOfStorage"
                                    "AtAllReally";
    struct rf_admission_input in = base();
    struct rf_admission_result r;

    (void)state;
    in.unknown_components[0] = "Runtime";
    in.unknown_components[1] = long_name;
    in.unknown_components[2] = "Runtime"; /* listed once */
    in.n_unknown = 3;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_ADMITTED); /* listed, not an outcome */
    assert_int_equal(r.n_unknown, 4);
    assert_string_equal(r.unknown_components[0], "Runtime");
    assert_int_equal(strlen(r.unknown_components[1]), RF_ADMISSION_NAME_MAX - 1);
    assert_memory_equal(r.unknown_components[1], long_name, RF_ADMISSION_NAME_MAX - 1);
    assert_string_equal(r.unknown_components[2], "GraphScratch");
    assert_string_equal(r.unknown_components[3], "FileWorkingSet");

    /* Listed with an unknown request too. */
    in.process_rss.has = false;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_UNKNOWN);
    assert_int_equal(r.n_unknown, 4);
}

static void test_invalid_arguments(void **state)
{
    struct rf_admission_input in = base();
    struct rf_admission_result r;
    struct rf_cgroup_level l = lvl("/cg", NO_LIMIT, true, 0, true, 0);

    (void)state;
    assert_int_equal(rf_admission_decide(NULL, &r), -EINVAL);
    assert_int_equal(rf_admission_decide(&in, NULL), -EINVAL);

    /* Target below (or at) the safety reserve. */
    in.reserve_bytes = in.target_bytes;
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
    assert_int_equal(r.n_records, 0);

    in = base();
    in.mode = (enum rf_admission_mode)3;
    assert_int_equal(rf_admission_decide(&in, &r), -EINVAL);
    in = base();
    in.phase = (enum rf_admission_phase)2;
    assert_int_equal(rf_admission_decide(&in, &r), -EINVAL);
    in = base();
    in.n_cgroups = 1; /* NULL cgroups */
    assert_int_equal(rf_admission_decide(&in, &r), -EINVAL);
    in.cgroups = &l;
    in.n_cgroups = RF_CGROUP_MAX_LEVELS + 1;
    assert_int_equal(rf_admission_decide(&in, &r), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_admitted_under_soft_target),
        cmocka_unit_test(test_warning_over_soft_target),
        cmocka_unit_test(test_soft_excess_without_estimate),
        cmocka_unit_test(test_unknown_request),
        cmocka_unit_test(test_hard_limit_rejects),
        cmocka_unit_test(test_hard_before_soft),
        cmocka_unit_test(test_reclaimable_cache_is_headroom),
        cmocka_unit_test(test_ancestor_limit_binds),
        cmocka_unit_test(test_kv_excess_named_without_target),
        cmocka_unit_test(test_thrash),
        cmocka_unit_test(test_not_bound),
        cmocka_unit_test(test_not_bound_by_mapped_file),
        cmocka_unit_test(test_scratch_and_runtime_estimates),
        cmocka_unit_test(test_streaming_words),
        cmocka_unit_test(test_append_ends_sentence),
        cmocka_unit_test(test_append_never_cuts_a_sentence),
        cmocka_unit_test(test_streaming_cold_cgroup),
        cmocka_unit_test(test_streaming_own_mapping_reclaimable),
        cmocka_unit_test(test_one_rule_every_policy),
        cmocka_unit_test(test_file_in_memory_no_thrash),
        cmocka_unit_test(test_prompt_sets_kv),
        cmocka_unit_test(test_reclaimable_now),
        cmocka_unit_test(test_lock_note),
        cmocka_unit_test(test_file_working_set),
        cmocka_unit_test(test_unknown_usage_keeps_limit),
        cmocka_unit_test(test_soft_limit_high),
        cmocka_unit_test(test_pre_load),
        cmocka_unit_test(test_records),
        cmocka_unit_test(test_preload_counts_loader_and_page_tables),
        cmocka_unit_test(test_preload_release_during_load),
        cmocka_unit_test(test_checked_arithmetic),
        cmocka_unit_test(test_unknown_components_copied),
        cmocka_unit_test(test_invalid_arguments),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
