/*
 * The model file's identity (forge.h, forge_model_file_changed): what the
 * file was when its header was checked before the load, against what the
 * path names now. The session asks before every release, so a file
 * replaced or truncated under a running process is never advised on the
 * assumption that it is the file loaded, and the report says it changed.
 * One stat(2) per call, no read of the file.
 */
#include "forge_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/sysmacros.h>

/* Appends "; " (after the first) and the formatted text to why[size] at *len. */
static void add_difference(char *why, size_t size, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void add_difference(char *why, size_t size, size_t *len, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (!why || *len >= size)
        return;
    if (*len > 0) {
        n = snprintf(why + *len, size - *len, "; ");
        *len += n > 0 ? (size_t)n : 0;
        if (*len >= size)
            return;
    }
    va_start(ap, fmt);
    n = vsnprintf(why + *len, size - *len, fmt, ap);
    va_end(ap);
    *len += n > 0 ? (size_t)n : 0;
}

int forge_model_file_changed(const struct forge_model *m, bool *changed, char *why, size_t why_size)
{
    const struct stat *then = NULL;
    struct stat now;
    size_t len = 0;

    if (changed)
        *changed = false;
    if (!m || !changed)
        return -EINVAL;
    then = &m->file_st;
    if (why && why_size)
        why[0] = '\0';
    if (stat(m->info.path, &now) < 0) {
        int err = errno;

        add_difference(why, why_size, &len, "the model file cannot be checked (stat: %s)",
                       strerror(err));
        *changed = true;
        return 0;
    }
    if (now.st_dev != then->st_dev)
        add_difference(why, why_size, &len, "device %u:%u -> %u:%u", major(then->st_dev),
                       minor(then->st_dev), major(now.st_dev), minor(now.st_dev));
    if (now.st_ino != then->st_ino)
        add_difference(why, why_size, &len, "inode %" PRIu64 " -> %" PRIu64, (uint64_t)then->st_ino,
                       (uint64_t)now.st_ino);
    if (now.st_size != then->st_size)
        add_difference(why, why_size, &len, "size %" PRId64 " -> %" PRId64 " bytes",
                       (int64_t)then->st_size, (int64_t)now.st_size);
    if (now.st_mtim.tv_sec != then->st_mtim.tv_sec || now.st_mtim.tv_nsec != then->st_mtim.tv_nsec)
        add_difference(why, why_size, &len, "mtime %" PRId64 ".%09ld -> %" PRId64 ".%09ld",
                       (int64_t)then->st_mtim.tv_sec, then->st_mtim.tv_nsec,
                       (int64_t)now.st_mtim.tv_sec, now.st_mtim.tv_nsec);
    *changed = !(now.st_dev == then->st_dev && now.st_ino == then->st_ino &&
                 now.st_size == then->st_size && now.st_mtim.tv_sec == then->st_mtim.tv_sec &&
                 now.st_mtim.tv_nsec == then->st_mtim.tv_nsec);
    return 0;
}
