/*
 * forge model loading: the two ways of classifying weights must agree.
 * The graph probe (a one-token decode's sources) is the reference;
 * placement (the data pointers of the tensors llama.cpp's model holds, no
 * decode) must give every weight the probe saw the same access, and may
 * call unreferenced only what the probe never saw either. Checked on
 * generated tiny models: Q4_0 with repacking (anonymous copies on AVX2),
 * Q4_0 without, and Q8_0. Also: neither method leaves every access
 * unknown.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <errno.h>
#include <fcntl.h>

#include "../test_skip.h"
#include "forge_test_util.h"
#include "llama.h"
#include "ramforge/core/inventory.h"
#include "ramforge/forge/forge.h"

static char q4_path[PATH_MAX], q8_path[PATH_MAX];

static int setup(void **state)
{
    (void)state;
    snprintf(q4_path, sizeof(q4_path), "rf-test-forge-model-q4-%ld.gguf", (long)getpid());
    snprintf(q8_path, sizeof(q8_path), "rf-test-forge-model-q8-%ld.gguf", (long)getpid());
    if (forge_test_mkmodel(q4_path, FORGE_PRESET_TINY, "q4_0", 11) < 0 ||
        forge_test_mkmodel(q8_path, FORGE_PRESET_TINY, "q8_0", 12) < 0)
        return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    unlink(q4_path);
    unlink(q8_path);
    return 0;
}

/* Loads path and copies out the access of every tensor (caller frees). */
static enum rf_weight_access *load_access(const char *path, bool probe, bool placement, bool repack,
                                          size_t *n_out, struct forge_model_info *info)
{
    char err[FORGE_ERR_MAX];
    struct forge_model_params p = forge_model_default_params();
    struct forge_model *m = NULL;

    p.probe_access = probe;
    p.placement_access = placement;
    p.use_extra_bufts = repack;
    p.n_threads = 1;
    assert_int_equal(forge_model_load(path, &p, &m, err), 0);
    const struct rf_tensor_meta *t = forge_model_tensors(m, n_out);
    assert_true(*n_out > 0);
    enum rf_weight_access *a = calloc(*n_out, sizeof(*a));
    assert_non_null(a);
    for (size_t i = 0; i < *n_out; i++)
        a[i] = t[i].access;
    forge_model_get_info(m, info);
    forge_model_free(m);
    return a;
}

/* Returns the number of anonymous weights placement found. */
static size_t check_agree(const char *path, bool repack)
{
    struct forge_model_info pi, li;
    size_t n, n2, anon = 0, held_unread = 0;
    enum rf_weight_access *probe = load_access(path, true, false, repack, &n, &pi);
    enum rf_weight_access *place = load_access(path, false, true, repack, &n2, &li);

    assert_true(pi.access_probed);
    assert_int_equal(pi.access_basis, RF_ACCESS_BASIS_GRAPH_PROBE);
    if (li.access_basis == RF_ACCESS_BASIS_GRAPH_PROBE) {
        free(probe);
        free(place);
        print_message("skip: this llama.cpp build has no internal llama-model.h (placement "
                      "falls back to the probe)\n");
        skip();
    }
    assert_int_equal(li.access_basis, RF_ACCESS_BASIS_PLACEMENT);
    assert_false(li.access_probed);
    assert_int_equal(n, n2);
    for (size_t i = 0; i < n; i++) {
        assert_int_not_equal(place[i], RF_ACCESS_UNKNOWN);
        if (probe[i] == RF_ACCESS_FILE_BACKED || probe[i] == RF_ACCESS_ANONYMOUS)
            assert_int_equal(place[i], probe[i]);
        if (place[i] == RF_ACCESS_UNREFERENCED)
            assert_int_equal(probe[i], RF_ACCESS_UNREFERENCED);
        held_unread += probe[i] == RF_ACCESS_UNREFERENCED && place[i] != RF_ACCESS_UNREFERENCED;
        anon += place[i] == RF_ACCESS_ANONYMOUS;
    }
    print_message("%s%s: %zu tensors, %zu anonymous, %zu held but not read by the probe's "
                  "graph; probe %.3f ms, placement %.3f ms\n",
                  path, repack ? "" : " (no repack)", n, anon, held_unread, pi.probe_ns / 1e6,
                  li.probe_ns / 1e6);
    free(probe);
    free(place);
    return anon;
}

static void test_q4_repack(void **state)
{
    (void)state;
    if (check_agree(q4_path, true) == 0)
        print_message("note: no weight was repacked (a CPU without AVX2?): agreement only\n");
}

static void test_q4_no_repack(void **state)
{
    (void)state;
    assert_int_equal(check_agree(q4_path, false), 0);
}

static void test_q8(void **state)
{
    (void)state;
    check_agree(q8_path, true);
}

static void test_neither(void **state)
{
    struct forge_model_info info;
    size_t n;

    (void)state;
    enum rf_weight_access *a = load_access(q8_path, false, false, true, &n, &info);
    assert_int_equal(info.access_basis, RF_ACCESS_BASIS_NONE);
    assert_false(info.access_probed);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(a[i], RF_ACCESS_UNKNOWN);
    free(a);
}

/* Copies src to dst byte for byte (a different inode, the same content). */
static void copy_file(const char *src, const char *dst)
{
    char buf[1 << 16];
    ssize_t n;
    int in = open(src, O_RDONLY), out = open(dst, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(in >= 0 && out >= 0);
    while ((n = read(in, buf, sizeof(buf))) > 0)
        assert_int_equal(write(out, buf, (size_t)n), n);
    assert_int_equal(n, 0);
    close(in);
    assert_int_equal(close(out), 0);
}

/*
 * forge_model_wrap binds only to the file the application's model mapped:
 * another model's path, or a byte-identical copy, is refused; the right
 * path is accepted and the borrowed model stays the application's.
 */
static void test_wrap_checks_the_path(void **state)
{
    char err[FORGE_ERR_MAX], copy[PATH_MAX + 8];
    struct forge_model_params p = forge_model_default_params();
    struct forge_model *m = NULL;

    (void)state;
    p.probe_access = false;
    struct llama_model *lm = llama_model_load_from_file(q8_path, llama_model_default_params());
    assert_non_null(lm);
    assert_int_equal(forge_model_wrap(lm, q4_path, &p, &m, err), -EINVAL);
    assert_null(m);
    assert_non_null(strstr(err, "not the file the model was loaded from"));
    snprintf(copy, sizeof(copy), "%s.copy", q8_path);
    copy_file(q8_path, copy);
    assert_int_equal(forge_model_wrap(lm, copy, &p, &m, err), -EINVAL);
    unlink(copy);
    assert_int_equal(forge_model_wrap(lm, q8_path, &p, &m, err), 0);
    forge_model_free(m);
    assert_true(llama_model_n_params(lm) > 0); /* borrowed: not freed by forge */
    llama_model_free(lm);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_q4_repack),
        cmocka_unit_test(test_q4_no_repack),
        cmocka_unit_test(test_q8),
        cmocka_unit_test(test_neither),
        cmocka_unit_test(test_wrap_checks_the_path),
    };
    return rf_run_group_tests(tests, setup, teardown);
}
