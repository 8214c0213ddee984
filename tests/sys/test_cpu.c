/*
 * rfsys_physical_cores on fixture trees: cpu-smt (CPUs 0-3 on one package,
 * two SMT siblings per core, and CPU 8 alone on a second package: 3 cores),
 * cpu-bad (a malformed online list), a tree without sysfs, and live.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

#include <cmocka.h>

#include "../test_skip.h"
#include "ramforge/sys/sys.h"

#define ROOT(name) RF_TEST_DATA "/sys/" name

static void test_smt_siblings_count_once(void **state)
{
    uint32_t n = 0;
    (void)state;
    assert_int_equal(rfsys_physical_cores(ROOT("cpu-smt"), &n), 0);
    assert_int_equal(n, 3);
}

static void test_errors(void **state)
{
    uint32_t n = 77;
    (void)state;
    assert_int_equal(rfsys_physical_cores(ROOT("cpu-bad"), &n), -EBADMSG);
    assert_int_equal(rfsys_physical_cores(ROOT("no-such-tree"), &n), -ENOENT);
    assert_int_equal(n, 77);
    assert_int_equal(rfsys_physical_cores(ROOT("cpu-smt"), NULL), -EINVAL);
}

/* Live: at least one core, and never more than the online CPUs. */
static void test_live(void **state)
{
    uint32_t n = 0;
    (void)state;
    int rc = rfsys_physical_cores(NULL, &n);
    if (rc == -ENOENT)
        skip(); /* no sysfs CPU topology here (a container without /sys) */
    assert_int_equal(rc, 0);
    assert_true(n >= 1 && n <= (uint32_t)sysconf(_SC_NPROCESSORS_ONLN));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_smt_siblings_count_once),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_live),
    };
    return rf_run_group_tests(tests, NULL, NULL);
}
