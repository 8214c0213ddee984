/*
 * Tests for policy profiles, size parsing and release planning: a table of
 * size strings, hand-built inventories whose plans were worked out on
 * paper, parameter errors, and seeded random inventories checked against a
 * naive per-page model (which tensors cover each page, and which of them
 * the plan selected).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "ramforge/core/inventory.h"
#include "ramforge/core/policy.h"
#include "ramforge/error.h"
#include "test_util.h"

#define PAGE 4096
#define MiB (1024ULL * 1024)

/* ---- helpers ----------------------------------------------------------- */

static struct rf_plan_params params(enum rf_policy_profile profile)
{
    struct rf_plan_params p = rf_plan_default_params();

    p.profile = profile;
    p.binding_ok = true;
    return p;
}

static void with_target(struct rf_plan_params *p, uint64_t target, uint64_t reserve,
                        uint64_t resident)
{
    p->has_target = true;
    p->target_bytes = target;
    p->reserve_bytes = reserve;
    p->has_mapping_resident = true;
    p->mapping_resident_bytes = resident;
}

static bool plan_selects(const struct rf_plan *plan, uint32_t index)
{
    size_t i;

    for (i = 0; i < plan->n_selected; i++) {
        if (plan->selected[i] == index)
            return true;
    }
    return false;
}

static bool plan_releases(const struct rf_plan *plan, int32_t m, uint64_t page)
{
    size_t i;

    for (i = 0; i < plan->n_release; i++) {
        if (plan->release[i].mapping_index == m && plan->release[i].pages.first_page <= page &&
            page < plan->release[i].pages.end_page)
            return true;
    }
    return false;
}

/* ---- profiles ---------------------------------------------------------- */

/* The release modes: one spelling, parsed and named by one table. */
static void test_release_mode_names(void **state)
{
    enum rf_release_mode m = RF_RELEASE_PAGEOUT;

    (void)state;
    assert_int_equal(rf_release_mode_parse("dontneed", &m), 0);
    assert_int_equal(m, RF_RELEASE_DONTNEED);
    assert_string_equal(rf_release_mode_name(m), "dontneed");
    assert_int_equal(rf_release_mode_parse("pageout", &m), 0);
    assert_int_equal(m, RF_RELEASE_PAGEOUT);
    assert_string_equal(rf_release_mode_name(m), "pageout");
    assert_int_equal(rf_release_mode_parse("cold", &m), -EINVAL); /* watch's, not ours */
    assert_int_equal(rf_release_mode_parse("PageOut", &m), -EINVAL);
    assert_int_equal(rf_release_mode_parse(NULL, &m), -EINVAL);
    assert_int_equal(rf_release_mode_parse("pageout", NULL), -EINVAL);
    assert_int_equal(m, RF_RELEASE_PAGEOUT); /* unchanged on error */
    assert_null(rf_release_mode_name((enum rf_release_mode)2));
}

static void test_profile_names(void **state)
{
    static const char *const names[] = {"off",         "observe", "conservative", "memory-bound",
                                        "reuse-aware", "active",  "streaming"};
    enum rf_policy_profile p = RF_POLICY_ACTIVE;
    size_t i;

    (void)state;
    for (i = 0; i < 7; i++) {
        assert_int_equal(rf_policy_parse(names[i], &p), 0);
        assert_int_equal(p, (enum rf_policy_profile)i);
        assert_string_equal(rf_policy_name(p), names[i]);
    }
    p = RF_POLICY_OBSERVE;
    assert_int_equal(rf_policy_parse("Active", &p), -EINVAL);
    assert_int_equal(rf_policy_parse("memory_bound", &p), -EINVAL);
    assert_int_equal(rf_policy_parse("", &p), -EINVAL);
    assert_int_equal(rf_policy_parse(NULL, &p), -EINVAL);
    assert_int_equal(rf_policy_parse("off", NULL), -EINVAL);
    assert_int_equal(p, RF_POLICY_OBSERVE); /* unchanged on error */
    assert_null(rf_policy_name((enum rf_policy_profile)7));
    assert_true(rf_policy_plans(RF_POLICY_STREAMING));
    assert_false(rf_policy_mutates(RF_POLICY_STREAMING)); /* pins are not a release */
    assert_false(rf_policy_requires_target(RF_POLICY_STREAMING));

    assert_false(rf_policy_plans(RF_POLICY_OFF));
    assert_true(rf_policy_plans(RF_POLICY_OBSERVE));
    assert_true(rf_policy_plans(RF_POLICY_ACTIVE));
    assert_false(rf_policy_mutates(RF_POLICY_OFF));
    assert_false(rf_policy_mutates(RF_POLICY_OBSERVE));
    assert_true(rf_policy_mutates(RF_POLICY_CONSERVATIVE));
    assert_true(rf_policy_mutates(RF_POLICY_MEMORY_BOUND));
    assert_true(rf_policy_mutates(RF_POLICY_REUSE_AWARE));
    assert_true(rf_policy_mutates(RF_POLICY_ACTIVE));
    assert_false(rf_policy_requires_target(RF_POLICY_OBSERVE));
    assert_false(rf_policy_requires_target(RF_POLICY_CONSERVATIVE));
    assert_false(rf_policy_requires_target(RF_POLICY_REUSE_AWARE));
    assert_true(rf_policy_requires_target(RF_POLICY_MEMORY_BOUND));
    assert_true(rf_policy_requires_target(RF_POLICY_ACTIVE));
}

/* ---- sizes ------------------------------------------------------------- */

struct size_case {
    const char *s;
    int rc;
    uint64_t want; /* when rc == 0 */
};

/*
 * The rule (RF_SIZE_RULE) is Kubernetes' for a memory quantity: case-sensitive
 * suffixes, decimal exponents, fractions that give whole bytes; what
 * Kubernetes refuses or reads otherwise is refused (-EINVAL, with a hint).
 */
static void test_parse_size_table(void **state)
{
    static const struct size_case cases[] = {
        {"1", 0, 1},
        {"2", 0, 2}, /* a bare number is bytes, as in Kubernetes */
        {"4096", 0, 4096},
        {"007", 0, 7},
        {"512MiB", 0, 536870912ULL},
        {"512Mi", 0, 536870912ULL},
        {"2G", 0, 2000000000ULL}, /* decimal, as Kubernetes reads it */
        {"2Gi", 0, 2147483648ULL},
        {"2GiB", 0, 2147483648ULL},
        {"1k", 0, 1000},
        {"1Ki", 0, 1024},
        {"1KiB", 0, 1024},
        {"3M", 0, 3000000},
        {"3Mi", 0, 3 * MiB},
        {"1T", 0, 1000000000000ULL},
        {"1TiB", 0, 1ULL << 40},
        {"1P", 0, 1000000000000000ULL},
        {"1Pi", 0, 1ULL << 50},
        {"15EiB", 0, 15ULL << 60},
        {"15Ei", 0, 15ULL << 60},
        {"1E", 0, 1000000000000000000ULL},
        {"18E", 0, 18000000000000000000ULL},
        {"1.5Gi", 0, 1610612736ULL},
        {"1.5GiB", 0, 1610612736ULL},
        {".5Gi", 0, 536870912ULL}, /* Kubernetes' number: .5 and 5. */
        {"5.Gi", 0, 5ULL << 30},
        {"0.5k", 0, 500},
        {"0.5Ki", 0, 512},
        {"2.25MiB", 0, 2359296},
        {"0.001k", 0, 1},
        {"1.0000000000000000000000000Ki", 0, 1024},
        /* decimal exponents */
        {"1e9", 0, 1000000000ULL},
        {"1E9", 0, 1000000000ULL},
        {"1e+9", 0, 1000000000ULL},
        {"15e-1", -EDOM, 0},
        {"1500e-3", -EDOM, 0}, /* 1.5 bytes */
        {"1000e-3", 0, 1},
        {"2.5e3", 0, 2500},
        {"1e0", 0, 1},
        {"1e19", 0, 10000000000000000000ULL},
        {"1e20", -EOVERFLOW, 0},
        {"1e999999", -EOVERFLOW, 0},
        {"1e-999999", -EDOM, 0},
        {"1e", -EINVAL, 0},
        {"1e+", -EINVAL, 0},
        {"1e9Ki", -EINVAL, 0},
        {"1e1.5", -EINVAL, 0},
        /* whole bytes only */
        {"0.1Ki", -EDOM, 0},
        {"0.999Ki", -EDOM, 0},
        {"1.0000000000000000000000001Ki", -EDOM, 0},
        {"1.5", -EDOM, 0},
        {"0.0001k", -EDOM, 0},
        /* limits */
        {"18446744073709551615", 0, UINT64_MAX},
        {"18446744073709551616", -EOVERFLOW, 0},
        {"99999999999999999999999", -EOVERFLOW, 0},
        {"16Ei", -EOVERFLOW, 0},
        {"16EiB", -EOVERFLOW, 0},
        {"19E", -EOVERFLOW, 0},
        {"18446744073709551615k", -EOVERFLOW, 0},
        {"17179869184GiB", -EOVERFLOW, 0},                               /* 2^34 GiB = 2^64 */
        {"17179869183.999999999068677425384521484375Gi", -EOVERFLOW, 0}, /* 39 digits */
        {"18446744073709551.615k", 0, UINT64_MAX},
        {"18446744073709551.616k", -EOVERFLOW, 0}, /* the fraction tips it over */
        /* what Kubernetes refuses or reads otherwise */
        {"2GB", -EINVAL, 0},
        {"2gb", -EINVAL, 0},
        {"1KB", -EINVAL, 0},
        {"1K", -EINVAL, 0},   /* Kubernetes' kilo is k */
        {"300m", -EINVAL, 0}, /* milli in Kubernetes */
        {"2g", -EINVAL, 0},
        {"2gi", -EINVAL, 0},
        {"512mib", -EINVAL, 0},
        {"512MIB", -EINVAL, 0},
        {"10B", -EINVAL, 0},
        {"512 MiB", -EINVAL, 0},
        {"1.5 Gi", -EINVAL, 0},
        {"", -EINVAL, 0},
        {" ", -EINVAL, 0},
        {".", -EINVAL, 0},
        {"0", -EINVAL, 0},
        {"0Mi", -EINVAL, 0},
        {"0.0e5", -EINVAL, 0},
        {"-1M", -EINVAL, 0},
        {"-1", -EINVAL, 0},
        {"+1M", -EINVAL, 0},
        {" 1M", -EINVAL, 0},
        {"1M ", -EINVAL, 0},
        {"1\tM", -EINVAL, 0},
        {"1MiBx", -EINVAL, 0},
        {"1Mii", -EINVAL, 0},
        {"1X", -EINVAL, 0},
        {"M", -EINVAL, 0},
        {"1.2.3G", -EINVAL, 0},
        {"1,5G", -EINVAL, 0},
        {"0x10", -EINVAL, 0},
        {"99999999999999999999x", -EINVAL, 0}, /* syntax before size */
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint64_t v = 12345;
        int rc = rf_parse_size(cases[i].s, &v);

        if (rc != cases[i].rc)
            fail_msg("\"%s\": rc %d, want %d", cases[i].s, rc, cases[i].rc);
        if (rc == 0 && v != cases[i].want)
            fail_msg("\"%s\": %llu, want %llu", cases[i].s, (unsigned long long)v,
                     (unsigned long long)cases[i].want);
        if (rc != 0 && v != 12345)
            fail_msg("\"%s\": output written on error", cases[i].s);
    }
    assert_int_equal(rf_parse_size(NULL, &(uint64_t){0}), -EINVAL);
    assert_int_equal(rf_parse_size("1M", NULL), -EINVAL);
}

/* A refused spelling with an obvious meaning gets the spelling to use. */
static void test_size_hint(void **state)
{
    static const struct {
        const char *s, *hint;
    } cases[] = {
        {"2GB", "write 2G (decimal) or 2Gi (binary), as Kubernetes writes them"},
        {"512K", "write 512k (decimal) or 512Ki (binary), as Kubernetes writes them"},
        {"1kb", "write 1k (decimal) or 1Ki (binary), as Kubernetes writes them"},
        {"300m", "m is milli (thousandths of a byte) in Kubernetes: write 300M (decimal) or "
                 "300Mi (binary)"},
        {"2gi", "write 2Gi (suffixes are case-sensitive, as in Kubernetes)"},
        {"512mib", "write 512MiB (suffixes are case-sensitive, as in Kubernetes)"},
        {"1.5 Gi", "write 1.5Gi (no space)"},
        {"10B", "write 10 (a number alone is bytes)"},
        {"4 ", "write 4 (no space)"},
        {"2g", "write 2G (decimal) or 2Gi (binary), as Kubernetes writes them"},
    };
    char buf[160];

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint64_t v;
        assert_int_equal(rf_parse_size(cases[i].s, &v), -EINVAL);
        assert_true(rf_size_hint(cases[i].s, buf, sizeof(buf)));
        if (strcmp(buf, cases[i].hint) != 0)
            fail_msg("\"%s\": hint \"%s\", want \"%s\"", cases[i].s, buf, cases[i].hint);
    }
    /* no hint: valid sizes, junk, a broken number */
    assert_false(rf_size_hint("2Gi", buf, sizeof(buf)));
    assert_string_equal(buf, "");
    assert_false(rf_size_hint("1X", buf, sizeof(buf)));
    assert_false(rf_size_hint("1.2.3GB", buf, sizeof(buf)));
    assert_false(rf_size_hint("GB", buf, sizeof(buf)));
    assert_false(rf_size_hint(NULL, buf, sizeof(buf)));
}

/* Every n x unit spelled with a fraction agrees with integer arithmetic: whole bytes, or
 * -EDOM when the fraction leaves part of a byte. */
static void test_parse_size_fractions_exact(void **state)
{
    static const struct {
        const char *suffix;
        uint64_t mult;
    } units[] = {{"k", 1000},          {"Ki", 1024},        {"MiB", 1ULL << 20},
                 {"G", 1000000000ULL}, {"TiB", 1ULL << 40}, {"E", 1000000000000000000ULL}};
    size_t u;
    unsigned whole, milli;

    (void)state;
    for (u = 0; u < sizeof(units) / sizeof(units[0]); u++) {
        for (whole = 0; whole < 5; whole++) {
            for (milli = 0; milli < 1000; milli += 7) {
                char s[64];
                uint64_t m = units[u].mult, v = 0;
                uint64_t want = whole * m + milli * (m / 1000) + milli * (m % 1000) / 1000;
                bool exact = milli * (m % 1000) % 1000 == 0;
                int rc;

                snprintf(s, sizeof(s), "%u.%03u%s", whole, milli, units[u].suffix);
                rc = rf_parse_size(s, &v);
                if (want == 0 && exact) {
                    assert_int_equal(rc, -EINVAL);
                    continue;
                }
                if (!exact) {
                    if (rc != -EDOM)
                        fail_msg("\"%s\": rc %d, want -EDOM", s, rc);
                    continue;
                }
                if (rc != 0 || v != want)
                    fail_msg("\"%s\": rc %d, %llu, want %llu", s, rc, (unsigned long long)v,
                             (unsigned long long)want);
            }
        }
    }
}

/* ---- plans on hand-built inventories ----------------------------------- */

/*
 * Case S, one 40-page file, 4 KiB pages (page numbers in braces):
 *   t0 [0, 8192)           {0,1}      file-backed, unique
 *   t1 [8192, 10000)       {2}        file-backed, shares page 2 with t2
 *   t2 [10000, 20480)      {2,3,4}    file-backed, shares page 2 with t1
 *   t3 [20480, 24576)      {5}        anonymous copy: dead, unique
 *   t4 [24576, 40960)      {6..9}     file-backed, unique (the largest)
 *   t5 [40960, 45000)      {10}       dead, shares page 10 with t6
 *   t6 [45000, 49152)      {10,11}    unreferenced: ineligible
 *   t7 [49152, 57344)      {12,13}    dead, unique
 */
static void case_s(struct rf_inventory *inv)
{
    struct rf_tensor_meta t[8];
    struct rf_mapping_meta m = fixture_mapping(0, 40 * PAGE);

    t[0] = fixture_tensor(0, 0, 0, 8192, RF_ACCESS_FILE_BACKED);
    t[1] = fixture_tensor(1, 0, 8192, 1808, RF_ACCESS_FILE_BACKED);
    t[2] = fixture_tensor(2, 0, 10000, 10480, RF_ACCESS_FILE_BACKED);
    t[3] = fixture_tensor(3, 0, 20480, 4096, RF_ACCESS_ANONYMOUS);
    t[4] = fixture_tensor(4, 0, 24576, 16384, RF_ACCESS_FILE_BACKED);
    t[5] = fixture_tensor(5, 0, 40960, 4040, RF_ACCESS_ANONYMOUS);
    t[6] = fixture_tensor(6, 0, 45000, 4152, RF_ACCESS_UNREFERENCED);
    t[7] = fixture_tensor(7, 0, 49152, 8192, RF_ACCESS_ANONYMOUS);
    rf_inventory_init(inv);
    assert_int_equal(rf_inventory_build(t, 8, &m, 1, PAGE, 7, inv), 0);
    assert_int_equal(inv->entries[1].shared_page_bytes, PAGE);
    assert_int_equal(inv->entries[2].shared_page_bytes, PAGE);
    assert_int_equal(inv->entries[5].shared_page_bytes, PAGE);
    assert_int_equal(inv->entries[6].eligibility, RF_INELIGIBLE_UNREFERENCED);
}

static void test_off_is_empty(void **state)
{
    struct rf_inventory inv;
    struct rf_plan plan;
    struct rf_plan_params p = params(RF_POLICY_OFF);

    (void)state;
    case_s(&inv);
    rf_plan_init(&plan);
    with_target(&p, 100 * PAGE, 0, 200 * PAGE);
    assert_int_equal(rf_plan_build(&inv, &p, &plan), 0);
    assert_int_equal(plan.profile, RF_POLICY_OFF);
    assert_false(plan.applied_profile);
    assert_int_equal(plan.n_selected, 0);
    assert_int_equal(plan.n_release, 0);
    assert_int_equal(plan.release_bytes, 0);
    assert_int_equal(plan.generation, 7);
    assert_non_null(strstr(plan.reason, "off"));
    rf_plan_free(&plan);
    rf_plan_free(NULL);
    rf_inventory_free(&inv);
}

static void test_conservative_no_target_dead_only(void **state)
{
    struct rf_inventory inv;
    struct rf_plan plan;
    struct rf_plan_params p = params(RF_POLICY_CONSERVATIVE);

    (void)state;
    case_s(&inv);
    rf_plan_init(&plan);
    assert_int_equal(rf_plan_build(&inv, &p, &plan), 0);
    assert_true(plan.applied_profile);
    assert_false(plan.has_soft_target);
    assert_false(plan.has_estimated_resident_after);
    assert_false(plan.target_met);
    /*
     * Every dead tensor with no shared page: t7 (2 unique pages), t3 (1); not t5
     * (its only page 10 is shared with t6: conservative never selects it).
     */
    assert_int_equal(plan.n_candidates, 2);
    assert_int_equal(plan.n_selected, 2);
    assert_int_equal(plan.selected[0], 7);
    assert_int_equal(plan.selected[1], 3);
    assert_int_equal(plan.selected_logical_bytes, 8192 + 4096);
    assert_int_equal(plan.n_release, 2);
    assert_int_equal(plan.release[0].mapping_index, 0);
    assert_int_equal(plan.release[0].pages.first_page, 5);
    assert_int_equal(plan.release[0].pages.end_page, 6);
    assert_int_equal(plan.release[1].pages.first_page, 12);
    assert_int_equal(plan.release[1].pages.end_page, 14);
    assert_int_equal(plan.release_pages, 3);
    assert_int_equal(plan.release_bytes, 3 * PAGE);
    assert_int_equal(plan.shared_bytes_protected, 0);
    assert_null(strstr(plan.reason, "waived"));

    /*
     * The explicit after-load release (dead_pages_only) takes t5 too, its page protected:
     * the exception to conservative's zero-shared rule, said in the plan's reason.
     */
    p.dead_pages_only = true;
    assert_int_equal(rf_plan_build(&inv, &p, &plan), 0);
    assert_int_equal(plan.n_selected, 3);
    assert_int_equal(plan.selected[2], 5);
    assert_int_equal(plan.release_bytes, 3 * PAGE);
    assert_int_equal(plan.shared_bytes_protected, PAGE); /* page 10 */
    assert_int_equal(plan.n_shared_dead_selected, 1);
    assert_non_null(strstr(plan.reason, "rule (only tensors with zero shared page bytes) is "
                                        "waived for dead file pages, never read again: 1 of "
                                        "the selected share pages"));
    rf_plan_free(&plan);
    rf_inventory_free(&inv);
}

static void test_conservative_with_target(void **state)
{
    struct rf_inventory inv;
    struct rf_plan plan;
    struct rf_plan_params p = params(RF_POLICY_CONSERVATIVE);
    size_t i;

    (void)state;
    case_s(&inv);
    rf_plan_init(&plan);
    /*
     * Resident 14 pages, soft target 7: dead t7, t3 (t5 shares page 10 with t6: not a
     * candidate), then the unshared live t4, t0 (9 pages).
     */
    with_target(&p, 8 * PAGE, PAGE, 14 * PAGE);
    assert_int_equal(rf_plan_build(&inv, &p, &plan), 0);
    assert_int_equal(plan.soft_target_bytes, 7 * PAGE);
    assert_int_equal(plan.n_candidates, 4);
    assert_int_equal(plan.n_selected, 3); /* 14 -> 12 -> 11 -> 7: met */
    assert_int_equal(plan.selected[0], 7);
    assert_int_equal(plan.selected[1], 3);
    assert_int_equal(plan.selected[2], 4);
    assert_int_equal(plan.release_bytes, 7 * PAGE);
    assert_int_equal(plan.estimated_resident_after_bytes, 7 * PAGE);
    assert_true(plan.target_met);
    for (i = 0; i < plan.n_selected; i++)
        assert_int_not_equal(plan.selected[i], 5);

    /* Soft target 4: the candidates run out, not met. */
    with_target(&p, 5 * PAGE, PAGE, 14 * PAGE);
    assert_int_equal(rf_plan_build(&inv, &p, &plan), 0);
    assert_int_equal(plan.n_selected, 4);
    assert_int_equal(plan.selected[3], 0);
    assert_int_equal(plan.release_bytes, 9 * PAGE);
    assert_true(plan.has_estimated_resident_after);
    assert_int_equal(plan.estimated_resident_after_bytes, 5 * PAGE);
    assert_false(plan.target_met);
    /* Never a live tensor with shared pages; no page of an unselected tensor. */
    for (i = 0; i < plan.n_selected; i++)
        if (inv.entries[plan.selected[i]].eligibility == RF_ELIGIBLE)
            assert_int_equal(inv.entries[plan.selected[i]].shared_page_bytes, 0);
    for (i = 0; i < inv.n; i++) {
        uint64_t pg;

        if (plan_selects(&plan, inv.entries[i].key.tensor_index))
            continue;
        for (pg = inv.entries[i].pages.first_page; pg < inv.entries[i].pages.end_page; pg++)
            assert_false(plan_releases(&plan, 0, pg));
    }
    assert_int_equal(plan.shared_bytes_protected, 0); /* t5 (page 10 shared with t6) is out */

    /* A target without a resident measurement: dead-file-pages only, and the reason says so. */
    p.has_mapping_resident = false;
    assert_int_equal(rf_plan_build(&inv, &p, &plan), 0);
    assert_int_equal(plan.n_selected, 2); /* t7, t3 (not t5: a shared page) */
    assert_false(plan.has_estimated_resident_after);
    assert_false(plan.target_met);
    assert_non_null(strstr(plan.reason, "not measured"));
    rf_plan_free(&plan);
    rf_inventory_free(&inv);
}

static void test_memory_bound_order_and_target(void **state)
{
    struct rf_inventory inv;
    struct rf_plan plan;
    struct rf_plan_params p = params(RF_POLICY_MEMORY_BOUND);

    (void)state;
    case_s(&inv);
    rf_plan_init(&plan);
    /*
     * Order: dead t7 (2 unique pages), t3 (1), t5 (0 unique: page 10 shared with
     * t6); then t4 (4), t0 (2), t2 (2 unique), t1 (0 unique). Resident 14, soft
     * target 14 - 8 = 6 pages: t7, t3 -> 11; t5 releases nothing (t6
     * protects page 10) -> 11; t4 -> 7; t0 -> 5 <= 6: stop.
     */
    with_target(&p, 8 * PAGE, 2 * PAGE, 14 * PAGE);
    assert_int_equal(rf_plan_build(&inv, &p, &plan), 0);
    assert_true(plan.applied_profile);
    assert_false(plan.profile_used);
    assert_int_equal(plan.n_candidates, 7);
    assert_int_equal(plan.n_selected, 5);
    assert_int_equal(plan.selected[0], 7);
    assert_int_equal(plan.selected[1], 3);
    assert_int_equal(plan.selected[2], 5);
    assert_int_equal(plan.selected[3], 4);
    assert_int_equal(plan.selected[4], 0);
    assert_int_equal(plan.release_bytes, 9 * PAGE);
    assert_int_equal(plan.shared_bytes_protected, PAGE); /* page 10 */
    assert_false(plan_releases(&plan, 0, 10));
    assert_int_equal(plan.estimated_resident_after_bytes, 5 * PAGE);
    assert_true(plan.target_met);
    assert_int_equal(plan.n_release, 3); /* {0,1}, {5..9}, {12,13} */
    assert_int_equal(plan.release[1].pages.first_page, 5);
    assert_int_equal(plan.release[1].pages.end_page, 10);
    rf_plan_free(&plan);

    /* Unreachable: every candidate, pages shared only by selected tensors released. */
    with_target(&p, 2 * PAGE, PAGE, 14 * PAGE);
    assert_int_equal(rf_plan_build(&inv, &p, &plan), 0);
    assert_int_equal(plan.n_selected, 7);
    assert_int_equal(plan.selected[5], 2);
    assert_int_equal(plan.selected[6], 1);
    assert_true(plan_releases(&plan, 0, 2)); /* t1 and t2 both selected */
    assert_false(plan_releases(&plan, 0, 10));
    assert_false(plan_releases(&plan, 0, 11));
    assert_int_equal(plan.release_bytes, 12 * PAGE); /* pages 0..9, 12, 13 */
    assert_int_equal(plan.shared_bytes_protected, PAGE);
    assert_int_equal(plan.estimated_resident_after_bytes, 2 * PAGE);
    assert_false(plan.target_met);
    assert_int_equal(plan.n_release, 2);
    assert_int_equal(plan.release[0].pages.first_page, 0);
    assert_int_equal(plan.release[0].pages.end_page, 10);
    assert_int_equal(plan.release[1].pages.first_page, 12);
    assert_int_equal(plan.release[1].pages.end_page, 14);

    /* Already within the target: nothing to select, target met. */
    with_target(&p, 20 * PAGE, PAGE, 14 * PAGE);
    assert_int_equal(rf_plan_build(&inv, &p, &plan), 0);
    assert_int_equal(plan.n_selected, 0);
    assert_true(plan.target_met);
    assert_int_equal(plan.estimated_resident_after_bytes, 14 * PAGE);

    /* Resident smaller than the release: the estimate floors at zero. */
    with_target(&p, 2 * PAGE, PAGE, 4 * PAGE);
    assert_int_equal(rf_plan_build(&inv, &p, &plan), 0);
    assert_int_equal(plan.n_selected, 2); /* t7 (2), t3 (1): 4 - 3 = 1 <= 1 */
    with_target(&p, 2 * PAGE, PAGE, 2 * PAGE + 5);
    assert_int_equal(rf_plan_build(&inv, &p, &plan), 0);
    assert_int_equal(plan.n_selected, 1);
    assert_int_equal(plan.estimated_resident_after_bytes, 5);
    with_target(&p, 3, 1, 2 * PAGE + 5);
    assert_int_equal(rf_plan_build(&inv, &p, &plan), 0);
    assert_int_equal(plan.n_selected, 2);
    assert_int_equal(plan.estimated_resident_after_bytes, 0);
    assert_true(plan.target_met);

    /* No resident measurement: nothing selected, and why. */
    p.has_mapping_resident = false;
    assert_int_equal(rf_plan_build(&inv, &p, &plan), 0);
    assert_int_equal(plan.n_selected, 0);
    assert_int_equal(plan.n_release, 0);
    assert_false(plan.target_met);
    assert_false(plan.has_estimated_resident_after);
    assert_non_null(strstr(plan.reason, "not measured"));
    rf_plan_free(&plan);
    rf_inventory_free(&inv);
}

static void test_active_is_memory_bound(void **state)
{
    struct rf_inventory inv;
    struct rf_plan a, mb;
    struct rf_plan_params p = params(RF_POLICY_MEMORY_BOUND);
    size_t i;

    (void)state;
    case_s(&inv);
    rf_plan_init(&a);
    rf_plan_init(&mb);
    with_target(&p, 8 * PAGE, 2 * PAGE, 14 * PAGE);
    assert_int_equal(rf_plan_build(&inv, &p, &mb), 0);
    p.profile = RF_POLICY_ACTIVE;
    assert_int_equal(rf_plan_build(&inv, &p, &a), 0);
    assert_int_equal(a.profile, RF_POLICY_ACTIVE);
    assert_true(a.applied_profile);
    assert_int_equal(a.n_selected, mb.n_selected);
    for (i = 0; i < a.n_selected; i++)
        assert_int_equal(a.selected[i], mb.selected[i]);
    assert_int_equal(a.release_bytes, mb.release_bytes);
    rf_plan_free(&a);
    rf_plan_free(&mb);
    rf_inventory_free(&inv);
}

static void test_observe(void **state)
{
    struct rf_inventory inv;
    struct rf_plan plan;
    struct rf_plan_params p = params(RF_POLICY_OBSERVE);

    (void)state;
    case_s(&inv);
    rf_plan_init(&plan);
    assert_int_equal(rf_plan_build(&inv, &p, &plan), 0); /* no target: nothing */
    assert_false(plan.applied_profile);
    assert_int_equal(plan.n_selected, 0);
    assert_non_null(strstr(plan.reason, "no target"));
    with_target(&p, 8 * PAGE, 2 * PAGE, 14 * PAGE);
    assert_int_equal(rf_plan_build(&inv, &p, &plan), 0);
    assert_false(plan.applied_profile);
    assert_int_equal(plan.n_selected, 5); /* the memory-bound plan */
    assert_true(plan.target_met);
    assert_non_null(strstr(plan.reason, "inspection only"));
    rf_plan_free(&plan);
    rf_inventory_free(&inv);
}

static void test_dead_pages_only(void **state)
{
    struct rf_inventory inv;
    struct rf_plan plan;
    struct rf_plan_params p = params(RF_POLICY_MEMORY_BOUND);

    (void)state;
    case_s(&inv);
    rf_plan_init(&plan);
    p.dead_pages_only = true;
    with_target(&p, 2 * PAGE, PAGE, 14 * PAGE);
    assert_int_equal(rf_plan_build(&inv, &p, &plan), 0);
    assert_int_equal(plan.n_candidates, 3);
    assert_int_equal(plan.n_selected, 3);
    assert_int_equal(plan.selected[0], 7);
    assert_int_equal(plan.selected[1], 3);
    assert_int_equal(plan.selected[2], 5);
    assert_int_equal(plan.release_bytes, 3 * PAGE);
    assert_false(plan.target_met);

    /* A target already met does not stop it: dead file pages cost nothing to lose. */
    with_target(&p, 20 * PAGE, PAGE, 14 * PAGE);
    assert_int_equal(rf_plan_build(&inv, &p, &plan), 0);
    assert_int_equal(plan.n_selected, 3);
    assert_int_equal(plan.release_bytes, 3 * PAGE);
    assert_true(plan.target_met);
    rf_plan_free(&plan);
    rf_inventory_free(&inv);
}

static void test_binding_refused(void **state)
{
    static const enum rf_policy_profile profiles[] = {RF_POLICY_OBSERVE, RF_POLICY_CONSERVATIVE,
                                                      RF_POLICY_MEMORY_BOUND, RF_POLICY_REUSE_AWARE,
                                                      RF_POLICY_ACTIVE};
    struct rf_inventory inv;
    struct rf_plan plan;
    size_t i;

    (void)state;
    case_s(&inv);
    rf_plan_init(&plan);
    for (i = 0; i < 5; i++) {
        struct rf_plan_params p = params(profiles[i]);

        with_target(&p, 2 * PAGE, PAGE, 14 * PAGE);
        p.binding_ok = false;
        p.binding_reason = "native contract not quiescent";
        assert_int_equal(rf_plan_build(&inv, &p, &plan), 0);
        assert_int_equal(plan.n_selected, 0);
        assert_int_equal(plan.n_release, 0);
        assert_int_equal(plan.release_bytes, 0);
        assert_false(plan.target_met);
        assert_int_equal(plan.estimated_resident_after_bytes, 14 * PAGE);
        assert_string_equal(plan.reason, "native contract not quiescent");
        p.binding_reason = NULL;
        assert_int_equal(rf_plan_build(&inv, &p, &plan), 0);
        assert_int_equal(plan.n_selected, 0);
        assert_true(plan.reason[0] != '\0');
    }
    rf_plan_free(&plan);
    rf_inventory_free(&inv);
}

static void test_param_errors(void **state)
{
    struct rf_inventory inv;
    struct rf_plan plan;
    struct rf_plan_params p;

    (void)state;
    case_s(&inv);
    rf_plan_init(&plan);
    /* A stand-in plan: errors leave it untouched. */
    p = params(RF_POLICY_CONSERVATIVE);
    assert_int_equal(rf_plan_build(&inv, &p, &plan), 0);
    assert_int_equal(plan.n_selected, 2);

    p = params(RF_POLICY_MEMORY_BOUND); /* missing target */
    assert_int_equal(rf_plan_build(&inv, &p, &plan), -EINVAL);
    p = params(RF_POLICY_ACTIVE);
    assert_int_equal(rf_plan_build(&inv, &p, &plan), -EINVAL);
    p = params(RF_POLICY_MEMORY_BOUND); /* reserve >= target */
    with_target(&p, 4 * PAGE, 4 * PAGE, 14 * PAGE);
    assert_int_equal(rf_plan_build(&inv, &p, &plan), -EINVAL);
    with_target(&p, 4 * PAGE, 5 * PAGE, 14 * PAGE);
    assert_int_equal(rf_plan_build(&inv, &p, &plan), -EINVAL);
    p = params(RF_POLICY_CONSERVATIVE);
    with_target(&p, 0, 0, 14 * PAGE);
    assert_int_equal(rf_plan_build(&inv, &p, &plan), -EINVAL);
    p = params((enum rf_policy_profile)17);
    assert_int_equal(rf_plan_build(&inv, &p, &plan), -EINVAL);
    p = params(RF_POLICY_REUSE_AWARE);
    p.n_profile_order = 3; /* NULL order with a count */
    assert_int_equal(rf_plan_build(&inv, &p, &plan), -EINVAL);
    p = params(RF_POLICY_CONSERVATIVE);
    assert_int_equal(rf_plan_build(NULL, &p, &plan), -EINVAL);
    assert_int_equal(rf_plan_build(&inv, NULL, &plan), -EINVAL);
    assert_int_equal(rf_plan_build(&inv, &p, NULL), -EINVAL);

    assert_int_equal(plan.n_selected, 2);
    assert_int_equal(plan.selected[0], 7);
    rf_plan_free(&plan);
    rf_inventory_free(&inv);
}

static void test_deterministic(void **state)
{
    struct rf_tensor_meta t[12];
    struct rf_mapping_meta m = fixture_mapping(0, 64 * PAGE);
    struct rf_inventory inv;
    struct rf_plan a, b;
    struct rf_plan_params p = params(RF_POLICY_MEMORY_BOUND);
    size_t i;

    (void)state;
    /* Twelve one-page tensors of equal size: ties break by tensor index. */
    for (i = 0; i < 12; i++)
        t[i] =
            fixture_tensor((uint32_t)(11 - i), 0, (11 - i) * 2 * PAGE, PAGE, RF_ACCESS_FILE_BACKED);
    rf_inventory_init(&inv);
    assert_int_equal(rf_inventory_build(t, 12, &m, 1, PAGE, 1, &inv), 0);
    rf_plan_init(&a);
    rf_plan_init(&b);
    with_target(&p, 6 * PAGE, PAGE, 12 * PAGE);
    assert_int_equal(rf_plan_build(&inv, &p, &a), 0);
    assert_int_equal(rf_plan_build(&inv, &p, &b), 0);
    assert_int_equal(a.n_selected, 7);
    assert_int_equal(a.n_selected, b.n_selected);
    for (i = 0; i < a.n_selected; i++) {
        assert_int_equal(a.selected[i], i);
        assert_int_equal(b.selected[i], i);
    }
    assert_int_equal(a.n_release, b.n_release);
    assert_memory_equal(a.release, b.release, a.n_release * sizeof(*a.release));
    assert_string_equal(a.reason, b.reason);
    rf_plan_free(&a);
    rf_plan_free(&b);
    rf_inventory_free(&inv);
}

static void test_reuse_aware(void **state)
{
    struct rf_inventory inv;
    struct rf_plan plan, mb;
    struct rf_plan_params p = params(RF_POLICY_REUSE_AWARE);
    uint32_t order[] = {1, 6, 0, 3}; /* coldest first; 6 is ineligible, 3 is dead */
    uint32_t bad_unknown[] = {0, 99};
    uint32_t bad_dup[] = {0, 2, 0};
    size_t i;

    (void)state;
    case_s(&inv);
    rf_plan_init(&plan);
    rf_plan_init(&mb);

    /* Without a target: nothing. */
    p.profile_order = order;
    p.n_profile_order = 4;
    assert_int_equal(rf_plan_build(&inv, &p, &plan), 0);
    assert_int_equal(plan.n_selected, 0);

    /*
     * With a profile: dead t7, t3, t5 first, then profile order t1, t0, then
     * the unnamed t4, t2 largest first. Soft target 14 - 10 = 4 pages:
     * t7, t3 -> 11; t5 -> 11; t1 -> 11 (page 2 still t2's); t0 -> 9;
     * t4 -> 5; t2 -> 2 (pages 2,3,4) <= 4.
     */
    with_target(&p, 10 * PAGE, 6 * PAGE, 14 * PAGE);
    assert_int_equal(rf_plan_build(&inv, &p, &plan), 0);
    assert_true(plan.profile_used);
    assert_true(plan.applied_profile);
    assert_int_equal(plan.n_selected, 7);
    {
        static const uint32_t want[] = {7, 3, 5, 1, 0, 4, 2};

        for (i = 0; i < 7; i++)
            assert_int_equal(plan.selected[i], want[i]);
    }
    assert_true(plan.target_met);

    /* Soft target 9 pages: stops after t0, before the larger t4 memory-bound would take. */
    with_target(&p, 10 * PAGE, PAGE, 14 * PAGE);
    assert_int_equal(rf_plan_build(&inv, &p, &plan), 0);
    assert_int_equal(plan.n_selected, 5);
    assert_int_equal(plan.selected[3], 1);
    assert_int_equal(plan.selected[4], 0);
    assert_int_equal(plan.shared_bytes_protected, 2 * PAGE); /* page 2 (t2), page 10 (t6) */
    assert_true(plan.target_met);

    /* Without a profile: memory-bound order, profile_used false. */
    p.profile_order = NULL;
    p.n_profile_order = 0;
    assert_int_equal(rf_plan_build(&inv, &p, &plan), 0);
    assert_false(plan.profile_used);
    assert_non_null(strstr(plan.reason, "no access profile"));
    p.profile = RF_POLICY_MEMORY_BOUND;
    assert_int_equal(rf_plan_build(&inv, &p, &mb), 0);
    assert_int_equal(plan.n_selected, mb.n_selected);
    for (i = 0; i < plan.n_selected; i++)
        assert_int_equal(plan.selected[i], mb.selected[i]);
    p.profile = RF_POLICY_REUSE_AWARE;

    /* Invalid profiles are ignored, and the reason says why. */
    p.profile_order = bad_unknown;
    p.n_profile_order = 2;
    assert_int_equal(rf_plan_build(&inv, &p, &plan), 0);
    assert_false(plan.profile_used);
    assert_non_null(strstr(plan.reason, "not in inventory"));
    assert_int_equal(plan.n_selected, mb.n_selected);
    p.profile_order = bad_dup;
    p.n_profile_order = 3;
    assert_int_equal(rf_plan_build(&inv, &p, &plan), 0);
    assert_false(plan.profile_used);
    assert_non_null(strstr(plan.reason, "twice"));
    p.profile_order = order;
    p.n_profile_order = 0;
    assert_int_equal(rf_plan_build(&inv, &p, &plan), 0);
    assert_false(plan.profile_used);

    /* Other profiles ignore an access profile. */
    p.profile = RF_POLICY_MEMORY_BOUND;
    p.n_profile_order = 4;
    assert_int_equal(rf_plan_build(&inv, &p, &plan), 0);
    assert_false(plan.profile_used);
    assert_int_equal(plan.selected[3], mb.selected[3]);
    rf_plan_free(&plan);
    rf_plan_free(&mb);
    rf_inventory_free(&inv);
}

/*
 * Two mappings: pages of mapping 1 never protect or merge with pages of
 * mapping 0, and ranges come out sorted by mapping.
 *   mapping 0: a0 {0,1} eligible; a1 {1,2} unreferenced
 *   mapping 1: b0 {0,1} eligible; b1 {2,3} eligible (adjacent: one range)
 */
static void test_two_mappings(void **state)
{
    struct rf_tensor_meta t[4];
    struct rf_mapping_meta m[2] = {fixture_mapping(0, 16 * PAGE), fixture_mapping(1, 16 * PAGE)};
    struct rf_inventory inv;
    struct rf_plan plan;
    struct rf_plan_params p = params(RF_POLICY_MEMORY_BOUND);

    (void)state;
    t[0] = fixture_tensor(0, 0, 0, 2 * PAGE, RF_ACCESS_FILE_BACKED);
    t[1] = fixture_tensor(1, 0, PAGE, 2 * PAGE, RF_ACCESS_UNREFERENCED);
    t[2] = fixture_tensor(2, 1, 0, 2 * PAGE, RF_ACCESS_FILE_BACKED);
    t[3] = fixture_tensor(3, 1, 2 * PAGE, 2 * PAGE, RF_ACCESS_FILE_BACKED);
    rf_inventory_init(&inv);
    assert_int_equal(rf_inventory_build(t, 4, m, 2, PAGE, 3, &inv), 0);
    rf_plan_init(&plan);
    with_target(&p, 2, 1, 100 * PAGE);
    assert_int_equal(rf_plan_build(&inv, &p, &plan), 0);
    assert_int_equal(plan.n_selected, 3);
    assert_int_equal(plan.n_release, 2);
    assert_int_equal(plan.release[0].mapping_index, 0);
    assert_int_equal(plan.release[0].pages.first_page, 0);
    assert_int_equal(plan.release[0].pages.end_page, 1);
    assert_int_equal(plan.release[1].mapping_index, 1);
    assert_int_equal(plan.release[1].pages.first_page, 0);
    assert_int_equal(plan.release[1].pages.end_page, 4);
    assert_int_equal(plan.release_bytes, 5 * PAGE);
    assert_int_equal(plan.shared_bytes_protected, PAGE);
    rf_plan_free(&plan);
    rf_inventory_free(&inv);
}

/* ---- random inventories against a naive per-page model ----------------- */

#define N_CASES 1500
#define N_PAGES 256
#define MAX_T 40
#define MAX_M 2

/*
 * Per case: page size 2^(0..6) bytes (so tensors share pages often), 1-2
 * mappings, up to 40 tensors packed in file order per mapping with random
 * gaps (possibly negative: overlap) and random access; a random profile,
 * target, reserve, resident, dead_pages_only and access profile. The naive
 * model marks, per page, whether any selected tensor and any unselected
 * file-backed tensor covers it.
 */
static void test_random_plans(void **state)
{
    int c;

    (void)state;
    rng_state = 20240607;
    for (c = 0; c < N_CASES; c++) {
        uint64_t pb = 1ULL << rng_below(7), total = N_PAGES * pb;
        size_t n_m = 1 + (size_t)rng_below(MAX_M), n = (size_t)rng_below(MAX_T + 1), i, k, m;
        struct rf_mapping_meta maps[MAX_M];
        struct rf_tensor_meta t[MAX_T];
        uint64_t cursor[MAX_M] = {0};
        static bool by_sel[MAX_M][N_PAGES], by_unsel[MAX_M][N_PAGES];
        uint32_t order[MAX_T];
        size_t n_order = 0;
        struct rf_inventory inv;
        struct rf_plan plan;
        struct rf_plan_params p;
        uint64_t want_pages = 0, want_protected = 0, want_logical = 0, pg;
        bool sel[MAX_T];
        int rc;

        for (m = 0; m < n_m; m++)
            maps[m] = fixture_mapping((uint32_t)m, total);
        for (i = 0; i < n; i++) {
            uint64_t len = 1 + rng_below(4 * pb), gap, off;

            m = (size_t)rng_below(n_m);
            switch (rng_below(4)) {
            case 0: /* overlap the previous tensor's tail bytes */
                gap = rng_below(pb + 1);
                off = cursor[m] > gap ? cursor[m] - gap : 0;
                break;
            case 1:
                off = cursor[m];
                break;
            default:
                off = cursor[m] + rng_below(2 * pb);
                break;
            }
            if (rng_below(10) == 0)
                len = 0;
            if (off + len > total) {
                off = total - 1 - rng_below(pb);
                len = total - off;
            }
            cursor[m] = off + len;
            t[i] = fixture_tensor((uint32_t)i, rng_below(12) == 0 ? -1 : (int32_t)m, off, len,
                                  (enum rf_weight_access)rng_below(4));
            if (rng_below(3) == 0)
                t[i].access = RF_ACCESS_FILE_BACKED;
        }
        rf_inventory_init(&inv);
        assert_int_equal(rf_inventory_build(t, n, maps, n_m, pb, (uint64_t)c + 1, &inv), 0);

        p = params((enum rf_policy_profile)rng_below(6));
        p.binding_ok = rng_below(8) != 0;
        p.dead_pages_only = rng_below(5) == 0;
        if (rng_below(4) != 0) {
            p.has_target = true;
            p.target_bytes = 1 + rng_below(total * n_m);
            p.reserve_bytes = rng_below(p.target_bytes);
        }
        if (rf_policy_requires_target(p.profile) && !p.has_target && rng_below(2)) {
            p.has_target = true;
            p.target_bytes = 1 + rng_below(total * n_m);
        }
        p.has_mapping_resident = rng_below(6) != 0;
        p.mapping_resident_bytes = rng_below(total * n_m + 1);
        if (rng_below(2)) {
            for (i = 0; i < n; i++) {
                if (rng_below(2))
                    order[n_order++] = (uint32_t)i;
            }
            for (i = n_order; i > 1; i--) {
                uint32_t tmp;

                k = (size_t)rng_below(i);
                tmp = order[i - 1];
                order[i - 1] = order[k];
                order[k] = tmp;
            }
            if (n_order > 0 && rng_below(10) == 0)
                order[0] = 1000; /* not in the inventory: ignored */
            p.profile_order = order;
            p.n_profile_order = n_order;
        }

        rf_plan_init(&plan);
        rc = rf_plan_build(&inv, &p, &plan);
        if (rf_policy_requires_target(p.profile) && !p.has_target) {
            assert_int_equal(rc, -EINVAL);
            rf_inventory_free(&inv);
            continue;
        }
        assert_int_equal(rc, 0);

        /* Selected set: unique, eligible, and within the profile's rules. */
        memset(sel, 0, sizeof(sel));
        for (i = 0; i < plan.n_selected; i++) {
            const struct rf_inventory_entry *e = &inv.entries[plan.selected[i]];

            assert_true(plan.selected[i] < n);
            assert_false(sel[plan.selected[i]]);
            sel[plan.selected[i]] = true;
            want_logical += e->logical_bytes;
            assert_true(e->file_backed);
            assert_true(e->eligibility == RF_ELIGIBLE ||
                        e->eligibility == RF_ELIGIBLE_DEAD_FILE_PAGES);
            if (p.dead_pages_only || (p.profile == RF_POLICY_CONSERVATIVE && !p.has_target))
                assert_int_equal(e->eligibility, RF_ELIGIBLE_DEAD_FILE_PAGES);
            if (p.profile == RF_POLICY_CONSERVATIVE && e->eligibility == RF_ELIGIBLE)
                assert_int_equal(e->shared_page_bytes, 0);
            /* Dead-file-pages candidates come first. */
            if (i > 0 && e->eligibility == RF_ELIGIBLE_DEAD_FILE_PAGES)
                assert_int_equal(inv.entries[plan.selected[i - 1]].eligibility,
                                 RF_ELIGIBLE_DEAD_FILE_PAGES);
        }
        if (p.profile == RF_POLICY_OFF || !p.binding_ok)
            assert_int_equal(plan.n_selected, 0);
        assert_int_equal(plan.selected_logical_bytes, want_logical);
        assert_int_equal(plan.applied_profile, rf_policy_mutates(p.profile));

        /* The naive per-page model. */
        memset(by_sel, 0, sizeof(by_sel));
        memset(by_unsel, 0, sizeof(by_unsel));
        for (i = 0; i < n; i++) {
            const struct rf_inventory_entry *e = &inv.entries[i];

            if (!e->file_backed)
                continue;
            for (pg = e->pages.first_page; pg < e->pages.end_page; pg++) {
                if (sel[i])
                    by_sel[e->mapping_index][pg] = true;
                else
                    by_unsel[e->mapping_index][pg] = true;
            }
        }
        for (m = 0; m < n_m; m++) {
            for (pg = 0; pg < N_PAGES; pg++) {
                bool released = plan_releases(&plan, (int32_t)m, pg);

                assert_int_equal(released, by_sel[m][pg] && !by_unsel[m][pg]);
                want_pages += released;
                want_protected += by_sel[m][pg] && by_unsel[m][pg];
            }
        }
        assert_int_equal(plan.release_pages, want_pages);
        assert_int_equal(plan.release_bytes, want_pages * pb);
        assert_int_equal(plan.shared_bytes_protected, want_protected * pb);

        /* Ranges: sorted, disjoint, non-adjacent within a mapping, non-empty. */
        for (k = 0; k < plan.n_release; k++) {
            const struct rf_file_range *r = &plan.release[k];

            assert_true(r->pages.first_page < r->pages.end_page);
            assert_true(r->mapping_index >= 0 && (size_t)r->mapping_index < n_m);
            if (k > 0) {
                const struct rf_file_range *q = &plan.release[k - 1];

                assert_true(q->mapping_index < r->mapping_index ||
                            (q->mapping_index == r->mapping_index &&
                             q->pages.end_page < r->pages.first_page));
            }
        }

        /* Estimates and the target. */
        assert_int_equal(plan.has_estimated_resident_after, p.has_mapping_resident);
        if (p.has_mapping_resident) {
            uint64_t est = p.mapping_resident_bytes > plan.release_bytes
                               ? p.mapping_resident_bytes - plan.release_bytes
                               : 0;

            assert_int_equal(plan.estimated_resident_after_bytes, est);
        }
        assert_int_equal(plan.has_soft_target, p.has_target);
        if (p.has_target) {
            assert_int_equal(plan.soft_target_bytes, p.target_bytes - p.reserve_bytes);
            assert_int_equal(plan.target_met,
                             p.has_mapping_resident &&
                                 plan.estimated_resident_after_bytes <= plan.soft_target_bytes);
        } else {
            assert_false(plan.target_met);
        }
        /* Targeted selection stops as soon as the target is met, and no earlier. */
        if (p.has_target && p.has_mapping_resident && p.binding_ok && p.profile != RF_POLICY_OFF) {
            if (!plan.target_met)
                assert_int_equal(plan.n_selected, plan.n_candidates);
            if (plan.n_selected > 0 && plan.n_selected < plan.n_candidates)
                assert_true(plan.target_met);
        }
        rf_plan_free(&plan);
        rf_inventory_free(&inv);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_profile_names),
        cmocka_unit_test(test_release_mode_names),
        cmocka_unit_test(test_parse_size_table),
        cmocka_unit_test(test_size_hint),
        cmocka_unit_test(test_parse_size_fractions_exact),
        cmocka_unit_test(test_off_is_empty),
        cmocka_unit_test(test_conservative_no_target_dead_only),
        cmocka_unit_test(test_conservative_with_target),
        cmocka_unit_test(test_memory_bound_order_and_target),
        cmocka_unit_test(test_active_is_memory_bound),
        cmocka_unit_test(test_observe),
        cmocka_unit_test(test_dead_pages_only),
        cmocka_unit_test(test_binding_refused),
        cmocka_unit_test(test_param_errors),
        cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_reuse_aware),
        cmocka_unit_test(test_two_mappings),
        cmocka_unit_test(test_random_plans),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
