/*
 * forge page sampling on a loaded, generated model (small preset, f32, so
 * token_embd spans more than RF_PAGE_WINDOW_PAGES pages). Expected
 * states come from an independent mapping of the same file
 * (rfsys_file_pages): both observe the same page cache. Also: the sampler
 * as the snapshot's callback, bad arguments, the fake-residency rule as an
 * unprivileged child (root only), and a mapping that disappears between
 * listing and sampling (last: it damages the model's mapping). A page pass
 * (one validation, many windows) must answer exactly what the per-call
 * sampler answers, in every one of these cases.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../test_skip.h"
#include "forge_test_util.h"
#include "ramforge/core/inventory.h"
#include "ramforge/core/residency.h"
#include "ramforge/forge/forge.h"
#include "ramforge/forge/forge_pages.h"
#include "ramforge/sys/pages.h"
#include "ramforge/sys/sys.h"

#define NOBODY 65534

static char model_path[PATH_MAX];
static struct forge_model *model;
static uint8_t states[RF_PAGE_WINDOW_PAGES];

static int setup(void **state)
{
    (void)state;
    char cwd[PATH_MAX - 64];
    /* in the build tree: reachable by uid 65534 for the fake-residency child */
    if (!getcwd(cwd, sizeof(cwd)))
        return -1;
    snprintf(model_path, sizeof(model_path), "%s/rf-test-forge-pages-%ld.gguf", cwd,
             (long)getpid());
    if (forge_test_mkmodel(model_path, FORGE_PRESET_SMALL, "f32", 5) < 0 ||
        forge_test_load(model_path, false, &model) < 0)
        return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    forge_model_free(model);
    unlink(model_path);
    return 0;
}

/* The states of file pages [first, first + n) seen through a separate mapping. */
static void independent_states(uint64_t first, uint64_t n, uint8_t *out)
{
    struct rfsys_file_pages fp;
    assert_int_equal(rfsys_file_pages_open(model_path, &fp), 0);
    assert_int_equal(fp.method, RFSYS_PAGES_MINCORE);
    assert_int_equal(rfsys_file_pages_sample(&fp, first, n, out), 0);
    rfsys_file_pages_close(&fp);
}

static void check_all_tensors_match_independent(bool expect_all_resident)
{
    size_t n;
    const struct rf_tensor_meta *t = forge_model_tensors(model, &n);
    static uint8_t want[RF_PAGE_WINDOW_PAGES];
    int truncated = 0;

    assert_true(n > 0);
    for (size_t i = 0; i < n; i++) {
        struct forge_tensor_sample s;
        assert_int_equal(forge_sample_tensor_pages(model, t[i].index, states, &s), 0);
        assert_int_equal(s.mapping_index, 0);
        assert_int_equal(s.error, 0);
        assert_string_equal(s.reason, "");
        uint64_t range = s.end_page - s.first_page;
        assert_int_equal(s.inspected_pages,
                         range < RF_PAGE_WINDOW_PAGES ? range : RF_PAGE_WINDOW_PAGES);
        assert_int_equal(s.truncated, range > RF_PAGE_WINDOW_PAGES);
        truncated += s.truncated;
        assert_int_equal(s.unknown_pages, 0);
        assert_int_equal(s.resident_pages + s.nonresident_pages, s.inspected_pages);
        assert_int_equal(s.complete, !s.truncated);
        if (expect_all_resident)
            assert_int_equal(s.resident_pages, s.inspected_pages);
        independent_states(s.first_page, s.inspected_pages, want);
        assert_memory_equal(states, want, (size_t)s.inspected_pages);
    }
    assert_true(truncated >= 1); /* token_embd of small/f32 is ~8000 pages */
}

/*
 * One page pass over the whole validated fragment, in windows of
 * RF_PAGE_WINDOW_PAGES: each window equals the independent view and the
 * per-call sampler.
 */
static void check_pass_matches_independent(void)
{
    size_t nm;
    const struct rf_mapping_meta *mm = forge_model_mappings(model, &nm);
    const uint64_t page = rfsys_page_bytes();
    const uint64_t first = mm[0].map_offset_bytes / page;
    const uint64_t end = (mm[0].map_offset_bytes + mm[0].map_length_bytes) / page;
    static uint8_t want[RF_PAGE_WINDOW_PAGES], per_call[RF_PAGE_WINDOW_PAGES];
    struct forge_page_pass pass;
    int windows = 0;

    assert_int_equal(forge_page_pass_begin(model, &pass), 0);
    assert_int_equal(pass.error, 0);
    for (uint64_t cur = first; cur < end; windows++) {
        uint64_t n = end - cur < RF_PAGE_WINDOW_PAGES ? end - cur : RF_PAGE_WINDOW_PAGES;
        assert_int_equal(forge_page_pass_sample(&pass, 0, cur, n, states), 0);
        independent_states(cur, n, want);
        assert_memory_equal(states, want, (size_t)n);
        assert_int_equal(forge_model_sample_pages(model, 0, cur, n, per_call), 0);
        assert_memory_equal(states, per_call, (size_t)n);
        cur += n;
    }
    assert_true(windows >= 2);
    forge_page_pass_end(&pass);
    forge_page_pass_end(&pass); /* twice, and NULL: no-ops */
    forge_page_pass_end(NULL);
}

/* llama.cpp's load prefetches the whole mapping: every page is in the page cache. */
static void test_samples_after_load(void **state)
{
    (void)state;
    check_all_tensors_match_independent(true);
    check_pass_matches_independent();
}

/*
 * The whole file's cached pages of forge_model_page_source against the
 * whole file's cachestat and an independent mincore census of the file.
 */
static void check_file_cache(const struct forge_page_source *src)
{
    struct rfsys_file_pages fp;
    struct rfsys_cachestat cs;
    uint64_t census = 0;

    assert_int_equal(rfsys_file_pages_open(model_path, &fp), 0);
    assert_int_equal(fp.method, RFSYS_PAGES_MINCORE);
    for (uint64_t cur = 0; cur < src->file_pages;) {
        uint64_t k = src->file_pages - cur < RF_PAGE_WINDOW_PAGES ? src->file_pages - cur
                                                                  : RF_PAGE_WINDOW_PAGES;
        assert_int_equal(rfsys_file_pages_sample(&fp, cur, k, states), 0);
        for (uint64_t i = 0; i < k; i++)
            census += states[i] == RF_PAGE_RESIDENT;
        cur += k;
    }
    int cs_rc = rfsys_cachestat(fp.fd, 0, 0, &cs);
    rfsys_file_pages_close(&fp);
    if (src->file_cache_error != 0) {
        /* only without cachestat for the header pages llama.cpp unmapped */
        assert_int_not_equal(cs_rc, 0);
        assert_non_null(strstr(src->file_cache_source, "unknown: "));
        return;
    }
    assert_int_equal(src->file_cached_pages, census);
    if (cs_rc == 0)
        assert_int_equal(src->file_cached_pages, cs.nr_cache);
    size_t nm;
    const struct rf_mapping_meta *mm = forge_model_mappings(model, &nm);
    if (mm[0].map_offset_bytes > 0)
        assert_non_null(strstr(src->file_cache_source, "mincore (mapped pages) + cachestat"));
}

static void test_snapshot_with_forge_sampler(void **state)
{
    (void)state;
    size_t n, nm;
    const struct rf_tensor_meta *t = forge_model_tensors(model, &n);
    const struct rf_mapping_meta *mm = forge_model_mappings(model, &nm);
    struct rf_inventory inv;
    struct rf_residency_snapshot snap;
    struct forge_page_source src;
    const uint32_t targets[] = {3, 1};

    assert_int_equal(forge_model_page_source(model, &src), 0);
    assert_true(src.mincore_trustworthy);
    assert_string_equal(src.source, "mincore");
    check_file_cache(&src);
    rf_inventory_init(&inv);
    assert_int_equal(rf_inventory_build(t, n, mm, nm, rfsys_page_bytes(), 1, &inv), 0);
    struct rf_residency_params p = rf_residency_default_params();
    p.sample = forge_page_sampler;
    p.sample_ud = model;
    p.source = src.source;
    p.targeted = targets;
    p.n_targeted = 2;
    rf_residency_snapshot_init(&snap);
    assert_int_equal(rf_residency_snapshot_take(&inv, &p, &snap), 0);
    assert_int_equal(snap.sampler_failures, 0);
    assert_true(snap.coverage.sampling_complete);
    assert_int_equal(snap.coverage.general.coverage_bp, 10000);
    assert_int_equal(snap.coverage.targeted.coverage_bp, 10000);
    assert_int_equal(snap.coverage.selected_fully_observed, 2);
    assert_int_equal(snap.coverage.general.resident_pages, snap.coverage.general.available_pages);

    /* The same snapshot through a page pass: the same coverage, resource for resource. */
    struct rf_residency_snapshot by_pass;
    struct forge_page_pass pass;
    assert_int_equal(forge_page_pass_begin(model, &pass), 0);
    p.sample = forge_page_pass_sampler;
    p.sample_ud = &pass;
    rf_residency_snapshot_init(&by_pass);
    assert_int_equal(rf_residency_snapshot_take(&inv, &p, &by_pass), 0);
    forge_page_pass_end(&pass);
    assert_memory_equal(&by_pass.coverage, &snap.coverage, sizeof(snap.coverage));
    assert_int_equal(by_pass.n, snap.n);
    assert_int_equal(by_pass.sampler_calls, snap.sampler_calls);
    for (size_t i = 0; i < snap.n; i++) {
        assert_int_equal(by_pass.resources[i].resident_pages, snap.resources[i].resident_pages);
        assert_int_equal(by_pass.resources[i].unknown_pages, snap.resources[i].unknown_pages);
    }
    rf_residency_snapshot_free(&by_pass);
    rf_residency_snapshot_free(&snap);
    p.sample = forge_page_sampler;
    p.sample_ud = model;

    /* a small budget: partial, and unknown rather than nonresident */
    p.page_budget_pages = 3;
    assert_int_equal(rf_residency_snapshot_take(&inv, &p, &snap), 0);
    assert_int_equal(snap.coverage.budget_used_pages, 3);
    assert_true(snap.coverage.budget_exhausted);
    assert_int_equal(snap.coverage.general.nonresident_pages, 0);
    assert_int_equal(snap.coverage.targeted.nonresident_pages, 0);
    rf_residency_snapshot_free(&snap);
    rf_inventory_free(&inv);
}

/* After MADV_PAGEOUT the two views still agree, page for page. */
static void test_after_pageout_views_agree(void **state)
{
    (void)state;
    size_t nm;
    const struct rf_mapping_meta *mm = forge_model_mappings(model, &nm);
    const uint64_t page = rfsys_page_bytes();
    struct rf_file_range all = {
        .mapping_index = 0,
        .pages.first_page = mm[0].map_offset_bytes / page,
        .pages.end_page = (mm[0].map_offset_bytes + mm[0].map_length_bytes) / page,
    };
    struct forge_release_result r;
    assert_int_equal(forge_model_release(model, &all, 1, FORGE_RELEASE_PAGEOUT, &r, NULL), 0);
    check_all_tensors_match_independent(false);
    check_pass_matches_independent();
    struct forge_page_source src;
    assert_int_equal(forge_model_page_source(model, &src), 0);
    check_file_cache(&src);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    size_t n, nm;
    struct forge_tensor_sample s;
    forge_model_tensors(model, &n);
    const struct rf_mapping_meta *mm = forge_model_mappings(model, &nm);
    const uint64_t page = rfsys_page_bytes();
    uint64_t map_end = (mm[0].map_offset_bytes + mm[0].map_length_bytes) / page;

    assert_int_equal(forge_sample_tensor_pages(model, (uint32_t)n, states, &s), -ENOENT);
    assert_int_equal(s.mapping_index, -1);
    assert_int_equal(forge_sample_tensor_pages(NULL, 0, states, &s), -EINVAL);
    assert_int_equal(forge_sample_tensor_pages(model, 0, NULL, &s), -EINVAL);
    assert_int_equal(forge_sample_tensor_pages(model, 0, states, NULL), -EINVAL);

    memset(states, RF_PAGE_RESIDENT, 8);
    assert_int_equal(forge_model_sample_pages(model, 0, map_end - 2, 4, states), -EFAULT);
    for (int i = 0; i < 4; i++)
        assert_int_equal(states[i], RF_PAGE_UNKNOWN);
    assert_int_equal(forge_model_sample_pages(model, 0, UINT64_MAX - 1, 4, states), -EFAULT);
    /* the header pages llama.cpp unmapped are outside the validated fragment */
    if (mm[0].map_offset_bytes >= page)
        assert_int_equal(forge_model_sample_pages(model, 0, 0, 1, states), -EFAULT);
    assert_int_equal(forge_model_sample_pages(model, 1, map_end - 1, 1, states), -ENXIO);
    assert_int_equal(forge_model_sample_pages(model, 0, 0, 0, states), 0);
    assert_int_equal(forge_model_sample_pages(NULL, 0, 0, 1, states), -EINVAL);
    assert_non_null(strstr(forge_page_error_reason(-EACCES), "can_do_mincore"));
    assert_string_equal(forge_page_error_reason(0), "");

    /* A page pass refuses the same ranges with the same errors. */
    struct forge_page_pass pass;
    assert_int_equal(forge_page_pass_begin(NULL, &pass), -EINVAL);
    forge_page_pass_end(&pass);
    assert_int_equal(forge_page_pass_begin(model, NULL), -EINVAL);
    assert_int_equal(forge_page_pass_begin(model, &pass), 0);
    memset(states, RF_PAGE_RESIDENT, 8);
    assert_int_equal(forge_page_pass_sample(&pass, 0, map_end - 2, 4, states), -EFAULT);
    for (int i = 0; i < 4; i++)
        assert_int_equal(states[i], RF_PAGE_UNKNOWN);
    assert_int_equal(forge_page_pass_sample(&pass, 0, UINT64_MAX - 1, 4, states), -EFAULT);
    if (mm[0].map_offset_bytes >= page)
        assert_int_equal(forge_page_pass_sample(&pass, 0, 0, 1, states), -EFAULT);
    assert_int_equal(forge_page_pass_sample(&pass, 1, map_end - 1, 1, states), -ENXIO);
    assert_int_equal(forge_page_pass_sample(&pass, 0, 0, 0, states), 0);
    assert_int_equal(forge_page_pass_sample(&pass, 0, map_end - 1, 1, NULL), -EINVAL);
    assert_int_equal(forge_page_pass_sample(NULL, 0, map_end - 1, 1, states), -EINVAL);
    forge_page_pass_end(&pass);
}

/* As uid 65534 the root-owned model file's pages are unknown, never resident. */
static void test_fake_residency_unknown(void **state)
{
    (void)state;
    if (geteuid() != 0) {
        print_message("skip: needs root to sample as an unprivileged user\n");
        skip();
    }
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct forge_tensor_sample s;
        struct forge_page_source src;
        if (setgroups(0, NULL) != 0 || setresgid(NOBODY, NOBODY, NOBODY) != 0 ||
            setresuid(NOBODY, NOBODY, NOBODY) != 0)
            _exit(10);
        if (forge_sample_tensor_pages(model, 0, states, &s) != 0)
            _exit(11);
        if (s.error != -EACCES && s.error != -ESTALE)
            _exit(12);
        if (s.inspected_pages == 0 || s.unknown_pages != s.inspected_pages ||
            s.resident_pages != 0 || s.complete)
            _exit(13);
        if (s.error == -ESTALE)
            _exit(20); /* the file was not reachable by uid 65534 */
        if (!strstr(s.reason, "can_do_mincore"))
            _exit(14);
        if (forge_model_page_source(model, &src) != 0 || src.mincore_trustworthy ||
            strncmp(src.source, "unknown: ", 9) != 0)
            _exit(15);
        /* A page pass learns it once, and every window is unknown. */
        struct forge_page_pass pass;
        if (forge_page_pass_begin(model, &pass) != 0 || pass.error != -EACCES ||
            forge_page_pass_sample(&pass, 0, s.first_page, s.inspected_pages, states) != -EACCES)
            _exit(16);
        for (uint64_t i = 0; i < s.inspected_pages; i++)
            if (states[i] != RF_PAGE_UNKNOWN)
                _exit(17);
        forge_page_pass_end(&pass);
        _exit(0);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    if (WEXITSTATUS(status) == 10 || WEXITSTATUS(status) == 20) {
        print_message("skip: uid 65534 %s\n", WEXITSTATUS(status) == 10
                                                  ? "is not available"
                                                  : "cannot reach the test model");
        skip();
    }
    assert_int_equal(WEXITSTATUS(status), 0);
}

/* A mapping that disappears between listing and sampling: unknown, with the reason. */
static void test_mapping_disappeared(void **state)
{
    (void)state;
    size_t n;
    const struct rf_tensor_meta *t = forge_model_tensors(model, &n);
    struct rfsys_maps maps;
    struct forge_tensor_sample s;
    const uint64_t page = rfsys_page_bytes();
    size_t nm;
    const struct rf_mapping_meta *mm = forge_model_mappings(model, &nm);

    /* pick a tensor of a few pages in the middle; unmap its pages behind forge's back */
    size_t k = n / 2;
    assert_int_equal(forge_sample_tensor_pages(model, t[k].index, states, &s), 0);
    assert_int_equal(s.error, 0);
    rfsys_maps_init(&maps);
    assert_int_equal(rfsys_read_maps(NULL, "self", &maps), 0);
    uint64_t va = 0;
    for (size_t i = 0; i < maps.n; i++) {
        const struct rfsys_mapping *v = &maps.v[i];
        uint64_t off = s.first_page * page;
        if (v->inode == mm[0].inode && strcmp(v->perms, "r--s") == 0 && off >= v->offset_bytes &&
            off < v->offset_bytes + (v->end_addr - v->start_addr))
            va = v->start_addr + (off - v->offset_bytes);
    }
    rfsys_maps_free(&maps);
    assert_true(va != 0);
    /* A pass begun before the unmap still holds the old view of maps. */
    struct forge_page_pass before, after;
    assert_int_equal(forge_page_pass_begin(model, &before), 0);
    assert_int_equal(munmap((void *)(uintptr_t)va, (s.end_page - s.first_page) * page), 0);
    assert_int_equal(forge_sample_tensor_pages(model, t[k].index, states, &s), 0);
    assert_true(s.error == -ENOENT || s.error == -ENOMEM);
    assert_non_null(strstr(s.reason, "disappeared"));
    assert_int_equal(s.unknown_pages, s.inspected_pages);
    assert_int_equal(s.resident_pages, 0);
    assert_false(s.complete);

    /* Either pass: unknown with the reason, never resident (mincore refuses the hole). */
    assert_int_equal(forge_page_pass_begin(model, &after), 0);
    struct forge_page_pass *passes[] = {&before, &after};
    for (int i = 0; i < 2; i++) {
        memset(states, RF_PAGE_RESIDENT, (size_t)s.inspected_pages);
        int rc = forge_page_pass_sample(passes[i], 0, s.first_page, s.inspected_pages, states);
        assert_true(rc == -ENOENT || rc == -ENOMEM);
        assert_non_null(strstr(forge_page_error_reason(rc), "disappeared"));
        for (uint64_t j = 0; j < s.inspected_pages; j++)
            assert_int_equal(states[j], RF_PAGE_UNKNOWN);
        forge_page_pass_end(passes[i]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_samples_after_load),
        cmocka_unit_test(test_snapshot_with_forge_sampler),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_fake_residency_unknown),
        cmocka_unit_test(test_after_pageout_views_agree),
        cmocka_unit_test(test_mapping_disappeared), /* last: damages the mapping */
    };
    return rf_run_group_tests(tests, setup, teardown);
}
