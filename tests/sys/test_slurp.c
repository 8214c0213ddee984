/* Tests for rfsys_slurp: bounds, growth past the first buffer, errors. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "ramforge/sys/sys.h"

#define PROCFS RF_TEST_DATA "/sys/procfs"

/* Size of a fixture file as stat reports it (independent of the code under test). */
static size_t fixture_size(const char *path)
{
    struct stat st;

    assert_int_equal(stat(path, &st), 0);
    return (size_t)st.st_size;
}

static void test_reads_whole_file(void **state)
{
    size_t size = fixture_size(PROCFS "/proc/self/status");
    char *buf = NULL;
    size_t len = 0;

    (void)state;
    assert_int_equal(rfsys_slurp(PROCFS, "/proc/self/status", RFSYS_SLURP_MAX_BYTES, &buf, &len),
                     0);
    assert_non_null(buf);
    assert_int_equal(len, size);
    assert_int_equal(strlen(buf), len);
    assert_memory_equal(buf, "Name:\tllama-cli\n", 16);
    assert_string_equal(buf + len - 29, "voluntary_ctxt_switches:\t150\n");
    free(buf);
}

static void test_no_trailing_newline(void **state)
{
    char *buf = NULL;
    size_t len = 0;

    (void)state;
    assert_int_equal(rfsys_slurp(PROCFS, "/proc/108/status", 4096, &buf, &len), 0);
    assert_string_equal(buf, "Name:\tx\nVmRSS:\t 123");
    assert_int_equal(len, 19);
    free(buf);
}

static void test_len_out_optional(void **state)
{
    char *buf = NULL;

    (void)state;
    assert_int_equal(rfsys_slurp(PROCFS, "/proc/103/status", 4096, &buf, NULL), 0);
    assert_string_equal(buf, "Name:\tx\nVmRSS:\t12 MB\n");
    free(buf);
}

static void test_bound_exact_and_over(void **state)
{
    /* "Name:\tx\nVmRSS:\t12 MB\n" is 21 bytes. */
    char *buf = NULL;
    size_t len = 0;

    (void)state;
    assert_int_equal(rfsys_slurp(PROCFS, "/proc/103/status", 21, &buf, &len), 0);
    assert_int_equal(len, 21);
    free(buf);
    buf = NULL;
    assert_int_equal(rfsys_slurp(PROCFS, "/proc/103/status", 20, &buf, &len), -EFBIG);
    assert_null(buf);
    assert_int_equal(len, 0);
    assert_int_equal(rfsys_slurp(PROCFS, "/proc/103/status", 0, &buf, &len), -EFBIG);
    assert_null(buf);
}

static void test_empty_file(void **state)
{
    char *buf = NULL;
    size_t len = 99;

    (void)state;
    assert_int_equal(rfsys_slurp(RF_TEST_DATA "/sys/cg-none",
                                 "/sys/fs/cgroup/unified/app.slice/cgroup.controllers", 0, &buf,
                                 &len),
                     0);
    assert_non_null(buf);
    assert_int_equal(len, 0);
    assert_string_equal(buf, "");
    free(buf);
}

/* A 100000-byte file makes the buffer grow several times past 4 KiB. */
static void test_grows_past_first_buffer(void **state)
{
    char tmpl[] = "/tmp/rfsys-slurp-XXXXXX";
    char *want = malloc(100000);
    char *buf = NULL;
    size_t len = 0;
    size_t i;
    int fd;

    (void)state;
    assert_non_null(want);
    for (i = 0; i < 100000; i++)
        want[i] = (char)('a' + i % 26);
    fd = mkstemp(tmpl);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, want, 100000), 100000);
    close(fd);

    assert_int_equal(rfsys_slurp("", tmpl, RFSYS_SLURP_MAX_BYTES, &buf, &len), 0);
    assert_int_equal(len, 100000);
    assert_memory_equal(buf, want, 100000);
    assert_int_equal(buf[100000], '\0');
    free(buf);
    buf = NULL;
    assert_int_equal(rfsys_slurp(NULL, tmpl, 99999, &buf, &len), -EFBIG);
    assert_null(buf);
    assert_int_equal(rfsys_slurp(NULL, tmpl, 100000, &buf, &len), 0);
    assert_int_equal(len, 100000);
    free(buf);

    unlink(tmpl);
    free(want);
}

static void test_errors(void **state)
{
    char *long_root = malloc(8192);
    char *buf = NULL;

    (void)state;
    assert_int_equal(rfsys_slurp(PROCFS, "/proc/999/status", 4096, &buf, NULL), -ENOENT);
    assert_null(buf);
    assert_int_equal(rfsys_slurp(PROCFS, "/proc/self", 4096, &buf, NULL), -EISDIR);
    assert_null(buf);
    assert_int_equal(rfsys_slurp(PROCFS, NULL, 4096, &buf, NULL), -EINVAL);
    assert_int_equal(rfsys_slurp(PROCFS, "/proc/self/status", 4096, NULL, NULL), -EINVAL);

    assert_non_null(long_root);
    memset(long_root, 'x', 8191);
    long_root[0] = '/';
    long_root[8191] = '\0';
    assert_int_equal(rfsys_slurp(long_root, "/proc/self/status", 4096, &buf, NULL), -ENAMETOOLONG);
    assert_null(buf);
    free(long_root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reads_whole_file), cmocka_unit_test(test_no_trailing_newline),
        cmocka_unit_test(test_len_out_optional), cmocka_unit_test(test_bound_exact_and_over),
        cmocka_unit_test(test_empty_file),       cmocka_unit_test(test_grows_past_first_buffer),
        cmocka_unit_test(test_errors),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
