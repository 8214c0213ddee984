/*
 * cmocka under ctest: a test binary whose every test skipped exits with
 * RF_TEST_SKIPPED (77, the SKIP_RETURN_CODE rf_add_test gives each cmocka
 * test), so ctest reports it "Skipped", not "Passed". Include it after
 * <cmocka.h>, call skip() as cmocka's (each call is counted here: a test
 * leaves at its skip()), and end main with rf_run_group_tests in place of
 * cmocka_run_group_tests. A binary where only some tests skipped passes;
 * cmocka's output lists the skipped ones.
 */
#ifndef RAMFORGE_TEST_SKIP_H
#define RAMFORGE_TEST_SKIP_H

#include <stddef.h>

#define RF_TEST_SKIPPED 77 /* ctest's SKIP_RETURN_CODE of the cmocka tests */

static size_t rf_tests_skipped; /* skip() calls: one per skipped test */

#undef skip
#define skip() (rf_tests_skipped++, _skip(__FILE__, __LINE__))

/* Runs the group: 1 if a test failed, RF_TEST_SKIPPED if every test skipped, else 0. */
#define rf_run_group_tests(group, setup, teardown)                                                 \
    rf_run_group_tests_(#group, group, sizeof(group) / sizeof((group)[0]), setup, teardown)

static inline int rf_run_group_tests_(const char *name, const struct CMUnitTest *tests, size_t n,
                                      CMFixtureFunction setup, CMFixtureFunction teardown)
{
    if (_cmocka_run_group_tests(name, tests, n, setup, teardown) != 0)
        return 1;
    return n > 0 && rf_tests_skipped == n ? RF_TEST_SKIPPED : 0;
}

#endif
