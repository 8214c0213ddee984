/*
 * forge_generate's prompt batches and its one-slot prompt cache (keep), on a
 * generated tiny model with the greedy chain: a prompt decoded in batches of
 * 3 gives the tokens of one batch and reports its progress before the first
 * batch and after each; a kept context stays alive (the model not
 * quiescent), a repeated prompt decodes only its last token and a prompt
 * sharing a prefix reuses it, each with the tokens of a fresh context.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "forge_test_util.h"
#include "ramforge/forge/forge.h"

#define N_PREDICT 6

static char model_path[256];
static struct forge_model *model;
static int32_t prompt[12];
static size_t n_prompt;

struct progress {
    size_t processed[32];
    size_t n;
};

static void on_progress(size_t processed, size_t total, void *ud)
{
    struct progress *p = ud;
    assert_int_equal(total, n_prompt);
    if (p->n < 32)
        p->processed[p->n++] = processed;
}

/* Greedy tokens of prompt[0..n) into r, with gp's extra fields. */
static void generate(struct forge_generate_params gp, size_t n, struct forge_generate_result *r)
{
    char err[FORGE_ERR_MAX];
    gp.prompt_tokens = prompt;
    gp.n_prompt_tokens = n;
    gp.n_predict = N_PREDICT;
    gp.n_threads = 1;
    assert_int_equal(forge_generate(model, &gp, r, err), 0);
}

static bool quiescent(void)
{
    struct forge_model_lifetime l;
    forge_model_lifetime_state(model, &l);
    return l.quiescent;
}

static void test_batches_same_tokens(void **state)
{
    (void)state;
    struct forge_generate_result whole, batched;
    struct progress p = {0};
    generate((struct forge_generate_params){0}, n_prompt, &whole);
    generate((struct forge_generate_params){.n_batch = 3,
                                            .on_prompt_progress = on_progress,
                                            .token_user_data = &p},
             n_prompt, &batched);
    assert_int_equal(batched.n_tokens, whole.n_tokens);
    assert_memory_equal(batched.tokens, whole.tokens, whole.n_tokens * sizeof(int32_t));
    size_t want = 0, k = 0;
    for (; want < n_prompt; want += 3)
        assert_int_equal(p.processed[k++], want);
    assert_int_equal(p.processed[k++], n_prompt);
    assert_int_equal(p.n, k);
    assert_int_equal(batched.n_cached, 0);
    forge_generate_result_free(&whole);
    forge_generate_result_free(&batched);
}

static void test_keep_reuses_prefix(void **state)
{
    (void)state;
    struct forge_context *kept = NULL;
    struct forge_generate_result fresh, first, again, shared, fresh_shared;
    const struct forge_generate_params keep = {.keep = &kept, .n_ctx = 64, .n_batch = 4};
    generate((struct forge_generate_params){0}, n_prompt, &fresh);
    generate(keep, n_prompt, &first);
    assert_non_null(kept);
    assert_false(quiescent()); /* the kept context is alive */
    assert_int_equal(first.n_cached, 0);
    assert_int_equal(first.n_kv_kept, n_prompt + first.n_tokens - (first.stopped_eog ? 0 : 1));
    generate(keep, n_prompt, &again);
    assert_int_equal(again.n_cached, n_prompt - 1); /* the last token is decoded for its logits */
    assert_memory_equal(again.tokens, fresh.tokens, fresh.n_tokens * sizeof(int32_t));
    prompt[5] = prompt[5] == 1000 ? 1001 : 1000; /* the first 5 tokens shared */
    generate(keep, n_prompt, &shared);
    generate((struct forge_generate_params){0}, n_prompt, &fresh_shared);
    assert_int_equal(shared.n_cached, 5);
    assert_int_equal(shared.n_tokens, fresh_shared.n_tokens);
    assert_memory_equal(shared.tokens, fresh_shared.tokens, shared.n_tokens * sizeof(int32_t));
    forge_context_free(kept);
    assert_true(quiescent());
    forge_generate_result_free(&fresh);
    forge_generate_result_free(&first);
    forge_generate_result_free(&again);
    forge_generate_result_free(&shared);
    forge_generate_result_free(&fresh_shared);
}

static int setup(void **state)
{
    (void)state;
    if (forge_test_tiny(model_path, sizeof(model_path), "batches", 3, &model) < 0)
        return -1;
    int32_t *t = NULL;
    size_t n = 0;
    if (forge_tokenize(model, "The quick brown fox jumps over the lazy dog", true, true, &t, &n) <
            0 ||
        n < 8 || n > 12)
        return -1;
    memcpy(prompt, t, n * sizeof(*t));
    n_prompt = n;
    free(t);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    forge_test_unload(model, model_path);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batches_same_tokens),
        cmocka_unit_test(test_keep_reuses_prefix),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
