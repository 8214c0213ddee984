/*
 * /proc/<pid>/maps and /proc/<pid>/smaps: the process's VMAs, and per VMA
 * the resident (Rss), proportional (Pss), shared/private and locked bytes.
 *
 * forge uses this to find the model file's r--s mapping and to measure how
 * much of it is resident. A model process has a few hundred to a few
 * thousand VMAs; smaps of such a process is a few MiB of text, read in one
 * bounded slurp and parsed in place.
 *
 * Reading smaps costs more than its text: the kernel walks every page of
 * every mapping to add up Rss and Pss (about 8 ms for a 1.1 GiB model
 * mapping here). Where only the model mapping's resident bytes are needed,
 * rfsys_maps_resident_file asks PAGEMAP_SCAN about that mapping alone
 * (about 1.3 ms for the same mapping).
 */
#include "ramforge/sys/sys.h"
#include "sys_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

/*
 * PAGEMAP_SCAN of Linux 6.7 (uapi linux/fs.h), spelled out here because
 * older userspace headers lack it: the ioctl number encodes the size of
 * the argument, which is the kernel's struct pm_scan_arg field for field.
 */
struct pm_region {
    uint64_t start, end, categories;
};
struct pm_scan_arg {
    uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages;
    uint64_t category_inverted, category_mask, category_anyof_mask, return_mask;
};
#define PM_SCAN_IOCTL _IOWR('f', 16, struct pm_scan_arg)
#define PM_PAGE_IS_PRESENT (1u << 3)
/* Ranges asked for per ioctl; a fragmented mapping takes several calls. */
#define PM_SCAN_REGIONS 128

/* Suffix the kernel appends to the path of an unlinked file. */
#define DELETED_SUFFIX " (deleted)"

void rfsys_maps_init(struct rfsys_maps *maps)
{
    if (!maps)
        return;
    maps->v = NULL;
    maps->n = 0;
}

void rfsys_maps_free(struct rfsys_maps *maps)
{
    size_t i;

    if (!maps)
        return;
    for (i = 0; i < maps->n; i++)
        free(maps->v[i].path);
    free(maps->v);
    rfsys_maps_init(maps);
}

/* Consumes the character c at *sp; false (and *sp unchanged) otherwise. */
static bool expect_char(const char **sp, char c)
{
    if (**sp != c)
        return false;
    (*sp)++;
    return true;
}

/* Consumes one or more spaces at *sp; false when there is none. */
static bool expect_spaces(const char **sp)
{
    if (**sp != ' ')
        return false;
    while (**sp == ' ')
        (*sp)++;
    return true;
}

/* Parses the 4-character permission field "[r-][w-][x-][sp]" into perms. */
static bool parse_perms(const char **sp, char perms[5])
{
    const char *s = *sp;

    if ((s[0] != 'r' && s[0] != '-') || (s[1] != 'w' && s[1] != '-') ||
        (s[2] != 'x' && s[2] != '-') || (s[3] != 's' && s[3] != 'p'))
        return false; /* short-circuits at the NUL of a truncated field */
    memcpy(perms, s, 4);
    perms[4] = '\0';
    *sp = s + 4;
    return true;
}

/*
 * Parses one maps line
 *     "start-end perms offset major:minor inode [spaces] [path]"
 * (hex except the decimal inode) into *m, which it overwrites. The path is
 * everything after the blanks that follow the inode, spaces included; a
 * trailing " (deleted)" is removed and sets m->deleted. On success m->path
 * is NULL or a heap copy the caller frees. Returns 0, -EBADMSG or -ENOMEM.
 */
static int parse_map_line(const char *s, struct rfsys_mapping *m)
{
    uint64_t major, minor;
    size_t path_len;

    memset(m, 0, sizeof(*m));
    if (rfsys__parse_u64(&s, 16, &m->start_addr) < 0 || !expect_char(&s, '-') ||
        rfsys__parse_u64(&s, 16, &m->end_addr) < 0 || !expect_spaces(&s) ||
        !parse_perms(&s, m->perms) || !expect_spaces(&s) ||
        rfsys__parse_u64(&s, 16, &m->offset_bytes) < 0 || !expect_spaces(&s) ||
        rfsys__parse_u64(&s, 16, &major) < 0 || !expect_char(&s, ':') ||
        rfsys__parse_u64(&s, 16, &minor) < 0 || !expect_spaces(&s) ||
        rfsys__parse_u64(&s, 10, &m->inode) < 0)
        return -EBADMSG;
    if (m->end_addr < m->start_addr || major > UINT32_MAX || minor > UINT32_MAX)
        return -EBADMSG;
    m->dev_major = (uint32_t)major;
    m->dev_minor = (uint32_t)minor;

    if (*s == '\0')
        return 0; /* anonymous, no trailing blank */
    if (!expect_spaces(&s))
        return -EBADMSG; /* e.g. "1234x" in the inode field */
    if (*s == '\0')
        return 0; /* anonymous: the kernel writes a blank after the inode */

    path_len = strlen(s);
    if (path_len > strlen(DELETED_SUFFIX) &&
        strcmp(s + path_len - strlen(DELETED_SUFFIX), DELETED_SUFFIX) == 0) {
        path_len -= strlen(DELETED_SUFFIX);
        m->deleted = true;
    }
    m->path = strndup(s, path_len);
    if (!m->path)
        return -ENOMEM;
    return 0;
}

/* True for an smaps field line "Name:...", Name being [A-Za-z0-9_]+. */
static bool is_field_line(const char *s, const char **value_out)
{
    const char *p = s;

    while ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
           *p == '_')
        p++;
    if (p == s || *p != ':')
        return false;
    *value_out = p + 1;
    return true;
}

/*
 * Applies an smaps field line to *m: the eight size fields must hold
 * "<number> kB" (-EBADMSG, -EOVERFLOW); any other field is ignored.
 */
static int parse_smaps_field(const char *line, const char *value, struct rfsys_mapping *m)
{
    const struct {
        const char *name;
        uint64_t *bytes;
    } fields[] = {
        {"Rss", &m->rss_bytes},
        {"Pss", &m->pss_bytes},
        {"Shared_Clean", &m->shared_clean_bytes},
        {"Shared_Dirty", &m->shared_dirty_bytes},
        {"Private_Clean", &m->private_clean_bytes},
        {"Private_Dirty", &m->private_dirty_bytes},
        {"Anonymous", &m->anonymous_bytes},
        {"Locked", &m->locked_bytes},
    };
    size_t name_len = (size_t)(value - 1 - line);
    size_t i;

    for (i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        if (strlen(fields[i].name) == name_len && memcmp(line, fields[i].name, name_len) == 0)
            return rfsys__parse_kb(value, fields[i].bytes);
    }
    return 0;
}

/* Appends an empty mapping to *maps and returns it in *m_out. -ENOMEM. */
static int maps_push(struct rfsys_maps *maps, size_t *cap, struct rfsys_mapping **m_out)
{
    if (maps->n == *cap) {
        size_t new_cap = *cap ? *cap : 64;
        size_t bytes;
        struct rfsys_mapping *v;

        if (*cap && __builtin_mul_overflow(*cap, (size_t)2, &new_cap))
            return -ENOMEM;
        if (__builtin_mul_overflow(new_cap, sizeof(*v), &bytes))
            return -ENOMEM;
        v = realloc(maps->v, bytes);
        if (!v)
            return -ENOMEM;
        maps->v = v;
        *cap = new_cap;
    }
    *m_out = &maps->v[maps->n++];
    memset(*m_out, 0, sizeof(**m_out));
    return 0;
}

/*
 * Reads SYSROOT/proc/PID/NAME (maps or smaps) into *out. With_smaps
 * accepts field lines after each header and sets has_smaps. On any error
 * *out is left empty.
 */
static int read_maps_file(const char *sysroot, const char *pid, const char *name, bool with_smaps,
                          struct rfsys_maps *out)
{
    struct rfsys_maps maps;
    struct rfsys_mapping *cur = NULL;
    size_t cap = 0;
    char *text = NULL;
    char *cursor, *line;
    int ret;

    rfsys_maps_init(&maps);
    if (!out)
        return -EINVAL;
    rfsys_maps_free(out);
    ret = rfsys__proc_slurp(sysroot, pid, name, &text);
    if (ret < 0)
        goto out;

    cursor = text;
    while ((line = rfsys__next_line(&cursor)) != NULL) {
        const char *value;

        if (*line == '\0')
            continue; /* an empty line carries nothing */
        if (with_smaps && is_field_line(line, &value)) {
            if (!cur) {
                ret = -EBADMSG; /* a field before the first header */
                goto out;
            }
            ret = parse_smaps_field(line, value, cur);
            if (ret < 0)
                goto out;
            continue;
        }
        ret = maps_push(&maps, &cap, &cur);
        if (ret < 0)
            goto out;
        ret = parse_map_line(line, cur);
        if (ret < 0) {
            maps.n--; /* cur owns nothing after a failed parse */
            goto out;
        }
        cur->has_smaps = with_smaps;
    }
    *out = maps;
    rfsys_maps_init(&maps);
    ret = 0;

out:
    rfsys_maps_free(&maps);
    free(text);
    return ret;
}

/* Reads of a live maps file before giving up on a torn one (see read_consistent). */
#define MAPS_READ_ATTEMPTS 4

/* Whether some mapping of maps starts before the previous one ends. */
static bool overlaps(const struct rfsys_maps *maps)
{
    for (size_t i = 1; i < maps->n; i++) {
        if (maps->v[i].start_addr < maps->v[i - 1].end_addr)
            return true;
    }
    return false;
}

/*
 * read_maps_file, for a live file (no sysroot) read again while what was
 * read overlaps: the kernel writes maps one buffer per read() and drops the
 * process's mmap lock between reads, so a mapping created, grown or merged
 * meanwhile (by this very read's buffer growing, another thread's
 * allocation) can be listed twice. A fixture tree (a sysroot) is parsed as
 * it is. Errors: read_maps_file's, and -EAGAIN when every attempt was torn.
 */
static int read_consistent(const char *sysroot, const char *pid, const char *name, bool with_smaps,
                           struct rfsys_maps *out)
{
    int ret = read_maps_file(sysroot, pid, name, with_smaps, out);

    if (sysroot && *sysroot)
        return ret;
    for (int i = 1; ret == 0 && overlaps(out); i++) {
        if (i == MAPS_READ_ATTEMPTS) {
            rfsys_maps_free(out);
            return -EAGAIN;
        }
        ret = read_maps_file(sysroot, pid, name, with_smaps, out);
    }
    return ret;
}

int rfsys_read_maps(const char *sysroot, const char *pid, struct rfsys_maps *out)
{
    return read_consistent(sysroot, pid, "maps", false, out);
}

int rfsys_read_smaps(const char *sysroot, const char *pid, struct rfsys_maps *out)
{
    return read_consistent(sysroot, pid, "smaps", true, out);
}

int rfsys_maps_sum_file(const struct rfsys_maps *maps, uint32_t dev_major, uint32_t dev_minor,
                        uint64_t inode, const char *perms, struct rfsys_mapping_sum *out)
{
    struct rfsys_mapping_sum sum;
    size_t i;
    int ret = 0;

    if (!out)
        return -EINVAL;
    memset(out, 0, sizeof(*out));
    if (!maps || (maps->n && !maps->v))
        return -EINVAL;
    memset(&sum, 0, sizeof(sum));
    sum.complete = true;
    for (i = 0; i < maps->n; i++) {
        const struct rfsys_mapping *m = &maps->v[i];
        uint64_t len;

        if (m->dev_major != dev_major || m->dev_minor != dev_minor || m->inode != inode)
            continue;
        if (perms && strcmp(m->perms, perms) != 0)
            continue;
        if (m->end_addr < m->start_addr) {
            ret = -EINVAL; /* not a list rfsys_read_maps produced */
            goto out;
        }
        len = m->end_addr - m->start_addr;
        sum.n_mappings++;
        if (__builtin_add_overflow(sum.virtual_bytes, len, &sum.virtual_bytes)) {
            ret = -EOVERFLOW;
            goto out;
        }
        if (!m->has_smaps) {
            sum.complete = false;
            continue;
        }
        if (__builtin_add_overflow(sum.rss_bytes, m->rss_bytes, &sum.rss_bytes) ||
            __builtin_add_overflow(sum.pss_bytes, m->pss_bytes, &sum.pss_bytes) ||
            __builtin_add_overflow(sum.locked_bytes, m->locked_bytes, &sum.locked_bytes)) {
            ret = -EOVERFLOW;
            goto out;
        }
    }
    *out = sum;

out:
    return ret;
}

int rfsys_pagemap_open(const char *sysroot, const char *pid)
{
    char rel[64], path[4096];
    int rc = rfsys__proc_path(rel, sizeof(rel), pid, "pagemap");

    if (rc == 0)
        rc = rfsys__path(path, sizeof(path), sysroot, rel);
    if (rc < 0)
        return rc;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

int rfsys__pagemap_scan(int fd, uint64_t start, uint64_t end,
                        int (*region)(void *ctx, uint64_t start, uint64_t end), void *ctx)
{
    struct pm_region vec[PM_SCAN_REGIONS];
    uint64_t cur = start;

    while (cur < end) {
        struct pm_scan_arg a = {
            .size = sizeof(a),
            .start = cur,
            .end = end,
            .vec = (uint64_t)(uintptr_t)vec,
            .vec_len = PM_SCAN_REGIONS,
            .category_mask = PM_PAGE_IS_PRESENT,
            .return_mask = PM_PAGE_IS_PRESENT,
        };
        long n = ioctl(fd, PM_SCAN_IOCTL, &a);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return errno == ENOTTY ? -EOPNOTSUPP : -errno;
        for (long i = 0; i < n; i++) {
            if (vec[i].end < vec[i].start || vec[i].start < start || vec[i].end > end)
                return -EIO;
            int rc = region(ctx, vec[i].start, vec[i].end);
            if (rc < 0)
                return rc;
        }
        if (a.walk_end <= cur || a.walk_end > end)
            return -EIO; /* no progress: not an answer this code understands */
        cur = a.walk_end;
    }
    return 0;
}

static int add_region(void *ctx, uint64_t start, uint64_t end)
{
    uint64_t *sum = ctx;
    return __builtin_add_overflow(*sum, end - start, sum) ? -EOVERFLOW : 0;
}

/* Present bytes of [start, end) (page aligned, from maps) by PAGEMAP_SCAN. */
static int present_bytes(int fd, uint64_t start, uint64_t end, uint64_t *bytes)
{
    *bytes = 0;
    return rfsys__pagemap_scan(fd, start, end, add_region, bytes);
}

int rfsys_maps_resident_file(const struct rfsys_maps *maps, int pagemap_fd, uint32_t dev_major,
                             uint32_t dev_minor, uint64_t inode, const char *perms,
                             struct rfsys_mapping_sum *out)
{
    struct rfsys_mapping_sum sum;
    int rc = 0;

    if (!out)
        return -EINVAL;
    memset(out, 0, sizeof(*out));
    if (!maps || (maps->n && !maps->v) || pagemap_fd < 0)
        return -EINVAL;
    memset(&sum, 0, sizeof(sum));
    sum.complete = true;
    for (size_t i = 0; i < maps->n; i++) {
        const struct rfsys_mapping *m = &maps->v[i];
        uint64_t present;

        if (m->dev_major != dev_major || m->dev_minor != dev_minor || m->inode != inode ||
            (perms && strcmp(m->perms, perms) != 0))
            continue;
        if (m->end_addr < m->start_addr)
            return -EINVAL;
        sum.n_mappings++;
        rc = present_bytes(pagemap_fd, m->start_addr, m->end_addr, &present);
        if (rc < 0)
            return rc;
        if (__builtin_add_overflow(sum.virtual_bytes, m->end_addr - m->start_addr,
                                   &sum.virtual_bytes) ||
            __builtin_add_overflow(sum.rss_bytes, present, &sum.rss_bytes))
            return -EOVERFLOW;
    }
    *out = sum;
    return 0;
}
