/*
 * Live tests on the running kernel (sysroot "" and NULL): smaps and status
 * of this test process (with the Locked and VmLck of an mlocked file
 * mapping), and its cgroup memory controller, whatever version the machine
 * has.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cmocka.h>

#include "../test_skip.h"
#include "ramforge/sys/sys.h"

#include "../test_live_file.h"

/*
 * mlock and munlock as system calls: AddressSanitizer's interceptors make
 * the C library's mlock a no-op that returns 0 (make asan).
 */
static int lock_pages(void *p, size_t len)
{
    return (int)syscall(SYS_mlock, p, len);
}

static int unlock_pages(void *p, size_t len)
{
    return (int)syscall(SYS_munlock, p, len);
}

static void test_live_smaps_has_self(void **state)
{
    char exe[PATH_MAX];
    struct rfsys_maps maps;
    struct rfsys_mapping_sum sum;
    const struct rfsys_mapping *text = NULL;
    ssize_t n;
    size_t i;

    (void)state;
    n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    assert_true(n > 0);
    exe[n] = '\0';

    rfsys_maps_init(&maps);
    assert_int_equal(rfsys_read_smaps("", "self", &maps), 0);
    assert_true(maps.n > 0);
    for (i = 0; i < maps.n; i++) {
        const struct rfsys_mapping *m = &maps.v[i];

        assert_true(m->has_smaps);
        assert_true(m->start_addr < m->end_addr);
        if (i > 0)
            assert_true(maps.v[i - 1].end_addr <= m->start_addr);
        if (m->path && strcmp(m->path, exe) == 0 && m->perms[2] == 'x')
            text = m;
    }
    assert_non_null(text); /* the executable's code is mapped */
    assert_true(text->inode != 0);

    /* This code runs from that file, so some of it is resident. */
    assert_int_equal(
        rfsys_maps_sum_file(&maps, text->dev_major, text->dev_minor, text->inode, NULL, &sum), 0);
    assert_true(sum.n_mappings >= 1);
    assert_true(sum.complete);
    assert_true(sum.rss_bytes > 0);
    assert_true(sum.virtual_bytes >= text->end_addr - text->start_addr);

    /* maps (NULL sysroot) sees the same executable mapping. */
    assert_int_equal(rfsys_read_maps(NULL, "self", &maps), 0);
    text = NULL;
    for (i = 0; i < maps.n; i++) {
        assert_false(maps.v[i].has_smaps);
        if (maps.v[i].path && strcmp(maps.v[i].path, exe) == 0)
            text = &maps.v[i];
    }
    assert_non_null(text);
    rfsys_maps_free(&maps);
}

static void test_live_status(void **state)
{
    struct rfsys_status st;

    (void)state;
    assert_int_equal(rfsys_read_status("", "self", &st), 0);
    assert_true(st.has_vm_rss);
    assert_true(st.vm_rss_bytes > 0);
    assert_int_equal(st.vm_rss_bytes % 1024, 0);
    if (st.has_vm_hwm)
        assert_true(st.vm_hwm_bytes >= st.vm_rss_bytes);
}

/* Sum of Locked over the r--s mappings of the file (dev, inode) in this process's smaps. */
static uint64_t locked_of(const struct stat *st)
{
    struct rfsys_maps maps;
    struct rfsys_mapping_sum sum;

    rfsys_maps_init(&maps);
    assert_int_equal(rfsys_read_smaps(NULL, "self", &maps), 0);
    assert_int_equal(
        rfsys_maps_sum_file(&maps, major(st->st_dev), minor(st->st_dev), st->st_ino, "r--s", &sum),
        0);
    assert_int_equal(sum.n_mappings, 1);
    assert_true(sum.complete);
    rfsys_maps_free(&maps);
    return sum.locked_bytes;
}

/*
 * smaps Locked of a file mapping and status VmLck follow mlock: the whole
 * mapping once locked, nothing after munlock (what admission's lock note
 * and reclaimable-now rely on). Skipped when the kernel refuses the lock.
 */
static void test_live_locked_bytes(void **state)
{
    char path[] = "/tmp/rf-live-lock-XXXXXX";
    const size_t len = 4u << 20;
    struct rfsys_status before, locked, unlocked;
    struct stat st;
    void *p;
    int fd;

    (void)state;
    fd = mkstemp(path);
    assert_true(fd >= 0);
    unlink(path);
    assert_int_equal(ftruncate(fd, (off_t)len), 0);
    assert_int_equal(fstat(fd, &st), 0);
    p = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
    assert_true(p != MAP_FAILED);
    assert_int_equal(rfsys_read_status(NULL, "self", &before), 0);
    assert_int_equal(locked_of(&st), 0);
    if (lock_pages(p, len) < 0) {
        print_message("skipped: mlock refused: %s\n", strerror(errno));
        munmap(p, len);
        close(fd);
        skip();
    }
    assert_int_equal(locked_of(&st), len);
    assert_int_equal(rfsys_read_status(NULL, "self", &locked), 0);
    assert_true(locked.has_vm_lck);
    assert_int_equal(locked.vm_lck_bytes - before.vm_lck_bytes, len);
    assert_int_equal(unlock_pages(p, len), 0);
    assert_int_equal(locked_of(&st), 0);
    assert_int_equal(rfsys_read_status(NULL, "self", &unlocked), 0);
    assert_int_equal(unlocked.vm_lck_bytes, before.vm_lck_bytes);
    munmap(p, len);
    close(fd);
}

static void test_live_cgroup(void **state)
{
    struct rfsys_cgroup_memory cg;
    int ret;

    (void)state;
    ret = rfsys_read_cgroup_memory("", "self", &cg);
    if (ret == -ENOENT)
        skip(); /* no /proc/self/cgroup: kernel without cgroups */
    assert_int_equal(ret, 0);
    switch (cg.version) {
    case RFSYS_CGROUP_NONE:
        assert_false(cg.has_current);
        break;
    case RFSYS_CGROUP_V1:
    case RFSYS_CGROUP_V2:
        assert_true(cg.dir[0] == '/');
        assert_true(cg.has_current);
        assert_true(cg.current_source[0] == '/');
        if (cg.has_limit && cg.limit_unlimited)
            assert_int_equal(cg.limit_bytes, 0);
        break;
    default:
        fail_msg("unknown cgroup version %d", (int)cg.version);
    }
}

/* smaps Rss of this process's mappings of st's file with perms r--s. */
static uint64_t smaps_rss(const struct stat *st)
{
    struct rfsys_maps maps;
    struct rfsys_mapping_sum sum;

    rfsys_maps_init(&maps);
    assert_int_equal(rfsys_read_smaps(NULL, "self", &maps), 0);
    assert_int_equal(rfsys_maps_sum_file(&maps, major(st->st_dev), minor(st->st_dev),
                                         (uint64_t)st->st_ino, "r--s", &sum),
                     0);
    assert_int_equal(sum.n_mappings, 1);
    assert_true(sum.complete);
    rfsys_maps_free(&maps);
    return sum.rss_bytes;
}

/* PAGEMAP_SCAN's resident bytes of the same mappings; -EOPNOTSUPP skips. */
static int pagemap_rss(const struct stat *st, uint64_t *rss, uint64_t *virt)
{
    struct rfsys_maps maps;
    struct rfsys_mapping_sum sum;
    int fd = rfsys_pagemap_open(NULL, "self");

    assert_true(fd >= 0);
    rfsys_maps_init(&maps);
    assert_int_equal(rfsys_read_maps(NULL, "self", &maps), 0);
    int rc = rfsys_maps_resident_file(&maps, fd, major(st->st_dev), minor(st->st_dev),
                                      (uint64_t)st->st_ino, "r--s", &sum);
    rfsys_maps_free(&maps);
    close(fd);
    if (rc == 0) {
        assert_int_equal(sum.n_mappings, 1);
        assert_true(sum.complete);
        assert_int_equal(sum.pss_bytes, 0);
        *rss = sum.rss_bytes;
        *virt = sum.virtual_bytes;
    }
    return rc;
}

/*
 * rfsys_maps_resident_file against smaps on a shared file mapping: fully
 * populated, then with every other page released (MADV_DONTNEED), which
 * leaves far more present ranges than one PAGEMAP_SCAN call returns. The
 * kernel's smaps Rss is the reference; no readahead count is assumed.
 */
static void test_live_pagemap_resident(void **state)
{
    const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), n_pages = 1024;
    struct stat st;
    uint64_t rss, virt;
    int fd;

    (void)state;
    uint8_t *p = live_file_map(n_pages, &fd, &st);
    assert_true(p != MAP_FAILED);

    int rc = pagemap_rss(&st, &rss, &virt);
    if (rc == -EOPNOTSUPP) {
        munmap(p, n_pages * page);
        close(fd);
        print_message("skip: the kernel has no PAGEMAP_SCAN (Linux 6.7+)\n");
        skip();
    }
    assert_int_equal(rc, 0);
    assert_int_equal(virt, n_pages * page);
    assert_int_equal(rss, smaps_rss(&st));
    assert_true(rss > 0);

    for (uint64_t i = 0; i < n_pages; i += 2)
        assert_int_equal(madvise(p + i * page, page, MADV_DONTNEED), 0);
    assert_int_equal(pagemap_rss(&st, &rss, &virt), 0);
    assert_int_equal(rss, smaps_rss(&st));
    assert_true(rss <= n_pages / 2 * page);

    munmap(p, n_pages * page);
    close(fd);
}

static void test_live_pagemap_errors(void **state)
{
    struct rfsys_maps maps = {NULL, 0};
    struct rfsys_mapping_sum sum;

    (void)state;
    assert_int_equal(rfsys_pagemap_open(NULL, "../1"), -EINVAL);
    assert_int_equal(rfsys_maps_resident_file(&maps, -1, 0, 0, 1, NULL, &sum), -EINVAL);
    assert_int_equal(rfsys_maps_resident_file(NULL, 0, 0, 0, 1, NULL, &sum), -EINVAL);
    /* A regular file is not a pagemap: the ioctl is refused as unsupported. */
    char path[] = "rf-notpagemap-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    unlink(path);
    struct rfsys_mapping one = {.start_addr = 0x10000, .end_addr = 0x20000, .inode = 7};
    memcpy(one.perms, "r--s", 5);
    maps.v = &one;
    maps.n = 1;
    assert_int_equal(rfsys_maps_resident_file(&maps, fd, 0, 0, 7, "r--s", &sum), -EOPNOTSUPP);
    assert_int_equal(sum.rss_bytes, 0);
    /* No mapping of the file: nothing asked, zero bytes, complete. */
    assert_int_equal(rfsys_maps_resident_file(&maps, fd, 0, 0, 8, "r--s", &sum), 0);
    assert_int_equal(sum.n_mappings, 0);
    assert_true(sum.complete);
    close(fd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_live_smaps_has_self),   cmocka_unit_test(test_live_status),
        cmocka_unit_test(test_live_locked_bytes),     cmocka_unit_test(test_live_cgroup),
        cmocka_unit_test(test_live_pagemap_resident), cmocka_unit_test(test_live_pagemap_errors),
    };

    return rf_run_group_tests(tests, NULL, NULL);
}
