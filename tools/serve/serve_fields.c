/*
 * ramforge serve: the fields of a generation body besides its prompt
 * (serve_fields.h): the lists of what serve honours, their JSON types and
 * ranges (llama-server's, finite numbers only), the samplers, stop
 * strings, logit biases, probabilities and the answer's shape. Apart from
 * the server, as serve_request.c, so tests/fuzz feeds it any body.
 */
#include "serve_fields.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ramforge/error.h"

/* An integer field: absent keeps *out; a non-integer is an error (false, msg). */
bool serve_field_int(json_t *body, const char *key, long long *out, char *msg, size_t len)
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

bool serve_field_number(json_t *body, const char *key, double *out, char *msg, size_t len)
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

/* A string field into *out (NULL when absent or null); false with msg when not a string. */
bool serve_field_string(json_t *body, const char *key, json_t **out, char *msg, size_t len)
{
    json_t *v = json_object_get(body, key);
    *out = json_is_string(v) ? v : NULL;
    if (!v || json_is_null(v) || *out)
        return true;
    snprintf(msg, len, "'%s' must be a string", key);
    return false;
}

bool serve_field_bool(json_t *body, const char *key, bool *out, char *msg, size_t len)
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

/* The generation fields every API honours (docs/guide/serve.md). */
const char *const serve_fields_common[] = {"stream",
                                           "stream_options",
                                           "n_predict",
                                           "max_tokens",
                                           "max_completion_tokens",
                                           "temperature",
                                           "top_k",
                                           "top_p",
                                           "min_p",
                                           "seed",
                                           "stop",
                                           "logit_bias",
                                           "repeat_penalty",
                                           "repeat_last_n",
                                           "presence_penalty",
                                           "frequency_penalty",
                                           "grammar",
                                           "json_schema",
                                           "ignore_eos",
                                           "n_probs",
                                           "post_sampling_probs",
                                           "backend_sampling",
                                           "return_tokens",
                                           "timings_per_token",
                                           "return_progress",
                                           "response_fields",
                                           "n",
                                           "n_cmpl",
                                           "cache_prompt",
                                           "model",
                                           "verbose",
                                           NULL};
/* /completion and /v1/completions besides ("logprobs": OpenAI's n_probs). */
const char *const serve_fields_completion[] = {"prompt", "logprobs", NULL};
/* /v1/chat/completions besides ("logprobs" a boolean there). */
const char *const serve_fields_chat[] = {"messages", "logprobs", "top_logprobs", "response_format",
                                         NULL};

static bool listed(const char *const *list, const char *key)
{
    for (size_t i = 0; list[i]; i++)
        if (!strcmp(list[i], key))
            return true;
    return false;
}

/* Every key of body honoured by api, or false with msg naming the first that is not. */
bool serve_keys_in(json_t *body, const char *const *known, const char *what, char *msg, size_t len)
{
    const char *key;
    json_t *v;
    json_object_foreach(body, key, v) if (!listed(known, key))
    {
        snprintf(msg, len, "'%s' is not implemented by ramforge serve's %s", key, what);
        return false;
    }
    return true;
}

bool serve_fields_known(json_t *body, enum serve_api api, char *msg, size_t len)
{
    const char *key;
    json_t *v;
    json_object_foreach(body, key, v)
    {
        if (listed(serve_fields_common, key) ||
            listed(api == SERVE_API_CHAT ? serve_fields_chat : serve_fields_completion, key))
            continue;
        snprintf(msg, len,
                 "'%s' is not implemented by ramforge serve (docs/guide/serve.md lists "
                 "the fields it honours)",
                 key);
        return false;
    }
    return true;
}

/* A finite number field in [lo, hi]: absent keeps *out. */
bool serve_field_range(json_t *body, const char *key, double lo, double hi, double *out, char *msg,
                       size_t len)
{
    double v = *out;
    if (!serve_field_number(body, key, &v, msg, len))
        return false;
    if (!isfinite(v) || v < lo || v > hi) {
        snprintf(msg, len, "'%s' must be a finite number in [%g, %g]", key, lo, hi);
        return false;
    }
    *out = v;
    return true;
}

/* An integer field in [lo, hi]: absent keeps *out. */
bool serve_field_int_range(json_t *body, const char *key, long long lo, long long hi,
                           long long *out, char *msg, size_t len)
{
    long long v = *out;
    if (!serve_field_int(body, key, &v, msg, len))
        return false;
    if (v < lo || v > hi) {
        snprintf(msg, len, "'%s' must be an integer in [%lld, %lld]", key, lo, hi);
        return false;
    }
    *out = v;
    return true;
}

/* Appends s (copied) to a string list. */
static bool push_string(char ***list, size_t *n, const char *s)
{
    char **p = realloc(*list, (*n + 1) * sizeof(*p));
    if (!p)
        return false;
    *list = p;
    p[*n] = strdup(s);
    return p[(*n)++] != NULL;
}

/* "stop": a string or an array of strings (empty ones skipped, as llama-server). */
static int parse_stop(json_t *body, struct serve_job *j, char *msg, size_t len)
{
    json_t *v = json_object_get(body, "stop");
    if (!v || json_is_null(v))
        return 0;
    if (json_is_string(v))
        return !json_string_length(v) || push_string(&j->stop, &j->n_stop, json_string_value(v))
                   ? 0
                   : 500;
    size_t i;
    json_t *w;
    if (!json_is_array(v))
        goto bad;
    json_array_foreach(v, i, w)
    {
        if (!json_is_string(w))
            goto bad;
        if (json_string_length(w) && !push_string(&j->stop, &j->n_stop, json_string_value(w)))
            return 500;
    }
    return 0;
bad:
    snprintf(msg, len, "'stop' must be a string or an array of strings");
    return 400;
}

/* One logit bias: a number, or false (never sampled). */
static bool bias_value(json_t *v, float *bias)
{
    if (json_is_number(v) && isfinite(json_number_value(v))) {
        *bias = (float)json_number_value(v);
        return true;
    }
    if (json_is_false(v)) {
        *bias = -INFINITY;
        return true;
    }
    return false;
}

/* Adds the bias of key (a token id, or text whose tokens all get it). */
static int add_bias(const struct serve_request_env *env, struct serve_job *j, json_t *tok,
                    const char *key, float bias, char *msg, size_t len)
{
    int32_t *ids = NULL, one = 0;
    size_t n = 1;
    char *end = NULL;
    long long id = json_is_integer(tok) ? json_integer_value(tok)
                   : key && *key        ? strtoll(key, &end, 10)
                                        : -1;
    if (json_is_string(tok) || (key && *end)) {
        int rc =
            env->tokenize(env->ctx, key ? key : json_string_value(tok), false, false, &ids, &n);
        if (rc < 0) {
            snprintf(msg, len, "'logit_bias': cannot tokenize a key");
            return rc == -ENOMEM ? 500 : 400;
        }
    } else if (id < 0 || id >= env->n_vocab) {
        snprintf(msg, len, "'logit_bias': token %lld is not an id in [0, %d)", id, env->n_vocab);
        return 400;
    } else {
        one = (int32_t)id;
        ids = &one;
    }
    struct forge_logit_bias *b = realloc(j->logit_bias, (j->n_logit_bias + n) * sizeof(*b));
    if (b) {
        j->logit_bias = b;
        for (size_t i = 0; i < n; i++)
            b[j->n_logit_bias++] = (struct forge_logit_bias){ids[i], bias};
    }
    if (ids != &one)
        free(ids);
    if (!b)
        snprintf(msg, len, "out of memory");
    return b ? 0 : 500;
}

/* "logit_bias": [[token or text, bias], ...] or {"token or text": bias}. */
static int parse_logit_bias(const struct serve_request_env *env, json_t *body, struct serve_job *j,
                            char *msg, size_t len)
{
    json_t *v = json_object_get(body, "logit_bias"), *e;
    const char *key;
    size_t i;
    float bias;
    int st = 0;
    if (!v || json_is_null(v))
        return 0;
    if (json_is_array(v)) {
        json_array_foreach(v, i, e)
        {
            json_t *t = json_array_get(e, 0);
            if (json_array_size(e) != 2 || !(json_is_integer(t) || json_is_string(t)) ||
                !bias_value(json_array_get(e, 1), &bias))
                goto bad;
            if ((st = add_bias(env, j, t, NULL, bias, msg, len)))
                return st;
        }
        return 0;
    }
    if (!json_is_object(v))
        goto bad;
    json_object_foreach(v, key, e)
    {
        if (!bias_value(e, &bias))
            goto bad;
        if ((st = add_bias(env, j, NULL, key, bias, msg, len)))
            return st;
    }
    return 0;
bad:
    snprintf(msg, len,
             "'logit_bias' must be [[token, bias], ...] or {\"token\": bias} with "
             "finite numbers or false as biases");
    return 400;
}

/* "response_fields": an array of paths (a/b: nested), kept in j. */
static int parse_response_fields(json_t *body, struct serve_job *j, char *msg, size_t len)
{
    json_t *v = json_object_get(body, "response_fields"), *e;
    size_t i;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_array(v))
        goto bad;
    json_array_foreach(v, i, e)
    {
        if (!json_is_string(e))
            goto bad;
        if (!push_string(&j->response_fields, &j->n_response_fields, json_string_value(e)))
            return 500;
    }
    return 0;
bad:
    snprintf(msg, len, "'response_fields' must be an array of strings");
    return 400;
}

/* n_probs from "n_probs", OpenAI's "logprobs" (an integer), or the chat's logprobs/top_logprobs. */
static bool parse_probs(json_t *body, enum serve_api api, long long *n_probs, char *msg, size_t len)
{
    if (api != SERVE_API_CHAT)
        return serve_field_int_range(body, "logprobs", 0, SERVE_N_PROBS_MAX, n_probs, msg, len) &&
               serve_field_int_range(body, "n_probs", 0, SERVE_N_PROBS_MAX, n_probs, msg, len);
    bool logprobs = false;
    long long top = 20; /* llama-server's default top_logprobs */
    if (!serve_field_bool(body, "logprobs", &logprobs, msg, len) ||
        !serve_field_int_range(body, "top_logprobs", 0, SERVE_N_PROBS_MAX, &top, msg, len))
        return false;
    json_t *t = json_object_get(body, "top_logprobs");
    if (!logprobs && t && !json_is_null(t)) {
        snprintf(msg, len, "'top_logprobs' requires 'logprobs' to be true");
        return false;
    }
    if (logprobs)
        *n_probs = top;
    return serve_field_int_range(body, "n_probs", 0, SERVE_N_PROBS_MAX, n_probs, msg, len);
}

/*
 * The schema a chat's "response_format" asks for, as llama-server reads it: {"type":"text"},
 * {"type":"json_object"[,"schema"]} (without one: *schema if given, else any object) or
 * {"type":"json_schema","json_schema":{"schema"[,"name","description","strict"]}}.
 * *schema (a reference the caller holds) is replaced by a new one when the format has one,
 * and *field set to "response_format".
 */
static int response_format_schema(json_t *body, json_t **schema, const char **field, char *msg,
                                  size_t len)
{
    static const char *const rf_keys[] = {"type", "schema", "json_schema", NULL},
                             *const wrapper_keys[] = {"schema", "name", "description", "strict",
                                                      NULL};
    json_t *rf = json_object_get(body, "response_format"), *t = NULL, *w, *found;
    if (!rf || json_is_null(rf))
        return 0;
    if (!json_is_object(rf) || !serve_field_string(rf, "type", &t, msg, len)) {
        snprintf(msg, len, "'response_format' must be an object with a string 'type'");
        return 400;
    }
    if (!serve_keys_in(rf, rf_keys, "response_format", msg, len))
        return 400;
    const char *type = t ? json_string_value(t) : "";
    if (!strcmp(type, "json_object")) {
        found = json_object_get(rf, "schema");
        if (!found && *schema && json_object_size(*schema) + json_array_size(*schema) > 0)
            return 0;
    } else if (!strcmp(type, "json_schema")) {
        w = json_object_get(rf, "json_schema");
        if (!json_is_object(w)) {
            snprintf(msg, len, "'response_format.json_schema' must be an object");
            return 400;
        }
        if (!serve_keys_in(w, wrapper_keys, "response_format.json_schema", msg, len))
            return 400;
        found = json_object_get(w, "schema");
    } else if (*type && strcmp(type, "text")) {
        snprintf(msg, len,
                 "response_format type must be one of \"text\" or \"json_object\", but got: %s",
                 type);
        return 400;
    } else {
        return 0;
    }
    json_decref(*schema);
    *schema = found && !json_is_null(found) ? json_incref(found) : json_object();
    *field = "response_format";
    return *schema ? 0 : 500;
}

/*
 * The request's grammar into j->grammar, as llama-server picks it: "grammar" (GBNF), else
 * "json_schema" (on /completion "grammar" wins over it; in a chat a schema and a grammar
 * are an error) or a chat's "response_format", through env->schema_grammar (an empty
 * schema: any object).
 */
static int parse_grammar(const struct serve_request_env *env, json_t *body, enum serve_api api,
                         struct serve_job *j, char *msg, size_t len)
{
    json_t *g = NULL, *schema = json_incref(json_object_get(body, "json_schema"));
    char err[RF_ERR_MAX] = "", *text = NULL, *dump = NULL;
    const char *field = "json_schema";
    int st = 400;
    if (!serve_field_string(body, "grammar", &g, msg, len))
        goto out;
    if (json_is_null(schema) || (api != SERVE_API_CHAT && json_object_get(body, "grammar"))) {
        json_decref(schema);
        schema = NULL;
    }
    if (api == SERVE_API_CHAT && (st = response_format_schema(body, &schema, &field, msg, len)))
        goto out;
    if (api == SERVE_API_CHAT && schema && json_string_length(g) > 0) {
        snprintf(msg, len, "Cannot use both %s and grammar", field);
        st = 400;
        goto out;
    }
    st = 500;
    if (json_is_object(schema) && json_object_size(schema) == 0) {
        json_decref(schema);
        if (!(schema = json_pack("{s:s}", "type", "object")))
            goto out;
    }
    if (schema) {
        if (!(dump = json_dumps(schema, JSON_COMPACT | JSON_ENCODE_ANY)))
            goto out;
        int rc = env->schema_grammar ? env->schema_grammar(dump, &text, err) : -ENOSYS;
        if (rc == -ENOMEM)
            goto out;
        st = 400;
        if (rc < 0) {
            snprintf(msg, len, "'%s': %s", field,
                     env->schema_grammar ? err : "no JSON-schema-to-grammar conversion here");
            goto out;
        }
    } else if (json_string_length(g) > 0 && !(text = strdup(json_string_value(g)))) {
        goto out;
    }
    st = 400;
    if (text && env->grammar_check && env->grammar_check(env->ctx, text) < 0) {
        snprintf(msg, len, "'%s': llama.cpp cannot parse the grammar (GBNF, start rule 'root')",
                 schema ? field : "grammar");
        goto out;
    }
    j->grammar = text;
    text = NULL;
    st = 0;
out:
    free(text);
    free(dump);
    json_decref(schema);
    return st;
}

/* The sampler fields of body into j (ranges as llama-server's, finite numbers only). */
static int parse_sampling(const struct serve_request_env *env, json_t *body, enum serve_api api,
                          struct serve_job *j, char *msg, size_t len)
{
    long long seed = -1, top_k = 40, last_n = 64, n_cmpl = 1, n_probs = 0;
    double temp = env->temperature, top_p = 0.95, min_p = 0.05, rep = 1.0, freq = 0.0, pres = 0.0;
    bool post = false;
    j->backend_sampling = env->backend_sampling;
    if (!serve_field_int_range(body, "seed", -1, UINT32_MAX, &seed, msg, len) ||
        !serve_field_int_range(body, "top_k", INT32_MIN, INT32_MAX, &top_k, msg, len) ||
        !serve_field_range(body, "temperature", 0.0, 100.0, &temp, msg, len) ||
        !serve_field_range(body, "top_p", 0.0, 1.0, &top_p, msg, len) ||
        !serve_field_range(body, "min_p", 0.0, 1.0, &min_p, msg, len) ||
        !serve_field_int_range(body, "repeat_last_n", -1, INT32_MAX, &last_n, msg, len) ||
        !serve_field_range(body, "repeat_penalty", 0.0, 1e6, &rep, msg, len) ||
        !serve_field_range(body, "frequency_penalty", -1e6, 1e6, &freq, msg, len) ||
        !serve_field_range(body, "presence_penalty", -1e6, 1e6, &pres, msg, len) ||
        !serve_field_bool(body, "post_sampling_probs", &post, msg, len) ||
        !serve_field_bool(body, "backend_sampling", &j->backend_sampling, msg, len) ||
        !serve_field_bool(body, "ignore_eos", &j->ignore_eos, msg, len) ||
        !parse_probs(body, api, &n_probs, msg, len))
        return 400;
    /* one slot: llama-server reads "n_cmpl", else its alias "n" (null: absent), and refuses
       a count above its --parallel naming the field given, in these words */
    json_t *given = json_object_get(body, "n_cmpl");
    const char *n_name = given && !json_is_null(given) ? "n_cmpl" : "n";
    if (!serve_field_int(body, n_name, &n_cmpl, msg, len))
        return 400;
    if (n_cmpl != 1) {
        snprintf(msg, len, "Field '%s': Value must be between 1 <= value <= 1, but got %lld",
                 n_name, n_cmpl);
        return 400;
    }
    if (rep == 0.0) {
        snprintf(msg, len, "'repeat_penalty' must be > 0 (1: off)");
        return 400;
    }
    int st = parse_grammar(env, body, api, j, msg, len);
    if (st)
        return st;
    j->temperature = (float)temp;
    j->top_k = (int32_t)top_k;
    j->top_p = (float)top_p;
    j->min_p = (float)min_p;
    j->seed = seed < 0 ? env->seed : (uint32_t)seed;
    /* -1: the whole context, as llama-server (llama.cpp's sampler takes -1 for 0: off) */
    j->repeat_last_n = last_n == -1 ? (int32_t)env->n_ctx_limit : (int32_t)last_n;
    j->repeat_penalty = (float)rep;
    j->frequency_penalty = (float)freq;
    j->presence_penalty = (float)pres;
    j->penalties = last_n != 0 && (rep != 1.0 || freq != 0.0 || pres != 0.0);
    j->n_probs = (int32_t)n_probs;
    j->post_sampling_probs = post;
    return 0;
}

/* "stream", "stream_options", the answer's shape ("return_tokens", ...). */
static int parse_output(json_t *body, struct serve_job *j, char *msg, size_t len)
{
    json_t *so = json_object_get(body, "stream_options");
    if (!serve_field_bool(body, "stream", &j->stream, msg, len) ||
        !serve_field_bool(body, "return_tokens", &j->return_tokens, msg, len) ||
        !serve_field_bool(body, "timings_per_token", &j->timings_per_token, msg, len) ||
        !serve_field_bool(body, "return_progress", &j->return_progress, msg, len) ||
        !serve_field_bool(body, "verbose", &j->verbose, msg, len))
        return 400;
    j->cache_prompt = true;
    if (!serve_field_bool(body, "cache_prompt", &j->cache_prompt, msg, len))
        return 400; /* serve --prompt-cache keeps the last context; without it, none */
    if (json_is_object(so)) {
        const char *key;
        json_t *v;
        json_object_foreach(so, key, v) if (strcmp(key, "include_usage"))
        {
            snprintf(msg, len, "'stream_options.%s' is not implemented by ramforge serve", key);
            return 400;
        }
        if (!serve_field_bool(so, "include_usage", &j->include_usage, msg, len))
            return 400;
    } else if (so && !json_is_null(so)) {
        snprintf(msg, len, "'stream_options' must be an object");
        return 400;
    }
    json_t *model = NULL; /* one model: any name is this one */
    if (!serve_field_string(body, "model", &model, msg, len))
        return 400;
    return parse_response_fields(body, j, msg, len);
}

/* See serve_fields.h. */
int serve_parse_fields(const struct serve_request_env *env, json_t *body, enum serve_api api,
                       struct serve_job *j, char *msg, size_t len)
{
    int st;
    j->verbose = env->verbose;
    if ((st = parse_sampling(env, body, api, j, msg, len)) ||
        (st = parse_output(body, j, msg, len)) || (st = parse_stop(body, j, msg, len)) ||
        (st = parse_logit_bias(env, body, j, msg, len)))
        return st == 500 ? (snprintf(msg, len, "out of memory"), 500) : st;
    return 0;
}
