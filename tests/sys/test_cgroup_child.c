/*
 * Tests for the child memory cgroup of ramforge/sys/cgroup_child.h: where it
 * goes (fixture sysroots tests/data/sys/cg-v1-limit, cg-v2-limit, cg-none),
 * a v2 parent without the memory controller delegated (a scratch sysroot
 * made here: the directory is made and removed again), what is read back
 * (fixtures cg-child-v1, cg-child-v2), the join's text, the signal sent to
 * the processes a cgroup.procs lists (a forked child), the removal of the
 * cgroups of dead processes (a scratch sysroot), and, as root with a v1
 * memory controller, the whole life of one live child cgroup.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "../test_skip.h"
#include "ramforge/sys/cgroup_child.h"

#define ROOT(name) RF_TEST_DATA "/sys/" name

static void test_path_v2(void **state)
{
    struct rfsys_cgroup_child cg;

    (void)state;
    assert_int_equal(rfsys_cgroup_child_path(ROOT("cg-v2-limit"), "self", "rf-x", &cg), 0);
    assert_int_equal(cg.version, RFSYS_CGROUP_V2);
    assert_string_equal(cg.path,
                        ROOT("cg-v2-limit") "/sys/fs/cgroup/kubepods.slice/pod 7/ctr/rf-x");
    assert_false(cg.created);
}

static void test_path_v1(void **state)
{
    struct rfsys_cgroup_child cg;

    (void)state;
    /* the "name=memory" named hierarchy is a decoy: the memory controller is cpu,memory */
    assert_int_equal(rfsys_cgroup_child_path(ROOT("cg-v1-limit"), "self", "rf-x", &cg), 0);
    assert_int_equal(cg.version, RFSYS_CGROUP_V1);
    assert_string_equal(cg.path, ROOT("cg-v1-limit") "/sys/fs/cgroup/cpu,memory/batch/job42/rf-x");
}

static void test_path_errors(void **state)
{
    static const char *const bad[] = {"", ".", "..", "a/b", "/x"};
    struct rfsys_cgroup_child cg;

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(rfsys_cgroup_child_path(ROOT("cg-v2-limit"), "self", bad[i], &cg),
                         -EINVAL);
    assert_int_equal(rfsys_cgroup_child_path(ROOT("cg-v2-limit"), "self", NULL, &cg), -EINVAL);
    assert_int_equal(rfsys_cgroup_child_path(ROOT("cg-v2-limit"), "../1", "rf", &cg), -EINVAL);
    assert_int_equal(rfsys_cgroup_child_path(ROOT("cg-none"), "self", "rf", &cg), -EOPNOTSUPP);
    assert_int_equal(cg.version, RFSYS_CGROUP_NONE);
    assert_string_equal(cg.path, "");
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
}

/* A scratch v2 sysroot: the process in /job, memory.current there, nothing delegated. */
static void make_v2_root(char *root, size_t len)
{
    char p[512];

    snprintf(root, len, "/tmp/rf-cgchild-XXXXXX");
    assert_non_null(mkdtemp(root));
    static const char *const dirs[] = {"/proc",   "/proc/self",     "/sys",
                                       "/sys/fs", "/sys/fs/cgroup", "/sys/fs/cgroup/job"};
    for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
        snprintf(p, sizeof(p), "%s%s", root, dirs[i]);
        assert_int_equal(mkdir(p, 0755), 0);
    }
    snprintf(p, sizeof(p), "%s/proc/self/cgroup", root);
    write_text(p, "0::/job\n");
    snprintf(p, sizeof(p), "%s/proc/self/mountinfo", root);
    write_text(p, "27 26 0:24 / /sys/fs/cgroup rw,relatime shared:3 - cgroup2 cgroup2 rw\n");
    snprintf(p, sizeof(p), "%s/sys/fs/cgroup/job/memory.current", root);
    write_text(p, "1048576\n");
}

static void remove_v2_root(const char *root)
{
    static const char *const files[] = {"/proc/self/cgroup", "/proc/self/mountinfo",
                                        "/sys/fs/cgroup/job/memory.current"};
    static const char *const dirs[] = {"/sys/fs/cgroup/job", "/sys/fs/cgroup", "/sys/fs", "/sys",
                                       "/proc/self",         "/proc",          ""};
    char p[512];

    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        snprintf(p, sizeof(p), "%s%s", root, files[i]);
        unlink(p);
    }
    for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
        snprintf(p, sizeof(p), "%s%s", root, dirs[i]);
        assert_int_equal(rmdir(p), 0);
    }
}

static void test_create_v2_not_delegated(void **state)
{
    struct rfsys_cgroup_child cg;
    char root[64], want[256];
    struct stat st;

    (void)state;
    make_v2_root(root, sizeof(root));
    /* A plain directory has no memory.max: as a v2 child whose parent did not delegate. */
    assert_int_equal(rfsys_cgroup_child_create(root, "self", "rf-1", 1 << 20, &cg), -EOPNOTSUPP);
    snprintf(want, sizeof(want), "%s/sys/fs/cgroup/job/rf-1", root);
    assert_string_equal(cg.path, want);
    assert_false(cg.created);
    assert_int_equal(stat(want, &st), -1); /* made, then removed again */
    assert_int_equal(errno, ENOENT);
    /* An existing directory of that name is not taken over. */
    assert_int_equal(mkdir(want, 0755), 0);
    assert_int_equal(rfsys_cgroup_child_create(root, "self", "rf-1", 1 << 20, &cg), -EEXIST);
    assert_false(cg.created);
    assert_int_equal(rfsys_cgroup_child_remove(&cg), 0); /* not created: left alone */
    assert_int_equal(stat(want, &st), 0);
    cg.created = true;
    assert_int_equal(rfsys_cgroup_child_remove(&cg), 0);
    assert_int_equal(stat(want, &st), -1);
    assert_int_equal(rfsys_cgroup_child_remove(&cg), 0); /* gone already */
    remove_v2_root(root);
}

static void test_read_v2(void **state)
{
    struct rfsys_cgroup_child cg = {.version = RFSYS_CGROUP_V2};
    struct rfsys_cgroup_child_stats st;

    (void)state;
    snprintf(cg.path, sizeof(cg.path), "%s", ROOT("cg-child-v2/rf"));
    assert_int_equal(rfsys_cgroup_child_read(&cg, &st), 0);
    assert_true(st.has_limit);
    assert_true(st.limit_max);
    assert_int_equal(st.limit_bytes, 0);
    assert_true(st.has_events);
    assert_int_equal(st.events_high, 3);
    assert_int_equal(st.events_max, 17);
    assert_int_equal(st.events_oom, 2);
    assert_true(st.has_oom_kill);
    assert_int_equal(st.oom_kill, 1);
    assert_true(st.has_peak);
    assert_int_equal(st.peak_bytes, 943718400);
    assert_false(st.has_failcnt);

    snprintf(cg.path, sizeof(cg.path), "%s", ROOT("cg-child-v2/limited"));
    assert_int_equal(rfsys_cgroup_child_read(&cg, &st), 0);
    assert_true(st.has_limit);
    assert_false(st.limit_max);
    assert_int_equal(st.limit_bytes, 838860800);
    assert_false(st.has_events);
    assert_false(st.has_oom_kill);
    assert_false(st.has_peak);

    cg.version = RFSYS_CGROUP_NONE;
    assert_int_equal(rfsys_cgroup_child_read(&cg, &st), -EINVAL);
}

static void test_read_v1(void **state)
{
    struct rfsys_cgroup_child cg = {.version = RFSYS_CGROUP_V1};
    struct rfsys_cgroup_child_stats st;

    (void)state;
    snprintf(cg.path, sizeof(cg.path), "%s", ROOT("cg-child-v1/rf"));
    assert_int_equal(rfsys_cgroup_child_read(&cg, &st), 0);
    assert_true(st.has_limit);
    assert_false(st.limit_max);
    assert_int_equal(st.limit_bytes, 838860800);
    assert_true(st.has_failcnt);
    assert_int_equal(st.failcnt, 4242);
    assert_true(st.has_oom_kill);
    assert_int_equal(st.oom_kill, 3);
    assert_true(st.has_peak);
    assert_int_equal(st.peak_bytes, 838856704);
    assert_false(st.has_events);
}

static void test_join_text(void **state)
{
    char path[] = "/tmp/rf-cgjoin-XXXXXX", buf[32], want[32];
    int fd = mkstemp(path);

    (void)state;
    assert_true(fd >= 0);
    assert_int_equal(rfsys_cgroup_child_join(fd), 0);
    ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
    assert_true(n > 0);
    buf[n] = '\0';
    snprintf(want, sizeof(want), "%ld\n", (long)getpid());
    assert_string_equal(buf, want);
    close(fd);
    unlink(path);
    assert_int_equal(rfsys_cgroup_child_join(-1), -EBADF);
}

/* A scratch directory as a cgroup whose cgroup.procs holds text. */
static void procs_file(struct rfsys_cgroup_child *cg, const char *text)
{
    char p[RFSYS_CGROUP_CHILD_PATH_MAX + 16];

    snprintf(p, sizeof(p), "%s/cgroup.procs", cg->path);
    write_text(p, text);
}

static void test_signal(void **state)
{
    struct rfsys_cgroup_child cg = {.version = RFSYS_CGROUP_V1, .created = true};
    char text[64], p[RFSYS_CGROUP_CHILD_PATH_MAX + 16];
    int wst;

    (void)state;
    snprintf(cg.path, sizeof(cg.path), "/tmp/rf-cgsig-XXXXXX");
    assert_non_null(mkdtemp(cg.path));
    assert_int_equal(rfsys_cgroup_child_signal(&cg, 0), -ENOENT);
    pid_t pid = fork();
    if (pid == 0) {
        for (;;)
            pause();
    }
    assert_true(pid > 0);
    /* 4194305 is above PID_MAX_LIMIT (2^22): no process has it, none is counted */
    snprintf(text, sizeof(text), "%ld\n4194305\n", (long)pid);
    procs_file(&cg, text);
    assert_int_equal(rfsys_cgroup_child_signal(&cg, 0), 1);
    assert_int_equal(rfsys_cgroup_child_signal(&cg, SIGTERM), 1);
    assert_int_equal(waitpid(pid, &wst, 0), pid);
    assert_true(WIFSIGNALED(wst));
    assert_int_equal(WTERMSIG(wst), SIGTERM);
    assert_int_equal(rfsys_cgroup_child_signal(&cg, 0), 0);
    static const char *const bad[] = {"0\n", "-1\n", "x\n", "2147483648\n"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) { /* never a process group */
        procs_file(&cg, bad[i]);
        assert_int_equal(rfsys_cgroup_child_signal(&cg, 0), -EBADMSG);
    }
    procs_file(&cg, "");
    assert_int_equal(rfsys_cgroup_child_signal(&cg, SIGKILL), 0);
    cg.version = RFSYS_CGROUP_NONE;
    assert_int_equal(rfsys_cgroup_child_signal(&cg, 0), -EINVAL);
    snprintf(p, sizeof(p), "%s/cgroup.procs", cg.path);
    assert_int_equal(unlink(p), 0);
    assert_int_equal(rmdir(cg.path), 0);
}

static void test_remove_stale(void **state)
{
    static const char *const prefixes[] = {"rf-run-", "rf-exec-", "rf-bench-"};
    /* the dead: no /proc/ID in the sysroot */
    static const char *const gone[] = {"rf-exec-4000001", "rf-bench-4000002-3"};
    /* a live process's (its /proc/ID made below), a name not of one, a held one */
    static const char *const kept[] = {"rf-run-4000003",    "rf-exec-12x",   "rf-exec-",
                                       "rf-bench-4000006-", "other-4000005", "rf-serve-4000007",
                                       "rf-exec-4000004"};
    char root[64], p[512];
    struct stat st;
    unsigned left = 7;

    (void)state;
    make_v2_root(root, sizeof(root));
    for (size_t i = 0; i < 2; i++) {
        snprintf(p, sizeof(p), "%s/sys/fs/cgroup/job/%s", root, gone[i]);
        assert_int_equal(mkdir(p, 0755), 0);
    }
    for (size_t i = 0; i < sizeof(kept) / sizeof(kept[0]); i++) {
        snprintf(p, sizeof(p), "%s/sys/fs/cgroup/job/%s", root, kept[i]);
        assert_int_equal(mkdir(p, 0755), 0);
    }
    snprintf(p, sizeof(p), "%s/proc/4000003", root);
    assert_int_equal(mkdir(p, 0755), 0);
    snprintf(p, sizeof(p), "%s/sys/fs/cgroup/job/rf-exec-4000004/cgroup.procs", root);
    write_text(p, "77\n"); /* rmdir fails: as a cgroup that still holds a process */
    assert_int_equal(rfsys_cgroup_child_remove_stale(root, "self", prefixes, 3, &left), 2);
    assert_int_equal(left, 1);
    for (size_t i = 0; i < 2; i++) {
        snprintf(p, sizeof(p), "%s/sys/fs/cgroup/job/%s", root, gone[i]);
        assert_int_equal(stat(p, &st), -1);
    }
    snprintf(p, sizeof(p), "%s/sys/fs/cgroup/job/rf-exec-4000004/cgroup.procs", root);
    assert_int_equal(unlink(p), 0);
    for (size_t i = 0; i < sizeof(kept) / sizeof(kept[0]); i++) {
        snprintf(p, sizeof(p), "%s/sys/fs/cgroup/job/%s", root, kept[i]);
        assert_int_equal(rmdir(p), 0); /* each one still there */
    }
    snprintf(p, sizeof(p), "%s/proc/4000003", root);
    assert_int_equal(rmdir(p), 0);
    assert_int_equal(rfsys_cgroup_child_remove_stale(ROOT("cg-none"), "self", prefixes, 3, NULL),
                     -EOPNOTSUPP);
    remove_v2_root(root);
}

/* The live test's cgroup, removed by the teardown also when an assertion failed. */
static struct rfsys_cgroup_child live_cg;

static int live_teardown(void **state)
{
    (void)state;
    return rfsys_cgroup_child_remove(&live_cg) == 0 ? 0 : -1;
}

/* Root with a v1 memory controller: create, join from a child, read, remove. */
static void test_live_v1(void **state)
{
    struct rfsys_cgroup_child_stats st;
    char name[64], buf[64], path[RFSYS_CGROUP_CHILD_PATH_MAX + 32];
    struct stat sb;

    (void)state;
    if (geteuid() != 0) {
        fprintf(stderr, "skip: not root (cannot create a memory cgroup)\n");
        skip();
    }
    snprintf(name, sizeof(name), "rf-test-child-%ld", (long)getpid());
    if (rfsys_cgroup_child_path(NULL, "self", name, &live_cg) < 0 ||
        live_cg.version != RFSYS_CGROUP_V1) {
        fprintf(stderr, "skip: no cgroup v1 memory controller\n");
        skip();
    }
    assert_int_equal(rfsys_cgroup_child_create(NULL, "self", name, 64 << 20, &live_cg), 0);
    assert_true(live_cg.created);
    int fd = rfsys_cgroup_child_open_procs(&live_cg);
    assert_true(fd >= 0);
    pid_t pid = fork();
    if (pid == 0) {
        char own[1024];
        int ok = rfsys_cgroup_child_join(fd) == 0;
        FILE *f = fopen("/proc/self/cgroup", "r");
        /* the child sees itself in the new cgroup */
        ok = ok && f;
        bool seen = false;
        while (ok && fgets(own, sizeof(own), f))
            seen = seen || (strstr(own, "memory") && strstr(own, name));
        _exit(ok && seen ? 0 : 1);
    }
    assert_true(pid > 0);
    close(fd);
    int wst;
    assert_int_equal(waitpid(pid, &wst, 0), pid);
    assert_true(WIFEXITED(wst));
    assert_int_equal(WEXITSTATUS(wst), 0);
    assert_int_equal(rfsys_cgroup_child_read(&live_cg, &st), 0);
    assert_true(st.has_limit);
    assert_int_equal(st.limit_bytes, 64 << 20);
    assert_true(st.has_failcnt);
    assert_true(st.has_peak);
    assert_true(st.peak_bytes > 0 && st.peak_bytes <= 64 << 20);
    /* the limit file, read here directly, says the same */
    snprintf(path, sizeof(path), "%s/memory.limit_in_bytes", live_cg.path);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    assert_non_null(fgets(buf, sizeof(buf), f));
    fclose(f);
    assert_int_equal(strtoull(buf, NULL, 10), 64 << 20);
    assert_int_equal(rfsys_cgroup_child_remove(&live_cg), 0);
    assert_int_equal(stat(live_cg.path, &sb), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_path_v2),      cmocka_unit_test(test_path_v1),
        cmocka_unit_test(test_path_errors),  cmocka_unit_test(test_create_v2_not_delegated),
        cmocka_unit_test(test_read_v2),      cmocka_unit_test(test_read_v1),
        cmocka_unit_test(test_join_text),    cmocka_unit_test(test_signal),
        cmocka_unit_test(test_remove_stale), cmocka_unit_test_teardown(test_live_v1, live_teardown),
    };
    return rf_run_group_tests(tests, NULL, NULL);
}
