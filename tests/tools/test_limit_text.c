/*
 * The line --memory-limit's supervising parent writes once its child ended
 * (limit_cgroup_end_text, issue 36): an OOM kill under streaming must not
 * suggest --residency-policy streaming, the policy in use; a limit that
 * could not be read is "unknown" with why, never "(0 bytes)".
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/limit_cgroup.h"

#define MIB UINT64_C(1048576)

/* wstatus of a child killed by sig, of one that exited with code. */
#define KILLED(sig) (sig)
#define EXITED(code) ((code) << 8)

static struct limit_end oom(bool streaming)
{
    struct limit_end e = {.wstatus = KILLED(SIGKILL), .streaming = streaming};

    e.st.has_limit = true;
    e.st.limit_bytes = 64 * MIB;
    e.st.has_peak = true;
    e.st.peak_bytes = 64 * MIB;
    e.st.has_oom_kill = true;
    e.st.oom_kill = 1;
    return e;
}

static void test_oom_hint_names_what_is_not_in_use(void **state)
{
    struct limit_end e = oom(true);
    char line[512];

    (void)state;
    assert_int_equal(limit_cgroup_end_text(&e, line, sizeof(line)), LIMIT_END_OOM);
    assert_non_null(strstr(line, "OOM killer killed the run"));
    assert_null(strstr(line, "or --residency-policy streaming"));
    assert_non_null(strstr(line, "it streams already"));

    e = oom(false);
    assert_int_equal(limit_cgroup_end_text(&e, line, sizeof(line)), LIMIT_END_OOM);
    assert_non_null(strstr(line, "or --residency-policy streaming"));
}

static void test_footer_never_prints_a_fake_zero(void **state)
{
    struct limit_end e = {.wstatus = EXITED(0)};
    char line[512];

    (void)state;
    /* the cgroup's files could not be read at all */
    e.read_error = -ENOENT;
    assert_int_equal(limit_cgroup_end_text(&e, line, sizeof(line)), LIMIT_END_FOOTER);
    assert_null(strstr(line, "0 bytes"));
    assert_non_null(strstr(line, "limit unknown (the cgroup's files could not be read: "));
    assert_non_null(strstr(line, "peak unknown"));

    /* read, but without its limit file */
    e.read_error = 0;
    e.st.has_peak = true;
    e.st.peak_bytes = 9 * MIB;
    assert_int_equal(limit_cgroup_end_text(&e, line, sizeof(line)), LIMIT_END_FOOTER);
    assert_null(strstr(line, "0 bytes"));
    assert_non_null(strstr(line, "limit unknown (its limit file could not be read)"));
    assert_non_null(strstr(line, "peak 9.00 MiB"));

    /* a limit read: its bytes too */
    e.st.has_limit = true;
    e.st.limit_bytes = 12 * MIB;
    assert_int_equal(limit_cgroup_end_text(&e, line, sizeof(line)), LIMIT_END_FOOTER);
    assert_non_null(strstr(line, "limit 12.00 MiB (12582912 bytes), peak 9.00 MiB"));

    /* quiet, or a stop signal passed on: nothing */
    e.quiet = true;
    assert_int_equal(limit_cgroup_end_text(&e, line, sizeof(line)), LIMIT_END_NONE);
    assert_string_equal(line, "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_oom_hint_names_what_is_not_in_use),
        cmocka_unit_test(test_footer_never_prints_a_fake_zero),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
