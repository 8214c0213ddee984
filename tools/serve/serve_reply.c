/*
 * ramforge serve's HTTP replies (serve_http.h): JSON and text bodies, and
 * llama-server's error shape {"error":{"code":N,"message":"...","type":"..."}}
 * (tools/server/utils.hpp, format_error_response), for the routing
 * (serve_http.c) and the completion endpoints (serve_completion.c); the
 * headers of every answer (Process-Start-Time-Unix, CORS).
 */
#include "serve_http.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const char *serve_error_type(int status)
{
    switch (status) {
    case 401:
        return "authentication_error";
    case 404:
        return "not_found_error";
    case 405:
    case 501:
        return "not_supported_error";
    case 500:
        return "server_error";
    case 503:
        return "unavailable_error";
    default:
        return "invalid_request_error";
    }
}

static struct serve *reply_server; /* serve_reply_init's: one server a process */

void serve_reply_init(struct serve *sv)
{
    reply_server = sv;
}

/* origin is http(s)://localhost, 127.0.0.1 or [::1], with or without a port. */
static bool origin_is_local(const char *origin)
{
    static const char *const hosts[] = {"localhost", "127.0.0.1", "[::1]"};
    const char *h = strstr(origin, "://");
    h = h ? h + 3 : origin;
    for (size_t i = 0; i < sizeof(hosts) / sizeof(hosts[0]); i++) {
        size_t n = strlen(hosts[i]);
        if (!strncasecmp(h, hosts[i], n) && (h[n] == '\0' || h[n] == ':' || h[n] == '/'))
            return true;
    }
    return false;
}

/*
 * Whether --cors-origins allows origin ("*": any; "localhost": a local
 * origin, as llama-server's special value; else a comma-separated list).
 */
static bool origin_allowed(const char *list, const char *origin)
{
    if (!strcmp(list, "*"))
        return true;
    if (!strcmp(list, "localhost"))
        return origin_is_local(origin);
    size_t n = strlen(origin);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t k = e ? (size_t)(e - p) : strlen(p);
        if (k == n && !strncasecmp(p, origin, n))
            return true;
        p += k + (e != NULL);
    }
    return false;
}

void serve_add_headers(struct serve *sv, struct MHD_Connection *c, struct MHD_Response *r)
{
    char start[32];
    if (!sv)
        return;
    snprintf(start, sizeof(start), "%llu", (unsigned long long)sv->t_start_s);
    MHD_add_response_header(r, "Process-Start-Time-Unix", start);
    const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
    if (!origin || !sv->o->cors_origins || !origin_allowed(sv->o->cors_origins, origin))
        return;
    MHD_add_response_header(r, "Access-Control-Allow-Origin", origin);
    MHD_add_response_header(r, "Access-Control-Allow-Credentials", "true");
    MHD_add_response_header(r, "Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS");
    MHD_add_response_header(r, "Access-Control-Allow-Headers", "*");
}

enum MHD_Result serve_reply_text(struct MHD_Connection *c, unsigned status, char *text,
                                 const char *type)
{
    if (!text)
        return MHD_NO;
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(text);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    serve_add_headers(reply_server, c, r);
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

enum MHD_Result serve_reply_json(struct MHD_Connection *c, unsigned status, json_t *j)
{
    char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    return serve_reply_text(c, status, text, "application/json; charset=utf-8");
}

enum MHD_Result serve_reply_error(struct MHD_Connection *c, unsigned status, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return serve_reply_json(c, status,
                            json_pack("{s:{s:i,s:o,s:s}}", "error", "code", (int)status, "message",
                                      rf_json_str(msg), "type", serve_error_type((int)status)));
}
