/*
 * The KV cache's element types (ramforge/core/kv_types.h): the bytes of a
 * cache in each type llama.cpp accepts, against ggml's block sizes worked
 * by hand; a quantized cache is not counted as f16; unknown types and
 * partial blocks are refused.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "ramforge/core/kv_types.h"

/* tinyllama's shape: 22 layers, K and V 256 wide per layer. */
static void test_cache_bytes(void **state)
{
    (void)state;
    uint64_t b;
    assert_int_equal(rf_kv_cache_bytes(22, 512, 256, 256, RF_KV_TYPE_F16, RF_KV_TYPE_F16, &b), 0);
    assert_int_equal(b, 22ull * 512 * 512 * 2); /* f16: 2 bytes an element */
    assert_int_equal(rf_kv_cache_bytes(22, 512, 256, 256, RF_KV_TYPE_Q8_0, RF_KV_TYPE_Q8_0, &b), 0);
    assert_int_equal(b, 22ull * 512 * (2 * 8 * 34)); /* 8 blocks of 34 bytes per row */
    assert_int_equal(rf_kv_cache_bytes(22, 512, 256, 256, RF_KV_TYPE_Q8_0, RF_KV_TYPE_F16, &b), 0);
    assert_int_equal(b, 22ull * 512 * (8 * 34 + 256 * 2));
    assert_int_equal(rf_kv_cache_bytes(1, 1, 32, 32, RF_KV_TYPE_Q4_0, RF_KV_TYPE_F32, &b), 0);
    assert_int_equal(b, 18 + 32 * 4);
}

static void test_row_bytes(void **state)
{
    (void)state;
    static const struct {
        uint32_t type;
        uint64_t bytes_of_64;
        const char *name;
    } cases[] = {
        {RF_KV_TYPE_F32, 256, "f32"},      {RF_KV_TYPE_F16, 128, "f16"},
        {RF_KV_TYPE_BF16, 128, "bf16"},    {RF_KV_TYPE_Q8_0, 68, "q8_0"},
        {RF_KV_TYPE_Q4_0, 36, "q4_0"},     {RF_KV_TYPE_Q4_1, 40, "q4_1"},
        {RF_KV_TYPE_Q5_0, 44, "q5_0"},     {RF_KV_TYPE_Q5_1, 48, "q5_1"},
        {RF_KV_TYPE_IQ4_NL, 36, "iq4_nl"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint64_t b;
        assert_int_equal(rf_kv_row_bytes(cases[i].type, 64, &b), 0);
        assert_int_equal(b, cases[i].bytes_of_64);
        assert_string_equal(rf_kv_type_name(cases[i].type), cases[i].name);
        uint32_t id = 99;
        assert_int_equal(rf_kv_type_of_name(cases[i].name, &id), 0);
        assert_int_equal(id, cases[i].type);
    }
}

static void test_refused(void **state)
{
    (void)state;
    uint64_t b = 1;
    assert_int_equal(rf_kv_row_bytes(RF_KV_TYPE_Q8_0, 40, &b), -EINVAL); /* not whole blocks */
    assert_int_equal(b, 0);
    assert_int_equal(rf_kv_row_bytes(12, 64, &b), -EINVAL); /* q4_K: not a cache type */
    assert_null(rf_kv_type_name(12));
    uint32_t id;
    assert_int_equal(rf_kv_type_of_name("q4_K", &id), -EINVAL);
    assert_int_equal(rf_kv_type_of_name(NULL, &id), -EINVAL);
    assert_int_equal(rf_kv_cache_bytes(0, 1, 32, 32, RF_KV_TYPE_F16, RF_KV_TYPE_F16, &b), -EINVAL);
    assert_int_equal(rf_kv_cache_bytes(UINT64_MAX, 2, 32, 32, RF_KV_TYPE_F16, RF_KV_TYPE_F16, &b),
                     -EOVERFLOW);
    assert_int_equal(rf_kv_cache_bytes(1, 1, 32, 32, RF_KV_TYPE_F16, RF_KV_TYPE_F16, NULL),
                     -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cache_bytes),
        cmocka_unit_test(test_row_bytes),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
