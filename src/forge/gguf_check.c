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
 * observes the page cache can say which pages its own read touched.
 */
/* fopencookie needs _GNU_SOURCE, which the build defines */
#include "forge_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ramforge/error.h"
#include "ramforge/gguf_header.h"

#include "gguf.h"

/* A read-only stdio stream over fd by pread, counting the furthest byte read. */
struct header_reader {
    int fd;
    off_t pos;         /* stream position, bytes */
    uint64_t read_end; /* furthest byte offset read + 1, bytes */
};

/* rf_gguf_read_fn over a header_reader: pread, counting the furthest byte read. */
static long check_read(void *ctx, uint64_t offset_bytes, void *buf, size_t len)
{
    struct header_reader *r = ctx;
    ssize_t got;

    do
        got = pread(r->fd, buf, len, (off_t)offset_bytes);
    while (got < 0 && errno == EINTR);
    if (got < 0)
        return -errno;
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

/* gguf's header parse of fd; *read_end is raised to the furthest byte read + 1. */
static struct gguf_context *header_parse(int fd, uint64_t *read_end)
{
    struct header_reader r = {.fd = fd, .pos = 0, .read_end = 0};
    cookie_io_functions_t io = {.read = header_read, .seek = header_seek};
    struct gguf_init_params gp = {.no_alloc = true, .ctx = NULL};
    struct gguf_context *g = NULL;

    FILE *f = fopencookie(&r, "r", io);
    if (f) {
        g = gguf_init_from_file_ptr(f, gp);
        fclose(f);
    }
    if (r.read_end > *read_end)
        *read_end = r.read_end;
    return g;
}

int forge_gguf_open(const char *path, struct gguf_context **out, struct stat *st,
                    char err[FORGE_ERR_MAX])
{
    return forge_gguf_open_measured(path, out, st, NULL, err);
}

int forge_gguf_open_measured(const char *path, struct gguf_context **out, struct stat *st,
                             uint64_t *read_end_bytes, char err[FORGE_ERR_MAX])
{
    uint64_t read_end = 0;
    unsigned char magic[4];
    ssize_t got;
    int fd, rc = 0;

    *out = NULL;
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        rc = -errno;
        snprintf(err, FORGE_ERR_MAX, "cannot open %s: %s", path, strerror(-rc));
        return rc;
    }
    /* before the first read: no readahead on this descriptor (advice only; without
       it the parse is the same, with readahead) */
    (void)posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
    if (fstat(fd, st) < 0) {
        rc = -errno;
        snprintf(err, FORGE_ERR_MAX, "cannot stat %s: %s", path, strerror(-rc));
        goto out;
    }
    if (!S_ISREG(st->st_mode)) {
        rc = -EINVAL;
        snprintf(err, FORGE_ERR_MAX, "%s: not a regular file", path);
        goto out;
    }
    do
        got = pread(fd, magic, sizeof(magic), 0);
    while (got < 0 && errno == EINTR);
    if (got < 0) {
        rc = -errno;
        snprintf(err, FORGE_ERR_MAX, "cannot read %s: %s", path, strerror(-rc));
        goto out;
    }
    read_end = (uint64_t)got;
    if (got < (ssize_t)sizeof(magic) || memcmp(magic, "GGUF", 4) != 0) {
        rc = -RF_EBADMODEL;
        snprintf(err, FORGE_ERR_MAX, "%s: not a GGUF file (bad magic)", path);
        goto out;
    }
    /* ramforge's own check first: gguf trusts sizes that can wrap. */
    char why[FORGE_ERR_MAX];
    struct header_reader check = {.fd = fd, .pos = 0, .read_end = read_end};
    rc = rf_gguf_header_check(check_read, &check, (uint64_t)st->st_size, NULL, why, sizeof(why));
    read_end = check.read_end;
    if (rc < 0) {
        snprintf(err, FORGE_ERR_MAX, "%s: %s", path, why);
        goto out;
    }
    struct gguf_context *g = header_parse(fd, &read_end);
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
        *read_end_bytes = read_end;
    close(fd);
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
