/*
 * Tests for the filesystem table (fs_profile.h): every f_type is looked up
 * by the kernel's own constant from <linux/magic.h>, not by a number
 * copied from the table, and the facts that the rest of ramforge acts on
 * are checked per type: overlayfs' cachestat is not the file's, tmpfs and
 * ramfs free nothing on release and have no cold read, local disks free,
 * network filesystems carry a caveat, an unknown type promises nothing.
 * The JSON form is checked against the same lookups.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <linux/magic.h>
#include <string.h>

#include "ramforge/core/fs_profile.h"
#include "ramforge/core/report_json.h"

/* Not in every <linux/magic.h>. */
#ifndef ZFS_SUPER_MAGIC
#define ZFS_SUPER_MAGIC 0x2fc12fc1 /* include/sys/fs/zfs.h of OpenZFS */
#endif

static void kernel_magics_map_to_names(void **state)
{
    (void)state;
    static const struct {
        uint64_t magic;
        const char *name;
    } cases[] = {
        {EXT4_SUPER_MAGIC, "ext4"},
        {XFS_SUPER_MAGIC, "xfs"},
        {BTRFS_SUPER_MAGIC, "btrfs"},
        {TMPFS_MAGIC, "tmpfs"},
        {RAMFS_MAGIC, "ramfs"},
        {HUGETLBFS_MAGIC, "hugetlbfs"},
        {OVERLAYFS_SUPER_MAGIC, "overlayfs"},
        {NFS_SUPER_MAGIC, "nfs"},
        {V9FS_MAGIC, "9p"},
        {FUSE_SUPER_MAGIC, "fuse"},
        {SMB2_SUPER_MAGIC, "smb2"},
        {CEPH_SUPER_MAGIC, "ceph"},
        {SQUASHFS_MAGIC, "squashfs"},
        {F2FS_SUPER_MAGIC, "f2fs"},
        {ZFS_SUPER_MAGIC, "zfs"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const struct rf_fs_profile *p = rf_fs_profile_of(cases[i].magic);
        assert_non_null(p);
        assert_string_equal(p->name, cases[i].name);
        assert_true(p->magic == cases[i].magic);
    }
}

static void overlayfs_cachestat_is_not_the_files(void **state)
{
    (void)state;
    const struct rf_fs_profile *p = rf_fs_profile_of(OVERLAYFS_SUPER_MAGIC);
    assert_false(p->cachestat_valid);
    assert_non_null(p->cachestat_why);
    assert_non_null(strstr(p->cachestat_why, "overlay"));
    /* the mapping is of the real file: mincore figures and a release still hold */
    assert_int_equal(p->release, RF_FS_RELEASE_FREES);
    assert_true(p->cold_read_possible);
}

static void shmem_frees_nothing_and_is_never_cold(void **state)
{
    (void)state;
    const uint64_t shmem[] = {TMPFS_MAGIC, RAMFS_MAGIC, HUGETLBFS_MAGIC};
    for (size_t i = 0; i < 3; i++) {
        const struct rf_fs_profile *p = rf_fs_profile_of(shmem[i]);
        assert_int_equal(p->release, RF_FS_RELEASE_NO_FREE);
        assert_false(p->cold_read_possible);
        assert_non_null(p->release_why);
        assert_true(p->cachestat_valid); /* shmem pages are counted by cachestat */
    }
    assert_string_equal(rf_fs_release_name(RF_FS_RELEASE_NO_FREE), "frees nothing");
}

static void local_disks_free_and_network_carries_a_caveat(void **state)
{
    (void)state;
    const uint64_t local[] = {EXT4_SUPER_MAGIC, XFS_SUPER_MAGIC, BTRFS_SUPER_MAGIC};
    for (size_t i = 0; i < 3; i++) {
        const struct rf_fs_profile *p = rf_fs_profile_of(local[i]);
        assert_int_equal(p->release, RF_FS_RELEASE_FREES);
        assert_null(p->release_why);
        assert_true(p->cachestat_valid && p->page_figures_stable && p->cold_read_possible);
        assert_null(p->page_figures_why);
    }
    const uint64_t net[] = {NFS_SUPER_MAGIC, V9FS_MAGIC, FUSE_SUPER_MAGIC, CEPH_SUPER_MAGIC};
    for (size_t i = 0; i < 4; i++) {
        const struct rf_fs_profile *p = rf_fs_profile_of(net[i]);
        assert_false(p->page_figures_stable);
        assert_non_null(p->page_figures_why);
    }
}

static void unknown_type_promises_nothing(void **state)
{
    (void)state;
    const uint64_t unknown[] = {0, 0x12345678, UINT64_MAX};
    for (size_t i = 0; i < 3; i++) {
        const struct rf_fs_profile *p = rf_fs_profile_of(unknown[i]);
        assert_non_null(p);
        assert_string_equal(p->name, "unknown");
        assert_int_equal(p->release, RF_FS_RELEASE_UNCERTAIN);
        assert_false(p->page_figures_stable);
    }
}

static void table_has_no_duplicate_magic_and_why_iff_not_valid(void **state)
{
    (void)state;
    size_t n = 0;
    const struct rf_fs_profile *t = rf_fs_profiles(&n);
    assert_true(n >= 10);
    for (size_t i = 0; i < n; i++) {
        assert_true(t[i].magic != 0);
        assert_true(t[i].name && t[i].name[0]);
        assert_true((t[i].cachestat_why == NULL) == t[i].cachestat_valid);
        assert_true((t[i].page_figures_why == NULL) == t[i].page_figures_stable);
        assert_true((t[i].release_why == NULL) == (t[i].release == RF_FS_RELEASE_FREES) ||
                    t[i].page_figures_why); /* network types explain a release too */
        for (size_t j = i + 1; j < n; j++)
            assert_true(t[i].magic != t[j].magic);
    }
}

static void json_matches_the_lookup(void **state)
{
    (void)state;
    json_t *o = rf_fs_to_json(TMPFS_MAGIC);
    assert_non_null(o);
    assert_string_equal(json_string_value(json_object_get(o, "type")), "tmpfs");
    assert_string_equal(json_string_value(json_object_get(o, "magic")), "0x1021994");
    assert_string_equal(json_string_value(json_object_get(o, "release")), "frees nothing");
    assert_true(json_is_false(json_object_get(o, "cold_read_possible")));
    assert_true(json_is_null(json_object_get(o, "cachestat_note")));
    json_decref(o);
    o = rf_fs_to_json(0);
    assert_non_null(o);
    assert_true(json_is_null(json_object_get(o, "magic")));
    assert_string_equal(json_string_value(json_object_get(o, "type")), "unknown");
    json_decref(o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(kernel_magics_map_to_names),
        cmocka_unit_test(overlayfs_cachestat_is_not_the_files),
        cmocka_unit_test(shmem_frees_nothing_and_is_never_cold),
        cmocka_unit_test(local_disks_free_and_network_carries_a_caveat),
        cmocka_unit_test(unknown_type_promises_nothing),
        cmocka_unit_test(table_has_no_duplicate_magic_and_why_iff_not_valid),
        cmocka_unit_test(json_matches_the_lookup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
