/*
 * Tests for the page-cache probes: mincore on anonymous and file mappings,
 * cachestat against mincore on the same file, the observation mapping's
 * sampler with each method, the can_do_mincore rule (as an unprivileged
 * child when run as root: the kernel must then report every page of a
 * root-owned 0444 file resident, and rfsys_mincore_trustworthy must say
 * not trustworthy), and the streaming maps lookup on fixtures (long paths,
 * spaces, " (deleted)", truncated and reversed lines) and on live /proc.
 *
 * Kernel-behaviour checks skip, with a reason, where the kernel lacks the
 * feature (cachestat before 6.5) or would not drop a page; no check
 * depends on readahead counts.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../test_skip.h"
#include "ramforge/sys/pages.h"

#define FIXTURE RF_TEST_DATA "/sys/pages"
#define PROCFS RF_TEST_DATA "/sys/procfs"
#define FILE_PAGES 64
#define NOBODY 65534

static char tmpdir[256];

static int setup(void **state)
{
    (void)state;
    /* in the build tree, not /tmp: tmpfs pages cannot be dropped with fadvise */
    snprintf(tmpdir, sizeof(tmpdir), "rf-test-pages-%ld", (long)getpid());
    if (mkdir(tmpdir, 0755) != 0)
        return -1;
    return chmod(tmpdir, 0755);
}

static int teardown(void **state)
{
    char cmd[300];
    (void)state;
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

/* Creates NAME in tmpdir with FILE_PAGES pages of data, synced; returns its path. */
static const char *make_file(const char *name, mode_t mode)
{
    static char path[300];
    const uint64_t page = rfsys_page_bytes();
    char *buf = malloc(page);
    assert_non_null(buf);
    snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
    unlink(path);
    int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    assert_true(fd >= 0);
    for (int i = 0; i < FILE_PAGES; i++) {
        memset(buf, 'a' + i % 26, page);
        assert_int_equal(write(fd, buf, page), (ssize_t)page);
    }
    assert_int_equal(fdatasync(fd), 0);
    assert_int_equal(fchmod(fd, mode), 0);
    close(fd);
    free(buf);
    return path;
}

/* Drops the file's clean, unmapped pages from the page cache. */
static void evict(const char *path)
{
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    assert_int_equal(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
    close(fd);
}

static void raw_mincore(const char *path, uint8_t *vec);

/*
 * Reads pages [first, first + n) of path with pread (brings them into the
 * cache), with readahead off (POSIX_FADV_RANDOM), then waits until the
 * file's page-cache state stops changing, so that two observations made
 * one after the other see the same state.
 */
static void read_pages(const char *path, uint64_t first, uint64_t n)
{
    const uint64_t page = rfsys_page_bytes();
    uint8_t a[FILE_PAGES], b[FILE_PAGES];
    char *buf = malloc(page);
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    assert_int_equal(posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM), 0);
    for (uint64_t p = first; p < first + n; p++)
        assert_int_equal(pread(fd, buf, page, (off_t)(p * page)), (ssize_t)page);
    close(fd);
    free(buf);
    raw_mincore(path, a);
    for (int i = 0; i < 100; i++) { /* at most 1 s */
        usleep(10000);
        raw_mincore(path, b);
        if (memcmp(a, b, sizeof(a)) == 0)
            return;
        memcpy(a, b, sizeof(a));
    }
}

/* mincore over a fresh read-only mapping of path: vec gets FILE_PAGES 0/1 bytes. */
static void raw_mincore(const char *path, uint8_t *vec)
{
    const uint64_t page = rfsys_page_bytes();
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    void *p = mmap(NULL, FILE_PAGES * page, PROT_READ, MAP_SHARED, fd, 0);
    assert_true(p != MAP_FAILED);
    assert_int_equal(rfsys_mincore(p, FILE_PAGES * page, vec, FILE_PAGES), 0);
    munmap(p, FILE_PAGES * page);
    close(fd);
}

static void test_mincore_anonymous(void **state)
{
    (void)state;
    const uint64_t page = rfsys_page_bytes();
    uint8_t vec[8];
    char *p = mmap(NULL, 8 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(p != MAP_FAILED);
    p[0] = 1;
    p[3 * page] = 1;
    assert_int_equal(rfsys_mincore(p, 8 * page, vec, sizeof(vec)), 0);
    assert_int_equal(vec[0], 1);
    assert_int_equal(vec[3], 1);
    for (int i = 0; i < 8; i++)
        assert_true(vec[i] == 0 || vec[i] == 1);
    /* a partial last page counts as a page */
    assert_int_equal(rfsys_mincore(p, 3 * page + 1, vec, 4), 0);
    assert_int_equal(vec[3], 1);
    /* bad arguments */
    assert_int_equal(rfsys_mincore(p + 1, page, vec, 8), -EINVAL);
    assert_int_equal(rfsys_mincore(p, 8 * page, vec, 7), -EINVAL);
    assert_int_equal(rfsys_mincore(p, page, NULL, 8), -EINVAL);
    assert_int_equal(rfsys_mincore(p, 0, vec, 0), 0);
    /* unmapped: -ENOMEM */
    assert_int_equal(munmap(p + 4 * page, 4 * page), 0);
    assert_int_equal(rfsys_mincore(p, 8 * page, vec, 8), -ENOMEM);
    munmap(p, 4 * page);
}

static void test_mincore_file_and_cachestat(void **state)
{
    (void)state;
    const uint64_t page = rfsys_page_bytes();
    uint8_t vec[FILE_PAGES], states[FILE_PAGES];
    const char *path = make_file("cache.bin", 0644);
    struct rfsys_cachestat cs;
    uint64_t resident = 0, calls = 0;

    evict(path);
    raw_mincore(path, vec);
    for (int i = 0; i < FILE_PAGES; i++)
        resident += vec[i];
    if (resident != 0) {
        print_message("skip: the kernel kept %llu pages after POSIX_FADV_DONTNEED\n",
                      (unsigned long long)resident);
        skip();
    }
    read_pages(path, 10, 2);
    read_pages(path, 40, 1);
    raw_mincore(path, vec);
    assert_int_equal(vec[10], 1);
    assert_int_equal(vec[11], 1);
    assert_int_equal(vec[40], 1);
    resident = 0;
    for (int i = 0; i < FILE_PAGES; i++)
        resident += vec[i];

    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    int rc = rfsys_cachestat(fd, 0, 0, &cs);
    if (rc == -ENOSYS) {
        close(fd);
        print_message("skip: cachestat is not available on this kernel (Linux 6.5+)\n");
        skip();
    }
    assert_int_equal(rc, 0);
    assert_int_equal(cs.nr_cache, resident); /* same page cache, two syscalls */
    assert_int_equal(rfsys_cachestat(fd, 10 * page, 2 * page, &cs), 0);
    assert_int_equal(cs.nr_cache, 2);
    /* per-page states by bisection equal mincore's */
    assert_int_equal(rfsys_cachestat_pages(fd, page, 0, FILE_PAGES, states, &calls), 0);
    for (int i = 0; i < FILE_PAGES; i++)
        assert_int_equal(states[i], vec[i] ? RF_PAGE_RESIDENT : RF_PAGE_NONRESIDENT);
    assert_true(calls >= 1 && calls < 2 * FILE_PAGES);
    assert_int_equal(rfsys_cachestat(-1, 0, 0, &cs), -EBADF);
    assert_int_equal(rfsys_cachestat(fd, 0, 0, NULL), -EINVAL);
    close(fd);
}

static void test_file_pages_sample(void **state)
{
    (void)state;
    uint8_t vec[FILE_PAGES], states[FILE_PAGES + 8];
    const char *path = make_file("observe.bin", 0644);
    struct rfsys_file_pages fp;

    evict(path);
    read_pages(path, 5, 3);
    assert_int_equal(rfsys_file_pages_open(path, &fp), 0);
    assert_true(fp.mincore_trustworthy); /* we own it */
    assert_int_equal(fp.method, RFSYS_PAGES_MINCORE);
    assert_int_equal(fp.file_pages, FILE_PAGES);
    raw_mincore(path, vec);
    /* 8 pages past the end of the file are nonresident: the cache holds none */
    assert_int_equal(rfsys_file_pages_sample(&fp, 0, FILE_PAGES + 8, states), 0);
    for (int i = 0; i < FILE_PAGES; i++)
        assert_int_equal(states[i], vec[i] ? RF_PAGE_RESIDENT : RF_PAGE_NONRESIDENT);
    for (int i = FILE_PAGES; i < FILE_PAGES + 8; i++)
        assert_int_equal(states[i], RF_PAGE_NONRESIDENT);
    assert_int_equal(states[5], RF_PAGE_RESIDENT);
    /* sampling faulted nothing in: the mapping did not change the cache */
    uint8_t again[FILE_PAGES];
    raw_mincore(path, again);
    assert_memory_equal(vec, again, FILE_PAGES);

    if (fp.cachestat_error == 0) {
        fp.method = RFSYS_PAGES_CACHESTAT;
        assert_int_equal(rfsys_file_pages_sample(&fp, 0, FILE_PAGES, states), 0);
        for (int i = 0; i < FILE_PAGES; i++)
            assert_int_equal(states[i], vec[i] ? RF_PAGE_RESIDENT : RF_PAGE_NONRESIDENT);
        assert_true(fp.cachestat_calls > 0);
    }
    fp.method = RFSYS_PAGES_NONE;
    memset(states, RF_PAGE_RESIDENT, sizeof(states));
    assert_int_equal(rfsys_file_pages_sample(&fp, 0, FILE_PAGES, states), -EACCES);
    for (int i = 0; i < FILE_PAGES; i++)
        assert_int_equal(states[i], RF_PAGE_UNKNOWN);
    assert_int_equal(rfsys_file_pages_sample(&fp, UINT64_MAX, 2, states), -EINVAL);
    assert_string_equal(rfsys_page_method_name(RFSYS_PAGES_CACHESTAT), "cachestat");
    rfsys_file_pages_close(&fp);
    rfsys_file_pages_close(&fp); /* idempotent */
    assert_int_equal(fp.fd, -1);

    assert_int_equal(rfsys_file_pages_open(tmpdir, &fp), -EINVAL); /* a directory */
    assert_int_equal(rfsys_file_pages_open("/nonexistent/x", &fp), -ENOENT);
    assert_int_equal(fp.fd, -1);
}

static void test_trustworthy_owner(void **state)
{
    (void)state;
    const char *path = make_file("own.bin", 0444);
    const char *reason = NULL;
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    bool trustworthy = false;
    assert_int_equal(rfsys_mincore_trustworthy(NULL, fd, &trustworthy, &reason), 0);
    assert_true(trustworthy);
    assert_non_null(reason);
    assert_non_null(strstr(reason, "owns"));
    close(fd);
    assert_int_equal(rfsys_mincore_trustworthy(NULL, -1, &trustworthy, &reason), -EINVAL);
}

/* Child side of the fake-residency test: exit codes name the failed check. */
static int child_checks(const char *root_ro, const char *root_rw, const char *nobody_own)
{
    uint8_t vec[FILE_PAGES];
    const char *reason;
    bool trustworthy = true;
    int fd;

    if (setgroups(0, NULL) != 0 || setresgid(NOBODY, NOBODY, NOBODY) != 0 ||
        setresuid(NOBODY, NOBODY, NOBODY) != 0)
        return 10;
    /* root-owned, 0444: not trustworthy, and the kernel indeed fakes residency */
    fd = open(root_ro, O_RDONLY);
    if (fd < 0)
        return errno == EACCES ? 21 : 11;
    if (rfsys_mincore_trustworthy(NULL, fd, &trustworthy, &reason) != 0 || trustworthy)
        return 12;
    if (!strstr(reason, "can_do_mincore"))
        return 13;
    const uint64_t page = rfsys_page_bytes();
    void *p = mmap(NULL, FILE_PAGES * page, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED || rfsys_mincore(p, FILE_PAGES * page, vec, FILE_PAGES) != 0)
        return 14;
    for (int i = 0; i < FILE_PAGES; i++)
        if (vec[i] != 1)
            return 15; /* the file is evicted: only the fake rule says resident */
    munmap(p, FILE_PAGES * page);
    close(fd);
    /* the sampler of an observation mapping reports unknown, never resident */
    struct rfsys_file_pages fp;
    uint8_t states[FILE_PAGES];
    if (rfsys_file_pages_open(root_ro, &fp) != 0 || fp.mincore_trustworthy ||
        fp.method == RFSYS_PAGES_MINCORE)
        return 16;
    int rc = rfsys_file_pages_sample(&fp, 0, FILE_PAGES, states);
    for (int i = 0; i < FILE_PAGES; i++) {
        if (rc < 0 && states[i] != RF_PAGE_UNKNOWN)
            return 17;
        if (rc == 0 && states[i] != RF_PAGE_NONRESIDENT) /* cachestat: real, evicted */
            return 18;
    }
    rfsys_file_pages_close(&fp);
    /* root-owned but world-writable: trustworthy (may write) */
    fd = open(root_rw, O_RDONLY);
    if (fd < 0 || rfsys_mincore_trustworthy(NULL, fd, &trustworthy, &reason) != 0 || !trustworthy ||
        !strstr(reason, "write"))
        return 19;
    close(fd);
    /* owned by the caller: trustworthy */
    fd = open(nobody_own, O_RDONLY);
    if (fd < 0 || rfsys_mincore_trustworthy(NULL, fd, &trustworthy, &reason) != 0 || !trustworthy ||
        !strstr(reason, "owns"))
        return 20;
    close(fd);
    return 0;
}

static void test_fake_residency_rule(void **state)
{
    (void)state;
    char ro[300], rw[300], own[300];
    if (geteuid() != 0) {
        print_message("skip: needs root to run a check as an unprivileged user\n");
        skip();
    }
    snprintf(ro, sizeof(ro), "%s", make_file("root-ro.bin", 0444));
    snprintf(rw, sizeof(rw), "%s", make_file("root-rw.bin", 0666));
    snprintf(own, sizeof(own), "%s", make_file("nobody.bin", 0444));
    assert_int_equal(chown(own, NOBODY, NOBODY), 0);
    evict(ro);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(child_checks(ro, rw, own));
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    if (WEXITSTATUS(status) == 10 || WEXITSTATUS(status) == 21) {
        print_message("skip: %s\n", WEXITSTATUS(status) == 10
                                        ? "cannot switch to uid 65534"
                                        : "uid 65534 cannot reach the test directory");
        skip();
    }
    assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_maps_find_fixture(void **state)
{
    (void)state;
    struct rfsys_vma v;

    /* a long path with spaces and " (deleted)": header fields only */
    assert_int_equal(rfsys_maps_find(FIXTURE, "self", 0x7f0000200000 + 5, &v), 0);
    assert_int_equal(v.start_addr, 0x7f0000200000);
    assert_int_equal(v.end_addr, 0x7f0000400000);
    assert_int_equal(v.offset_bytes, 0x200000);
    assert_string_equal(v.perms, "r--s");
    assert_int_equal(v.dev_major, 0xfd);
    assert_int_equal(v.dev_minor, 1);
    assert_int_equal(v.inode, 4242);
    /* past several 4 KiB reads of long lines */
    assert_int_equal(rfsys_maps_find(FIXTURE, "self", 0x7ffd00000010, &v), 0);
    assert_string_equal(v.perms, "rw-p");
    assert_int_equal(v.inode, 0);
    assert_int_equal(rfsys_maps_find(FIXTURE, "self", 0x7f1000000000 + 29 * 0x1000, &v), 0);
    assert_int_equal(v.inode, 929);
    /* anonymous, with and without the blank after the inode */
    assert_int_equal(rfsys_maps_find(FIXTURE, "self", 0x7f0000400000, &v), 0);
    assert_int_equal(rfsys_maps_find(FIXTURE, "self", 0x7f0000401fff, &v), 0);
    assert_string_equal(v.perms, "---p");
    /* end is exclusive; gaps are not found */
    assert_int_equal(rfsys_maps_find(FIXTURE, "self", 0x7f0000402000, &v), -ENOENT);
    assert_int_equal(v.start_addr, 0);
    assert_int_equal(rfsys_maps_find(FIXTURE, "self", 0, &v), -ENOENT);
    assert_int_equal(rfsys_maps_find(FIXTURE, "7", 0x400000, &v), -ENOENT); /* empty file */
    /* the procfs fixtures of test_maps: paths with spaces; a last line without '\n' */
    assert_int_equal(rfsys_maps_find(PROCFS, "self", 0x7f3a4a001000, &v), 0);
    assert_int_equal(v.inode, 2097154);
    assert_int_equal(rfsys_maps_find(PROCFS, "self", 0x7ffc1a2b3000, &v), 0);
    /* a truncated line before the target: -EBADMSG; after it: found */
    assert_int_equal(rfsys_maps_find(PROCFS, "100", 0x7f3a40000000, &v), 0);
    assert_int_equal(rfsys_maps_find(PROCFS, "100", 0x7f3a49000000, &v), -EBADMSG);
    assert_int_equal(rfsys_maps_find(PROCFS, "106", 0x7f3a40000000, &v), -EBADMSG);
    /* end < start, and an address that overflows 64 bits */
    assert_int_equal(rfsys_maps_find(PROCFS, "109", 0x7f3a40000000, &v), -EBADMSG);
    assert_int_equal(rfsys_maps_find(PROCFS, "110", 0x1000, &v), -EBADMSG);
    /* bad arguments */
    assert_int_equal(rfsys_maps_find(FIXTURE, "../x", 0, &v), -EINVAL);
    assert_int_equal(rfsys_maps_find(FIXTURE, "self", 0, NULL), -EINVAL);
    assert_int_equal(rfsys_maps_find(FIXTURE, "99", 0, &v), -ENOENT); /* no such file */
}

static void test_maps_find_live(void **state)
{
    (void)state;
    struct rfsys_vma v;
    int local = 0;
    const uint64_t page = rfsys_page_bytes();

    assert_int_equal(rfsys_maps_find(NULL, "self", (uint64_t)(uintptr_t)&local, &v), 0);
    assert_true(v.start_addr <= (uintptr_t)&local && (uintptr_t)&local < v.end_addr);
    assert_true(v.perms[0] == 'r' && v.perms[1] == 'w');
    /* a file mapping: the right inode and offset */
    const char *path = make_file("live.bin", 0644);
    int fd = open(path, O_RDONLY);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    char *p = mmap(NULL, 8 * page, PROT_READ, MAP_SHARED, fd, (off_t)(4 * page));
    assert_true(p != MAP_FAILED);
    assert_int_equal(rfsys_maps_find("", "self", (uint64_t)(uintptr_t)(p + 3 * page), &v), 0);
    assert_string_equal(v.perms, "r--s");
    assert_int_equal(v.inode, (uint64_t)st.st_ino);
    assert_int_equal(v.offset_bytes, 4 * page);
    munmap(p, 8 * page);
    /* gone */
    assert_int_equal(rfsys_maps_find(NULL, "self", (uint64_t)(uintptr_t)(p + 3 * page), &v),
                     -ENOENT);
    close(fd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mincore_anonymous),
        cmocka_unit_test(test_mincore_file_and_cachestat),
        cmocka_unit_test(test_file_pages_sample),
        cmocka_unit_test(test_trustworthy_owner),
        cmocka_unit_test(test_fake_residency_rule),
        cmocka_unit_test(test_maps_find_fixture),
        cmocka_unit_test(test_maps_find_live),
    };
    return rf_run_group_tests(tests, setup, teardown);
}
