/* tools/common/cli.c's shared warnings: the one text run and serve print for a missing window. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/cli.h"

/* What fn wrote on stderr (fd 2 pointed at a temporary file meanwhile), into buf. */
static void stderr_of(void (*fn)(int), int arg, char *buf, size_t size)
{
    FILE *tmp = tmpfile();
    assert_non_null(tmp);
    fflush(stderr);
    int saved = dup(2);
    assert_true(saved >= 0);
    assert_true(dup2(fileno(tmp), 2) >= 0);
    fn(arg);
    fflush(stderr);
    assert_true(dup2(saved, 2) >= 0);
    close(saved);
    rewind(tmp);
    size_t n = fread(buf, 1, size - 1, tmp);
    buf[n] = '\0';
    fclose(tmp);
}

static void test_warn_no_window(void **state)
{
    char buf[512];
    (void)state;
    stderr_of(cli_warn_no_window, -ENODATA, buf, sizeof(buf));
    char want[512];
    snprintf(want, sizeof(want),
             "ramforge: warning: streaming: no read-ahead window (%s): the streamed layers are "
             "read by the decode's faults\n",
             rf_strerror(-ENODATA));
    assert_string_equal(buf, want);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_warn_no_window),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
