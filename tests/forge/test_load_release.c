/*
 * The release during the load (forge_load_release.h) on generated models:
 * a small Q4_0 model, whose matmul weights llama.cpp repacks on AVX2 (the
 * test skips where it repacks none), loaded with release_during_load: every
 * repacked weight's file pages were released during the load, and after it
 * the mapping holds none of their own pages (/proc/self/pagemap bit 63,
 * "present"; the load populated them all); the progress callback of the
 * caller's params is still called, each time, with its user data and the
 * same fractions; and the cases where it must not run say why and leave
 * the params untouched (mlock, no mmap, a model that copies nothing).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../test_skip.h"
#include "forge_test_util.h"
#include "ramforge/forge/forge.h"
#include "ramforge/forge/forge_load_release.h"
#include "ramforge/sys/pages.h"
#include "ramforge/sys/sys.h"

#include "llama.h"

#define PAGEMAP_PRESENT (1ull << 63) /* /proc/PID/pagemap: page present in RAM */

static char q4_path[256], q8_path[256];

static int setup(void **state)
{
    (void)state;
    snprintf(q4_path, sizeof(q4_path), "/tmp/ramforge-test-lr4-%ld.gguf", (long)getpid());
    snprintf(q8_path, sizeof(q8_path), "/tmp/ramforge-test-lr8-%ld.gguf", (long)getpid());
    return forge_test_mkmodel(q4_path, FORGE_PRESET_SMALL, "q4_0", 3) < 0 ||
                   forge_test_mkmodel(q8_path, FORGE_PRESET_TINY, "q8_0", 3) < 0
               ? -1
               : 0;
}

static int teardown(void **state)
{
    (void)state;
    unlink(q4_path);
    unlink(q8_path);
    return 0;
}

/*
 * Pages of the file range [off, off + len) (page multiples) present in this
 * process's page tables, through the model's r--s mapping (inode) that
 * holds them; each must be mapped.
 */
static uint64_t present_pages(uint64_t inode, uint64_t off, uint64_t len)
{
    const uint64_t page = rfsys_page_bytes();
    uint64_t n = 0, e, base = 0;
    struct rfsys_maps maps;

    rfsys_maps_init(&maps);
    assert_int_equal(rfsys_read_maps(NULL, "self", &maps), 0);
    for (size_t i = 0; i < maps.n && !base; i++) {
        const struct rfsys_mapping *v = &maps.v[i];
        if (v->inode == inode && strcmp(v->perms, "r--s") == 0 && off >= v->offset_bytes &&
            off + len - v->offset_bytes <= v->end_addr - v->start_addr)
            base = v->start_addr - v->offset_bytes;
    }
    rfsys_maps_free(&maps);
    assert_true(base != 0);
    int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    for (uint64_t p = (base + off) / page; p < (base + off + len) / page; p++) {
        assert_int_equal(pread(fd, &e, sizeof(e), (off_t)(p * sizeof(e))), (ssize_t)sizeof(e));
        n += (e & PAGEMAP_PRESENT) != 0;
    }
    close(fd);
    return n;
}

static void test_repacked_pages_released(void **state)
{
    (void)state;
    struct forge_model_params p = forge_model_default_params();
    struct forge_model *m;
    struct forge_model_info info;
    char err[FORGE_ERR_MAX];
    size_t n, nm, n_anon = 0;

    p.probe_access = false; /* placement: no decode faults pages in after the load */
    p.placement_access = true;
    p.release_during_load = true;
    assert_int_equal(forge_model_load(q4_path, &p, &m, err), 0);
    forge_model_get_info(m, &info);
    const struct rf_tensor_meta *t = forge_model_tensors(m, &n);
    const struct rf_mapping_meta *mm = forge_model_mappings(m, &nm);
    for (size_t i = 0; i < n; i++)
        n_anon += t[i].access == RF_ACCESS_ANONYMOUS;
    if (n_anon == 0) {
        forge_model_free(m);
        skip(); /* no CPU_REPACK on this CPU: nothing is copied */
    }
    assert_true(info.load_release.armed);
    assert_null(info.load_release.stopped);
    assert_int_equal(info.load_release.first_error, 0);
    assert_int_equal(info.load_release.n_tensors - info.load_release.n_kept, n_anon);
    assert_true(info.load_release.released_bytes > 0);
    /* the load populated the whole file; each repacked weight's own pages are gone */
    const uint64_t page = rfsys_page_bytes();
    assert_true(nm == 1 && mm[0].validated);
    for (size_t i = 0; i < n; i++) {
        uint64_t first = (t[i].file_offset_bytes + page - 1) / page * page; /* own pages */
        uint64_t end = (t[i].file_offset_bytes + t[i].logical_bytes) / page * page;
        if (t[i].access != RF_ACCESS_ANONYMOUS || end <= first || first < mm[0].map_offset_bytes ||
            end > mm[0].map_offset_bytes + mm[0].map_length_bytes)
            continue; /* (llama.cpp unmapped the fragments before and after the mapped weights) */
        assert_int_equal(present_pages(mm[0].inode, first, end - first), 0);
    }
    forge_model_free(m);
}

struct app_cb {
    int calls;
    float last;
    void *self;
};

static bool app_progress(float progress, void *ud)
{
    struct app_cb *a = ud;
    assert_ptr_equal(a->self, a);
    a->calls++;
    a->last = progress;
    return true;
}

static void test_chains_the_callers_callback(void **state)
{
    (void)state;
    struct llama_model_params mp = llama_model_default_params();
    struct app_cb a = {.self = &a};
    struct forge_load_release *lr;
    struct rf_load_release r;

    mp.load_mode = LLAMA_LOAD_MODE_MMAP;
    mp.progress_callback = app_progress;
    mp.progress_callback_user_data = &a;
    assert_int_equal(forge_load_release_begin(q4_path, &mp, &lr), 0);
    assert_non_null(lr);
    struct llama_model *model = llama_model_load_from_file(q4_path, mp);
    forge_load_release_end(lr, &r);
    assert_non_null(model);
    llama_model_free(model);
    if (r.stopped && strstr(r.stopped, "copies no weight")) {
        skip(); /* no CPU_REPACK on this CPU: the params were not decorated */
    }
    assert_true(r.armed);
    assert_null(r.stopped);
    assert_true(a.calls > 1);
    assert_int_equal(a.calls, r.n_calls); /* once per tensor and once at the end */
    assert_true(a.last == 1.0f);
}

static void test_not_run_says_why(void **state)
{
    (void)state;
    struct llama_model_params mp = llama_model_default_params();
    struct forge_load_release *lr;
    struct rf_load_release r;
    const struct {
        const char *path;
        enum llama_load_mode mode;
        const char *why;
    } cases[] = {
        {q4_path, LLAMA_LOAD_MODE_MMAP_MLOCK, "mlock"},
        {q4_path, LLAMA_LOAD_MODE_NONE, "no mmap"},
        {q8_path, LLAMA_LOAD_MODE_MMAP, "copies no weight"},
    };

    assert_int_equal(forge_load_release_begin(NULL, &mp, &lr), -EINVAL);
    assert_int_equal(forge_load_release_begin(q4_path, NULL, &lr), -EINVAL);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        mp.load_mode = cases[i].mode;
        mp.progress_callback = NULL;
        assert_int_equal(forge_load_release_begin(cases[i].path, &mp, &lr), 0);
        assert_null(mp.progress_callback); /* not decorated */
        forge_load_release_end(lr, &r);
        assert_false(r.armed);
        assert_non_null(r.stopped);
        assert_non_null(strstr(r.stopped, cases[i].why));
    }
    forge_load_release_end(NULL, &r);
    assert_false(r.armed);
    assert_null(r.stopped);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_not_run_says_why),
        cmocka_unit_test(test_chains_the_callers_callback),
        cmocka_unit_test(test_repacked_pages_released),
    };
    return rf_run_group_tests(tests, setup, teardown);
}
