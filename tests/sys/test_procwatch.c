/*
 * Tests for the outside-watch probes (ramforge/sys/procwatch.h): the stat line
 * from fixture trees (a command name with spaces and parentheses, a short
 * line) and live; pagemap present bits of this process's own pages against
 * what was touched and advised out (a naive per-page array); pidfd_open
 * and process_madvise on this process.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "../test_skip.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ramforge/sys/pages.h"
#include "ramforge/sys/procwatch.h"
#include "ramforge/sys/sys.h"

#define ROOT RF_TEST_DATA "/sys/procio"
#define N_PAGES 64 /* pages of the test mapping */

static void test_stat_fixture(void **state)
{
    struct rfsys_proc_stat st;
    (void)state;
    /* "42 (a ) b (c)) R ... 5 6 ... 100": fields counted after the last ')' */
    assert_int_equal(rfsys_read_proc_stat(ROOT, "42", &st), 0);
    assert_int_equal(st.state, 'R');
    assert_int_equal(st.cpu_ticks, 5 + 6);
    assert_int_equal(st.start_ticks, 100);
    assert_true(st.ticks_per_second > 0);
    /* too short: no field 22 */
    assert_int_equal(rfsys_read_proc_stat(ROOT, "43", &st), -EBADMSG);
    assert_int_equal(st.start_ticks, 0);
    assert_int_equal(rfsys_read_proc_stat(ROOT, "44", &st), -ENOENT);
    assert_int_equal(rfsys_read_proc_stat(ROOT, "42", NULL), -EINVAL);
}

static void test_stat_live(void **state)
{
    struct rfsys_proc_stat a, b;
    (void)state;
    assert_int_equal(rfsys_read_proc_stat(NULL, "self", &a), 0);
    assert_int_equal(a.state, 'R');
    assert_true(a.start_ticks > 0);
    /* burn CPU until the tick count moves: polled, with a bound */
    for (long i = 0; i < 2000000000L; i++) {
        if (i % 1000000 == 0) {
            assert_int_equal(rfsys_read_proc_stat(NULL, "self", &b), 0);
            if (b.cpu_ticks > a.cpu_ticks)
                break;
        }
    }
    assert_true(b.cpu_ticks > a.cpu_ticks);
    assert_int_equal(b.start_ticks, a.start_ticks); /* the same process */
}

static void test_pagemap_present(void **state)
{
    uint64_t page = rfsys_page_bytes();
    uint8_t states[N_PAGES], want[N_PAGES];
    bool scanned;
    (void)state;
    int fd = rfsys_pagemap_open(NULL, "self");
    if (fd < 0)
        skip();
    unsigned char *m =
        mmap(NULL, N_PAGES * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(m != MAP_FAILED);
    srand(7);
    for (int i = 0; i < N_PAGES; i++) {
        want[i] = rand() % 2 ? RF_PAGE_RESIDENT : RF_PAGE_NONRESIDENT;
        if (want[i] == RF_PAGE_RESIDENT)
            m[i * page] = 1;
    }
    assert_int_equal(rfsys_pagemap_present(fd, (uint64_t)(uintptr_t)m, N_PAGES, states, &scanned),
                     0);
    assert_memory_equal(states, want, N_PAGES);
    /* advised out: no longer present */
    assert_int_equal(madvise(m, N_PAGES * page, MADV_DONTNEED), 0);
    assert_int_equal(rfsys_pagemap_present(fd, (uint64_t)(uintptr_t)m, N_PAGES, states, &scanned),
                     0);
    for (int i = 0; i < N_PAGES; i++)
        assert_int_equal(states[i], RF_PAGE_NONRESIDENT);
    /* bad arguments: every state unknown */
    assert_int_equal(rfsys_pagemap_present(fd, (uint64_t)(uintptr_t)m + 1, 1, states, &scanned),
                     -EINVAL);
    assert_int_equal(states[0], RF_PAGE_UNKNOWN);
    assert_int_equal(rfsys_pagemap_present(-1, (uint64_t)(uintptr_t)m, 1, states, &scanned),
                     -EINVAL);
    assert_int_equal(rfsys_pagemap_present(fd, 0, 1, NULL, &scanned), -EINVAL);
    munmap(m, N_PAGES * page);
    close(fd);
}

/* A file that is not a pagemap refuses PAGEMAP_SCAN: the entries are read, bit 63 each. */
static void test_pagemap_entries(void **state)
{
    uint64_t page = rfsys_page_bytes();
    uint64_t entries[4] = {1ull << 63, 0, (1ull << 63) | 5, 1ull << 62 /* swapped */};
    uint8_t states[4],
        want[4] = {RF_PAGE_RESIDENT, RF_PAGE_NONRESIDENT, RF_PAGE_RESIDENT, RF_PAGE_NONRESIDENT};
    char path[] = "/tmp/rf-pagemap-XXXXXX";
    bool scanned = true;
    (void)state;
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    unlink(path);
    assert_int_equal(pwrite(fd, entries, sizeof(entries), 10 * sizeof(uint64_t)),
                     (ssize_t)sizeof(entries));
    assert_int_equal(rfsys_pagemap_present(fd, 10 * page, 4, states, &scanned), 0);
    assert_false(scanned);
    assert_memory_equal(states, want, 4);
    /* past the end of the file: a short read, every state unknown */
    assert_int_equal(rfsys_pagemap_present(fd, 12 * page, 4, states, &scanned), -EIO);
    for (int i = 0; i < 4; i++)
        assert_int_equal(states[i], RF_PAGE_UNKNOWN);
    close(fd);
}

static void test_process_madvise(void **state)
{
    uint64_t page = rfsys_page_bytes(), accepted = 1;
    int pidfd;
    (void)state;
    assert_int_equal(rfsys_pidfd_open(0, &pidfd), -EINVAL);
    assert_int_equal(pidfd, -1);
    int rc = rfsys_pidfd_open((int)getpid(), &pidfd);
    if (rc == -ENOSYS)
        skip();
    assert_int_equal(rc, 0);
    unsigned char *m =
        mmap(NULL, 8 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(m != MAP_FAILED);
    memset(m, 3, 8 * page);
    struct rfsys_range r[2] = {{(uint64_t)(uintptr_t)m, 2 * page},
                               {(uint64_t)(uintptr_t)m + 4 * page, 3 * page}};
    rc = rfsys_process_madvise(pidfd, r, 2, RFSYS_ADVISE_COLD, &accepted);
    if (rc == -ENOSYS || rc == -EPERM) {
        munmap(m, 8 * page);
        close(pidfd);
        skip(); /* a kernel without process_madvise, or no CAP_SYS_NICE */
    }
    assert_int_equal(rc, 0);
    assert_int_equal(accepted, 5 * page);
    for (int i = 0; i < 8; i++)
        assert_int_equal(m[i * page], 3); /* non-destructive: the contents stay */
    assert_int_equal(rfsys_process_madvise(pidfd, r, 2, (enum rfsys_remote_advice)9, &accepted),
                     -EINVAL);
    assert_int_equal(accepted, 0);
    assert_int_equal(rfsys_process_madvise(pidfd, r, 2, RFSYS_ADVISE_COLD, NULL), -EINVAL);
    assert_string_equal(rfsys_remote_advice_name(RFSYS_ADVISE_PAGEOUT), "pageout");
    assert_null(rfsys_remote_advice_name((enum rfsys_remote_advice)9));
    munmap(m, 8 * page);
    close(pidfd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stat_fixture),    cmocka_unit_test(test_stat_live),
        cmocka_unit_test(test_pagemap_present), cmocka_unit_test(test_pagemap_entries),
        cmocka_unit_test(test_process_madvise),
    };
    return rf_run_group_tests(tests, NULL, NULL);
}
