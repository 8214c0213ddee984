/*
 * forge_model_release on a generated model (tiny preset, f32: no
 * repacking, every weight read from the file): argument and overflow
 * checks shared with prefetch, and the protection of pages shared with
 * tensors outside the request.
 *
 * Expected figures come from a naive model of the file built here, page
 * by page: how many tensors cover each page (GGUF aligns tensors to 32
 * bytes, not to pages, so neighbours share boundary pages). Whether a page
 * is mapped in this process is read per page from /proc/self/pagemap
 * (bit 63, "present"), which MADV_DONTNEED clears and nothing else here
 * sets again: the test faults the pages in itself beforehand.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../test_skip.h"
#include "forge_test_util.h"
#include "ramforge/core/inventory.h"
#include "ramforge/core/policy.h"
#include "ramforge/forge/forge.h"
#include "ramforge/forge/forge_pin.h"
#include "ramforge/forge/forge_prefetch.h"
#include "ramforge/sys/pages.h"
#include "ramforge/sys/sys.h"

#define PAGEMAP_PRESENT (1ull << 63) /* /proc/PID/pagemap: page present in RAM */

static char model_path[256];
static struct forge_model *model;
static uint64_t page;
static uint64_t n_file_pages;
static uint8_t *cover; /* n_file_pages: tensors (mapping 0, non-empty) with bytes on each page */

/* Tensor t's outward file pages [*first, *end); false for a tensor owning no page. */
static bool tensor_pages(const struct rf_tensor_meta *t, uint64_t *first, uint64_t *end)
{
    if (t->mapping_index != 0 || t->logical_bytes == 0)
        return false;
    *first = t->file_offset_bytes / page;
    *end = (t->file_offset_bytes + t->logical_bytes + page - 1) / page;
    return true;
}

static int setup(void **state)
{
    (void)state;
    size_t n;

    snprintf(model_path, sizeof(model_path), "/tmp/ramforge-test-release-%ld.gguf", (long)getpid());
    if (forge_test_mkmodel(model_path, FORGE_PRESET_TINY, "f32", 8) < 0 ||
        forge_test_load(model_path, true, &model) < 0)
        return -1;
    page = rfsys_page_bytes();
    const struct rf_tensor_meta *t = forge_model_tensors(model, &n);
    size_t nm;
    const struct rf_mapping_meta *mm = forge_model_mappings(model, &nm);
    n_file_pages = (mm[0].file_size_bytes + page - 1) / page;
    cover = calloc(n_file_pages, 1);
    if (!cover)
        return -1;
    for (size_t i = 0; i < n; i++) {
        uint64_t first, end;

        if (!tensor_pages(&t[i], &first, &end))
            continue;
        for (uint64_t p = first; p < end; p++)
            cover[p]++;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    free(cover);
    forge_model_free(model);
    unlink(model_path);
    return 0;
}

/* A page of the mapping holding bytes of exactly one tensor. */
static uint64_t own_page(void)
{
    size_t nm;
    const struct rf_mapping_meta *mm = forge_model_mappings(model, &nm);

    for (uint64_t p = mm[0].map_offset_bytes / page; p < n_file_pages; p++)
        if (cover[p] == 1)
            return p;
    fail_msg("no page of the model holds a single tensor's bytes");
    return 0;
}

/* ---- arguments and overflow -------------------------------------------- */

/* NULL model, NULL ranges with n > 0, NULL out: -EINVAL, out zeroed; n == 0 is fine. */
static void test_null_arguments(void **state)
{
    (void)state;
    struct rf_file_range r = {0, {own_page(), own_page() + 1}};
    struct forge_release_result rel;
    struct forge_prefetch_result pr;
    int err = 1;

    memset(&rel, 0xff, sizeof(rel));
    assert_int_equal(forge_model_release(NULL, &r, 1, FORGE_RELEASE_DONTNEED, &rel, &err), -EINVAL);
    assert_int_equal(rel.requested_bytes, 0);
    assert_int_equal(rel.n_failed, 0);
    memset(&rel, 0xff, sizeof(rel));
    assert_int_equal(forge_model_release(model, NULL, 1, FORGE_RELEASE_DONTNEED, &rel, NULL),
                     -EINVAL);
    assert_int_equal(rel.accepted_bytes, 0);
    assert_int_equal(rel.first_error, 0);
    assert_int_equal(forge_model_release(model, &r, 1, FORGE_RELEASE_DONTNEED, NULL, NULL),
                     -EINVAL);
    assert_int_equal(forge_model_release(model, NULL, 0, FORGE_RELEASE_DONTNEED, &rel, NULL), 0);
    assert_int_equal(rel.requested_bytes, 0);

    memset(&pr, 0xff, sizeof(pr));
    assert_int_equal(forge_model_prefetch(NULL, &r, 1, 0, &pr), -EINVAL);
    assert_int_equal(pr.n_calls, 0);
    assert_int_equal(pr.requested_bytes, 0);
    assert_int_equal(pr.chunk_bytes, FORGE_PREFETCH_DEFAULT_CHUNK_BYTES);
    memset(&pr, 0xff, sizeof(pr));
    assert_int_equal(forge_model_prefetch(model, NULL, 1, 0, &pr), -EINVAL);
    assert_int_equal(pr.n_ranges, 0);
    assert_int_equal(forge_model_prefetch(model, &r, 1, 0, NULL), -EINVAL);
    assert_int_equal(forge_model_prefetch(model, NULL, 0, 0, &pr), 0);
    assert_int_equal(pr.n_calls, 0);
}

/*
 * Byte counts past 2^64, in one range (first page * page size, pages *
 * page size) or in the running sum of requested bytes (two refused ranges
 * of 2^63 bytes each), are refused with -EOVERFLOW and not counted; a good
 * range after them is still advised. Release and prefetch alike.
 */
static void test_overflow(void **state)
{
    (void)state;
    const uint64_t half_pages = (1ull << 63) / page; /* 2^63 bytes */
    const uint64_t good = own_page();
    const struct rf_file_range r[] = {
        {0, {UINT64_MAX / 2, UINT64_MAX / 2 + 2}}, /* first_page * page overflows */
        {0, {0, UINT64_MAX}},                      /* pages * page overflows */
        {0, {0, half_pages}},                      /* 2^63 bytes: fits, outside the mapping */
        {0, {0, half_pages}},                      /* the sum reaches 2^64 */
        {0, {good, good + 1}},
    };
    const int want[] = {-EOVERFLOW, -EOVERFLOW, -EFAULT, -EOVERFLOW, 0};
    const size_t n = sizeof(r) / sizeof(r[0]);
    int errs[sizeof(r) / sizeof(r[0])];
    struct forge_release_result rel;
    struct forge_prefetch_result pr;

    assert_int_equal(forge_model_release(model, r, n, FORGE_RELEASE_DONTNEED, &rel, errs), 0);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(errs[i], want[i]);
    assert_int_equal(rel.requested_bytes, (1ull << 63) + page);
    assert_int_equal(rel.accepted_bytes, page);
    assert_int_equal(rel.protected_bytes, 0);
    assert_int_equal(rel.n_failed, 4);
    assert_int_equal(rel.first_error, -EOVERFLOW);

    assert_int_equal(forge_model_prefetch(model, r, n, 0, &pr), 0);
    assert_int_equal(pr.requested_bytes, (1ull << 63) + page);
    assert_int_equal(pr.accepted_bytes, page);
    assert_int_equal(pr.n_ranges, n);
    assert_int_equal(pr.n_refused, 4);
    assert_int_equal(pr.n_calls, 1);
    assert_int_equal(pr.first_error, -EOVERFLOW);
}

/* ---- shared-page protection -------------------------------------------- */

/* Start of the model file's r--s VMA holding file_off, as this test finds it, and its offset. */
static uint8_t *vma_of(uint64_t file_off, uint64_t *vma_off)
{
    size_t nm;
    const struct rf_mapping_meta *mm = forge_model_mappings(model, &nm);
    struct rfsys_maps maps;
    uint8_t *base = NULL;

    rfsys_maps_init(&maps);
    assert_int_equal(rfsys_read_maps(NULL, "self", &maps), 0);
    for (size_t i = 0; i < maps.n; i++) {
        const struct rfsys_mapping *v = &maps.v[i];

        if (v->inode == mm[0].inode && strcmp(v->perms, "r--s") == 0 &&
            file_off >= v->offset_bytes &&
            file_off - v->offset_bytes < v->end_addr - v->start_addr) {
            base = (uint8_t *)(uintptr_t)v->start_addr;
            *vma_off = v->offset_bytes;
            break;
        }
    }
    rfsys_maps_free(&maps);
    assert_non_null(base);
    return base;
}

/* Whether this process maps file page p (present bit of /proc/self/pagemap). */
static bool page_present(uint64_t p)
{
    uint64_t vma_off, entry;
    uint8_t *base = vma_of(p * page, &vma_off);
    uint64_t va = (uint64_t)(uintptr_t)base + (p * page - vma_off);
    int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);

    assert_true(fd >= 0);
    assert_int_equal(pread(fd, &entry, sizeof(entry), (off_t)(va / page * sizeof(entry))),
                     (ssize_t)sizeof(entry));
    close(fd);
    return (entry & PAGEMAP_PRESENT) != 0;
}

/* Reads one byte of each file page [first, end) through the model's mapping. */
static void fault_in(uint64_t first, uint64_t end)
{
    for (uint64_t p = first; p < end; p++) {
        uint64_t vma_off;
        volatile uint8_t *base = vma_of(p * page, &vma_off);

        (void)base[p * page - vma_off];
    }
}

/*
 * True when some tensor with bytes on page p owns a page (cover 1) outside
 * [first, end): page p is then shared with a tensor outside that request.
 */
static bool shared_with_outsider(uint64_t p, uint64_t first, uint64_t end)
{
    size_t n;
    const struct rf_tensor_meta *t = forge_model_tensors(model, &n);

    for (size_t i = 0; cover[p] >= 2 && i < n; i++) {
        uint64_t tf, te;

        if (!tensor_pages(&t[i], &tf, &te) || p < tf || p >= te)
            continue;
        for (uint64_t q = tf; q < te; q++)
            if (cover[q] == 1 && (q < first || q >= end))
                return true;
    }
    return false;
}

/*
 * The outward pages of one tensor whose boundary page is shared with a
 * neighbour that owns other pages: released with MADV_DONTNEED, the shared
 * page stays mapped and counts in protected_bytes; the tensor's own pages
 * go.
 */
static void test_release_protects_shared_pages(void **state)
{
    (void)state;
    size_t n;
    const struct rf_tensor_meta *t = forge_model_tensors(model, &n);
    uint64_t first = 0, end = 0, want_protected = 0, own = 0;
    struct forge_release_result rel;
    int err = 1;

    /* the first tensor with an own page and a boundary page shared with an outsider */
    for (size_t i = 0; i < n && want_protected == 0; i++) {
        if (!tensor_pages(&t[i], &first, &end))
            continue;
        own = 0;
        for (uint64_t p = first; p < end; p++)
            own += cover[p] == 1;
        if (own == 0)
            continue;
        for (uint64_t p = first; p < end; p++)
            want_protected += shared_with_outsider(p, first, end);
    }
    assert_true(want_protected > 0);
    print_message("tensor pages [%" PRIu64 ", %" PRIu64 "): %" PRIu64 " own, %" PRIu64
                  " shared with a tensor outside the request\n",
                  first, end, own, want_protected);

    fault_in(first, end);
    for (uint64_t p = first; p < end; p++)
        assert_true(page_present(p));

    struct rf_file_range r = {0, {first, end}};
    assert_int_equal(forge_model_release(model, &r, 1, FORGE_RELEASE_DONTNEED, &rel, &err), 0);
    assert_int_equal(err, 0);
    assert_int_equal(rel.n_failed, 0);
    assert_int_equal(rel.requested_bytes, (end - first) * page);
    assert_int_equal(rel.protected_bytes, want_protected * page);
    assert_int_equal(rel.accepted_bytes, (end - first - want_protected) * page);
    for (uint64_t p = first; p < end; p++) {
        if (shared_with_outsider(p, first, end))
            assert_true(page_present(p)); /* protected: still mapped */
        else if (cover[p] == 1)
            assert_false(page_present(p)); /* the tensor's own page: advised away */
    }
}

/*
 * A release plan of the policy (memory-bound, at targets from everything
 * to a quarter, and everything but one tensor in the middle of the file)
 * is never trimmed: it requests every own page of what it selected and no
 * page of the rest, so nothing is protected and every byte is accepted,
 * though the plans release pages shared between selected tensors and keep
 * back pages shared with unselected ones (the excluded tensor's
 * neighbours end runs of selected tensors on both sides).
 */
static void test_plan_never_trimmed(void **state)
{
    (void)state;
    size_t n, nm;
    const struct rf_tensor_meta *t = forge_model_tensors(model, &n);
    const struct rf_mapping_meta *mm = forge_model_mappings(model, &nm);
    struct rf_inventory inv;
    uint64_t kept_back = 0, shared_released = 0;
    uint8_t *exclude;

    rf_inventory_init(&inv);
    assert_int_equal(rf_inventory_build(t, n, mm, nm, page, 1, &inv), 0);
    exclude = calloc(inv.n, 1);
    assert_non_null(exclude);
    exclude[inv.n / 2] = 1;
    for (int quarter = -1; quarter <= 3; quarter++) {
        struct rf_plan_params pp = rf_plan_default_params();
        struct rf_plan plan;
        struct forge_release_result rel;
        uint64_t shared = 0;

        pp.profile = RF_POLICY_MEMORY_BOUND;
        pp.binding_ok = true;
        pp.has_mapping_resident = true;
        pp.mapping_resident_bytes = mm[0].map_length_bytes;
        pp.has_target = true;
        pp.target_bytes = quarter <= 0 ? 1 : mm[0].map_length_bytes / 4 * (uint64_t)quarter;
        pp.exclude = quarter < 0 ? exclude : NULL;
        rf_plan_init(&plan);
        assert_int_equal(rf_plan_build(&inv, &pp, &plan), 0);
        assert_true(plan.n_release > 0);
        for (size_t i = 0; i < plan.n_release; i++)
            for (uint64_t p = plan.release[i].pages.first_page; p < plan.release[i].pages.end_page;
                 p++)
                shared += cover[p] >= 2;
        assert_int_equal(forge_model_release(model, plan.release, plan.n_release,
                                             FORGE_RELEASE_DONTNEED, &rel, NULL),
                         0);
        print_message("target %d/4: %zu tensors, %zu ranges, %" PRIu64 " bytes (%" PRIu64
                      " shared pages) planned, %" PRIu64 " kept back; %" PRIu64
                      " accepted, %" PRIu64 " protected\n",
                      quarter, plan.n_selected, plan.n_release, plan.release_bytes, shared,
                      plan.shared_bytes_protected, rel.accepted_bytes, rel.protected_bytes);
        assert_int_equal(rel.protected_bytes, 0);
        assert_int_equal(rel.n_failed, 0);
        assert_int_equal(rel.accepted_bytes, plan.release_bytes);
        if (quarter < 0)
            assert_true(plan.shared_bytes_protected > 0);
        kept_back += plan.shared_bytes_protected;
        shared_released += shared;
        rf_plan_free(&plan);
    }
    assert_true(kept_back > 0);       /* the plans met pages of unselected tensors */
    assert_true(shared_released > 0); /* and released pages shared by selected ones */
    free(exclude);
    rf_inventory_free(&inv);
}

/* ---- a mapping split into several VMAs ------------------------------------ */

/* VMAs of /proc/self/maps that map the model file. */
static size_t file_vmas(void)
{
    size_t nm, n = 0;
    const struct rf_mapping_meta *mm = forge_model_mappings(model, &nm);
    struct rfsys_maps maps;
    rfsys_maps_init(&maps);
    assert_int_equal(rfsys_read_maps(NULL, "self", &maps), 0);
    for (size_t i = 0; i < maps.n; i++)
        n += maps.v[i].inode == mm[0].inode && maps.v[i].dev_major == mm[0].dev_major &&
             maps.v[i].dev_minor == mm[0].dev_minor;
    rfsys_maps_free(&maps);
    return n;
}

/*
 * A hint on a few middle pages splits the model's VMA in three (the
 * streaming policy's pins and hints do, and MADV_NOHUGEPAGE outlives them);
 * a range across the pieces is still the model file at its offsets, so it
 * is accepted, not refused as outside the mapping.
 */
static void test_range_across_split_vmas(void **state)
{
    (void)state;
    size_t nm;
    const struct rf_mapping_meta *mm = forge_model_mappings(model, &nm);
    uint64_t first = (mm[0].map_offset_bytes + page - 1) / page;
    uint64_t end = (mm[0].map_offset_bytes + mm[0].map_length_bytes) / page;
    assert_true(end - first >= 8);
    struct rf_file_range mid = {.mapping_index = 0,
                                .pages = {.first_page = first + 2, .end_page = first + 4}};
    struct rf_file_range all = {.mapping_index = 0,
                                .pages = {.first_page = first, .end_page = end}};
    struct forge_pin_result r;
    size_t before = file_vmas();

    assert_int_equal(forge_model_advise_stream(model, &mid, 1, FORGE_STREAM_NOHUGEPAGE, &r), 0);
    assert_int_equal(r.first_error, 0);
    if (file_vmas() < before + 2)
        skip(); /* the kernel did not split the VMA (no THP flags): nothing to cross */
    assert_int_equal(forge_model_advise_stream(model, &all, 1, FORGE_STREAM_SEQUENTIAL, &r), 0);
    assert_int_equal(r.n_refused, 0);
    assert_int_equal(r.first_error, 0);
    assert_int_equal(r.accepted_bytes, (end - first) * page);
    assert_int_equal(forge_model_advise_stream(model, &all, 1, FORGE_STREAM_NORMAL, &r), 0);
    assert_int_equal(r.accepted_bytes, (end - first) * page);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_null_arguments),
        cmocka_unit_test(test_overflow),
        cmocka_unit_test(test_release_protects_shared_pages),
        cmocka_unit_test(test_plan_never_trimmed),
        cmocka_unit_test(test_range_across_split_vmas), /* last: it leaves the VMA split */
    };
    return rf_run_group_tests(tests, setup, teardown);
}
