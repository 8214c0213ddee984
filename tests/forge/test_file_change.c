/*
 * The model file changes under a loaded model (tiny preset, f32, every
 * weight read from the file): replaced by a rename, and truncated while
 * mapped. forge_model_file_changed names what differs (inode; size and
 * mtime); on the truncated file, whose mapping now reaches past the end of
 * the file, ramforge's own page paths (mincore sampling, MADV_DONTNEED and
 * MADV_PAGEOUT release, MADV_WILLNEED prefetch, smaps and PAGEMAP_SCAN
 * reads) run without a fault, where a read of the mapping past the end
 * does raise SIGBUS (shown in a child process, so the check can fail).
 * No decode runs after a change: llama.cpp's reads of the weights are
 * outside ramforge's code.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "forge_test_util.h"
#include "ramforge/forge/forge.h"
#include "ramforge/forge/forge_pages.h"
#include "ramforge/forge/forge_prefetch.h"
#include "ramforge/sys/pages.h"
#include "ramforge/sys/sys.h"

static char model_path[256], other_path[256];

static int setup(void **state)
{
    (void)state;
    snprintf(model_path, sizeof(model_path), "/tmp/ramforge-test-change-%ld.gguf", (long)getpid());
    snprintf(other_path, sizeof(other_path), "/tmp/ramforge-test-change-%ld-b.gguf",
             (long)getpid());
    return forge_test_mkmodel(model_path, FORGE_PRESET_TINY, "f32", 8);
}

static int teardown(void **state)
{
    (void)state;
    unlink(model_path);
    unlink(other_path);
    return 0;
}

/* The model's r--s mapping in this process's maps: [*start, *end). */
static void find_mapping(struct forge_model *m, uint64_t *start, uint64_t *end)
{
    size_t n;
    const struct rf_mapping_meta *mm = forge_model_mappings(m, &n);
    struct rfsys_maps maps;

    assert_true(mm[0].validated);
    rfsys_maps_init(&maps);
    assert_int_equal(rfsys_read_maps(NULL, "self", &maps), 0);
    *start = *end = 0;
    for (size_t i = 0; i < maps.n; i++) {
        const struct rfsys_mapping *v = &maps.v[i];
        if (v->inode == mm[0].inode && strcmp(v->perms, "r--s") == 0 && !*start) {
            *start = v->start_addr;
            *end = v->end_addr;
        }
    }
    rfsys_maps_free(&maps);
    assert_true(*start < *end);
}

/* One range over every mapped page of the model file. */
static struct rf_file_range whole_mapping(struct forge_model *m)
{
    size_t n;
    const struct rf_mapping_meta *mm = forge_model_mappings(m, &n);
    const uint64_t page = rfsys_page_bytes();
    struct rf_file_range r = {
        0,
        {mm[0].map_offset_bytes / page, (mm[0].map_offset_bytes + mm[0].map_length_bytes) / page}};
    return r;
}

/* A renamed-over file: another inode at the path; the mapping keeps the old one. */
static void test_replaced_by_rename(void **state)
{
    (void)state;
    struct forge_model *m = NULL;
    char why[256];
    bool changed = false;

    assert_int_equal(forge_test_load(model_path, false, &m), 0);
    assert_int_equal(forge_model_file_changed(m, &changed, why, sizeof(why)), 0);
    assert_false(changed);
    assert_string_equal(why, "");
    assert_int_equal(forge_test_mkmodel(other_path, FORGE_PRESET_TINY, "f32", 9), 0);
    assert_int_equal(rename(other_path, model_path), 0);
    assert_int_equal(forge_model_file_changed(m, &changed, why, sizeof(why)), 0);
    assert_true(changed);
    assert_non_null(strstr(why, "inode "));
    assert_null(strstr(why, "device")); /* same filesystem */
    /* Removed altogether: changed, with the stat error. */
    assert_int_equal(unlink(model_path), 0);
    assert_int_equal(forge_model_file_changed(m, &changed, why, sizeof(why)), 0);
    assert_true(changed);
    assert_non_null(strstr(why, strerror(ENOENT)));
    assert_int_equal(forge_model_file_changed(m, &changed, NULL, 0), 0);
    assert_true(changed);
    assert_int_equal(forge_model_file_changed(NULL, &changed, why, sizeof(why)), -EINVAL);
    forge_model_free(m);
    assert_int_equal(forge_test_mkmodel(model_path, FORGE_PRESET_TINY, "f32", 8), 0);
}

/* In a child: reads the last byte of the mapping (past the end of the truncated file). */
static int child_reads(uint64_t addr)
{
    pid_t pid = fork();
    int status;

    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGBUS, SIG_DFL); /* not cmocka's handler: the parent sees the signal */
        signal(SIGSEGV, SIG_DFL);
        volatile const unsigned char *p = (const unsigned char *)(uintptr_t)addr;
        _exit(*p == 0xA5 ? 1 : 0);
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    return WIFSIGNALED(status) ? WTERMSIG(status) : 0;
}

/* Truncated to one page while mapped: every page path of ramforge survives it. */
static void test_truncated_while_mapped(void **state)
{
    (void)state;
    struct forge_model *m = NULL;
    struct forge_release_result rel;
    struct forge_prefetch_result pre;
    struct forge_page_pass pass;
    struct rfsys_maps smaps;
    const uint64_t page = rfsys_page_bytes();
    uint64_t start, end;
    char why[256];
    bool changed = false;
    int err = 0;

    assert_int_equal(forge_test_load(model_path, false, &m), 0);
    find_mapping(m, &start, &end);
    assert_true(end - start > 2 * page);
    assert_int_equal(child_reads(end - 1), 0); /* inside the file: readable */
    assert_int_equal(truncate(model_path, (off_t)page), 0);
    assert_int_equal(forge_model_file_changed(m, &changed, why, sizeof(why)), 0);
    assert_true(changed);
    assert_non_null(strstr(why, "size "));
    assert_null(strstr(why, "inode"));
    assert_int_equal(child_reads(end - 1), SIGBUS); /* what a read by ramforge would meet */

    /* mincore over every page: resident or not, never a fault. */
    struct rf_file_range all = whole_mapping(m);
    uint64_t n_pages = all.pages.end_page - all.pages.first_page;
    uint8_t *states = calloc(n_pages, 1);
    assert_non_null(states);
    assert_int_equal(forge_page_pass_begin(m, &pass), 0);
    assert_int_equal(forge_page_pass_sample(&pass, 0, all.pages.first_page, n_pages, states), 0);
    forge_page_pass_end(&pass);
    assert_int_equal(states[n_pages - 1], RF_PAGE_NONRESIDENT); /* past the end: no page */
    free(states);

    /* smaps and PAGEMAP_SCAN read the page tables, not the pages. */
    size_t nm;
    const struct rf_mapping_meta *mm = forge_model_mappings(m, &nm);
    struct rfsys_mapping_sum sum;
    rfsys_maps_init(&smaps);
    assert_int_equal(rfsys_read_smaps(NULL, "self", &smaps), 0);
    int pagemap = rfsys_pagemap_open(NULL, "self");
    assert_true(pagemap >= 0);
    int rc = rfsys_maps_resident_file(&smaps, pagemap, mm[0].dev_major, mm[0].dev_minor,
                                      mm[0].inode, "r--s", &sum);
    assert_true(rc == 0 || rc == -EOPNOTSUPP); /* before Linux 6.7: no PAGEMAP_SCAN */
    close(pagemap);
    rfsys_maps_free(&smaps);

    /* Prefetch and both release modes over the whole mapping, past the end included. */
    assert_int_equal(forge_model_prefetch(m, &all, 1, 0, &pre), 0);
    assert_int_equal(pre.requested_bytes, n_pages * page);
    assert_int_equal(forge_model_release(m, &all, 1, FORGE_RELEASE_DONTNEED, &rel, &err), 0);
    assert_int_equal(rel.requested_bytes, n_pages * page);
    assert_int_equal(forge_model_release(m, &all, 1, FORGE_RELEASE_PAGEOUT, &rel, &err), 0);
    assert_int_equal(rel.requested_bytes, n_pages * page);
    forge_model_free(m);
    assert_int_equal(unlink(model_path), 0);
    assert_int_equal(forge_test_mkmodel(model_path, FORGE_PRESET_TINY, "f32", 8), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_replaced_by_rename),
        cmocka_unit_test(test_truncated_while_mapped),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
