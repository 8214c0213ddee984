/*
 * Fuzz harness: ramforge serve's request bodies (tools/serve/serve_request.c):
 * the body as JSON, then as a /completion, /v1/completions, /tokenize and
 * /detokenize request, with a fake tokenizer (one token per byte) in
 * place of the model's. An accepted completion must fit the context.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "serve/serve_request.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_N_VOCAB 256
#define FUZZ_N_CTX 512

static int byte_tokenize(void *ctx, const char *text, bool add_special, bool parse_special,
                         int32_t **tokens, size_t *n)
{
    (void)ctx;
    (void)parse_special;
    size_t len = strlen(text), k = 0;
    int32_t *t = malloc((len + 2) * sizeof(*t));
    if (!t)
        return -12; /* -ENOMEM */
    if (add_special)
        t[k++] = 1;
    for (size_t i = 0; i < len; i++)
        t[k++] = (unsigned char)text[i];
    *tokens = t;
    *n = k;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const struct serve_request_env env = {.n_vocab = FUZZ_N_VOCAB,
                                          .n_ctx_limit = FUZZ_N_CTX,
                                          .n_predict = -1,
                                          .tokenize = byte_tokenize};
    char msg[256];
    json_t *body = serve_body_parse((const char *)data, size, msg, sizeof(msg));
    if (!body) {
        if (!msg[0])
            abort(); /* a 400 always says why */
        return 0;
    }
    for (int api = 0; api < 2; api++) {
        struct serve_job j;
        memset(&j, 0, sizeof(j));
        int st = serve_parse_completion(&env, body, api ? SERVE_API_OAI : SERVE_API_COMPLETION, &j,
                                        msg, sizeof(msg));
        if (st == 0 &&
            (j.n_prompt == 0 || j.n_predict < 1 || j.n_prompt + (size_t)j.n_predict > FUZZ_N_CTX))
            abort();
        for (size_t i = 0; st == 0 && i < j.n_prompt; i++)
            if (j.prompt_tokens[i] < 0 || j.prompt_tokens[i] >= FUZZ_N_VOCAB)
                abort();
        if (st != 0 && st != 400 && st != 500)
            abort();
        serve_request_free(&j);
    }
    const char *content;
    bool add_special, parse_special, with_pieces;
    if (serve_parse_tokenize(body, &content, &add_special, &parse_special, &with_pieces, msg,
                             sizeof(msg)) == 0 &&
        !content)
        abort();
    int32_t *t = NULL;
    size_t n = 0;
    if (serve_parse_detokenize(&env, body, &t, &n, msg, sizeof(msg)) == 0) {
        for (size_t i = 0; i < n; i++)
            if (t[i] < 0 || t[i] >= FUZZ_N_VOCAB)
                abort();
    }
    free(t);
    json_decref(body);
    return 0;
}
