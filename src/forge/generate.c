/*
 * Generation: the decode loop of llama.cpp's examples/simple (prompt
 * tokenized with add_special and parse_special, stop at end-of-generation
 * or after n_predict tokens), with an explicit, timed llama_synchronize
 * after each llama_decode. Greedy by default (one greedy sampler, as
 * simple); with a temperature, llama.cpp's sampler chain top_k -> top_p ->
 * min_p -> temp -> dist(seed), the order of llama-server's defaults, after
 * the optional logit bias, penalties and grammar (sample.c). An observer, when given, is
 * the context's cb_eval and is bound to it while the context lives.
 */
#include "forge_internal.h"

#include "ramforge/core/timing.h"
#include "ramforge/forge/forge_ahead.h"
#include "ramforge/forge/forge_observer.h"
#include "ramforge/forge/forge_routing.h"
#include "ramforge/forge/forge_window.h"
#include "ramforge/sys/sys.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

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

/* Appends the piece of token id (also in buf, n bytes) to the growing text buffer. */
static int append_piece(const struct llama_vocab *vocab, llama_token id, char **text, size_t *len,
                        size_t *cap, char buf[256], int *n_out)
{
    int n = llama_token_to_piece(vocab, id, buf, 256, 0, true);
    if (n < 0)
        return -EIO;
    *n_out = n;
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

/*
 * Decode under the gate, then a timed explicit synchronization (ends the
 * lease); then the read-ahead window (may be NULL) points every weight
 * back at the mapping.
 */
static int decode_sync(struct forge_context *fc, struct forge_window *w, int32_t *tokens, size_t n,
                       uint64_t *sync_ns)
{
    int rc = forge_context_decode(fc, tokens, n) < 0 ? -EIO : 0;
    uint64_t t = rf_now_ns();
    if (rc == 0)
        forge_context_synchronize(fc);
    *sync_ns += rf_now_ns() - t;
    forge_window_decode_end(w);
    return rc;
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

int forge_tokenize(struct forge_model *m, const char *text, bool add_special, bool parse_special,
                   int32_t **tokens, size_t *n)
{
    if (!m || !text || !tokens || !n || strlen(text) > INT32_MAX)
        return -EINVAL;
    const struct llama_vocab *vocab = llama_model_get_vocab(m->model);
    int32_t len = (int32_t)strlen(text);
    int32_t count = -llama_tokenize(vocab, text, len, NULL, 0, add_special, parse_special);
    if (count < 0)
        return -EINVAL;
    int32_t *t = calloc((size_t)count + 1, sizeof(*t));
    if (!t)
        return -ENOMEM;
    if (count > 0 && llama_tokenize(vocab, text, len, t, count, add_special, parse_special) < 0) {
        free(t);
        return -EINVAL;
    }
    *tokens = t;
    *n = (size_t)count;
    return 0;
}

int forge_detokenize(struct forge_model *m, const int32_t *tokens, size_t n, char **text)
{
    if (!m || (!tokens && n) || !text || n > INT32_MAX)
        return -EINVAL;
    const struct llama_vocab *vocab = llama_model_get_vocab(m->model);
    int32_t n_vocab = llama_vocab_n_tokens(vocab);
    for (size_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= n_vocab)
            return -EINVAL;
    int32_t cap = (int32_t)(n * 8 + 16);
    for (int attempt = 0; attempt < 2; attempt++) {
        char *buf = malloc((size_t)cap + 1);
        if (!buf)
            return -ENOMEM;
        int32_t got = llama_detokenize(vocab, tokens, (int32_t)n, buf, cap, false, true);
        if (got >= 0) {
            buf[got] = '\0';
            *text = buf;
            return 0;
        }
        free(buf);
        cap = -got; /* the size it needs */
    }
    return -EIO;
}

/* What the decode costs so far: storage reads and the process's CPU time (decode_io). */
struct decode_mark {
    struct rfsys_io io;
    bool has_io, has_cpu;
    uint64_t user_ns, system_ns;
};

static void decode_mark(struct decode_mark *d)
{
    struct rusage ru;
    memset(&ru, 0, sizeof(ru));
    d->has_io =
        rfsys_read_io(NULL, "self", &d->io) == 0 && d->io.has_read_bytes && d->io.has_major_faults;
    d->has_cpu = getrusage(RUSAGE_SELF, &ru) == 0;
    d->user_ns = (uint64_t)ru.ru_utime.tv_sec * 1000000000u + (uint64_t)ru.ru_utime.tv_usec * 1000u;
    d->system_ns =
        (uint64_t)ru.ru_stime.tv_sec * 1000000000u + (uint64_t)ru.ru_stime.tv_usec * 1000u;
}

/* out's decode figures: what changed from a (first token) to b (last). */
static void decode_figures(const struct decode_mark *a, const struct decode_mark *b,
                           struct forge_generate_result *out)
{
    out->has_decode_io = a->has_io && b->has_io && b->io.read_bytes >= a->io.read_bytes &&
                         b->io.major_faults >= a->io.major_faults;
    if (out->has_decode_io) {
        out->decode_read_bytes = b->io.read_bytes - a->io.read_bytes;
        out->decode_major_faults = b->io.major_faults - a->io.major_faults;
    }
    out->has_decode_cpu =
        a->has_cpu && b->has_cpu && b->user_ns >= a->user_ns && b->system_ns >= a->system_ns;
    if (out->has_decode_cpu) {
        out->decode_user_ns = b->user_ns - a->user_ns;
        out->decode_system_ns = b->system_ns - a->system_ns;
    }
}

/*
 * keep: the longest common prefix of fc's KV cache and the prompt stays
 * (all but the prompt's last token at most: its logits are needed), the
 * rest of the cache is removed; *n_cached its length. 0 or -EIO.
 */
static int keep_prefix(struct forge_context *fc, const int32_t *prompt, int32_t n_prompt,
                       size_t *n_cached)
{
    size_t n = 0;
    while (n < fc->n_kv && n + 1 < (size_t)n_prompt && fc->kv_tokens[n] == prompt[n])
        n++;
    *n_cached = n;
    if (n == fc->n_kv)
        return 0;
    fc->n_kv = n;
    return llama_memory_seq_rm(llama_get_memory(fc->ctx), 0, (llama_pos)n, -1) ? 0 : -EIO;
}

/* keep: records the n_pos tokens fc's KV cache holds (the prompt, then the generated ones). */
static int keep_tokens(struct forge_context *fc, const struct forge_generate_result *out,
                       size_t n_pos)
{
    int32_t *t = realloc(fc->kv_tokens, (n_pos + 1) * sizeof(*t));
    if (!t)
        return -ENOMEM;
    memcpy(t, out->prompt_tokens, out->n_prompt * sizeof(*t));
    memcpy(t + out->n_prompt, out->tokens, (n_pos - out->n_prompt) * sizeof(*t));
    fc->kv_tokens = t;
    fc->n_kv = n_pos;
    return 0;
}

int forge_generate(struct forge_model *m, const struct forge_generate_params *p,
                   struct forge_generate_result *out, char err[FORGE_ERR_MAX])
{
    const struct llama_vocab *vocab = llama_model_get_vocab(m->model);
    struct forge_context *fc = NULL;
    struct llama_sampler *smpl = NULL;
    bool attached = false; /* smpl is fc's backend sampler (forge_sampler_attach) */
    struct forge_sample_probs probs = {0};
    size_t text_len = 0, text_cap = 0;
    int rc = 0;

    memset(out, 0, sizeof(*out));
    bool empty = p->prompt_tokens ? p->n_prompt_tokens == 0 : !p->prompt || !*p->prompt;
    if (empty || p->n_predict < 1) {
        snprintf(err, FORGE_ERR_MAX, "%s",
                 empty ? "the prompt is empty" : "n_predict must be >= 1");
        return -EINVAL;
    }
    int32_t n_prompt;
    if (p->prompt_tokens) {
        int32_t n_vocab = llama_vocab_n_tokens(vocab);
        n_prompt = p->n_prompt_tokens > INT32_MAX ? -1 : (int32_t)p->n_prompt_tokens;
        for (int32_t i = 0; i < n_prompt; i++)
            if (p->prompt_tokens[i] < 0 || p->prompt_tokens[i] >= n_vocab)
                n_prompt = -1;
        if (n_prompt < 0) {
            snprintf(err, FORGE_ERR_MAX, "a prompt token is outside the vocabulary");
            return -EINVAL;
        }
        out->prompt_tokens = calloc((size_t)n_prompt, sizeof(int32_t));
        if (out->prompt_tokens)
            memcpy(out->prompt_tokens, p->prompt_tokens, (size_t)n_prompt * sizeof(int32_t));
    } else {
        int32_t plen = (int32_t)strlen(p->prompt);
        n_prompt = -llama_tokenize(vocab, p->prompt, plen, NULL, 0, true, true);
        if (n_prompt <= 0 || strlen(p->prompt) > INT32_MAX) {
            snprintf(err, FORGE_ERR_MAX, "cannot tokenize the prompt");
            return -EINVAL;
        }
        out->prompt_tokens = calloc((size_t)n_prompt, sizeof(int32_t));
        if (out->prompt_tokens &&
            llama_tokenize(vocab, p->prompt, plen, out->prompt_tokens, n_prompt, true, true) < 0) {
            snprintf(err, FORGE_ERR_MAX, "cannot tokenize the prompt");
            rc = -EINVAL;
            goto out;
        }
    }
    out->tokens = calloc((size_t)p->n_predict, sizeof(int32_t));
    if (!out->prompt_tokens || !out->tokens) {
        rc = -ENOMEM;
        goto out;
    }
    out->n_prompt = (size_t)n_prompt;

    uint32_t need = (uint32_t)n_prompt + (uint32_t)p->n_predict - 1;
    int32_t n_batch =
        p->n_batch && p->n_batch < (uint32_t)n_prompt ? (int32_t)p->n_batch : n_prompt;
    struct forge_context_params cp = {
        .n_ctx = p->n_ctx ? p->n_ctx : need,
        .n_batch = (uint32_t)n_batch,
        .n_threads = p->n_threads,
    };
    if (p->keep && p->n_batch) /* a context to keep: batches of any later prompt */
        cp.n_batch = p->n_batch < cp.n_ctx ? p->n_batch : cp.n_ctx;
    if (p->observer)
        forge_observer_context_params(p->observer, &cp); /* else: no cb_eval at all */
    if (p->routing)
        forge_routing_context_params(p->routing, &cp); /* wraps the observer's, if any */
    if (p->ahead)
        forge_ahead_context_params(p->ahead, &cp); /* wraps the observer's, if any */
    if (p->window)
        forge_window_context_params(p->window, &cp); /* wraps both */
    if (cp.n_ctx < need) {
        snprintf(err, FORGE_ERR_MAX,
                 "context size %u is too small for %d prompt + %d generated tokens", cp.n_ctx,
                 n_prompt, p->n_predict);
        rc = -EINVAL;
        goto out;
    }
    uint64_t t0 = rf_now_ns();
    if (p->keep && *p->keep) {
        fc = *p->keep; /* reused when it fits, else freed */
        *p->keep = NULL;
        if (llama_n_ctx(fc->ctx) < need || llama_n_batch(fc->ctx) < (uint32_t)n_batch ||
            fc->has_cb_eval != (cp.cb_eval != NULL)) {
            forge_context_free(fc);
            fc = NULL;
        }
    }
    rc = fc ? 0 : forge_context_create(m, &cp, &fc, err);
    out->context_init_ns = rf_now_ns() - t0;
    if (rc < 0)
        goto out;
    rc = keep_prefix(fc, out->prompt_tokens, n_prompt, &out->n_cached);
    if (rc < 0) {
        snprintf(err, FORGE_ERR_MAX, "cannot trim the kept context's KV cache");
        goto out;
    }
    if (p->observer)
        forge_observer_bind(p->observer, fc);
    out->n_ctx = llama_n_ctx(fc->ctx);
    out->n_threads = llama_n_threads(fc->ctx);
    out->has_memory_breakdown =
        forge_memory_breakdown(fc->ctx, &out->kv_cache_bytes, &out->compute_bytes) == 0;
    smpl = forge_sampler_chain(vocab, p);
    if (!smpl) {
        snprintf(err, FORGE_ERR_MAX,
                 "cannot build the sampler chain (a grammar llama.cpp "
                 "rejects, or out of memory)");
        rc = p->grammar && *p->grammar ? -EINVAL : -ENOMEM;
        goto out;
    }

    uint64_t t_inf = rf_now_ns();
    int32_t done = (int32_t)out->n_cached; /* prompt tokens in the KV cache before the last batch */
    if (p->on_prompt_progress)
        p->on_prompt_progress((size_t)done, (size_t)n_prompt, p->token_user_data);
    for (; n_prompt - done > n_batch; done += n_batch) {
        if (decode_sync(fc, p->window, out->prompt_tokens + done, (size_t)n_batch, &out->sync_ns) <
            0) {
            snprintf(err, FORGE_ERR_MAX, "llama_decode failed at position %d", done);
            rc = -EIO;
            goto out;
        }
        if (p->on_prompt_progress)
            p->on_prompt_progress((size_t)(done + n_batch), (size_t)n_prompt, p->token_user_data);
    }
    int32_t *batch = out->prompt_tokens + done;
    int32_t batch_n = n_prompt - done;
    uint64_t t_first = 0;
    struct decode_mark mark_first = {0};
    int32_t n_pos = done; /* tokens in the KV cache */
    /* after the earlier batches: their last token's output would draw from dist's generator */
    attached = forge_sampler_attach(fc->ctx, smpl, p);
    while (n_pos + batch_n < n_prompt + p->n_predict) {
        if (decode_sync(fc, p->window, batch, (size_t)batch_n, &out->sync_ns) < 0) {
            snprintf(err, FORGE_ERR_MAX, "llama_decode failed at position %d", n_pos);
            rc = -EIO;
            goto out;
        }
        if (n_pos == done) {
            out->prompt_ns = rf_now_ns() - t_inf;
            if (p->on_prompt_progress)
                p->on_prompt_progress((size_t)n_prompt, (size_t)n_prompt, p->token_user_data);
        }
        n_pos += batch_n;
        llama_token id;
        rc = forge_sample(smpl, fc->ctx, p, &probs, &id);
        if (rc < 0) {
            snprintf(err, FORGE_ERR_MAX, "cannot sample at position %d", n_pos);
            goto out;
        }
        if (out->n_tokens == 0) {
            decode_mark(&mark_first);
            t_first = rf_now_ns();
            out->ttft_ns = t_first - t_inf;
        }
        if (llama_vocab_is_eog(vocab, id)) {
            out->stopped_eog = true;
            break;
        }
        out->tokens[out->n_tokens++] = id;
        char piece[256];
        int piece_n = 0;
        rc = append_piece(vocab, id, &out->text, &text_len, &text_cap, piece, &piece_n);
        if (rc < 0) {
            snprintf(err, FORGE_ERR_MAX, "cannot convert token %d to text", id);
            goto out;
        }
        if (p->on_token && !p->on_token(id, piece, (size_t)piece_n,
                                        p->n_probs > 0 ? &probs.out : NULL, p->token_user_data)) {
            out->cancelled = true;
            break;
        }
        batch = &out->tokens[out->n_tokens - 1];
        batch_n = 1;
    }
    uint64_t t_end = rf_now_ns();
    out->inference_ns = t_end - t_inf;
    out->decode_ns = t_first ? t_end - t_first : 0;
    if (t_first) {
        struct decode_mark mark_end;
        decode_mark(&mark_end);
        decode_figures(&mark_first, &mark_end, out);
    }
    if (p->on_session_end)
        p->on_session_end(p->user_data);
    if (!out->text) {
        out->text = strdup("");
        if (!out->text)
            rc = -ENOMEM;
    }
    if (rc == 0 && p->keep && keep_tokens(fc, out, (size_t)n_pos) == 0) {
        out->n_kv_kept = fc->n_kv;
        *p->keep = fc; /* alive for the next generation */
    }
out:
    if (attached) /* before the chain is freed: a kept context outlives it */
        forge_sampler_detach(fc->ctx);
    llama_sampler_free(smpl);
    forge_sample_probs_free(&probs);
    if (fc) {
        struct forge_context_lifetime cl;
        forge_context_lifetime_state(fc, &cl);
        out->context_execution_generation = cl.execution_generation;
    }
    if (fc && p->observer)
        forge_observer_bind(p->observer, NULL);
    if (!p->keep || *p->keep != fc)
        forge_context_free(fc);
    if (rc < 0)
        forge_generate_result_free(out);
    return rc;
}
