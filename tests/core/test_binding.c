/* Binding and quiescence: every reason selection is refused, and the one way it is allowed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "ramforge/core/binding.h"

static struct rf_native_lifetime quiet(uint64_t instance)
{
    struct rf_native_lifetime lt = {
        .has_contract = true,
        .contract_version = 1,
        .instance_id = instance,
        .quiescent = true,
        .in_flight_contexts = 0,
        .active_contexts = 0,
        .execution_generation = 7,
    };
    return lt;
}

static void test_allowed_only_when_quiescent(void **state)
{
    (void)state;
    struct rf_binding b;
    const char *why;

    memset(&b, 0, sizeof(b));
    assert_false(rf_binding_may_select(&b, &why));
    assert_string_equal(why, "the manager is not bound to a model instance");

    rf_binding_bind(&b, 42);
    assert_false(rf_binding_may_select(&b, &why));
    assert_string_equal(why, "no quiescence observation was recorded");

    struct rf_native_lifetime lt = quiet(42);
    rf_binding_observe(&b, &lt, "after_session");
    assert_true(rf_binding_may_select(&b, &why));
    assert_string_equal(b.boundary, "after_session");
}

static void test_refusals(void **state)
{
    (void)state;
    struct rf_binding b;
    const char *why;
    struct rf_native_lifetime lt;

    rf_binding_bind(&b, 42);

    lt = quiet(42);
    lt.has_contract = false;
    rf_binding_observe(&b, &lt, "x");
    assert_false(rf_binding_may_select(&b, &why));
    assert_string_equal(why, "the native layer exposes no lifetime contract");

    lt = quiet(42);
    lt.contract_version = 2;
    rf_binding_observe(&b, &lt, "x");
    assert_false(rf_binding_may_select(&b, &why));
    assert_string_equal(why, "the native lifetime contract version does not match");

    lt = quiet(43);
    rf_binding_observe(&b, &lt, "x");
    assert_false(rf_binding_may_select(&b, &why));
    assert_string_equal(why, "the observation is of another model instance");

    lt = quiet(42);
    lt.in_flight_contexts = 1;
    lt.quiescent = false;
    rf_binding_observe(&b, &lt, "x");
    assert_false(rf_binding_may_select(&b, &why));
    assert_string_equal(why, "contexts are in flight");

    /* An idle context still alive: the native gate would allow it, the policy does not. */
    lt = quiet(42);
    lt.active_contexts = 1;
    lt.quiescent = false;
    rf_binding_observe(&b, &lt, "x");
    assert_false(rf_binding_may_select(&b, &why));
    assert_string_equal(why, "contexts are alive (the session was not dropped)");

    lt = quiet(42);
    lt.quiescent = false;
    rf_binding_observe(&b, &lt, "x");
    assert_false(rf_binding_may_select(&b, &why));
    assert_string_equal(why, "the model is not quiescent");

    /* Rebinding forgets the observation. */
    lt = quiet(42);
    rf_binding_observe(&b, &lt, "x");
    assert_true(rf_binding_may_select(&b, NULL));
    rf_binding_bind(&b, 42);
    assert_false(rf_binding_may_select(&b, NULL));
}

/* ramforge exec's idle boundary: contexts alive are allowed, in flight never. */
static void test_alive_allowed(void **state)
{
    (void)state;
    struct rf_binding b;
    const char *why;
    struct rf_native_lifetime lt = quiet(42);

    rf_binding_bind(&b, 42);
    lt.active_contexts = 2;
    lt.quiescent = false;
    rf_binding_observe(&b, &lt, "idle_alive");
    assert_false(rf_binding_may_select(&b, NULL));
    assert_true(rf_binding_may_select_alive(&b, &why));
    assert_string_equal(why, "bound, contract 1, contexts alive and none in flight (the idle "
                             "boundary with contexts alive)");
    lt.in_flight_contexts = 1;
    rf_binding_observe(&b, &lt, "idle_alive");
    assert_false(rf_binding_may_select_alive(&b, &why));
    assert_string_equal(why, "contexts are in flight");
    lt = quiet(43);
    rf_binding_observe(&b, &lt, "idle_alive");
    assert_false(rf_binding_may_select_alive(&b, &why));
    assert_string_equal(why, "the observation is of another model instance");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_allowed_only_when_quiescent),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_alive_allowed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
