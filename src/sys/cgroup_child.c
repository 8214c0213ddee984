/*
 * A child memory cgroup for one process (see ramforge/sys/cgroup_child.h):
 * located through rfsys__cgroup_locate, made with mkdir and a limit file,
 * joined through cgroup.procs, read with the value parsers of cgroup.c,
 * its processes signalled through cgroup.procs, removed with rmdir; the
 * empty ones of dead processes found by name and removed.
 */
#include "ramforge/sys/cgroup_child.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sys_internal.h"

static const char *limit_file(enum rfsys_cgroup_version v)
{
    return v == RFSYS_CGROUP_V1 ? "memory.limit_in_bytes" : "memory.max";
}

/* The memory controller directory of process pid, sysroot included, into full; *version.
   Returns 0, -EOPNOTSUPP (no memory controller) or the errors of rfsys__cgroup_locate. */
static int controller_dir(const char *sysroot, const char *pid, enum rfsys_cgroup_version *version,
                          char full[RFSYS_CGROUP_CHILD_PATH_MAX])
{
    char dir[512], point[512];
    int ret = rfsys__cgroup_locate(sysroot, pid, version, dir, sizeof(dir), point, sizeof(point));

    if (ret < 0)
        return ret;
    if (*version == RFSYS_CGROUP_NONE)
        return -EOPNOTSUPP;
    return rfsys__path(full, RFSYS_CGROUP_CHILD_PATH_MAX, sysroot, dir);
}

int rfsys_cgroup_child_path(const char *sysroot, const char *pid, const char *name,
                            struct rfsys_cgroup_child *out)
{
    char full[RFSYS_CGROUP_CHILD_PATH_MAX];
    int ret;

    if (!out)
        return -EINVAL;
    memset(out, 0, sizeof(*out));
    if (!name || !*name || strchr(name, '/') || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
        return -EINVAL;
    ret = controller_dir(sysroot, pid, &out->version, full);
    if (ret == 0)
        ret = rfsys__cgroup_join(out->path, sizeof(out->path), full, name);
    if (ret < 0) {
        memset(out, 0, sizeof(*out));
        return ret;
    }
    return 0;
}

/* Writes text to the existing file dir/name (no O_CREAT). Returns 0 or -errno. */
static int write_file(const char *dir, const char *name, const char *text)
{
    char path[RFSYS_CGROUP_CHILD_PATH_MAX + 64];
    size_t len = strlen(text);
    int fd, ret = 0;

    if (rfsys__cgroup_join(path, sizeof(path), dir, name) < 0)
        return -ENAMETOOLONG;
    fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = write(fd, text, len);
    if (n < 0)
        ret = -errno;
    else if ((size_t)n != len)
        ret = -EIO;
    if (close(fd) < 0 && ret == 0)
        ret = -errno;
    return ret;
}

int rfsys_cgroup_child_create(const char *sysroot, const char *pid, const char *name,
                              uint64_t limit_bytes, struct rfsys_cgroup_child *out)
{
    char text[32];
    int ret = rfsys_cgroup_child_path(sysroot, pid, name, out);

    if (ret < 0)
        return ret;
    if (mkdir(out->path, 0755) < 0)
        return -errno;
    out->created = true;
    snprintf(text, sizeof(text), "%llu\n", (unsigned long long)limit_bytes);
    ret = write_file(out->path, limit_file(out->version), text);
    if (ret == -ENOENT)
        ret = -EOPNOTSUPP; /* v2 without the controller in the parent's subtree_control */
    if (ret < 0) {
        rmdir(out->path);
        out->created = false;
    }
    return ret;
}

int rfsys_cgroup_child_open_procs(const struct rfsys_cgroup_child *cg)
{
    char path[RFSYS_CGROUP_CHILD_PATH_MAX + 16];
    int fd;

    if (!cg || cg->version == RFSYS_CGROUP_NONE)
        return -EINVAL;
    if (rfsys__cgroup_join(path, sizeof(path), cg->path, "cgroup.procs") < 0)
        return -ENAMETOOLONG;
    fd = open(path, O_WRONLY | O_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

int rfsys_cgroup_child_join(int procs_fd)
{
    char buf[24];
    size_t k = sizeof(buf);
    unsigned long pid = (unsigned long)getpid();

    buf[--k] = '\n';
    do {
        buf[--k] = (char)('0' + pid % 10);
        pid /= 10;
    } while (pid && k > 0);
    ssize_t n = write(procs_fd, buf + k, sizeof(buf) - k);
    if (n < 0)
        return -errno;
    return (size_t)n == sizeof(buf) - k ? 0 : -EIO;
}

int rfsys_cgroup_child_read(const struct rfsys_cgroup_child *cg,
                            struct rfsys_cgroup_child_stats *out)
{
    bool found, is_max;
    int ret;

    if (!cg || !out)
        return -EINVAL;
    memset(out, 0, sizeof(*out));
    if (cg->version == RFSYS_CGROUP_NONE)
        return -EINVAL;
    bool v1 = cg->version == RFSYS_CGROUP_V1;
    ret = rfsys__cgroup_read_value(NULL, cg->path, limit_file(cg->version), !v1, &out->has_limit,
                                   &is_max, &out->limit_bytes, NULL, 0);
    if (ret < 0)
        return ret;
    out->limit_max = out->has_limit && is_max;
    ret = rfsys__cgroup_read_value(NULL, cg->path, v1 ? "memory.max_usage_in_bytes" : "memory.peak",
                                   false, &out->has_peak, NULL, &out->peak_bytes, NULL, 0);
    if (ret < 0)
        return ret;
    if (v1) {
        struct rfsys__keyed keys[] = {{"oom_kill", &out->oom_kill, false}};
        ret = rfsys__cgroup_read_value(NULL, cg->path, "memory.failcnt", false, &out->has_failcnt,
                                       NULL, &out->failcnt, NULL, 0);
        if (ret == 0)
            ret = rfsys__cgroup_read_keyed(NULL, cg->path, "memory.oom_control", keys, 1, &found);
        out->has_oom_kill = ret == 0 && keys[0].found;
        return ret;
    }
    struct rfsys__keyed keys[] = {
        {"high", &out->events_high, false},
        {"max", &out->events_max, false},
        {"oom", &out->events_oom, false},
        {"oom_kill", &out->oom_kill, false},
    };
    ret = rfsys__cgroup_read_keyed(NULL, cg->path, "memory.events", keys,
                                   sizeof(keys) / sizeof(keys[0]), &out->has_events);
    out->has_oom_kill = ret == 0 && keys[3].found;
    return ret;
}

int rfsys_cgroup_child_remove(const struct rfsys_cgroup_child *cg)
{
    const struct timespec step = {0, 20 * 1000 * 1000}; /* 20 ms, up to 50 times */
    int ret = 0;

    if (!cg || !cg->created || !cg->path[0])
        return 0;
    for (int i = 0; i < 50; i++) {
        if (rmdir(cg->path) == 0 || errno == ENOENT)
            return 0;
        ret = -errno;
        if (ret != -EBUSY)
            return ret;
        nanosleep(&step, NULL);
    }
    return ret;
}

/* Bound for a child cgroup's cgroup.procs: a line per process, a few thousand at most. */
#define PROCS_MAX_BYTES (1u << 20)

int rfsys_cgroup_child_signal(const struct rfsys_cgroup_child *cg, int sig)
{
    char path[RFSYS_CGROUP_CHILD_PATH_MAX + 16], *text = NULL, *cursor, *line;
    int ret, n = 0;

    if (!cg || cg->version == RFSYS_CGROUP_NONE)
        return -EINVAL;
    if (rfsys__cgroup_join(path, sizeof(path), cg->path, "cgroup.procs") < 0)
        return -ENAMETOOLONG;
    ret = rfsys_slurp(NULL, path, PROCS_MAX_BYTES, &text, NULL);
    if (ret < 0)
        return ret;
    cursor = text;
    while ((line = rfsys__next_line(&cursor))) {
        const char *p = line;
        uint64_t pid;
        /* never 0 or a negative number: kill() would take it for a process group */
        if (rfsys__parse_u64(&p, 10, &pid) < 0 || *p || pid == 0 || pid > INT32_MAX) {
            ret = -EBADMSG;
            break;
        }
        n += kill((pid_t)pid, sig) == 0; /* a process that exited since the read: not counted */
    }
    free(text);
    return ret < 0 ? ret : n;
}

/* Whether name is one of prefixes[0..n) followed by a process id and optionally "-" and a
   number; the id into *id. */
static bool stale_name(const char *name, const char *const *prefixes, size_t n, uint64_t *id)
{
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(prefixes[i]);
        const char *p = name + len;
        uint64_t k;
        if (strncmp(name, prefixes[i], len) != 0 || rfsys__parse_u64(&p, 10, id) < 0 || *id == 0)
            continue;
        if (*p == '-' && (p++, rfsys__parse_u64(&p, 10, &k) < 0))
            continue;
        if (!*p)
            return true;
    }
    return false;
}

int rfsys_cgroup_child_remove_stale(const char *sysroot, const char *pid,
                                    const char *const *prefixes, size_t n_prefixes, unsigned *left)
{
    enum rfsys_cgroup_version version;
    char dir[RFSYS_CGROUP_CHILD_PATH_MAX], path[RFSYS_CGROUP_CHILD_PATH_MAX + 256], proc[64];
    struct dirent *e;
    struct stat st;
    uint64_t id;
    int ret = controller_dir(sysroot, pid, &version, dir), removed = 0;

    if (left)
        *left = 0;
    if (ret < 0)
        return ret;
    DIR *d = opendir(dir);
    if (!d)
        return -errno;
    while ((e = readdir(d))) {
        if (!stale_name(e->d_name, prefixes, n_prefixes, &id))
            continue;
        snprintf(proc, sizeof(proc), "/proc/%llu", (unsigned long long)id);
        if (rfsys__path(path, sizeof(path), sysroot, proc) < 0 || stat(path, &st) == 0 ||
            errno != ENOENT)
            continue; /* its process runs (or cannot be told dead): its own */
        if (rfsys__cgroup_join(path, sizeof(path), dir, e->d_name) < 0)
            continue;
        if (rmdir(path) == 0)
            removed++;
        else if (errno != ENOENT && left) /* ENOENT: another sweep took it */
            (*left)++;
    }
    closedir(d);
    return removed;
}
