/*
 * ramforge serve's HTTP front on libmicrohttpd (one thread per connection):
 * routing, the API key, body limits, JSON bodies (jansson) in llama-server's
 * shapes, and the endpoints but the completions (serve_completion.c); the
 * replies and llama-server's error shape are serve_reply.c's. Connections:
 * at most --max-connections (the idle ones give way, serve_conns.c; a few
 * more for /health alone), --max-connections-per-address of one client
 * address; --header-timeout until a request head is in, --timeout after.
 */
#include "serve_http.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/cli.h"
#include "ramforge/core/timing.h"
#include "ramforge/core/utf8.h"
#include "ramforge/session.h"

/* The authorization of a request: Bearer KEY, or X-Api-Key: KEY. */
static bool authorized(struct serve *sv, struct MHD_Connection *c)
{
    if (!sv->o->api_key)
        return true;
    const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    const char *x = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Api-Key");
    const char *key = sv->o->api_key;
    if (auth && !strncmp(auth, "Bearer ", 7) && !strcmp(auth + 7, key))
        return true;
    return x && !strcmp(x, key);
}

static enum MHD_Result handle_tokenize(struct serve *sv, struct MHD_Connection *c, json_t *body)
{
    const char *content;
    bool add_special, parse_special, with_pieces;
    char msg[256];
    int st = serve_parse_tokenize(body, &content, &add_special, &parse_special, &with_pieces, msg,
                                  sizeof(msg));
    if (st)
        return serve_reply_error(c, (unsigned)st, "%s", msg);
    int32_t *t = NULL;
    size_t n = 0;
    int rc = forge_tokenize(sv->model, content, add_special, parse_special, &t, &n);
    if (rc < 0)
        return serve_reply_error(c, rc == -ENOMEM ? 500 : 400, "cannot tokenize: %s",
                                 rf_strerror(rc));
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++) {
        char piece[256];
        size_t len = 0;
        if (!with_pieces || forge_token_piece(sv->model, t[i], piece, sizeof(piece), &len) < 0) {
            json_array_append_new(a, json_integer(t[i]));
            continue;
        }
        /* llama-server: the piece as text, or its bytes when it is not UTF-8 */
        char *clean = NULL;
        size_t clean_len = 0;
        bool valid = false;
        if (rf_utf8_sanitize(piece, len, &clean, &clean_len, &valid) < 0)
            valid = false;
        json_t *text = valid ? json_stringn(clean, clean_len) : NULL;
        free(clean);
        if (!text) {
            text = json_array();
            for (size_t k = 0; k < len; k++)
                json_array_append_new(text, json_integer((unsigned char)piece[k]));
        }
        json_array_append_new(a, json_pack("{s:i,s:o}", "id", t[i], "piece", text));
    }
    free(t);
    return serve_reply_json(c, 200, json_pack("{s:o}", "tokens", a));
}

static enum MHD_Result handle_detokenize(struct serve *sv, struct MHD_Connection *c, json_t *body)
{
    struct serve_request_env env = serve_request_env_of(sv);
    char msg[256];
    int32_t *t = NULL;
    size_t n = 0;
    int st = serve_parse_detokenize(&env, body, &t, &n, msg, sizeof(msg));
    if (st)
        return serve_reply_error(c, (unsigned)st, "%s", msg);
    char *text = NULL;
    int rc = forge_detokenize(sv->model, t, n, &text);
    free(t);
    if (rc < 0)
        return serve_reply_error(c, rc == -EINVAL ? 400 : 500, "cannot detokenize: %s",
                                 rf_strerror(rc));
    json_t *o = json_pack("{s:o}", "content", rf_json_str(text));
    free(text);
    return serve_reply_json(c, 200, o);
}

static int by_string(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A comma-separated option as a sorted JSON array of its names (none: []); NULL: no memory. */
static json_t *names_json(const char *csv)
{
    char *copy = strdup(csv ? csv : ""), *names[64], *save = NULL;
    size_t n = 0;
    json_t *a = copy ? json_array() : NULL;
    for (char *t = copy ? strtok_r(copy, ",", &save) : NULL; t && n < 64;
         t = strtok_r(NULL, ",", &save))
        names[n++] = t;
    qsort(names, n, sizeof(names[0]), by_string);
    for (size_t i = 0; a && i < n; i++)
        json_array_append_new(a, rf_json_str(names[i]));
    free(copy);
    return a;
}

static json_t *models_json(struct serve *sv)
{
    return json_pack("{s:s,s:[{s:o,s:o,s:o,s:s,s:I,s:s,s:{s:i,s:i,s:i,s:I,s:I}}]}", "object",
                     "list", "data", "id", rf_json_str(serve_model_name(sv->o)), "aliases",
                     names_json(sv->o->alias), "tags", names_json(sv->o->tags), "object", "model",
                     "created", (json_int_t)sv->t_start_s, "owned_by", "llamacpp", "meta",
                     "n_vocab", sv->info.n_vocab, "n_ctx_train", sv->info.n_ctx_train, "n_embd",
                     sv->info.n_embd, "n_params", (json_int_t)sv->info.n_params, "size",
                     (json_int_t)sv->info.size_bytes);
}

static enum MHD_Result handle_props(struct serve *sv, struct MHD_Connection *c)
{
    char build[160];
    serve_build_info(build, sizeof(build));
    const char *tmpl = sv->o->chat_template ? sv->o->chat_template : forge_chat_template(sv->model);
    pthread_mutex_lock(&sv->mu);
    bool sleeping = sv->sleeping;
    json_t *res =
        json_pack("{s:s,s:o,s:s,s:b,s:I,s:I,s:I,s:b,s:I,s:b,s:I}", "state",
                  serve_residency_name(sv->residency), "idle_release_reason",
                  rf_json_str(sv->idle_reason[0] ? sv->idle_reason : NULL), "policy",
                  rf_policy_name(sv->o->sess.policy), "has_memory_target", sv->o->sess.has_target,
                  "memory_target_bytes", (json_int_t)sv->o->sess.target_bytes, "idle_seconds",
                  (json_int_t)sv->o->idle_seconds, "idle_boundaries",
                  (json_int_t)sv->idle_boundaries, "has_staging_budget", sv->o->sess.has_staging,
                  "staging_budget_bytes", (json_int_t)sv->o->sess.staging_budget, "processing",
                  sv->processing, "queued", (json_int_t)sv->queue.n);
    pthread_mutex_unlock(&sv->mu);
    json_t *o = json_pack(
        "{s:{s:I,s:o},s:i,s:o,s:o,s:o,s:s,s:b,s:o}", "default_generation_settings", "n_ctx",
        (json_int_t)sv->n_ctx_limit, "params", serve_answer_defaults(sv), "total_slots", 1,
        "model_path", rf_json_str(sv->o->sess.model), "model_alias",
        rf_json_str(serve_model_name(sv->o)), "chat_template", rf_json_str(tmpl ? tmpl : ""),
        "build_info", build, "is_sleeping", sleeping, "residency", res);
    return serve_reply_json(c, 200, o);
}

/* {"operation": <report>, "session": <report>}: the two documents spliced as text. */
static enum MHD_Result handle_residency(struct serve *sv, struct MHD_Connection *c)
{
    char *op = NULL, *ses = NULL;
    pthread_mutex_lock(&sv->session_mu);
    int rc = rf_session_report_json(sv->session, RF_REPORT_OPERATION, &op);
    if (rc == 0)
        rc = rf_session_report_json(sv->session, RF_REPORT_SESSION, &ses);
    pthread_mutex_unlock(&sv->session_mu);
    if (rc < 0) {
        free(op);
        return serve_reply_error(c, 500, "cannot build the report: %s", rf_strerror(rc));
    }
    size_t n = strlen(op) + strlen(ses) + 32;
    char *text = malloc(n);
    if (text)
        snprintf(text, n, "{\"operation\":%s,\"session\":%s}", op, ses);
    free(op);
    free(ses);
    return serve_reply_text(c, 200, text, "application/json; charset=utf-8");
}

/* /slots: the one slot and its state (each request's context is freed at its end). */
static enum MHD_Result handle_slots(struct serve *sv, struct MHD_Connection *c)
{
    if (sv->o->no_slots)
        return serve_reply_error(c, 501,
                                 "This server does not support slots endpoint. Start it "
                                 "with `--slots`");
    pthread_mutex_lock(&sv->mu);
    bool busy = sv->processing;
    pthread_mutex_unlock(&sv->mu);
    return serve_reply_json(c, 200,
                            json_pack("[{s:i,s:I,s:b,s:b}]", "id", 0, "n_ctx",
                                      (json_int_t)sv->n_ctx_limit, "speculative", 0,
                                      "is_processing", busy));
}

struct route {
    const char *path;
    const char *method;
    bool public_; /* no API key needed (llama-server's public endpoints) */
    int id;
};

enum {
    R_HEALTH,
    R_PROPS,
    R_MODELS,
    R_COMPLETION,
    R_OAI,
    R_TOKENIZE,
    R_DETOKENIZE,
    R_METRICS,
    R_RESIDENCY,
    R_CHAT,
    R_APPLY_TEMPLATE,
    R_SLOTS,
    R_SLOT_ACTION,
    R_INPUT_TOKENS,
    R_RESPONSES_TOKENS,
    R_ANTHROPIC_TOKENS,
};

static const struct route routes[] = {
    {"/health", "GET", true, R_HEALTH},
    {"/v1/health", "GET", true, R_HEALTH},
    {"/props", "GET", false, R_PROPS},
    {"/v1/models", "GET", true, R_MODELS},
    {"/models", "GET", true, R_MODELS},
    {"/completion", "POST", false, R_COMPLETION},
    {"/completions", "POST", false, R_COMPLETION},
    {"/v1/completions", "POST", false, R_OAI},
    {"/tokenize", "POST", false, R_TOKENIZE},
    {"/detokenize", "POST", false, R_DETOKENIZE},
    {"/metrics", "GET", false, R_METRICS},
    {"/residency", "GET", false, R_RESIDENCY},
    {"/v1/chat/completions", "POST", false, R_CHAT},
    {"/chat/completions", "POST", false, R_CHAT},
    {"/apply-template", "POST", false, R_APPLY_TEMPLATE},
    {"/chat/completions/input_tokens", "POST", false, R_INPUT_TOKENS},
    {"/v1/chat/completions/input_tokens", "POST", false, R_INPUT_TOKENS},
    {"/responses/input_tokens", "POST", false, R_RESPONSES_TOKENS},
    {"/v1/responses/input_tokens", "POST", false, R_RESPONSES_TOKENS},
    {"/v1/messages/count_tokens", "POST", false, R_ANTHROPIC_TOKENS},
    {"/slots", "GET", false, R_SLOTS},
    {"/slots/", "POST", false, R_SLOT_ACTION}, /* /slots/<id>?action=save|restore|erase */
};

static enum MHD_Result route_request(struct serve *sv, struct MHD_Connection *c, const char *url,
                                     const char *method, struct conn_req *rq)
{
    const struct route *r = NULL;
    if (!strcmp(method, "OPTIONS")) /* CORS preflight: before the key, as llama-server */
        return serve_reply_text(c, 200, strdup(""), "text/plain");
    for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
        size_t n = strlen(routes[i].path);
        if (!strcmp(routes[i].path, url) ||
            (routes[i].path[n - 1] == '/' && !strncmp(routes[i].path, url, n) && url[n]))
            r = &routes[i];
    }
    if (!r)
        return serve_reply_error(c, 404, "File Not Found");
    if (!r->public_ && !authorized(sv, c))
        return serve_reply_error(c, 401, "Invalid API Key");
    if (strcmp(method, r->method) && !(!strcmp(method, "HEAD") && !strcmp(r->method, "GET")))
        return serve_reply_error(c, 405, "%s is not allowed on %s (use %s)", method, url,
                                 r->method);
    if (rq->too_big)
        return serve_reply_error(c, 413, "the request body is larger than %u bytes",
                                 SERVE_BODY_MAX_BYTES);
    /* what uses the model wakes a sleeping server; /health, /props, /models, /metrics,
       /residency do not (llama-server's answers during sleep) */
    if (r->id != R_HEALTH && r->id != R_PROPS && r->id != R_MODELS && r->id != R_METRICS &&
        r->id != R_RESIDENCY)
        serve_wake(sv);
    switch (r->id) {
    case R_HEALTH:
        return serve_reply_json(c, 200, json_pack("{s:s}", "status", "ok"));
    case R_PROPS:
        return handle_props(sv, c);
    case R_MODELS:
        return serve_reply_json(c, 200, models_json(sv));
    case R_METRICS:
        if (!sv->o->metrics)
            return serve_reply_error(c, 501,
                                     "This server does not support metrics endpoint. Start it "
                                     "with `--metrics`");
        return serve_reply_text(c, 200, serve_metrics_text(sv), "text/plain; version=0.0.4");
    case R_RESIDENCY:
        return handle_residency(sv, c);
    case R_SLOTS:
        return handle_slots(sv, c);
    case R_SLOT_ACTION:
        return serve_reply_error(c, 501,
                                 "This server does not support slots action: ramforge serve "
                                 "frees each request's context at its end, nothing to save");
    default:
        break;
    }
    char msg[256];
    json_t *body = serve_body_parse(rq->body, rq->len, msg, sizeof(msg));
    if (!body)
        return serve_reply_error(c, 400, "%s", msg);
    enum MHD_Result ret;
    if (r->id == R_TOKENIZE)
        ret = handle_tokenize(sv, c, body);
    else if (r->id == R_DETOKENIZE)
        ret = handle_detokenize(sv, c, body);
    else if (r->id == R_APPLY_TEMPLATE)
        ret = serve_handle_apply_template(sv, c, body);
    else if (r->id == R_INPUT_TOKENS)
        ret = serve_handle_input_tokens(sv, c, body);
    else if (r->id == R_RESPONSES_TOKENS || r->id == R_ANTHROPIC_TOKENS)
        ret = serve_handle_count_tokens(sv, c, body, r->id == R_ANTHROPIC_TOKENS);
    else
        ret = serve_handle_completion(sv, c, rq, body,
                                      r->id == R_OAI    ? SERVE_API_OAI
                                      : r->id == R_CHAT ? SERVE_API_CHAT
                                                        : SERVE_API_COMPLETION);
    json_decref(body);
    return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    struct serve *sv = cls;
    struct conn_req *rq = *con_cls;
    (void)version;
    if (!rq) {
        rq = calloc(1, sizeof(*rq));
        if (!rq)
            return MHD_NO;
        *con_cls = rq;
        serve_conn_head_in(sv, c);
        /* The head is in: the body and the reply get --timeout, not --header-timeout. */
        MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, (unsigned int)sv->o->timeout_s);
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > SERVE_BODY_MAX_BYTES)
            rq->too_big = true;
        return MHD_YES;
    }
    if (*upload_data_size) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (rq->too_big || rq->len + n > SERVE_BODY_MAX_BYTES) {
            rq->too_big = true;
            free(rq->body);
            rq->body = NULL;
            rq->len = rq->cap = 0;
            return MHD_YES;
        }
        if (rq->len + n + 1 > rq->cap) {
            size_t cap = (rq->len + n + 1) * 2;
            char *p = realloc(rq->body, cap);
            if (!p)
                return MHD_NO;
            rq->body = p;
            rq->cap = cap;
        }
        memcpy(rq->body + rq->len, upload_data, n);
        rq->len += n;
        return MHD_YES;
    }
    if (atomic_load(&sv->stopping))
        return serve_reply_error(c, 503, "the server is shutting down");
    if (strcmp(url, "/health") && strcmp(url, "/v1/health") && serve_conns_over_limit(sv))
        return serve_reply_error(c, 503,
                                 "%lld connections are open (--max-connections): beyond them "
                                 "only /health is answered",
                                 sv->o->max_connections);
    return route_request(sv, c, url, method, rq);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    struct serve *sv = cls;
    struct conn_req *rq = *con_cls;
    /* A keep-alive connection's next request head gets --header-timeout again. */
    MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT,
                              (unsigned int)sv->o->head_timeout_s);
    serve_conn_head_wait(sv, c);
    if (!rq)
        return;
    if (rq->job) {
        if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK)
            atomic_store(&rq->job->cancelled, true);
        serve_job_put(rq->job);
        pthread_mutex_lock(&sv->mu);
        sv->connections_with_job--;
        pthread_cond_broadcast(&sv->cv);
        pthread_mutex_unlock(&sv->mu);
    }
    free(rq->body);
    free(rq);
    *con_cls = NULL;
}

int serve_http_start(struct serve *sv)
{
    serve_reply_init(sv);
    return serve_listen(sv, on_request, on_completed);
}

void serve_http_stop(struct serve *sv)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += SERVE_DRAIN_SECONDS;
    pthread_mutex_lock(&sv->mu);
    while (sv->connections_with_job > 0 &&
           pthread_cond_timedwait(&sv->cv, &sv->mu, &until) != ETIMEDOUT)
        ;
    pthread_mutex_unlock(&sv->mu);
    serve_listen_stop(sv);
}
