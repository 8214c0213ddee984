/*
 * The memory controller of a process's cgroup, v1 or v2: current usage,
 * peak, limit, and (v2) memory.high and memory.events.
 *
 * ramforge compares its own ledger with what the kernel charges the
 * cgroup, so this runs a few times per process, not in a hot loop. The
 * steps: /proc/PID/cgroup gives the cgroup path per hierarchy,
 * /proc/PID/mountinfo gives where each hierarchy is mounted, and the
 * controller directory is the mount point joined with the cgroup path
 * relative to the mount's root. Hybrid systems (v1 memory + v2 without
 * memory) resolve to v1.
 *
 * Limits are effective ones: a child is bound by every ancestor's limit,
 * so v2 walks memory.max and memory.high up to the mount point and keeps
 * the lowest, and v1 takes the lower of the own memory.limit_in_bytes and
 * memory.stat's hierarchical_memory_limit.
 */
#include "ramforge/sys.h"
#include "sys_internal.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Most fields a mountinfo line may have; real lines have 10 to 12. */
#define MOUNTINFO_MAX_FIELDS 64

/* A cgroup hierarchy's mount: root and point decoded, inside the mountinfo text. */
struct cg_mount {
    const char *root;  /* the mount's root inside the hierarchy, e.g. "/" */
    const char *point; /* the mount point, e.g. "/sys/fs/cgroup/memory" */
};

/* True when the comma-separated list has exactly the element word. */
static bool list_has(const char *list, const char *word)
{
    size_t n = strlen(word);
    const char *p = list;

    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);

        if (len == n && memcmp(p, word, n) == 0)
            return true;
        if (!comma)
            return false;
        p = comma + 1;
    }
}

/*
 * Parses /proc/PID/cgroup text in place: *v1_path is the path of the first
 * v1 hierarchy whose controllers include "memory", *v2_path the path of the
 * "0::" line; NULL when absent. Lines that do not have the shape
 * "ID:controllers:/path" are skipped.
 */
static void parse_proc_cgroup(char *text, const char **v1_path, const char **v2_path)
{
    char *cursor = text;
    char *line;

    *v1_path = NULL;
    *v2_path = NULL;
    while ((line = rfsys__next_line(&cursor)) != NULL) {
        const char *s = line;
        char *c1, *c2;
        uint64_t id;

        if (rfsys__parse_u64(&s, 10, &id) < 0 || *s != ':')
            continue;
        c1 = line + (s - line);
        c2 = strchr(c1 + 1, ':');
        if (!c2 || c2[1] != '/')
            continue; /* truncated, or a path that is not absolute */
        *c2 = '\0';
        if (id == 0 && c2 == c1 + 1) {
            if (!*v2_path)
                *v2_path = c2 + 1;
        } else if (list_has(c1 + 1, "memory")) {
            if (!*v1_path)
                *v1_path = c2 + 1;
        }
    }
}

static int octal_digit(char c)
{
    return c >= '0' && c <= '7' ? c - '0' : -1;
}

/*
 * Decodes the kernel's mountinfo escapes ("\040" space, "\011" tab, "\012"
 * newline, "\134" backslash) in place. Returns false for an escape that
 * would decode to NUL; other backslashes are kept as they are.
 */
static bool decode_octal_escapes(char *s)
{
    char *w = s;

    while (*s) {
        if (s[0] == '\\' && octal_digit(s[1]) >= 0 && octal_digit(s[2]) >= 0 &&
            octal_digit(s[3]) >= 0) {
            int v = octal_digit(s[1]) * 64 + octal_digit(s[2]) * 8 + octal_digit(s[3]);

            if (v == 0)
                return false;
            if (v <= 0xff) {
                *w++ = (char)v;
                s += 4;
                continue;
            }
        }
        *w++ = *s++;
    }
    *w = '\0';
    return true;
}

/*
 * Returns the part of path below root ("" when path == root), or NULL when
 * path is not under root (a cgroup namespace, or another mount's subtree).
 */
static const char *path_below(const char *path, const char *root)
{
    size_t n = strlen(root);

    if (strcmp(root, "/") == 0)
        return path;
    if (strncmp(path, root, n) != 0)
        return NULL;
    if (path[n] == '\0' || path[n] == '/')
        return path + n;
    return NULL;
}

/*
 * Offers a mount of a hierarchy whose process path is path: the first mount
 * with path under its root wins, else the first mount seen.
 */
static void offer_mount(struct cg_mount *best, bool *best_matches, const char *path,
                        const char *root, const char *point)
{
    bool matches = path && path_below(path, root) != NULL;

    if (!best->point || (matches && !*best_matches)) {
        best->root = root;
        best->point = point;
        *best_matches = matches;
    }
}

/*
 * Parses /proc/PID/mountinfo text in place, filling *v1 with the cgroup
 * (v1) mount whose super options include "memory" and *v2 with the cgroup2
 * mount ({NULL, NULL} when absent). Lines that do not have the mountinfo
 * shape are skipped.
 *
 * Line shape: "id parent maj:min root point opts [optional...] - fstype
 * source superopts".
 */
static void parse_mountinfo(char *text, const char *v1_path, const char *v2_path,
                            struct cg_mount *v1, struct cg_mount *v2)
{
    bool v1_matches = false, v2_matches = false;
    char *cursor = text;
    char *line;

    memset(v1, 0, sizeof(*v1));
    memset(v2, 0, sizeof(*v2));
    while ((line = rfsys__next_line(&cursor)) != NULL) {
        char *f[MOUNTINFO_MAX_FIELDS];
        size_t nf = 0, sep, i;
        char *save = NULL;
        char *tok;

        for (tok = strtok_r(line, " ", &save); tok && nf < MOUNTINFO_MAX_FIELDS;
             tok = strtok_r(NULL, " ", &save))
            f[nf++] = tok;
        for (i = 6; i < nf && strcmp(f[i], "-") != 0; i++)
            ;
        sep = i;
        if (sep + 3 >= nf)
            continue; /* no " - fstype source superopts" tail */
        if (f[3][0] != '/' || f[4][0] != '/')
            continue;
        if (strcmp(f[sep + 1], "cgroup2") == 0) {
            if (!decode_octal_escapes(f[3]) || !decode_octal_escapes(f[4]))
                continue;
            offer_mount(v2, &v2_matches, v2_path, f[3], f[4]);
        } else if (strcmp(f[sep + 1], "cgroup") == 0 && list_has(f[sep + 3], "memory")) {
            if (!decode_octal_escapes(f[3]) || !decode_octal_escapes(f[4]))
                continue;
            offer_mount(v1, &v1_matches, v1_path, f[3], f[4]);
        }
    }
}

/* True when rel (a path below a mount root) has a ".." component. */
static bool has_dotdot(const char *rel)
{
    const char *p = rel;

    while ((p = strstr(p, "..")) != NULL) {
        if ((p == rel || p[-1] == '/') && (p[2] == '\0' || p[2] == '/'))
            return true;
        p += 2;
    }
    return false;
}

/* Writes point + rel into dir (no doubled '/'); -ENAMETOOLONG. */
static int join_dir(char *dir, size_t size, const char *point, const char *rel)
{
    size_t plen = strlen(point);
    int n;

    if (rel[0] == '\0' || strcmp(rel, "/") == 0)
        rel = "";
    else if (plen > 0 && point[plen - 1] == '/')
        rel++; /* point "/" and rel "/a": "/a", not "//a" */
    n = snprintf(dir, size, "%s%s", point, rel);
    if (n < 0 || (size_t)n >= size)
        return -ENAMETOOLONG;
    return 0;
}

/* See sys_internal.h. */
int rfsys__cgroup_join(char *buf, size_t size, const char *dir, const char *name)
{
    size_t dlen = strlen(dir);
    const char *slash = dlen > 0 && dir[dlen - 1] == '/' ? "" : "/";
    int n;

    n = snprintf(buf, size, "%s%s%s", dir, name ? slash : "", name ? name : "");
    if (n < 0 || (size_t)n >= size)
        return -ENAMETOOLONG;
    return 0;
}

/* True when SYSROOT + dir [+ "/" + name] exists (a directory when name is NULL). */
static bool exists(const char *sysroot, const char *dir, const char *name)
{
    char rel[PATH_MAX], full[PATH_MAX];
    struct stat st;

    if (rfsys__cgroup_join(rel, sizeof(rel), dir, name) < 0 ||
        rfsys__path(full, sizeof(full), sysroot, rel) < 0 || stat(full, &st) < 0)
        return false;
    return name ? true : S_ISDIR(st.st_mode);
}

/*
 * Resolves the controller directory of a hierarchy into dir: the mount
 * point joined with path below the mount's root, or the mount point itself
 * when that directory is not visible (namespaces, "/.." paths). For v2,
 * the chosen directory must have memory.current, else dir is left empty.
 */
static int resolve_dir(const char *sysroot, const struct cg_mount *mnt, const char *path, bool v2,
                       char *dir, size_t size)
{
    const char *rel = path_below(path, mnt->root);
    int ret;

    dir[0] = '\0';
    if (rel && !has_dotdot(rel)) {
        ret = join_dir(dir, size, mnt->point, rel);
        if (ret < 0)
            return ret;
        if (v2 ? exists(sysroot, dir, "memory.current") : exists(sysroot, dir, NULL))
            return 0;
        if (v2 && exists(sysroot, dir, NULL)) {
            dir[0] = '\0'; /* visible, but without the memory controller */
            return 0;
        }
    }
    ret = join_dir(dir, size, mnt->point, "");
    if (ret < 0)
        return ret;
    if (v2 && !exists(sysroot, dir, "memory.current"))
        dir[0] = '\0';
    return 0;
}

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

/* See sys_internal.h. */
int rfsys__cgroup_read_value(const char *sysroot, const char *dir, const char *name, bool allow_max,
                             bool *found, bool *is_max, uint64_t *value, char *source,
                             size_t source_size)
{
    char rel[PATH_MAX];
    char *text = NULL;
    bool dummy_max;
    int ret;

    *found = false;
    if (!is_max)
        is_max = &dummy_max;
    ret = rfsys__cgroup_join(rel, sizeof(rel), dir, name);
    if (ret < 0)
        goto out;
    ret = rfsys_slurp(sysroot, rel, RFSYS_SMALL_FILE_BYTES, &text, NULL);
    if (ret == -ENOENT) {
        ret = 0;
        goto out;
    }
    if (ret < 0)
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
    char rel[PATH_MAX];
    char *text = NULL;
    char *cursor, *line;
    int ret;

    *file_found = false;
    ret = rfsys__cgroup_join(rel, sizeof(rel), dir, file);
    if (ret < 0)
        goto out;
    ret = rfsys_slurp(sysroot, rel, RFSYS_SMALL_FILE_BYTES, &text, NULL);
    if (ret == -ENOENT) {
        ret = 0;
        goto out;
    }
    if (ret < 0)
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
    if (ret < 0)
        return ret;
    ret = rfsys__cgroup_read_value(sysroot, out->dir, "memory.max_usage_in_bytes", false,
                                   &out->has_peak, NULL, &out->peak_bytes, out->peak_source,
                                   sizeof(out->peak_source));
    if (ret < 0)
        return ret;
    ret = rfsys__cgroup_read_value(sysroot, out->dir, "memory.limit_in_bytes", false, &own_found,
                                   NULL, &own_bytes, out->limit_source, sizeof(out->limit_source));
    if (ret < 0)
        return ret;
    ret = read_v1_hier_limit(sysroot, out->dir, &hier_found, &hier_bytes);
    if (ret < 0)
        return ret;

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
    if (ret < 0)
        return ret;
    ret = rfsys__cgroup_read_value(sysroot, out->dir, "memory.peak", false, &out->has_peak, NULL,
                                   &out->peak_bytes, out->peak_source, sizeof(out->peak_source));
    if (ret < 0)
        return ret;

    memset(&m, 0, sizeof(m));
    m.source = out->limit_source;
    m.source_size = sizeof(out->limit_source);
    ret = read_v2_min(sysroot, out->dir, point, "memory.max", &m);
    if (ret < 0)
        return ret;
    out->has_limit = m.found;
    out->limit_unlimited = m.found && m.unlimited;
    out->limit_bytes = m.bytes;
    out->limit_inherited = m.inherited;

    memset(&m, 0, sizeof(m));
    m.source = out->high_source;
    m.source_size = sizeof(out->high_source);
    ret = read_v2_min(sysroot, out->dir, point, "memory.high", &m);
    if (ret < 0)
        return ret;
    out->has_high = m.found;
    out->high_unlimited = m.found && m.unlimited;
    out->high_bytes = m.bytes;
    out->high_inherited = m.inherited;

    return read_events(sysroot, out->dir, out);
}

/* See sys_internal.h. */
int rfsys__cgroup_locate(const char *sysroot, const char *pid, enum rfsys_cgroup_version *version,
                         char *dir, size_t dir_size, char *point, size_t point_size)
{
    struct cg_mount v1_mount, v2_mount;
    const struct cg_mount *mnt = NULL;
    const char *v1_path, *v2_path;
    char path[64];
    char *cgroup_text = NULL, *mountinfo_text = NULL;
    int ret;

    *version = RFSYS_CGROUP_NONE;
    dir[0] = '\0';
    point[0] = '\0';
    ret = rfsys__proc_path(path, sizeof(path), pid, "cgroup");
    if (ret < 0)
        goto out;
    ret = rfsys_slurp(sysroot, path, RFSYS_SLURP_MAX_BYTES, &cgroup_text, NULL);
    if (ret < 0)
        goto out;
    parse_proc_cgroup(cgroup_text, &v1_path, &v2_path);

    ret = rfsys__proc_path(path, sizeof(path), pid, "mountinfo");
    if (ret < 0)
        goto out;
    ret = rfsys_slurp(sysroot, path, RFSYS_SLURP_MAX_BYTES, &mountinfo_text, NULL);
    if (ret == -ENOENT) {
        ret = 0; /* no mount table: no controller to find */
        goto out;
    }
    if (ret < 0)
        goto out;
    parse_mountinfo(mountinfo_text, v1_path, v2_path, &v1_mount, &v2_mount);

    if (v1_path && v1_mount.point) {
        ret = resolve_dir(sysroot, &v1_mount, v1_path, false, dir, dir_size);
        if (ret < 0)
            goto out;
        *version = RFSYS_CGROUP_V1;
        mnt = &v1_mount;
    } else if (v2_path && v2_mount.point) {
        ret = resolve_dir(sysroot, &v2_mount, v2_path, true, dir, dir_size);
        if (ret < 0 || dir[0] == '\0')
            goto out;
        *version = RFSYS_CGROUP_V2;
        mnt = &v2_mount;
    }
    if (mnt && (size_t)snprintf(point, point_size, "%s", mnt->point) >= point_size)
        ret = -ENAMETOOLONG;

out:
    if (ret < 0) {
        *version = RFSYS_CGROUP_NONE;
        dir[0] = '\0';
        point[0] = '\0';
    }
    free(mountinfo_text);
    free(cgroup_text);
    return ret;
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
        memset(out, 0, sizeof(*out));
        out->version = RFSYS_CGROUP_NONE;
    }
    return ret;
}
