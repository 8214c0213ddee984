/*
 * The filesystem table of fs_profile.h: per statfs f_type, whether
 * cachestat counts the file's pages, whether page figures are stable,
 * whether a cold read is possible, and what a release frees. The magic
 * numbers are those of linux/magic.h (copied: this layer makes no OS
 * calls). docs/FILESYSTEMS.md states the same table in prose; keep both.
 */
#include "ramforge/core/fs_profile.h"
#include "ramforge/core/json_util.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>

#include "ramforge/core/report_json.h"

static const char NET_WHY[] =
    "a network or user-space filesystem: the client's page cache may be invalidated by the "
    "server or bypassed (cache=none, DAX), so page figures describe this machine's cache at "
    "that instant only";
static const char NET_RELEASE_WHY[] = "frees this machine's cached copy; the data is read "
                                      "again over the network or from the daemon";
static const char SHMEM_RELEASE_WHY[] =
    "the file lives in RAM (shared memory): a release drops the mapping's RSS but frees no "
    "memory, the pages stay in the file";

/* Local block filesystems: the page cache is the file's only cache. */
#define LOCAL(magic_, name_)                                                                       \
    {                                                                                              \
        magic_, name_, true, NULL, true, NULL, true, RF_FS_RELEASE_FREES, NULL                     \
    }
#define NETWORK(magic_, name_)                                                                     \
    {                                                                                              \
        magic_, name_, true, NULL, false, NET_WHY, true, RF_FS_RELEASE_FREES, NET_RELEASE_WHY      \
    }
#define SHMEM(magic_, name_)                                                                       \
    {                                                                                              \
        magic_, name_, true, NULL, true, NULL, false, RF_FS_RELEASE_NO_FREE, SHMEM_RELEASE_WHY     \
    }

static const struct rf_fs_profile TABLE[] = {
    LOCAL(0xEF53, "ext4"), /* ext2/ext3/ext4 share the magic */
    LOCAL(0x58465342, "xfs"),
    LOCAL(0x9123683E, "btrfs"),
    LOCAL(0xF2F52010, "f2fs"),
    LOCAL(0x73717368, "squashfs"),
    LOCAL(0xE0F5E1E2, "erofs"),
    SHMEM(0x01021994, "tmpfs"),
    SHMEM(0x858458f6, "ramfs"),
    SHMEM(0x958458f6, "hugetlbfs"),
    {0x794c7630, "overlayfs", false,
     "overlayfs: the overlay inode has no page cache of its own (the pages belong to the lower "
     "or upper file), so cachestat on the overlay descriptor answers 0 pages",
     true, NULL, true, RF_FS_RELEASE_FREES, NULL},
    NETWORK(0x6969, "nfs"),
    NETWORK(0xFF534D42, "cifs"),
    NETWORK(0xFE534D42, "smb2"),
    NETWORK(0x00c36400, "ceph"),
    NETWORK(0x01021997, "9p"),
    NETWORK(0x65735546, "fuse"), /* virtiofs is fuse: same f_type */
    {0x2fc12fc1, "zfs", true, NULL, false,
     "zfs keeps file data in its ARC, outside the page cache: the page cache holds only "
     "pages of mapped files (a second copy)",
     true, RF_FS_RELEASE_UNCERTAIN,
     "frees the page-cache copy; the ARC may keep the data (its memory is not freed)"},
};

static const struct rf_fs_profile UNKNOWN = {
    0,
    "unknown",
    true,
    NULL,
    false,
    "a filesystem type ramforge has no table entry for: page figures are not vouched for",
    true,
    RF_FS_RELEASE_UNCERTAIN,
    "a filesystem type ramforge has no table entry for: what a release frees is not known"};

const struct rf_fs_profile *rf_fs_profile_of(uint64_t magic)
{
    for (size_t i = 0; i < sizeof(TABLE) / sizeof(TABLE[0]); i++)
        if (TABLE[i].magic == magic)
            return &TABLE[i];
    return &UNKNOWN;
}

const char *rf_fs_in_memory_reason(uint64_t magic)
{
    return magic && !rf_fs_profile_of(magic)->cold_read_possible
               ? "the model file is on a filesystem whose pages are memory (tmpfs, ramfs): "
                 "nothing is read from storage each token"
               : NULL;
}

const struct rf_fs_profile *rf_fs_profiles(size_t *n)
{
    if (n)
        *n = sizeof(TABLE) / sizeof(TABLE[0]);
    return TABLE;
}

const char *rf_fs_release_name(enum rf_fs_release r)
{
    switch (r) {
    case RF_FS_RELEASE_FREES:
        return "frees";
    case RF_FS_RELEASE_NO_FREE:
        return "frees nothing";
    case RF_FS_RELEASE_UNCERTAIN:
        return "uncertain";
    }
    return "uncertain";
}

json_t *rf_fs_to_json(uint64_t magic)
{
    const struct rf_fs_profile *p = rf_fs_profile_of(magic);
    char hex[24];
    json_t *o = json_object();

    if (!o)
        return NULL;
    snprintf(hex, sizeof(hex), "0x%" PRIx64, magic);
    json_object_set_new(o, "type", json_string(p->name));
    json_object_set_new(o, "magic", magic ? json_string(hex) : json_null());
    json_object_set_new(o, "cachestat_valid", json_boolean(p->cachestat_valid));
    json_object_set_new(o, "cachestat_note", rf_json_str(p->cachestat_why));
    json_object_set_new(o, "page_figures_stable", json_boolean(p->page_figures_stable));
    json_object_set_new(o, "page_figures_caveat", rf_json_str(p->page_figures_why));
    json_object_set_new(o, "cold_read_possible", json_boolean(p->cold_read_possible));
    json_object_set_new(o, "release", json_string(rf_fs_release_name(p->release)));
    json_object_set_new(o, "release_note", rf_json_str(p->release_why));
    return o;
}
