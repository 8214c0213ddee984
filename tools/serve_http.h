/*
 * ramforge serve's HTTP front, private to it: the replies (serve_reply.c)
 * and the completion endpoints with their server-sent events
 * (serve_completion.c), which the routing and the other endpoints
 * (serve_http.c) use. No file of the three calls back into serve_http.c.
 */
#ifndef RAMFORGE_TOOLS_SERVE_HTTP_H
#define RAMFORGE_TOOLS_SERVE_HTTP_H

#include <jansson.h>
#include <microhttpd.h>
#include <stdbool.h>
#include <stddef.h>

#include "ramforge/json_util.h"
#include "serve.h"
#include "serve_request.h"

/* The request being read on a connection (MHD's con_cls). */
struct conn_req {
    char *body;
    size_t len, cap;
    bool too_big;
    struct serve_job *job; /* a reference, or NULL */
};

/* --- replies (serve_reply.c) --- */

/* llama-server's error type of an HTTP status (tools/server/utils.hpp). */
const char *serve_error_type(int status);

/* Replies with text (malloc'ed, stolen; NULL: MHD_NO) of the given content type. */
enum MHD_Result serve_reply_text(struct MHD_Connection *c, unsigned status, char *text,
                                 const char *type);

/* Replies with j (stolen) as compact JSON. */
enum MHD_Result serve_reply_json(struct MHD_Connection *c, unsigned status, json_t *j);

/* Replies with llama-server's error shape {"error":{"code","message","type"}}. */
enum MHD_Result serve_reply_error(struct MHD_Connection *c, unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* --- the completion endpoints (serve_completion.c) --- */

/* What parsing a request needs from the server: its model's tokenizer and limits. */
struct serve_request_env serve_request_env_of(struct serve *sv);

/*
 * /completion, /completions and /v1/completions: queues the job rq->job
 * (the connection's reference), waits for it, and answers it whole or, with
 * "stream", as server-sent events.
 */
enum MHD_Result serve_handle_completion(struct serve *sv, struct MHD_Connection *c,
                                        struct conn_req *rq, json_t *body, enum serve_api api);

#endif
