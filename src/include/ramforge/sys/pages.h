/*
 * Page-cache residency probes: mincore(2), cachestat(2), the kernel's
 * fake-residency rule, a no-allocation lookup of one address in
 * /proc/PID/maps, and a read-only observation mapping of a whole file.
 *
 * Two different quantities, never to be confused:
 *   - "in page cache": the kernel caches the file page (mincore on a file
 *     mapping, cachestat). This is what everything here reports.
 *   - "mapped in this process": a page table entry of this process points
 *     at the page (smaps Rss, sys.h). MADV_DONTNEED drops that and leaves
 *     the page cache alone, so mincore still says resident.
 *
 * Observation never faults a page in and never evicts one: nothing here
 * reads or advises the pages it looks at.
 *
 * The fake-residency rule (mm/mincore.c, can_do_mincore, Linux 5.0+): for
 * a file mapping whose file the caller neither owns (inode uid == fsuid, or
 * CAP_FOWNER) nor may open for writing, mincore does not look at the page
 * cache and reports EVERY page resident. Such a sample carries no
 * information: callers must report those pages UNKNOWN, never resident.
 * cachestat (Linux 6.5+) reports real page-cache figures for any file the
 * caller can open on kernels that allow it; newer kernels refuse (-EPERM)
 * under the same ownership/write rule.
 *
 * Every function returns 0 (or a documented non-negative value) or a
 * negative errno; nothing prints.
 */
#ifndef RAMFORGE_PAGES_H
#define RAMFORGE_PAGES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "ramforge/core/residency.h" /* enum rf_page_state: the states the samplers write */

#ifdef __cplusplus
extern "C" {
#endif

/* The kernel's page size in bytes (sysconf(_SC_PAGESIZE)). */
uint64_t rfsys_page_bytes(void);

/*
 * mincore(2) over [addr, addr + len_bytes): vec[i] becomes 1 when page i of
 * the range is in core (for a file mapping: in the page cache, whether or
 * not this process maps it), 0 otherwise; the bits the kernel reserves are
 * cleared. addr must be page aligned; the range needs ceil(len_bytes /
 * page) bytes of vec and vec_len must be at least that. len_bytes 0 is a
 * no-op. Observes only: no page is faulted in.
 *
 * Subject to the fake-residency rule above: check
 * rfsys_mincore_trustworthy before believing a file mapping's answer.
 *
 * Errors: -EINVAL (NULL vec, unaligned addr, vec_len too small, or the
 * range wraps), -ENOMEM (part of the range is not mapped), -EAGAIN (the
 * kernel was out of resources, after retrying), -EFAULT.
 */
int rfsys_mincore(const void *addr, uint64_t len_bytes, uint8_t *vec, size_t vec_len);

/* struct cachestat of linux/mman.h (Linux 6.5); counts are in pages. */
struct rfsys_cachestat {
    uint64_t nr_cache;            /* pages of the range in the page cache */
    uint64_t nr_dirty;            /* of those, dirty */
    uint64_t nr_writeback;        /* of those, under writeback */
    uint64_t nr_evicted;          /* pages of the range evicted from the cache */
    uint64_t nr_recently_evicted; /* of those, evicted recently (workingset) */
};

/*
 * cachestat(2) on the file open as fd, bytes [off_bytes, off_bytes +
 * len_bytes) rounded outward to pages; len_bytes 0 means to the end of the
 * file. Page-cache state, not this process's mappings. Pages of a large
 * folio are counted only where they fall inside the range.
 *
 * Errors: -ENOSYS (kernel older than 6.5, or an architecture without the
 * syscall), -EPERM (the kernel refuses: recent kernels apply the
 * ownership/write rule of can_do_mincore to cachestat), -EBADF,
 * -EOPNOTSUPP (hugetlbfs), -EINVAL (NULL out); on error *out is zero.
 */
int rfsys_cachestat(int fd, uint64_t off_bytes, uint64_t len_bytes, struct rfsys_cachestat *out);

/*
 * The kernel's can_do_mincore rule for a file mapping of the file open as
 * fd (st: its fstat; NULL: fstat(fd) is used). Returns 0 with
 * *trustworthy true when mincore on a mapping of this file reports real
 * page-cache state for this process: the caller owns the inode (st_uid ==
 * fsuid), has CAP_FOWNER in its effective set, or may write the file
 * (faccessat W_OK with AT_EACCESS, which includes -EROFS on a read-only
 * mount); 0 with *trustworthy false when it does not: mincore would report
 * every page resident. *reason (may be NULL) is set to a static one-line
 * explanation either way.
 *
 * Approximations, documented: CAP_FOWNER is taken from the effective set
 * without the kernel's user-namespace mapping check, and idmapped mounts
 * are not considered.
 *
 * Errors (*trustworthy false): -EINVAL (fd < 0, NULL trustworthy), -errno
 * of fstat, capget or faccessat for anything but a plain "not permitted"
 * answer; *reason says why.
 */
int rfsys_mincore_trustworthy(const struct stat *st, int fd, bool *trustworthy,
                              const char **reason);

/* The header of one /proc/PID/maps line (the path is not kept). */
struct rfsys_vma {
    uint64_t start_addr;   /* first byte (virtual address) */
    uint64_t end_addr;     /* one past the last byte */
    uint64_t offset_bytes; /* file offset of start_addr */
    char perms[5];         /* "r--s", ... NUL-terminated */
    uint32_t dev_major, dev_minor;
    uint64_t inode; /* 0 for anonymous mappings */
};

/*
 * Finds the VMA of SYSROOT/proc/PID/maps that contains addr, streaming the
 * file through a fixed stack buffer: no heap allocation, so it may run in
 * a callback path. Only the header fields are parsed; paths (with spaces,
 * " (deleted)", or longer than the buffer) are skipped. Every line up to
 * the match must be well formed.
 *
 * Errors: -ENOENT (no VMA contains addr: the mapping is gone),
 * -EBADMSG (a malformed or truncated line), -EINVAL (bad pid or NULL out),
 * -ENAMETOOLONG, -errno of open/read. On error *out is zero.
 */
int rfsys_maps_find(const char *sysroot, const char *pid, uint64_t addr, struct rfsys_vma *out);

/*
 * The statfs f_type of the filesystem holding fd (its low 32 bits, as in
 * linux/magic.h) into *magic: the key of rf_fs_profile_of (fs_profile.h).
 * Errors: -errno of fstatfs, -EINVAL (NULL magic); *magic is then 0.
 */
int rfsys_fs_magic(int fd, uint64_t *magic);

/* rfsys_fs_magic of the filesystem holding PATH (statfs); -EINVAL for a NULL path. */
int rfsys_fs_magic_path(const char *path, uint64_t *magic);

/* How rfsys_file_pages_sample finds page states. */
enum rfsys_page_method {
    RFSYS_PAGES_NONE = 0,      /* no trustworthy source: every page unknown */
    RFSYS_PAGES_MINCORE = 1,   /* mincore on the observation mapping */
    RFSYS_PAGES_CACHESTAT = 2, /* cachestat over ranges, bisected to pages */
};

/*
 * A whole file opened O_RDONLY and mapped PROT_READ, MAP_SHARED (no
 * MAP_POPULATE, no read: mapping faults nothing in) for page-cache
 * observation. Page p of the file is byte p * page_bytes.
 */
struct rfsys_file_pages {
    int fd;                        /* owned; -1 once closed */
    struct stat st;                /* fstat of fd when opened */
    uint8_t *map;                  /* the mapping; NULL for an empty file */
    uint64_t map_bytes;            /* bytes mapped: st_size */
    uint64_t page_bytes;           /* rfsys_page_bytes() */
    uint64_t file_pages;           /* ceil(st_size / page_bytes) */
    bool mincore_trustworthy;      /* rfsys_mincore_trustworthy said so */
    const char *mincore_reason;    /* static: why mincore is or is not trustworthy */
    int cachestat_error;           /* 0: cachestat answers for this file; else its -errno */
    enum rfsys_page_method method; /* mincore if trustworthy, else cachestat if it
                                      answers and the filesystem's cachestat counts the
                                      file's pages (cachestat_valid), else none */
    uint64_t cachestat_calls;      /* cachestat calls made by sampling (cost figure) */
    uint64_t fs_magic;             /* statfs f_type of the file's filesystem (rfsys_fs_magic;
                                      rf_fs_profile_of says what figures mean there); 0 when
                                      fstatfs failed */
};

/*
 * Opens and maps PATH (a regular file) into *out. Errors: -errno of
 * open/fstat/mmap, -EINVAL (not a regular file, NULL argument), -EFBIG
 * (larger than the address space). On error *out is closed (fd -1).
 */
int rfsys_file_pages_open(const char *path, struct rfsys_file_pages *out);

/* Unmaps and closes. Safe on a closed or zeroed-with-fd--1 struct; NULL is a no-op. */
void rfsys_file_pages_close(struct rfsys_file_pages *fp);

/*
 * Writes the page-cache state of file pages [first_page, first_page +
 * n_pages) into states[0..n_pages) with fp->method: RF_PAGE_RESIDENT or
 * RF_PAGE_NONRESIDENT per page. Pages past the end of the file are
 * nonresident (the cache holds none). With method NONE, or on any error,
 * every page is RF_PAGE_UNKNOWN and the error is returned: -EACCES
 * (mincore untrustworthy and no cachestat), the cachestat or mincore
 * error, -EINVAL (NULL argument, range overflow).
 */
int rfsys_file_pages_sample(struct rfsys_file_pages *fp, uint64_t first_page, uint64_t n_pages,
                            uint8_t *states);

/*
 * The page-cache state of file pages [first_page, first_page + n_pages) of
 * fd by cachestat alone: a range whose nr_cache is 0 or n is decided at
 * once, a mixed range is split in halves, so the cost follows the number of
 * resident/nonresident runs, not pages. *calls (may be NULL) is increased
 * by the calls made. Errors: those of rfsys_cachestat (then every state is
 * RF_PAGE_UNKNOWN), -EOVERFLOW, -EINVAL.
 */
int rfsys_cachestat_pages(int fd, uint64_t page_bytes, uint64_t first_page, uint64_t n_pages,
                          uint8_t *states, uint64_t *calls);

/* "mincore", "cachestat", "none". */
const char *rfsys_page_method_name(enum rfsys_page_method m);

#ifdef __cplusplus
}
#endif

#endif
