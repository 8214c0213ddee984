/*
 * Sampling and the text around it, over llama.cpp's C API: the sampler
 * chain of a generation (logit_bias, penalties, grammar, then greedy or
 * top_k/top_p/min_p/temp/dist, the order of llama-server's defaults), the
 * token probabilities llama-server's n_probs reports, backend sampling
 * (llama_set_sampler), a grammar check, a token's piece, and the chat
 * template (llama_chat_apply_template).
 */
#include "forge_internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"

/* Adds the logit biases of p (and -INFINITY on every end-of-generation token with ignore_eos). */
static int add_logit_bias(struct llama_sampler *chain, const struct llama_vocab *vocab,
                          const struct forge_generate_params *p)
{
    int32_t n_vocab = llama_vocab_n_tokens(vocab);
    size_t n_eog = 0;
    if (p->ignore_eos)
        for (int32_t t = 0; t < n_vocab; t++)
            n_eog += llama_vocab_is_eog(vocab, t);
    size_t n = p->n_logit_bias + n_eog;
    if (n == 0)
        return 0;
    llama_logit_bias *b = calloc(n, sizeof(*b));
    if (!b)
        return -ENOMEM;
    size_t k = 0;
    for (size_t i = 0; i < p->n_logit_bias; i++)
        b[k++] = (llama_logit_bias){p->logit_bias[i].token, p->logit_bias[i].bias};
    for (int32_t t = 0; p->ignore_eos && t < n_vocab; t++)
        if (llama_vocab_is_eog(vocab, t))
            b[k++] = (llama_logit_bias){t, -INFINITY};
    struct llama_sampler *s = llama_sampler_init_logit_bias(n_vocab, (int32_t)n, b);
    free(b);
    if (!s)
        return -ENOMEM;
    llama_sampler_chain_add(chain, s);
    return 0;
}

struct llama_sampler *forge_sampler_chain(const struct llama_vocab *vocab,
                                          const struct forge_generate_params *p)
{
    struct llama_sampler_chain_params sp = llama_sampler_chain_default_params();
    sp.no_perf = true;
    struct llama_sampler *smpl = llama_sampler_chain_init(sp);
    if (!smpl)
        return NULL;
    if (add_logit_bias(smpl, vocab, p) < 0)
        goto fail;
    if (p->penalties)
        llama_sampler_chain_add(smpl, llama_sampler_init_penalties(
                                          llama_vocab_n_tokens(vocab), p->penalty_last_n,
                                          p->penalty_repeat, p->penalty_freq, p->penalty_present));
    if (p->grammar && *p->grammar) {
        struct llama_sampler *g = llama_sampler_init_grammar(vocab, p->grammar, "root");
        if (!g)
            goto fail;
        llama_sampler_chain_add(smpl, g);
    }
    if (p->temperature <= 0.0f) {
        llama_sampler_chain_add(smpl, llama_sampler_init_greedy());
        return smpl;
    }
    if (p->top_k > 0)
        llama_sampler_chain_add(smpl, llama_sampler_init_top_k(p->top_k));
    if (p->top_p < 1.0f)
        llama_sampler_chain_add(smpl, llama_sampler_init_top_p(p->top_p, 1));
    if (p->min_p > 0.0f)
        llama_sampler_chain_add(smpl, llama_sampler_init_min_p(p->min_p, 1));
    llama_sampler_chain_add(smpl, llama_sampler_init_temp(p->temperature));
    llama_sampler_chain_add(smpl, llama_sampler_init_dist(p->seed));
    return smpl;
fail:
    llama_sampler_free(smpl);
    return NULL;
}

static int by_p_desc(const void *a, const void *b)
{
    float pa = ((const llama_token_data *)a)->p, pb = ((const llama_token_data *)b)->p;
    return pa < pb ? 1 : pa > pb ? -1 : 0;
}

/* Softmax of cur (in place, p), sorted by p, most probable first. */
static void softmax_sorted(llama_token_data_array *cur)
{
    float max = -INFINITY, sum = 0.0f;
    for (size_t i = 0; i < cur->size; i++)
        max = cur->data[i].logit > max ? cur->data[i].logit : max;
    for (size_t i = 0; i < cur->size; i++) {
        cur->data[i].p = expf(cur->data[i].logit - max);
        sum += cur->data[i].p;
    }
    for (size_t i = 0; i < cur->size; i++)
        cur->data[i].p = sum > 0.0f ? cur->data[i].p / sum : 0.0f;
    qsort(cur->data, cur->size, sizeof(*cur->data), by_p_desc);
    cur->sorted = true;
}

/* The top n of cur (sorted) into pr; p of the chosen token id. */
static void top_of(const llama_token_data_array *cur, llama_token id, int32_t n,
                   struct forge_sample_probs *pr)
{
    pr->out.p = 0.0f;
    for (size_t i = 0; i < cur->size; i++)
        if (cur->data[i].id == id)
            pr->out.p = cur->data[i].p;
    size_t k = (size_t)n < cur->size ? (size_t)n : cur->size;
    for (size_t i = 0; i < k; i++) {
        pr->ids[i] = cur->data[i].id;
        pr->p[i] = cur->data[i].p;
    }
    pr->out.n = k;
    pr->out.ids = pr->ids;
    pr->out.p_top = pr->p;
}

bool forge_sampler_attach(struct llama_context *ctx, struct llama_sampler *chain,
                          const struct forge_generate_params *p)
{
    /* llama-server: a grammar (common_sampler_init) and pre-chain n_probs keep it on the CPU */
    if (!p->backend_sampling || (p->grammar && *p->grammar) ||
        (p->n_probs > 0 && !p->post_sampling_probs))
        return false;
    return llama_set_sampler(ctx, 0, chain);
}

void forge_sampler_detach(struct llama_context *ctx)
{
    llama_set_sampler(ctx, 0, NULL);
}

/*
 * The candidates of ctx's last output into cur, as llama_sampler_sample
 * takes them: what a backend sampler left (ids with probabilities or
 * logits), else every token's logit. -EIO: no logits.
 */
static int candidates(struct llama_context *ctx, llama_token_data *d, int32_t n_vocab,
                      llama_token_data_array *cur)
{
    const float *probs = llama_get_sampled_probs_ith(ctx, -1);
    const float *logits = llama_get_sampled_logits_ith(ctx, -1);
    const llama_token *ids = llama_get_sampled_candidates_ith(ctx, -1);
    uint32_t n = probs    ? llama_get_sampled_probs_count_ith(ctx, -1)
                 : logits ? llama_get_sampled_logits_count_ith(ctx, -1)
                          : 0;
    if ((probs || logits) && ids && n <= (uint32_t)n_vocab) {
        for (uint32_t i = 0; i < n; i++)
            d[i] = (llama_token_data){ids[i], logits ? logits[i] : 0.0f, probs ? probs[i] : 0.0f};
        *cur = (llama_token_data_array){d, n, -1, false};
        return 0;
    }
    logits = llama_get_logits_ith(ctx, -1);
    if (!logits)
        return -EIO;
    for (int32_t t = 0; t < n_vocab; t++)
        d[t] = (llama_token_data){t, logits[t], 0.0f};
    *cur = (llama_token_data_array){d, (size_t)n_vocab, -1, false};
    return 0;
}

int forge_sample(struct llama_sampler *chain, struct llama_context *ctx,
                 const struct forge_generate_params *p, struct forge_sample_probs *pr,
                 llama_token *id)
{
    if (p->n_probs <= 0) { /* takes a backend sampler's token or candidates itself */
        *id = llama_sampler_sample(chain, ctx, -1);
        return 0;
    }
    int32_t n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(llama_get_model(ctx)));
    if (!pr->cand) {
        pr->cand = calloc((size_t)n_vocab, sizeof(*pr->cand));
        pr->ids = calloc((size_t)p->n_probs, sizeof(*pr->ids));
        pr->p = calloc((size_t)p->n_probs, sizeof(*pr->p));
        if (!pr->cand || !pr->ids || !pr->p)
            return -ENOMEM;
    }
    llama_token_data_array cur;
    int rc = candidates(ctx, pr->cand, n_vocab, &cur);
    if (rc < 0)
        return rc;
    if (!p->post_sampling_probs) {
        /* llama-server's n_probs: the raw logits' softmax, then the chain samples as usual */
        *id = llama_sampler_sample(chain, ctx, -1);
        softmax_sorted(&cur);
        top_of(&cur, *id, p->n_probs, pr);
        return 0;
    }
    llama_token sampled = llama_get_sampled_token_ith(ctx, -1);
    if (sampled != LLAMA_TOKEN_NULL) { /* the backend ran the whole chain */
        *id = sampled;
    } else { /* llama_sampler_sample's own steps (the chain skips its backend prefix) */
        llama_sampler_apply(chain, &cur);
        if (cur.selected < 0 || (size_t)cur.selected >= cur.size)
            return -EIO;
        *id = cur.data[cur.selected].id;
    }
    llama_sampler_accept(chain, *id);
    bool have_p = false;
    for (size_t i = 0; i < cur.size && !have_p; i++)
        have_p = cur.data[i].p > 0.0f;
    if (!have_p) /* greedy leaves logits only: their softmax over what is left */
        softmax_sorted(&cur);
    else if (!cur.sorted)
        qsort(cur.data, cur.size, sizeof(*cur.data), by_p_desc);
    top_of(&cur, *id, p->n_probs, pr);
    return 0;
}

void forge_sample_probs_free(struct forge_sample_probs *pr)
{
    free(pr->cand);
    free(pr->ids);
    free(pr->p);
    memset(pr, 0, sizeof(*pr));
}

int forge_grammar_check(struct forge_model *m, const char *grammar)
{
    if (!m || !grammar)
        return -EINVAL;
    struct llama_sampler *g =
        llama_sampler_init_grammar(llama_model_get_vocab(m->model), grammar, "root");
    if (!g)
        return -EINVAL;
    llama_sampler_free(g);
    return 0;
}

int forge_token_piece(struct forge_model *m, int32_t id, char *buf, size_t size, size_t *len)
{
    if (!m || !buf || !len || size > INT32_MAX)
        return -EINVAL;
    const struct llama_vocab *vocab = llama_model_get_vocab(m->model);
    if (id < 0 || id >= llama_vocab_n_tokens(vocab))
        return -EINVAL;
    int32_t n = llama_token_to_piece(vocab, id, buf, (int32_t)size, 0, true);
    if (n < 0)
        return -ENOSPC;
    *len = (size_t)n;
    return 0;
}

const char *forge_chat_template(struct forge_model *m)
{
    return m ? llama_model_chat_template(m->model, NULL) : NULL;
}

int forge_chat_apply(struct forge_model *m, const char *tmpl, const struct forge_chat_message *msgs,
                     size_t n, bool add_assistant, char **text)
{
    if (!m || (!msgs && n) || !text)
        return -EINVAL;
    *text = NULL;
    llama_chat_message *chat = calloc(n + 1, sizeof(*chat));
    if (!chat)
        return -ENOMEM;
    size_t total = 64;
    for (size_t i = 0; i < n; i++) {
        chat[i] = (llama_chat_message){msgs[i].role, msgs[i].content};
        total += strlen(msgs[i].role) + strlen(msgs[i].content) + 32;
    }
    int rc = -EINVAL;
    if (!tmpl)
        tmpl = forge_chat_template(m);
    for (int attempt = 0; attempt < 2 && total <= INT32_MAX; attempt++) {
        char *buf = malloc(total + 1);
        if (!buf) {
            rc = -ENOMEM;
            break;
        }
        int32_t got = llama_chat_apply_template(tmpl, chat, n, add_assistant, buf, (int32_t)total);
        if (got < 0) {
            free(buf);
            break; /* a template llama.cpp does not recognise */
        }
        if ((size_t)got <= total) {
            buf[got] = '\0';
            *text = buf;
            rc = 0;
            break;
        }
        free(buf);
        total = (size_t)got;
    }
    free(chat);
    return rc;
}
