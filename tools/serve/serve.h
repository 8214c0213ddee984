/*
 * ramforge serve: shared by its main and command line (cmd_serve.c,
 * serve_options.c), the worker and the session sequence (serve_worker.c,
 * library ramforge_serve_worker), the job queue between them
 * (serve_queue.c), the HTTP front (serve_http.c, library
 * ramforge_serve_http) and the Prometheus text (serve_metrics.c).
 *
 * Threads: libmicrohttpd runs one thread per connection; each parses its
 * request, tokenizes (the vocabulary is read-only) and queues a job. One
 * worker (the main thread) takes jobs in order and is the only caller of
 * the generation; every rf_session_* call is made under serve.session_mu
 * (the session is not thread-safe), so /residency and /metrics read the
 * reports between operations, never during a session call.
 */
#ifndef RAMFORGE_TOOLS_SERVE_H
#define RAMFORGE_TOOLS_SERVE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/session_options.h"
#include "ramforge/core/idle_clock.h"
#include "ramforge/core/policy.h"
#include "ramforge/forge/forge.h"
#include "ramforge/forge/forge_common.h"
#include "serve_queue.h"

#define SERVE_BODY_MAX_BYTES (1u << 20) /* request bodies above 1 MiB answer 413 */
#define SERVE_DRAIN_SECONDS 5           /* at exit, time given to answers being written */
#define SERVE_HOSTS_MAX 8               /* addresses --host may list */

/* What `ramforge serve`'s command line asked for. */
struct serve_options {
    struct session_options sess;  /* -m, -n (a request's default n_predict), -t, -c (the largest
                                     context of a request; 0: the model's n_ctx_train), the
                                     policy, target, ... (shared with run) */
    const char *host;             /* --host ADDR[,ADDR...]: IPv4 or IPv6 addresses, each listened
                                     on (default 127.0.0.1) */
    long long port;               /* default 8080; 0: any free port (printed) */
    long long idle_seconds;       /* 0: no idle boundary */
    long long queue;              /* requests waiting behind the one running */
    long long history;            /* operations kept in /residency's session report */
    const char *api_key;          /* NULL: no key */
    long long profile_save_every; /* --profile-save-every K: save after every K requests;
                                     0: at shutdown only */
    long long timeout_s;          /* connection inactivity timeout once a request's head is in,
                                     seconds */
    long long head_timeout_s;     /* --header-timeout: a connection that has not sent a
                                     whole request head (first or next) is closed, seconds */
    long long max_connections;    /* --max-connections: open connections, all addresses */
    long long max_per_address;    /* --max-connections-per-address: open connections of one
                                     client address */
    const char *alias;            /* --alias A[,B...]: the model's names (/v1/models' aliases); the
                                     alphabetically first names it in answers; NULL: -m's path */
    char alias_first[256];        /* that first alias ("": none) */
    const char *tags;             /* --tags T[,U...]: /v1/models' tags; NULL: none */
    long long seed;               /* --seed: a request's seed when it gives none; -1: random */
    bool no_slots;                /* --no-slots: /slots answers 501, as llama-server's */
    double temperature;           /* --temp: a request's temperature when it gives none */
    bool backend_sampling;        /* --backend-sampling: a request's backend_sampling when it
                                     gives none (llama-server's -bs) */
    bool sleep;                   /* --sleep-idle-seconds given (llama-server's sleep) */
    bool metrics;                 /* --metrics: answer /metrics (else 501, as llama-server) */
    bool prompt_cache;            /* --prompt-cache: the last request's context stays alive,
                                     its KV cache's common prefix reused (one slot) */
    long long batch_size;         /* --batch-size: a prompt is decoded in batches of at most
                                     this many tokens (default 2048, as llama-server's) */
    const char *chat_template;    /* --chat-template: a template or a built-in name of
                                     llama.cpp's; NULL: the model's */
    bool jinja;                   /* --jinja: chat templates through llama.cpp's Jinja engine */
    const char *cors_origins;     /* --cors-origins: "*" (default, any Origin reflected), a
                                    comma-separated list, or NULL (--cors-origins none) */
};

/* The model's name in answers: --alias's first, else -m's path. */
const char *serve_model_name(const struct serve_options *o);

/* Returns -1 to continue, or the exit status (0 after --help, 2 on a usage error). */
int serve_parse_options(int argc, char **argv, struct serve_options *o);

/*
 * What the server says of its weights (/props residency.state, /metrics
 * ramforge_residency_state). After an idle boundary: idle_released only when
 * its release accepted bytes; idle_release_refused when it meant to release
 * (the plan selected pages, or the boundary failed) and nothing was accepted
 * (the gate busy, a tmpfs/ramfs model, the model file changed, every range
 * refused); resident when it had nothing to release (a policy that does not
 * mutate, a mapping already under the target). The next request: resident.
 */
enum serve_residency {
    SERVE_RESIDENT = 0,         /* the weights as the last request left them */
    SERVE_IDLE_RELEASED,        /* the idle boundary's release accepted bytes */
    SERVE_IDLE_RELEASE_REFUSED, /* the idle boundary released nothing it meant to
                                   (idle_reason says why) */
    SERVE_STAGING,              /* staging released pages for the next request */
};

struct MHD_Daemon;
struct serve_conn;

/* The server: one session, one queue, counters. */
struct serve {
    const struct serve_options *o;
    struct rf_session *session;
    struct forge_model *model; /* the session's */
    struct forge_model_info info;
    uint32_t n_ctx_limit;                        /* tokens a request's prompt + n_predict may use */
    uint64_t t_start_s;                          /* time(NULL) at start */
    struct MHD_Daemon *daemons[SERVE_HOSTS_MAX]; /* one a --host address */
    struct forge_context *kept; /* --prompt-cache: the last request's context (the worker's) */
    size_t n_daemons;

    pthread_mutex_t session_mu; /* every rf_session_* call */

    pthread_mutex_t conns_mu; /* the open connections (serve_conns.c): what follows */
    struct serve_conn *waiting_head, *waiting_tail; /* those waiting for a request head,
                                                       oldest first */
    size_t conns_open; /* open connections, every address, but those closed for another */

    pthread_mutex_t mu; /* what follows */
    pthread_cond_t cv;
    struct serve_queue queue; /* serve_queue.c's */
    bool processing;
    size_t connections_with_job; /* connections a generation request is bound to */
    atomic_bool stopping;
    enum serve_residency residency;
    struct rf_idle_clock idle; /* requests and wakes; idle_ns 0: no idle boundary */
    bool sleeping;      /* /props is_sleeping: the idle boundary released the weights (or, with
                           --sleep-idle-seconds, found them released) since the last request that
                           wakes (serve_sleep.c) */
    char *metrics_kept; /* --sleep-idle-seconds: ramforge's part of /metrics as last rendered
                           awake, answered while sleeping (serve_sleep.c); NULL: none */
    /* counters since start */
    uint64_t prompt_tokens_total, tokens_predicted_total, requests_total;
    uint64_t prompt_tokens_cached_total; /* prompt tokens the prompt cache held */
    uint64_t prompt_ns_total, decode_ns_total;
    uint64_t n_decode_total; /* llama_decode calls: one per sampled token */
    uint64_t n_tokens_max;   /* the most tokens a request's context held (prompt + generated) */
    /* /metrics' throughput gauges: the counters when /metrics last read them */
    uint64_t bucket_prompt_tokens, bucket_prompt_ns, bucket_predicted, bucket_decode_ns;
    uint64_t rejected_queue_full, cancelled_total;
    uint64_t admission[4]; /* per rf_admission_outcome */
    uint64_t admission_refused;
    uint64_t idle_boundaries;
    char idle_reason[256]; /* why the last idle boundary released nothing; "": it released,
                              or none ran */
    uint64_t staging_requested_bytes, staging_accepted_bytes; /* summed over operations */
    /* --profile (serve_profile.c): the dispatch observer of every request and saves */
    struct forge_observer *observer;        /* NULL: no --profile */
    uint64_t profile_requests;              /* requests since the last save */
    struct forge_chat_templates *templates; /* --jinja: the chat templates, parsed at start */
};

/* --profile: reads the profile and creates the observer (false: cannot start). */
bool serve_profile_open(struct serve *sv);
/* The observer a request's generation records into (reset), or NULL. */
struct forge_observer *serve_profile_observer(struct serve *sv);
/* After a request's generation, under session_mu: the trace updates the profile. */
void serve_profile_trace(struct serve *sv);
/* After a request's operation ended, under session_mu: saves every K requests. */
void serve_profile_after_request(struct serve *sv);
/* At shutdown: the last save (false: it failed) and the observer freed. */
bool serve_profile_close(struct serve *sv);

/*
 * Generates j (serve_generate.c): gp's server part (threads, hooks,
 * observer) given, the job's prompt and samplers added, each token
 * published to j with its probabilities; a stop string of j ends the
 * generation and is cut off j's text. *rc is forge_generate's. Returns
 * true when a stop string ended it (j->stopping_word).
 */
bool serve_generate(struct serve *sv, struct serve_job *j, struct forge_generate_params *gp,
                    struct forge_generate_result *gen, char err[FORGE_ERR_MAX], int *rc);

/*
 * At start: the chat template (--chat-template, or with --jinja the model's) is one
 * llama.cpp applies (false: said so on stderr); true without either. With --jinja, parses
 * it into sv->templates (the caller frees them). Sets whether the common library logs (-v).
 */
bool serve_chat_template_check(struct serve *sv);

/* "resident", "idle_released", "idle_release_refused", "staging" (serve_metrics.c). */
const char *serve_residency_name(enum serve_residency r);

/* Starts libmicrohttpd on each --host address and --port; prints them. Returns 0 or -errno. */
int serve_http_start(struct serve *sv);

/*
 * Stops the HTTP front once every job is done: waits (at most
 * SERVE_DRAIN_SECONDS) for the connections bound to a generation to send
 * their last bytes, then closes every connection.
 */
void serve_http_stop(struct serve *sv);

/*
 * The Prometheus text of /metrics (llama-server's names, then ramforge's),
 * NUL-terminated, the caller frees. Takes sv->mu, then sv->session_mu.
 * While sleeping (--sleep-idle-seconds), ramforge's part is the one kept
 * before the sleep, as llama-server answers from a snapshot. NULL: out of
 * memory.
 */
char *serve_metrics_text(struct serve *sv);

/* ramforge's part of /metrics (after llama-server's names), the caller frees; NULL: no memory. */
char *serve_metrics_ramforge_text(struct serve *sv);

/*
 * llama-server's sleep (serve_sleep.c). serve_sleep_enter, before the idle
 * boundary (--sleep-idle-seconds): keeps ramforge's part of /metrics if
 * none is. serve_sleep_entered, after it: sleeping unless the release was
 * refused. serve_wake: a request that uses the model (a generation, a
 * tokenization, a chat template) ends the sleep and restarts the idle time;
 * serve_wake_locked with sv->mu held.
 */
void serve_sleep_enter(struct serve *sv);
void serve_sleep_entered(struct serve *sv, enum serve_residency state);
void serve_wake(struct serve *sv);
void serve_wake_locked(struct serve *sv);

#endif
