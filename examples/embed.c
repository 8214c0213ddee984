/*
 * embed: how an application that already runs llama.cpp adds ramforge.
 *
 * The program is llama.cpp's examples/simple, in C: it loads the model
 * itself (mmap), tokenizes the prompt, creates a context, decodes with a
 * sampler chain (greedy) and frees everything. ramforge comes in with 8
 * distinct calls, each marked "ramforge N" below:
 *
 *   1 rf_session_default_params  the session's parameters (policy observe)
 *   2 rf_session_wrap            bind a session to the model (borrowed: the
 *                                application still frees it) and run the
 *                                after_load boundary
 *   3 rf_session_lease_begin     before each llama_decode
 *   4 rf_session_lease_end       after llama_synchronize: a release never
 *                                runs while a decode is in flight
 *   5 rf_session_boundary        end_of_session (context alive: a sample),
 *                                then after_session once llama_free(ctx)
 *                                ran (plan, release with a mutating policy,
 *                                measure)
 *   6 rf_session_operation_end   the tokens, the ledger, the page snapshot
 *   7 rf_session_report_write    the JSON operation report (atomically)
 *   8 rf_session_free            before llama_model_free
 *
 * (rf_session_admit, for a program that decides whether to run at all, and
 * rf_session_stage, to prefetch weights before a cold start, are the next
 * two to add.) With --no-ramforge the same program runs without any of
 * them: the generated tokens must be the same.
 *
 * Usage: embed [--no-ramforge] [--memory-target BYTES] MODEL PROMPT N_PREDICT [REPORT.json]
 *   --memory-target BYTES  policy memory-bound with that target: the
 *                          after_session boundary releases weight pages
 *                          until the model mapping fits (default: observe,
 *                          which changes nothing)
 * Prints the generated token ids on stdout (one line, space-separated) and
 * their text on stderr. Exit status 0, or 1 with a message on stderr.
 *
 * Build against an installed ramforge (README.md, "Embedding ramforge"):
 *   cc embed.c $(pkg-config --cflags --libs ramforge) -o embed
 *   cmake -S examples -B build-embed -DCMAKE_PREFIX_PATH=PREFIX  (find_package)
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"
#include "ramforge/session.h"

static void usage(FILE *out)
{
    fprintf(out, "usage: embed [--no-ramforge] [--memory-target BYTES] MODEL PROMPT N_PREDICT "
                 "[REPORT.json]\n");
}

/* llama.cpp's log, errors only. */
static void log_errors(enum ggml_log_level level, const char *text, void *user_data)
{
    (void)user_data;
    if (level == GGML_LOG_LEVEL_ERROR)
        fputs(text, stderr);
}

int main(int argc, char **argv)
{
    bool use_ramforge = true;
    unsigned long long target_bytes = 0;
    int i = 1;

    for (; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
        if (strcmp(argv[i], "--no-ramforge") == 0) {
            use_ramforge = false;
        } else if (strcmp(argv[i], "--memory-target") == 0 && i + 1 < argc) {
            char *end;
            errno = 0;
            target_bytes = strtoull(argv[++i], &end, 10);
            if (errno || *end || target_bytes == 0) {
                fprintf(stderr, "embed: invalid --memory-target '%s'\n", argv[i]);
                return 1;
            }
        } else {
            usage(stderr);
            return 1;
        }
    }
    if (argc - i < 3 || argc - i > 4) {
        usage(stderr);
        return 1;
    }
    const char *model_path = argv[i];
    const char *prompt = argv[i + 1];
    const char *report_path = argc - i == 4 ? argv[i + 3] : NULL;
    char *end;
    long n_predict = strtol(argv[i + 2], &end, 10);
    if (*end || n_predict < 1 || n_predict > 100000) {
        fprintf(stderr, "embed: invalid N_PREDICT '%s' (1..100000)\n", argv[i + 2]);
        return 1;
    }

    struct llama_model *model = NULL;
    struct llama_context *ctx = NULL;
    struct llama_sampler *smpl = NULL;
    struct rf_session *rf = NULL;
    llama_token *prompt_tokens = NULL, *tokens = NULL;
    int n_tokens = 0, status = 1, rc;

    llama_log_set(log_errors, NULL);
    ggml_backend_load_all();

    struct llama_model_params mparams = llama_model_default_params();
    mparams.load_mode = LLAMA_LOAD_MODE_MMAP;
    model = llama_model_load_from_file(model_path, mparams);
    if (!model) {
        fprintf(stderr, "embed: cannot load %s\n", model_path);
        goto out;
    }

    if (use_ramforge) {
        char err[RF_ERR_MAX];
        struct rf_session_params sp = rf_session_default_params(); /* ramforge 1 */
        if (target_bytes) {
            sp.policy = RF_POLICY_MEMORY_BOUND;
            sp.has_target = true;
            sp.target_bytes = target_bytes;
        }
        rc = rf_session_wrap(model, model_path, sp, &rf, err); /* ramforge 2 */
        if (rc < 0) {
            fprintf(stderr, "embed: %s\n", err);
            goto out;
        }
    }

    /* Tokenize the prompt (with BOS, special tokens parsed), as examples/simple. */
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    int32_t prompt_len = (int32_t)strlen(prompt);
    int32_t n_prompt = -llama_tokenize(vocab, prompt, prompt_len, NULL, 0, true, true);
    prompt_tokens = n_prompt > 0 ? calloc((size_t)n_prompt, sizeof(*prompt_tokens)) : NULL;
    tokens = calloc((size_t)n_predict, sizeof(*tokens));
    if (!prompt_tokens || !tokens ||
        llama_tokenize(vocab, prompt, prompt_len, prompt_tokens, n_prompt, true, true) < 0) {
        fprintf(stderr, "embed: cannot tokenize the prompt\n");
        goto out;
    }

    struct llama_context_params cparams = llama_context_default_params();
    cparams.n_ctx = (uint32_t)(n_prompt + n_predict - 1);
    cparams.n_batch = (uint32_t)n_prompt;
    ctx = llama_init_from_model(model, cparams);
    if (!ctx) {
        fprintf(stderr, "embed: cannot create the llama_context\n");
        goto out;
    }
    const uint32_t n_ctx = llama_n_ctx(ctx);
    smpl = llama_sampler_chain_init(llama_sampler_chain_default_params());
    llama_sampler_chain_add(smpl, llama_sampler_init_greedy());

    /* The decode loop: the prompt as one batch, then one token at a time. */
    struct llama_batch batch = llama_batch_get_one(prompt_tokens, n_prompt);
    for (int32_t n_pos = 0; n_pos + batch.n_tokens < n_prompt + n_predict;) {
        if (rf)
            rf_session_lease_begin(rf); /* ramforge 3 */
        int32_t drc = llama_decode(ctx, batch);
        llama_synchronize(ctx);
        if (rf)
            rf_session_lease_end(rf); /* ramforge 4 */
        if (drc != 0) {
            fprintf(stderr, "embed: llama_decode failed (%d) at position %d\n", drc, n_pos);
            goto out;
        }
        n_pos += batch.n_tokens;

        llama_token id = llama_sampler_sample(smpl, ctx, -1);
        if (llama_vocab_is_eog(vocab, id))
            break;
        char piece[128];
        int n = llama_token_to_piece(vocab, id, piece, sizeof(piece), 0, true);
        if (n > 0)
            fwrite(piece, 1, (size_t)n, stderr);
        tokens[n_tokens++] = id;
        batch = llama_batch_get_one(&tokens[n_tokens - 1], 1);
    }
    fputc('\n', stderr);

    /* The session's context is alive: a sample with its KV cache allocated. */
    if (rf && (rc = rf_session_boundary(rf, RF_BOUNDARY_END_OF_SESSION)) < 0) /* ramforge 5 */
        goto rf_failed;
    llama_sampler_free(smpl);
    smpl = NULL;
    llama_free(ctx);
    ctx = NULL;

    if (rf) {
        /* No context left: the safe boundary where weight pages may be released. */
        rc = rf_session_boundary(rf, RF_BOUNDARY_AFTER_SESSION);
        struct rf_operation_output result = {
            .prompt_tokens = prompt_tokens,
            .n_prompt = (size_t)n_prompt,
            .tokens = tokens,
            .n_tokens = (size_t)n_tokens,
            .n_ctx = n_ctx,
        };
        if (rc == 0)
            rc = rf_session_operation_end(rf, &result); /* ramforge 6 */
        if (rc == 0 && report_path)
            rc = rf_session_report_write(rf, RF_REPORT_OPERATION, report_path); /* ramforge 7 */
        if (rc < 0)
            goto rf_failed;
    }

    for (int k = 0; k < n_tokens; k++)
        printf("%s%d", k ? " " : "", tokens[k]);
    printf("\n");
    status = 0;
    goto out;
rf_failed:
    fprintf(stderr, "embed: ramforge: %s\n", strerror(-rc));
out:
    if (smpl)
        llama_sampler_free(smpl);
    if (ctx)
        llama_free(ctx);
    rf_session_free(rf); /* ramforge 8: before the model it borrows */
    if (model)
        llama_model_free(model);
    free(prompt_tokens);
    free(tokens);
    return status;
}
