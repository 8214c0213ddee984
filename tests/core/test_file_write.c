/*
 * The atomic file writer (rf_file_write_atomic, rf_json_write_file) under
 * failed and interrupted writes: the target is always the old file or the
 * new one, whole; a failure leaves no temporary file and answers the
 * reason (-ENOSPC, -EROFS, -EACCES, emit's own); a writer killed with
 * SIGKILL at random points of a loop of writes leaves the target parsing
 * and, at most, its own temporary, named .NAME.tmp.PID.
 *
 * The full filesystem is a 64 KiB tmpfs and the read-only directory a
 * tmpfs remounted read-only, both mounted in this process's own mount
 * namespace (so they vanish with it even if a test dies) and unmounted by
 * the teardown; they need root and are skipped with the reason otherwise
 * (the read-only case then uses a directory of mode 0555, which root's
 * CAP_DAC_OVERRIDE would ignore).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "../test_skip.h"
#include "ramforge/core/report_json.h"
#include "test_util.h"

#define FILL_BYTES (256u << 10) /* the payload of a kill-test report: a write takes a while */
#define KILL_ROUNDS 40          /* writers killed in the kill test */

struct dir_fixture {
    char dir[PATH_MAX];
    char path[PATH_MAX + 16]; /* dir/r.json */
    bool mounted;             /* a tmpfs is mounted on dir */
};

static void make_tmpdir(struct dir_fixture *f)
{
    const char *base = getenv("TMPDIR");

    memset(f, 0, sizeof(*f));
    snprintf(f->dir, sizeof(f->dir), "%s/rf-write-XXXXXX", base && *base ? base : "/tmp");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->path, sizeof(f->path), "%s/r.json", f->dir);
}

/* The document of write number seq: its fill is seq's letter FILL_BYTES times (fill_bytes). */
static json_t *doc_of(uint64_t seq, size_t fill_bytes)
{
    char *fill = malloc(fill_bytes + 1);
    json_t *doc;

    assert_non_null(fill);
    memset(fill, 'a' + (int)(seq % 26), fill_bytes);
    fill[fill_bytes] = '\0';
    doc = json_pack("{s:I, s:s}", "seq", (json_int_t)seq, "fill", fill);
    free(fill);
    assert_non_null(doc);
    return doc;
}

/*
 * The file at path, which must parse and be a whole document of doc_of
 * (any seq); returns its seq.
 */
static uint64_t read_whole(const char *path, size_t fill_bytes)
{
    json_error_t err;
    json_t *doc = json_load_file(path, JSON_REJECT_DUPLICATES, &err);
    const char *fill;
    uint64_t seq;

    if (!doc)
        fail_msg("%s does not parse: %s (line %d)", path, err.text, err.line);
    seq = (uint64_t)json_integer_value(json_object_get(doc, "seq"));
    fill = json_string_value(json_object_get(doc, "fill"));
    assert_non_null(fill);
    assert_int_equal(strlen(fill), fill_bytes);
    for (size_t i = 0; i < fill_bytes; i++) {
        if (fill[i] != 'a' + (int)(seq % 26))
            fail_msg("%s: seq %llu with a foreign fill byte at %zu", path, (unsigned long long)seq,
                     i);
    }
    json_decref(doc);
    return seq;
}

static void write_seq(const char *path, uint64_t seq, size_t fill_bytes)
{
    json_t *doc = doc_of(seq, fill_bytes);

    assert_int_equal(rf_json_write_file(doc, path), 0);
    json_decref(doc);
}

static int teardown_dir(void **state)
{
    struct dir_fixture *f = *state;
    char names[16][256];
    char p[PATH_MAX + 300];
    int n;

    if (!f)
        return 0;
    if (f->mounted && umount2(f->dir, MNT_DETACH) < 0)
        fprintf(stderr, "cannot unmount %s: %s\n", f->dir, strerror(errno));
    chmod(f->dir, 0755);
    n = test_list_dir(f->dir, names, 16);
    for (int i = 0; i < n && i < 16; i++) {
        snprintf(p, sizeof(p), "%s/%s", f->dir, names[i]);
        unlink(p);
    }
    rmdir(f->dir);
    free(f);
    return 0;
}

static int setup_dir(void **state)
{
    struct dir_fixture *f = malloc(sizeof(*f));

    if (!f)
        return -1;
    make_tmpdir(f);
    *state = f;
    return 0;
}

/*
 * Mounts a tmpfs of size_opt ("size=64k") on f->dir in a mount namespace
 * of this process's own (made once). Returns 0, or skips with the reason.
 */
static void mount_tmpfs(struct dir_fixture *f, const char *size_opt)
{
    static int private_ns; /* 1: made; -errno: could not */

    if (geteuid() != 0) {
        print_message("skipped: not root: cannot mount a tmpfs\n");
        skip();
    }
    if (!private_ns) {
        private_ns =
            unshare(CLONE_NEWNS) == 0 && mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0
                ? 1
                : -errno;
    }
    if (private_ns < 0) {
        print_message("skipped: no private mount namespace: %s\n", strerror(-private_ns));
        skip();
    }
    if (mount("rf-test", f->dir, "tmpfs", MS_NOSUID | MS_NODEV, size_opt) < 0) {
        print_message("skipped: cannot mount a tmpfs on %s: %s\n", f->dir, strerror(errno));
        skip();
    }
    f->mounted = true;
}

/* An emit that writes half its text and fails, as a full disk or a dying emitter would. */
static int emit_half_then_fail(int fd, void *text)
{
    size_t len = strlen(text);

    assert_int_equal(rf_write_all(fd, text, len / 2), 0);
    return -EIO;
}

/*
 * The path forms: a bare name (the current directory), a trailing slash,
 * an empty path; an emit that fails half-way leaves the old file and no
 * temporary; the temporary's name is .NAME.tmp.PID (a leftover of that
 * name, a dead writer's whose id this process now has, is reused); a
 * symbolic link in the temporary's place is not followed.
 */
static void test_paths_and_failed_emit(void **state)
{
    struct dir_fixture *f = *state;
    char names[4][256], cwd[PATH_MAX], tmp[PATH_MAX + 64], victim[PATH_MAX + 16];
    json_t *doc = doc_of(1, 100);
    FILE *stale;

    assert_non_null(getcwd(cwd, sizeof(cwd)));
    assert_int_equal(chdir(f->dir), 0);
    assert_int_equal(rf_json_write_file(doc, "r.json"), 0);
    assert_int_equal(chdir(cwd), 0);
    assert_int_equal(read_whole(f->path, 100), 1);
    assert_int_equal(rf_json_write_file(doc, ""), -EINVAL);
    snprintf(tmp, sizeof(tmp), "%s/", f->dir);
    assert_int_equal(rf_json_write_file(doc, tmp), -EISDIR);

    assert_int_equal(rf_file_write_atomic(f->path, emit_half_then_fail, "0123456789"), -EIO);
    assert_int_equal(read_whole(f->path, 100), 1);
    assert_int_equal(test_list_dir(f->dir, names, 4), 1);

    snprintf(tmp, sizeof(tmp), "%s/.r.json.tmp.%ld", f->dir, (long)getpid());
    stale = fopen(tmp, "w");
    assert_non_null(stale);
    fputs("a dead writer's partial {", stale);
    fclose(stale);
    json_decref(doc);
    doc = doc_of(2, 100);
    assert_int_equal(rf_json_write_file(doc, f->path), 0);
    assert_int_equal(read_whole(f->path, 100), 2);
    assert_int_equal(test_list_dir(f->dir, names, 4), 1);
    assert_string_equal(names[0], "r.json");

    /* A link in the temporary's place: refused, neither the link's target nor r.json written. */
    snprintf(victim, sizeof(victim), "%s/victim", f->dir);
    assert_int_equal(symlink(victim, tmp), 0);
    assert_int_equal(rf_json_write_file(doc, f->path), -ELOOP);
    assert_int_equal(access(victim, F_OK), -1);
    assert_int_equal(read_whole(f->path, 100), 2);
    assert_int_equal(unlink(tmp), 0);
    json_decref(doc);
}

/*
 * A full filesystem: a 64 KiB tmpfs holding an old report; a 1 MiB report
 * fails with -ENOSPC (the reason, not a short write's -EIO), the old one
 * is whole and the temporary gone, so the space is free again and a small
 * report still fits.
 */
static void test_full_filesystem(void **state)
{
    struct dir_fixture *f = *state;
    char names[4][256];
    json_t *big;

    mount_tmpfs(f, "size=64k,mode=0755");
    write_seq(f->path, 1, 1000);
    big = doc_of(2, 1u << 20);
    assert_int_equal(rf_json_write_file(big, f->path), -ENOSPC);
    json_decref(big);
    assert_int_equal(read_whole(f->path, 1000), 1);
    assert_int_equal(test_list_dir(f->dir, names, 4), 1);
    assert_string_equal(names[0], "r.json");
    write_seq(f->path, 3, 1000);
    assert_int_equal(read_whole(f->path, 1000), 3);
}

/*
 * A read-only directory: as root, a tmpfs remounted read-only (-EROFS);
 * otherwise a directory of mode 0555 (-EACCES). The old file stays, and
 * nothing is created beside it.
 */
static void test_read_only_directory(void **state)
{
    struct dir_fixture *f = *state;
    char names[4][256];
    json_t *doc = doc_of(2, 100);
    int expect;

    if (geteuid() == 0) {
        mount_tmpfs(f, "size=64k,mode=0755");
        write_seq(f->path, 1, 100);
        assert_int_equal(mount(NULL, f->dir, NULL, MS_REMOUNT | MS_RDONLY, NULL), 0);
        expect = -EROFS;
    } else {
        write_seq(f->path, 1, 100);
        assert_int_equal(chmod(f->dir, 0555), 0);
        expect = -EACCES;
    }
    assert_int_equal(rf_json_write_file(doc, f->path), expect);
    json_decref(doc);
    assert_int_equal(read_whole(f->path, 100), 1);
    assert_int_equal(test_list_dir(f->dir, names, 4), 1);
}

static uint64_t now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* The writer: reports seq, seq + 1, ... over path until killed. */
static void writer(const char *path, uint64_t seq)
{
    for (;; seq++) {
        json_t *doc = doc_of(seq, FILL_BYTES);
        int rc = rf_json_write_file(doc, path);

        json_decref(doc);
        if (rc < 0) {
            fprintf(stderr, "writer: %s: %s\n", path, strerror(-rc));
            _exit(1);
        }
    }
}

/*
 * kill -9 at random points of a loop of writes: after each kill the target
 * parses whole, its seq never goes back, and the directory holds the
 * target and, at most, the killed writer's own .r.json.tmp.PID (removed
 * before the next round). The delays are uniform over three writes' time,
 * so kills land in the emit, the fsyncs and the rename; how many left a
 * temporary is printed.
 */
static void test_kill_during_writes(void **state)
{
    struct dir_fixture *f = *state;
    char names[4][256], own[300], tmp[PATH_MAX + 300];
    uint64_t seq, t0, per_write_us, with_temp = 0, advanced = 0;

    rng_state = (uint64_t)time(NULL);
    print_message("seed %llu\n", (unsigned long long)rng_state);
    t0 = now_us();
    for (seq = 1; seq <= 5; seq++)
        write_seq(f->path, seq, FILL_BYTES);
    per_write_us = (now_us() - t0) / 5 + 1;
    if (per_write_us > 100000)
        per_write_us = 100000; /* a slow disk: kills land early, the test stays under ~15 s */
    seq = read_whole(f->path, FILL_BYTES);

    for (int round = 0; round < KILL_ROUNDS; round++) {
        uint64_t delay_us = rng_below(3 * per_write_us) + 1, now;
        int status, n;
        pid_t pid = fork();

        assert_true(pid >= 0);
        if (pid == 0)
            writer(f->path, seq + 1);
        usleep((useconds_t)delay_us);
        assert_int_equal(kill(pid, SIGKILL), 0);
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

        now = read_whole(f->path, FILL_BYTES);
        assert_true(now >= seq);
        advanced += now > seq;
        seq = now;
        snprintf(own, sizeof(own), ".r.json.tmp.%ld", (long)pid);
        n = test_list_dir(f->dir, names, 4);
        assert_true(n == 1 || n == 2);
        assert_string_equal(names[n - 1], "r.json"); /* '.' sorts first */
        if (n == 2) {
            assert_string_equal(names[0], own);
            snprintf(tmp, sizeof(tmp), "%s/%s", f->dir, own);
            assert_int_equal(unlink(tmp), 0);
            with_temp++;
        }
    }
    print_message("%d writers killed (one write %llu us): %llu left their temporary, the target "
                  "advanced after %llu\n",
                  KILL_ROUNDS, (unsigned long long)per_write_us, (unsigned long long)with_temp,
                  (unsigned long long)advanced);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_paths_and_failed_emit, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_full_filesystem, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_read_only_directory, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_kill_during_writes, setup_dir, teardown_dir),
    };
    return rf_run_group_tests(tests, NULL, NULL);
}
