/* Tests for rfsys_read_status on fixture /proc/<pid>/status files. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "ramforge/sys/sys.h"

#define PROCFS RF_TEST_DATA "/sys/procfs"

static void test_full_status(void **state)
{
    struct rfsys_status st;

    (void)state;
    assert_int_equal(rfsys_read_status(PROCFS, "self", &st), 0);
    assert_true(st.has_vm_rss);
    assert_int_equal(st.vm_rss_bytes, 4563402752ULL); /* 4456448 kB */
    assert_true(st.has_vm_hwm);
    assert_int_equal(st.vm_hwm_bytes, 4831838208ULL); /* 4718592 kB */
    assert_true(st.has_rss_anon);
    assert_int_equal(st.rss_anon_bytes, 268435456ULL); /* 262144 kB */
    assert_true(st.has_rss_file);
    assert_int_equal(st.rss_file_bytes, 4290772992ULL); /* 4190208 kB */
    assert_true(st.has_rss_shmem);
    assert_int_equal(st.rss_shmem_bytes, 4194304ULL); /* 4096 kB */
    assert_true(st.has_vm_lck);
    assert_int_equal(st.vm_lck_bytes, 0);
    assert_true(st.has_vm_swap); /* "VmSwap: 0 kB": known, zero */
    assert_int_equal(st.vm_swap_bytes, 0);
}

/* Junk lines, an unknown malformed field, missing fields, no final newline. */
static void test_partial_status(void **state)
{
    struct rfsys_status st;

    (void)state;
    assert_int_equal(rfsys_read_status(PROCFS, "102", &st), 0);
    assert_true(st.has_vm_rss);
    assert_int_equal(st.vm_rss_bytes, 524288ULL); /* 512 kB, last line */
    assert_true(st.has_vm_hwm);
    assert_int_equal(st.vm_hwm_bytes, 1048576ULL); /* 1024 kB */
    assert_false(st.has_rss_anon);
    assert_false(st.has_rss_file);
    assert_false(st.has_rss_shmem);
    assert_false(st.has_vm_lck);
    assert_false(st.has_vm_swap);
    assert_int_equal(st.rss_anon_bytes, 0);
}

static void test_hostile_values(void **state)
{
    struct rfsys_status st;

    (void)state;
    /* 2^54 kB * 1024 = 2^64: the multiplication overflows. */
    assert_int_equal(rfsys_read_status(PROCFS, "101", &st), -EOVERFLOW);
    assert_false(st.has_vm_rss);
    /* 23 digits: the number itself does not fit. */
    assert_int_equal(rfsys_read_status(PROCFS, "107", &st), -EOVERFLOW);
    /* "12 MB" */
    assert_int_equal(rfsys_read_status(PROCFS, "103", &st), -EBADMSG);
    /* "VmRSS:\t 123" without unit or newline */
    assert_int_equal(rfsys_read_status(PROCFS, "108", &st), -EBADMSG);
    assert_false(st.has_vm_rss);
}

static void test_errors(void **state)
{
    struct rfsys_status st;

    (void)state;
    assert_int_equal(rfsys_read_status(PROCFS, "999", &st), -ENOENT);
    assert_int_equal(rfsys_read_status(PROCFS, "../self", &st), -EINVAL);
    assert_int_equal(rfsys_read_status(PROCFS, "", &st), -EINVAL);
    assert_int_equal(rfsys_read_status(PROCFS, "12345678901", &st), -EINVAL);
    assert_int_equal(rfsys_read_status(PROCFS, NULL, &st), -EINVAL);
    assert_int_equal(rfsys_read_status(PROCFS, "self", NULL), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_full_status),
        cmocka_unit_test(test_partial_status),
        cmocka_unit_test(test_hostile_values),
        cmocka_unit_test(test_errors),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
