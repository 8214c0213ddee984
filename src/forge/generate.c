/*
 * Greedy generation: the decode loop of llama.cpp's examples/simple (prompt
 * tokenized with add_special and parse_special, one greedy sampler, stop at
 * end-of-generation or after n_predict tokens), with an explicit, timed
 * llama_synchronize after each llama_decode. An observer, when given, is
 * the context's cb_eval and is bound to it while the context lives.
 */
#include "forge_internal.h"

#include "ramforge/forge_observer.h"
#include "ramforge/timing.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"

void forge_generate_result_free(struct forge_generate_result *r)
{
    if (!r)
        return;
    free(r->prompt_tokens);
    free(r->tokens);
    free(r->text);
    memset(r, 0, sizeof(*r));
}

/* Appends the piece of token id to the growing text buffer. */
static int append_piece(const struct llama_vocab *vocab, llama_token id, char **text,
                        size_t *len, size_t *cap)
{
    char buf[256];
    int n = llama_token_to_piece(vocab, id, buf, sizeof(buf), 0, true);
    if (n < 0)
        return -EIO;
    if (*len + (size_t)n + 1 > *cap) {
        size_t ncap = (*cap ? *cap * 2 : 256) + (size_t)n;
        char *p = realloc(*text, ncap);
        if (!p)
            return -ENOMEM;
        *text = p;
        *cap = ncap;
    }
    memcpy(*text + *len, buf, (size_t)n);
    *len += (size_t)n;
    (*text)[*len] = '\0';
    return 0;
}

/* Decode under the gate, then a timed explicit synchronization (ends the lease). */
static int decode_sync(struct forge_context *fc, int32_t *tokens, size_t n, uint64_t *sync_ns)
{
    if (forge_context_decode(fc, tokens, n) < 0)
        return -EIO;
    uint64_t t = rf_now_ns();
    forge_context_synchronize(fc);
    *sync_ns += rf_now_ns() - t;
    return 0;
}

int forge_tokenize_count(struct forge_model *m, const char *text, uint32_t *n_out)
{
    if (!m || !text || !n_out || strlen(text) > INT32_MAX)
        return -EINVAL;
    const struct llama_vocab *vocab = llama_model_get_vocab(m->model);
    int32_t n = -llama_tokenize(vocab, text, (int32_t)strlen(text), NULL, 0, true, true);
    if (n <= 0)
        return -EINVAL;
    *n_out = (uint32_t)n;
    return 0;
}

int forge_generate(struct forge_model *m, const struct forge_generate_params *p,
                   struct forge_generate_result *out, char err[FORGE_ERR_MAX])
{
    const struct llama_vocab *vocab = llama_model_get_vocab(m->model);
    struct forge_context *fc = NULL;
    struct llama_sampler *smpl = NULL;
    size_t text_len = 0, text_cap = 0;
    int rc = 0;

    memset(out, 0, sizeof(*out));
    if (!p->prompt || !*p->prompt || p->n_predict < 1) {
        snprintf(err, FORGE_ERR_MAX, "%s", !p->prompt || !*p->prompt ? "the prompt is empty"
                                                                      : "n_predict must be >= 1");
        return -EINVAL;
    }
    int32_t plen = (int32_t)strlen(p->prompt);
    int32_t n_prompt = -llama_tokenize(vocab, p->prompt, plen, NULL, 0, true, true);
    if (n_prompt <= 0 || strlen(p->prompt) > INT32_MAX) {
        snprintf(err, FORGE_ERR_MAX, "cannot tokenize the prompt");
        return -EINVAL;
    }
    out->prompt_tokens = calloc((size_t)n_prompt, sizeof(int32_t));
    out->tokens = calloc((size_t)p->n_predict, sizeof(int32_t));
    if (!out->prompt_tokens || !out->tokens) {
        rc = -ENOMEM;
        goto out;
    }
    if (llama_tokenize(vocab, p->prompt, plen, out->prompt_tokens, n_prompt, true, true) < 0) {
        snprintf(err, FORGE_ERR_MAX, "cannot tokenize the prompt");
        rc = -EINVAL;
        goto out;
    }
    out->n_prompt = (size_t)n_prompt;

    uint32_t need = (uint32_t)n_prompt + (uint32_t)p->n_predict - 1;
    struct forge_context_params cp = {
        .n_ctx = p->n_ctx ? p->n_ctx : need,
        .n_batch = (uint32_t)n_prompt,
        .n_threads = p->n_threads,
    };
    if (p->observer)
        forge_observer_context_params(p->observer, &cp); /* else: no cb_eval at all */
    if (cp.n_ctx < need) {
        snprintf(err, FORGE_ERR_MAX, "context size %u is too small for %d prompt + %d generated tokens",
                 cp.n_ctx, n_prompt, p->n_predict);
        rc = -EINVAL;
        goto out;
    }
    uint64_t t0 = rf_now_ns();
    rc = forge_context_create(m, &cp, &fc, err);
    out->context_init_ns = rf_now_ns() - t0;
    if (rc < 0)
        goto out;
    if (p->observer)
        forge_observer_bind(p->observer, fc);
    out->n_ctx = llama_n_ctx(fc->ctx);
    out->n_threads = llama_n_threads(fc->ctx);
    out->has_memory_breakdown =
        forge_memory_breakdown(fc->ctx, &out->kv_cache_bytes, &out->compute_bytes) == 0;
    struct llama_sampler_chain_params sp = llama_sampler_chain_default_params();
    sp.no_perf = true;
    smpl = llama_sampler_chain_init(sp);
    llama_sampler_chain_add(smpl, llama_sampler_init_greedy());

    uint64_t t_inf = rf_now_ns();
    int32_t *batch = out->prompt_tokens;
    int32_t batch_n = n_prompt;
    uint64_t t_first = 0;
    for (int32_t n_pos = 0; n_pos + batch_n < n_prompt + p->n_predict;) {
        if (decode_sync(fc, batch, (size_t)batch_n, &out->sync_ns) < 0) {
            snprintf(err, FORGE_ERR_MAX, "llama_decode failed at position %d", n_pos);
            rc = -EIO;
            goto out;
        }
        if (n_pos == 0)
            out->prompt_ns = rf_now_ns() - t_inf;
        n_pos += batch_n;
        llama_token id = llama_sampler_sample(smpl, fc->ctx, -1);
        if (out->n_tokens == 0) {
            t_first = rf_now_ns();
            out->ttft_ns = t_first - t_inf;
        }
        if (llama_vocab_is_eog(vocab, id))
            break;
        out->tokens[out->n_tokens++] = id;
        rc = append_piece(vocab, id, &out->text, &text_len, &text_cap);
        if (rc < 0) {
            snprintf(err, FORGE_ERR_MAX, "cannot convert token %d to text", id);
            goto out;
        }
        batch = &out->tokens[out->n_tokens - 1];
        batch_n = 1;
    }
    uint64_t t_end = rf_now_ns();
    out->inference_ns = t_end - t_inf;
    out->decode_ns = t_first ? t_end - t_first : 0;
    if (p->on_session_end)
        p->on_session_end(p->user_data);
    if (!out->text) {
        out->text = strdup("");
        if (!out->text)
            rc = -ENOMEM;
    }
out:
    llama_sampler_free(smpl);
    if (fc) {
        struct forge_context_lifetime cl;
        forge_context_lifetime_state(fc, &cl);
        out->context_execution_generation = cl.execution_generation;
    }
    if (fc && p->observer)
        forge_observer_bind(p->observer, NULL);
    forge_context_free(fc);
    if (rc < 0)
        forge_generate_result_free(out);
    return rc;
}
