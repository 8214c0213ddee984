/*
 * ramforge serve's job queue (serve_queue.c): the generation requests the
 * HTTP threads queue (serve_http.c) and the one worker takes in order
 * (cmd_serve.c). Only serve_queue.c touches the queue; it is guarded by
 * the server's mu (serve.h), whose cv wakes the worker.
 *
 * A job has two owners, the connection that made it and the queue (then
 * the worker): each holds a reference, the last serve_job_put frees it.
 */
#ifndef RAMFORGE_TOOLS_SERVE_QUEUE_H
#define RAMFORGE_TOOLS_SERVE_QUEUE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ramforge/forge/forge.h"

enum serve_api {
    SERVE_API_COMPLETION = 0, /* llama-server's /completion */
    SERVE_API_OAI,            /* OpenAI's /v1/completions */
    SERVE_API_CHAT,           /* OpenAI's /v1/chat/completions */
};

/*
 * One generation request. The HTTP thread fills the request part and
 * queues it; the worker fills the output part under mu and signals cv.
 */
struct serve_job {
    /* request: read-only once queued */
    enum serve_api api;
    bool stream;
    int32_t *prompt_tokens; /* owned */
    size_t n_prompt;
    char *prompt_text; /* the prompt as llama-server echoes it ("prompt"), owned */
    int32_t n_predict;
    float temperature, top_p, min_p;
    int32_t top_k;
    uint32_t seed;
    struct forge_logit_bias *logit_bias; /* n_logit_bias, owned */
    size_t n_logit_bias;
    bool penalties; /* one of the three penalties is not neutral */
    int32_t repeat_last_n;
    float repeat_penalty, frequency_penalty, presence_penalty;
    char *grammar; /* GBNF, owned; NULL: none */
    bool ignore_eos;
    int32_t n_probs; /* 0: none */
    bool post_sampling_probs;
    bool backend_sampling; /* llama-server's: the chain in the model's graph (forge.h) */
    char **stop;           /* n_stop stop strings, owned */
    size_t n_stop;
    bool return_tokens;     /* "tokens" of /completion's answer (default true) */
    bool timings_per_token; /* timings in every streamed event */
    bool cache_prompt;      /* llama-server's cache_prompt (default true; --prompt-cache) */
    bool return_progress;   /* streamed: a prompt_progress event before and after each batch */
    bool include_usage;     /* stream_options.include_usage (chat) */
    bool verbose;           /* "__verbose" in OpenAI answers (default: serve -v) */
    bool exceeds_context;   /* the 400 is llama-server's exceed_context_size_error */
    char **response_fields; /* n_response_fields paths, owned; 0: the whole answer */
    size_t n_response_fields;
    uint64_t t_queued_ns;
    /* output, under mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char *text; /* generated text so far, NUL-terminated, owned (a stop string cut off) */
    size_t text_len, text_cap;
    int32_t *tokens; /* generated ids so far, owned */
    size_t *ends;    /* text bytes after each token (may exceed text_len after a stop) */
    size_t n_tokens, tokens_cap;
    float *probs;          /* with n_probs: each token's probability, then n_probs ids/probs */
    int32_t *top_ids;      /* n_tokens * n_probs */
    float *top_p_of;       /* n_tokens * n_probs */
    size_t *top_n;         /* entries of each token's top */
    size_t *progress_done; /* return_progress: prompt tokens decoded at each update */
    uint64_t *progress_ns; /* and the time since the first update */
    size_t n_progress, progress_cap;
    bool done;
    atomic_bool cancelled;         /* the client left: stop after the current token */
    int status;                    /* HTTP status when done: 200, or an error's */
    char message[768];             /* the error's message */
    const char *stop_type;         /* "eos", "limit", "word", "none" (cancelled) */
    const char *stopping_word;     /* the stop string met (one of stop[]), or "" */
    uint64_t prompt_ns, decode_ns; /* timings of the generation */
    size_t n_cached, n_kv_kept;    /* prompt tokens the prompt cache held; tokens it keeps */
    /* ownership */
    int refs;
    struct serve_job *next; /* the queue's link */
};

/* The jobs waiting behind the one running, oldest first (under the server's mu). */
struct serve_queue {
    struct serve_job *head, *tail; /* a reference each */
    size_t n;                      /* jobs waiting */
};

/* A new job with one reference (the caller's); NULL when out of memory. */
struct serve_job *serve_job_new(void);

/* Drops a reference to j; the last one frees it. NULL: no-op. */
void serve_job_put(struct serve_job *j);

/*
 * Marks j done with status (and, with fmt, the error's message) and wakes
 * the connection waiting for it.
 */
void serve_job_finish(struct serve_job *j, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

struct serve;

/*
 * Queues j (takes a reference) and wakes the worker; takes the server's
 * mu. False with why when the server is stopping or the queue is full
 * (--queue; counted in rejected_queue_full).
 */
bool serve_enqueue(struct serve *sv, struct serve_job *j, char *why, size_t why_len);

/* Under the server's mu: the oldest job (its queue reference passes to the caller), or NULL. */
struct serve_job *serve_dequeue(struct serve *sv);

/* Under the server's mu, when stopping: every queued job answered 503 and dropped. */
void serve_queue_drain(struct serve *sv);

#endif
