/*
 * rf_session_release_ranges (exec's control channel taking a watch
 * --budget request) on a fake native layer: the release is an application
 * of its own in the report (boundary "budget", requested_by, the bytes
 * the fake's "kernel" accepted, the mapping's Rss change between the
 * samples around it), under a policy that releases nothing itself; a busy
 * gate is recorded as refused and returned (-EBUSY: asked again later).
 * Every figure checked comes from the fake's script.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "../core/test_util.h"
#include "fake_native.h"

#define PAGE 4096u
#define N_TENSORS 4u
#define TENSOR_BYTES (8u * PAGE)

struct fake {
    struct fake_native nat; /* first: the shared operations' user data */
    int release_rc;         /* nonzero: the native release's return (-EBUSY) */
    uint64_t releases;      /* release calls that reached the "kernel" */
};

/* Accepts every range; the "kernel" drops all it accepted from the mapping's Rss. */
static int f_release(void *ud, const struct rf_file_range *r, size_t n,
                     enum forge_release_mode mode, struct forge_release_result *out, int *errs)
{
    struct fake *f = ud;
    assert_int_equal(mode, FORGE_RELEASE_PAGEOUT);
    if (f->release_rc)
        return f->release_rc;
    memset(out, 0, sizeof(*out));
    f->releases++;
    for (size_t i = 0; i < n; i++) {
        errs[i] = 0;
        out->requested_bytes += rf_page_range_pages(r[i].pages) * PAGE;
    }
    out->accepted_bytes = out->requested_bytes;
    f->nat.resident_bytes -= out->accepted_bytes;
    return 0;
}

static const struct rf_session_native ops = {FAKE_NATIVE_OPS, .release = f_release};
static struct rf_tensor_meta tensors[N_TENSORS];
static struct rf_mapping_meta mapping;

/* A session of policy off (it never releases itself) over 4 tensors of 8 pages. */
static struct rf_session *start(struct fake *f)
{
    static struct rf_session_model m;
    struct rf_session_params p = rf_session_default_params();
    struct rf_session *s = NULL;
    for (uint32_t i = 0; i < N_TENSORS; i++)
        tensors[i] = fixture_tensor(i, 0, PAGE + (uint64_t)i * TENSOR_BYTES, TENSOR_BYTES,
                                    RF_ACCESS_FILE_BACKED);
    mapping = fixture_mapping(0, PAGE + (uint64_t)N_TENSORS * TENSOR_BYTES);
    m = fake_native_model(tensors, N_TENSORS, &mapping, 2, PAGE);
    p.policy = RF_POLICY_OFF;
    f->nat.page_bytes = PAGE;
    f->nat.resident_bytes = N_TENSORS * TENSOR_BYTES;
    assert_int_equal(rf_session_create_native(&m, &ops, f, p, &s), 0);
    return s;
}

/* The report's application boundaries labelled budget. */
static size_t budget_entries(json_t *doc, json_t **last)
{
    json_t *list = json_object_get(json_object_get(doc, "application"), "boundaries"), *b;
    size_t i, n = 0;
    json_array_foreach(list, i, b)
    {
        if (json_is_string(json_object_get(b, "boundary")) &&
            !strcmp(json_string_value(json_object_get(b, "boundary")), "budget")) {
            n++;
            *last = b;
        }
    }
    return n;
}

static void test_recorded(void **state)
{
    (void)state;
    struct fake f = {0};
    struct rf_session *s = start(&f);
    struct rf_file_range r[2] = {{0, {25, 33}}, {0, {17, 21}}}; /* 12 pages from the end */
    struct rf_report_application app;
    assert_int_equal(rf_session_release_ranges(s, "budget", "after_budget",
                                               "watch --budget asked 49152 bytes (request 3)", r, 2,
                                               FORGE_RELEASE_PAGEOUT, &app),
                     0);
    assert_int_equal(f.releases, 1);
    assert_true(app.attempted);
    assert_int_equal(app.accepted_bytes, 12 * PAGE);
    assert_true(app.mapping_delta.has_value);
    assert_int_equal(app.mapping_delta.value, -(int64_t)(12 * PAGE));

    json_t *doc = fake_report(s, RF_REPORT_SESSION), *b = NULL;
    assert_int_equal(budget_entries(doc, &b), 1);
    assert_true(json_is_true(json_object_get(b, "attempted")));
    assert_string_equal(json_string_value(json_object_get(b, "requested_by")),
                        "watch --budget asked 49152 bytes (request 3)");
    assert_int_equal(json_integer_value(json_object_get(b, "requested_bytes")), 12 * PAGE);
    assert_int_equal(json_integer_value(json_object_get(b, "accepted_bytes")), 12 * PAGE);
    assert_int_equal(json_integer_value(json_object_get(b, "observed_mapping_delta_bytes")),
                     -(json_int_t)(12 * PAGE));
    json_decref(doc);
    rf_session_free(s);
}

static void test_busy(void **state)
{
    (void)state;
    struct fake f = {.release_rc = -EBUSY};
    struct rf_session *s = start(&f);
    struct rf_file_range r = {0, {25, 33}};
    struct rf_report_application app;
    assert_int_equal(rf_session_release_ranges(s, "budget", "after_budget", "watch --budget", &r, 1,
                                               FORGE_RELEASE_PAGEOUT, &app),
                     -EBUSY);
    assert_false(app.attempted);
    assert_int_equal(f.nat.resident_bytes, N_TENSORS * TENSOR_BYTES);
    json_t *doc = fake_report(s, RF_REPORT_SESSION), *b = NULL;
    assert_int_equal(budget_entries(doc, &b), 0); /* no attempted release: the absent form */
    assert_non_null(
        strstr(json_string_value(json_object_get(json_object_get(doc, "application"), "reason")),
               "budget: the execution gate was busy"));
    json_decref(doc);
    assert_int_equal(rf_session_release_ranges(NULL, "budget", "after_budget", "x", &r, 1,
                                               FORGE_RELEASE_PAGEOUT, NULL),
                     -EINVAL);
    rf_session_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_recorded),
        cmocka_unit_test(test_busy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
