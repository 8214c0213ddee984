/*
 * GGUF validation before llama.cpp sees a file: a missing file, a file that
 * is not GGUF, a truncated header, or a tensor whose data lies past the end
 * of the file each get a one-line reason instead of llama.cpp's log.
 *
 * The header is read without readahead (POSIX_FADV_RANDOM on ramforge's
 * own descriptor, read through a stdio cookie over pread): the kernel
 * then reads only the pages holding the bytes gguf asks for, not the
 * megabytes of tensor data after the header that sequential readahead
 * would bring in. The furthest byte read is counted, so a caller that
 * observes the page cache can say which pages its own read touched. A
 * caller that observes the page cache (inspect --page-cache) reads with
 * O_DIRECT where the filesystem allows it: nothing enters the cache.
 */
/* fopencookie needs _GNU_SOURCE, which the build defines */
#include "forge_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ramforge/core/gguf_header.h"
#include "ramforge/error.h"

#include "gguf.h"

/* O_DIRECT reads: offsets, lengths and the buffer aligned to this (any block size up to a
   page), in windows of DIRECT_WINDOW_BYTES (16 pages: a header is a few MiB at most). */
#define DIRECT_ALIGN_BYTES 4096u
#define DIRECT_WINDOW_BYTES (16u * DIRECT_ALIGN_BYTES)

static const char DIRECT_REFUSED[] = "the filesystem refuses O_DIRECT: the header was read "
                                     "through the page cache, without readahead";

/* A read-only stdio stream over fd by pread, counting the furthest byte read. */
struct header_reader {
    int fd;
    off_t pos;         /* stream position, bytes */
    uint64_t read_end; /* furthest byte offset read + 1, bytes */
    /* O_DIRECT (fd opened with it): the last aligned window read; NULL: buffered reads */
    unsigned char *win;
    uint64_t win_off; /* file offset of win[0], bytes */
    size_t win_len;   /* bytes of win read (short at the end of the file) */
};

/* pread of len bytes at off, EINTR retried: bytes read or -errno. */
static ssize_t pread_full(int fd, void *buf, size_t len, uint64_t off)
{
    ssize_t got;
    do
        got = pread(fd, buf, len, (off_t)off);
    while (got < 0 && errno == EINTR);
    return got < 0 ? -errno : got;
}

/*
 * Reads through the aligned window; a refused direct read (EINVAL: the
 * filesystem's alignment or no O_DIRECT) drops O_DIRECT and the window.
 */
static ssize_t direct_read(struct header_reader *r, unsigned char *buf, size_t len, uint64_t off)
{
    size_t done = 0;
    while (done < len) {
        uint64_t at = off + done;
        if (at < r->win_off || at >= r->win_off + r->win_len) {
            uint64_t base = at - at % DIRECT_ALIGN_BYTES;
            ssize_t got = pread_full(r->fd, r->win, DIRECT_WINDOW_BYTES, base);
            if (got == -EINVAL && fcntl(r->fd, F_SETFL, fcntl(r->fd, F_GETFL) & ~O_DIRECT) == 0) {
                free(r->win); /* buffered from now on */
                r->win = NULL;
                got = pread_full(r->fd, buf + done, len - done, at);
                return got < 0 ? got : (ssize_t)done + got;
            }
            if (got < 0)
                return got;
            r->win_off = base;
            r->win_len = (size_t)got;
            if (at >= base + (uint64_t)got)
                break; /* the end of the file */
        }
        size_t k = (size_t)(r->win_off + r->win_len - at);
        k = k < len - done ? k : len - done;
        memcpy(buf + done, r->win + (at - r->win_off), k);
        done += k;
    }
    return (ssize_t)done;
}

/* rf_gguf_read_fn over a header_reader: pread, counting the furthest byte read. */
static long check_read(void *ctx, uint64_t offset_bytes, void *buf, size_t len)
{
    struct header_reader *r = ctx;
    ssize_t got =
        r->win ? direct_read(r, buf, len, offset_bytes) : pread_full(r->fd, buf, len, offset_bytes);
    if (got < 0)
        return (long)got;
    if (offset_bytes + (uint64_t)got > r->read_end)
        r->read_end = offset_bytes + (uint64_t)got;
    return (long)got;
}

/* The stdio stream's read: check_read at the stream position. */
static ssize_t header_read(void *cookie, char *buf, size_t len)
{
    struct header_reader *r = cookie;
    long got = check_read(r, (uint64_t)r->pos, buf, len);

    if (got < 0) {
        errno = (int)-got;
        return -1;
    }
    r->pos += got;
    return got;
}

static int header_seek(void *cookie, off64_t *off, int whence)
{
    struct header_reader *r = cookie;
    struct stat st;
    off64_t base = 0;

    if (whence == SEEK_CUR)
        base = r->pos;
    else if (whence == SEEK_END) {
        if (fstat(r->fd, &st) < 0)
            return -1;
        base = st.st_size;
    } else if (whence != SEEK_SET) {
        errno = EINVAL;
        return -1;
    }
    if (__builtin_add_overflow(base, *off, &base) || base < 0) {
        errno = EINVAL;
        return -1;
    }
    r->pos = *off = base;
    return 0;
}

/* gguf's header parse through r, from the start of the file (r->read_end raised). */
static struct gguf_context *header_parse(struct header_reader *r)
{
    cookie_io_functions_t io = {.read = header_read, .seek = header_seek};
    struct gguf_init_params gp = {.no_alloc = true, .ctx = NULL};
    struct gguf_context *g = NULL;

    r->pos = 0;
    FILE *f = fopencookie(r, "r", io);
    if (f) {
        g = gguf_init_from_file_ptr(f, gp);
        fclose(f);
    }
    return g;
}

int forge_gguf_open(const char *path, struct gguf_context **out, struct stat *st,
                    char err[FORGE_ERR_MAX])
{
    return forge_gguf_open_measured(path, out, st, NULL, NULL, err);
}

/* Opens path for the header read: O_DIRECT with its window when asked and allowed. */
static int open_reader(const char *path, const char **direct_reason, struct header_reader *r)
{
    memset(r, 0, sizeof(*r));
    if (direct_reason) {
        *direct_reason = DIRECT_REFUSED;
        r->fd = open(path, O_RDONLY | O_CLOEXEC | O_DIRECT);
        if (r->fd >= 0 &&
            posix_memalign((void **)&r->win, DIRECT_ALIGN_BYTES, DIRECT_WINDOW_BYTES) != 0) {
            close(r->fd);
            return -ENOMEM;
        }
        if (r->fd >= 0 || errno != EINVAL)
            return r->fd < 0 ? -errno : 0;
    }
    r->fd = open(path, O_RDONLY | O_CLOEXEC);
    return r->fd < 0 ? -errno : 0;
}

int forge_gguf_open_measured(const char *path, struct gguf_context **out, struct stat *st,
                             uint64_t *read_end_bytes, const char **direct_reason,
                             char err[FORGE_ERR_MAX])
{
    unsigned char magic[4];
    struct header_reader r;
    long got;
    int rc;

    *out = NULL;
    rc = open_reader(path, direct_reason, &r);
    if (rc < 0) {
        snprintf(err, FORGE_ERR_MAX, "cannot open %s: %s", path, rf_strerror(rc));
        if (read_end_bytes)
            *read_end_bytes = 0;
        return rc;
    }
    /* before the first read: no readahead on this descriptor (advice only; without
       it the parse is the same, with readahead) */
    (void)posix_fadvise(r.fd, 0, 0, POSIX_FADV_RANDOM);
    if (fstat(r.fd, st) < 0) {
        rc = -errno;
        snprintf(err, FORGE_ERR_MAX, "cannot stat %s: %s", path, rf_strerror(rc));
        goto out;
    }
    if (!S_ISREG(st->st_mode)) {
        rc = -EINVAL;
        snprintf(err, FORGE_ERR_MAX, "%s: not a regular file", path);
        goto out;
    }
    got = check_read(&r, 0, magic, sizeof(magic));
    if (got < 0) {
        rc = (int)got;
        snprintf(err, FORGE_ERR_MAX, "cannot read %s: %s", path, rf_strerror(rc));
        goto out;
    }
    if (got < (long)sizeof(magic) || memcmp(magic, "GGUF", 4) != 0) {
        rc = -RF_EBADMODEL;
        snprintf(err, FORGE_ERR_MAX, "%s: not a GGUF file (bad magic)", path);
        goto out;
    }
    /* ramforge's own check first: gguf trusts sizes that can wrap. */
    char why[FORGE_ERR_MAX];
    rc = rf_gguf_header_check(check_read, &r, (uint64_t)st->st_size, NULL, why, sizeof(why));
    if (rc < 0) {
        snprintf(err, FORGE_ERR_MAX, "%s: %s", path, why);
        goto out;
    }
    struct gguf_context *g = header_parse(&r);
    if (!g) {
        rc = -RF_EBADMODEL;
        snprintf(err, FORGE_ERR_MAX, "%s: truncated or corrupt GGUF header", path);
        goto out;
    }
    uint64_t data_offset = gguf_get_data_offset(g);
    int64_t n = gguf_get_n_tensors(g);
    for (int64_t i = 0; i < n; i++) {
        uint64_t end;
        if (__builtin_add_overflow(data_offset, (uint64_t)gguf_get_tensor_offset(g, i), &end) ||
            __builtin_add_overflow(end, (uint64_t)gguf_get_tensor_size(g, i), &end) ||
            end > (uint64_t)st->st_size) {
            rc = -RF_EBADMODEL;
            snprintf(err, FORGE_ERR_MAX,
                     "%s: tensor '%s' data lies past the end of the file (%llu bytes)", path,
                     gguf_get_tensor_name(g, i), (unsigned long long)st->st_size);
            gguf_free(g);
            goto out;
        }
    }
    *out = g;
out:
    if (read_end_bytes)
        *read_end_bytes = r.read_end;
    if (direct_reason)
        *direct_reason = r.win ? NULL : DIRECT_REFUSED;
    free(r.win);
    close(r.fd);
    return rc;
}

void forge_tensor_table_fill(const struct gguf_context *g, struct rf_tensor_meta *t)
{
    int64_t n = gguf_get_n_tensors(g);
    uint64_t data_offset = gguf_get_data_offset(g);

    for (int64_t i = 0; i < n; i++) {
        t[i].index = (uint32_t)i;
        snprintf(t[i].name, sizeof(t[i].name), "%s", gguf_get_tensor_name(g, i));
        snprintf(t[i].type_name, sizeof(t[i].type_name), "%s",
                 ggml_type_name(gguf_get_tensor_type(g, i)));
        t[i].mapping_index = 0;
        /* forge_gguf_open proved data_offset + offset + size fits the file. */
        t[i].file_offset_bytes = data_offset + gguf_get_tensor_offset(g, i);
        t[i].logical_bytes = gguf_get_tensor_size(g, i);
        t[i].access = RF_ACCESS_UNKNOWN;
    }
}

int forge_gguf_check(const char *path, char err[FORGE_ERR_MAX])
{
    struct gguf_context *g;
    struct stat st;
    int rc = forge_gguf_open(path, &g, &st, err);
    if (rc == 0)
        gguf_free(g);
    return rc;
}
