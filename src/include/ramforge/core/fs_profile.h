/*
 * What page-cache observation and release mean on the filesystem that
 * holds a model file, by the statfs f_type of that filesystem.
 *
 * The figures ramforge reports (mincore on a file mapping, cachestat on a
 * descriptor, the bytes a release frees) are defined for a local
 * block-device filesystem whose page cache is the file's only cache. On
 * other filesystems the same calls answer something else:
 *   - overlayfs: the overlay inode has no page cache of its own (the pages
 *     belong to the lower or upper file), so cachestat on the overlay
 *     descriptor answers 0 pages; a mapping is of the real file, so mincore
 *     is right.
 *   - tmpfs, ramfs, hugetlbfs: the file's pages ARE its storage (shmem). A
 *     release drops the mapping's page-table entries (RSS falls) but frees
 *     no memory, and a cold read is impossible: the data is always in RAM.
 *   - nfs, cifs/smb, ceph, 9p, fuse (virtiofs is fuse): the client cache may
 *     be invalidated by the server or bypassed (cache=none, DAX), so the
 *     figures describe the client's cache at that instant only.
 *   - zfs: file data lives in the ARC, outside the page cache; the page
 *     cache holds only pages of mapped files (a second copy).
 * The table is plain data (docs/FILESYSTEMS.md is its prose form); the
 * f_type comes from src/sys (rfsys_fs_magic).
 */
#ifndef RAMFORGE_FS_PROFILE_H
#define RAMFORGE_FS_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What a release (MADV_DONTNEED + POSIX_FADV_DONTNEED of clean file pages) does. */
enum rf_fs_release {
    RF_FS_RELEASE_FREES = 0,    /* clean pages leave the page cache: memory is freed */
    RF_FS_RELEASE_NO_FREE = 1,  /* the pages are the file's storage: nothing is freed */
    RF_FS_RELEASE_UNCERTAIN = 2 /* frees client cache pages, but another cache may keep the
                                   data (zfs ARC) or the type is unknown */
};

/* One filesystem type. Every string is static. */
struct rf_fs_profile {
    uint64_t magic;               /* statfs f_type; 0 for the unknown-type profile */
    const char *name;             /* "ext4", "tmpfs", "overlayfs", ...; "unknown" */
    bool cachestat_valid;         /* cachestat on a descriptor of this filesystem counts the
                                     file's cached pages */
    const char *cachestat_why;    /* NULL when valid; else why the figure is unknown */
    bool page_figures_stable;     /* mincore/cachestat figures describe a cache only this
                                     machine controls */
    const char *page_figures_why; /* NULL when stable; else the caveat to print */
    bool cold_read_possible;      /* the file's data can be out of RAM (false on tmpfs) */
    enum rf_fs_release release;
    const char *release_why; /* NULL for RF_FS_RELEASE_FREES; else the reason */
};

/*
 * The profile of statfs f_type MAGIC: never NULL. An unknown type gets a
 * profile named "unknown" whose release is RF_FS_RELEASE_UNCERTAIN and whose
 * figures are marked unstable (magic is then 0: print the f_type yourself).
 */
const struct rf_fs_profile *rf_fs_profile_of(uint64_t magic);

/*
 * Why a file on the filesystem of statfs f_type MAGIC is memory rather than
 * a cache of storage (a profile without cold_read_possible: tmpfs, ramfs),
 * as one static sentence; NULL when its pages can be evicted and read again
 * or the type is not known (0).
 */
const char *rf_fs_in_memory_reason(uint64_t magic);

/* The table itself (for docs and tests): *n receives its length. */
const struct rf_fs_profile *rf_fs_profiles(size_t *n);

/* "frees", "frees nothing", "uncertain". */
const char *rf_fs_release_name(enum rf_fs_release r);

#ifdef __cplusplus
}
#endif

#endif
