/*
 * forge prefetch on a generated model (small preset, f32: no repacking,
 * every weight read from the file).
 *
 * The cold case: llama.cpp populates the whole mapping at load, so a
 * private copy of the model is loaded, its pages are evicted with
 * MADV_PAGEOUT (forge_model_release), a staging plan over half of its
 * tensor pages is prefetched, and the page-cache residency of the staged
 * ranges is polled (5 s timeout) until it rises; no exact page count is
 * ever asserted. The copy is made with O_DIRECT reads, so preparing it
 * leaves the source's page-cache state as it was (checked page by page
 * with mincore before and after). Also: chunk arithmetic, the same
 * refusals as release, -EBUSY while a context is in flight, and the chunk
 * size measurement behind FORGE_PREFETCH_DEFAULT_CHUNK_BYTES.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../test_skip.h"
#include "forge_test_util.h"
#include "ramforge/core/inventory.h"
#include "ramforge/core/staging.h"
#include "ramforge/forge/forge.h"
#include "ramforge/forge/forge_prefetch.h"
#include "ramforge/sys/pages.h"

#define POLL_TIMEOUT_NS (5ull * 1000000000ull) /* residency polling: 5 s */
#define POLL_STEP_US 20000                     /* 20 ms between polls */
#define COPY_BUF_BYTES (1u << 20)              /* O_DIRECT copy buffer: 1 MiB */

static char src_path[PATH_MAX], copy_path[PATH_MAX];
static bool copy_ready;
static struct forge_model *model; /* the copy, loaded by test_prefetch_after_pageout */

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int setup(void **state)
{
    (void)state;
    char cwd[PATH_MAX - 64];
    if (!getcwd(cwd, sizeof(cwd)))
        return -1;
    snprintf(src_path, sizeof(src_path), "%s/rf-test-prefetch-%ld.gguf", cwd, (long)getpid());
    snprintf(copy_path, sizeof(copy_path), "%s/rf-test-prefetch-%ld-copy.gguf", cwd,
             (long)getpid());
    if (forge_test_mkmodel(src_path, FORGE_PRESET_SMALL, "f32", 6) < 0)
        return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    forge_model_free(model);
    unlink(copy_path);
    unlink(src_path);
    return 0;
}

/* ---- page-cache helpers ------------------------------------------------ */

/* Flushes PATH and drops [off, off + len) (len 0: to the end) from the page cache. */
static void evict(const char *path, off_t off, off_t len)
{
    int fd = open(path, O_RDWR | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(fsync(fd), 0);
    assert_int_equal(posix_fadvise(fd, off, len, POSIX_FADV_DONTNEED), 0);
    close(fd);
}

/* The page-cache state of every page of PATH (malloc'd, *n_pages long; caller frees). */
static uint8_t *file_states(const char *path, uint64_t *n_pages)
{
    struct rfsys_file_pages fp;
    uint8_t *st;

    assert_int_equal(rfsys_file_pages_open(path, &fp), 0);
    assert_int_equal(fp.method, RFSYS_PAGES_MINCORE);
    *n_pages = fp.file_pages;
    st = malloc(fp.file_pages + 1);
    assert_non_null(st);
    assert_int_equal(rfsys_file_pages_sample(&fp, 0, fp.file_pages, st), 0);
    rfsys_file_pages_close(&fp);
    return st;
}

/* Resident pages of PATH inside the n ranges; *total_pages gets their page count. */
static uint64_t resident_in(const char *path, const struct rf_file_range *r, size_t n,
                            uint64_t *total_pages)
{
    uint64_t n_pages, resident = 0;
    uint8_t *st = file_states(path, &n_pages);

    *total_pages = 0;
    for (size_t i = 0; i < n; i++) {
        for (uint64_t p = r[i].pages.first_page; p < r[i].pages.end_page && p < n_pages; p++)
            resident += st[p] == RF_PAGE_RESIDENT;
        *total_pages += r[i].pages.end_page - r[i].pages.first_page;
    }
    free(st);
    return resident;
}

/*
 * Copies src to dst reading src with O_DIRECT (no page of src enters the
 * page cache), then fsyncs dst and drops it from the cache. Returns 0, or
 * -EINVAL where the file system refuses O_DIRECT.
 */
static int copy_cold(const char *src, const char *dst)
{
    void *buf;
    int in = open(src, O_RDONLY | O_DIRECT | O_CLOEXEC);
    if (in < 0 && errno == EINVAL)
        return -EINVAL;
    assert_true(in >= 0);
    int out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    assert_true(out >= 0);
    assert_int_equal(posix_memalign(&buf, 4096, COPY_BUF_BYTES), 0);
    for (;;) {
        ssize_t got = read(in, buf, COPY_BUF_BYTES);
        if (got < 0 && errno == EINVAL) {
            free(buf);
            close(in);
            close(out);
            unlink(dst);
            return -EINVAL;
        }
        assert_true(got >= 0);
        if (got == 0)
            break;
        for (ssize_t done = 0; done < got;) {
            ssize_t w = write(out, (char *)buf + done, (size_t)(got - done));
            assert_true(w > 0);
            done += w;
        }
    }
    free(buf);
    close(in);
    assert_int_equal(fsync(out), 0);
    assert_int_equal(posix_fadvise(out, 0, 0, POSIX_FADV_DONTNEED), 0);
    close(out);
    return 0;
}

/* ---- tests ------------------------------------------------------------- */

/* Preparing a cold copy reads no page of the source into the page cache. */
static void test_copy_leaves_source_untouched(void **state)
{
    (void)state;
    struct stat st;
    uint64_t n_before, n_after, n_copy, was_out = 0, came_in = 0, went_out = 0, copy_res = 0;

    assert_int_equal(stat(src_path, &st), 0);
    /* a source with both states: its second half evicted */
    evict(src_path, st.st_size / 2, 0);
    uint8_t *before = file_states(src_path, &n_before);
    for (uint64_t p = 0; p < n_before; p++)
        was_out += before[p] == RF_PAGE_NONRESIDENT;
    if (was_out == 0) {
        free(before);
        print_message("skip: POSIX_FADV_DONTNEED left the source resident\n");
        skip();
    }

    if (copy_cold(src_path, copy_path) == -EINVAL) {
        free(before);
        print_message("skip: the file system refuses O_DIRECT\n");
        skip();
    }
    copy_ready = true;

    uint8_t *after = file_states(src_path, &n_after);
    assert_int_equal(n_after, n_before);
    for (uint64_t p = 0; p < n_before; p++) {
        came_in += before[p] == RF_PAGE_NONRESIDENT && after[p] == RF_PAGE_RESIDENT;
        went_out += before[p] == RF_PAGE_RESIDENT && after[p] == RF_PAGE_NONRESIDENT;
    }
    print_message("source: %" PRIu64 " pages, %" PRIu64 " nonresident before the copy; "
                  "after it %" PRIu64 " came in, %" PRIu64 " went out\n",
                  n_before, was_out, came_in, went_out);
    assert_int_equal(came_in, 0);

    uint8_t *copy = file_states(copy_path, &n_copy);
    assert_int_equal(n_copy, n_before);
    for (uint64_t p = 0; p < n_copy; p++)
        copy_res += copy[p] == RF_PAGE_RESIDENT;
    print_message("copy: %" PRIu64 " of %" PRIu64 " pages resident\n", copy_res, n_copy);
    assert_true(copy_res * 10 <= n_copy); /* mostly nonresident */
    free(copy);
    free(after);
    free(before);
}

static void ensure_model(void)
{
    char err[FORGE_ERR_MAX];

    if (model)
        return;
    if (!copy_ready) {
        if (copy_cold(src_path, copy_path) == -EINVAL) {
            print_message("skip: the file system refuses O_DIRECT\n");
            skip();
        }
        copy_ready = true;
    }
    struct forge_model_params p = forge_model_default_params();
    p.probe_access = true; /* staging stages only weights the graph reads from the file */
    p.n_threads = 2;
    if (forge_model_load(copy_path, &p, &model, err) < 0)
        fail_msg("load: %s", err);
}

/* The whole mapping of the loaded copy, as one range. */
static struct rf_file_range whole_mapping(void)
{
    size_t nm;
    const struct rf_mapping_meta *mm = forge_model_mappings(model, &nm);
    const uint64_t page = rfsys_page_bytes();
    struct rf_file_range r = {
        .mapping_index = 0,
        .pages.first_page = mm[0].map_offset_bytes / page,
        .pages.end_page = (mm[0].map_offset_bytes + mm[0].map_length_bytes) / page,
    };
    return r;
}

/* Evicted by MADV_PAGEOUT, half the tensor pages staged, residency rises. */
static void test_prefetch_after_pageout(void **state)
{
    (void)state;
    size_t n, nm;
    struct rf_inventory inv;
    struct rf_staging_plan plan;
    struct rf_staging_params sp = rf_staging_default_params();
    struct forge_release_result rel;
    struct forge_prefetch_result pr;
    uint64_t staged_pages, res0, res, all_pages;

    ensure_model();
    const struct rf_tensor_meta *t = forge_model_tensors(model, &n);
    const struct rf_mapping_meta *mm = forge_model_mappings(model, &nm);
    rf_inventory_init(&inv);
    assert_int_equal(rf_inventory_build(t, n, mm, nm, rfsys_page_bytes(), 1, &inv), 0);

    /* evict the copy's pages */
    struct rf_file_range all = whole_mapping();
    assert_int_equal(forge_model_release(model, &all, 1, FORGE_RELEASE_PAGEOUT, &rel, NULL), 0);
    assert_int_equal(rel.n_failed, 0);
    res = resident_in(copy_path, &all, 1, &all_pages);
    print_message("after MADV_PAGEOUT: %" PRIu64 " of %" PRIu64 " mapping pages resident\n", res,
                  all_pages);
    if (res * 2 > all_pages) {
        rf_inventory_free(&inv);
        print_message("skip: MADV_PAGEOUT left most pages resident (kernel without it?)\n");
        skip();
    }

    /* stage half the candidates' pages, file order */
    rf_staging_plan_init(&plan);
    assert_int_equal(rf_staging_plan_build(&inv, &sp, &plan), 0); /* budget 0: the union */
    assert_true(plan.n_candidates > 0);
    sp.budget_bytes = plan.candidate_union_bytes / 2;
    rf_staging_plan_free(&plan);
    assert_int_equal(rf_staging_plan_build(&inv, &sp, &plan), 0);
    assert_true(plan.selected_bytes > 0 && plan.selected_bytes <= sp.budget_bytes);
    struct rf_file_range *r = calloc(plan.n_ranges, sizeof(*r));
    assert_non_null(r);
    memcpy(r, plan.ranges, plan.n_ranges * sizeof(*r));
    res0 = resident_in(copy_path, r, plan.n_ranges, &staged_pages);

    assert_int_equal(forge_model_prefetch(model, r, plan.n_ranges, 0, &pr), 0);
    assert_int_equal(pr.chunk_bytes, FORGE_PREFETCH_DEFAULT_CHUNK_BYTES);
    assert_int_equal(pr.requested_bytes, plan.selected_bytes);
    assert_int_equal(pr.accepted_bytes, pr.requested_bytes);
    assert_int_equal(pr.n_ranges, plan.n_ranges);
    assert_int_equal(pr.n_refused, 0);
    assert_int_equal(pr.n_failed_calls, 0);
    assert_int_equal(pr.first_error, 0);
    assert_true(pr.n_calls >= plan.n_ranges);
    assert_true(pr.elapsed_ns > 0);

    /* poll until the staged ranges are (nearly) resident, or the timeout */
    uint64_t t0 = now_ns(), waited;
    do {
        res = resident_in(copy_path, r, plan.n_ranges, &staged_pages);
        waited = now_ns() - t0;
        if (res * 10 >= staged_pages * 9)
            break;
        usleep(POLL_STEP_US);
    } while (waited < POLL_TIMEOUT_NS);
    print_message("staged %" PRIu64 " pages in %zu ranges, %" PRIu64 " calls (%" PRIu64
                  " us): resident %" PRIu64 " before, %" PRIu64 " after %" PRIu64 " ms\n",
                  staged_pages, plan.n_ranges, pr.n_calls, pr.elapsed_ns / 1000, res0, res,
                  waited / 1000000);
    assert_true(res > res0); /* it rose; how far is the kernel's business */

    free(r);
    rf_staging_plan_free(&plan);
    rf_inventory_free(&inv);
}

/* Calls per range follow the chunk: rounded down to pages, at least one page. */
static void test_prefetch_chunks(void **state)
{
    (void)state;
    const uint64_t page = rfsys_page_bytes();
    struct forge_prefetch_result pr;

    ensure_model();
    struct rf_file_range all = whole_mapping();
    struct rf_file_range r = {0,
                              {all.pages.first_page + 1, all.pages.first_page + 11}}; /* 10 pages */

    assert_int_equal(forge_model_prefetch(model, &r, 1, 3 * page + 1, &pr), 0);
    assert_int_equal(pr.chunk_bytes, 3 * page);
    assert_int_equal(pr.n_calls, 4);
    assert_int_equal(pr.requested_bytes, 10 * page);
    assert_int_equal(pr.accepted_bytes, 10 * page);

    assert_int_equal(forge_model_prefetch(model, &r, 1, 1, &pr), 0);
    assert_int_equal(pr.chunk_bytes, page);
    assert_int_equal(pr.n_calls, 10);

    assert_int_equal(forge_model_prefetch(model, &r, 1, 0, &pr), 0);
    assert_int_equal(pr.chunk_bytes, FORGE_PREFETCH_DEFAULT_CHUNK_BYTES);
    assert_int_equal(pr.n_calls, 1);
}

/* Refused exactly where release refuses (the same validation), and untouched. */
static void test_prefetch_refuses_bad_ranges(void **state)
{
    (void)state;
    const uint64_t page = rfsys_page_bytes();
    struct forge_prefetch_result pr;
    struct forge_release_result rel;

    ensure_model();
    struct rf_file_range all = whole_mapping();
    struct rf_file_range bad[] = {
        {0, {all.pages.end_page - 1, all.pages.end_page + 1}}, /* past the mapping */
        {1, {all.pages.first_page, all.pages.first_page + 1}}, /* no such mapping */
        {0, {UINT64_MAX / 2, UINT64_MAX / 2 + 2}},             /* bytes overflow */
        {0,
         {all.pages.first_page > 0 ? 0 : all.pages.end_page + 5,
          all.pages.first_page > 0 ? 1
                                   : all.pages.end_page + 6}}, /* header page, or past the end */
    };
    const int want[] = {-EFAULT, -EFAULT, -EOVERFLOW, -EFAULT};

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int range_err;

        assert_int_equal(forge_model_prefetch(model, &bad[i], 1, 0, &pr), 0);
        assert_int_equal(pr.n_refused, 1);
        assert_int_equal(pr.n_calls, 0);
        assert_int_equal(pr.accepted_bytes, 0);
        assert_int_equal(pr.first_error, want[i]);
        /* release refuses it the same way (and so touches nothing) */
        assert_int_equal(
            forge_model_release(model, &bad[i], 1, FORGE_RELEASE_DONTNEED, &rel, &range_err), 0);
        assert_int_equal(range_err, want[i]);
        assert_int_equal(pr.requested_bytes, rel.requested_bytes);
    }

    /* one good, one bad, one empty */
    struct rf_file_range mixed[] = {
        {0, {all.pages.first_page, all.pages.first_page + 2}},
        bad[0],
        {0, {all.pages.first_page + 4, all.pages.first_page + 4}},
    };
    assert_int_equal(forge_model_prefetch(model, mixed, 3, 0, &pr), 0);
    assert_int_equal(pr.n_ranges, 2);
    assert_int_equal(pr.n_refused, 1);
    assert_int_equal(pr.accepted_bytes, 2 * page);
    assert_int_equal(pr.requested_bytes, 4 * page);
    assert_int_equal(pr.first_error, -EFAULT);

    assert_int_equal(forge_model_prefetch(NULL, mixed, 1, 0, &pr), -EINVAL);
    assert_int_equal(forge_model_prefetch(model, NULL, 1, 0, &pr), -EINVAL);
    assert_int_equal(forge_model_prefetch(model, mixed, 1, 0, NULL), -EINVAL);
    assert_int_equal(forge_model_prefetch(model, NULL, 0, 0, &pr), 0);
    assert_int_equal(pr.n_calls, 0);
}

/* The gate: -EBUSY at once while a context is in flight, nothing called. */
static void test_prefetch_busy_while_in_flight(void **state)
{
    (void)state;
    char err[FORGE_ERR_MAX];
    struct forge_context_params cp = {.n_ctx = 64, .n_batch = 8, .n_threads = 1};
    struct forge_context *fc;
    struct forge_prefetch_result pr;
    int32_t tok[2] = {1, 450};

    ensure_model();
    struct rf_file_range all = whole_mapping();
    assert_int_equal(forge_context_create(model, &cp, &fc, err), 0);
    assert_int_equal(forge_context_decode(fc, tok, 2), 0); /* holds the lease */
    assert_int_equal(forge_model_prefetch(model, &all, 1, 0, &pr), -EBUSY);
    assert_int_equal(pr.n_calls, 0);
    assert_int_equal(pr.requested_bytes, 0);
    forge_context_synchronize(fc);
    assert_int_equal(forge_model_prefetch(model, &all, 1, 0, &pr), 0);
    assert_true(pr.n_calls > 0);
    forge_context_free(fc);
}

/*
 * The chunk-size measurement behind FORGE_PREFETCH_DEFAULT_CHUNK_BYTES: a
 * cold O_DIRECT copy of a model, mapped read-only (no llama.cpp), then
 * MADV_WILLNEED over the whole file in chunks of each size, the file
 * evicted before each; prints the calls, their time, and the page-cache
 * residency over time. Asserts what the measurement rests on: the default
 * chunk is one of the sizes measured, each size's calls cover the whole
 * file (one call per chunk), the file is cold before each size (at most a
 * tenth of its pages resident after the eviction) and its residency rose
 * after the calls; how far and how fast is the kernel's business (printed,
 * never asserted). By default it runs on the small test model (a quick
 * look); on a big model:
 *
 *   build/ramforge mkmodel --preset tinyllama --type q8_0 --seed 42 -o /tmp/tl.gguf
 *   cd build/tests/forge && RAMFORGE_PREFETCH_MEASURE=/tmp/tl.gguf ./test_forge_prefetch
 */
static void test_measure_chunks(void **state)
{
    (void)state;
    static const uint64_t chunks[] = {128u << 10, 512u << 10, 1u << 20, 2u << 20,
                                      8u << 20,   16u << 20,  32u << 20};
    const char *src = getenv("RAMFORGE_PREFETCH_MEASURE");
    const uint64_t timeout_ns = src ? 5000000000ull : 1000000000ull;
    const uint64_t page = rfsys_page_bytes();
    char path[PATH_MAX];
    struct stat st;
    bool measures_default = false;

    for (size_t c = 0; c < sizeof(chunks) / sizeof(chunks[0]); c++)
        measures_default |= chunks[c] == FORGE_PREFETCH_DEFAULT_CHUNK_BYTES;
    assert_true(measures_default);
    snprintf(path, sizeof(path), "%s.measure", copy_path);
    if (!src)
        src = src_path;
    if (copy_cold(src, path) == -EINVAL) {
        print_message("skip: the file system refuses O_DIRECT\n");
        skip();
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(fstat(fd, &st), 0);
    uint64_t len = (uint64_t)st.st_size, n_pages = (len + page - 1) / page;
    uint8_t *vec = malloc(n_pages);
    assert_non_null(vec);
    print_message("%s: %" PRIu64 " bytes\n", src, len);
    print_message("chunk_KiB calls calls_ms cold%% after_calls%% t99_ms final%%\n");
    for (size_t c = 0; c < sizeof(chunks) / sizeof(chunks[0]); c++) {
        assert_int_equal(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
        uint8_t *map = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
        assert_true(map != MAP_FAILED);
        uint64_t res, cold = 0, calls = 0, t99 = 0, after_calls;

        assert_int_equal(rfsys_mincore(map, len, vec, n_pages), 0);
        for (uint64_t p = 0; p < n_pages; p++)
            cold += vec[p];
        uint64_t t0 = now_ns();
        for (uint64_t off = 0; off < len; off += chunks[c], calls++)
            assert_int_equal(
                madvise(map + off, len - off < chunks[c] ? len - off : chunks[c], MADV_WILLNEED),
                0);
        uint64_t t_calls = now_ns() - t0;
        assert_int_equal(calls, (len + chunks[c] - 1) / chunks[c]);
        assert_true(cold * 10 <= n_pages);
        for (after_calls = UINT64_MAX;; usleep(10000)) {
            assert_int_equal(rfsys_mincore(map, len, vec, n_pages), 0);
            res = 0;
            for (uint64_t p = 0; p < n_pages; p++)
                res += vec[p];
            if (after_calls == UINT64_MAX)
                after_calls = res;
            if (res * 100 >= n_pages * 99) {
                t99 = now_ns() - t0;
                break;
            }
            if (now_ns() - t0 > timeout_ns)
                break;
        }
        print_message("%9" PRIu64 " %5" PRIu64 " %8.1f %5.1f %12.1f %6" PRId64 " %6.1f\n",
                      chunks[c] >> 10, calls, t_calls / 1e6, 100.0 * cold / n_pages,
                      100.0 * after_calls / n_pages, t99 ? (int64_t)(t99 / 1000000) : -1,
                      100.0 * res / n_pages);
        assert_true(res > cold); /* it rose; how far is the kernel's business */
        munmap(map, len);
    }
    free(vec);
    close(fd);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_copy_leaves_source_untouched),
        cmocka_unit_test(test_prefetch_after_pageout),
        cmocka_unit_test(test_prefetch_chunks),
        cmocka_unit_test(test_prefetch_refuses_bad_ranges),
        cmocka_unit_test(test_prefetch_busy_while_in_flight),
        cmocka_unit_test(test_measure_chunks),
    };
    return rf_run_group_tests(tests, setup, teardown);
}
