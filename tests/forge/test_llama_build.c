/*
 * Tests for the check before llama.cpp's C++ internals are called
 * (src/forge/llama_build.h), with fake probes of the running libllama: the
 * recorded build passes; another build ID, a libllama without a build ID
 * and an unknown recorded build fail with one line naming both builds; and
 * in this process (linked against the recorded build) the real probe
 * passes, so the internals resolve.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "llama_build.h"

static const struct forge_llama_build built = {
    .version = "v0.5.0 de3ff81",
    .soname = "libllama.so.0",
    .build_id = "8ac336020fc43cd4b6bbde619dc4ca773d961123",
};

static const char *fake_id;      /* the running libllama's build ID; NULL: it has none */
static const char *fake_version; /* its llama_version(); NULL: it has none */

static int fake_running(char *path, size_t path_size, char *build_id, size_t build_id_size)
{
    snprintf(path, path_size, "/opt/other/lib/libllama.so.0");
    if (!fake_id)
        return -ENOENT;
    snprintf(build_id, build_id_size, "%s", fake_id);
    return 0;
}

static const char *fake_llama_version(void)
{
    return fake_version;
}

static const struct forge_llama_probe fake = {fake_running, fake_llama_version};

static void test_same_build_passes(void **state)
{
    (void)state;
    char why[FORGE_LLAMA_WHY_MAX] = "";
    fake_id = built.build_id;
    fake_version = "0.5.0";
    assert_int_equal(forge_llama_check(&built, &fake, why), 0);
    assert_string_equal(why, "");
}

static void test_other_build_names_both(void **state)
{
    (void)state;
    char why[FORGE_LLAMA_WHY_MAX] = "";
    fake_id = "0123456789abcdef";
    fake_version = "0.4.0";
    assert_int_equal(forge_llama_check(&built, &fake, why), -ENOEXEC);
    assert_null(strchr(why, '\n')); /* one line */
    assert_non_null(strstr(why, "runs llama.cpp 0.4.0 (build ID 0123456789abcdef, "
                                "/opt/other/lib/libllama.so.0)"));
    assert_non_null(strstr(why, "built against llama.cpp v0.5.0 de3ff81 (libllama.so.0, build ID "
                                "8ac336020fc43cd4b6bbde619dc4ca773d961123)"));
}

static void test_no_build_id_fails(void **state)
{
    (void)state;
    char why[FORGE_LLAMA_WHY_MAX] = "";
    fake_id = NULL;
    fake_version = NULL;
    assert_int_equal(forge_llama_check(&built, &fake, why), -ENOEXEC);
    assert_non_null(strstr(why, "runs llama.cpp of unknown version (build ID unknown, "));
}

static void test_unknown_recorded_build_fails(void **state)
{
    (void)state;
    char why[FORGE_LLAMA_WHY_MAX] = "";
    struct forge_llama_build unknown = {"unknown", "unknown", "unknown"};
    fake_id = "unknown"; /* even a running ID spelled the same never matches "unknown" */
    assert_int_equal(forge_llama_check(&unknown, &fake, why), -ENOEXEC);
    assert_non_null(strstr(why, "built against llama.cpp unknown (unknown, build ID unknown)"));
}

/* This binary links the libllama the build recorded: the real probe passes. */
static void test_this_process_matches(void **state)
{
    (void)state;
    const char *why = NULL;
    assert_null(forge_llama_mismatch());
    assert_string_equal(forge_llama_built()->build_id, RAMFORGE_LLAMA_BUILD_ID);
    assert_non_null(forge_llama_internal("_Z26llama_get_memory_breakdownPK13llama_context", &why));
    assert_null(forge_llama_internal("_Z19no_such_llama_thingv", &why));
    assert_non_null(strstr(why, "no such C++ internal"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_build_passes),
        cmocka_unit_test(test_other_build_names_both),
        cmocka_unit_test(test_no_build_id_fails),
        cmocka_unit_test(test_unknown_recorded_build_fails),
        cmocka_unit_test(test_this_process_matches),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
