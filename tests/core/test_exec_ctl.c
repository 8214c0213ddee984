/*
 * The words of exec's control channel (ramforge/core/exec_ctl.h): requests
 * and status lines round-trip, malformed lines are refused, the runtime
 * directory and the socket's name follow their rule.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "ramforge/core/exec_ctl.h"

static void test_request_round_trip(void **state)
{
    (void)state;
    char buf[128];
    struct rf_exec_ctl_request r = {RF_EXEC_CTL_RELEASE, 8, 17, 1234567, 77344768}, back;
    assert_true(rf_exec_ctl_format_request(&r, buf, sizeof(buf)) > 0);
    assert_string_equal(buf, "release 8:17 1234567 77344768\n");
    assert_int_equal(rf_exec_ctl_parse_request(buf, &back), 0);
    assert_int_equal(back.kind, RF_EXEC_CTL_RELEASE);
    assert_int_equal(back.dev_minor, 17);
    assert_int_equal(back.inode, 1234567);
    assert_int_equal(back.bytes, 77344768);
    r.kind = RF_EXEC_CTL_STATUS;
    assert_int_equal(rf_exec_ctl_format_request(&r, buf, sizeof(buf)), 7);
    assert_int_equal(rf_exec_ctl_parse_request("status\n", &back), 0);
    assert_int_equal(back.kind, RF_EXEC_CTL_STATUS);
    assert_int_equal(rf_exec_ctl_format_request(&r, buf, 4), -ENOSPC);
    const char *bad[] = {"",
                         "stat",
                         "status x",
                         "release 8:17 1 ",
                         "release 8:17 1",
                         "release 8 1 2",
                         "release 8:17 1 -2",
                         "release 8:17 1 2 3",
                         "release 99999999999:1 1 2",
                         "release 8:17 1 2\nstatus"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(rf_exec_ctl_parse_request(bad[i], &back), -EBADMSG);
}

static void test_model_round_trip(void **state)
{
    (void)state;
    char buf[RF_EXEC_CTL_LINE_MAX];
    struct rf_exec_ctl_model m = {0}, back;
    m.dev_major = 259;
    m.dev_minor = 3;
    m.inode = 42;
    m.submits = 12;
    m.in_flight = 1;
    m.idle_ms = 3500;
    m.id = 7;
    m.state = RF_EXEC_CTL_DONE;
    m.asked_bytes = 1 << 20;
    m.accepted_bytes = 1 << 19;
    m.change_bytes = -(1 << 19);
    m.error = -16;
    strcpy(m.path, "/models/a model.gguf");
    assert_true(rf_exec_ctl_format_model(&m, buf, sizeof(buf)) > 0);
    assert_int_equal(rf_exec_ctl_parse_model(buf, &back), 0);
    assert_memory_equal(&m, &back, sizeof(m));
    assert_int_equal(rf_exec_ctl_format_model(&m, buf, 20), -ENOSPC);
    strcpy(m.path, "a\nb");
    assert_int_equal(rf_exec_ctl_format_model(&m, buf, sizeof(buf)), -EINVAL);
    const char *bad[] = {
        "model 1:2 3 submits 1 in_flight 0 idle_ms 1 request 0 sleeping asked 0 accepted 0 "
        "change 0 error 0 path /a",
        "model 1:2 3 submits 1 in_flight 0 idle_ms 1 request 0 none asked 0 accepted 0 "
        "change 0 error 5 path /a",
        "model 1:2 3 submits 1 in_flight 0 idle_ms 1 request 0 none asked 0 accepted 0 "
        "change 0 error 0 path ",
        "model 1:2 3 submits x in_flight 0 idle_ms 1 request 0 none asked 0 accepted 0 "
        "change 0 error 0 path /a",
        "end",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(rf_exec_ctl_parse_model(bad[i], &back), -EBADMSG);
    assert_string_equal(rf_exec_ctl_state_name(RF_EXEC_CTL_WAITING), "waiting");
}

static void test_paths(void **state)
{
    (void)state;
    char dir[256], path[256], longdir[200];
    assert_int_equal(rf_exec_ctl_runtime_dir("/x/rt", "/run/user/1000", 1000, dir, sizeof(dir)), 0);
    assert_string_equal(dir, "/x/rt");
    assert_int_equal(rf_exec_ctl_runtime_dir(NULL, "/run/user/1000", 1000, dir, sizeof(dir)), 0);
    assert_string_equal(dir, "/run/user/1000/ramforge");
    assert_int_equal(rf_exec_ctl_runtime_dir("", "relative", 0, dir, sizeof(dir)), 0);
    assert_string_equal(dir, "/run/ramforge");
    assert_int_equal(rf_exec_ctl_runtime_dir(NULL, NULL, 1000, dir, sizeof(dir)), 0);
    assert_string_equal(dir, "/tmp/ramforge-1000");
    assert_int_equal(rf_exec_ctl_runtime_dir("/a/long/one", NULL, 0, dir, 4), -ENAMETOOLONG);
    assert_int_equal(rf_exec_ctl_socket_path("/run/ramforge", 4242, path, sizeof(path)), 0);
    assert_string_equal(path, "/run/ramforge/exec-4242.sock");
    memset(longdir, 'd', sizeof(longdir) - 1);
    longdir[sizeof(longdir) - 1] = '\0';
    assert_int_equal(rf_exec_ctl_socket_path(longdir, 1, path, sizeof(path)), -ENAMETOOLONG);
    assert_true(rf_exec_ctl_is_socket_of("/run/ramforge/exec-4242.sock", 4242));
    assert_false(rf_exec_ctl_is_socket_of("/run/ramforge/exec-42421.sock", 4242));
    assert_false(rf_exec_ctl_is_socket_of("/run/ramforge/xexec-4242.sock", 4242));
    assert_false(rf_exec_ctl_is_socket_of("exec-4242.sock", 4242));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request_round_trip),
        cmocka_unit_test(test_model_round_trip),
        cmocka_unit_test(test_paths),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
