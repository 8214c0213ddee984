/*
 * Live cgroup v1 tests of rfsys_read_cgroup_tree on the running kernel: a
 * child memory cgroup is made under this process's own, limited, and a
 * helper process is moved into it; the tree read for the helper's pid must
 * show the child with its limit and this process's cgroup as its parent.
 * Then the helper allocates past the limit (no swap: the kernel's OOM
 * killer ends it) and the counters read before and after give the
 * kernel's verdict: the limit was hit and a task was killed.
 *
 * Skipped, with the reason, when not root or without a v1 memory
 * controller. The child cgroup is removed in the teardown, also when a
 * test fails, and at exit as a fallback.
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
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "../test_skip.h"
#include "ramforge/sys/sys.h"

#define LIMIT_BYTES (64u << 20)  /* the child cgroup's limit */
#define TOUCH_BYTES (128u << 20) /* what the helper allocates past it */

static struct rfsys_cgroup_tree self_tree, tree, before, after; /* large: not on the stack */
static char child_dir[RF_CGROUP_PATH_MAX + 64];                 /* "" when none was made */
static pid_t helper = -1;
static int go_fd = -1; /* write end: one byte asks the helper to allocate */

static int write_file(const char *dir, const char *name, const char *text)
{
    char path[sizeof(child_dir) + 32];
    int fd, ret = 0;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    if (write(fd, text, strlen(text)) != (ssize_t)strlen(text))
        ret = -errno;
    close(fd);
    return ret;
}

static void stop_helper(void)
{
    if (helper > 0) {
        kill(helper, SIGKILL);
        waitpid(helper, NULL, 0);
        helper = -1;
    }
    if (go_fd >= 0) {
        close(go_fd);
        go_fd = -1;
    }
}

/* Removes the child cgroup (its tasks must be gone first). */
static void remove_child(void)
{
    stop_helper();
    for (int i = 0; child_dir[0] && i < 50; i++) {
        if (rmdir(child_dir) == 0 || errno == ENOENT) {
            child_dir[0] = '\0';
            break;
        }
        usleep(100 * 1000);
    }
}

/*
 * Starts a helper in the child cgroup: it joins, reports, then waits for
 * one byte; on that byte it touches TOUCH_BYTES of anonymous memory and
 * waits again. Returns 0 or -errno.
 */
static int start_helper(void)
{
    int ready[2], go[2];
    char c;

    if (pipe(ready) < 0 || pipe(go) < 0)
        return -errno;
    helper = fork();
    if (helper < 0)
        return -errno;
    if (helper == 0) {
        char pid[16];

        close(ready[0]);
        close(go[1]);
        snprintf(pid, sizeof(pid), "%d", (int)getpid());
        c = write_file(child_dir, "cgroup.procs", pid) == 0 ? 'y' : 'n';
        if (write(ready[1], &c, 1) != 1)
            _exit(2);
        while (read(go[0], &c, 1) == 1) {
            char *p =
                mmap(NULL, TOUCH_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

            if (p != MAP_FAILED)
                memset(p, 1, TOUCH_BYTES);
        }
        _exit(0);
    }
    close(ready[1]);
    close(go[0]);
    go_fd = go[1];
    if (read(ready[0], &c, 1) != 1 || c != 'y') {
        close(ready[0]);
        return -EIO;
    }
    close(ready[0]);
    return 0;
}

static int setup(void **state)
{
    char limit[32];

    (void)state;
    if (geteuid() != 0) {
        print_message("skipped: not root, so no memory cgroup can be made\n");
        return 0;
    }
    if (rfsys_read_cgroup_tree(NULL, "self", &self_tree) < 0 ||
        self_tree.version != RFSYS_CGROUP_V1) {
        print_message("skipped: no cgroup v1 memory controller for this process\n");
        return 0;
    }
    snprintf(child_dir, sizeof(child_dir), "%s/rf-live-%d", self_tree.levels[0].dir, (int)getpid());
    if (mkdir(child_dir, 0755) < 0) {
        print_message("skipped: cannot make %s: %s\n", child_dir, strerror(errno));
        child_dir[0] = '\0';
        return 0;
    }
    snprintf(limit, sizeof(limit), "%u", LIMIT_BYTES);
    if (write_file(child_dir, "memory.limit_in_bytes", limit) < 0 || start_helper() < 0) {
        remove_child();
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    remove_child();
    return 0;
}

static void test_live_v1_child_tree(void **state)
{
    char pid[16];
    const struct rf_cgroup_level *l = &tree.levels[0];

    (void)state;
    if (!child_dir[0])
        skip();
    snprintf(pid, sizeof(pid), "%d", (int)helper);
    assert_int_equal(rfsys_read_cgroup_tree(NULL, pid, &tree), 0);
    assert_int_equal(tree.version, RFSYS_CGROUP_V1);
    assert_int_equal(tree.n, self_tree.n + 1);
    assert_string_equal(l->dir, child_dir);
    assert_true(l->limit.has);
    assert_false(l->limit.unlimited);
    assert_int_equal(l->limit.bytes, LIMIT_BYTES);
    assert_true(l->usage.has);
    assert_true(l->usage.bytes <= LIMIT_BYTES);
    assert_true(l->inactive_file.has);
    assert_true(l->counters.has_failcnt);
    assert_int_equal(l->counters.failcnt, 0);
    /* The parent is this process's cgroup, with every level above it. */
    for (size_t i = 0; i < self_tree.n; i++)
        assert_string_equal(tree.levels[i + 1].dir, self_tree.levels[i].dir);
    /* A parent's usage includes its children's. */
    assert_true(tree.levels[1].usage.bytes >= l->usage.bytes);
}

static void test_live_v1_verdict(void **state)
{
    struct rf_cgroup_verdict v;
    char pid[16], c = 'g';
    int status = 0;

    (void)state;
    if (!child_dir[0])
        skip();
    snprintf(pid, sizeof(pid), "%d", (int)helper);
    assert_int_equal(rfsys_read_cgroup_tree(NULL, pid, &before), 0);
    if (!before.levels[0].counters.has_oom_kill) {
        print_message("skipped: memory.oom_control has no oom_kill (Linux < 4.13)\n");
        skip();
    }
    /* 128 MiB under a 64 MiB limit without swap: the kernel kills the helper. */
    assert_int_equal(write(go_fd, &c, 1), 1);
    assert_int_equal(waitpid(helper, &status, 0), helper);
    helper = -1;
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGKILL);

    /* The dead helper's cgroup is read through a new helper in it. */
    close(go_fd);
    go_fd = -1;
    assert_int_equal(start_helper(), 0);
    snprintf(pid, sizeof(pid), "%d", (int)helper);
    assert_int_equal(rfsys_read_cgroup_tree(NULL, pid, &after), 0);
    assert_int_equal(rf_cgroup_verdict_build(before.levels, before.n, after.levels, after.n, &v),
                     0);
    assert_int_equal(v.n, before.n);
    assert_string_equal(v.levels[0].dir, child_dir);
    assert_true(v.levels[0].delta.failcnt > 0);
    assert_true(v.levels[0].delta.oom_kill >= 1);
    assert_true(v.hit_limit);
    assert_true(v.oom_killed);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_live_v1_child_tree),
        cmocka_unit_test(test_live_v1_verdict),
    };
    int ret;

    atexit(remove_child);
    ret = rf_run_group_tests(tests, setup, teardown);
    remove_child();
    return ret;
}
