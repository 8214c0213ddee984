/*
 * rf_session_wrap on live llama.cpp models (a generated tiny model, the
 * pinned tokenizer vocab; skipped, 77, without it):
 *   - one model instance, one execution gate: a second wrap of a wrapped
 *     llama_model is refused with -EBUSY, and allowed again once the first
 *     session is freed (issue 20, fault 6);
 *   - two instances of one file: a session binds to the mapping holding
 *     its own model's tensor data (a release through it empties that
 *     mapping and leaves the other instance's pages mapped), and a model
 *     loaded without mmap beside an mmap'd one is refused (fault 7).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "../forge/forge_test_util.h"
#include "../test_skip.h"
#include "llama.h"
#include "ramforge/forge/forge.h"
#include "ramforge/session.h"
#include "ramforge/session/session_ext.h"
#include "ramforge/sys/sys.h"

static char path[PATH_MAX];

static int setup(void **state)
{
    (void)state;
    snprintf(path, sizeof(path), "rf-test-session-wrap-%ld.gguf", (long)getpid());
    return forge_test_mkmodel(path, FORGE_PRESET_TINY, "q8_0", 20) < 0 ? -1 : 0;
}

static int teardown(void **state)
{
    (void)state;
    unlink(path);
    return 0;
}

static struct llama_model *load(enum llama_load_mode mode)
{
    struct llama_model_params mp = llama_model_default_params();
    mp.load_mode = mode;
    struct llama_model *lm = llama_model_load_from_file(path, mp);
    assert_non_null(lm);
    return lm;
}

static void test_second_wrap_refused(void **state)
{
    char err[RF_ERR_MAX] = "";
    struct rf_session *a = NULL, *b = NULL;

    (void)state;
    struct llama_model *lm = load(LLAMA_LOAD_MODE_MMAP);
    assert_int_equal(rf_session_wrap(lm, path, rf_session_default_params(), &a, err), 0);
    assert_int_equal(rf_session_wrap(lm, path, rf_session_default_params(), &b, err), -EBUSY);
    assert_null(b);
    assert_non_null(strstr(err, "already has a session"));
    rf_session_free(a);
    assert_int_equal(rf_session_wrap(lm, path, rf_session_default_params(), &b, err), 0);
    rf_session_free(b);
    llama_model_free(lm);
}

/* The model file's r--s VMAs, merged where contiguous (at most 4). */
struct ranges {
    uint64_t start[4], end[4];
    size_t n;
};

static void file_ranges(struct ranges *r)
{
    struct stat st;
    struct rfsys_maps maps;

    assert_int_equal(stat(path, &st), 0);
    rfsys_maps_init(&maps);
    assert_int_equal(rfsys_read_maps(NULL, "self", &maps), 0);
    r->n = 0;
    for (size_t i = 0; i < maps.n; i++) {
        const struct rfsys_mapping *v = &maps.v[i];
        if (v->inode != (uint64_t)st.st_ino || v->dev_major != major(st.st_dev) ||
            v->dev_minor != minor(st.st_dev) || strcmp(v->perms, "r--s") != 0)
            continue;
        if (r->n > 0 && r->end[r->n - 1] == v->start_addr) {
            r->end[r->n - 1] = v->end_addr;
            continue;
        }
        assert_true(r->n < 4);
        r->start[r->n] = v->start_addr;
        r->end[r->n++] = v->end_addr;
    }
    rfsys_maps_free(&maps);
}

/* Smaps Rss of the VMAs inside [start, end). */
static uint64_t rss_in(uint64_t start, uint64_t end)
{
    struct rfsys_maps maps;
    uint64_t rss = 0;

    rfsys_maps_init(&maps);
    assert_int_equal(rfsys_read_smaps(NULL, "self", &maps), 0);
    for (size_t i = 0; i < maps.n; i++)
        if (maps.v[i].start_addr >= start && maps.v[i].end_addr <= end)
            rss += maps.v[i].rss_bytes;
    rfsys_maps_free(&maps);
    return rss;
}

/* Reads one byte of every page of [start, end): all mapped. */
static void touch(uint64_t start, uint64_t end)
{
    const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    volatile const char *p = (const char *)(uintptr_t)start;
    unsigned sum = 0;
    for (uint64_t off = 0; off < end - start; off += page)
        sum += (unsigned char)p[off];
    (void)sum;
    assert_int_equal(rss_in(start, end), end - start);
}

/*
 * Wraps lm, whose mapping is `own` (the other instance's `other`), and
 * releases every page of the session's bound mapping: `own` is emptied,
 * `other` keeps every page.
 */
static void wrap_and_release(struct llama_model *lm, const struct ranges *r, size_t own)
{
    char err[RF_ERR_MAX] = "";
    struct rf_session *s = NULL;
    struct forge_release_result res;
    size_t n_maps;
    const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    size_t other = 1 - own;

    touch(r->start[0], r->end[0]);
    touch(r->start[1], r->end[1]);
    assert_int_equal(rf_session_wrap(lm, path, rf_session_default_params(), &s, err), 0);
    struct forge_model *m = rf_session_forge_model(s);
    const struct rf_mapping_meta *mm = forge_model_mappings(m, &n_maps);
    assert_true(mm[0].validated);
    struct rf_file_range all = {
        .mapping_index = 0,
        .pages = {mm[0].map_offset_bytes / page,
                  (mm[0].map_offset_bytes + mm[0].map_length_bytes) / page},
    };
    assert_int_equal(forge_model_release(m, &all, 1, FORGE_RELEASE_DONTNEED, &res, NULL), 0);
    assert_int_equal(res.first_error, 0);
    assert_true(res.accepted_bytes > 0);
    assert_int_equal(rss_in(r->start[other], r->end[other]), r->end[other] - r->start[other]);
    assert_int_equal(rss_in(r->start[own], r->end[own]), 0);
    rf_session_free(s);
}

static void test_binds_to_own_mapping(void **state)
{
    struct ranges before, after;

    (void)state;
    struct llama_model *first = load(LLAMA_LOAD_MODE_MMAP);
    file_ranges(&before);
    assert_int_equal(before.n, 1);
    struct llama_model *second = load(LLAMA_LOAD_MODE_MMAP);
    file_ranges(&after);
    assert_int_equal(after.n, 2);
    size_t first_at = after.start[0] == before.start[0] ? 0 : 1;
    assert_int_equal(after.start[first_at], before.start[0]);

    wrap_and_release(second, &after, 1 - first_at);
    wrap_and_release(first, &after, first_at);

    /* Loaded without mmap: none of its data is in a mapping of the file. */
    char err[RF_ERR_MAX] = "";
    struct rf_session *s = NULL;
    struct llama_model *copy = load(LLAMA_LOAD_MODE_NONE);
    assert_int_equal(rf_session_wrap(copy, path, rf_session_default_params(), &s, err), -EINVAL);
    assert_null(s);
    assert_non_null(strstr(err, "not the file the model was loaded from"));
    llama_model_free(copy);
    llama_model_free(second);
    llama_model_free(first);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_second_wrap_refused),
        cmocka_unit_test(test_binds_to_own_mapping),
    };
    return rf_run_group_tests(tests, setup, teardown);
}
