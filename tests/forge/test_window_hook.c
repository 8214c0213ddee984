/*
 * The read-ahead window's decoration of an application's context params
 * (forge_window_decorate, ramforge/forge/forge_window.h) without a model:
 * the decorated cb_eval calls the application's own callback with its user
 * data and returns its answers while no window is installed, a context
 * without a callback of its own gets every range computed at once, bad
 * arguments leave the params untouched, and a decode's turn without a
 * window is shared: two contexts hold it at once.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "ramforge/forge/forge_window.h"

#include "llama.h"

struct app {
    int asks, dones;
};

/* The application's callback: asks for every other node. */
static bool app_cb(struct ggml_tensor *t, bool ask, void *ud)
{
    struct app *a = ud;
    (void)t;
    if (!ask) {
        a->dones++;
        return true;
    }
    return ++a->asks % 2 == 0;
}

static void test_chains_the_application_callback(void **state)
{
    (void)state;
    struct forge_window_hook *h = NULL;
    struct forge_window_decoration *d = NULL;
    struct app a = {0};
    struct llama_context_params p = llama_context_default_params();
    p.cb_eval = app_cb;
    p.cb_eval_user_data = &a;
    assert_int_equal(forge_window_hook_create(&h), 0);
    assert_int_equal(forge_window_decorate(h, &p, &d), 0);
    assert_non_null(d);
    assert_true(p.cb_eval != app_cb && p.cb_eval_user_data == d);
    forge_window_hook_decode_begin(d);
    assert_false(p.cb_eval(NULL, true, p.cb_eval_user_data)); /* the application's answers */
    assert_true(p.cb_eval(NULL, true, p.cb_eval_user_data));
    assert_true(p.cb_eval(NULL, false, p.cb_eval_user_data));
    forge_window_hook_decode_end(d);
    assert_int_equal(a.asks, 2);
    assert_int_equal(a.dones, 1);
    forge_window_decoration_free(d);
    forge_window_hook_free(h);
}

static void test_no_application_callback(void **state)
{
    (void)state;
    struct forge_window_hook *h = NULL;
    struct forge_window_decoration *d = NULL, *e = NULL;
    struct llama_context_params p = llama_context_default_params(), q = p;
    assert_int_equal(forge_window_hook_create(&h), 0);
    assert_int_equal(forge_window_decorate(h, &p, &d), 0);
    assert_non_null(p.cb_eval);
    assert_false(p.cb_eval(NULL, true, p.cb_eval_user_data)); /* nothing asked for */
    assert_true(p.cb_eval(NULL, false, p.cb_eval_user_data));
    /* no window: two contexts' decodes hold their turn at once (shared) */
    assert_int_equal(forge_window_decorate(h, &q, &e), 0);
    forge_window_hook_decode_begin(d);
    forge_window_hook_decode_begin(e);
    forge_window_hook_decode_end(e);
    forge_window_hook_decode_end(d);
    forge_window_hook_decode_end(d); /* no turn held: nothing */
    assert_null(forge_window_hook_set(h, NULL));
    forge_window_decoration_free(e);
    forge_window_decoration_free(d);
    forge_window_hook_free(h);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    struct forge_window_hook *h = NULL;
    struct forge_window_decoration *d = (void *)&h;
    struct llama_context_params p = llama_context_default_params();
    assert_int_equal(forge_window_hook_create(NULL), -EINVAL);
    assert_int_equal(forge_window_decorate(NULL, &p, &d), -EINVAL);
    assert_null(d);
    assert_null(p.cb_eval);
    assert_int_equal(forge_window_decorate(NULL, &p, NULL), -EINVAL);
    forge_window_hook_decode_begin(NULL);
    forge_window_hook_decode_end(NULL);
    forge_window_decoration_free(NULL);
    forge_window_hook_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chains_the_application_callback),
        cmocka_unit_test(test_no_application_callback),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
