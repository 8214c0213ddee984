/*
 * ramforge serve: the JSON of a generation's answers, in the shapes of
 * llama-server's tools/server/server-task.cpp: /completion's object
 * (to_json_non_oaicompat), OpenAI's text_completion and chat.completion
 * (whole, or as streamed chunks), the token probabilities of n_probs /
 * logprobs, the timings, response_fields. Called with the job's mu held.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "serve_fields.h"
#include "serve_http.h"

const char *serve_model_name(const struct serve_options *o)
{
    return o->alias_first[0] ? o->alias_first : o->sess.model;
}

#ifndef RAMFORGE_VERSION
#define RAMFORGE_VERSION "0.0.0"
#endif

void serve_build_info(char *buf, size_t len)
{
    snprintf(buf, len, "ramforge %s (llama.cpp %s)", RAMFORGE_VERSION, forge_llama_version());
}

static json_t *token_json(const int32_t *t, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, json_integer(t[i]));
    return a;
}

/* llama-server's logarithm: log(0) is the lowest float, never -inf (JSON has none). */
static double log_p(float p)
{
    return p <= 0.0f ? -3.4028234663852886e38 : log((double)p);
}

/* {"id","token","bytes", "logprob" or "prob"} of one token. */
static json_t *prob_entry(struct serve *sv, int32_t id, float p, bool post)
{
    char piece[256];
    size_t n = 0;
    if (forge_token_piece(sv->model, id, piece, sizeof(piece), &n) < 0)
        n = 0;
    json_t *bytes = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(bytes, json_integer((unsigned char)piece[i]));
    size_t valid = serve_utf8_complete_len(piece, n);
    return json_pack("{s:i,s:o,s:o,s:f}", "id", id, "token", rf_json_text(piece, valid, NULL),
                     "bytes", bytes, post ? "prob" : "logprob", post ? (double)p : log_p(p));
}

/* completion_probabilities / logprobs.content of tokens [t0, t1). */
static json_t *probs_json(struct serve *sv, const struct serve_job *j, size_t t0, size_t t1)
{
    json_t *a = json_array();
    bool post = j->post_sampling_probs;
    size_t np = (size_t)j->n_probs;
    for (size_t k = t0; k < t1 && a; k++) {
        json_t *top = json_array();
        for (size_t i = 0; i < j->top_n[k]; i++)
            json_array_append_new(
                top, prob_entry(sv, j->top_ids[k * np + i], j->top_p_of[k * np + i], post));
        json_t *e = prob_entry(sv, j->tokens[k], j->probs[k], post);
        json_object_set_new(e, post ? "top_probs" : "top_logprobs", top);
        json_array_append_new(a, e);
    }
    return a;
}

/*
 * llama-server's timings (result_timings::to_json): n_cached prompt tokens the prompt cache
 * held, n_prompt decoded in prompt_ns, n_tokens generated in decode_ns.
 */
static json_t *timings_of(size_t n_cached, size_t n_prompt, uint64_t prompt_ns, size_t n_tokens,
                          uint64_t decode_ns)
{
    double prompt_ms = (double)prompt_ns / 1e6, pred_ms = (double)decode_ns / 1e6;
    size_t n_after_first = n_tokens > 1 ? n_tokens - 1 : 0;
    return json_pack("{s:I,s:I,s:f,s:f,s:f,s:I,s:f,s:f,s:f}", "cache_n", (json_int_t)n_cached,
                     "prompt_n", (json_int_t)n_prompt, "prompt_ms", prompt_ms,
                     "prompt_per_token_ms", n_prompt ? prompt_ms / (double)n_prompt : 0.0,
                     "prompt_per_second", prompt_ms > 0 ? (double)n_prompt / prompt_ms * 1e3 : 0.0,
                     "predicted_n", (json_int_t)n_tokens, "predicted_ms", pred_ms,
                     "predicted_per_token_ms",
                     n_after_first ? pred_ms / (double)n_after_first : 0.0, "predicted_per_second",
                     pred_ms > 0 ? (double)n_after_first / pred_ms * 1e3 : 0.0);
}

static json_t *timings_json(const struct serve_job *j)
{
    return timings_of(j->n_cached, j->n_prompt - j->n_cached, j->prompt_ns, j->n_tokens,
                      j->decode_ns);
}

static json_t *settings_json(struct serve *sv, const struct serve_job *j)
{
    json_t *stop = json_array();
    for (size_t i = 0; i < j->n_stop; i++)
        json_array_append_new(stop, rf_json_str(j->stop[i]));
    return json_pack(
        "{s:I,s:I,s:f,s:I,s:f,s:f,s:I,s:b,s:o,s:I,s:f,s:f,s:f,s:b,s:I,s:b,s:b,s:o}", "n_ctx",
        (json_int_t)sv->n_ctx_limit, "n_predict", (json_int_t)j->n_predict, "temperature",
        (double)j->temperature, "top_k", (json_int_t)j->top_k, "top_p", (double)j->top_p, "min_p",
        (double)j->min_p, "seed", (json_int_t)j->seed, "stream", j->stream, "stop", stop,
        "repeat_last_n", (json_int_t)j->repeat_last_n, "repeat_penalty", (double)j->repeat_penalty,
        "presence_penalty", (double)j->presence_penalty, "frequency_penalty",
        (double)j->frequency_penalty, "ignore_eos", j->ignore_eos, "n_probs",
        (json_int_t)j->n_probs, "post_sampling_probs", j->post_sampling_probs, "backend_sampling",
        j->backend_sampling, "grammar", rf_json_str(j->grammar ? j->grammar : ""));
}

json_t *serve_answer_defaults(struct serve *sv)
{
    struct serve_job j = {.return_tokens = true};
    struct serve_request_env env = serve_request_env_of(sv);
    char msg[256];
    json_t *empty = json_object();
    int st =
        empty ? serve_parse_fields(&env, empty, SERVE_API_COMPLETION, &j, msg, sizeof(msg)) : 500;
    json_decref(empty);
    j.n_predict = (int32_t)sv->o->sess.n_predict;
    json_t *o = st ? NULL : settings_json(sv, &j);
    serve_request_free(&j);
    return o;
}

static const char *model_name(struct serve *sv)
{
    return serve_model_name(sv->o);
}

/* response_fields: only the paths asked for, each under its own name (a/b: nested). */
static json_t *select_fields(const struct serve_job *j, json_t *o)
{
    if (!j->n_response_fields || !o)
        return o;
    json_t *r = json_object();
    for (size_t i = 0; i < j->n_response_fields; i++) {
        char path[256];
        snprintf(path, sizeof(path), "%s", j->response_fields[i]);
        json_t *cur = o;
        for (char *save = NULL, *k = strtok_r(path, "/", &save); k && cur;
             k = strtok_r(NULL, "/", &save))
            cur = json_is_object(cur) ? json_object_get(cur, k) : NULL;
        if (cur)
            json_object_set(r, j->response_fields[i], cur);
    }
    json_decref(o);
    return r;
}

/* /completion's object for text[from..to) and tokens [t0, t1); final: stop and the rest. */
static json_t *completion_json(struct serve *sv, const struct serve_job *j, size_t from, size_t to,
                               size_t t0, size_t t1, bool final)
{
    json_t *o = json_pack("{s:i,s:o,s:o,s:b,s:i,s:I,s:I}", "index", 0, "content",
                          rf_json_text(j->text ? j->text + from : "", to - from, NULL), "tokens",
                          token_json(j->tokens + t0, j->return_tokens || !final ? t1 - t0 : 0),
                          "stop", final, "id_slot", 0, "tokens_predicted", (json_int_t)j->n_tokens,
                          "tokens_evaluated", (json_int_t)j->n_prompt);
    if (!o)
        return NULL;
    if (j->n_probs && (!final || !j->stream) && t1 > t0)
        json_object_set_new(o, "completion_probabilities", probs_json(sv, j, t0, t1));
    if (final) {
        json_object_set_new(o, "model", rf_json_str(model_name(sv)));
        json_object_set_new(o, "prompt", rf_json_str(j->prompt_text ? j->prompt_text : ""));
        json_object_set_new(o, "has_new_line",
                            json_boolean(j->text && memchr(j->text, '\n', j->text_len)));
        json_object_set_new(o, "stop_type", json_string(j->stop_type));
        json_object_set_new(o, "stopping_word", rf_json_str(j->stopping_word));
        json_object_set_new(o, "tokens_cached", json_integer((json_int_t)j->n_kv_kept));
        json_object_set_new(o, "truncated", json_false());
        json_object_set_new(o, "generation_settings", settings_json(sv, j));
    }
    if (final || j->timings_per_token)
        json_object_set_new(o, "timings", timings_json(j));
    return final && !j->stream ? select_fields(j, o) : o;
}

static const char *finish_reason(const struct serve_job *j)
{
    return !strcmp(j->stop_type, "eos") || !strcmp(j->stop_type, "word") ? "stop" : "length";
}

static json_t *usage_json(const struct serve_job *j)
{
    return json_pack("{s:I,s:I,s:I}", "completion_tokens", (json_int_t)j->n_tokens, "prompt_tokens",
                     (json_int_t)j->n_prompt, "total_tokens",
                     (json_int_t)(j->n_prompt + j->n_tokens));
}

/* The envelope of an OpenAI object (id, created, model, system_fingerprint, object). */
static json_t *oai_envelope(struct serve *sv, const struct serve_job *j, const char *object,
                            json_t *choices)
{
    char id[64], build[160];
    snprintf(id, sizeof(id), "%s-%016llx", j->api == SERVE_API_CHAT ? "chatcmpl" : "cmpl",
             (unsigned long long)j->t_queued_ns);
    serve_build_info(build, sizeof(build));
    return json_pack("{s:s,s:s,s:I,s:o,s:s,s:o}", "id", id, "object", object, "created",
                     (json_int_t)time(NULL), "model", rf_json_str(model_name(sv)),
                     "system_fingerprint", build, "choices", choices);
}

/* OpenAI's text_completion for text[from..to) and tokens [t0, t1). */
static json_t *oai_json(struct serve *sv, const struct serve_job *j, size_t from, size_t to,
                        size_t t0, size_t t1, bool final)
{
    json_t *lp = j->n_probs && t1 > t0 ? json_pack("{s:o}", "content", probs_json(sv, j, t0, t1))
                                       : json_null();
    json_t *choice = json_pack("{s:o,s:i,s:o,s:o}", "text",
                               rf_json_text(j->text ? j->text + from : "", to - from, NULL),
                               "index", 0, "logprobs", lp, "finish_reason",
                               final ? json_string(finish_reason(j)) : json_null());
    json_t *o = oai_envelope(sv, j, "text_completion", json_pack("[o]", choice));
    if (final && o)
        json_object_set_new(o, "usage", usage_json(j));
    if ((final || j->timings_per_token) && o)
        json_object_set_new(o, "timings", timings_json(j));
    return o;
}

/* One chat.completion.chunk with delta (stolen). */
static json_t *chat_chunk(struct serve *sv, const struct serve_job *j, json_t *delta,
                          const char *finish)
{
    json_t *choice =
        json_pack("{s:o,s:i,s:o}", "finish_reason", finish ? json_string(finish) : json_null(),
                  "index", 0, "delta", delta);
    return oai_envelope(sv, j, "chat.completion.chunk", json_pack("[o]", choice));
}

json_t *serve_answer_partial(struct serve *sv, const struct serve_job *j, size_t from, size_t to,
                             size_t t0, size_t t1)
{
    if (j->api == SERVE_API_COMPLETION)
        return completion_json(sv, j, from, to, t0, t1, false);
    if (j->api == SERVE_API_OAI)
        return oai_json(sv, j, from, to, t0, t1, false);
    /* chat: the assistant's role first (OpenAI's opening chunk), then the content */
    json_t *a = json_array();
    if (t0 == 0)
        json_array_append_new(
            a, chat_chunk(sv, j, json_pack("{s:s,s:n}", "role", "assistant", "content"), NULL));
    json_t *c = chat_chunk(
        sv, j, json_pack("{s:o}", "content", rf_json_text(j->text + from, to - from, NULL)), NULL);
    if (c && j->n_probs)
        json_object_set_new(json_array_get(json_object_get(c, "choices"), 0), "logprobs",
                            json_pack("{s:o}", "content", probs_json(sv, j, t0, t1)));
    if (c && j->timings_per_token)
        json_object_set_new(c, "timings", timings_json(j));
    json_array_append_new(a, c);
    return a;
}

/* The chat's answer: whole, or (streamed) its last chunks after text[from..to). */
static json_t *chat_final(struct serve *sv, const struct serve_job *j, size_t from, size_t to)
{
    if (!j->stream) {
        json_t *choice = json_pack("{s:s,s:i,s:{s:s,s:o}}", "finish_reason", finish_reason(j),
                                   "index", 0, "message", "role", "assistant", "content",
                                   rf_json_text(j->text ? j->text : "", j->text_len, NULL));
        if (choice && j->n_probs)
            json_object_set_new(choice, "logprobs",
                                json_pack("{s:o}", "content", probs_json(sv, j, 0, j->n_tokens)));
        json_t *o = oai_envelope(sv, j, "chat.completion", json_pack("[o]", choice));
        json_object_set_new(o, "usage", usage_json(j));
        json_object_set_new(o, "timings", timings_json(j));
        return o;
    }
    json_t *a = json_array();
    if (to > from)
        json_array_append_new(
            a,
            chat_chunk(sv, j,
                       json_pack("{s:o}", "content", rf_json_text(j->text + from, to - from, NULL)),
                       NULL));
    json_array_append_new(a, chat_chunk(sv, j, json_object(), finish_reason(j)));
    if (j->include_usage) {
        json_t *u = oai_envelope(sv, j, "chat.completion.chunk", json_array());
        json_object_set_new(u, "usage", usage_json(j));
        json_array_append_new(a, u);
    }
    json_object_set_new(json_array_get(a, json_array_size(a) - 1), "timings", timings_json(j));
    return a;
}

json_t *serve_answer_final(struct serve *sv, const struct serve_job *j, size_t from, size_t to,
                           size_t t0)
{
    if (j->api == SERVE_API_COMPLETION)
        return completion_json(sv, j, from, to, t0, j->n_tokens, true);
    json_t *o = j->api == SERVE_API_OAI ? oai_json(sv, j, from, to, t0, j->n_tokens, true)
                                        : chat_final(sv, j, from, to);
    if (o && j->verbose) { /* llama-server's debugging field: the /completion object */
        json_t *v = completion_json(sv, j, 0, j->text_len, 0, j->n_tokens, true);
        json_object_set_new(json_is_array(o) ? json_array_get(o, 0) : o, "__verbose", v);
    }
    return o;
}

void serve_answer_index(json_t *o, enum serve_api api, size_t i)
{
    json_t *target =
        api == SERVE_API_COMPLETION ? o : json_array_get(json_object_get(o, "choices"), 0);
    json_object_set_new(target, "index", json_integer((json_int_t)i));
}

json_t *serve_answer_merge(json_t *answers, enum serve_api api)
{
    if (api == SERVE_API_COMPLETION)
        return json_incref(answers);
    /* OpenAI: one object, a choice per prompt, the usage summed */
    json_t *o = json_deep_copy(json_array_get(answers, 0)), *choices = json_array(), *a;
    json_int_t sum[3] = {0, 0, 0};
    static const char *const keys[3] = {"completion_tokens", "prompt_tokens", "total_tokens"};
    size_t i;
    json_array_foreach(answers, i, a)
    {
        json_array_append(choices, json_array_get(json_object_get(a, "choices"), 0));
        for (int k = 0; k < 3; k++)
            sum[k] += json_integer_value(json_object_get(json_object_get(a, "usage"), keys[k]));
    }
    json_object_set_new(o, "choices", choices);
    json_object_del(o, "timings"); /* the first prompt's: not the request's */
    json_t *usage = json_object_get(o, "usage");
    for (int k = 0; k < 3; k++)
        json_object_set_new(usage, keys[k], json_integer(sum[k]));
    return o;
}

json_t *serve_answer_progress(struct serve *sv, const struct serve_job *j, size_t k)
{
    /* llama-server's progress: an empty partial answer with prompt_progress (and, with
       timings_per_token, the prompt's timings so far); chat: the assistant's role chunk */
    json_t *o =
        j->api == SERVE_API_COMPLETION ? completion_json(sv, j, 0, 0, 0, 0, false)
        : j->api == SERVE_API_OAI
            ? oai_json(sv, j, 0, 0, 0, 0, false)
            : chat_chunk(sv, j, json_pack("{s:s,s:n}", "role", "assistant", "content"), NULL);
    if (!o)
        return NULL;
    uint64_t ns = j->progress_ns[k];
    json_object_set_new(o, "prompt_progress",
                        json_pack("{s:I,s:I,s:I,s:I}", "total", (json_int_t)j->n_prompt, "cache",
                                  (json_int_t)j->n_cached, "processed",
                                  (json_int_t)j->progress_done[k], "time_ms",
                                  (json_int_t)(ns / 1000000)));
    json_object_set_new(o, "timings",
                        timings_of(j->n_cached, j->progress_done[k] - j->n_cached, ns, 0, 0));
    if (!j->timings_per_token)
        json_object_del(o, "timings");
    return o;
}
