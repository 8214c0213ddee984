/*
 * ramforge serve's HTTP replies (serve_http.h): JSON and text bodies, and
 * llama-server's error shape {"error":{"code":N,"message":"...","type":"..."}}
 * (tools/server/utils.hpp, format_error_response), for the routing
 * (serve_http.c) and the completion endpoints (serve_completion.c).
 */
#include "serve_http.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
