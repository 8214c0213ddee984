/*
 * stream_embed: an application that runs llama.cpp itself and streams a
 * model larger than its memory limit through ramforge's installed calls
 * (docs/STREAMING.md, "Embedding: streaming through installed calls").
 *
 * The program is examples/embed.c (llama.cpp's examples/simple in C: it
 * loads the model itself, creates its own context, decodes greedily) with
 * the session's policy streaming. The streaming plan pins a resident set
 * and streams the rest; the read-ahead window reads the streamed tensors
 * ahead of the decode into a ring the decode computes from. The ramforge
 * calls, each marked "ramforge N" below (embed.c's, and five for streaming):
 *
 *   1 rf_session_default_params     policy streaming, a ring of 4 slots
 *   2 rf_session_wrap               bind a session to the model (borrowed)
 *   3 rf_session_operation_begin    admission (which makes the streaming
 *                                   plan), then the plan's pins
 *   4 rf_session_admission          the reason, when admission refused
 *   5 rf_session_read_ahead_open    the window over the pins (NULL when the
 *                                   model fits its limit: nothing streams)
 *   6 rf_read_ahead_context_params  decorates the application's
 *                                   llama_context_params: the window's eval
 *                                   callback, chaining the application's
 *   7 rf_session_lease_begin        before each llama_decode
 *   8 rf_session_lease_end          after llama_synchronize
 *   9 rf_read_ahead_decode_end      then: every weight back at the mapping
 *  10 rf_session_read_ahead_close   after llama_free of the context: the
 *                                   window's figures go into the report
 *  11 rf_session_boundary           after_session: the pins are undone
 *  12 rf_session_operation_end      the tokens, the ledger, the snapshot
 *  13 rf_session_report_write       the JSON report (streaming.read_ahead)
 *  14 rf_session_free               before llama_model_free
 *  (and rf_strerror for a message)
 *
 * The application's own cb_eval (count_nodes, counting the graph nodes
 * llama.cpp asks about) is kept: the window calls it for every node.
 * With --no-ramforge the same program runs without any ramforge call: the
 * generated tokens must be the same.
 *
 * Usage: stream_embed [--no-ramforge] [--threads N] MODEL PROMPT N_PREDICT [REPORT.json]
 * Prints the generated token ids on stdout (one line, space-separated), and
 * on stderr their text, then "stream_embed: window on|off, cb_eval asked N
 * times". Exit status 0, or 1 with a message on stderr.
 *
 * Build against an installed ramforge (README.md, "Embedding ramforge"):
 *   cc stream_embed.c $(pkg-config --cflags --libs ramforge) -o stream_embed
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"
#include "ramforge/session.h"

/* The read-ahead window's ring: slots of the largest streamed tensor (ramforge run's default). */
#define STREAM_SLOTS 4

static void usage(FILE *out)
{
    fprintf(out, "usage: stream_embed [--no-ramforge] [--threads N] MODEL PROMPT N_PREDICT "
                 "[REPORT.json]\n");
}

/* llama.cpp's log, errors only. */
static void log_errors(enum ggml_log_level level, const char *text, void *user_data)
{
    (void)user_data;
    if (level == GGML_LOG_LEVEL_ERROR)
        fputs(text, stderr);
}

/* The application's own eval callback: counts the nodes asked about, observes none. */
static bool count_nodes(struct ggml_tensor *t, bool ask, void *user_data)
{
    (void)t;
    if (ask)
        ++*(unsigned long long *)user_data;
    return !ask; /* asked: not interested; observing (never asked for): go on */
}

int main(int argc, char **argv)
{
    bool use_ramforge = true;
    int32_t n_threads = 0;
    int i = 1;

    for (; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
        if (strcmp(argv[i], "--no-ramforge") == 0) {
            use_ramforge = false;
        } else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
            char *end;
            long v = strtol(argv[++i], &end, 10);
            if (*end || v < 1 || v > 1024) {
                fprintf(stderr, "stream_embed: invalid --threads '%s' (1..1024)\n", argv[i]);
                return 1;
            }
            n_threads = (int32_t)v;
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
        fprintf(stderr, "stream_embed: invalid N_PREDICT '%s' (1..100000)\n", argv[i + 2]);
        return 1;
    }

    struct llama_model *model = NULL;
    struct llama_context *ctx = NULL;
    struct llama_sampler *smpl = NULL;
    struct rf_session *rf = NULL;
    struct rf_read_ahead *window = NULL;
    llama_token *prompt_tokens = NULL, *tokens = NULL;
    unsigned long long asked = 0;
    int n_tokens = 0, status = 1, rc;

    llama_log_set(log_errors, NULL);
    ggml_backend_load_all();

    struct llama_model_params mparams = llama_model_default_params();
    mparams.load_mode = LLAMA_LOAD_MODE_MMAP;
    model = llama_model_load_from_file(model_path, mparams);
    if (!model) {
        fprintf(stderr, "stream_embed: cannot load %s\n", model_path);
        goto out;
    }

    if (use_ramforge) {
        char err[RF_ERR_MAX];
        struct rf_session_params sp = rf_session_default_params(); /* ramforge 1 */
        sp.policy = RF_POLICY_STREAMING;
        sp.stream_read_ahead_slots = STREAM_SLOTS;
        rc = rf_session_wrap(model, model_path, sp, &rf, err); /* ramforge 2 */
        if (rc < 0) {
            fprintf(stderr, "stream_embed: %s\n", err);
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
        fprintf(stderr, "stream_embed: cannot tokenize the prompt\n");
        goto out;
    }

    struct llama_context_params cparams = llama_context_default_params();
    cparams.n_ctx = (uint32_t)(n_prompt + n_predict - 1);
    cparams.n_batch = (uint32_t)n_prompt;
    if (n_threads > 0)
        cparams.n_threads = cparams.n_threads_batch = n_threads;
    cparams.cb_eval = count_nodes; /* the application's callback, kept by the window */
    cparams.cb_eval_user_data = &asked;

    if (rf) {
        /* Admission makes the streaming plan; the pins follow unless it refuses. */
        struct rf_operation_start_params op = {
            .request = {.n_ctx = cparams.n_ctx,
                        .n_batch = cparams.n_batch,
                        .n_prompt = (uint32_t)n_prompt,
                        .n_predict = (uint32_t)n_predict},
            .admit = true,
        };
        struct rf_operation_begin_result begun;
        rf_session_operation_begin(rf, &op, &begun); /* ramforge 3 */
        if (begun.refused) {
            const char *reason = "";
            rf_session_admission(rf, NULL, NULL, &reason); /* ramforge 4 */
            fprintf(stderr, "stream_embed: admission refused the operation: %s\n", reason);
            goto out;
        }
        if ((rc = rf_session_read_ahead_open(rf, &window)) < 0) /* ramforge 5 */
            fprintf(stderr, "stream_embed: warning: no read-ahead window (%s)\n", rf_strerror(rc));
        rf_read_ahead_context_params(window, &cparams); /* ramforge 6 */
    }
    ctx = llama_init_from_model(model, cparams);
    if (!ctx) {
        fprintf(stderr, "stream_embed: cannot create the llama_context\n");
        goto out;
    }
    const uint32_t n_ctx = llama_n_ctx(ctx);
    smpl = llama_sampler_chain_init(llama_sampler_chain_default_params());
    llama_sampler_chain_add(smpl, llama_sampler_init_greedy());

    /* The decode loop: the prompt as one batch, then one token at a time. */
    struct llama_batch batch = llama_batch_get_one(prompt_tokens, n_prompt);
    for (int32_t n_pos = 0; n_pos + batch.n_tokens < n_prompt + n_predict;) {
        if (rf)
            rf_session_lease_begin(rf); /* ramforge 7 */
        int32_t drc = llama_decode(ctx, batch);
        llama_synchronize(ctx);
        if (rf) {
            rf_session_lease_end(rf);         /* ramforge 8 */
            rf_read_ahead_decode_end(window); /* ramforge 9: weights back at the mapping */
        }
        if (drc != 0) {
            fprintf(stderr, "stream_embed: llama_decode failed (%d) at position %d\n", drc, n_pos);
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

    llama_sampler_free(smpl);
    smpl = NULL;
    llama_free(ctx);
    ctx = NULL;

    fprintf(stderr, "stream_embed: window %s, cb_eval asked %llu times\n", window ? "on" : "off",
            asked);
    if (rf) {
        /* The window's context is gone: its figures into the report, its ring freed. */
        rf_session_read_ahead_close(rf, window); /* ramforge 10 */
        window = NULL;
        /* No context left: the pins are undone here (streaming never releases). */
        rc = rf_session_boundary(rf, RF_BOUNDARY_AFTER_SESSION); /* ramforge 11 */
        struct rf_operation_output result = {
            .prompt_tokens = prompt_tokens,
            .n_prompt = (size_t)n_prompt,
            .tokens = tokens,
            .n_tokens = (size_t)n_tokens,
            .n_ctx = n_ctx,
            .n_threads = n_threads,
        };
        if (rc == 0)
            rc = rf_session_operation_end(rf, &result); /* ramforge 12 */
        if (rc == 0 && report_path)
            rc = rf_session_report_write(rf, RF_REPORT_OPERATION, report_path); /* ramforge 13 */
        if (rc < 0) {
            fprintf(stderr, "stream_embed: ramforge: %s\n", rf_strerror(rc));
            goto out;
        }
    }

    for (int k = 0; k < n_tokens; k++)
        printf("%s%d", k ? " " : "", tokens[k]);
    printf("\n");
    status = 0;
out:
    if (smpl)
        llama_sampler_free(smpl);
    if (ctx)
        llama_free(ctx);
    rf_session_read_ahead_close(rf, window); /* after its context */
    rf_session_free(rf);                     /* ramforge 14: before the model it borrows */
    if (model)
        llama_model_free(model);
    free(prompt_tokens);
    free(tokens);
    return status;
}
