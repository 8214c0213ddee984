/*
 * Execution gate under stress: several threads decode on their own contexts
 * of one model while another thread releases the whole weight mapping in a
 * loop for a bounded time. Every context's tokens must equal the
 * single-threaded baseline, the releaser must see -EBUSY while contexts are
 * in flight, and nothing may crash. Built with RAMFORGE_TSAN=ON (make tsan)
 * the same test runs under ThreadSanitizer.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "forge_test_util.h"
#include "ramforge/core/timing.h"
#include "ramforge/forge/forge.h"

#define N_DECODERS 2
#define N_PREDICT 12
#define STRESS_NS (8ull * 1000000000ull) /* the releaser gives up after 8 s */
#define PROMPT "The quick brown fox"

static char model_path[256];
static struct forge_model *model;
static int32_t baseline[N_PREDICT];
static size_t baseline_n;

struct decoder {
    pthread_t thread;
    int runs;       /* generations completed (atomic: the releaser reads it) */
    int mismatches; /* generations whose tokens differ from the baseline */
    int errors;
};

static volatile int stop_decoders;

static int generate(int32_t *tokens, size_t *n)
{
    struct forge_generate_params gp = {.prompt = PROMPT, .n_predict = N_PREDICT, .n_threads = 1};
    struct forge_generate_result r;
    char err[FORGE_ERR_MAX];
    int rc = forge_generate(model, &gp, &r, err);
    if (rc < 0)
        return rc;
    memcpy(tokens, r.tokens, r.n_tokens * sizeof(int32_t));
    *n = r.n_tokens;
    forge_generate_result_free(&r);
    return 0;
}

static void *decoder_main(void *arg)
{
    struct decoder *d = arg;
    while (!__atomic_load_n(&stop_decoders, __ATOMIC_ACQUIRE)) {
        int32_t tokens[N_PREDICT];
        size_t n = 0;
        if (generate(tokens, &n) < 0) {
            d->errors++;
            continue;
        }
        if (n != baseline_n || memcmp(tokens, baseline, n * sizeof(int32_t)) != 0)
            d->mismatches++;
        __atomic_add_fetch(&d->runs, 1, __ATOMIC_RELEASE);
    }
    return NULL;
}

static int setup(void **state)
{
    (void)state;
    snprintf(model_path, sizeof(model_path), "/tmp/ramforge-test-gate-%ld.gguf", (long)getpid());
    if (forge_test_mkmodel(model_path, FORGE_PRESET_TINY, "q8_0", 3) < 0 ||
        forge_test_load(model_path, false, &model) < 0)
        return -1;
    return generate(baseline, &baseline_n) < 0 ? -1 : 0;
}

static int teardown(void **state)
{
    (void)state;
    forge_model_free(model);
    unlink(model_path);
    return 0;
}

static void test_gate_stress(void **state)
{
    (void)state;
    struct decoder d[N_DECODERS];
    size_t nm;
    const struct rf_mapping_meta *mm = forge_model_mappings(model, &nm);
    const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    assert_true(nm == 1 && mm[0].validated);
    struct rf_file_range all = {
        .mapping_index = 0,
        .pages.first_page = mm[0].map_offset_bytes / page,
        .pages.end_page = (mm[0].map_offset_bytes + mm[0].map_length_bytes) / page,
    };
    long busy = 0, done = 0;

    assert_true(baseline_n > 0);
    memset(d, 0, sizeof(d));
    for (int i = 0; i < N_DECODERS; i++)
        assert_int_equal(pthread_create(&d[i].thread, NULL, decoder_main, &d[i]), 0);
    uint64_t t0 = rf_now_ns();
    /* Until both outcomes were seen and every decoder finished a few runs, or time is up. */
    while (rf_now_ns() - t0 < STRESS_NS) {
        struct forge_release_result r;
        int rc = forge_model_release(model, &all, 1, FORGE_RELEASE_DONTNEED, &r, NULL);
        if (rc == -EBUSY) {
            busy++;
        } else {
            assert_int_equal(rc, 0);
            assert_int_equal(r.n_failed, 0);
            assert_true(r.accepted_bytes == r.requested_bytes);
            done++;
        }
        int min_runs = __atomic_load_n(&d[0].runs, __ATOMIC_ACQUIRE);
        for (int i = 1; i < N_DECODERS; i++)
            if (__atomic_load_n(&d[i].runs, __ATOMIC_ACQUIRE) < min_runs)
                min_runs = __atomic_load_n(&d[i].runs, __ATOMIC_ACQUIRE);
        if (busy > 0 && done > 0 && min_runs >= 3)
            break;
    }
    __atomic_store_n(&stop_decoders, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < N_DECODERS; i++)
        pthread_join(d[i].thread, NULL);

    printf("releases: %ld accepted, %ld refused with EBUSY; runs:", done, busy);
    for (int i = 0; i < N_DECODERS; i++) {
        printf(" %d", d[i].runs);
        assert_int_equal(d[i].errors, 0);
        assert_int_equal(d[i].mismatches, 0);
        assert_true(d[i].runs > 0);
    }
    printf("\n");
    assert_true(busy > 0);

    /* Quiescent again: a release is accepted, and the next tokens still match. */
    struct forge_model_lifetime lt;
    forge_model_lifetime_state(model, &lt);
    assert_true(lt.quiescent);
    assert_int_equal(lt.in_flight_contexts, 0);
    assert_int_equal(lt.contract_version, 1); /* the spec's contract version 1 */
    struct forge_release_result r;
    assert_int_equal(forge_model_release(model, &all, 1, FORGE_RELEASE_DONTNEED, &r, NULL), 0);
    int32_t tokens[N_PREDICT];
    size_t n = 0;
    assert_int_equal(generate(tokens, &n), 0);
    assert_int_equal(n, baseline_n);
    assert_memory_equal(tokens, baseline, n * sizeof(int32_t));
}

/* A context alive but idle holds no lease: forge releases; one mid-flight refuses. */
static void test_gate_lease_window(void **state)
{
    (void)state;
    struct forge_context_params cp = {.n_ctx = 64, .n_batch = 8, .n_threads = 1};
    struct forge_context *fc;
    char err[FORGE_ERR_MAX];
    struct forge_release_result r;
    struct forge_model_lifetime lt;
    struct forge_context_lifetime cl;
    size_t nm;
    const struct rf_mapping_meta *mm = forge_model_mappings(model, &nm);
    const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    struct rf_file_range one = {0,
                                {mm[0].map_offset_bytes / page, mm[0].map_offset_bytes / page + 1}};
    int32_t tok[2] = {1, 450};

    assert_int_equal(forge_context_create(model, &cp, &fc, err), 0);
    forge_model_lifetime_state(model, &lt);
    assert_false(lt.quiescent);
    assert_int_equal(lt.active_contexts, 1);

    assert_int_equal(forge_context_decode(fc, tok, 2), 0);
    forge_context_lifetime_state(fc, &cl);
    assert_true(cl.in_flight);
    assert_int_equal(forge_model_release(model, &one, 1, FORGE_RELEASE_DONTNEED, &r, NULL), -EBUSY);
    assert_int_equal(r.requested_bytes, 0);

    forge_context_synchronize(fc);
    forge_context_lifetime_state(fc, &cl);
    assert_false(cl.in_flight);
    assert_int_equal(cl.execution_generation, 1);
    assert_int_equal(forge_model_release(model, &one, 1, FORGE_RELEASE_DONTNEED, &r, NULL), 0);
    assert_int_equal(r.accepted_bytes, page);

    forge_context_free(fc);
    forge_model_lifetime_state(model, &lt);
    assert_true(lt.quiescent);
}

/* A range outside the validated mapping is refused, not advised. */
static void test_release_refuses_unvalidated(void **state)
{
    (void)state;
    size_t nm;
    const struct rf_mapping_meta *mm = forge_model_mappings(model, &nm);
    const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t end = (mm[0].map_offset_bytes + mm[0].map_length_bytes) / page;
    struct rf_file_range bad[2] = {
        {0, {end, end + 4}}, /* past the mapping */
        {1, {0, 1}},         /* no such mapping */
    };
    int errs[2];
    struct forge_release_result r;

    assert_int_equal(forge_model_release(model, bad, 2, FORGE_RELEASE_DONTNEED, &r, errs), 0);
    assert_int_equal(r.n_failed, 2);
    assert_int_equal(r.accepted_bytes, 0);
    assert_int_equal(errs[0], -EFAULT);
    assert_int_equal(errs[1], -EFAULT);
    assert_int_equal(r.first_error, -EFAULT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gate_lease_window),
        cmocka_unit_test(test_release_refuses_unvalidated),
        cmocka_unit_test(test_gate_stress),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
