/*
 * Tests for rfsys_read_maps, rfsys_read_smaps and rfsys_maps_sum_file on
 * the fixture tree tests/data/sys/procfs (paths with spaces, " (deleted)",
 * unknown smaps fields, truncated lines, huge numbers).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "ramforge/sys/sys.h"

#define PROCFS RF_TEST_DATA "/sys/procfs"
#define MODEL_PATH "/srv/my models/tiny  llama.gguf"

static void check_header(const struct rfsys_mapping *m, uint64_t start, uint64_t end,
                         const char *perms, uint64_t offset, uint32_t major, uint32_t minor,
                         uint64_t inode, const char *path, bool deleted)
{
    assert_int_equal(m->start_addr, start);
    assert_int_equal(m->end_addr, end);
    assert_string_equal(m->perms, perms);
    assert_int_equal(m->offset_bytes, offset);
    assert_int_equal(m->dev_major, major);
    assert_int_equal(m->dev_minor, minor);
    assert_int_equal(m->inode, inode);
    if (path)
        assert_string_equal(m->path, path);
    else
        assert_null(m->path);
    assert_int_equal(m->deleted, deleted);
}

static void check_sizes(const struct rfsys_mapping *m, uint64_t rss, uint64_t pss,
                        uint64_t shared_clean, uint64_t private_clean, uint64_t private_dirty,
                        uint64_t anonymous, uint64_t locked)
{
    assert_true(m->has_smaps);
    assert_int_equal(m->rss_bytes, rss);
    assert_int_equal(m->pss_bytes, pss);
    assert_int_equal(m->shared_clean_bytes, shared_clean);
    assert_int_equal(m->shared_dirty_bytes, 0);
    assert_int_equal(m->private_clean_bytes, private_clean);
    assert_int_equal(m->private_dirty_bytes, private_dirty);
    assert_int_equal(m->anonymous_bytes, anonymous);
    assert_int_equal(m->locked_bytes, locked);
}

/* The eight header lines of proc/self/maps, as written in the fixture. */
static void check_self_headers(const struct rfsys_maps *maps)
{
    check_header(&maps->v[0], 0x08048000, 0x08049000, "r-xp", 0x1000, 8, 2, 173521,
                 "/usr/bin/old app", false);
    check_header(&maps->v[1], 0x7f3a40000000, 0x7f3a48000000, "r--s", 0, 0xfd, 1, 2097153,
                 MODEL_PATH, false);
    check_header(&maps->v[2], 0x7f3a48000000, 0x7f3a4a000000, "r--s", 0x08000000, 0xfd, 1, 2097153,
                 MODEL_PATH, false);
    check_header(&maps->v[3], 0x7f3a4a000000, 0x7f3a4a001000, "rw-p", 0, 0, 0, 0, NULL, false);
    check_header(&maps->v[4], 0x7f3a4a001000, 0x7f3a4a101000, "r--s", 0, 0xfd, 1, 2097154,
                 "/srv/old model.gguf", true);
    check_header(&maps->v[5], 0x7f3a4c000000, 0x7f3a4c001000, "r--p", 0, 0xfd, 1, 2097153,
                 MODEL_PATH, false);
    check_header(&maps->v[6], 0x55d0c1e00000, 0x55d0c1e21000, "rw-p", 0, 0, 0, 0, "[heap]", false);
}

static void test_read_maps(void **state)
{
    struct rfsys_maps maps;
    size_t i;

    (void)state;
    rfsys_maps_init(&maps);
    assert_int_equal(rfsys_read_maps(PROCFS, "self", &maps), 0);
    assert_int_equal(maps.n, 8);
    check_self_headers(&maps);
    /* Last line: anonymous, no blank after the inode, no newline. */
    check_header(&maps.v[7], 0x7ffc1a2b3000, 0x7ffc1a2d4000, "rw-p", 0, 0, 0, 0, NULL, false);
    for (i = 0; i < maps.n; i++) {
        assert_false(maps.v[i].has_smaps);
        assert_int_equal(maps.v[i].rss_bytes, 0);
    }
    rfsys_maps_free(&maps);
    assert_null(maps.v);
    assert_int_equal(maps.n, 0);
    rfsys_maps_free(&maps); /* twice is fine */
    rfsys_maps_free(NULL);
}

static void test_read_smaps(void **state)
{
    struct rfsys_maps maps;

    (void)state;
    rfsys_maps_init(&maps);
    assert_int_equal(rfsys_read_smaps(PROCFS, "self", &maps), 0);
    assert_int_equal(maps.n, 7);
    check_self_headers(&maps);
    /* kB * 1024; Pss_Dirty, Referenced, THPeligible, VmFlags... are ignored. */
    check_sizes(&maps.v[0], 4096, 2048, 0, 0, 0, 0, 4096);
    check_sizes(&maps.v[1], 67108864, 33554432, 67108864, 0, 0, 0, 0);
    check_sizes(&maps.v[2], 16777216, 16777216, 0, 16777216, 0, 0, 16777216);
    check_sizes(&maps.v[3], 4096, 4096, 0, 0, 4096, 4096, 0);
    check_sizes(&maps.v[4], 1048576, 524288, 1048576, 0, 0, 0, 0);
    check_sizes(&maps.v[5], 4096, 4096, 0, 4096, 0, 0, 0);
    /* Last block ends with "VmFlags: rd wr mr mw me ac" and no newline. */
    check_sizes(&maps.v[6], 102400, 102400, 0, 0, 102400, 102400, 0);
    rfsys_maps_free(&maps);
}

/* Two r--s mappings of inode 2097153, one r--p of it, one of inode 2097154. */
static void test_sum_file(void **state)
{
    struct rfsys_maps maps;
    struct rfsys_mapping_sum sum;

    (void)state;
    rfsys_maps_init(&maps);
    assert_int_equal(rfsys_read_smaps(PROCFS, "self", &maps), 0);

    assert_int_equal(rfsys_maps_sum_file(&maps, 0xfd, 1, 2097153, "r--s", &sum), 0);
    assert_int_equal(sum.n_mappings, 2);
    assert_int_equal(sum.virtual_bytes, 167772160); /* 128 MiB + 32 MiB */
    assert_int_equal(sum.rss_bytes, 83886080);      /* (65536 + 16384) kB */
    assert_int_equal(sum.pss_bytes, 50331648);      /* (32768 + 16384) kB */
    assert_int_equal(sum.locked_bytes, 16777216);   /* 16384 kB */
    assert_true(sum.complete);

    /* Any permissions: the r--p page joins. */
    assert_int_equal(rfsys_maps_sum_file(&maps, 0xfd, 1, 2097153, NULL, &sum), 0);
    assert_int_equal(sum.n_mappings, 3);
    assert_int_equal(sum.virtual_bytes, 167776256);
    assert_int_equal(sum.rss_bytes, 83890176);
    assert_int_equal(sum.pss_bytes, 50335744);
    assert_int_equal(sum.locked_bytes, 16777216);
    assert_true(sum.complete);

    /* The other file (deleted). */
    assert_int_equal(rfsys_maps_sum_file(&maps, 0xfd, 1, 2097154, "r--s", &sum), 0);
    assert_int_equal(sum.n_mappings, 1);
    assert_int_equal(sum.virtual_bytes, 1048576);
    assert_int_equal(sum.rss_bytes, 1048576);
    assert_int_equal(sum.pss_bytes, 524288);
    assert_int_equal(sum.locked_bytes, 0);

    /* Same inode, other device: nothing. */
    assert_int_equal(rfsys_maps_sum_file(&maps, 0xfd, 2, 2097153, NULL, &sum), 0);
    assert_int_equal(sum.n_mappings, 0);
    assert_int_equal(sum.virtual_bytes, 0);
    assert_true(sum.complete);

    /* From maps (no smaps): counted, sizes unknown. */
    assert_int_equal(rfsys_read_maps(PROCFS, "self", &maps), 0);
    assert_int_equal(rfsys_maps_sum_file(&maps, 0xfd, 1, 2097153, "r--s", &sum), 0);
    assert_int_equal(sum.n_mappings, 2);
    assert_int_equal(sum.virtual_bytes, 167772160);
    assert_int_equal(sum.rss_bytes, 0);
    assert_false(sum.complete);

    assert_int_equal(rfsys_maps_sum_file(NULL, 0, 0, 0, NULL, &sum), -EINVAL);
    assert_int_equal(rfsys_maps_sum_file(&maps, 0, 0, 0, NULL, NULL), -EINVAL);
    rfsys_maps_free(&maps);
}

static void test_sum_overflow(void **state)
{
    struct rfsys_mapping v[2];
    struct rfsys_maps maps = {v, 2};
    struct rfsys_mapping_sum sum;

    (void)state;
    memset(v, 0, sizeof(v));
    v[0].start_addr = 0x1000;
    v[0].end_addr = 0x2000;
    v[0].dev_major = 8;
    v[0].inode = 7;
    memcpy(v[0].perms, "r--s", 5);
    v[0].has_smaps = true;
    v[0].rss_bytes = UINT64_MAX / 2 + 1;
    v[1] = v[0];
    v[1].start_addr = 0x2000;
    v[1].end_addr = 0x3000;
    assert_int_equal(rfsys_maps_sum_file(&maps, 8, 0, 7, "r--s", &sum), -EOVERFLOW);
    assert_int_equal(sum.n_mappings, 0);

    v[1].rss_bytes = UINT64_MAX / 2; /* exactly UINT64_MAX: fits */
    assert_int_equal(rfsys_maps_sum_file(&maps, 8, 0, 7, "r--s", &sum), 0);
    assert_int_equal(sum.rss_bytes, UINT64_MAX);
    assert_int_equal(sum.virtual_bytes, 0x2000);
}

/* Every malformed input gives an error and an empty list, old content freed. */
static void test_malformed(void **state)
{
    struct rfsys_maps maps;

    (void)state;
    rfsys_maps_init(&maps);

    assert_int_equal(rfsys_read_maps(PROCFS, "self", &maps), 0);
    assert_int_equal(maps.n, 8);
    /* "7f3a48000000-7f3a4a00" after a good line */
    assert_int_equal(rfsys_read_maps(PROCFS, "100", &maps), -EBADMSG);
    assert_int_equal(maps.n, 0);
    assert_null(maps.v);
    /* "7f3a40000000-7f3a48000000 r-" without newline */
    assert_int_equal(rfsys_read_maps(PROCFS, "106", &maps), -EBADMSG);
    /* end before start */
    assert_int_equal(rfsys_read_maps(PROCFS, "109", &maps), -EBADMSG);
    /* 17 hex digits */
    assert_int_equal(rfsys_read_maps(PROCFS, "110", &maps), -EBADMSG);
    /* inode "12x" */
    assert_int_equal(rfsys_read_smaps(PROCFS, "110", &maps), -EBADMSG);
    /* smaps field before any header */
    assert_int_equal(rfsys_read_smaps(PROCFS, "104", &maps), -EBADMSG);
    /* "Pss:" without a value, at the end of the file */
    assert_int_equal(rfsys_read_smaps(PROCFS, "103", &maps), -EBADMSG);

    assert_int_equal(rfsys_read_smaps(PROCFS, "self", &maps), 0);
    assert_int_equal(maps.n, 7);
    /* Rss 2^64-1 kB */
    assert_int_equal(rfsys_read_smaps(PROCFS, "105", &maps), -EOVERFLOW);
    assert_int_equal(maps.n, 0);

    assert_int_equal(rfsys_read_maps(PROCFS, "999", &maps), -ENOENT);
    assert_int_equal(rfsys_read_maps(PROCFS, "../self", &maps), -EINVAL);
    assert_int_equal(rfsys_read_maps(PROCFS, "self", NULL), -EINVAL);
    assert_int_equal(maps.n, 0);
    rfsys_maps_free(&maps);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_read_maps), cmocka_unit_test(test_read_smaps),
        cmocka_unit_test(test_sum_file),  cmocka_unit_test(test_sum_overflow),
        cmocka_unit_test(test_malformed),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
