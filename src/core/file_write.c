/*
 * The one atomic file writer (ramforge/core/report_json.h, rf_file_write_atomic):
 * the JSON report, bench's summary and the Prometheus metrics file go
 * through it, so a reader of the target (a scraper, a script polling the
 * report) sees the old file or the new one, never a part.
 *
 * The steps, and what each failure leaves:
 *
 *   open DIR/.NAME.tmp.TID   nothing made (a read-only or missing directory)
 *   emit, fchmod 0644, fsync the temporary removed, the target untouched
 *   rename over DIR/NAME     the temporary removed, the target untouched
 *   fsync DIR                the new file in place, its name maybe not yet
 *                            on disk: the error is returned all the same
 *
 * A process killed (kill -9) before the rename leaves the target as it was
 * and, at most, its own temporary: hidden (a leading dot), named for the
 * target and for the writing thread's id, which is the process id in a
 * single-threaded program. The thread id keeps two threads of one process
 * off each other's temporary; a leftover of the same name can only be a
 * dead process's (the id was reused), so it is truncated and reused.
 *
 * Expected workload: one write per report or metrics file, at the end of a
 * run or per bench condition: a few files of a few KiB to a few MiB.
 */
#include "ramforge/core/report_json.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int rf_write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;

    while (len > 0) {
        ssize_t n = write(fd, p, len);

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            return -EIO; /* no progress and no reason: not expected from a regular file */
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/*
 * Splits path into its directory (dir, "." when path has no slash) and
 * the temporary's path (tmp: DIR/.NAME.tmp.TID), both new strings the
 * caller frees. Errors: -EINVAL (empty path), -EISDIR (path ends in a
 * slash: no file name), -ENOMEM.
 */
static int temp_paths(const char *path, char **dir, char **tmp)
{
    const char *slash = strrchr(path, '/');
    const char *name = slash ? slash + 1 : path;
    int dir_len = slash ? (int)(slash - path) : 0;

    *dir = *tmp = NULL;
    if (*path == '\0')
        return -EINVAL;
    if (*name == '\0')
        return -EISDIR;
    if (slash && dir_len == 0)
        dir_len = 1; /* "/NAME": the root directory */
    if (asprintf(dir, "%.*s", slash ? dir_len : 1, slash ? path : ".") < 0) {
        *dir = NULL;
        return -ENOMEM;
    }
    if (asprintf(tmp, "%.*s.%s.tmp.%ld", (int)(name - path), path, name, (long)gettid()) < 0) {
        *tmp = NULL;
        free(*dir);
        *dir = NULL;
        return -ENOMEM;
    }
    return 0;
}

/* fsync of the directory dir. A filesystem without directory fsync (EINVAL) is no error. */
static int sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int rc = 0;

    if (fd < 0)
        return -errno;
    if (fsync(fd) < 0 && errno != EINVAL)
        rc = -errno;
    close(fd);
    return rc;
}

int rf_file_write_atomic(const char *path, int (*emit)(int fd, void *ctx), void *ctx)
{
    char *dir = NULL, *tmp = NULL;
    int fd, rc;

    if (!path || !emit)
        return -EINVAL;
    rc = temp_paths(path, &dir, &tmp);
    if (rc < 0)
        return rc;
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        rc = -errno;
        goto out;
    }
    rc = emit(fd, ctx);
    if (rc == 0 && (fchmod(fd, 0644) < 0 || fsync(fd) < 0))
        rc = -errno;
    if (close(fd) < 0 && rc == 0)
        rc = -errno;
    if (rc == 0 && rename(tmp, path) < 0)
        rc = -errno;
    if (rc < 0) {
        unlink(tmp);
        goto out;
    }
    rc = sync_dir(dir);
out:
    free(tmp);
    free(dir);
    return rc;
}
