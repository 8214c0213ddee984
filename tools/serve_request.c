/*
 * ramforge serve: request bodies (JSON, llama-server's fields) into jobs,
 * apart from the HTTP front so that tests/fuzz can feed it any body. Every
 * field is checked for its JSON type and range; an error is a 400 with a
 * message naming the field.
 */
#include "serve_request.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ramforge/error.h"
#include "ramforge/timing.h"

/* See serve_request.h. */
json_t *serve_body_parse(const char *body, size_t len, char *msg, size_t msg_len)
{
    json_error_t jerr;
    json_t *j = json_loadb(body ? body : "", body ? len : 0, 0, &jerr);
    if (!j) {
        snprintf(msg, msg_len, "malformed JSON body: %s (line %d, column %d)", jerr.text, jerr.line,
                 jerr.column);
        return NULL;
    }
    if (!json_is_object(j)) {
        json_decref(j);
        snprintf(msg, msg_len, "the body must be a JSON object");
        return NULL;
    }
    return j;
}

/* An integer field: absent keeps *out; a non-integer is an error (false, msg). */
static bool field_int(json_t *body, const char *key, long long *out, char *msg, size_t len)
{
    json_t *v = json_object_get(body, key);
    if (!v || json_is_null(v))
        return true;
    if (!json_is_integer(v)) {
        snprintf(msg, len, "'%s' must be an integer", key);
        return false;
    }
    *out = json_integer_value(v);
    return true;
}

static bool field_number(json_t *body, const char *key, double *out, char *msg, size_t len)
{
    json_t *v = json_object_get(body, key);
    if (!v || json_is_null(v))
        return true;
    if (!json_is_number(v)) {
        snprintf(msg, len, "'%s' must be a number", key);
        return false;
    }
    *out = json_number_value(v);
    return true;
}

static bool field_bool(json_t *body, const char *key, bool *out, char *msg, size_t len)
{
    json_t *v = json_object_get(body, key);
    if (!v || json_is_null(v))
        return true;
    if (!json_is_boolean(v)) {
        snprintf(msg, len, "'%s' must be a boolean", key);
        return false;
    }
    *out = json_is_true(v);
    return true;
}

/*
 * An array of token ids in [0, n_vocab) into a new array (caller frees).
 * Returns 0, or 400 (500 out of memory) with msg.
 */
static int token_array(json_t *a, int32_t n_vocab, int32_t **out, size_t *n, char *msg, size_t len)
{
    size_t count = json_array_size(a);
    int32_t *t = calloc(count + 1, sizeof(*t));
    if (!t) {
        snprintf(msg, len, "out of memory");
        return 500;
    }
    for (size_t i = 0; i < count; i++) {
        json_t *v = json_array_get(a, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= n_vocab) {
            snprintf(msg, len, "token %zu is not an integer id in [0, %d)", i, n_vocab);
            free(t);
            return 400;
        }
        t[i] = (int32_t)json_integer_value(v);
    }
    *out = t;
    *n = count;
    return 0;
}

/* See serve_request.h. */
int serve_parse_completion(const struct serve_request_env *env, json_t *body, enum serve_api api,
                           struct serve_job *j, char *msg, size_t len)
{
    json_t *prompt = json_object_get(body, "prompt");
    if (json_is_string(prompt)) {
        if (json_string_length(prompt) == 0) {
            snprintf(msg, len, "'prompt' is empty");
            return 400;
        }
        int rc = env->tokenize(env->ctx, json_string_value(prompt), true, true, &j->prompt_tokens,
                               &j->n_prompt);
        if (rc < 0) {
            snprintf(msg, len, "cannot tokenize the prompt: %s", rf_strerror(rc));
            return rc == -ENOMEM ? 500 : 400;
        }
    } else if (json_is_array(prompt) && json_array_size(prompt) > 0) {
        int st = token_array(prompt, env->n_vocab, &j->prompt_tokens, &j->n_prompt, msg, len);
        if (st)
            return st;
    } else {
        snprintf(msg, len, "'prompt' must be a non-empty string or array of token ids");
        return 400;
    }
    long long n_predict = env->n_predict, seed = -1, top_k = 40;
    double temp = 0.8, top_p = 0.95, min_p = 0.05;
    bool stream = false;
    if (api == SERVE_API_OAI && !field_int(body, "max_tokens", &n_predict, msg, len))
        return 400;
    if (!field_int(body, "n_predict", &n_predict, msg, len) ||
        !field_int(body, "seed", &seed, msg, len) || !field_int(body, "top_k", &top_k, msg, len) ||
        !field_number(body, "temperature", &temp, msg, len) ||
        !field_number(body, "top_p", &top_p, msg, len) ||
        !field_number(body, "min_p", &min_p, msg, len) ||
        !field_bool(body, "stream", &stream, msg, len))
        return 400;
    if (j->n_prompt >= env->n_ctx_limit) {
        snprintf(msg, len, "the prompt of %zu tokens does not fit the context of %u tokens (-c)",
                 j->n_prompt, env->n_ctx_limit);
        return 400;
    }
    uint32_t room = env->n_ctx_limit - (uint32_t)j->n_prompt;
    if (n_predict == -1)
        n_predict = room;
    if (n_predict < 1 || n_predict > room) {
        snprintf(msg, len,
                 "'n_predict' must be -1 or in 1..%u (the context of %u tokens minus the "
                 "prompt's %zu)",
                 room, env->n_ctx_limit, j->n_prompt);
        return 400;
    }
    if (seed < -1 || seed > UINT32_MAX || temp > 100.0 || top_p < 0.0 || min_p < 0.0 ||
        top_k > INT32_MAX || top_k < INT32_MIN) {
        snprintf(msg, len,
                 "a sampling parameter is out of range (seed -1..2^32-1, "
                 "temperature <= 100, top_p and min_p >= 0)");
        return 400;
    }
    j->api = api;
    j->stream = stream;
    j->n_predict = (int32_t)n_predict;
    j->temperature = (float)temp;
    j->top_k = (int32_t)top_k;
    j->top_p = (float)top_p;
    j->min_p = (float)min_p;
    j->seed = seed < 0 ? SERVE_SEED_RANDOM : (uint32_t)seed;
    j->t_queued_ns = rf_now_ns();
    return 0;
}

/* See serve_request.h. */
int serve_parse_tokenize(json_t *body, const char **content, bool *add_special, bool *parse_special,
                         bool *with_pieces, char *msg, size_t len)
{
    json_t *c = json_object_get(body, "content");
    *content = NULL;
    *add_special = false;
    *parse_special = true;
    *with_pieces = false;
    if (!json_is_string(c)) {
        snprintf(msg, len, "'content' must be a string");
        return 400;
    }
    if (!field_bool(body, "add_special", add_special, msg, len) ||
        !field_bool(body, "parse_special", parse_special, msg, len) ||
        !field_bool(body, "with_pieces", with_pieces, msg, len))
        return 400;
    *content = json_string_value(c);
    return 0;
}

/* See serve_request.h. */
int serve_parse_detokenize(const struct serve_request_env *env, json_t *body, int32_t **tokens,
                           size_t *n, char *msg, size_t len)
{
    json_t *a = json_object_get(body, "tokens");
    *tokens = NULL;
    *n = 0;
    if (!json_is_array(a)) {
        snprintf(msg, len, "'tokens' must be an array of token ids");
        return 400;
    }
    return token_array(a, env->n_vocab, tokens, n, msg, len);
}
