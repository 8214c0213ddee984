/*
 * The memory controller of a process's cgroup, v1 or v2: current usage,
 * peak, limit, and (v2) memory.high and memory.events.
 *
 * ramforge compares its own ledger with what the kernel charges the
 * cgroup, so this runs a few times per process, not in a hot loop. Finding
 * the controller directory (/proc/PID/cgroup and mountinfo) is
 * cgroup_locate.c; this file reads the controller's files there.
 *
 * Limits are effective ones: a child is bound by every ancestor's limit,
 * so v2 walks memory.max and memory.high up to the mount point and keeps
 * the lowest, and v1 takes the lower of the own memory.limit_in_bytes and
 * memory.stat's hierarchical_memory_limit.
 */
#include "ramforge/sys/sys.h"
#include "sys_internal.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
/*
 * Parses a cgroup value file's text: a decimal number, or "max" when
 * allow_max (sets *is_max and *value = 0), then optional blanks/newlines.
 * Returns 0 or -EBADMSG (including a number that does not fit 64 bits).
 */
static int parse_value(const char *s, bool allow_max, bool *is_max, uint64_t *value)
{
    *is_max = false;
    *value = 0;
    if (allow_max && strncmp(s, "max", 3) == 0) {
        *is_max = true;
        s += 3;
    } else if (rfsys__parse_u64(&s, 10, value) < 0) {
        return -EBADMSG;
    }
    while (*s == '\n' || *s == ' ' || *s == '\t')
        s++;
    return *s == '\0' ? 0 : -EBADMSG;
}

/*
 * Reads sysroot + dir/name whole into *text (NUL-terminated; the caller
 * frees it). Returns 0 with *text NULL when the file does not exist, 0 with
 * *text set, or a negative errno (path too long, read errors).
 */
static int slurp_optional(const char *sysroot, const char *dir, const char *name, char **text)
{
    char rel[PATH_MAX];
    int ret = rfsys__cgroup_join(rel, sizeof(rel), dir, name);

    *text = NULL;
    if (ret < 0)
        return ret;
    ret = rfsys_slurp(sysroot, rel, RFSYS_SMALL_FILE_BYTES, text, NULL);
    return ret == -ENOENT ? 0 : ret;
}

/* See sys_internal.h. */
int rfsys__cgroup_read_value(const char *sysroot, const char *dir, const char *name, bool allow_max,
                             bool *found, bool *is_max, uint64_t *value, char *source,
                             size_t source_size)
{
    char *text = NULL;
    bool dummy_max;
    int ret;

    *found = false;
    if (!is_max)
        is_max = &dummy_max;
    ret = slurp_optional(sysroot, dir, name, &text);
    if (ret < 0 || !text)
        goto out;
    ret = parse_value(text, allow_max, is_max, value);
    if (ret < 0)
        goto out;
    if (source) {
        ret = rfsys__cgroup_join(source, source_size, dir, name);
        if (ret < 0)
            goto out;
    }
    *found = true;

out:
    free(text);
    return ret;
}

/* See sys_internal.h. */
int rfsys__cgroup_read_keyed(const char *sysroot, const char *dir, const char *file,
                             struct rfsys__keyed *keys, size_t n, bool *file_found)
{
    char *text = NULL;
    char *cursor, *line;
    int ret;

    *file_found = false;
    ret = slurp_optional(sysroot, dir, file, &text);
    if (ret < 0 || !text)
        goto out;
    *file_found = true;
    cursor = text;
    while ((line = rfsys__next_line(&cursor)) != NULL) {
        char *space = strchr(line, ' ');

        if (space)
            *space = '\0';
        for (size_t i = 0; i < n; i++) {
            bool is_max;

            if (keys[i].found || strcmp(line, keys[i].key) != 0)
                continue;
            if (!space) {
                ret = -EBADMSG;
                goto out;
            }
            ret = parse_value(space + 1, false, &is_max, keys[i].value);
            if (ret < 0)
                goto out;
            keys[i].found = true;
            break;
        }
    }
    ret = 0;

out:
    free(text);
    return ret;
}

/*
 * Reads dir/memory.events into out->events_*. A missing file leaves
 * has_events false; unknown keys are ignored; a known key without a
 * decimal value is -EBADMSG.
 */
static int read_events(const char *sysroot, const char *dir, struct rfsys_cgroup_memory *out)
{
    struct rfsys__keyed keys[] = {
        {"low", &out->events_low, false},           {"high", &out->events_high, false},
        {"max", &out->events_max, false},           {"oom", &out->events_oom, false},
        {"oom_kill", &out->events_oom_kill, false},
    };
    bool file_found;
    int ret = rfsys__cgroup_read_keyed(sysroot, dir, "memory.events", keys,
                                       sizeof(keys) / sizeof(keys[0]), &file_found);

    if (ret == 0 && file_found)
        out->has_events = true;
    return ret;
}

/* The key of v1 memory.stat that holds the limit over the cgroup and its ancestors. */
#define V1_HIER_LIMIT_KEY "hierarchical_memory_limit"

/*
 * Reads V1_HIER_LIMIT_KEY from dir/memory.stat. A missing file or key
 * returns 0 with *found false. A key line without a decimal value is
 * -EBADMSG (and *value 0); other read errors are those of rfsys_slurp.
 */
static int read_v1_hier_limit(const char *sysroot, const char *dir, bool *found, uint64_t *value)
{
    struct rfsys__keyed key = {V1_HIER_LIMIT_KEY, value, false};
    bool file_found;
    int ret;

    *value = 0;
    ret = rfsys__cgroup_read_keyed(sysroot, dir, "memory.stat", &key, 1, &file_found);
    if (ret < 0)
        *value = 0;
    *found = ret == 0 && key.found;
    return ret;
}

/*
 * Records in out that dir/name could not be read (ret < 0, or absent);
 * returns ret. An error that ends the read replaces an absent usage file.
 */
static int failed(struct rfsys_cgroup_memory *out, const char *name, int ret)
{
    if (!out->error || (out->error == -ENOENT && ret < 0)) {
        out->error = ret < 0 ? ret : -ENOENT;
        if (rfsys__cgroup_join(out->error_source, sizeof(out->error_source), out->dir, name) < 0)
            out->error_source[0] = '\0';
    }
    return ret;
}

/*
 * Fills the v1 figures from out->dir. The limit is the lower of
 * memory.limit_in_bytes and memory.stat's hierarchical_memory_limit, each
 * at or above RFSYS_CGROUP_V1_UNLIMITED counting as none; on a tie, or
 * when both are unlimited, the own file is the source.
 */
static int read_v1(const char *sysroot, struct rfsys_cgroup_memory *out)
{
    bool own_found, hier_found;
    uint64_t own_bytes = 0, hier_bytes = 0;
    bool own_unlimited, hier_unlimited, hier_lower;
    int ret;

    ret = rfsys__cgroup_read_value(sysroot, out->dir, "memory.usage_in_bytes", false,
                                   &out->has_current, NULL, &out->current_bytes,
                                   out->current_source, sizeof(out->current_source));
    if (ret < 0 || !out->has_current)
        failed(out, "memory.usage_in_bytes", ret);
    if (ret < 0)
        return ret;
    ret = rfsys__cgroup_read_value(sysroot, out->dir, "memory.max_usage_in_bytes", false,
                                   &out->has_peak, NULL, &out->peak_bytes, out->peak_source,
                                   sizeof(out->peak_source));
    if (ret < 0)
        return failed(out, "memory.max_usage_in_bytes", ret);
    ret = rfsys__cgroup_read_value(sysroot, out->dir, "memory.limit_in_bytes", false, &own_found,
                                   NULL, &own_bytes, out->limit_source, sizeof(out->limit_source));
    if (ret < 0)
        return failed(out, "memory.limit_in_bytes", ret);
    ret = read_v1_hier_limit(sysroot, out->dir, &hier_found, &hier_bytes);
    if (ret < 0)
        return failed(out, "memory.stat", ret);

    own_unlimited = own_bytes >= RFSYS_CGROUP_V1_UNLIMITED;
    hier_unlimited = hier_bytes >= RFSYS_CGROUP_V1_UNLIMITED;
    hier_lower = !hier_unlimited && (own_unlimited || hier_bytes < own_bytes);
    if (hier_found && (!own_found || hier_lower)) {
        ret = rfsys__cgroup_join(out->limit_source, sizeof(out->limit_source), out->dir,
                                 "memory.stat " V1_HIER_LIMIT_KEY);
        if (ret < 0)
            return ret;
        out->has_limit = true;
        out->limit_inherited = true;
        out->limit_unlimited = hier_unlimited;
        out->limit_bytes = hier_unlimited ? 0 : hier_bytes;
    } else if (own_found) {
        out->has_limit = true;
        out->limit_unlimited = own_unlimited;
        out->limit_bytes = own_unlimited ? 0 : own_bytes;
    }
    return 0;
}

/* See sys_internal.h. */
bool rfsys__cgroup_cut_to_parent(char *dir, size_t keep)
{
    size_t len = strlen(dir);
    const char *slash;
    size_t cut;

    if (len <= keep)
        return false;
    slash = strrchr(dir, '/');
    cut = slash ? (size_t)(slash - dir) : 0;
    if (cut < keep)
        cut = keep;
    dir[cut] = '\0';
    return true;
}

/* The lowest of a v2 value file ("N" or "max") over a cgroup and its ancestors. */
struct v2_min {
    bool found;     /* some directory had the file */
    bool unlimited; /* every file found said "max" */
    uint64_t bytes; /* the lowest value; 0 when unlimited */
    bool inherited; /* source is an ancestor's file */
    char *source;   /* caller's buffer: the file that gave bytes */
    size_t source_size;
};

/*
 * Reads dir/name and then the same file in each ancestor of dir up to the
 * mount point (inclusive), keeping in *m the lowest value and the nearest
 * file holding it ("max" is above any number). The cgroup's own file
 * keeps read_value's errors; an ancestor's file that cannot be read or
 * parsed counts as no limit there.
 */
static int read_v2_min(const char *sysroot, const char *dir, const char *point, const char *name,
                       struct v2_min *m)
{
    char cur[sizeof(((struct rfsys_cgroup_memory *)0)->dir)];
    char source[sizeof(((struct rfsys_cgroup_memory *)0)->limit_source)];
    size_t keep = strlen(point);
    int ret;

    ret = rfsys__cgroup_read_value(sysroot, dir, name, true, &m->found, &m->unlimited, &m->bytes,
                                   m->source, m->source_size);
    if (ret < 0)
        return ret;
    m->inherited = false;

    /* dir is point + the cgroup path (see resolve_dir); walk only below point. */
    if (strlen(dir) >= sizeof(cur) || strncmp(dir, point, keep) != 0)
        return 0;
    memcpy(cur, dir, strlen(dir) + 1);
    while (rfsys__cgroup_cut_to_parent(cur, keep)) {
        bool found = false, is_max = false;
        uint64_t value = 0;

        if (rfsys__cgroup_read_value(sysroot, cur, name, true, &found, &is_max, &value, source,
                                     sizeof(source)) < 0 ||
            !found)
            continue; /* unreadable or malformed ancestor: no limit here */
        if (m->found && (is_max || (!m->unlimited && value >= m->bytes)))
            continue; /* not lower than what is nearer */
        if (strlen(source) >= m->source_size)
            continue; /* cannot name it; cannot happen with equal buffers */
        m->found = true;
        m->unlimited = is_max;
        m->bytes = value;
        m->inherited = true;
        memcpy(m->source, source, strlen(source) + 1);
    }
    return 0;
}

/* Fills the v2 figures from out->dir; point is the cgroup2 mount point. */
static int read_v2(const char *sysroot, const char *point, struct rfsys_cgroup_memory *out)
{
    struct v2_min m;
    int ret;

    ret = rfsys__cgroup_read_value(sysroot, out->dir, "memory.current", false, &out->has_current,
                                   NULL, &out->current_bytes, out->current_source,
                                   sizeof(out->current_source));
    if (ret < 0 || !out->has_current)
        failed(out, "memory.current", ret);
    if (ret < 0)
        return ret;
    ret = rfsys__cgroup_read_value(sysroot, out->dir, "memory.peak", false, &out->has_peak, NULL,
                                   &out->peak_bytes, out->peak_source, sizeof(out->peak_source));
    if (ret < 0)
        return failed(out, "memory.peak", ret);

    memset(&m, 0, sizeof(m));
    m.source = out->limit_source;
    m.source_size = sizeof(out->limit_source);
    ret = read_v2_min(sysroot, out->dir, point, "memory.max", &m);
    if (ret < 0)
        return failed(out, "memory.max", ret);
    out->has_limit = m.found;
    out->limit_unlimited = m.found && m.unlimited;
    out->limit_bytes = m.bytes;
    out->limit_inherited = m.inherited;

    memset(&m, 0, sizeof(m));
    m.source = out->high_source;
    m.source_size = sizeof(out->high_source);
    ret = read_v2_min(sysroot, out->dir, point, "memory.high", &m);
    if (ret < 0)
        return failed(out, "memory.high", ret);
    out->has_high = m.found;
    out->high_unlimited = m.found && m.unlimited;
    out->high_bytes = m.bytes;
    out->high_inherited = m.inherited;

    ret = read_events(sysroot, out->dir, out);
    return ret < 0 ? failed(out, "memory.events", ret) : 0;
}

int rfsys_read_cgroup_memory(const char *sysroot, const char *pid, struct rfsys_cgroup_memory *out)
{
    char point[sizeof(out->dir)];
    int ret;

    if (!out)
        return -EINVAL;
    memset(out, 0, sizeof(*out));
    ret = rfsys__cgroup_locate(sysroot, pid, &out->version, out->dir, sizeof(out->dir), point,
                               sizeof(point));
    if (ret == 0 && out->version == RFSYS_CGROUP_V1)
        ret = read_v1(sysroot, out);
    else if (ret == 0 && out->version == RFSYS_CGROUP_V2)
        ret = read_v2(sysroot, point, out);
    if (ret < 0) {
        /* The controller was found when one of its files failed: keep that, not "none". */
        struct rfsys_cgroup_memory found = *out;

        memset(out, 0, sizeof(*out));
        if (found.error) {
            out->version = found.version;
            memcpy(out->dir, found.dir, sizeof(out->dir));
            out->error = found.error;
            memcpy(out->error_source, found.error_source, sizeof(out->error_source));
        }
    }
    return ret;
}
