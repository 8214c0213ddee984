/*
 * Tests for the UTF-8 sanitizer (rf_utf8_sanitize), the JSON text helpers
 * over it (rf_json_text, rf_json_str) and the report's output text: the
 * expected bytes are Python's bytes.decode("utf-8", "replace") of each
 * input, written out here (an independent oracle: valid text, a lone
 * continuation byte, sequences cut at the end, overlong forms, surrogates,
 * code points above U+10FFFF, NUL bytes).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ramforge/core/json_util.h"
#include "ramforge/core/profile.h"
#include "ramforge/core/report_json.h"
#include "ramforge/core/utf8.h"
#include "ramforge/error.h"

struct utf8_case {
    const char *in;
    size_t in_len;
    const char *want; /* Python: in.decode("utf-8", "replace").encode("utf-8") */
    size_t want_len;
    bool valid;
};

static const struct utf8_case cases[] = {
    {"my cat", 6, "my cat", 6, true},
    {"", 0, "", 0, true},
    {"caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80", 14, "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80",
     14, true},
    {"a\x8A"
     "b",
     3,
     "a\xEF\xBF\xBD"
     "b",
     5, false},
    {"\x8A", 1, "\xEF\xBF\xBD", 3, false},
    {"ab\xE2\x82", 4, "ab\xEF\xBF\xBD", 5, false},
    {"ab\xF0\x9F\x98", 5, "ab\xEF\xBF\xBD", 5, false},
    {"ab\xC3", 3, "ab\xEF\xBF\xBD", 5, false},
    {"\xE2\x82"
     "A",
     3,
     "\xEF\xBF\xBD"
     "A",
     4, false},
    {"\xC0\x80", 2, "\xEF\xBF\xBD\xEF\xBF\xBD", 6, false},
    {"\xC1\xBF", 2, "\xEF\xBF\xBD\xEF\xBF\xBD", 6, false},
    {"\xE0\x80\x80", 3, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD", 9, false},
    {"\xE0\x9F\xBF", 3, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD", 9, false},
    {"\xF0\x80\x80\x80", 4, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD", 12, false},
    {"\xF0\x8F\xBF\xBF", 4, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD", 12, false},
    {"\xED\xA0\x80", 3, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD", 9, false},
    {"\xED\xBF\xBF", 3, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD", 9, false},
    {"\xED\x9F\xBF", 3, "\xED\x9F\xBF", 3, true},
    {"\xF4\x8F\xBF\xBF", 4, "\xF4\x8F\xBF\xBF", 4, true},
    {"\xF4\x90\x80\x80", 4, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD", 12, false},
    {"\xF5\x80", 2, "\xEF\xBF\xBD\xEF\xBF\xBD", 6, false},
    {"\xFF\xFE", 2, "\xEF\xBF\xBD\xEF\xBF\xBD", 6, false},
    {"a\x00"
     "b",
     3,
     "a\x00"
     "b",
     3, true},
    {"\x00", 1, "\x00", 1, true},
    {"\xEF\xBF\xBD", 3, "\xEF\xBF\xBD", 3, true},
    {"\xF0\x9F\x98\x80\x80", 5, "\xF0\x9F\x98\x80\xEF\xBF\xBD", 7, false},
    {"\x8A\x8A", 2, "\xEF\xBF\xBD\xEF\xBF\xBD", 6, false},
};

static void test_sanitize_matches_python(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const struct utf8_case *c = &cases[i];
        char *out = NULL;
        size_t len = 99;
        bool valid = !c->valid;
        assert_int_equal(rf_utf8_sanitize(c->in, c->in_len, &out, &len, &valid), 0);
        assert_non_null(out);
        assert_int_equal(len, c->want_len);
        assert_memory_equal(out, c->want, len);
        assert_int_equal(out[len], '\0');
        assert_int_equal(valid, c->valid);
        free(out);
    }
}

static void test_sanitize_errors(void **state)
{
    char *out = (char *)"x";
    size_t len = 7;
    bool valid = true;
    (void)state;
    assert_int_equal(rf_utf8_sanitize(NULL, 1, &out, &len, &valid), -EINVAL);
    assert_null(out);
    assert_int_equal(len, 0);
    assert_false(valid);
    assert_int_equal(rf_utf8_sanitize("a", 1, NULL, &len, NULL), -EINVAL);
    assert_int_equal(rf_utf8_sanitize("a", 1, &out, NULL, NULL), -EINVAL);
    assert_int_equal(rf_utf8_sanitize("a", SIZE_MAX / 2, &out, &len, NULL), -EOVERFLOW);
    assert_int_equal(rf_utf8_sanitize(NULL, 0, &out, &len, &valid), 0);
    assert_int_equal(len, 0);
    assert_true(valid);
    free(out);
}

/* Every case as a JSON string: never NULL, dumped as the sanitized text (NUL as \u0000). */
static void test_json_text(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const struct utf8_case *c = &cases[i];
        bool valid = !c->valid;
        json_t *j = rf_json_text(c->in, c->in_len, &valid);
        assert_non_null(j);
        assert_int_equal(valid, c->valid);
        assert_int_equal(json_string_length(j), c->want_len);
        assert_memory_equal(json_string_value(j), c->want, c->want_len);
        json_decref(j);
    }
    json_t *j = rf_json_str("a\x8A"
                            "b");
    assert_non_null(j);
    assert_string_equal(json_string_value(j), "a\xEF\xBF\xBD"
                                              "b");
    json_decref(j);
    j = rf_json_str(NULL);
    assert_true(json_is_null(j));
    json_decref(j);
}

/* A report whose text (and a warning) are not UTF-8 is built; the token ids stay exact. */
static void test_report_text_not_utf8(void **state)
{
    static const int32_t tokens[] = {14621, 14084, 141, 18541};
    static const char *const warnings[] = {"tensor \"blk.\xFF\" was not released"};
    struct rf_report r = {0};
    json_t *doc = NULL;
    (void)state;
    r.tokens = tokens;
    r.n_tokens = 4;
    r.text = " SeverJust\x8A"
             "urance";
    r.warnings = warnings;
    r.n_warnings = 1;
    assert_int_equal(rf_report_to_json(&r, &doc), 0);
    json_t *out = json_object_get(doc, "output");
    assert_string_equal(json_string_value(json_object_get(out, "text")), " SeverJust\xEF\xBF\xBD"
                                                                         "urance");
    assert_true(json_is_false(json_object_get(out, "text_valid_utf8")));
    json_t *ids = json_object_get(out, "token_ids");
    assert_int_equal(json_array_size(ids), 4);
    for (size_t i = 0; i < 4; i++)
        assert_int_equal(json_integer_value(json_array_get(ids, i)), tokens[i]);
    assert_string_equal(json_string_value(json_array_get(json_object_get(doc, "warnings"), 0)),
                        "tensor \"blk.\xEF\xBF\xBD\" was not released");
    json_decref(doc);

    r.text = "caf\xC3\xA9";
    assert_int_equal(rf_report_to_json(&r, &doc), 0);
    out = json_object_get(doc, "output");
    assert_string_equal(json_string_value(json_object_get(out, "text")), "caf\xC3\xA9");
    assert_true(json_is_true(json_object_get(out, "text_valid_utf8")));
    json_decref(doc);
}

/* A value jansson refuses (here the caller's scope label, not UTF-8) is -RF_EJSON, not -ENOMEM. */
static void test_json_error_is_not_enomem(void **state)
{
    struct rf_report r = {0};
    json_t *doc = NULL;
    (void)state;
    r.scope = "oper\xFF"
              "ation";
    assert_int_equal(rf_report_to_json(&r, &doc), -RF_EJSON);
    assert_null(doc);
    assert_string_equal(rf_strerror(-RF_EJSON), "a report value could not be encoded as JSON");
}

/* The profile keys tensors by name: a name that is not UTF-8 is refused as such, not replaced. */
static void test_profile_name_not_utf8(void **state)
{
    struct rf_profile_tensor t = {.name = "blk.0.attn_q.weig\xFF", .first_rank = 0, .accesses = 1};
    struct rf_profile p;
    char *text = NULL;
    (void)state;
    rf_profile_init(&p);
    p.tensors = &t;
    p.n_tensors = 1;
    assert_int_equal(rf_profile_to_text(&p, &text), -RF_EJSON);
    assert_null(text);
    t.name[17] = 'h';
    assert_int_equal(rf_profile_to_text(&p, &text), 0);
    assert_non_null(strstr(text, "blk.0.attn_q.weigh"));
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sanitize_matches_python),
        cmocka_unit_test(test_sanitize_errors),
        cmocka_unit_test(test_json_text),
        cmocka_unit_test(test_report_text_not_utf8),
        cmocka_unit_test(test_json_error_is_not_enomem),
        cmocka_unit_test(test_profile_name_not_utf8),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
