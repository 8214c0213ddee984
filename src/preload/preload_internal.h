/*
 * The engine of ramforge exec (libramforge-exec.so), private to
 * src/preload: its configuration from the environment (engine_env.c),
 * the tables of models and contexts and the hooks the shim calls
 * (engine.c), and the boundaries, operations and figures written out
 * (engine_ops.c). docs/EXEC.md describes the whole.
 *
 * Threads and locks. The hooks run on the program's threads; one idle
 * thread of the engine's own runs the idle boundaries. Two locks, both the
 * engine's, never held across a libllama call of the program:
 *   table_mu    the model and context tables and every figure of an
 *               exec_model below except the session; held briefly;
 *   session_mu  every rf_session_* call but the lease and context counts
 *               (which the session makes thread-safe); taken after
 *               table_mu is released, never the other way round.
 * A submission that finds session_mu taken (a boundary running) does not
 * wait for it: it skips the operation's bookkeeping (the next submission
 * does it) and waits only in the gate, for a madvise pass in progress.
 * Under streaming, a third, the model's window hook (forge_window.h): each
 * submission holds it across the real llama_decode/llama_encode (shared
 * without a window, exclusive with one), taken after the lease with
 * neither lock above held; the operation's start and end take it
 * exclusive under session_mu to install and remove the window. A thread
 * holding it never waits for session_mu or table_mu.
 */
#ifndef RAMFORGE_PRELOAD_INTERNAL_H
#define RAMFORGE_PRELOAD_INTERNAL_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "ramforge/core/admission.h"
#include "ramforge/core/idle_clock.h"
#include "ramforge/core/prompt_cache.h"
#include "ramforge/preload/forge_exec.h"
#include "ramforge/session.h"

#define EXEC_MAX_MODELS 16 /* models one process may have managed at once */

/* The environment ramforge exec sets (docs/EXEC.md); each child process inherits it. */
#define EXEC_ENV_POLICY "RAMFORGE_EXEC_POLICY"                /* rf_policy_parse's names */
#define EXEC_ENV_TARGET "RAMFORGE_EXEC_TARGET_BYTES"          /* decimal bytes */
#define EXEC_ENV_RESERVE "RAMFORGE_EXEC_RESERVE_BYTES"        /* decimal bytes */
#define EXEC_ENV_RELEASE_MODE "RAMFORGE_EXEC_RELEASE_MODE"    /* dontneed | pageout */
#define EXEC_ENV_ADMISSION "RAMFORGE_EXEC_ADMISSION"          /* enforce | warn | off */
#define EXEC_ENV_STAGING "RAMFORGE_EXEC_STAGING_BYTES"        /* decimal bytes; absent: none */
#define EXEC_ENV_IDLE "RAMFORGE_EXEC_IDLE_SECONDS"            /* 0: no idle boundary */
#define EXEC_ENV_CTX "RAMFORGE_EXEC_CTX_SIZE"                 /* tokens, admission before load */
#define EXEC_ENV_HISTORY "RAMFORGE_EXEC_HISTORY"              /* operations kept in the report */
#define EXEC_ENV_BUDGET_QUIET "RAMFORGE_EXEC_BUDGET_QUIET_MS" /* ms; absent: 1000 */
#define EXEC_ENV_REPORT "RAMFORGE_EXEC_REPORT_JSON"           /* path; %p: the pid */
#define EXEC_ENV_METRICS "RAMFORGE_EXEC_METRICS_FILE"         /* path; %p: the pid */
#define EXEC_ENV_VERBOSE "RAMFORGE_EXEC_VERBOSE"              /* 1: a line per boundary */
#define EXEC_ENV_SPOOL "RAMFORGE_EXEC_METRICS_SPOOL" /* path; %p: the pid (exec's parent) */
/* ggml_type ids of the program's KV cache (its -ctk, -ctv); absent: f16 */
#define EXEC_ENV_CACHE_TYPE_K "RAMFORGE_EXEC_CACHE_TYPE_K"
#define EXEC_ENV_CACHE_TYPE_V "RAMFORGE_EXEC_CACHE_TYPE_V"
/* llama-server's --cache-ram, MiB; absent: no bound known */
#define EXEC_ENV_CACHE_RAM "RAMFORGE_EXEC_CACHE_RAM_MIB"
/* 1: stop the prompt cache's growth while an operation is over the hard limit (absent: no) */
#define EXEC_ENV_CACHE_STOP "RAMFORGE_EXEC_CACHE_STOP"

/* What the environment asked for. */
struct exec_config {
    struct rf_session_params params; /* policy, target, reserve, release and admission modes,
                                        history */
    bool has_staging;
    uint64_t staging_bytes;   /* staging budget after an idle release, bytes */
    uint64_t idle_ns;         /* 0: no idle boundary */
    uint64_t budget_quiet_ns; /* a budget release waits this long without a submission */
    uint32_t n_ctx;           /* the context admission before the load assumes; 0: unknown */
    bool has_cache_ram;       /* the program's prompt-cache bound is known */
    uint64_t cache_ram_mib;   /* llama-server's --cache-ram, MiB (0: the cache off) */
    bool cache_stop;          /* the cache's growth stopped while short of room (engine_prompt.c) */
    char report[PATH_MAX];    /* "" : none; %p expanded */
    char metrics[PATH_MAX];   /* "" : none; %p expanded */
    char spool[PATH_MAX];     /* the metrics again, for exec's parent; "" : none; %p expanded */
    bool verbose;
    /* what admission before the load counts: n_ctx, the program's cache types (f16 unless it
       said); the context unknown, its smallest (one padded block), a lower bound */
    struct rf_operation_request load_request;
};

/*
 * Reads the configuration from the environment into *out. Returns 0, or
 * -EINVAL with why (one line) naming the variable and its bad value.
 */
int exec_config_read(struct exec_config *out, char *why, size_t why_size);

/* One model the program loaded, and its session. */
/* The contexts an operation ran in, summed for its ledger (engine_memory.c). */
struct exec_ctx_figures {
    uint64_t n_contexts;
    uint64_t n_ctx;                         /* their cells */
    uint32_t type_k, type_v;                /* their cache types (the last one's) */
    bool mixed_types;                       /* not all of one K and V type */
    bool no_breakdown;                      /* llama's memory breakdown did not answer for one */
    uint64_t kv_cache_bytes, compute_bytes; /* the breakdown's sums, bytes */
};

struct exec_model {
    struct llama_model *model; /* the program's; NULL: a free slot */
    struct rf_session *s;      /* session_mu */
    char path[PATH_MAX];
    unsigned number;        /* 1, 2, ...: the lowest no other managed model held at its load */
    bool op_open;           /* session_mu: an operation is open (the load's, or one whose
                               bookkeeping ran) */
    char report[PATH_MAX];  /* this model's report path; "" none */
    char metrics[PATH_MAX]; /* this model's metrics path; "" none */
    char spool[PATH_MAX];   /* this model's metrics for exec's parent; "" none */
    /* table_mu: */
    uint32_t contexts;          /* contexts alive */
    struct rf_idle_clock clock; /* submissions (decode, encode) since the load, those the
                                   last ended operation covered, in flight (contexts between
                                   submission and completion), the last activity */
    uint64_t submits_bookkept;  /* clock.submits when the open operation's bookkeeping ran
                                   (counting its own submission) */
    bool starting;              /* a submission runs the operation's bookkeeping: the others
                                   wait for it (start_cv) */
    uint32_t last_n_ctx;        /* n_ctx of the last context created */
    uint64_t operations;        /* operations ended (the load's included) */
    uint64_t idle_boundaries, idle_alive_boundaries;
    uint64_t gate_wait_max_ns;    /* the longest a submission waited in the gate (a release's
                                     madvise pass) */
    uint64_t bookkeeping_max_ns;  /* the longest an operation's bookkeeping took (admission,
                                     staging, pins: the first submission of an operation) */
    uint64_t bookkeeping_skipped; /* submissions that found a boundary running */
    /* session_mu (engine_admit.c): */
    bool op_rejected;                     /* the last operation's admission was not admitted */
    bool op_said;                         /* a rejection was said: its outcome and cause */
    bool stream_unplanned_said;           /* streaming's plan not applied was said */
    enum rf_admission_outcome op_outcome; /* the last rejection said: outcome and cause */
    enum rf_admission_cause op_cause;
    uint64_t op_rejections; /* operations whose admission was rejected or unknown */
    uint64_t op_over_bytes; /* the last operation's projected charge over the binding hard
                               limit, bytes; 0: not over */
    /* table_mu (engine_prompt.c): */
    bool cache_seen;              /* a state was saved or restored: cache below initialized */
    struct rf_prompt_cache cache; /* llama-server's host prompt cache, modelled */
    bool has_anon_base;
    uint64_t anon_base_bytes;          /* RssAnon before the first save, bytes */
    uint64_t partial_states;           /* partial states (checkpoints) saved or restored */
    struct exec_ctx_figures ctxs_gone; /* table_mu: contexts freed in the open operation */
    bool room_short;      /* table_mu: the last operation's admission rejected it: hard limit */
    bool cache_stopped;   /* table_mu: the last save was stopped (said once per stop) */
    uint64_t cache_stops; /* table_mu: saves stopped (their size given over the bound) */
    /* watch --budget's releases through the control channel (engine_control.c) and the
       wake after each: the first submission after a release timed from its start (the
       gate and bookkeeping included) to its completion observed (the first token's logits) */
    uint64_t budget_releases, budget_accepted_bytes; /* taken; bytes madvise accepted */
    bool budget_wake_armed;               /* a release was taken: the next submission is timed */
    const struct llama_context *wake_ctx; /* the timed submission's context; NULL: none */
    uint64_t wake_t0_ns, wake_last_ns;    /* its start; the last wake measured */
    uint64_t budget_wakes;                /* wakes measured */
    bool wake_unwritten;                  /* a wake measured since the figures were written */
};

/* The engine: its configuration, tables and the idle thread. */
struct exec_engine {
    const struct forge_exec_host *host;
    struct exec_config cfg;
    pthread_mutex_t table_mu, session_mu;
    pthread_cond_t idle_cv;  /* table_mu: signalled at a stop only; otherwise the idle thread wakes
                                at its deadline */
    pthread_cond_t start_cv; /* table_mu: a model's operation start (bookkeeping) ended */
    struct exec_model models[EXEC_MAX_MODELS];
    unsigned loads;              /* models managed so far */
    unsigned loads_without_mmap; /* loads not managed: no mmap */
    char said[PATH_MAX + 32];    /* "what:path" the engine said of the last load refused or not
                                    loadable ("": none): said once */
    struct exec_ctx {
        struct llama_context *ctx;
        struct exec_model *m;
        uint32_t n_ctx;
        uint32_t type_k, type_v; /* its cache types (ggml_type ids, -ctk/-ctv) */
        bool in_flight;
        bool decoded; /* table_mu: it submitted a decode (its compute buffers touched) */
        struct forge_window_decoration *window; /* its params' decoration (streaming with
                                                   a read-ahead ring); NULL: none */
    } * ctxs;
    size_t n_ctxs, cap_ctxs;
    bool idle_started, stopping;
    pthread_t idle_tid;
};

extern struct exec_engine exec_engine;

/* engine.c: the decision on what ("loading PATH", ...) in run's words; takes table_mu. */
/* Whether what (a refusal, a bad file) of path is new: not what the engine said of the last
   load (llama-server asks twice: its --fit pass, then its load). Under table_mu. */
bool exec_said_first(const char *what, const char *path);
void exec_say_admission(const char *what, const char *path, const struct rf_admission_result *adm);

/* The sentence a decision before the load adds when the program's context is not known. */
#define EXEC_CTX_LOWER_BOUND                                                                       \
    "The program's context size is not known before its load (ramforge exec -c, or "               \
    "llama-server's own -c): the KV cache counted is the smallest llama.cpp makes (256 cells), "   \
    "a lower bound, and the known parts alone do not fit; the context is decided again when "      \
    "the program creates it"

/*
 * engine_admit.c: admission of the context the program asks llama_init_from_model for (want:
 * its cells, the model's training context when it asked 0), before its KV cache exists, under
 * session_mu (taken here). 0: create it; -1: refused (said in one line, the report written).
 * Not decidable: one line, and it is created.
 */
int exec_context_admit(struct exec_model *m, const struct forge_exec_context *want);

/*
 * engine_admit.c, under session_mu: what an operation's admission (st, rf_session_operation_start)
 * decided while the program decodes: a warning on stderr once per change of outcome, the
 * report's warning, the figures the metrics write. A decode is never refused.
 */
struct rf_operation_start;
void exec_op_admission(struct exec_model *m, const struct rf_operation_start *st);

/* engine_prompt.c: a state of bytes saved or restored on a context of m (under table_mu). */
void exec_prompt_state(struct exec_model *m, uint64_t bytes, bool saved, bool partial);
/* The size of a state to save on a context of m that the program is given: size, or one byte
   over its prompt cache's bound while the room is short (under table_mu). */
uint64_t exec_prompt_state_size(struct exec_model *m, uint64_t size, bool partial);
/* The ledger's PromptCache of m into its session, before an operation ends (session_mu). */
void exec_prompt_push(struct exec_model *m);
/* The prompt cache's series of m (labels of the model at canon) into p (session_mu). */
struct rf_prom;
void exec_prompt_families(struct exec_model *m, struct rf_prom *p, const char *canon);

/*
 * engine_memory.c, under table_mu, at a submission on e (NULL: not managed): marks e decoded
 * (its decode touches its compute buffers, in an operation or not). When the submission
 * starts m's operation (book), whether any context of m had not decoded before, e included;
 * *cold_bytes: their compute buffers (llama.cpp's memory breakdown, the known ones), the
 * operation's growth. Two contexts made before either decodes are both cold at the start.
 */
bool exec_ctx_submit_cold(struct exec_model *m, struct exec_ctx *e, bool book,
                          uint64_t *cold_bytes);
/* e's size, cache types and memory breakdown added to f (under table_mu, e alive). */
void exec_ctx_account(struct exec_ctx_figures *f, const struct exec_ctx *e);
/* The output of m's operation for its ledger: the n_ctx, cache types and memory breakdown of
   m's live contexts and of those freed since the last call (table_mu taken). False: none. */
bool exec_op_output(struct exec_model *m, struct rf_operation_output *out);

/* engine_ops.c, under session_mu unless said. */

/* Opens the operation of m's submissions: admission, staging after an idle release, pins;
   warm: every context of m decoded before, else cold_bytes: the compute buffers (allocated,
   not yet touched) of those that did not (exec_ctx_submit_cold). */
void exec_op_begin(struct exec_model *m, int32_t n_tokens, bool warm, uint64_t cold_bytes);
/* Ends the open operation with boundary b (-1: none, at exit), then writes the figures. */
void exec_op_end(struct exec_model *m, int b);
/* The idle boundary (alive: contexts kept), the operation ended, the figures written. */
void exec_op_idle(struct exec_model *m, bool alive);
/* Writes the session report and the metrics files of m (--metrics-file, the spool). */
void exec_write_figures(struct exec_model *m);
/* The idle thread's body (engine_ops.c); started at the first managed model. */
void *exec_idle_thread(void *ud);

/* engine_control.c: the control channel, started (once) at the first managed model; its
   socket removed at exit. */
void exec_control_start(void);
void exec_control_stop(void);
/* The model of slot i was freed: its identity and request forgotten (a later model may get
   the same addresses). Called without session_mu. */
void exec_control_forget(size_t i);
/* The wake after a budget release: ctx's submission (started at t0) is timed when m's release
   armed it; its completion ends the timing. Under table_mu. */
void exec_control_wake_submit(struct exec_model *m, const struct llama_context *ctx, uint64_t t0);
void exec_control_wake_done(struct exec_model *m, const struct llama_context *ctx);

#endif
