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

#include "ramforge/core/json_util.h"
#include "serve.h"
#include "serve_request.h"

/* The request being read on a connection (MHD's con_cls). */
struct conn_req {
    char *body;
    size_t len, cap;
    bool too_big;
    struct serve_job *job; /* a reference, or NULL */
};

/*
 * Connections open beyond --max-connections, for /health alone: with every
 * connection in a request (the idle ones give way, serve_conns.c), a health
 * check is still answered (every other request beyond the limit: 503).
 */
#define SERVE_HEALTH_RESERVE 4

/*
 * The table of each daemon (MHD_OPTION_CONNECTION_LIMIT): the connections
 * above, and as many again as --max-connections for those closed for others
 * (serve_conns.c) whose threads libmicrohttpd has not joined yet. Beyond it
 * libmicrohttpd closes a new connection at once.
 */
#define SERVE_MHD_TABLE(max_connections) (2 * (max_connections) + SERVE_HEALTH_RESERVE)

/* --- the open connections (serve_conns.c) --- */

/*
 * libmicrohttpd's MHD_OPTION_NOTIFY_CONNECTION (cls: the server): a new
 * connection waits for its head; beyond --max-connections and the reserve
 * it closes those that have waited longest. A closed one leaves the table.
 */
void serve_conn_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                       enum MHD_ConnectionNotificationCode code);

/* c's head is in: off the waiting list; beyond --max-connections the oldest waiting close. */
void serve_conn_head_in(struct serve *sv, struct MHD_Connection *c);

/* c answered its request and stays open (keep-alive): it waits for a head again, from now. */
void serve_conn_head_wait(struct serve *sv, struct MHD_Connection *c);

/* Whether more than --max-connections connections are open (every address; c among them). */
bool serve_conns_over_limit(struct serve *sv);

/* --- listening (serve_listen.c) --- */

/*
 * Starts one libmicrohttpd daemon per --host address (sv->daemons), all on
 * --port (0: the port the first got), each printed. Returns 0 or -errno
 * (said on stderr; none left running).
 */
int serve_listen(struct serve *sv, MHD_AccessHandlerCallback on_request,
                 MHD_RequestCompletedCallback on_completed);

/* Stops every daemon (closes their connections). */
void serve_listen_stop(struct serve *sv);

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

/*
 * The headers every answer carries (serve_reply.c): Process-Start-Time-Unix
 * and, for an Origin --cors-origins allows, Access-Control-Allow-Origin and
 * -Credentials (an OPTIONS preflight: -Methods and -Headers too).
 */
void serve_add_headers(struct serve *sv, struct MHD_Connection *c, struct MHD_Response *r);

/* The server serve_reply_* answer for (its headers); set once by serve_http_start. */
void serve_reply_init(struct serve *sv);

/* --- the completion endpoints (serve_completion.c) --- */

/* Bytes of s[0..n) that end on a whole UTF-8 sequence (an incomplete tail held back). */
size_t serve_utf8_complete_len(const char *s, size_t n);

/*
 * Waits (j->mu held) until j is done or, with progress, has more than
 * n_seen tokens and prompt_progress updates together; cancels j and
 * returns false when the client hangs up.
 */
bool serve_wait_job(struct MHD_Connection *c, struct serve_job *j, bool progress, size_t n_seen);

/* What parsing a request needs from the server: its model's tokenizer and limits. */
struct serve_request_env serve_request_env_of(struct serve *sv);

/* --- the answers' JSON (serve_answer.c), j->mu held --- */

/* "ramforge V (llama.cpp V)": /props' build_info, OpenAI's system_fingerprint. */
void serve_build_info(char *buf, size_t len);

/* A streamed event (or, for chat, an array of chunks) of text[from..to), tokens [t0, t1). */
json_t *serve_answer_partial(struct serve *sv, const struct serve_job *j, size_t from, size_t to,
                             size_t t0, size_t t1);

/* The k-th prompt_progress event of j (return_progress), as llama-server's. */
json_t *serve_answer_progress(struct serve *sv, const struct serve_job *j, size_t k);

/* The whole answer of a done job, or (streamed) its last event(s) after from/t0. */
json_t *serve_answer_final(struct serve *sv, const struct serve_job *j, size_t from, size_t to,
                           size_t t0);

/*
 * The generation settings of a request without fields (the server's
 * defaults, /props' default_generation_settings.params); NULL: no memory.
 */
json_t *serve_answer_defaults(struct serve *sv);

/* Sets the index of prompt i in an answer (/completion's, or its choice's). */
void serve_answer_index(json_t *o, enum serve_api api, size_t i);

/* The answer of several prompts: /completion's array, or one OpenAI object (new reference). */
json_t *serve_answer_merge(json_t *answers, enum serve_api api);

/* --- chat (serve_chat.c) --- */

/*
 * The prompt text of a chat body's "messages" through the model's chat
 * template (forge_chat_apply); *text the caller frees. Refuses (400) what
 * it does not implement: a content part but text, tools,
 * response_format other than text, a final assistant message. Returns 0,
 * 400 or 500 with msg.
 */
int serve_chat_prompt(struct serve *sv, json_t *body, char **text, char *msg, size_t len);

/* POST /chat/completions/input_tokens: {"messages"} -> {"input_tokens"}, the chat's prompt tokens.
 */
enum MHD_Result serve_handle_input_tokens(struct serve *sv, struct MHD_Connection *c, json_t *body);

/*
 * POST /v1/responses/input_tokens ({"input"}) or, anthropic, /v1/messages/count_tokens
 * ({"messages"}) -> {"input_tokens"}: the chat's prompt tokens (serve_count.c).
 */
enum MHD_Result serve_handle_count_tokens(struct serve *sv, struct MHD_Connection *c, json_t *body,
                                          bool anthropic);

/* POST /apply-template: {"messages"} -> {"prompt"}. */
enum MHD_Result serve_handle_apply_template(struct serve *sv, struct MHD_Connection *c,
                                            json_t *body);

/*
 * /completion, /completions, /v1/completions, /v1/chat/completions: queues the job rq->job
 * (the connection's reference), waits for it, and answers it whole or, with
 * "stream", as server-sent events.
 */
enum MHD_Result serve_handle_completion(struct serve *sv, struct MHD_Connection *c,
                                        struct conn_req *rq, json_t *body, enum serve_api api);

#endif
