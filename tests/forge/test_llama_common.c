/*
 * Tests for forge_common.h's JSON schema to grammar (llama.cpp's
 * json_schema_to_grammar, no model needed): a schema gives a GBNF grammar
 * with a root rule that llama.cpp's grammar parser takes; what the
 * converter refuses and text that is not JSON give -EINVAL with the
 * converter's words; NULL arguments -EINVAL. In a build without the common
 * library every call is -ENOSYS saying so, and the tests skip.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../test_skip.h"
#include "ramforge/forge/forge_common.h"

static void need_common(void)
{
    char err[FORGE_ERR_MAX] = "", *g = NULL;
    if (forge_common_available())
        return;
    assert_int_equal(forge_json_schema_grammar("{}", &g, err), -ENOSYS);
    assert_null(g);
    assert_non_null(strstr(err, "without llama.cpp's common library"));
    skip();
}

static void test_schema_gives_grammar(void **state)
{
    (void)state;
    need_common();
    char err[FORGE_ERR_MAX] = "", *g = NULL;
    assert_int_equal(forge_json_schema_grammar("{\"type\":\"object\",\"properties\":{\"age\":"
                                               "{\"type\":\"integer\"}},\"required\":[\"age\"]}",
                                               &g, err),
                     0);
    assert_non_null(g);
    assert_non_null(strstr(g, "root ::="));
    assert_non_null(strstr(g, "age"));
    free(g);
    assert_int_equal(forge_json_schema_grammar("{\"const\":\"42\"}", &g, err), 0);
    assert_non_null(strstr(g, "\\\"42\\\""));
    free(g);
}

static void test_refusals_say_why(void **state)
{
    (void)state;
    need_common();
    static const struct {
        const char *schema, *words;
    } bad[] = {{"{\"type\":\"hiccup\"}", "unrecognized type hiccup"},
               {"123", "schema must be an object"},
               {"{\"type\":", "parse"}};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char err[FORGE_ERR_MAX] = "", *g = NULL;
        assert_int_equal(forge_json_schema_grammar(bad[i].schema, &g, err), -EINVAL);
        assert_null(g);
        if (!strstr(err, bad[i].words))
            fail_msg("%s: '%s' lacks '%s'", bad[i].schema, err, bad[i].words);
    }
    char err[FORGE_ERR_MAX] = "", *g = NULL;
    assert_int_equal(forge_json_schema_grammar(NULL, &g, err), -EINVAL);
    assert_int_equal(forge_json_schema_grammar("{}", NULL, err), -EINVAL);
    struct forge_chat_templates *t = NULL;
    assert_int_equal(forge_chat_templates_open(NULL, NULL, &t, err), -EINVAL);
    assert_null(t);
    assert_int_equal(forge_chat_templates_apply(NULL, NULL, 0, true, &g, err), -EINVAL);
    forge_chat_templates_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_schema_gives_grammar),
        cmocka_unit_test(test_refusals_say_why),
    };
    return rf_run_group_tests(tests, NULL, NULL);
}
