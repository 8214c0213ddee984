/*
 * Linux probes: /proc/<pid>/{maps,smaps,status,cgroup,mountinfo} and the
 * cgroup v1/v2 memory controller.
 *
 * Every path is built as SYSROOT + "/proc/..." or SYSROOT + "/sys/...", so
 * tests read fixture trees under tests/data/ instead of the live system. A
 * NULL or "" sysroot means the real root. PID is a decimal pid (at most 10
 * digits) or "self"; anything else, or a NULL out pointer, is -EINVAL.
 *
 * All parsers are written for hostile text: a malformed line is skipped or
 * reported as -EBADMSG, numbers are range-checked, sizes in kB are converted
 * to bytes with checked multiplication (-EOVERFLOW), and no read is
 * unbounded (RFSYS_SLURP_MAX_BYTES).
 */
#ifndef RAMFORGE_SYS_H
#define RAMFORGE_SYS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ramforge/core/cgroup_levels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Largest procfs/sysfs file rfsys_slurp reads: 64 MiB (smaps of a large process). */
#define RFSYS_SLURP_MAX_BYTES (64u << 20)

/* cgroup v1 reports "no limit" as this value or larger (PAGE_COUNTER_MAX * 4096). */
#define RFSYS_CGROUP_V1_UNLIMITED 9223372036854771712ULL

/*
 * Reads SYSROOT + PATH into a NUL-terminated heap buffer, retrying on EINTR,
 * reading at most max_bytes (-EFBIG if the file is larger). On success
 * *out is owned by the caller (free()), *len_out (may be NULL) is the length
 * without the NUL. Errors: negative errno from open/read (-ENOENT,
 * -EISDIR, ...), -ENAMETOOLONG (SYSROOT + PATH >= PATH_MAX), -EFBIG,
 * -ENOMEM, -EINVAL (NULL path or out). On error *out is NULL.
 */
int rfsys_slurp(const char *sysroot, const char *path, size_t max_bytes, char **out,
                size_t *len_out);

/* Figures from /proc/<pid>/status. has_* is false where the field was absent. */
struct rfsys_status {
    bool has_vm_rss;
    uint64_t vm_rss_bytes; /* VmRSS: resident set size, bytes */
    bool has_vm_hwm;
    uint64_t vm_hwm_bytes; /* VmHWM: peak resident set size, bytes */
    bool has_rss_anon;
    uint64_t rss_anon_bytes; /* RssAnon, bytes */
    bool has_rss_file;
    uint64_t rss_file_bytes; /* RssFile, bytes */
    bool has_rss_shmem;
    uint64_t rss_shmem_bytes; /* RssShmem, bytes */
    bool has_vm_lck;
    uint64_t vm_lck_bytes; /* VmLck: mlocked, bytes */
    bool has_vm_swap;
    uint64_t vm_swap_bytes; /* VmSwap: anonymous memory swapped out, bytes */
};

/*
 * Parses SYSROOT/proc/PID/status. Fields it does not know are ignored.
 * Errors: those of rfsys_slurp; -EBADMSG for a known field whose value is
 * not "<number> kB"; -EOVERFLOW when the number or kB * 1024 does not fit
 * in 64 bits. On error *out is all zero (every has_* false).
 */
int rfsys_read_status(const char *sysroot, const char *pid, struct rfsys_status *out);

/*
 * Reads SYSROOT/proc/meminfo's MemTotal, MemAvailable, SwapTotal and
 * SwapFree into *out (read true; each figure's source "/proc/meminfo
 * KEY"). A missing key leaves its figure unknown (-ENOENT); an unreadable
 * file or a malformed value leaves every figure unknown with that error.
 * Never fails; a NULL out is ignored.
 */
void rfsys_read_host_memory(const char *sysroot, struct rf_host_memory *out);

/*
 * One line of /proc/PID/maps, optionally with its smaps block. The path of
 * a file mapping may contain spaces; a trailing " (deleted)" is removed from
 * path and sets deleted. Pseudo paths ("[heap]", "[stack]") are kept as
 * they are; an anonymous mapping has path == NULL. The kernel escapes a
 * newline in a path as "\012"; path keeps that text as it is.
 */
struct rfsys_mapping {
    uint64_t start_addr;   /* first byte of the VMA (virtual address) */
    uint64_t end_addr;     /* one past the last byte */
    uint64_t offset_bytes; /* file offset of start_addr */
    char perms[5];         /* "r--s", "rw-p", ... NUL-terminated */
    uint32_t dev_major;    /* device of the backing file (hex in maps) */
    uint32_t dev_minor;
    uint64_t inode;               /* 0 for anonymous mappings */
    char *path;                   /* owned by the enclosing rfsys_maps; NULL if anonymous */
    bool deleted;                 /* path ended in " (deleted)" */
    bool has_smaps;               /* the fields below were read from smaps */
    uint64_t rss_bytes;           /* Rss */
    uint64_t pss_bytes;           /* Pss */
    uint64_t shared_clean_bytes;  /* Shared_Clean */
    uint64_t shared_dirty_bytes;  /* Shared_Dirty */
    uint64_t private_clean_bytes; /* Private_Clean */
    uint64_t private_dirty_bytes; /* Private_Dirty */
    uint64_t anonymous_bytes;     /* Anonymous */
    uint64_t locked_bytes;        /* Locked */
};

/* A list of mappings in address order. Initialise with rfsys_maps_init. */
struct rfsys_maps {
    struct rfsys_mapping *v; /* array of n mappings, owned */
    size_t n;
};

void rfsys_maps_init(struct rfsys_maps *maps);

/* Releases every mapping and path; leaves an empty list. NULL is a no-op. */
void rfsys_maps_free(struct rfsys_maps *maps);

/*
 * Parses SYSROOT/proc/PID/maps into *out (which must be initialised; any
 * old content is freed). A malformed line (e.g. truncated) gives -EBADMSG
 * and an empty list. Errors: those of rfsys_slurp, -EBADMSG, -ENOMEM,
 * -EINVAL; on any error *out is an empty list. Mappings are in file order
 * (the kernel writes them in address order). A live file (sysroot NULL or
 * "") whose mappings overlap was torn by a change of the address space
 * between the kernel's buffers: it is read again, up to 4 times, then
 * -EAGAIN.
 */
int rfsys_read_maps(const char *sysroot, const char *pid, struct rfsys_maps *out);

/*
 * Parses SYSROOT/proc/PID/smaps: the maps header lines plus the per-mapping
 * "Field: N kB" lines (unknown fields ignored; has_smaps set). Errors as
 * rfsys_read_maps, plus -EOVERFLOW for a kB value that overflows bytes
 * and -EBADMSG for a field line before the first header.
 */
int rfsys_read_smaps(const char *sysroot, const char *pid, struct rfsys_maps *out);

/*
 * Sums Rss, Pss and Locked over the mappings that map the file identified by
 * (dev_major, dev_minor, inode) with permissions perms (e.g. "r--s"; NULL
 * matches any) into *out: n_mappings counts the matches, virtual_bytes
 * sums their lengths. Mappings without smaps data are counted but add
 * nothing to rss/pss/locked, and set out->complete to false (true when no
 * mapping matches). Errors: -EOVERFLOW on a sum overflow, -EINVAL for a
 * NULL maps/out or a mapping with end_addr < start_addr; *out is all zero
 * on error.
 */
struct rfsys_mapping_sum {
    size_t n_mappings;
    uint64_t virtual_bytes; /* sum of end_addr - start_addr */
    uint64_t rss_bytes;
    uint64_t pss_bytes;
    uint64_t locked_bytes;
    bool complete; /* every matching mapping had smaps data */
};
int rfsys_maps_sum_file(const struct rfsys_maps *maps, uint32_t dev_major, uint32_t dev_minor,
                        uint64_t inode, const char *perms, struct rfsys_mapping_sum *out);

/*
 * Opens SYSROOT/proc/PID/pagemap for rfsys_maps_resident_file. Returns the
 * descriptor (the caller closes it) or a negative errno (-EINVAL for a bad
 * pid, -ENOENT, -EACCES, ...).
 */
int rfsys_pagemap_open(const char *sysroot, const char *pid);

/*
 * The resident bytes of the mappings of maps that map the file (dev_major,
 * dev_minor, inode) with permissions perms (NULL: any), asked of the kernel
 * with one PAGEMAP_SCAN ioctl (Linux 6.7+) on pagemap_fd per mapping: the
 * pages present in the page tables, which is what smaps counts as Rss,
 * returned as merged ranges. Unlike smaps it does no per-page accounting
 * (Pss, shared/private), and it reads only the mappings asked about, not
 * every mapping of the process. maps is a read of the same process's maps
 * (rfsys_read_maps); a mapping that changed since gives the kernel's answer
 * for the addresses as they are now.
 *
 * *out: n_mappings and virtual_bytes as rfsys_maps_sum_file, rss_bytes the
 * present bytes, pss_bytes and locked_bytes 0, complete true.
 * Errors: -EOPNOTSUPP (the kernel has no PAGEMAP_SCAN, or pagemap_fd is
 * not a pagemap file), -EOVERFLOW, -EINVAL (NULL maps/out, pagemap_fd < 0,
 * end_addr < start_addr), -errno of the ioctl; *out is all zero on error.
 */
int rfsys_maps_resident_file(const struct rfsys_maps *maps, int pagemap_fd, uint32_t dev_major,
                             uint32_t dev_minor, uint64_t inode, const char *perms,
                             struct rfsys_mapping_sum *out);

enum rfsys_cgroup_version {
    RFSYS_CGROUP_NONE = 0, /* no memory controller found */
    RFSYS_CGROUP_V1 = 1,
    RFSYS_CGROUP_V2 = 2,
};

/*
 * The memory controller of the process's cgroup. *_source names the file a
 * figure came from, relative to the sysroot (e.g.
 * "/sys/fs/cgroup/memory/a/b/memory.usage_in_bytes"); empty when absent.
 *
 * The limit and memory.high are the effective ones: the lowest of the
 * cgroup's own value and its ancestors' (the kernel enforces every
 * ancestor's limit on a child). current and peak are the cgroup's own.
 */
struct rfsys_cgroup_memory {
    enum rfsys_cgroup_version version;
    char dir[512]; /* controller directory, relative to the sysroot */

    /*
     * A file of the controller found that could not be read: the -errno
     * (-ENOENT: the usage file is absent; any other error ends the read,
     * is returned and replaces it) and the file, relative to the sysroot.
     * 0 and "" when none.
     */
    int error;
    char error_source[600];

    bool has_current;
    uint64_t current_bytes; /* v2 memory.current, v1 memory.usage_in_bytes */
    char current_source[600];

    bool has_peak;
    uint64_t peak_bytes; /* v2 memory.peak, v1 memory.max_usage_in_bytes */
    char peak_source[600];

    /*
     * The effective hard limit, bytes. v2: the lowest memory.max from the
     * cgroup's directory up to the mount point ("max" is no limit), and
     * limit_source the memory.max that gave it (the nearest to the cgroup
     * on a tie; the cgroup's own when all are "max"). v1: the lower of
     * memory.limit_in_bytes and memory.stat's hierarchical_memory_limit
     * (the kernel's limit over the cgroup and its ancestors), each at or
     * above RFSYS_CGROUP_V1_UNLIMITED counting as no limit; limit_source is
     * ".../memory.limit_in_bytes" or ".../memory.stat
     * hierarchical_memory_limit" (file, a space, the key).
     */
    bool has_limit;       /* some limit file was read */
    bool limit_unlimited; /* no limit anywhere: v2 "max", v1 >= RFSYS_CGROUP_V1_UNLIMITED */
    uint64_t limit_bytes; /* effective limit, bytes; 0 when unlimited */
    char limit_source[600];
    bool limit_inherited; /* the limit is an ancestor's, not the cgroup's own file
                             (v2: an ancestor's memory.max; v1: hierarchical_memory_limit
                             below memory.limit_in_bytes, or that file absent) */

    bool has_high; /* v2 only; effective like the limit: lowest memory.high up to the mount */
    bool high_unlimited;
    uint64_t high_bytes;   /* v2 memory.high, bytes; 0 when unlimited */
    char high_source[600]; /* the memory.high that gave high_bytes; "" when has_high is false */
    bool high_inherited;   /* high_source is an ancestor's memory.high */

    bool has_events; /* v2 memory.events */
    uint64_t events_low, events_high, events_max, events_oom, events_oom_kill;
};

/*
 * Finds the memory controller of process PID and reads its figures.
 *
 * Reads SYSROOT/proc/PID/cgroup ("ID:controllers:path" lines; v2 is
 * "0::path", v1 lists "memory" among the comma-separated controllers) and
 * SYSROOT/proc/PID/mountinfo (cgroup2 mounts; cgroup mounts whose super
 * options include "memory"), joining the mount point with the cgroup path
 * relative to the mount's root. A v1 memory hierarchy is preferred when
 * present (hybrid systems mount v2 without the memory controller); v2 is
 * used when its directory has memory.current. When the cgroup's own
 * directory is not visible (a namespace), the mount point itself is used.
 * Missing files leave has_* false; no controller gives version NONE and
 * returns 0. Errors: -EBADMSG for a malformed value, those of rfsys_slurp
 * for /proc/PID/cgroup.
 *
 * Ancestors: v2 reads memory.max and memory.high in every directory from
 * the cgroup's up to the mount point (inclusive; never above it, so never
 * outside the sysroot) and keeps the lowest. An ancestor's file that is
 * missing, unreadable or malformed counts as no limit there and is not an
 * error; the cgroup's own files keep the errors below. v1 takes the
 * ancestors from the cgroup's memory.stat (hierarchical_memory_limit;
 * other keys ignored; a missing file or key means the own limit alone).
 *
 * Details: lines of /proc/PID/cgroup and mountinfo that do not have the
 * expected shape are skipped. A missing mountinfo gives NONE; its other
 * read errors are returned. A cgroup path with a ".." component is treated
 * as not visible (the mount point is used). A value that does not fit in
 * 64 bits is -EBADMSG (also v1's hierarchical_memory_limit line);
 * -ENAMETOOLONG when dir would not fit. Unknown memory.events keys are
 * ignored. On an error before the controller is found *out is all zero
 * (version NONE); after it, version and dir stay (the controller exists),
 * error and error_source say which file could not be read and why, and
 * every figure is zeroed.
 */
int rfsys_read_cgroup_memory(const char *sysroot, const char *pid, struct rfsys_cgroup_memory *out);

/*
 * The memory cgroup of a process and every ancestor up to the root of its
 * hierarchy (the mount point), each with its own figures: what admission
 * checks level by level (the kernel enforces every ancestor's limit, and
 * an ancestor's usage includes its other children).
 */
struct rfsys_cgroup_tree {
    struct rf_host_memory host; /* /proc/meminfo, read whatever the cgroup version */
    enum rfsys_cgroup_version version;
    char mount_point[RF_CGROUP_PATH_MAX]; /* the hierarchy's mount point, relative to the sysroot */
    size_t n;       /* levels read: [0] the process's cgroup, [n-1] the topmost one read */
    bool truncated; /* deeper than RF_CGROUP_MAX_LEVELS: the levels above [n-1] were not read */
    struct rf_cgroup_level levels[RF_CGROUP_MAX_LEVELS];
};

/*
 * Finds the memory controller of process PID as rfsys_read_cgroup_memory
 * does, then reads its directory and each parent up to the mount point
 * (inclusive; never above it). Per level, with each file's path as the
 * figure's source:
 *
 *   figure         v1                                     v2
 *   limit          memory.limit_in_bytes (at or above     memory.max ("max": unlimited)
 *                  RFSYS_CGROUP_V1_UNLIMITED: unlimited)
 *   high           -                                      memory.high ("max": unlimited)
 *   usage          memory.usage_in_bytes                  memory.current
 *   inactive_file  memory.stat total_inactive_file        memory.stat inactive_file
 *   reclaimable_file  memory.stat total_active_file     memory.stat file - file_mapped
 *                  + total_inactive_file - total_mapped_file  - shmem - unevictable
 *                  (both less dirty and writeback where reported; see cgroup_levels.h)
 *   counters       memory.failcnt,                        memory.events high, max, oom,
 *                  memory.oom_control oom_kill            oom_kill
 *
 * A file that is missing, unreadable or malformed leaves only its figure
 * unknown (has false, error says why): a limit that was read is kept
 * whatever happened to the usage. A cgroup namespace that hides the
 * process's directory gives the mount point as the only level. No
 * controller: version NONE, n 0, return 0. host is read in every case
 * (rfsys_read_host_memory). Errors: those of rfsys_slurp
 * for /proc/PID/cgroup, -EINVAL for a NULL out or a bad pid,
 * -ENAMETOOLONG for a directory that does not fit RF_CGROUP_PATH_MAX; on
 * error *out is all zero.
 */
int rfsys_read_cgroup_tree(const char *sysroot, const char *pid, struct rfsys_cgroup_tree *out);

/* The process's storage traffic (cumulative since it started). */
struct rfsys_io {
    bool has_read_bytes;
    uint64_t read_bytes; /* /proc/PID/io read_bytes: fetched from storage, bytes */
    bool has_major_faults;
    uint64_t major_faults; /* /proc/PID/stat majflt (field 12): faults that read a page */
};

/*
 * Reads SYSROOT/proc/PID/io and SYSROOT/proc/PID/stat into *out (zeroed
 * first); a figure whose file is missing or malformed stays absent. Returns
 * 0 when at least one was read, else the io file's error (those of
 * rfsys_slurp, -EBADMSG, -EOVERFLOW); -EINVAL for a NULL out.
 */
int rfsys_read_io(const char *sysroot, const char *pid, struct rfsys_io *out);

/*
 * Physical cores of the online CPUs: the distinct (physical_package_id,
 * core_id) pairs of SYSROOT/sys/devices/system/cpu/cpuN/topology for each
 * CPU listed in .../cpu/online (SMT siblings count once). Errors: -EINVAL,
 * those of rfsys_slurp (e.g. -ENOENT without sysfs), -EBADMSG (a malformed
 * online list), -ENOENT when no CPU has a topology; *out is unchanged.
 */
int rfsys_physical_cores(const char *sysroot, uint32_t *out);

/*
 * The transparent-huge-page mode in force: the bracketed word of
 * SYSROOT/sys/kernel/mm/transparent_hugepage/enabled ("always", "madvise"
 * or "never"), NUL-terminated into out (out_size bytes). Errors: -EINVAL
 * (NULL out or out_size 0), those of rfsys_slurp (-ENOENT: a kernel
 * without THP), -EBADMSG (no bracketed lowercase word that fits out);
 * out is unchanged on error.
 */
int rfsys_read_thp_enabled(const char *sysroot, char *out, size_t out_size);

#ifdef __cplusplus
}
#endif

#endif
