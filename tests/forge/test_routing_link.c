/*
 * The MoE routing recorder linked into contexts an application creates
 * itself (forge_routing_link through forge_window_decorate_routed, as
 * exec decorates llama-server's): on a generated qwen3moe model, two
 * contexts decorated with one recorder (one with a window hook, one
 * without) each decode a prompt on a thread of its own at once; the
 * recorder counts every token of both in every layer but the last, and
 * the application's own callback sees as many nodes, with its answers
 * honoured, as in a context without the decoration.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "forge_test_util.h"
#include "ramforge/forge/forge_routing.h"
#include "ramforge/forge/forge_window.h"

#include "llama.h"

#define N_PROMPT 8

struct job {
    struct llama_context *ctx;
    int asks;
    int rc;
};

/* The application's callback: counts the nodes it is asked about, asks for none. */
static bool count_asks(struct ggml_tensor *t, bool ask, void *ud)
{
    (void)t;
    if (ask)
        ((struct job *)ud)->asks++;
    return !ask;
}

static struct llama_context_params params(struct job *j)
{
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 64;
    cp.n_batch = cp.n_ubatch = 16;
    cp.n_threads = cp.n_threads_batch = 1;
    cp.cb_eval = count_asks;
    cp.cb_eval_user_data = j;
    return cp;
}

static void *decode(void *arg)
{
    struct job *j = arg;
    llama_token prompt[N_PROMPT];
    for (int i = 0; i < N_PROMPT; i++)
        prompt[i] = 100 + 37 * i;
    j->rc = llama_decode(j->ctx, llama_batch_get_one(prompt, N_PROMPT));
    return NULL;
}

static void test_two_contexts(void **state)
{
    (void)state;
    char path[96];
    snprintf(path, sizeof(path), "/tmp/ramforge-test-routing-link-%ld.gguf", (long)getpid());
    assert_int_equal(forge_test_mkmodel(path, FORGE_PRESET_QWEN3MOE_SMALL, "q8_0", 7), 0);
    struct llama_model_params mp = llama_model_default_params();
    struct llama_model *lm = llama_model_load_from_file(path, mp); /* the application's */
    assert_non_null(lm);
    struct forge_model_params fp = forge_model_default_params();
    struct forge_model *m = NULL;
    char err[FORGE_ERR_MAX];
    assert_int_equal(forge_model_wrap(lm, path, &fp, &m, err), 0);
    struct forge_model_info info;
    forge_model_get_info(m, &info);

    /* without the decoration: the nodes the application's callback is asked about */
    struct job bare = {0};
    bare.ctx = llama_init_from_model(lm, params(&bare));
    assert_non_null(bare.ctx);
    decode(&bare);
    assert_int_equal(bare.rc, 0);
    llama_free(bare.ctx);

    struct forge_routing *r = NULL;
    struct forge_window_hook *h = NULL;
    struct forge_window_decoration *d[2] = {NULL, NULL};
    struct job jobs[2] = {{0}, {0}};
    assert_int_equal(forge_routing_create(m, &r), 0);
    assert_int_equal(forge_window_hook_create(&h), 0);
    for (int i = 0; i < 2; i++) {
        struct llama_context_params cp = params(&jobs[i]);
        assert_int_equal(forge_window_decorate_routed(i ? NULL : h, r, &cp, &d[i]), 0);
        assert_true(cp.cb_eval != count_asks);
        jobs[i].ctx = llama_init_from_model(lm, cp);
        assert_non_null(jobs[i].ctx);
    }
    pthread_t t[2];
    for (int i = 0; i < 2; i++) {
        forge_window_hook_decode_begin(d[i]); /* no window: shared, as exec's submissions */
        assert_int_equal(pthread_create(&t[i], NULL, decode, &jobs[i]), 0);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
        forge_window_hook_decode_end(d[i]);
        assert_int_equal(jobs[i].rc, 0);
        assert_int_equal(jobs[i].asks, bare.asks); /* every node, the answers honoured */
    }
    struct rf_routing seen;
    assert_int_equal(forge_routing_copy(r, &seen), 0);
    assert_int_equal(seen.n_layer, (uint32_t)info.n_layer);
    for (uint32_t l = 0; l + 1 < seen.n_layer; l++) /* the last: the logits' tokens only */
        assert_int_equal(seen.tokens[l], 2 * N_PROMPT);
    assert_int_equal(seen.tokens[seen.n_layer - 1], 2);
    assert_int_equal(seen.bad_ids, 0);
    rf_routing_free(&seen);

    for (int i = 0; i < 2; i++) {
        llama_free(jobs[i].ctx);
        forge_window_decoration_free(d[i]);
    }
    assert_int_equal(
        forge_window_decorate_routed(NULL, NULL, &(struct llama_context_params){0}, &d[0]),
        -EINVAL);
    assert_null(d[0]);
    forge_window_hook_free(h);
    forge_routing_free(r);
    forge_test_unload(m, path);
    llama_model_free(lm);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_contexts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
