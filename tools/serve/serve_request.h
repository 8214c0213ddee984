/*
 * ramforge serve: the JSON body of a request into what the server acts on,
 * without the server (serve_request.c). The HTTP front calls these with
 * its model's tokenizer and limits; the fuzz harness (tests/fuzz) with a
 * fake tokenizer, so every body an outside client can send is parsed
 * without a model.
 */
#ifndef RAMFORGE_TOOLS_SERVE_REQUEST_H
#define RAMFORGE_TOOLS_SERVE_REQUEST_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "serve_queue.h"

#define SERVE_SEED_RANDOM 0xFFFFFFFFu /* LLAMA_DEFAULT_SEED: dist draws a random seed */
#define SERVE_N_PROBS_MAX 100         /* n_probs / top_logprobs above this: 400 */

/* What parsing a request needs from the server. */
struct serve_request_env {
    int32_t n_vocab;       /* token ids are in [0, n_vocab) */
    uint32_t n_ctx_limit;  /* tokens a request may use, prompt + n_predict */
    long long n_predict;   /* n_predict of a body without one; -1: the room left */
    uint32_t seed;         /* seed of a body without one (--seed); SERVE_SEED_RANDOM: random */
    double temperature;    /* temperature of a body without one (--temp, default 0.8) */
    bool backend_sampling; /* backend_sampling of a body without one (--backend-sampling) */
    bool verbose;          /* "verbose" of a body without one (serve -v, as llama-server's) */
    /* forge_tokenize's contract: *tokens (n ids) the caller frees; 0 or -errno. */
    int (*tokenize)(void *ctx, const char *text, bool add_special, bool parse_special,
                    int32_t **tokens, size_t *n);
    /* forge_grammar_check's contract (0 or -EINVAL); NULL: every grammar passes. */
    int (*grammar_check)(void *ctx, const char *grammar);
    /* forge_json_schema_grammar's contract (err: RF_ERR_MAX bytes); NULL: json_schema and
       response_format's schemas are refused with 400. */
    int (*schema_grammar)(const char *schema_json, char **grammar, char *err);
    void *ctx;
};

/*
 * The fields a generation body may carry (api's list; see docs/guide/serve.md,
 * "Serving"): any other is refused with 400 naming it. NULL-terminated.
 */
extern const char *const serve_fields_common[];
extern const char *const serve_fields_completion[];
extern const char *const serve_fields_chat[];

/* The request allocations of j (prompt, biases, grammar, stops, fields), zeroed after. */
void serve_request_free(struct serve_job *j);

/*
 * Parses body[0 .. len) (need not be NUL-terminated) as a JSON object.
 * Returns a new reference the caller json_decref's, or NULL with msg (a
 * 400's message): malformed JSON with its line and column, or not an
 * object.
 */
json_t *serve_body_parse(const char *body, size_t len, char *msg, size_t msg_len);

/*
 * Fills j's request part (api, prompt_tokens and prompt_text owned by j,
 * n_predict, the samplers, stop strings, stream, t_queued_ns) from a
 * /completion, /v1/completions or (with the chat's prompt text, from
 * serve_chat_prompt) /v1/chat/completions body. A field not in the api's
 * list, a wrong type, a non-finite or out-of-range number is a 400 naming
 * the field. Returns 0, or the HTTP status of the error (400; 500 when out
 * of memory) with msg; on error j may hold allocations
 * serve_request_free releases, as on success.
 */
int serve_parse_completion(const struct serve_request_env *env, json_t *body, enum serve_api api,
                           struct serve_job *j, char *msg, size_t msg_len);

/*
 * The prompts of a "prompt" field, as llama-server reads it: a string, an
 * array of token ids and strings (one mixed prompt), or an array of such
 * (several prompts). *n_prompts the count (>= 1), each a new reference in
 * prompts[] (the caller json_decref's them, frees the array). Returns 0,
 * 400 or 500 with msg.
 */
int serve_split_prompts(json_t *body, json_t ***prompts, size_t *n_prompts, char *msg,
                        size_t msg_len);

/*
 * A /tokenize body: *content (borrowed from body) and the three flags
 * (absent: add_special false, parse_special true, with_pieces false).
 * Returns 0 or 400 with msg.
 */
int serve_parse_tokenize(json_t *body, const char **content, bool *add_special, bool *parse_special,
                         bool *with_pieces, char *msg, size_t msg_len);

/*
 * A /detokenize body: "tokens", ids in [0, env->n_vocab), into *tokens (n
 * ids; the caller frees). Returns 0, or 400 (500 out of memory) with msg.
 */
int serve_parse_detokenize(const struct serve_request_env *env, json_t *body, int32_t **tokens,
                           size_t *n, char *msg, size_t msg_len);

#endif
