/*
 * ramforge serve's completion endpoints (serve_http.h): /completion,
 * /v1/completions and /v1/chat/completions in llama-server's and OpenAI's
 * shapes, whole or as server-sent events (one token an event, as
 * llama-server; text held back while it may be the start of a stop string
 * or of a UTF-8 sequence). The JSON of the answers is serve_answer.c's.
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

#include "ramforge/forge/forge_common.h"

#define SERVE_POLL_MS 20 /* a waiting connection checks its socket this often, ms */

/* --- request parsing (serve_request.c) ---------------------------------------------------- */

static int model_tokenize(void *ctx, const char *text, bool add_special, bool parse_special,
                          int32_t **tokens, size_t *n)
{
    return forge_tokenize(ctx, text, add_special, parse_special, tokens, n);
}

static int model_grammar_check(void *ctx, const char *grammar)
{
    return forge_grammar_check(ctx, grammar);
}

struct serve_request_env serve_request_env_of(struct serve *sv)
{
    return (struct serve_request_env){.n_vocab = sv->info.n_vocab,
                                      .n_ctx_limit = sv->n_ctx_limit,
                                      .n_predict = sv->o->sess.n_predict,
                                      .seed = sv->o->seed < 0 ? SERVE_SEED_RANDOM
                                                              : (uint32_t)sv->o->seed,
                                      .temperature = sv->o->temperature,
                                      .backend_sampling = sv->o->backend_sampling,
                                      .verbose = sv->o->sess.verbose,
                                      .tokenize = model_tokenize,
                                      .grammar_check = model_grammar_check,
                                      .schema_grammar = forge_json_schema_grammar,
                                      .ctx = sv->model};
}

/* Bytes of s[0..n) that end on a whole UTF-8 sequence (an incomplete tail held back). */
size_t serve_utf8_complete_len(const char *s, size_t n)
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

bool serve_wait_job(struct MHD_Connection *c, struct serve_job *j, bool progress, size_t n_seen)
{
    while (!j->done && !(progress && j->n_tokens + j->n_progress > n_seen)) {
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

/* --- streaming ------------------------------------------------------------------------------ */

struct stream {
    struct serve *sv;
    struct serve_job *job;   /* a reference */
    struct serve_job **more; /* several prompts: the jobs after job, a reference each (NULL
                                once started), queued one at a time as job ends */
    size_t n_more, index;    /* index: job's prompt among them all */
    struct MHD_Connection *conn;
    size_t sent_text, sent_tokens; /* what the events so far carried */
    size_t sent_progress;          /* prompt_progress events sent */
    char *pending;                 /* the events being written */
    size_t pending_len, pending_off;
    bool final_sent, done_sent;
};

/* Appends "data: <json>\n\n" (j stolen; an array: one event each) to the pending events. */
static bool stream_event(struct stream *st, json_t *j, const char *raw)
{
    if (json_is_array(j)) {
        size_t i;
        json_t *e;
        bool ok = true;
        json_array_foreach(j, i, e) ok = ok && stream_event(st, json_incref(e), NULL);
        json_decref(j);
        return ok;
    }
    char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    const char *body = raw ? raw : text;
    if (!body)
        return false;
    if (st->pending_off == st->pending_len)
        st->pending_len = st->pending_off = 0;
    size_t n = strlen(body) + 9;
    char *p = realloc(st->pending, st->pending_len + n);
    if (p) {
        st->pending = p;
        st->pending_len += (size_t)snprintf(p + st->pending_len, n, "data: %s\n\n", body);
    }
    free(text);
    return p != NULL;
}

/* Bytes at the end of j's text that may begin a stop string (held back while generating). */
static size_t stop_prefix_len(const struct serve_job *j)
{
    size_t hold = 0;
    for (size_t i = 0; i < j->n_stop; i++) {
        size_t wl = strlen(j->stop[i]);
        for (size_t k = wl - 1; k > hold; k--)
            if (k <= j->text_len && !memcmp(j->text + j->text_len - k, j->stop[i], k)) {
                hold = k;
                break;
            }
    }
    return hold;
}

/*
 * The next event of st (j->mu held): the tokens after sent_tokens up to
 * the first whose text can be sent; NULL when none can yet.
 */
static json_t *next_event(struct stream *st, struct serve_job *j)
{
    size_t t1 = st->sent_tokens, end = st->sent_text;
    size_t limit = j->text_len - (j->done ? 0 : stop_prefix_len(j));
    while (t1 < j->n_tokens) {
        size_t e = j->ends[t1++];
        e = e < limit ? e : limit;
        if (!j->done)
            e = serve_utf8_complete_len(j->text, e);
        if (e > end)
            end = e;
        if (end > st->sent_text)
            break;
    }
    if (t1 == st->sent_tokens || (end == st->sent_text && !j->done))
        return NULL;
    json_t *ev = serve_answer_partial(st->sv, j, st->sent_text, end, st->sent_tokens, t1);
    st->sent_text = end;
    st->sent_tokens = t1;
    return ev;
}

/*
 * Several prompts: after a prompt's final event, the next prompt's job
 * (queued now, one slot) streams on in the same response, its events
 * carrying its index, as llama-server streams every prompt of a request.
 * False when none is left or it cannot be queued (then an error event).
 */
static bool stream_next_prompt(struct stream *st)
{
    char why[256];
    if (st->index >= st->n_more)
        return false;
    struct serve_job *j = st->more[st->index];
    st->more[st->index++] = NULL;
    serve_job_put(st->job);
    st->job = j;
    st->sent_text = st->sent_tokens = st->sent_progress = 0;
    st->final_sent = false;
    if (serve_enqueue(st->sv, j, why, sizeof(why)))
        return true;
    st->final_sent = true;
    stream_event(st,
                 json_pack("{s:{s:i,s:s,s:s}}", "error", "code", 503, "message", why, "type",
                           serve_error_type(503)),
                 NULL);
    st->index = st->n_more; /* nothing after an error, as llama-server */
    return true;
}

/* MHD's content reader: blocks for the next token, writes its event. */
static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    struct stream *st = cls;
    struct serve_job *j = st->job;
    (void)pos;
    while (st->pending_off == st->pending_len) {
        if (st->done_sent)
            return MHD_CONTENT_READER_END_OF_STREAM;
        if (st->final_sent && stream_next_prompt(st)) {
            j = st->job;
            continue;
        }
        if (st->final_sent) {
            st->done_sent = true;
            if (j->api == SERVE_API_COMPLETION)
                return MHD_CONTENT_READER_END_OF_STREAM;
            stream_event(st, NULL, "[DONE]");
            break;
        }
        pthread_mutex_lock(&j->mu);
        json_t *ev = NULL;
        bool error = false;
        while (!(ev = st->sent_progress < j->n_progress
                          ? serve_answer_progress(st->sv, j, st->sent_progress++)
                          : next_event(st, j)) &&
               !(j->done && st->sent_tokens == j->n_tokens)) {
            if (!serve_wait_job(st->conn, j, true, j->n_tokens + j->n_progress)) {
                pthread_mutex_unlock(&j->mu);
                return MHD_CONTENT_READER_END_WITH_ERROR;
            }
        }
        if (!ev) { /* done, every token sent: the final event */
            st->final_sent = true;
            error = j->status != 200;
            if (error)
                ev = json_pack("{s:{s:i,s:s,s:s}}", "error", "code", j->status, "message",
                               j->message, "type", serve_error_type(j->status));
            else
                ev = serve_answer_final(st->sv, j, st->sent_text, j->text_len, st->sent_tokens);
            st->sent_text = j->text_len;
        }
        if (st->n_more && !error)
            serve_answer_index(ev, j->api, st->index);
        pthread_mutex_unlock(&j->mu);
        if (!stream_event(st, ev, NULL))
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
    for (size_t i = 0; i < st->n_more; i++)
        serve_job_put(st->more[i]);
    free(st->more);
    free(st->pending);
    free(st);
}

/* Streams j, then the jobs of more (n_more, their references taken) one after the other. */
static enum MHD_Result reply_stream(struct serve *sv, struct MHD_Connection *c, struct serve_job *j,
                                    struct serve_job **more, size_t n_more)
{
    struct stream *s = calloc(1, sizeof(*s));
    if (!s) {
        for (size_t i = 0; i < n_more; i++)
            serve_job_put(more[i]);
        free(more);
        return serve_reply_error(c, 500, "out of memory");
    }
    s->sv = sv;
    s->job = j;
    s->more = more;
    s->n_more = n_more;
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
    serve_add_headers(sv, c, r);
    enum MHD_Result ret = MHD_queue_response(c, 200, r);
    MHD_destroy_response(r);
    return ret;
}

/* --- the handler ----------------------------------------------------------------------------- */

/* Parses body for one prompt into j; 0 or the HTTP status of an error (msg). */
static int parse_job(struct serve *sv, json_t *body, enum serve_api api, const char *chat_prompt,
                     struct serve_job *j, char *msg, size_t len)
{
    if (chat_prompt && !(j->prompt_text = strdup(chat_prompt))) {
        snprintf(msg, len, "out of memory");
        return 500;
    }
    struct serve_request_env env = serve_request_env_of(sv);
    int st = serve_parse_completion(&env, body, api, j, msg, len);
    if (st)
        return st;
    /* "prompt" as llama-server echoes it: the tokens' text, special ones rendered ("<s> ...") */
    free(j->prompt_text);
    j->prompt_text = NULL;
    if (forge_detokenize(sv->model, j->prompt_tokens, j->n_prompt, &j->prompt_text) < 0) {
        snprintf(msg, len, "cannot detokenize the prompt");
        return 400;
    }
    return 0;
}

/*
 * Parses body for one prompt into a new job (rq->job, the connection's
 * reference, replacing the previous one), queues it and waits for it (a
 * streamed one: for its first token). Returns 0 or the HTTP status of an
 * error (msg).
 */
static int run_one(struct serve *sv, struct MHD_Connection *c, struct conn_req *rq, json_t *body,
                   enum serve_api api, const char *chat_prompt, bool *alive, char *msg, size_t len)
{
    struct serve_job *j = serve_job_new();
    if (!j) {
        snprintf(msg, len, "out of memory");
        return 500;
    }
    if (rq->job) {
        serve_job_put(rq->job);
    } else { /* the connection is bound to a job from now on (on_completed undoes it) */
        pthread_mutex_lock(&sv->mu);
        sv->connections_with_job++;
        pthread_mutex_unlock(&sv->mu);
    }
    rq->job = j;
    int st = parse_job(sv, body, api, chat_prompt, j, msg, len);
    if (st)
        return st;
    if (!serve_enqueue(sv, j, msg, len))
        return 503;
    pthread_mutex_lock(&j->mu);
    *alive = serve_wait_job(c, j, j->stream, 0);
    int status = j->done && j->status != 200 ? j->status : 0;
    if (status)
        snprintf(msg, len, "%s", j->message);
    pthread_mutex_unlock(&j->mu);
    return status;
}

/*
 * A streamed request of n prompts: the jobs of prompts 1..n-1 parsed
 * before anything is sent (an error answers 400 as one prompt's would),
 * streamed after prompt 0's (reply_stream). Returns 0 or the status (msg).
 */
static int parse_more(struct serve *sv, json_t *b, enum serve_api api, json_t **prompts, size_t n,
                      struct serve_job ***more, size_t *n_more, char *msg, size_t len)
{
    struct serve_job **jobs = calloc(n - 1, sizeof(*jobs));
    int st = jobs ? 0 : 500;
    for (size_t i = 1; !st && i < n; i++) {
        json_object_set(b, "prompt", prompts[i]);
        jobs[i - 1] = serve_job_new();
        st = jobs[i - 1] ? parse_job(sv, b, api, NULL, jobs[i - 1], msg, len) : 500;
        if (!st)
            *n_more = i;
    }
    if (st == 500)
        snprintf(msg, len, "out of memory");
    if (st) {
        for (size_t i = 0; jobs && i < n - 1; i++)
            serve_job_put(jobs[i]);
        free(jobs);
        *n_more = 0;
        return st;
    }
    *more = jobs;
    return 0;
}

enum MHD_Result serve_handle_completion(struct serve *sv, struct MHD_Connection *c,
                                        struct conn_req *rq, json_t *body, enum serve_api api)
{
    char msg[768];
    json_t **prompts = NULL, *answers = json_array(), *one = NULL;
    size_t n = 1;
    char *chat = NULL;
    bool alive = true;
    int st = 0;
    enum MHD_Result ret = MHD_NO;
    if (api == SERVE_API_CHAT)
        st = serve_chat_prompt(sv, body, &chat, msg, sizeof(msg));
    else
        st = serve_split_prompts(body, &prompts, &n, msg, sizeof(msg));
    json_t *b = st ? NULL : json_copy(body);
    if (!st && (!answers || !b))
        st = 500, snprintf(msg, sizeof(msg), "out of memory");
    struct serve_job **more = NULL;
    size_t n_more = 0;
    if (!st && n > 1 && json_is_true(json_object_get(body, "stream")))
        st = parse_more(sv, b, api, prompts, n, &more, &n_more, msg, sizeof(msg));
    for (size_t i = 0; !st && i < n; i++) {
        if (prompts)
            json_object_set(b, "prompt", prompts[i]);
        st = run_one(sv, c, rq, b, api, chat, &alive, msg, sizeof(msg));
        if (!alive) {
            ret = MHD_NO; /* the client left: close */
            goto out;
        }
        if (!st && rq->job->stream) {
            ret = reply_stream(sv, c, rq->job, more, n_more);
            more = NULL;
            n_more = 0;
            goto out;
        }
        if (!st) {
            pthread_mutex_lock(&rq->job->mu);
            one = serve_answer_final(sv, rq->job, 0, rq->job->text_len, 0);
            pthread_mutex_unlock(&rq->job->mu);
            st = one ? 0 : 500;
            if (n > 1)
                serve_answer_index(one, api, i);
            json_array_append_new(answers, one);
        }
    }
    if (st && rq->job && rq->job->exceeds_context)
        ret = serve_reply_json(c, 400,
                               json_pack("{s:{s:i,s:s,s:s,s:I,s:I}}", "error", "code", 400,
                                         "message", msg, "type", "exceed_context_size_error",
                                         "n_prompt_tokens", (json_int_t)rq->job->n_prompt, "n_ctx",
                                         (json_int_t)sv->n_ctx_limit));
    else if (st)
        ret = serve_reply_error(c, (unsigned)st, "%s", msg);
    else if (n == 1)
        ret = serve_reply_json(c, 200, json_incref(json_array_get(answers, 0)));
    else
        ret = serve_reply_json(c, 200, serve_answer_merge(answers, api));
out:
    for (size_t i = 0; i < n_more; i++)
        serve_job_put(more[i]);
    free(more);
    for (size_t i = 0; prompts && i < n; i++)
        json_decref(prompts[i]);
    free(prompts);
    free(chat);
    json_decref(b);
    json_decref(answers);
    return ret;
}
