/*
 * GGUF validation before llama.cpp sees a file: a missing file, a file that
 * is not GGUF, a truncated header, or a tensor whose data lies past the end
 * of the file each get a one-line reason instead of llama.cpp's log.
 */
#include "forge_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ramforge/error.h"
#include "ramforge/gguf_header.h"

#include "gguf.h"

/* rf_gguf_read_fn over a descriptor (ctx points at the int). */
static long fd_read(void *ctx, uint64_t offset_bytes, void *buf, size_t len)
{
    ssize_t got;

    do
        got = pread(*(const int *)ctx, buf, len, (off_t)offset_bytes);
    while (got < 0 && errno == EINTR);
    return got < 0 ? -errno : (long)got;
}

int forge_gguf_open(const char *path, struct gguf_context **out, struct stat *st,
                    char err[FORGE_ERR_MAX])
{
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
    if (got < (ssize_t)sizeof(magic) || memcmp(magic, "GGUF", 4) != 0) {
        rc = -RF_EBADMODEL;
        snprintf(err, FORGE_ERR_MAX, "%s: not a GGUF file (bad magic)", path);
        goto out;
    }
    /* ramforge's own check first: gguf trusts sizes that can wrap. */
    char why[FORGE_ERR_MAX];
    rc = rf_gguf_header_check(fd_read, &fd, (uint64_t)st->st_size, NULL, why, sizeof(why));
    if (rc < 0) {
        snprintf(err, FORGE_ERR_MAX, "%s: %s", path, why);
        goto out;
    }
    struct gguf_init_params gp = {.no_alloc = true, .ctx = NULL};
    struct gguf_context *g = gguf_init_from_file(path, gp);
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
