/*
 * Tests for rfsys_read_io: /proc/PID/io read_bytes and /proc/PID/stat majflt
 * from fixture trees (a command name with spaces and parentheses, a short
 * stat line, a missing io file), and the live process.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>

#include "ramforge/sys/sys.h"

#define ROOT RF_TEST_DATA "/sys/procio"

static void test_fixture(void **state)
{
    struct rfsys_io io;
    (void)state;
    assert_int_equal(rfsys_read_io(ROOT, "42", &io), 0);
    assert_true(io.has_read_bytes);
    assert_int_equal(io.read_bytes, 123456789);
    assert_true(io.has_major_faults);
    assert_int_equal(io.major_faults, 77); /* field 12 counted after the last ')' */
}

static void test_partial_and_missing(void **state)
{
    struct rfsys_io io;
    (void)state;
    /* no io file, stat too short: nothing read */
    assert_int_equal(rfsys_read_io(ROOT, "43", &io), -ENOENT);
    assert_false(io.has_read_bytes);
    assert_false(io.has_major_faults);
    assert_int_equal(rfsys_read_io(ROOT, "44", &io), -ENOENT);
    assert_int_equal(rfsys_read_io(ROOT, "42", NULL), -EINVAL);
}

static void test_live(void **state)
{
    struct rfsys_io a, b;
    (void)state;
    assert_int_equal(rfsys_read_io(NULL, "self", &a), 0);
    assert_true(a.has_major_faults);
    assert_int_equal(rfsys_read_io(NULL, "self", &b), 0);
    assert_true(b.major_faults >= a.major_faults);
    if (a.has_read_bytes)
        assert_true(b.read_bytes >= a.read_bytes);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture),
        cmocka_unit_test(test_partial_and_missing),
        cmocka_unit_test(test_live),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
