/*
 * Cache-condition preparation for `ramforge bench` (see bench_prepare.h):
 * warming, copying, flushing, dropping and verifying one file's page-cache
 * state, with retries; the isolated copy and its timed cold reads; the
 * output directories. Only the files named are touched; nothing here needs
 * privileges.
 */
#include "bench_prepare.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "bench_cleanup.h"
#include "common/cli.h"
#include "ramforge/core/fs_profile.h"
#include "ramforge/core/intervals.h"
#include "ramforge/core/report_json.h"
#include "ramforge/core/timing.h"
#include "ramforge/sys/pages.h"

/* O_DIRECT buffers are aligned to this many bytes (covers 4 KiB logical blocks). */
#define DIRECT_ALIGN_BYTES 4096u

/* Width of the copy progress bar, characters. */
#define PROGRESS_WIDTH 30

static const char *const condition_names[BENCH_COND_N] = {
    [BENCH_COND_WARM] = "warm",
    [BENCH_COND_ISOLATED] = "isolated-nonresident",
};

static const char *const label_names[BENCH_LABEL_N] = {
    [BENCH_LABEL_CONTROLLED] = "controlled", [BENCH_LABEL_WARM] = "warm",
    [BENCH_LABEL_PARTIAL] = "partial",       [BENCH_LABEL_UNKNOWN] = "unknown",
    [BENCH_LABEL_FAILED] = "failed",
};

const char *bench_condition_name(enum bench_condition c)
{
    return (unsigned)c < BENCH_COND_N ? condition_names[c] : NULL;
}

int bench_condition_parse(const char *name, enum bench_condition *out)
{
    for (int c = 0; name && c < BENCH_COND_N; c++) {
        if (strcmp(name, condition_names[c]) == 0) {
            *out = (enum bench_condition)c;
            return 0;
        }
    }
    return -EINVAL;
}

const char *bench_label_name(enum bench_label l)
{
    return (unsigned)l < BENCH_LABEL_N ? label_names[l] : NULL;
}

/*
 * Writes the state of every page of fp into states[0..fp->file_pages) and
 * counts them into *r. Returns the first sampler error, 0 if none.
 */
static int sample_all(struct rfsys_file_pages *fp, uint8_t *states, struct bench_residency *r)
{
    uint8_t window[RF_PAGE_WINDOW_PAGES];
    int first_error = 0;

    for (uint64_t first = 0; first < fp->file_pages;) {
        uint64_t left = fp->file_pages - first;
        uint64_t n = left < RF_PAGE_WINDOW_PAGES ? left : RF_PAGE_WINDOW_PAGES;
        uint8_t *dst = states ? states + first : window;
        int rc = rfsys_file_pages_sample(fp, first, n, dst);
        if (rc < 0 && !first_error)
            first_error = rc;
        struct rf_page_counts c = {0};
        rf_page_counts_add(&c, dst, n);
        r->resident_pages += c.resident_pages;
        r->nonresident_pages += c.nonresident_pages;
        r->unknown_pages += c.unknown_pages;
        first += n;
    }
    return first_error;
}

int bench_probe_file(const char *path, struct bench_residency *out)
{
    struct rfsys_file_pages fp;
    int rc;

    memset(out, 0, sizeof(*out));
    rc = rfsys_file_pages_open(path, &fp);
    if (rc < 0) {
        out->error = rc;
        return rc;
    }
    out->file_pages = fp.file_pages;
    out->method = fp.method;
    out->error = sample_all(&fp, NULL, out);
    rfsys_file_pages_close(&fp);
    return 0;
}

enum bench_label bench_label_for(enum bench_condition c, const struct bench_residency *r)
{
    if (r->file_pages == 0 || r->unknown_pages > 0 ||
        r->resident_pages + r->nonresident_pages != r->file_pages)
        return BENCH_LABEL_UNKNOWN;
    if (r->resident_pages == r->file_pages)
        return BENCH_LABEL_WARM;
    if (r->nonresident_pages == r->file_pages && c == BENCH_COND_ISOLATED)
        return BENCH_LABEL_CONTROLLED;
    return BENCH_LABEL_PARTIAL;
}

/* read(2) retrying EINTR. */
static ssize_t read_retry(int fd, void *buf, size_t len)
{
    ssize_t n;
    do {
        n = read(fd, buf, len);
    } while (n < 0 && errno == EINTR);
    return n;
}

int bench_read_file(const char *path, uint64_t *bytes, uint64_t *ns, char err[BENCH_ERR_MAX])
{
    uint8_t *buf = NULL;
    uint64_t done = 0, t0, t1;
    int fd, rc = 0;

    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        rc = -errno;
        goto out;
    }
    buf = malloc(BENCH_IO_BYTES);
    if (!buf) {
        rc = -ENOMEM;
        goto out;
    }
    (void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL); /* a hint: failure changes nothing */
    t0 = rf_now_ns();
    for (;;) {
        ssize_t n = read_retry(fd, buf, BENCH_IO_BYTES);
        if (n < 0) {
            rc = -errno;
            goto out;
        }
        if (n == 0)
            break;
        done += (uint64_t)n;
    }
    t1 = rf_now_ns();
    if (bytes)
        *bytes = done;
    if (ns)
        *ns = t1 - t0;
out:
    if (rc < 0)
        snprintf(err, BENCH_ERR_MAX, "cannot read %s: %s", path, strerror(-rc));
    free(buf);
    if (fd >= 0)
        close(fd);
    return rc;
}

int bench_evict_file(const char *path, char err[BENCH_ERR_MAX])
{
    const char *what = "open";
    int fd, rc = 0;

    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        rc = -errno;
        goto out;
    }
    what = "flush";
    if (fsync(fd) < 0) {
        rc = -errno;
        goto out;
    }
    what = "drop the cached pages of";
    rc = -posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED); /* returns the error number */
out:
    if (rc < 0)
        snprintf(err, BENCH_ERR_MAX, "cannot %s %s: %s", what, path, strerror(-rc));
    if (fd >= 0)
        close(fd);
    return rc;
}

/* The copy progress bar on stderr; redrawn only when the percentage changes. */
static void progress_draw(uint64_t done, uint64_t total, int *last_pct)
{
    static const char bar[PROGRESS_WIDTH + 1] = "##############################";
    int pct = total ? (int)((double)done * 100.0 / (double)total) : 100;
    int fill = pct * PROGRESS_WIDTH / 100;

    if (pct == *last_pct)
        return;
    *last_pct = pct;
    fprintf(stderr, "\r%s: copying the model [%.*s%*s] %3d%% %llu/%llu MiB", RF_PROGRAM, fill, bar,
            PROGRESS_WIDTH - fill, "", pct, (unsigned long long)(done >> 20),
            (unsigned long long)(total >> 20));
    fflush(stderr);
}

/*
 * The source's page states before a buffered read, so the pages that read
 * brings in can be dropped again. NULL (nothing will be restored) when any
 * page's state is unknown: dropping pages that were cached would change
 * the source's state as much as leaving new ones.
 */
static uint8_t *snapshot_states(const char *path, uint64_t *n_pages)
{
    struct rfsys_file_pages fp;
    struct bench_residency r = {0};
    uint8_t *states;

    *n_pages = 0;
    if (rfsys_file_pages_open(path, &fp) < 0)
        return NULL;
    states = malloc(fp.file_pages ? fp.file_pages : 1);
    if (states && (sample_all(&fp, states, &r) < 0 || r.unknown_pages > 0)) {
        free(states);
        states = NULL;
    }
    *n_pages = fp.file_pages;
    rfsys_file_pages_close(&fp);
    return states;
}

/* Drops the runs of pages that were nonresident in states. Returns 0 or the first error. */
static int restore_states(int fd, const uint8_t *states, uint64_t n_pages)
{
    uint64_t pb = rfsys_page_bytes();
    int first_error = 0;

    for (uint64_t p = 0; p < n_pages;) {
        if (states[p] != RF_PAGE_NONRESIDENT) {
            p++;
            continue;
        }
        uint64_t end = p;
        while (end < n_pages && states[end] == RF_PAGE_NONRESIDENT)
            end++;
        int rc = posix_fadvise(fd, (off_t)(p * pb), (off_t)((end - p) * pb), POSIX_FADV_DONTNEED);
        if (rc && !first_error)
            first_error = -rc;
        p = end;
    }
    return first_error;
}

int bench_copy_file(const char *src, const char *dst, bool progress, struct bench_copy_info *info,
                    char err[BENCH_ERR_MAX])
{
    const char *failed = src; /* the path the error is about */
    const char *verb = "read";
    const char *reason = NULL; /* instead of strerror(-rc) */
    uint8_t *buf = NULL, *before = NULL;
    uint64_t before_pages = 0, done = 0, t0 = rf_now_ns();
    struct stat st;
    int in, out = -1, rc = 0, last_pct = -1;
    bool created = false;

    memset(info, 0, sizeof(*info));
    info->direct = true;
    in = open(src, O_RDONLY | O_CLOEXEC | O_DIRECT);
    if (in < 0 && errno == EINVAL) { /* the file system has no O_DIRECT */
        info->direct = false;
        before = snapshot_states(src, &before_pages);
        in = open(src, O_RDONLY | O_CLOEXEC);
    }
    if (in < 0 || fstat(in, &st) < 0) {
        rc = -errno;
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = -EINVAL;
        reason = "not a regular file";
        goto out;
    }
    if (posix_memalign((void **)&buf, DIRECT_ALIGN_BYTES, BENCH_IO_BYTES) != 0) {
        rc = -ENOMEM;
        buf = NULL;
        goto out;
    }
    failed = dst;
    verb = "write";
    if (unlink(dst) < 0 && errno != ENOENT) { /* never truncate in place: a link to src? */
        rc = -errno;
        goto out;
    }
    out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (out < 0) {
        rc = -errno;
        goto out;
    }
    created = true;
    for (;;) {
        ssize_t n = read_retry(in, buf, BENCH_IO_BYTES);
        if (n < 0 && errno == EINVAL && info->direct) {
            /* O_DIRECT refused here (alignment): go on buffered from this offset. The
             * pages read so far bypassed the cache, so the snapshot is still "before". */
            int fl = fcntl(in, F_GETFL);
            info->direct = false;
            before = snapshot_states(src, &before_pages);
            if (fl < 0 || fcntl(in, F_SETFL, fl & ~O_DIRECT) < 0 ||
                lseek(in, (off_t)done, SEEK_SET) < 0) {
                failed = src;
                verb = "read";
                rc = -errno;
                goto out;
            }
            continue;
        }
        if (n < 0) {
            failed = src;
            verb = "read";
            rc = -errno;
            goto out;
        }
        if (n == 0)
            break;
        rc = rf_write_all(out, buf, (size_t)n);
        if (rc < 0)
            goto out;
        done += (uint64_t)n;
        if (progress)
            progress_draw(done, (uint64_t)st.st_size, &last_pct);
    }
    if (done != (uint64_t)st.st_size) {
        failed = src;
        verb = "read";
        rc = -EIO;
        reason = "it changed size during the copy";
        goto out;
    }
    if (fsync(out) < 0) {
        rc = -errno;
        goto out;
    }
    rc = close(out) < 0 ? -errno : 0;
    out = -1;
    if (rc < 0)
        goto out;
    info->bytes = done;
    info->ns = rf_now_ns() - t0;
    if (info->direct) {
        info->source_note = "read with O_DIRECT: the source's page cache was not used";
    } else if (before && restore_states(in, before, before_pages) == 0) {
        info->restored = true;
        info->source_note = "read buffered (no O_DIRECT on this file system); the pages the "
                            "copy brought into the cache were dropped again";
    } else {
        info->source_note = "read buffered (no O_DIRECT on this file system); the source's "
                            "page-cache state could not be restored";
    }
out:
    if (progress && last_pct >= 0)
        fputs("\r\033[K", stderr);
    if (rc < 0) {
        snprintf(err, BENCH_ERR_MAX, "cannot %s %s: %s", verb, failed,
                 reason ? reason : strerror(-rc));
        if (out >= 0)
            close(out);
        if (created)
            unlink(dst);
    }
    free(before);
    free(buf);
    if (in >= 0)
        close(in);
    return rc;
}

enum bench_label bench_own_label(enum bench_condition c)
{
    return c == BENCH_COND_WARM ? BENCH_LABEL_WARM : BENCH_LABEL_CONTROLLED;
}

int bench_prepare_condition(enum bench_condition c, const char *path, struct bench_residency *prep,
                            enum bench_label *label, char err[BENCH_ERR_MAX])
{
    int rc;

    for (int attempt = 1; attempt <= BENCH_PREPARE_ATTEMPTS; attempt++) {
        rc = c == BENCH_COND_WARM ? bench_read_file(path, NULL, NULL, err)
                                  : bench_evict_file(path, err);
        if (rc < 0)
            return rc;
        rc = bench_probe_file(path, prep);
        if (rc < 0) {
            snprintf(err, BENCH_ERR_MAX, "cannot probe the page cache of %s: %s", path,
                     strerror(-rc));
            return rc;
        }
        *label = bench_label_for(c, prep);
        if (*label == bench_own_label(c) || *label == BENCH_LABEL_UNKNOWN)
            break;
    }
    return 0;
}

/*
 * Whether DIR has room for a copy of MODEL: statvfs's f_bavail (space an
 * unprivileged writer may use), plus the blocks of an earlier copy at DST
 * that the copy replaces. Unknown sizes pass (the copy's own ENOSPC then
 * tells). Returns 0 or -ENOSPC with err set.
 */
static int check_free_space(const char *model, const char *dir, const char *dst,
                            char err[BENCH_ERR_MAX])
{
    struct stat sm, sd;
    struct statvfs vfs;
    char need[32], have[32];

    if (stat(model, &sm) < 0 || statvfs(dir, &vfs) < 0)
        return 0;
    uint64_t avail = (uint64_t)vfs.f_bavail * (uint64_t)vfs.f_frsize;
    if (lstat(dst, &sd) == 0 && S_ISREG(sd.st_mode) && sd.st_nlink == 1)
        avail += (uint64_t)sd.st_blocks * 512;
    if (avail >= (uint64_t)sm.st_size)
        return 0;
    snprintf(err, BENCH_ERR_MAX,
             "not enough free space in %s for the isolated copy: %s needed, %s available", dir,
             cli_format_bytes((uint64_t)sm.st_size, false, need, sizeof(need)),
             cli_format_bytes(avail, false, have, sizeof(have)));
    return -ENOSPC;
}

int bench_copy_make(const char *model, const char *dir, bool progress, struct bench_copy *cp)
{
    const char *base = strrchr(model, '/');
    struct bench_residency res;
    char err[BENCH_ERR_MAX];
    int rc;

    base = base ? base + 1 : model;
    if (snprintf(cp->path, sizeof(cp->path), "%s/isolated-%s", dir, base) >=
        (int)sizeof(cp->path)) {
        snprintf(cp->error, sizeof(cp->error), "cannot write %s/isolated-%s: %s", dir, base,
                 strerror(ENAMETOOLONG));
        return -ENAMETOOLONG;
    }
    rc = bench_mkdir_p(dir);
    if (rc < 0) {
        snprintf(cp->error, sizeof(cp->error), "cannot create directory %s: %s", dir,
                 strerror(-rc));
        return rc;
    }
    rc = check_free_space(model, dir, cp->path, cp->error);
    if (rc < 0)
        return rc;
    bench_cleanup_set_copy(cp->path); /* a signal from here on removes the partial copy */
    rc = bench_copy_file(model, cp->path, progress, &cp->info, cp->error);
    if (rc < 0) {
        bench_cleanup_set_copy(NULL);
        return rc;
    }
    cp->made = true;

    /* tmpfs and the like: the file lives in RAM, so no read of it can be cold */
    uint64_t magic;
    const struct rf_fs_profile *fs =
        rf_fs_profile_of(rfsys_fs_magic_path(cp->path, &magic) == 0 ? magic : 0);
    if (!fs->cold_read_possible) {
        snprintf(cp->read_error, sizeof(cp->read_error),
                 "a cold read is impossible: the isolated copy is on %s, whose files live in RAM "
                 "and cannot be dropped from it",
                 fs->name);
        return 0;
    }
    for (int read = 0; read < BENCH_LIMIT_READS; read++) {
        uint64_t bytes, ns;
        for (int attempt = 1; attempt <= BENCH_PREPARE_ATTEMPTS; attempt++) {
            if (bench_evict_file(cp->path, cp->read_error) < 0)
                return 0;
            bench_probe_file(cp->path, &res); /* an error leaves no page known: unknown */
            cp->read_label = bench_label_for(BENCH_COND_ISOLATED, &res);
            if (cp->read_label == BENCH_LABEL_CONTROLLED || cp->read_label == BENCH_LABEL_UNKNOWN)
                break;
        }
        if (bench_read_file(cp->path, &bytes, &ns, err) < 0) {
            snprintf(cp->read_error, sizeof(cp->read_error), "%s", err);
            return 0;
        }
        if (!cp->read_measured || ns < cp->read_ns) {
            cp->read_bytes = bytes;
            cp->read_ns = ns;
        }
        cp->read_measured = true;
    }
    return 0;
}

int bench_mkdir_p(const char *path)
{
    char buf[PATH_MAX];
    struct stat st;

    if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
        return -ENAMETOOLONG;
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0755) < 0 && errno != EEXIST)
            return -errno;
        *p = '/';
    }
    if (mkdir(buf, 0755) < 0 && errno != EEXIST)
        return -errno;
    if (stat(buf, &st) < 0)
        return -errno;
    return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

int bench_make_output_dir(const char *dir)
{
    char tmp[PATH_MAX];
    int rc = bench_mkdir_p(dir), fd;

    if (rc < 0)
        return rc;
    if (snprintf(tmp, sizeof(tmp), "%s/.ramforge-bench.XXXXXX", dir) >= (int)sizeof(tmp))
        return -ENAMETOOLONG;
    fd = mkstemp(tmp);
    if (fd < 0)
        return -errno;
    close(fd);
    unlink(tmp);
    return 0;
}
