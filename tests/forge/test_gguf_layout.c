/*
 * rf_gguf_type_layout (src/core/gguf_header.c keeps its own table, so the
 * header check needs no llama.cpp) against ggml's own block sizes and
 * block bytes for every type id of the linked ggml, and a few past it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "ggml.h"
#include "ramforge/core/gguf_header.h"

static void test_layout_matches_ggml(void **state)
{
    (void)state;
    int known = 0;
    for (int t = 0; t < GGML_TYPE_COUNT + 8; t++) {
        uint64_t elems = 0, bytes = 0;
        bool ours = rf_gguf_type_layout((uint32_t)t, &elems, &bytes);
        int64_t blck = t < GGML_TYPE_COUNT ? ggml_blck_size((enum ggml_type)t) : 0;
        if (blck <= 0) {
            assert_false(ours); /* removed, deprecated or past the enum */
            continue;
        }
        assert_true(ours);
        assert_int_equal(elems, (uint64_t)blck);
        assert_int_equal(bytes, (uint64_t)ggml_type_size((enum ggml_type)t));
        known++;
    }
    assert_true(known >= 30); /* the table was compared, not skipped */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout_matches_ggml),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
