/*
 * The CLI's /metrics endpoint (metrics_listen.h): libmicrohttpd with one
 * internal polling thread, GET /metrics only, text format 0.0.4.
 */
#include "metrics_listen.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static struct {
    pthread_mutex_t mu;
    char *text; /* the published text (render NULL); owned */
    metrics_render_fn render;
    void *ud;
    struct MHD_Daemon *daemon;
} g_listen = {PTHREAD_MUTEX_INITIALIZER, NULL, NULL, NULL, NULL};

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *data,
                                  size_t *size, void **con_cls)
{
    (void)cls, (void)version, (void)data, (void)size, (void)con_cls;
    bool ok = !strcmp(url, "/metrics") && !strcmp(method, "GET");
    char *rendered = ok && g_listen.render ? g_listen.render(g_listen.ud) : NULL;
    unsigned code = !ok                            ? MHD_HTTP_NOT_FOUND
                    : g_listen.render && !rendered ? MHD_HTTP_INTERNAL_SERVER_ERROR
                                                   : MHD_HTTP_OK;
    pthread_mutex_lock(&g_listen.mu);
    const char *body = !ok                   ? "not found: GET /metrics only\n"
                       : rendered            ? rendered
                       : code != MHD_HTTP_OK ? "cannot read the figures\n"
                       : g_listen.text       ? g_listen.text
                                             : "";
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
    pthread_mutex_unlock(&g_listen.mu);
    free(rendered);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, "Content-Type",
                            code == MHD_HTTP_OK ? "text/plain; version=0.0.4; charset=utf-8"
                                                : "text/plain");
    enum MHD_Result res = MHD_queue_response(c, code, r);
    MHD_destroy_response(r);
    return res;
}

int metrics_listen_parse(const char *option, const char *addr_port, bool default_host,
                         struct sockaddr_in *out)
{
    char host[64] = "127.0.0.1";
    const char *colon = strrchr(addr_port, ':');
    const char *port_text = colon ? colon + 1 : addr_port;
    long long port;
    struct sockaddr_in addr = {.sin_family = AF_INET};

    if ((!colon && !default_host) || (colon && (size_t)(colon - addr_port) >= sizeof(host))) {
        cli_usage_error("invalid %s '%s': expected ADDR:PORT such as 127.0.0.1:9464", option,
                        addr_port);
        return -EINVAL;
    }
    if (colon) {
        memcpy(host, addr_port, (size_t)(colon - addr_port));
        host[colon - addr_port] = '\0';
    }
    if (inet_pton(AF_INET, host, &addr.sin_addr) != 1) {
        cli_usage_error("invalid %s '%s': '%s' is not an IPv4 address", option, addr_port, host);
        return -EINVAL;
    }
    char what[64];
    snprintf(what, sizeof(what), "%s port", option);
    if (!cli_parse_int(what, port_text, 1, 65535, &port))
        return -EINVAL;
    addr.sin_port = htons((uint16_t)port);
    *out = addr;
    return 0;
}

int metrics_listen_start(const char *option, const char *addr_port, bool default_host,
                         metrics_render_fn render, void *ud)
{
    struct sockaddr_in addr;
    int rc = metrics_listen_parse(option, addr_port, default_host, &addr);
    if (rc < 0)
        return rc;
    g_listen.render = render;
    g_listen.ud = ud;
    g_listen.daemon =
        MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL, ntohs(addr.sin_port), NULL,
                         NULL, on_request, NULL, MHD_OPTION_SOCK_ADDR, &addr, MHD_OPTION_END);
    if (!g_listen.daemon) {
        int err = errno ? errno : EIO;
        char ip[INET_ADDRSTRLEN] = "?";
        inet_ntop(AF_INET, &addr.sin_addr, ip, sizeof(ip));
        cli_error("%s: cannot listen on %s:%u: %s", option, ip, ntohs(addr.sin_port),
                  strerror(err));
        return -err;
    }
    return 0;
}

void metrics_listen_publish(char *text)
{
    pthread_mutex_lock(&g_listen.mu);
    free(g_listen.text);
    g_listen.text = text;
    pthread_mutex_unlock(&g_listen.mu);
}

void metrics_listen_stop(void)
{
    if (g_listen.daemon)
        MHD_stop_daemon(g_listen.daemon);
    g_listen.daemon = NULL;
    metrics_listen_publish(NULL);
}
