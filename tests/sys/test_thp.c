/*
 * rfsys_read_thp_enabled on fixture trees (thp-madvise, thp-never, thp-bad:
 * an unclosed bracket), a tree without the file, a buffer too small, and
 * live (skipped on a kernel without transparent huge pages).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "../test_skip.h"
#include "ramforge/sys/sys.h"

#define ROOT(name) RF_TEST_DATA "/sys/" name

static void test_bracketed_mode(void **state)
{
    char mode[16];
    (void)state;
    assert_int_equal(rfsys_read_thp_enabled(ROOT("thp-madvise"), mode, sizeof(mode)), 0);
    assert_string_equal(mode, "madvise");
    assert_int_equal(rfsys_read_thp_enabled(ROOT("thp-never"), mode, sizeof(mode)), 0);
    assert_string_equal(mode, "never");
}

static void test_errors(void **state)
{
    char mode[16] = "unchanged";
    (void)state;
    assert_int_equal(rfsys_read_thp_enabled(ROOT("thp-bad"), mode, sizeof(mode)), -EBADMSG);
    assert_int_equal(rfsys_read_thp_enabled(ROOT("no-such-tree"), mode, sizeof(mode)), -ENOENT);
    /* "madvise" needs 8 bytes with its NUL */
    assert_int_equal(rfsys_read_thp_enabled(ROOT("thp-madvise"), mode, 7), -EBADMSG);
    assert_string_equal(mode, "unchanged");
    assert_int_equal(rfsys_read_thp_enabled(ROOT("thp-madvise"), NULL, 8), -EINVAL);
    assert_int_equal(rfsys_read_thp_enabled(ROOT("thp-madvise"), mode, 0), -EINVAL);
}

/* Live: one of the three modes the kernel documents. */
static void test_live(void **state)
{
    char mode[16];
    (void)state;
    int rc = rfsys_read_thp_enabled(NULL, mode, sizeof(mode));
    if (rc == -ENOENT)
        skip(); /* a kernel built without transparent huge pages */
    assert_int_equal(rc, 0);
    assert_true(!strcmp(mode, "always") || !strcmp(mode, "madvise") || !strcmp(mode, "never"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bracketed_mode),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_live),
    };
    return rf_run_group_tests(tests, NULL, NULL);
}
