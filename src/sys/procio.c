/*
 * The process's storage traffic: read_bytes of /proc/<pid>/io (bytes the
 * process caused to be fetched from storage, page-cache hits excluded) and
 * majflt of /proc/<pid>/stat (major page faults: faults that read a page).
 * The streaming policy reports both per operation as deltas.
 *
 * /proc/<pid>/io is a few "name: value" lines (absent without
 * CONFIG_TASK_IO_ACCOUNTING); stat is one line whose second field, the
 * command name in parentheses, may hold spaces and parentheses: fields are
 * counted after its last ')'.
 */
#include "ramforge/sys/sys.h"
#include "sys_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* Parses a decimal uint64 at s (leading blanks allowed) into *v; the end in *end. */
static int parse_u64(const char *s, uint64_t *v, const char **end)
{
    uint64_t n = 0;
    bool any = false;

    while (*s == ' ' || *s == '\t')
        s++;
    for (; *s >= '0' && *s <= '9'; s++) {
        if (__builtin_mul_overflow(n, 10, &n) ||
            __builtin_add_overflow(n, (uint64_t)(*s - '0'), &n))
            return -EOVERFLOW;
        any = true;
    }
    if (!any)
        return -EBADMSG;
    *v = n;
    if (end)
        *end = s;
    return 0;
}

static int read_io_file(const char *sysroot, const char *pid, struct rfsys_io *out)
{
    char *text, *cursor, *line;
    int ret = rfsys__proc_slurp(sysroot, pid, "io", &text);

    if (ret < 0)
        return ret;
    cursor = text;
    while ((line = rfsys__next_line(&cursor)) != NULL) {
        if (strncmp(line, "read_bytes:", 11) == 0) {
            ret = parse_u64(line + 11, &out->read_bytes, NULL);
            if (ret < 0)
                break;
            out->has_read_bytes = true;
        }
    }
    free(text);
    return ret;
}

static int read_stat_file(const char *sysroot, const char *pid, struct rfsys_io *out)
{
    char *text;
    int ret = rfsys__proc_slurp(sysroot, pid, "stat", &text);

    if (ret < 0)
        return ret;
    /* after "pid (comm)": state(3) minflt(10) cminflt(11) majflt(12) */
    const char *s = strrchr(text, ')');
    int field = 2;
    ret = -EBADMSG;
    for (s = s ? s + 1 : NULL; s && *s; s++) {
        if (*s != ' ')
            continue;
        field++;
        if (field == 12) {
            ret = parse_u64(s + 1, &out->major_faults, NULL);
            out->has_major_faults = ret == 0;
            break;
        }
    }
    free(text);
    return ret;
}

int rfsys_read_io(const char *sysroot, const char *pid, struct rfsys_io *out)
{
    if (!out)
        return -EINVAL;
    memset(out, 0, sizeof(*out));
    int a = read_io_file(sysroot, pid, out);
    int b = read_stat_file(sysroot, pid, out);
    if (a < 0 && b < 0)
        return a;
    return 0;
}
