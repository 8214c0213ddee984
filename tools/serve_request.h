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

/* What parsing a request needs from the server. */
struct serve_request_env {
    int32_t n_vocab;      /* token ids are in [0, n_vocab) */
    uint32_t n_ctx_limit; /* tokens a request may use, prompt + n_predict */
    long long n_predict;  /* n_predict of a body without one; -1: the room left */
    /* forge_tokenize's contract: *tokens (n ids) the caller frees; 0 or -errno. */
    int (*tokenize)(void *ctx, const char *text, bool add_special, bool parse_special,
                    int32_t **tokens, size_t *n);
    void *ctx;
};

/*
 * Parses body[0 .. len) (need not be NUL-terminated) as a JSON object.
 * Returns a new reference the caller json_decref's, or NULL with msg (a
 * 400's message): malformed JSON with its line and column, or not an
 * object.
 */
json_t *serve_body_parse(const char *body, size_t len, char *msg, size_t msg_len);

/*
 * Fills j's request part (api, prompt_tokens owned by j, n_predict,
 * sampling, stream, t_queued_ns) from a /completion or /v1/completions
 * body. Returns 0, or the HTTP status of the error (400; 500 when out of
 * memory) with msg; on error j->prompt_tokens may hold an allocation the
 * job's owner frees as on success.
 */
int serve_parse_completion(const struct serve_request_env *env, json_t *body, enum serve_api api,
                           struct serve_job *j, char *msg, size_t msg_len);

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
