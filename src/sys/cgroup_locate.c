/*
 * Where a process's memory controller is (rfsys__cgroup_locate, for
 * cgroup.c): /proc/PID/cgroup gives the cgroup path per hierarchy,
 * /proc/PID/mountinfo gives where each hierarchy is mounted (octal escapes
 * decoded), and the controller directory is the mount point joined with
 * the cgroup path relative to the mount's root, or the mount point itself
 * when that directory is not visible. Hybrid systems (v1 memory + v2
 * without memory) resolve to v1. Every path is under the sysroot prefix.
 */
#include "ramforge/sys/sys.h"
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
