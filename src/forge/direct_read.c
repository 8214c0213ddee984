/*
 * Whole-range reads of the model file with O_DIRECT where the filesystem
 * allows it (forge_internal.h, struct forge_direct_file): the read-ahead
 * window's and the expert cache's readers. A filesystem that refuses
 * O_DIRECT at open, or at the first read (EINVAL), is read through the
 * page cache instead, and the reason is kept for the report.
 */
#include "forge_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

int forge_direct_open(struct forge_direct_file *f, const struct forge_model *m, pthread_mutex_t *mu)
{
    f->mu = mu;
    f->file_bytes = (uint64_t)m->file_st.st_size;
    f->direct = true;
    f->reason = NULL;
    f->fd = open(m->mapping.path, O_RDONLY | O_CLOEXEC | O_DIRECT);
    if (f->fd < 0 && errno == EINVAL) {
        f->direct = false;
        f->reason = "the filesystem refuses O_DIRECT (open: EINVAL): reads go through the page "
                    "cache";
        f->fd = open(m->mapping.path, O_RDONLY | O_CLOEXEC);
    }
    return f->fd < 0 ? -errno : 0;
}

void forge_direct_close(struct forge_direct_file *f)
{
    if (f->fd >= 0)
        close(f->fd);
    f->fd = -1;
}

int forge_direct_read(struct forge_direct_file *f, uint8_t *dst, uint64_t off, uint64_t n)
{
    uint64_t got = 0;
    bool retried = false;
    while (got < n) {
        ssize_t r = pread(f->fd, dst + got, (size_t)(n - got), (off_t)(off + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && errno == EINVAL && !retried) { /* the filesystem refused O_DIRECT? */
            bool retry;
            retried = true;
            pthread_mutex_lock(f->mu);
            retry = !f->direct || fcntl(f->fd, F_SETFL, fcntl(f->fd, F_GETFL) & ~O_DIRECT) == 0;
            if (f->direct && retry) {
                f->direct = false;
                f->reason = "the filesystem refused an O_DIRECT read (EINVAL): reads go "
                            "through the page cache";
            }
            pthread_mutex_unlock(f->mu);
            if (retry)
                continue;
            errno = EINVAL;
        }
        if (r < 0)
            return -errno;
        if (r == 0)
            return off + got >= f->file_bytes ? 0 : -EIO;
        got += (uint64_t)r;
    }
    return 0;
}
