/*
 * The memory cgroup hierarchy of a process, v1 or v2: the cgroup itself
 * and each ancestor up to the mount point, with per level the hard limit,
 * memory.high, the usage, the inactive file cache, the reclaimable file
 * cache and the kernel's verdict counters (see rfsys_read_cgroup_tree in sys.h).
 *
 * Read once before a run and once after it (a handful of small files per
 * level, at most RF_CGROUP_MAX_LEVELS levels). Unlike
 * rfsys_read_cgroup_memory, a figure that cannot be read never takes the
 * others with it: the error is kept on that figure alone.
 */
#include "ramforge/sys/sys.h"
#include "sys_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* How a value file is read. */
enum figure_kind {
    FIG_VALUE,    /* a decimal number */
    FIG_V1_LIMIT, /* a number; at or above the v1 sentinel: unlimited */
    FIG_V2_LIMIT, /* a number or "max" */
};

/* Reads dir/name into *f; any failure is kept in f->error. */
static void read_figure(const char *sysroot, const char *dir, const char *name,
                        enum figure_kind kind, struct rf_cgroup_figure *f)
{
    bool found = false, is_max = false;
    uint64_t v = 0;
    int ret;

    memset(f, 0, sizeof(*f));
    if (rfsys__cgroup_join(f->source, sizeof(f->source), dir, name) < 0) {
        f->source[0] = '\0';
        f->error = -ENAMETOOLONG;
        return;
    }
    ret = rfsys__cgroup_read_value(sysroot, dir, name, kind == FIG_V2_LIMIT, &found, &is_max, &v,
                                   NULL, 0);
    if (ret < 0 || !found) {
        f->error = ret < 0 ? ret : -ENOENT;
        return;
    }
    f->has = true;
    f->unlimited = is_max || (kind == FIG_V1_LIMIT && v >= RFSYS_CGROUP_V1_UNLIMITED);
    f->bytes = f->unlimited ? 0 : v;
}

/* Reads one key of a flat-keyed file into *f (source "dir/file key"). */
static void read_keyed_figure(const char *sysroot, const char *dir, const char *file,
                              const char *key, struct rf_cgroup_figure *f)
{
    struct rfsys__keyed k = {key, &f->bytes, false};
    char rel[RF_CGROUP_PATH_MAX];
    bool file_found = false;
    int ret;

    memset(f, 0, sizeof(*f));
    if (rfsys__cgroup_join(rel, sizeof(rel), dir, file) < 0 ||
        (size_t)snprintf(f->source, sizeof(f->source), "%s %s", rel, key) >= sizeof(f->source)) {
        f->source[0] = '\0';
        f->error = -ENAMETOOLONG;
        return;
    }
    ret = rfsys__cgroup_read_keyed(sysroot, dir, file, &k, 1, &file_found);
    if (ret < 0 || !k.found) {
        f->bytes = 0;
        f->error = ret < 0 ? ret : -ENOENT;
        return;
    }
    f->has = true;
}

/* The memory.stat keys of the reclaimable file cache: added, subtracted, required or not. */
struct stat_term {
    const char *key;
    bool subtract;
    bool required;
};

static const struct stat_term v1_terms[] = {
    {"total_active_file", false, true}, {"total_inactive_file", false, true},
    {"total_mapped_file", true, true},  {"total_dirty", true, false},
    {"total_writeback", true, false},
};

static const struct stat_term v2_terms[] = {
    {"file", false, true},           {"file_mapped", true, true}, {"file_dirty", true, false},
    {"file_writeback", true, false}, {"shmem", true, false},      {"unevictable", true, false},
};

/* The clean mapped file pages (cgroup_levels.h mapped_file). */
static const struct stat_term v1_mapped_terms[] = {
    {"total_mapped_file", false, true}, {"total_shmem", true, false},
    {"total_unevictable", true, false}, {"total_dirty", true, false},
    {"total_writeback", true, false},
};

static const struct stat_term v2_mapped_terms[] = {
    {"file_mapped", false, true}, {"shmem", true, false},          {"unevictable", true, false},
    {"file_dirty", true, false},  {"file_writeback", true, false},
};

#define MAX_TERMS 6
#define N_TERMS(t) (sizeof(t) / sizeof((t)[0]))

/*
 * Reads the sum of the added keys of dir/memory.stat less the subtracted
 * ones present, floored at 0, into *f (terms t[n]); source names the file
 * and the keys used. A required key absent: -ENOENT, naming it.
 */
static void read_stat_terms(const char *sysroot, const char *dir, const struct stat_term *t,
                            size_t n, struct rf_cgroup_figure *f)
{
    struct rfsys__keyed k[MAX_TERMS];
    uint64_t v[MAX_TERMS] = {0}, add = 0, sub = 0;
    bool file_found = false;
    size_t len;
    int ret;

    memset(f, 0, sizeof(*f));
    if (rfsys__cgroup_join(f->source, sizeof(f->source), dir, "memory.stat") < 0) {
        f->source[0] = '\0';
        f->error = -ENAMETOOLONG;
        return;
    }
    for (size_t i = 0; i < n; i++)
        k[i] = (struct rfsys__keyed){t[i].key, &v[i], false};
    ret = rfsys__cgroup_read_keyed(sysroot, dir, "memory.stat", k, n, &file_found);
    for (size_t i = 0; ret == 0 && i < n; i++)
        if (t[i].required && !k[i].found) {
            len = strlen(f->source);
            snprintf(f->source + len, sizeof(f->source) - len, " %s", t[i].key);
            ret = -ENOENT;
        }
    for (size_t i = 0; ret == 0 && i < n; i++) {
        if (!k[i].found)
            continue;
        len = strlen(f->source);
        snprintf(f->source + len, sizeof(f->source) - len, "%s%s",
                 i == 0          ? " "
                 : t[i].subtract ? " - "
                                 : " + ",
                 t[i].key);
        if (t[i].subtract)
            sub = __builtin_add_overflow(sub, v[i], &sub) ? UINT64_MAX : sub;
        else if (__builtin_add_overflow(add, v[i], &add))
            ret = -EOVERFLOW;
    }
    if (ret < 0) {
        f->error = ret;
        return;
    }
    f->has = true;
    f->bytes = add > sub ? add - sub : 0;
}

/* Reads the verdict counters of one level; absent or malformed files leave them absent. */
static void read_counters(const char *sysroot, const char *dir, enum rfsys_cgroup_version version,
                          struct rf_cgroup_counters *c)
{
    bool file_found = false, found = false;

    memset(c, 0, sizeof(*c));
    if (version == RFSYS_CGROUP_V1) {
        struct rfsys__keyed k = {"oom_kill", &c->oom_kill, false};

        if (rfsys__cgroup_read_value(sysroot, dir, "memory.failcnt", false, &found, NULL,
                                     &c->failcnt, NULL, 0) == 0 &&
            found)
            c->has_failcnt = true;
        else
            c->failcnt = 0;
        if (rfsys__cgroup_read_keyed(sysroot, dir, "memory.oom_control", &k, 1, &file_found) == 0)
            c->has_oom_kill = k.found;
        if (!c->has_oom_kill)
            c->oom_kill = 0;
    } else {
        struct rfsys__keyed k[] = {
            {"high", &c->events_high, false},
            {"max", &c->events_max, false},
            {"oom", &c->events_oom, false},
            {"oom_kill", &c->oom_kill, false},
        };

        if (rfsys__cgroup_read_keyed(sysroot, dir, "memory.events", k, 4, &file_found) < 0) {
            memset(c, 0, sizeof(*c));
            return;
        }
        c->has_events_high = k[0].found;
        c->has_events_max = k[1].found;
        c->has_events_oom = k[2].found;
        c->has_oom_kill = k[3].found;
    }
}

/* Reads every figure of the level at dir. */
static void read_level(const char *sysroot, const char *dir, enum rfsys_cgroup_version version,
                       struct rf_cgroup_level *l)
{
    bool v1 = version == RFSYS_CGROUP_V1;

    memset(l, 0, sizeof(*l));
    memcpy(l->dir, dir, strlen(dir) + 1); /* fits: the caller checked */
    if (v1) {
        read_figure(sysroot, dir, "memory.limit_in_bytes", FIG_V1_LIMIT, &l->limit);
        l->high.error = -ENOENT; /* v1 has no memory.high */
        read_figure(sysroot, dir, "memory.usage_in_bytes", FIG_VALUE, &l->usage);
        read_keyed_figure(sysroot, dir, "memory.stat", "total_inactive_file", &l->inactive_file);
        read_stat_terms(sysroot, dir, v1_terms, N_TERMS(v1_terms), &l->reclaimable_file);
        read_stat_terms(sysroot, dir, v1_mapped_terms, N_TERMS(v1_mapped_terms), &l->mapped_file);
    } else {
        read_figure(sysroot, dir, "memory.max", FIG_V2_LIMIT, &l->limit);
        read_figure(sysroot, dir, "memory.high", FIG_V2_LIMIT, &l->high);
        read_figure(sysroot, dir, "memory.current", FIG_VALUE, &l->usage);
        read_keyed_figure(sysroot, dir, "memory.stat", "inactive_file", &l->inactive_file);
        read_stat_terms(sysroot, dir, v2_terms, N_TERMS(v2_terms), &l->reclaimable_file);
        read_stat_terms(sysroot, dir, v2_mapped_terms, N_TERMS(v2_mapped_terms), &l->mapped_file);
    }
    read_counters(sysroot, dir, version, &l->counters);
}

/* True when a and b name the same directory, ignoring trailing slashes. */
static bool same_dir(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);

    while (la > 1 && a[la - 1] == '/')
        la--;
    while (lb > 1 && b[lb - 1] == '/')
        lb--;
    return la == lb && memcmp(a, b, la) == 0;
}

int rfsys_read_cgroup_tree(const char *sysroot, const char *pid, struct rfsys_cgroup_tree *out)
{
    char cur[RF_CGROUP_PATH_MAX];
    size_t keep;
    int ret;

    if (!out)
        return -EINVAL;
    memset(out, 0, sizeof(*out));
    ret = rfsys__cgroup_locate(sysroot, pid, &out->version, cur, sizeof(cur), out->mount_point,
                               sizeof(out->mount_point));
    if (ret < 0 || out->version == RFSYS_CGROUP_NONE) {
        memset(out, 0, sizeof(*out));
        if (ret == 0)
            rfsys_read_host_memory(sysroot, &out->host);
        return ret;
    }
    rfsys_read_host_memory(sysroot, &out->host);
    keep = strlen(out->mount_point);
    if (strncmp(cur, out->mount_point, keep) != 0)
        keep = strlen(cur); /* not below the mount point: this level alone */

    read_level(sysroot, cur, out->version, &out->levels[out->n++]);
    while (rfsys__cgroup_cut_to_parent(cur, keep)) {
        if (same_dir(cur, out->levels[out->n - 1].dir))
            continue; /* a doubled or trailing '/' */
        if (out->n == RF_CGROUP_MAX_LEVELS) {
            out->truncated = true;
            break;
        }
        read_level(sysroot, cur, out->version, &out->levels[out->n++]);
    }
    return 0;
}
