/*
 * ramforge serve's completion endpoints (serve_http.h): /completion and
 * /v1/completions in llama-server's and OpenAI's shapes, whole or as
 * server-sent events.
 *
 * A request's connection thread waits for its job in steps of
 * SERVE_POLL_MS and checks its socket for a hang-up (POLLRDHUP) between
 * them: a client that leaves cancels its generation after the token being
 * decoded.
 */
#include "serve_http.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SERVE_POLL_MS 20 /* a waiting connection checks its socket this often, ms */

/* --- request parsing (serve_request.c) ---------------------------------------------------- */

static int model_tokenize(void *ctx, const char *text, bool add_special, bool parse_special,
                          int32_t **tokens, size_t *n)
{
    return forge_tokenize(ctx, text, add_special, parse_special, tokens, n);
}

struct serve_request_env serve_request_env_of(struct serve *sv)
{
    return (struct serve_request_env){.n_vocab = sv->info.n_vocab,
                                      .n_ctx_limit = sv->n_ctx_limit,
                                      .n_predict = sv->o->sess.n_predict,
                                      .tokenize = model_tokenize,
                                      .ctx = sv->model};
}

/* Bytes of s[0..n) that end on a whole UTF-8 sequence (an incomplete tail held back). */
static size_t utf8_complete_len(const char *s, size_t n)
{
    for (size_t back = 1; back <= 4 && back <= n; back++) {
        unsigned char c = (unsigned char)s[n - back];
        if ((c & 0xC0) == 0x80)
            continue; /* continuation byte: look further back */
        size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        return need > back ? n - back : n;
    }
    return n;
}

/* The client's socket hung up (or failed). */
static bool client_gone(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci)
        return false;
    struct pollfd p = {.fd = ci->connect_fd, .events = POLLRDHUP};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

/*
 * Waits (j->mu held) until j is done or, with progress, has more than
 * n_seen tokens; cancels j and returns false when the client hangs up.
 */
static bool wait_job(struct MHD_Connection *c, struct serve_job *j, bool progress, size_t n_seen)
{
    while (!j->done && !(progress && j->n_tokens > n_seen)) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += SERVE_POLL_MS * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&j->cv, &j->mu, &ts);
        if (!j->done && client_gone(c)) {
            atomic_store(&j->cancelled, true);
            return false;
        }
    }
    return true;
}

/* --- responses ------------------------------------------------------------------------------ */

static json_t *token_json(const int32_t *t, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, json_integer(t[i]));
    return a;
}

static json_t *timings_json(const struct serve_job *j)
{
    double prompt_ms = (double)j->prompt_ns / 1e6, pred_ms = (double)j->decode_ns / 1e6;
    size_t n_after_first = j->n_tokens > 1 ? j->n_tokens - 1 : 0;
    return json_pack("{s:I,s:f,s:f,s:I,s:f,s:f}", "prompt_n", (json_int_t)j->n_prompt, "prompt_ms",
                     prompt_ms, "prompt_per_second",
                     prompt_ms > 0 ? (double)j->n_prompt / prompt_ms * 1e3 : 0.0, "predicted_n",
                     (json_int_t)j->n_tokens, "predicted_ms", pred_ms, "predicted_per_second",
                     pred_ms > 0 ? (double)n_after_first / pred_ms * 1e3 : 0.0);
}

static json_t *settings_json(struct serve *sv, const struct serve_job *j)
{
    return json_pack("{s:I,s:I,s:f,s:I,s:f,s:f,s:I,s:b}", "n_ctx", (json_int_t)sv->n_ctx_limit,
                     "n_predict", (json_int_t)j->n_predict, "temperature", (double)j->temperature,
                     "top_k", (json_int_t)j->top_k, "top_p", (double)j->top_p, "min_p",
                     (double)j->min_p, "seed", (json_int_t)j->seed, "stream", j->stream);
}

/* llama-server's /completion object for text[from..to) and tokens[t0..t1); final: stop. */
static json_t *completion_json(struct serve *sv, const struct serve_job *j, size_t from, size_t to,
                               size_t t0, size_t t1, bool final)
{
    json_t *o = json_pack("{s:i,s:o,s:o,s:b,s:i,s:I,s:I}", "index", 0, "content",
                          rf_json_text(j->text ? j->text + from : "", to - from, NULL), "tokens",
                          token_json(j->tokens + t0, t1 - t0), "stop", final, "id_slot", 0,
                          "tokens_predicted", (json_int_t)j->n_tokens, "tokens_evaluated",
                          (json_int_t)j->n_prompt);
    if (final && o) {
        json_object_set_new(o, "model", rf_json_str(sv->o->sess.model));
        json_object_set_new(o, "stop_type", json_string(j->stop_type));
        json_object_set_new(o, "truncated", json_false());
        json_object_set_new(o, "timings", timings_json(j));
        json_object_set_new(o, "generation_settings", settings_json(sv, j));
    }
    return o;
}

/* OpenAI's text_completion object for text[from..to); final: finish_reason and usage. */
static json_t *oai_json(struct serve *sv, const struct serve_job *j, size_t from, size_t to,
                        bool final)
{
    char id[64];
    snprintf(id, sizeof(id), "cmpl-%016llx", (unsigned long long)j->t_queued_ns);
    const char *finish = !final ? NULL : !strcmp(j->stop_type, "eos") ? "stop" : "length";
    json_t *choice = json_pack(
        "{s:o,s:i,s:n,s:o}", "text", rf_json_text(j->text ? j->text + from : "", to - from, NULL),
        "index", 0, "logprobs", "finish_reason", finish ? json_string(finish) : json_null());
    json_t *o = json_pack("{s:s,s:s,s:I,s:o,s:[o]}", "id", id, "object", "text_completion",
                          "created", (json_int_t)time(NULL), "model",
                          rf_json_str(sv->o->sess.model), "choices", choice);
    if (final && o)
        json_object_set_new(o, "usage",
                            json_pack("{s:I,s:I,s:I}", "prompt_tokens", (json_int_t)j->n_prompt,
                                      "completion_tokens", (json_int_t)j->n_tokens, "total_tokens",
                                      (json_int_t)(j->n_prompt + j->n_tokens)));
    if (final && o)
        json_object_set_new(o, "timings", timings_json(j));
    return o;
}

/* --- streaming ------------------------------------------------------------------------------ */

struct stream {
    struct serve *sv;
    struct serve_job *job; /* a reference */
    struct MHD_Connection *conn;
    size_t sent_text, sent_tokens; /* what the events so far carried */
    char *pending;                 /* the event being written */
    size_t pending_len, pending_off;
    bool final_sent, done_sent;
};

/* Appends "data: <json>\n\n" (j stolen) as the pending event. */
static void stream_event(struct stream *st, json_t *j, const char *raw)
{
    char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    const char *body = raw ? raw : text ? text : "{}";
    size_t n = strlen(body) + 9;
    free(st->pending);
    st->pending = malloc(n);
    if (st->pending)
        st->pending_len = (size_t)snprintf(st->pending, n, "data: %s\n\n", body);
    st->pending_off = 0;
    free(text);
}

/* MHD's content reader: blocks for the next tokens, writes one event at a time. */
static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    struct stream *st = cls;
    struct serve_job *j = st->job;
    (void)pos;
    while (!st->pending || st->pending_off == st->pending_len) {
        if (st->done_sent)
            return MHD_CONTENT_READER_END_OF_STREAM;
        if (st->final_sent) {
            st->done_sent = true;
            if (j->api != SERVE_API_OAI)
                return MHD_CONTENT_READER_END_OF_STREAM;
            stream_event(st, NULL, "[DONE]");
            break;
        }
        pthread_mutex_lock(&j->mu);
        if (!wait_job(st->conn, j, true, st->sent_tokens)) {
            pthread_mutex_unlock(&j->mu);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        size_t to = j->done ? j->text_len : utf8_complete_len(j->text, j->text_len);
        size_t t1 = j->n_tokens;
        bool final = j->done;
        json_t *ev;
        if (final && j->status != 200) {
            ev = json_pack("{s:{s:i,s:s,s:s}}", "error", "code", j->status, "message", j->message,
                           "type", serve_error_type(j->status));
        } else if (j->api == SERVE_API_OAI) {
            ev = oai_json(st->sv, j, st->sent_text, to, final);
        } else {
            ev = completion_json(st->sv, j, st->sent_text, to, st->sent_tokens, t1, final);
        }
        st->sent_text = to;
        st->sent_tokens = t1;
        st->final_sent = final;
        pthread_mutex_unlock(&j->mu);
        stream_event(st, ev, NULL);
        if (!st->pending)
            return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    size_t n = st->pending_len - st->pending_off;
    if (n > max)
        n = max;
    memcpy(buf, st->pending + st->pending_off, n);
    st->pending_off += n;
    return (ssize_t)n;
}

static void stream_free(void *cls)
{
    struct stream *st = cls;
    if (!st->final_sent)
        atomic_store(&st->job->cancelled, true); /* the connection ended early */
    serve_job_put(st->job);
    free(st->pending);
    free(st);
}

enum MHD_Result serve_handle_completion(struct serve *sv, struct MHD_Connection *c,
                                        struct conn_req *rq, json_t *body, enum serve_api api)
{
    char msg[512];
    struct serve_job *j = serve_job_new();
    if (!j)
        return serve_reply_error(c, 500, "out of memory");
    rq->job = j; /* the connection's reference */
    pthread_mutex_lock(&sv->mu);
    sv->connections_with_job++;
    pthread_mutex_unlock(&sv->mu);
    struct serve_request_env env = serve_request_env_of(sv);
    int st = serve_parse_completion(&env, body, api, j, msg, sizeof(msg));
    if (st)
        return serve_reply_error(c, (unsigned)st, "%s", msg);
    if (!serve_enqueue(sv, j, msg, sizeof(msg)))
        return serve_reply_error(c, 503, "%s", msg);
    pthread_mutex_lock(&j->mu);
    bool alive = wait_job(c, j, j->stream, 0);
    bool ok = j->status == 200 || !j->done;
    pthread_mutex_unlock(&j->mu);
    if (!alive)
        return MHD_NO; /* the client left: close */
    if (!ok)
        return serve_reply_error(c, (unsigned)j->status, "%s", j->message);
    if (j->stream) {
        struct stream *s = calloc(1, sizeof(*s));
        if (!s)
            return serve_reply_error(c, 500, "out of memory");
        s->sv = sv;
        s->job = j;
        s->conn = c;
        pthread_mutex_lock(&j->mu);
        j->refs++;
        pthread_mutex_unlock(&j->mu);
        struct MHD_Response *r =
            MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, s, stream_free);
        if (!r) {
            stream_free(s);
            return MHD_NO;
        }
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
        MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
        enum MHD_Result ret = MHD_queue_response(c, 200, r);
        MHD_destroy_response(r);
        return ret;
    }
    pthread_mutex_lock(&j->mu);
    json_t *o = api == SERVE_API_OAI ? oai_json(sv, j, 0, j->text_len, true)
                                     : completion_json(sv, j, 0, j->text_len, 0, j->n_tokens, true);
    pthread_mutex_unlock(&j->mu);
    return serve_reply_json(c, 200, o);
}
