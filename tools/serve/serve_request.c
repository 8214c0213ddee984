/*
 * ramforge serve: request bodies (JSON, llama-server's fields) into jobs,
 * apart from the HTTP front so that tests/fuzz can feed it any body. Every
 * field is checked for its JSON type and range; an error is a 400 with a
 * message naming the field, and a field serve does not implement is
 * refused the same way, never ignored.
 */
#include "serve_request.h"

#include "serve_fields.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ramforge/core/timing.h"
#include "ramforge/error.h"

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
int serve_split_prompts(json_t *body, json_t ***prompts, size_t *n_prompts, char *msg, size_t len)
{
    json_t *p = json_object_get(body, "prompt"), *e;
    size_t i, n = 1;
    bool several = false;
    *prompts = NULL;
    *n_prompts = 0;
    if (json_is_array(p)) {
        /* several prompts unless it holds a token id (a mixed or token prompt); strings,
           arrays and {"prompt_string"} objects are prompts of their own */
        several = json_array_size(p) > 0;
        json_array_foreach(p, i, e) several = several && !json_is_integer(e);
        n = several ? json_array_size(p) : 1;
    }
    json_t **out = calloc(n, sizeof(*out));
    if (!out) {
        snprintf(msg, len, "out of memory");
        return 500;
    }
    for (i = 0; i < n; i++)
        out[i] = json_incref(several ? json_array_get(p, i) : p);
    *prompts = out;
    *n_prompts = n;
    return 0;
}

/*
 * One prompt (a string, or an array of token ids and strings) into
 * j->prompt_tokens: BOS before a leading string, as llama-server's
 * tokenize_mixed; the text in j->prompt_text.
 */
static int parse_prompt(const struct serve_request_env *env, json_t *prompt, struct serve_job *j,
                        char *msg, size_t len)
{
    if (json_is_object(prompt)) { /* llama-server's JSON prompt: its text, no media */
        static const char *const known[] = {"prompt_string", NULL};
        json_t *text = NULL;
        if (!serve_keys_in(prompt, known, "'prompt' object (multimodal prompts)", msg, len) ||
            !serve_field_string(prompt, "prompt_string", &text, msg, len) || !text)
            return text ? 400 : (snprintf(msg, len, "'prompt' object: no 'prompt_string'"), 400);
        prompt = text;
    }
    json_t *one = json_is_string(prompt) ? json_pack("[O]", prompt) : json_incref(prompt), *e;
    size_t i;
    int st = 0;
    if (!json_is_array(one) || json_array_size(one) == 0 ||
        (json_is_string(prompt) && json_string_length(prompt) == 0)) {
        snprintf(msg, len,
                 "'prompt' must be a non-empty string, array of token ids and strings, "
                 "or array of such prompts");
        st = 400;
        goto out;
    }
    json_array_foreach(one, i, e)
    {
        int32_t *t = NULL;
        size_t n = 0;
        if (json_is_string(e)) {
            int rc = env->tokenize(env->ctx, json_string_value(e), i == 0, true, &t, &n);
            if (rc < 0) {
                snprintf(msg, len, "cannot tokenize the prompt: %s", rf_strerror(rc));
                st = rc == -ENOMEM ? 500 : 400;
                goto out;
            }
        } else {
            json_t *a = json_pack("[O]", e);
            st = token_array(a, env->n_vocab, &t, &n, msg, len);
            json_decref(a);
            if (st) {
                snprintf(msg, len,
                         "'prompt': token %zu is not an integer id in [0, %d) nor "
                         "a string",
                         i, env->n_vocab);
                goto out;
            }
        }
        int32_t *all = realloc(j->prompt_tokens, (j->n_prompt + n + 1) * sizeof(*all));
        if (all) {
            memcpy(all + j->n_prompt, t, n * sizeof(*t));
            j->prompt_tokens = all;
            j->n_prompt += n;
        }
        free(t);
        if (!all) {
            snprintf(msg, len, "out of memory");
            st = 500;
            goto out;
        }
    }
    if (j->n_prompt == 0) {
        snprintf(msg, len, "'prompt' is empty");
        st = 400;
    }
    if (!j->prompt_text && json_is_string(prompt) &&
        !(j->prompt_text = strdup(json_string_value(prompt))))
        st = 500;
out:
    json_decref(one);
    return st;
}
/* See serve_request.h. */
int serve_parse_completion(const struct serve_request_env *env, json_t *body, enum serve_api api,
                           struct serve_job *j, char *msg, size_t len)
{
    int st;
    j->api = api;
    j->return_tokens = true;
    if (!serve_fields_known(body, api, msg, len))
        return 400;
    if (api == SERVE_API_CHAT) {
        if (!j->prompt_text) {
            snprintf(msg, len, "the chat has no prompt");
            return 400;
        }
        json_t *p = json_string(j->prompt_text);
        st = p ? parse_prompt(env, p, j, msg, len) : 500;
        json_decref(p);
    } else {
        json_t **prompts = NULL;
        size_t n = 0;
        st = serve_split_prompts(body, &prompts, &n, msg, len);
        if (st == 0 && n != 1) {
            snprintf(msg, len, "'prompt' holds %zu prompts: one is parsed at a time", n);
            st = 400;
        }
        if (st == 0)
            st = parse_prompt(env, prompts[0], j, msg, len);
        for (size_t i = 0; i < n; i++)
            json_decref(prompts[i]);
        free(prompts);
    }
    if (st)
        return st;
    long long n_predict = env->n_predict;
    if (!serve_field_int(body, "max_tokens", &n_predict, msg, len) ||
        !serve_field_int(body, "max_completion_tokens", &n_predict, msg, len) ||
        !serve_field_int(body, "n_predict", &n_predict, msg, len))
        return 400;
    if ((st = serve_parse_fields(env, body, api, j, msg, len)))
        return st;
    if (j->n_prompt >= env->n_ctx_limit) {
        j->exceeds_context = true;
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
    j->n_predict = (int32_t)n_predict;
    j->t_queued_ns = rf_now_ns();
    return 0;
}

/* See serve_request.h. */
void serve_request_free(struct serve_job *j)
{
    free(j->prompt_tokens);
    free(j->prompt_text);
    free(j->logit_bias);
    free(j->grammar);
    for (size_t i = 0; i < j->n_stop; i++)
        free(j->stop[i]);
    free(j->stop);
    for (size_t i = 0; i < j->n_response_fields; i++)
        free(j->response_fields[i]);
    free(j->response_fields);
    j->prompt_tokens = NULL;
    j->prompt_text = NULL;
    j->logit_bias = NULL;
    j->grammar = NULL;
    j->stop = j->response_fields = NULL;
    j->n_prompt = j->n_logit_bias = j->n_stop = j->n_response_fields = 0;
}

/* See serve_request.h. */
int serve_parse_tokenize(json_t *body, const char **content, bool *add_special, bool *parse_special,
                         bool *with_pieces, char *msg, size_t len)
{
    json_t *c = json_object_get(body, "content");
    static const char *const known[] = {"content", "add_special", "parse_special", "with_pieces",
                                        NULL};
    *content = NULL;
    *add_special = false;
    *parse_special = true;
    *with_pieces = false;
    if (!serve_keys_in(body, known, "/tokenize", msg, len))
        return 400;
    if (!json_is_string(c)) {
        snprintf(msg, len, "'content' must be a string");
        return 400;
    }
    if (!serve_field_bool(body, "add_special", add_special, msg, len) ||
        !serve_field_bool(body, "parse_special", parse_special, msg, len) ||
        !serve_field_bool(body, "with_pieces", with_pieces, msg, len))
        return 400;
    *content = json_string_value(c);
    return 0;
}

/* See serve_request.h. */
int serve_parse_detokenize(const struct serve_request_env *env, json_t *body, int32_t **tokens,
                           size_t *n, char *msg, size_t len)
{
    static const char *const known[] = {"tokens", NULL};
    json_t *a = json_object_get(body, "tokens");
    *tokens = NULL;
    *n = 0;
    if (!serve_keys_in(body, known, "/detokenize", msg, len))
        return 400;
    if (!json_is_array(a)) {
        snprintf(msg, len, "'tokens' must be an array of token ids");
        return 400;
    }
    return token_array(a, env->n_vocab, tokens, n, msg, len);
}
