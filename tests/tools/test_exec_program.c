/*
 * What exec reads of PROGRAM's own arguments (tools/exec/exec_program.c):
 * llama-server's and llama-cli's -c and -ctk/-ctv, llama-server's --cache-ram, an argument
 * winning over its LLAMA_ARG_* variable, other programs not read.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "exec/exec.h"
#include "ramforge/core/kv_types.h"

#define ARGC(a) ((int)(sizeof(a) / sizeof((a)[0])))

static void test_ctx_size(void **state)
{
    (void)state;
    char *server[] = {"/opt/bin/llama-server", "-m", "x.gguf", "-c", "4096"};
    char *cli[] = {"llama-cli", "--ctx-size", "512"};
    char *simple[] = {"llama-simple", "-c", "4096"};
    char *none[] = {"llama-server", "-m", "x.gguf", "-c"}; /* no value: not read */
    char *zero[] = {"llama-server", "-c", "0"};            /* the model's: unknown */
    unsetenv("LLAMA_ARG_CTX_SIZE");
    assert_int_equal(exec_program_ctx_size(ARGC(server), server), 4096);
    assert_int_equal(exec_program_ctx_size(ARGC(cli), cli), 512);
    assert_int_equal(exec_program_ctx_size(ARGC(simple), simple), 0);
    assert_int_equal(exec_program_ctx_size(ARGC(none), none), 0);
    assert_int_equal(exec_program_ctx_size(ARGC(zero), zero), 0);
    setenv("LLAMA_ARG_CTX_SIZE", "2048", 1);
    assert_int_equal(exec_program_ctx_size(ARGC(none), none), 2048);
    assert_int_equal(exec_program_ctx_size(ARGC(server), server), 4096); /* the argument wins */
    unsetenv("LLAMA_ARG_CTX_SIZE");
}

static void test_cache_types(void **state)
{
    (void)state;
    char *server[] = {"llama-server", "-m", "x.gguf", "-ctk", "q8_0", "--cache-type-v", "q4_0"};
    char *k_only[] = {"llama-cli", "-ctk", "q8_0"};
    char *bad[] = {"llama-server", "-ctk", "q4_K"};    /* not a cache type: not read */
    char *simple[] = {"llama-simple", "-ctk", "q8_0"}; /* another program */
    struct rf_operation_request r = {0};
    unsetenv("LLAMA_ARG_CACHE_TYPE_K");
    unsetenv("LLAMA_ARG_CACHE_TYPE_V");
    exec_program_cache_types(ARGC(server), server, &r);
    assert_true(r.has_cache_types);
    assert_int_equal(r.type_k, RF_KV_TYPE_Q8_0);
    assert_int_equal(r.type_v, RF_KV_TYPE_Q4_0);
    r = (struct rf_operation_request){0};
    exec_program_cache_types(ARGC(k_only), k_only, &r);
    assert_true(r.has_cache_types && r.type_k == RF_KV_TYPE_Q8_0 && r.type_v == RF_KV_TYPE_F16);
    r = (struct rf_operation_request){0};
    exec_program_cache_types(ARGC(bad), bad, &r);
    exec_program_cache_types(ARGC(simple), simple, &r);
    assert_false(r.has_cache_types);
    setenv("LLAMA_ARG_CACHE_TYPE_V", "q8_0", 1);
    exec_program_cache_types(ARGC(k_only), k_only, &r);
    assert_true(r.has_cache_types && r.type_v == RF_KV_TYPE_Q8_0);
    unsetenv("LLAMA_ARG_CACHE_TYPE_V");
}

static void test_cache_ram(void **state)
{
    (void)state;
    long long mib = -5;
    char *dflt[] = {"llama-server", "-m", "x.gguf"};
    char *given[] = {"llama-server", "-cram", "256"};
    char *off[] = {"llama-server", "--cache-ram", "0"};
    char *unlimited[] = {"llama-server", "--cache-ram", "-1"};
    char *cli[] = {"llama-cli", "--cache-ram", "256"};
    unsetenv("LLAMA_ARG_CACHE_RAM");
    assert_true(exec_program_cache_ram(ARGC(dflt), dflt, &mib));
    assert_int_equal(mib, EXEC_SERVER_CACHE_RAM_DEFAULT_MIB);
    assert_true(exec_program_cache_ram(ARGC(given), given, &mib));
    assert_int_equal(mib, 256);
    assert_true(exec_program_cache_ram(ARGC(off), off, &mib));
    assert_int_equal(mib, 0);
    assert_false(exec_program_cache_ram(ARGC(unlimited), unlimited, &mib));
    assert_false(exec_program_cache_ram(ARGC(cli), cli, &mib));
    setenv("LLAMA_ARG_CACHE_RAM", "64", 1);
    assert_true(exec_program_cache_ram(ARGC(dflt), dflt, &mib));
    assert_int_equal(mib, 64);
    assert_true(exec_program_cache_ram(ARGC(given), given, &mib));
    assert_int_equal(mib, 256);
    unsetenv("LLAMA_ARG_CACHE_RAM");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ctx_size),
        cmocka_unit_test(test_cache_types),
        cmocka_unit_test(test_cache_ram),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
