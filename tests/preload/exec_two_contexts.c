/*
 * A small llama.cpp program for ramforge exec's streaming test
 * (tests/e2e/test_streaming_exec.py): it links libllama as a shared
 * library and knows nothing of ramforge. It loads MODEL with mmap, creates
 * two contexts with an eval callback of its own (it counts the nodes it is
 * asked about, through its user data) and decodes PROMPT and N greedy
 * tokens on both at once, one thread each: under ramforge exec's streaming
 * window, two decodes of one model at the same time. Prints, per context,
 * "tokens ID ID ..." then "cb_eval asks N" (its own callback's count).
 * Both contexts are made before the two threads start, so their first
 * submissions come at once (the operation's start: one runs it, the other
 * waits for its pins and window). Usage: exec_two_contexts MODEL PROMPT N
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"

#define N_CTX 2
#define MAX_TOKENS 256

struct job {
    struct llama_model *model;
    struct llama_context *ctx;
    const char *prompt;
    int n;
    unsigned long asks; /* the program's own callback: nodes asked about */
    llama_token out[MAX_TOKENS];
    int rc;
};

/* The program's own cb_eval: counts, asks for nothing (every range computed at once). */
static bool count_asks(struct ggml_tensor *t, bool ask, void *user_data)
{
    (void)t;
    if (ask)
        ((struct job *)user_data)->asks++;
    return !ask;
}

/* A context of its own eval callback, small buffers (the test's limit is tight). */
static struct llama_context *context(struct job *j)
{
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 64;
    cp.n_batch = cp.n_ubatch = 16;
    cp.n_threads = cp.n_threads_batch = 1;
    cp.cb_eval = count_asks;
    cp.cb_eval_user_data = j;
    return llama_init_from_model(j->model, cp);
}

static void *decode(void *arg)
{
    struct job *j = arg;
    const struct llama_vocab *vocab = llama_model_get_vocab(j->model);
    struct llama_context *ctx = j->ctx;
    llama_token prompt[16];
    int32_t n_prompt =
        ctx ? llama_tokenize(vocab, j->prompt, (int32_t)strlen(j->prompt), prompt, 64, true, true)
            : 0;
    j->rc = 1;
    if (n_prompt <= 0)
        goto out;
    struct llama_batch b = llama_batch_get_one(prompt, n_prompt);
    for (int i = 0; i < j->n; i++) {
        if (llama_decode(ctx, b) != 0)
            goto out;
        const float *logits = llama_get_logits_ith(ctx, -1);
        llama_token best = 0;
        for (int32_t k = 1; k < llama_vocab_n_tokens(vocab); k++)
            best = logits[k] > logits[best] ? k : best;
        j->out[i] = best;
        b = llama_batch_get_one(&j->out[i], 1);
    }
    j->rc = 0;
out:
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 4 || atoi(argv[3]) <= 0 || atoi(argv[3]) > MAX_TOKENS) {
        fprintf(stderr, "usage: exec_two_contexts MODEL PROMPT N (N 1..%d)\n", MAX_TOKENS);
        return 2;
    }
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.load_mode = LLAMA_LOAD_MODE_MMAP;
    struct llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model) {
        fprintf(stderr, "exec_two_contexts: cannot load %s\n", argv[1]);
        return 1;
    }
    struct job jobs[N_CTX];
    pthread_t th[N_CTX];
    for (int i = 0; i < N_CTX; i++) { /* both made before either decodes */
        jobs[i] = (struct job){.model = model, .prompt = argv[2], .n = atoi(argv[3])};
        if (!(jobs[i].ctx = context(&jobs[i]))) {
            fprintf(stderr, "exec_two_contexts: cannot create a context\n");
            return 1;
        }
    }
    for (int i = 0; i < N_CTX; i++)
        if (pthread_create(&th[i], NULL, decode, &jobs[i]) != 0)
            return 1;
    int rc = 0;
    for (int i = 0; i < N_CTX; i++) {
        pthread_join(th[i], NULL);
        rc |= jobs[i].rc;
        printf("tokens");
        for (int k = 0; k < jobs[i].n; k++)
            printf(" %d", jobs[i].out[k]);
        printf("\ncb_eval asks %lu\n", jobs[i].asks);
        llama_free(jobs[i].ctx);
    }
    llama_model_free(model);
    llama_backend_free();
    return rc;
}
