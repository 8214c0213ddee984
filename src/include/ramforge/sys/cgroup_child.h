/*
 * A child memory cgroup for one process, made below the memory cgroup of
 * the calling process: created with a hard limit, joined by a forked child
 * between fork and exec, read after the child exited (limit hits, OOM
 * kills, peak usage) and removed. `ramforge bench --memory-limit` runs each
 * run process in one.
 *
 *   v1  DIR/NAME with memory.limit_in_bytes; read back memory.failcnt,
 *       memory.max_usage_in_bytes and memory.oom_control's oom_kill
 *   v2  DIR/NAME with memory.max; read back memory.events (high, max, oom,
 *       oom_kill) and memory.peak. The memory controller must be enabled
 *       in DIR/cgroup.subtree_control already (it is not enabled here: a
 *       cgroup v2 directory with processes in it cannot enable it)
 *
 * DIR is the caller's memory cgroup as rfsys_read_cgroup_memory finds it
 * (/proc/PID/cgroup and mountinfo under a sysroot prefix, so fixture trees
 * test the path logic). Creating, writing and removing need write access
 * to the cgroup tree (root, or a delegated subtree).
 *
 * rfsys_cgroup_child_join and rfsys_cgroup_child_remove are
 * async-signal-safe (a forked child before exec; a signal handler).
 */
#ifndef RAMFORGE_CGROUP_CHILD_H
#define RAMFORGE_CGROUP_CHILD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ramforge/sys/sys.h"

/* Bytes of a child cgroup's directory path, sysroot included. */
#define RFSYS_CGROUP_CHILD_PATH_MAX 1024

/* A child cgroup's location. */
struct rfsys_cgroup_child {
    enum rfsys_cgroup_version version;      /* V1 or V2; NONE before a path was found */
    char path[RFSYS_CGROUP_CHILD_PATH_MAX]; /* its directory, sysroot prefix included */
    bool created;                           /* rfsys_cgroup_child_create made the directory */
};

/*
 * Where the child cgroup NAME of process PID's memory cgroup goes:
 * out->version and out->path (SYSROOT + the controller directory + "/" +
 * NAME), created false. NAME is one path component (no '/', not "." or
 * ".."). Nothing is created. Errors: -EINVAL (bad NAME or pid),
 * -EOPNOTSUPP (no memory controller), -ENAMETOOLONG, those of reading
 * /proc/PID/cgroup and mountinfo.
 */
int rfsys_cgroup_child_path(const char *sysroot, const char *pid, const char *name,
                            struct rfsys_cgroup_child *out);

/*
 * rfsys_cgroup_child_path, then mkdir of the directory (mode 0755) and
 * its hard limit of limit_bytes (v1 memory.limit_in_bytes, v2
 * memory.max). On an error after the mkdir, the directory is removed
 * again. Errors: those of rfsys_cgroup_child_path; -EEXIST (a cgroup of
 * that name exists), -EACCES/-EPERM/-EROFS (no write access), of the
 * mkdir; -EOPNOTSUPP when the new directory has no limit file (v2: the
 * memory controller is not enabled in the parent's cgroup.subtree_control);
 * -errno of the write.
 */
int rfsys_cgroup_child_create(const char *sysroot, const char *pid, const char *name,
                              uint64_t limit_bytes, struct rfsys_cgroup_child *out);

/*
 * Opens cg's cgroup.procs for writing (O_CLOEXEC), for a child to join
 * with rfsys_cgroup_child_join after fork. Returns the descriptor or
 * -errno.
 */
int rfsys_cgroup_child_open_procs(const struct rfsys_cgroup_child *cg);

/*
 * Moves the calling process into the cgroup whose cgroup.procs is open as
 * procs_fd (writes getpid() in decimal). Async-signal-safe. Returns 0 or
 * -errno of the write.
 */
int rfsys_cgroup_child_join(int procs_fd);

/* What a child cgroup recorded; read after its processes exited. */
struct rfsys_cgroup_child_stats {
    bool has_limit;
    uint64_t limit_bytes; /* v1 memory.limit_in_bytes, v2 memory.max (0 with limit_max) */
    bool limit_max;       /* v2 "max" */
    bool has_failcnt;     /* v1 */
    uint64_t failcnt;     /* v1 memory.failcnt: charges that hit the limit */
    bool has_events;      /* v2 memory.events */
    uint64_t events_high, events_max, events_oom;
    bool has_oom_kill;
    uint64_t oom_kill; /* v2 memory.events oom_kill; v1 memory.oom_control oom_kill */
    bool has_peak;
    uint64_t peak_bytes; /* v1 memory.max_usage_in_bytes, v2 memory.peak */
};

/*
 * Reads cg's figures into *out (a figure whose file is absent stays
 * has_* false). Errors: -EINVAL (version NONE), -EBADMSG (a malformed
 * file), those of reading the files.
 */
int rfsys_cgroup_child_read(const struct rfsys_cgroup_child *cg,
                            struct rfsys_cgroup_child_stats *out);

/*
 * Removes cg's directory (rmdir). It must hold no process: wait for the
 * child first. A process that exited a moment ago can still be leaving
 * its cgroup, so -EBUSY is retried for up to about a second. v1 removes a
 * cgroup with only page cache charged (the charges move to the parent).
 * Async-signal-safe. Returns 0 (also when cg was never created or is gone
 * already: -ENOENT counts as removed) or -errno of the last rmdir.
 */
int rfsys_cgroup_child_remove(const struct rfsys_cgroup_child *cg);

/*
 * Sends sig to each process listed in cg's cgroup.procs (sig 0: only
 * counts them). A process that exits between the read and the kill is
 * not counted; one that leaves the cgroup in that moment is still
 * signalled (systemd's control-group kill has the same window). Returns
 * the number of processes signalled (0: the cgroup is empty), -EINVAL
 * (version NONE), -EBADMSG (a line that is not a process id) or the
 * errors of reading cgroup.procs.
 */
int rfsys_cgroup_child_signal(const struct rfsys_cgroup_child *cg, int sig);

/*
 * Removes the child cgroups a killed ramforge left below the memory
 * cgroup of process PID: each directory named one of prefixes[0..n)
 * followed by a process id (and optionally "-" and a number, as bench's
 * runs) whose SYSROOT/proc/<id> does not exist. rmdir only: one that still
 * holds a process stays, counted in *left (may be NULL). Process ids are
 * those of the caller's pid namespace. Returns the number removed, or the
 * errors of rfsys_cgroup_child_path and -errno of opening the directory.
 */
int rfsys_cgroup_child_remove_stale(const char *sysroot, const char *pid,
                                    const char *const *prefixes, size_t n_prefixes, unsigned *left);

#endif
