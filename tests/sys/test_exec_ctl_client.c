/*
 * exec's control channel from the asking side (ramforge/sys/exec_ctl_client.h):
 * the socket found in a fixture /proc/PID/net/unix (lines without a path,
 * another pid's socket, a name that only ends alike), and one request
 * answered by a listener of this process: the answer read to its end, a
 * peer that is not the pid asked refused (-ESRCH: a stale socket, a pid
 * reused), no listener (-ECONNREFUSED), no socket (-ENOENT).
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "ramforge/sys/exec_ctl_client.h"

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_find(void **state)
{
    (void)state;
    char root[] = "/tmp/rf-ctl-XXXXXX", dir[256], path[256];
    assert_non_null(mkdtemp(root));
    snprintf(dir, sizeof(dir), "%s/proc", root);
    mkdir(dir, 0700);
    snprintf(dir, sizeof(dir), "%s/proc/77", root);
    mkdir(dir, 0700);
    snprintf(dir, sizeof(dir), "%s/proc/77/net", root);
    mkdir(dir, 0700);
    snprintf(dir, sizeof(dir), "%s/proc/77/net/unix", root);
    write_file(dir, "Num       RefCount Protocol Flags    Type St Inode Path\n"
                    "0000000039a7e4b4: 00000003 00000000 00000000 0001 03  1250\n"
                    "0000000039a7e4b5: 00000002 00000000 00010000 0001 01  1251 "
                    "/run/ramforge/exec-777.sock\n"
                    "0000000039a7e4b6: 00000002 00000000 00010000 0001 01  1252 "
                    "/run/ramforge/xexec-77.sock\n"
                    "0000000039a7e4b7: 00000002 00000000 00010000 0001 01  1253 "
                    "/run/user/1000/ramforge/exec-77.sock\n");
    assert_int_equal(rfsys_exec_ctl_find(root, 77, path, sizeof(path)), 0);
    assert_string_equal(path, "/run/user/1000/ramforge/exec-77.sock");
    assert_int_equal(rfsys_exec_ctl_find(root, 77, path, 8), -ENAMETOOLONG);
    write_file(dir, "Num       RefCount Protocol Flags    Type St Inode Path\n"
                    "0000000039a7e4b5: 00000002 00000000 00010000 0001 01  1251 "
                    "/run/ramforge/exec-777.sock\n");
    assert_int_equal(rfsys_exec_ctl_find(root, 77, path, sizeof(path)), -ENOENT);
    assert_true(rfsys_exec_ctl_find(root, 78, path, sizeof(path)) < 0); /* no such process */
    unlink(dir);
    snprintf(dir, sizeof(dir), "rm -rf %s", root);
    assert_int_equal(system(dir), 0);
}

struct listener {
    int fd;
    const char *answer;
};

static void *serve(void *ud)
{
    struct listener *l = ud;
    char line[256];
    int c = accept(l->fd, NULL, NULL);
    if (c >= 0) {
        ssize_t n = recv(c, line, sizeof(line) - 1, 0);
        (void)n;
        send(c, l->answer, strlen(l->answer), MSG_NOSIGNAL);
        close(c);
    }
    return NULL;
}

static void test_ask(void **state)
{
    (void)state;
    char dir[] = "/tmp/rf-ctl-XXXXXX", path[256], *answer = NULL;
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    pthread_t tid;
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/exec-%d.sock", dir, (int)getpid());
    assert_int_equal(rfsys_exec_ctl_ask(path, getpid(), "status\n", 1000, &answer), -ENOENT);
    strcpy(a.sun_path, path);
    struct listener l = {socket(AF_UNIX, SOCK_STREAM, 0), "model x\nend\n"};
    assert_int_equal(bind(l.fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(l.fd, 1), 0);
    assert_int_equal(pthread_create(&tid, NULL, serve, &l), 0);
    assert_int_equal(rfsys_exec_ctl_ask(path, getpid(), "status\n", 2000, &answer), 0);
    pthread_join(tid, NULL);
    assert_string_equal(answer, "model x\nend\n");
    free(answer);
    /* the listener is this process, not pid 1: refused before a word is sent */
    assert_int_equal(pthread_create(&tid, NULL, serve, &l), 0);
    assert_int_equal(rfsys_exec_ctl_ask(path, 1, "status\n", 2000, &answer), -ESRCH);
    assert_null(answer);
    pthread_join(tid, NULL);
    close(l.fd);
    assert_int_equal(rfsys_exec_ctl_ask(path, getpid(), "status\n", 1000, &answer),
                     -ECONNREFUSED); /* the file left, no one listening */
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_find),
        cmocka_unit_test(test_ask),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
