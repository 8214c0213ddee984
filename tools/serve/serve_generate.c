/*
 * ramforge serve: a job's generation parameters and its per-token hook
 * (the worker's, cmd_serve.c). The hook publishes each token to the job
 * (text, id, where its text ends, its probabilities) and stops the
 * generation at a stop string, cutting the string off the text as
 * llama-server does (stop_type "word", stopping_word).
 */
#include <stdlib.h>
#include <string.h>

#include "ramforge/core/timing.h"
#include "serve.h"

/* Grows *buf (elements of size el) to hold need; false on ENOMEM. */
static bool grow(void **buf, size_t *cap, size_t need, size_t el)
{
    if (need <= *cap)
        return true;
    size_t ncap = *cap ? *cap * 2 : 64;
    while (ncap < need)
        ncap *= 2;
    void *p = realloc(*buf, ncap * el);
    if (!p)
        return false;
    *buf = p;
    *cap = ncap;
    return true;
}

/* The per-token arrays of j for one more token (under j->mu); false on ENOMEM. */
static bool grow_tokens(struct serve_job *j)
{
    size_t cap = j->tokens_cap, need = j->n_tokens + 1, np = (size_t)j->n_probs;
    if (need <= cap)
        return true;
    size_t ncap = cap ? cap * 2 : 64;
    int32_t *t = realloc(j->tokens, ncap * sizeof(*t));
    if (t)
        j->tokens = t;
    size_t *e = t ? realloc(j->ends, ncap * sizeof(*e)) : NULL;
    if (e)
        j->ends = e;
    if (!e)
        return false;
    if (np) {
        float *p = realloc(j->probs, ncap * sizeof(*p));
        j->probs = p ? p : j->probs;
        int32_t *ids = p ? realloc(j->top_ids, ncap * np * sizeof(*ids)) : NULL;
        j->top_ids = ids ? ids : j->top_ids;
        float *pt = ids ? realloc(j->top_p_of, ncap * np * sizeof(*pt)) : NULL;
        j->top_p_of = pt ? pt : j->top_p_of;
        size_t *n = pt ? realloc(j->top_n, ncap * sizeof(*n)) : NULL;
        j->top_n = n ? n : j->top_n;
        if (!n)
            return false;
    }
    j->tokens_cap = ncap;
    return true;
}

/*
 * The first stop string of j in its text, searched from the bytes the last
 * token may have completed one in: true with *at its offset.
 */
static bool find_stop(const struct serve_job *j, size_t added, size_t *at, const char **word)
{
    bool found = false;
    for (size_t i = 0; i < j->n_stop; i++) {
        size_t wl = strlen(j->stop[i]);
        size_t from = j->text_len >= added + wl ? j->text_len - added - wl + 1 : 0;
        const char *hit = memmem(j->text + from, j->text_len - from, j->stop[i], wl);
        if (hit && (!found || (size_t)(hit - j->text) < *at)) {
            *at = (size_t)(hit - j->text);
            *word = j->stop[i];
            found = true;
        }
    }
    return found;
}

struct serve_token_sink {
    struct serve *sv;
    struct serve_job *job;
    uint64_t t_progress_ns; /* the first prompt_progress update */
};

/* forge_generate's per-token hook: publish the token; stop at a stop string, a gone client, a
 * shutdown. */
static bool on_token(int32_t id, const char *piece, size_t len,
                     const struct forge_token_probs *probs, void *ud)
{
    struct serve_token_sink *t = ud;
    struct serve_job *j = t->job;
    bool ok = true, stop = false;
    pthread_mutex_lock(&j->mu);
    if (grow((void **)&j->text, &j->text_cap, j->text_len + len + 1, 1) && grow_tokens(j)) {
        memcpy(j->text + j->text_len, piece, len);
        j->text_len += len;
        j->text[j->text_len] = '\0';
        j->ends[j->n_tokens] = j->text_len;
        if (j->n_probs && probs) {
            size_t np = (size_t)j->n_probs, k = j->n_tokens;
            j->probs[k] = probs->p;
            j->top_n[k] = probs->n < np ? probs->n : np;
            memcpy(j->top_ids + k * np, probs->ids, j->top_n[k] * sizeof(int32_t));
            memcpy(j->top_p_of + k * np, probs->p_top, j->top_n[k] * sizeof(float));
        } else if (j->n_probs) {
            j->top_n[j->n_tokens] = 0;
            j->probs[j->n_tokens] = 0.0f;
        }
        j->tokens[j->n_tokens++] = id;
        size_t at = 0;
        const char *word = NULL;
        if (find_stop(j, len, &at, &word)) {
            j->text_len = at;
            j->text[at] = '\0';
            j->stopping_word = word;
            stop = true;
        }
    } else {
        ok = false;
    }
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
    return ok && !stop && !atomic_load(&j->cancelled) && !atomic_load(&t->sv->stopping);
}

/* forge_generate's prompt progress (return_progress): one update of the job, its time. */
static void on_progress(size_t processed, size_t total, void *ud)
{
    struct serve_token_sink *t = ud;
    struct serve_job *j = t->job;
    uint64_t now = rf_now_ns();
    (void)total;
    pthread_mutex_lock(&j->mu);
    if (j->n_progress == 0) {
        t->t_progress_ns = now;
        j->n_cached = processed; /* the first update: what the prompt cache held */
    }
    size_t cap = j->progress_cap;
    if (grow((void **)&j->progress_done, &cap, j->n_progress + 1, sizeof(size_t)) &&
        grow((void **)&j->progress_ns, &j->progress_cap, j->n_progress + 1, sizeof(uint64_t))) {
        j->progress_done[j->n_progress] = processed;
        j->progress_ns[j->n_progress++] = now - t->t_progress_ns;
    }
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

bool serve_generate(struct serve *sv, struct serve_job *j, struct forge_generate_params *gp,
                    struct forge_generate_result *gen, char err[FORGE_ERR_MAX], int *rc)
{
    struct serve_token_sink sink = {sv, j, 0};
    gp->prompt_tokens = j->prompt_tokens;
    gp->n_prompt_tokens = j->n_prompt;
    gp->n_predict = j->n_predict;
    gp->temperature = j->temperature;
    gp->top_k = j->top_k;
    gp->top_p = j->top_p;
    gp->min_p = j->min_p;
    gp->seed = j->seed;
    gp->logit_bias = j->logit_bias;
    gp->n_logit_bias = j->n_logit_bias;
    gp->penalties = j->penalties;
    gp->penalty_last_n = j->repeat_last_n;
    gp->penalty_repeat = j->repeat_penalty;
    gp->penalty_freq = j->frequency_penalty;
    gp->penalty_present = j->presence_penalty;
    gp->grammar = j->grammar;
    gp->ignore_eos = j->ignore_eos;
    gp->n_probs = j->n_probs;
    gp->post_sampling_probs = j->post_sampling_probs;
    gp->backend_sampling = j->backend_sampling;
    gp->on_token = on_token;
    gp->n_batch = (uint32_t)sv->o->batch_size;
    gp->on_prompt_progress = j->stream && j->return_progress ? on_progress : NULL;
    gp->token_user_data = &sink;
    *rc = forge_generate(sv->model, gp, gen, err);
    pthread_mutex_lock(&j->mu);
    bool word = j->stopping_word[0] != '\0';
    pthread_mutex_unlock(&j->mu);
    return word;
}
