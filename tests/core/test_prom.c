/*
 * The Prometheus text writer (ramforge/core/prom.h): label values and HELP text
 * escaped as exposition format 0.0.4 asks, HELP and TYPE once per family,
 * a constant label set first in every sample, no braces without labels,
 * one number format (integers exactly, the shortest double that reads
 * back, NaN and the infinities spelled as the format does), and the text
 * accepted by `promtool check metrics` where promtool is installed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "ramforge/core/prom.h"

static char *taken(struct rf_prom *p)
{
    char *text = NULL;
    assert_int_equal(rf_prom_take(p, &text), 0);
    assert_non_null(text);
    return text;
}

static void test_escapes(void **state)
{
    (void)state;
    struct rf_prom p;
    rf_prom_init(&p);
    rf_prom_family(&p, "a_bytes", "gauge", "back\\slash \"quoted\"\nsecond line");
    rf_prom_sample(&p, "a_bytes");
    rf_prom_label(&p, "model", "a\"b\\c\nd");
    rf_prom_label(&p, "x", NULL);
    rf_prom_u64(&p, 1);
    char *t = taken(&p);
    assert_string_equal(t, "# HELP a_bytes back\\\\slash \"quoted\"\\nsecond line\n"
                           "# TYPE a_bytes gauge\n"
                           "a_bytes{model=\"a\\\"b\\\\c\\nd\",x=\"\"} 1\n");
    free(t);
}

static void test_family_once(void **state)
{
    (void)state;
    struct rf_prom p;
    rf_prom_init(&p);
    for (int i = 0; i < 3; i++) {
        rf_prom_family(&p, "a_total", "counter", "A.");
        rf_prom_sample(&p, "a_total");
        rf_prom_i64(&p, -i);
    }
    rf_prom_family(&p, "b", "gauge", "B.");
    rf_prom_family(&p, "a_total", "counter", "A.");
    char *t = taken(&p);
    assert_string_equal(t, "# HELP a_total A.\n# TYPE a_total counter\n"
                           "a_total 0\na_total -1\na_total -2\n"
                           "# HELP b B.\n# TYPE b gauge\n");
    free(t);
}

static void test_const_labels(void **state)
{
    (void)state;
    struct rf_prom p;
    rf_prom_init(&p);
    assert_int_equal(rf_prom_const_label(&p, "pid", "42"), 0);
    assert_int_equal(rf_prom_const_label(&p, "host", "a\"b"), 0);
    rf_prom_family(&p, "a", "gauge", "A.");
    rf_prom_sample(&p, "a");
    rf_prom_u64(&p, 7);
    rf_prom_sample(&p, "a");
    rf_prom_label(&p, "model", "m.gguf");
    rf_prom_u64(&p, 8);
    char *t = taken(&p);
    assert_string_equal(t, "# HELP a A.\n# TYPE a gauge\n"
                           "a{pid=\"42\",host=\"a\\\"b\"} 7\n"
                           "a{pid=\"42\",host=\"a\\\"b\",model=\"m.gguf\"} 8\n");
    free(t);
}

static void test_numbers(void **state)
{
    (void)state;
    struct rf_prom p;
    rf_prom_init(&p);
    const double v[] = {0.0,   -0.0,      1234567891.0, 0.1,        1.0 / 3.0,  2.5e-7,
                        1e300, 0.0 / 0.0, 1.0 / 0.0,    -1.0 / 0.0, 0.001234567};
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        rf_prom_sample(&p, "x");
        rf_prom_double(&p, v[i]);
    }
    rf_prom_sample(&p, "x");
    rf_prom_u64(&p, UINT64_MAX);
    rf_prom_sample(&p, "x");
    rf_prom_i64(&p, INT64_MIN);
    char *t = taken(&p);
    assert_string_equal(t, "x 0\nx 0\nx 1234567891\nx 0.1\nx 0.3333333333333333\nx 2.5e-07\n"
                           "x 1e+300\nx NaN\nx +Inf\nx -Inf\nx 0.001234567\n"
                           "x 18446744073709551615\nx -9223372036854775808\n");
    free(t);
}

static void test_empty(void **state)
{
    (void)state;
    struct rf_prom p;
    rf_prom_init(&p);
    char *t = taken(&p);
    assert_string_equal(t, "");
    free(t);
    rf_prom_free(NULL);
}

/* promtool check metrics on a text with every kind of line the writer makes. */
static void test_promtool(void **state)
{
    (void)state;
    if (system("command -v promtool >/dev/null 2>&1") != 0)
        skip(); /* Debian's prometheus is not installed (scripts/install-deps.sh installs it) */
    struct rf_prom p;
    rf_prom_init(&p);
    assert_int_equal(rf_prom_const_label(&p, "pid", "1"), 0);
    rf_prom_family(&p, "rf_test_bytes", "gauge", "Escaped \\ and\nnewline.");
    rf_prom_sample(&p, "rf_test_bytes");
    rf_prom_label(&p, "path", "/a \"b\"\\\nc");
    rf_prom_double(&p, 0.0 / 0.0);
    rf_prom_sample(&p, "rf_test_bytes");
    rf_prom_label(&p, "path", "d");
    rf_prom_double(&p, 1.0 / 0.0);
    rf_prom_family(&p, "rf_test_total", "counter", "A counter.");
    rf_prom_sample(&p, "rf_test_total");
    rf_prom_double(&p, 0.25);
    char *t = taken(&p);
    FILE *f = popen("promtool check metrics", "w");
    assert_non_null(f);
    fputs(t, f);
    int status = pclose(f);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail_msg("promtool check metrics refused:\n%s", t);
    free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_escapes),      cmocka_unit_test(test_family_once),
        cmocka_unit_test(test_const_labels), cmocka_unit_test(test_numbers),
        cmocka_unit_test(test_empty),        cmocka_unit_test(test_promtool),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
