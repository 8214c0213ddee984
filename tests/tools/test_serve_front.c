/*
 * serve's HTTP front as a library of its own (ramforge_serve_http, issue 32):
 * linked without the worker or serve's main, it starts on a free port,
 * answers /health over a real socket and stops. The link itself is the
 * first check: a call from the front into the worker or the command table
 * would leave this binary with an undefined symbol.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cmocka.h>
#include <microhttpd.h>

#include "serve/serve.h"

/* The request's whole answer (Connection: close) into buf; the bytes read. */
static size_t http_get(uint16_t port, const char *path, char *buf, size_t size)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct timeval tv = {.tv_sec = 10}; /* the deadline of each read */
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    char req[256];
    int n = snprintf(req, sizeof(req),
                     "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     "Connection: close\r\n\r\n",
                     path);
    assert_int_equal(write(fd, req, (size_t)n), n);
    size_t got = 0;
    ssize_t r;
    while (got < size - 1 && (r = read(fd, buf + got, size - 1 - got)) > 0)
        got += (size_t)r;
    buf[got] = '\0';
    close(fd);
    return got;
}

static void test_front_alone_answers_health(void **state)
{
    (void)state;
    struct serve_options o = {
        .sess = {.model = "front-alone.gguf", .quiet = true},
        .host = "127.0.0.1",
        .port = 0,
        .queue = 1,
        .timeout_s = 10,
        .head_timeout_s = 10,
        .max_connections = 8,
        .max_per_address = 8,
        .cors_origins = "*",
    };
    struct serve sv = {.o = &o};
    pthread_mutex_init(&sv.session_mu, NULL);
    pthread_mutex_init(&sv.mu, NULL);
    pthread_mutex_init(&sv.conns_mu, NULL);
    pthread_cond_init(&sv.cv, NULL);
    atomic_init(&sv.stopping, false);

    assert_int_equal(serve_http_start(&sv), 0);
    assert_true(sv.n_daemons == 1);
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(sv.daemons[0], MHD_DAEMON_INFO_BIND_PORT);
    assert_non_null(di);
    char buf[4096];
    http_get(di->port, "/health", buf, sizeof(buf));
    assert_non_null(strstr(buf, "HTTP/1.1 200"));
    assert_non_null(strstr(buf, "\"status\""));
    assert_non_null(strstr(buf, "\"ok\""));
    http_get(di->port, "/no-such-endpoint", buf, sizeof(buf));
    assert_non_null(strstr(buf, "HTTP/1.1 404"));
    atomic_store(&sv.stopping, true);
    serve_http_stop(&sv);

    pthread_cond_destroy(&sv.cv);
    pthread_mutex_destroy(&sv.conns_mu);
    pthread_mutex_destroy(&sv.mu);
    pthread_mutex_destroy(&sv.session_mu);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_front_alone_answers_health),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
