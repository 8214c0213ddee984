/*
 * Bounded file reading and the small text helpers every rfsys parser uses.
 *
 * rfsys_slurp is the only place in src/sys that reads a file's contents:
 * procfs and sysfs files report st_size 0, so it reads until EOF into a
 * growing buffer, retrying on EINTR, and refuses files larger than the
 * caller's bound (the largest expected input is smaps of a big process, a
 * few MiB; RFSYS_SLURP_MAX_BYTES is 64 MiB).
 */
#include "ramforge/sys/sys.h"
#include "sys_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* First buffer size: 4 KiB holds status, cgroup and every cgroup value file. */
#define SLURP_INITIAL_BYTES 4096u

int rfsys__path(char *buf, size_t size, const char *sysroot, const char *path)
{
    int n;

    if (!buf || size == 0 || !path)
        return -EINVAL;
    if (!sysroot)
        sysroot = "";
    n = snprintf(buf, size, "%s%s", sysroot, path);
    if (n < 0)
        return -EINVAL;
    if ((size_t)n >= size)
        return -ENAMETOOLONG;
    return 0;
}

static int check_pid(const char *pid)
{
    size_t i;

    if (!pid)
        return -EINVAL;
    if (strcmp(pid, "self") == 0)
        return 0;
    for (i = 0; pid[i]; i++) {
        if (pid[i] < '0' || pid[i] > '9' || i >= 10)
            return -EINVAL;
    }
    return i > 0 ? 0 : -EINVAL;
}

int rfsys__proc_path(char *buf, size_t size, const char *pid, const char *name)
{
    int n;
    int ret;

    ret = check_pid(pid);
    if (ret < 0)
        return ret;
    if (!buf || size == 0 || !name)
        return -EINVAL;
    n = snprintf(buf, size, "/proc/%s/%s", pid, name);
    if (n < 0)
        return -EINVAL;
    if ((size_t)n >= size)
        return -ENAMETOOLONG;
    return 0;
}

int rfsys__proc_slurp(const char *sysroot, const char *pid, const char *name, char **text)
{
    char path[64];
    int ret = rfsys__proc_path(path, sizeof(path), pid, name);

    *text = NULL;
    return ret < 0 ? ret : rfsys_slurp(sysroot, path, RFSYS_SLURP_MAX_BYTES, text, NULL);
}

char *rfsys__next_line(char **cursor)
{
    char *line = *cursor;
    char *nl;

    if (!line || *line == '\0')
        return NULL;
    nl = strchr(line, '\n');
    if (nl) {
        *nl = '\0';
        *cursor = nl + 1;
    } else {
        *cursor = line + strlen(line);
    }
    return line;
}

static int digit_value(char c, int base)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (base == 16 && c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (base == 16 && c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int rfsys__parse_u64(const char **sp, int base, uint64_t *out)
{
    const char *s = *sp;
    uint64_t v = 0;
    int d;
    int ret = 0;

    if (base != 10 && base != 16)
        return -EINVAL;
    if (digit_value(*s, base) < 0)
        return -EINVAL;
    for (; (d = digit_value(*s, base)) >= 0; s++) {
        /* Keep consuming digits after an overflow so *sp ends past the number. */
        if (ret == 0 && (__builtin_mul_overflow(v, (uint64_t)base, &v) ||
                         __builtin_add_overflow(v, (uint64_t)d, &v)))
            ret = -ERANGE;
    }
    *sp = s;
    if (ret == 0)
        *out = v;
    return ret;
}

static const char *skip_blanks(const char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    return s;
}

int rfsys__parse_kb(const char *s, uint64_t *bytes_out)
{
    uint64_t kib;
    int ret;

    s = skip_blanks(s);
    ret = rfsys__parse_u64(&s, 10, &kib);
    if (ret == -ERANGE)
        return -EOVERFLOW;
    if (ret < 0)
        return -EBADMSG;
    if (*s != ' ' && *s != '\t')
        return -EBADMSG;
    s = skip_blanks(s);
    if (s[0] != 'k' || s[1] != 'B')
        return -EBADMSG;
    s = skip_blanks(s + 2);
    if (*s != '\0')
        return -EBADMSG;
    if (__builtin_mul_overflow(kib, (uint64_t)1024, bytes_out))
        return -EOVERFLOW;
    return 0;
}

int rfsys_slurp(const char *sysroot, const char *path, size_t max_bytes, char **out,
                size_t *len_out)
{
    char full[PATH_MAX];
    char *buf = NULL;
    size_t cap, len = 0;
    int fd = -1;
    int ret;

    if (!out)
        return -EINVAL;
    *out = NULL;
    if (len_out)
        *len_out = 0;
    ret = rfsys__path(full, sizeof(full), sysroot, path);
    if (ret < 0)
        goto out;
    /* Room for max_bytes + 1 (to detect a larger file) + NUL must not wrap. */
    if (max_bytes > SIZE_MAX / 2)
        max_bytes = SIZE_MAX / 2;

    fd = open(full, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        ret = -errno;
        goto out;
    }
    cap = max_bytes + 2 < SLURP_INITIAL_BYTES ? max_bytes + 2 : SLURP_INITIAL_BYTES;
    buf = malloc(cap);
    if (!buf) {
        ret = -ENOMEM;
        goto out;
    }
    for (;;) {
        ssize_t n;

        if (len + 1 == cap) {
            size_t new_cap;
            char *p;

            if (__builtin_mul_overflow(cap, (size_t)2, &new_cap) || new_cap > max_bytes + 2)
                new_cap = max_bytes + 2;
            p = realloc(buf, new_cap);
            if (!p) {
                ret = -ENOMEM;
                goto out;
            }
            buf = p;
            cap = new_cap;
        }
        n = read(fd, buf + len, cap - 1 - len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            ret = -errno;
            goto out;
        }
        if (n == 0)
            break;
        len += (size_t)n;
        if (len > max_bytes) {
            ret = -EFBIG;
            goto out;
        }
    }
    buf[len] = '\0';
    *out = buf;
    buf = NULL;
    if (len_out)
        *len_out = len;
    ret = 0;

out:
    free(buf);
    if (fd >= 0)
        close(fd);
    return ret;
}
