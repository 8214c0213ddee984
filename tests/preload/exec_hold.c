/*
 * A small llama.cpp program for ramforge exec's tests (test_exec.py): it
 * links libllama as a shared library and knows nothing of ramforge. It
 * loads MODEL with mmap, keeps one context alive between commands read from
 * stdin, and answers each on one stdout line:
 *   gen N        greedy-decode N more tokens (the first gen decodes PROMPT):
 *                "tokens ID ID ..."
 *   decode_at D  wait until D ms after the end of the last decode (polling the
 *                clock), then decode one token: "decode_ns NS" (the call's time)
 *   calls N      N x (llama_synchronize + llama_get_logits_ith), the calls that end
 *                a lease: "call_ns NS", this thread's CPU time per pair (what an
 *                interposer adds to them, robust to other processes' load)
 *   sampled N    (with "backend") decode N more tokens, each read with
 *                llama_get_sampled_token_ith alone (the backend sampler's greedy
 *                choice; no other call observes the decode's completion):
 *                "tokens ID ID ..."
 *   quit         free the context and the model, exit 0
 * With "backend" the context samples on the backend (llama_context_params.samplers:
 * a greedy chain for sequence 0).
 * Usage: exec_hold MODEL PROMPT N_CTX [backend]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "llama.h"

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static llama_token greedy(struct llama_context *ctx, const struct llama_vocab *vocab)
{
    const float *logits = llama_get_logits_ith(ctx, -1);
    int32_t n = llama_vocab_n_tokens(vocab);
    llama_token best = 0;
    for (int32_t i = 1; i < n; i++)
        if (logits[i] > logits[best])
            best = i;
    return best;
}

int main(int argc, char **argv)
{
    bool backend = argc == 5 && strcmp(argv[4], "backend") == 0;
    if (argc != 4 && !backend) {
        fprintf(stderr, "usage: exec_hold MODEL PROMPT N_CTX [backend]\n");
        return 2;
    }
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.load_mode = LLAMA_LOAD_MODE_MMAP;
    struct llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model) {
        fprintf(stderr, "exec_hold: cannot load %s\n", argv[1]);
        return 1;
    }
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)atoi(argv[3]);
    cp.n_batch = cp.n_ctx;
    struct llama_sampler *chain = llama_sampler_chain_init(llama_sampler_chain_default_params());
    llama_sampler_chain_add(chain, llama_sampler_init_greedy());
    struct llama_sampler_seq_config greedy_seq0 = {.seq_id = 0, .sampler = chain};
    if (backend) {
        cp.samplers = &greedy_seq0;
        cp.n_samplers = 1;
    }
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        fprintf(stderr, "exec_hold: cannot create a context\n");
        return 1;
    }
    llama_token prompt[512];
    int32_t n_prompt =
        llama_tokenize(vocab, argv[2], (int32_t)strlen(argv[2]), prompt, 512, true, true);
    if (n_prompt <= 0) {
        fprintf(stderr, "exec_hold: cannot tokenize the prompt\n");
        return 1;
    }
    llama_token next = 0;
    bool started = false;
    uint64_t last_end = now_ns();
    char line[128];
    setvbuf(stdout, NULL, _IOLBF, 0);
    while (fgets(line, sizeof(line), stdin)) {
        long n = 0;
        bool gen = sscanf(line, "gen %ld", &n) == 1;
        if (gen || (backend && sscanf(line, "sampled %ld", &n) == 1)) {
            printf("tokens");
            for (long i = 0; i < n; i++) {
                struct llama_batch b =
                    started ? llama_batch_get_one(&next, 1) : llama_batch_get_one(prompt, n_prompt);
                started = true;
                if (llama_decode(ctx, b) != 0) {
                    fprintf(stderr, "exec_hold: decode failed\n");
                    return 1;
                }
                next = gen ? greedy(ctx, vocab) : llama_get_sampled_token_ith(ctx, -1);
                printf(" %d", next);
            }
            last_end = now_ns();
            printf("\n");
        } else if (sscanf(line, "decode_at %ld", &n) == 1 && started) {
            uint64_t at = last_end + (uint64_t)n * 1000000ull;
            while (now_ns() < at)
                ;
            uint64_t t0 = now_ns();
            struct llama_batch b = llama_batch_get_one(&next, 1);
            if (llama_decode(ctx, b) != 0) {
                fprintf(stderr, "exec_hold: decode failed\n");
                return 1;
            }
            next = greedy(ctx, vocab);
            last_end = now_ns();
            printf("decode_ns %llu\n", (unsigned long long)(last_end - t0));
        } else if (sscanf(line, "calls %ld", &n) == 1 && started && n > 0) {
            uint64_t t0 = thread_cpu_ns();
            for (long i = 0; i < n; i++) {
                llama_synchronize(ctx);
                llama_get_logits_ith(ctx, -1);
            }
            printf("call_ns %llu\n", (unsigned long long)((thread_cpu_ns() - t0) / (uint64_t)n));
        } else if (strncmp(line, "quit", 4) == 0) {
            break;
        } else {
            printf("error\n");
        }
    }
    llama_free(ctx);
    llama_sampler_free(chain);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
