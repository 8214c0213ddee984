/*
 * Helpers shared by the rfsys parsers (slurp.c defines them). Not part of
 * the public API: nothing outside src/sys includes this header.
 */
#ifndef RAMFORGE_SYS_INTERNAL_H
#define RAMFORGE_SYS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ramforge/sys/sys.h"

/* Bound for single-value cgroup files and memory.events: 64 KiB. */
#define RFSYS_SMALL_FILE_BYTES (64u << 10)

/*
 * Writes SYSROOT + PATH into buf (size bytes, NUL-terminated). A NULL or ""
 * sysroot means the real root. Returns 0, -EINVAL for a NULL path, or
 * -ENAMETOOLONG when the result does not fit.
 */
int rfsys__path(char *buf, size_t size, const char *sysroot, const char *path);

/*
 * Writes "/proc/PID/NAME" into buf. PID must be "self" or 1..10 decimal
 * digits (-EINVAL otherwise, which also keeps "../" out of the path).
 * Returns 0, -EINVAL or -ENAMETOOLONG.
 */
int rfsys__proc_path(char *buf, size_t size, const char *pid, const char *name);

/*
 * Reads sysroot + "/proc/PID/NAME" whole (rfsys_slurp, RFSYS_SLURP_MAX_BYTES)
 * into *text, NUL-terminated; the caller frees it. Returns 0, or
 * rfsys__proc_path's and rfsys_slurp's errors (*text is then NULL).
 */
int rfsys__proc_slurp(const char *sysroot, const char *pid, const char *name, char **text);

/*
 * Cuts the next line out of the NUL-terminated text at *cursor: replaces its
 * '\n' (if any) with NUL, advances *cursor past it and returns the line.
 * Returns NULL at the end of the text. A last line without '\n' is returned
 * like any other; an empty text has no lines.
 */
char *rfsys__next_line(char **cursor);

/*
 * Parses an unsigned number in base 10 or 16 at *sp (digits only: no sign,
 * no blanks, no "0x"), advancing *sp past it. Returns 0, -EINVAL when there
 * is no digit, or -ERANGE when the value does not fit in 64 bits.
 */
int rfsys__parse_u64(const char **sp, int base, uint64_t *out);

/*
 * Parses a procfs size value "<blanks><decimal> kB<blanks>" (the text after
 * "Field:") into bytes. Returns 0, -EBADMSG when the text has another shape,
 * or -EOVERFLOW when the number or number * 1024 does not fit in 64 bits.
 */
int rfsys__parse_kb(const char *s, uint64_t *bytes_out);

/*
 * maps.c: PAGEMAP_SCAN (Linux 6.7+) of [start, end) (page aligned) on an
 * open pagemap fd: region(ctx, s, e) for each merged run [s, e) of pages
 * present in the page tables, in address order; a negative return of
 * region stops the walk and is returned. Errors: -EOPNOTSUPP (no
 * PAGEMAP_SCAN, or fd is not a pagemap file), -EIO (an answer outside the
 * range or without progress), -errno of the ioctl.
 */
int rfsys__pagemap_scan(int fd, uint64_t start, uint64_t end,
                        int (*region)(void *ctx, uint64_t start, uint64_t end), void *ctx);

/* cgroup.c: the memory controller's location and its value files. */

/*
 * Finds the memory controller of process PID (see rfsys_read_cgroup_memory
 * for the rules): *version, the controller directory dir and the mount
 * point of its hierarchy, both relative to the sysroot. No controller:
 * version NONE, dir and point "", return 0. Errors: those of rfsys_slurp
 * for /proc/PID/cgroup and (except -ENOENT) mountinfo, -EINVAL for a bad
 * pid, -ENAMETOOLONG; on error version NONE and both strings "".
 */
int rfsys__cgroup_locate(const char *sysroot, const char *pid, enum rfsys_cgroup_version *version,
                         char *dir, size_t dir_size, char *point, size_t point_size);

/* Writes dir + "/" + name (name may be NULL: dir alone) into buf; -ENAMETOOLONG. */
int rfsys__cgroup_join(char *buf, size_t size, const char *dir, const char *name);

/*
 * Reads the value file dir/name under sysroot: a decimal number, or "max"
 * when allow_max (*is_max true, *value 0; is_max may be NULL), then
 * optional blanks. A missing file returns 0 with *found false; otherwise
 * *found is true and source (may be NULL) receives "dir/name". Errors:
 * -EBADMSG for another text (also a number above 64 bits), those of
 * rfsys_slurp, -ENAMETOOLONG.
 */
int rfsys__cgroup_read_value(const char *sysroot, const char *dir, const char *name, bool allow_max,
                             bool *found, bool *is_max, uint64_t *value, char *source,
                             size_t source_size);

/* One key of a flat-keyed cgroup file and where its value goes. */
struct rfsys__keyed {
    const char *key;
    uint64_t *value;
    bool found; /* set by rfsys__cgroup_read_keyed */
};

/*
 * Reads dir/file, a flat-keyed cgroup file ("key N" lines, as
 * memory.events, memory.stat and v1 memory.oom_control), into the values
 * of keys[0..n): the first occurrence of a key counts, other keys are
 * ignored. A missing file returns 0 with *file_found false. A known key
 * without a decimal value is -EBADMSG; other read errors are those of
 * rfsys_slurp.
 */
int rfsys__cgroup_read_keyed(const char *sysroot, const char *dir, const char *file,
                             struct rfsys__keyed *keys, size_t n, bool *file_found);

/*
 * Cuts dir (which starts with a mount point of keep bytes) to its parent
 * directory, never shorter than the mount point. Returns false, leaving
 * dir as it is, when dir is the mount point already. Each call shortens
 * dir, so a walk ends; a doubled or trailing '/' only repeats a directory.
 */
bool rfsys__cgroup_cut_to_parent(char *dir, size_t keep);

#endif
