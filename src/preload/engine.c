/*
 * The engine of ramforge exec (libramforge-exec.so): loaded by the shim
 * at a process's first model load, it binds an rf_session to every model
 * the program loads with mmap (rf_session_wrap), counts the program's
 * contexts, holds the execution lease of each submission until that
 * context synchronizes, and decides admission before each load from the
 * GGUF header. Its one exported symbol is rf_exec_engine_init; the rest
 * is hidden. The boundaries and figures are engine_ops.c's.
 */
#include "preload_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ramforge/core/admission.h"
#include "ramforge/core/idle_clock.h"
#include "ramforge/core/policy.h"
#include "ramforge/core/report_json.h"
#include "ramforge/core/timing.h"
#include "ramforge/forge/forge.h"
#include "ramforge/forge/forge_load_release.h"
#include "ramforge/forge/forge_window.h"
#include "ramforge/session/host.h"
#include "ramforge/session/session_ext.h"

struct exec_engine exec_engine = {
    .table_mu = PTHREAD_MUTEX_INITIALIZER,
    .session_mu = PTHREAD_MUTEX_INITIALIZER,
    .idle_cv = PTHREAD_COND_INITIALIZER,
    .start_cv = PTHREAD_COND_INITIALIZER,
};

/* The model slot of model, or NULL (not managed). Under table_mu. */
static struct exec_model *model_of(const struct llama_model *model)
{
    for (size_t i = 0; model && i < EXEC_MAX_MODELS; i++)
        if (exec_engine.models[i].model == model)
            return &exec_engine.models[i];
    return NULL;
}

/* The context entry of ctx, or NULL. Under table_mu. */
static struct exec_ctx *ctx_of(const struct llama_context *ctx)
{
    for (size_t i = 0; i < exec_engine.n_ctxs; i++)
        if (exec_engine.ctxs[i].ctx == ctx)
            return &exec_engine.ctxs[i];
    return NULL;
}

/*
 * The lowest number no managed model holds (1, 2, ...): a model loaded again after its
 * free (llama-server's --sleep-idle-seconds) keeps the paths of the first. Under table_mu.
 */
static unsigned free_number(void)
{
    unsigned n = 1;
    for (bool taken = true; taken; n += taken) {
        taken = false;
        for (size_t i = 0; i < EXEC_MAX_MODELS; i++)
            taken |= exec_engine.models[i].model && exec_engine.models[i].number == n;
    }
    return n;
}

/* This model's path for the process-wide template: number 1's as is, the others' .N. */
static void numbered(char *out, size_t size, const char *tmpl, unsigned number)
{
    if (!tmpl[0] || number <= 1)
        snprintf(out, size, "%s", tmpl);
    else
        snprintf(out, size, "%s.%u", tmpl, number);
}

static void log_sink(enum rf_log_level level, const char *msg, void *ud)
{
    (void)ud;
    if (level >= RF_LOG_WARN)
        exec_engine.host->say("exec: %s", msg);
}

static int hook_before_load(const char *path, const struct forge_exec_load *load)
{
    const struct exec_config *c = &exec_engine.cfg;
    struct rf_session_params p = c->params;
    struct rf_admission_result *adm = NULL;
    struct rf_operation_request req = c->load_request;
    char what[PATH_MAX + 16];
    char err[RF_ERR_MAX];
    bool decided = false;
    int rc = 0;

    if (p.policy == RF_POLICY_OFF)
        return 0;
    if (forge_gguf_check(path, err) < 0) {
        /* as run says it ("PATH: not a GGUF file (bad magic)"), once; llama.cpp then refuses
           it too, in its own words */
        pthread_mutex_lock(&exec_engine.table_mu);
        if (exec_said_first("not loadable", path))
            exec_engine.host->say("exec: %s", err);
        pthread_mutex_unlock(&exec_engine.table_mu);
        return 0;
    }
    if (p.admission_mode == RF_ADMISSION_OFF)
        return 0;
    p.mlock_requested = load->mlock;
    adm = calloc(1, sizeof(*adm));
    if (!adm)
        return 0; /* fail open: the after-load figures still come */
    int arc = rf_session_preload_admit(path, load->use_extra_bufts, p, &req, adm, &decided, err);
    if (arc < 0) {
        /* llama.cpp will say what it thinks of the file; admission could not read it */
        exec_engine.host->say("exec: no admission before loading %s: %s", path, err);
    } else if (decided && adm->refused) {
        if (!c->n_ctx)
            rf_admission_append(adm, "%s", EXEC_CTX_LOWER_BOUND);
        snprintf(what, sizeof(what), "loading %s", path);
        exec_say_admission(what, path, adm);
        char report[PATH_MAX];
        pthread_mutex_lock(&exec_engine.table_mu);
        unsigned number = free_number();
        pthread_mutex_unlock(&exec_engine.table_mu);
        numbered(report, sizeof(report), c->report, number);
        if (report[0] && (arc = rf_session_preload_report_write(path, p, adm, report)) < 0)
            exec_engine.host->say("exec: cannot write %s: %s", report, rf_strerror(arc));
        rc = -1;
    } else if (decided && adm->outcome != RF_ADMIT_ADMITTED && c->verbose) {
        snprintf(what, sizeof(what), "loading %s", path);
        exec_say_admission(what, path, adm);
    }
    free(adm);
    return rc;
}

/* What the release during the program's last load on this thread did (hook_load_end). */
static __thread struct rf_load_release load_released;

static void *hook_load_begin(const char *path, struct llama_model_params *params,
                             const struct forge_exec_load *load)
{
    struct rf_session_params p = exec_engine.cfg.params;
    struct forge_load_release *lr = NULL;

    p.mlock_requested = load->mlock;
    memset(&load_released, 0, sizeof(load_released));
    if (p.policy == RF_POLICY_OFF || !load->mmap || load->no_alloc ||
        !rf_session_releases_during_load(&p) || forge_load_release_begin(path, params, &lr) < 0)
        return NULL;
    return lr;
}

static void hook_load_end(void *token)
{
    if (token)
        forge_load_release_end(token, &load_released);
}

static void hook_loaded(struct llama_model *model, const char *path,
                        const struct forge_exec_load *load)
{
    const struct exec_config *c = &exec_engine.cfg;
    struct rf_session_params p = c->params;
    struct rf_session *s = NULL;
    char err[RF_ERR_MAX];

    if (p.policy == RF_POLICY_OFF)
        return;
    if (load->no_alloc) {
        /* llama-server's --fit pass (common_fit_params): sizes measured, nothing read or
           mapped, the model freed at once (its real load, if any, follows) */
        if (c->verbose)
            exec_engine.host->say("exec: %s: llama.cpp's memory-fit probe (llama-server's "
                                  "--fit: a load that reads and allocates no weight), nothing "
                                  "to manage",
                                  path);
        return;
    }
    if (!load->mmap) {
        /* said only -v, or at exit when no load of the process was managed */
        pthread_mutex_lock(&exec_engine.table_mu);
        exec_engine.loads_without_mmap++;
        pthread_mutex_unlock(&exec_engine.table_mu);
        if (c->verbose)
            exec_engine.host->say("exec: %s is not managed: loaded without mmap (the ledger "
                                  "measures the mapping)",
                                  path);
        return;
    }
    p.mlock_requested = load->mlock;
    p.entry_ns = rf_now_ns();
    int rc = rf_session_wrap(model, path, p, &s, err);
    if (rc < 0) {
        exec_engine.host->say("exec: %s is not managed: %s", path, err);
        return;
    }
    rf_session_set_load_release(s, &load_released);
    pthread_mutex_lock(&exec_engine.table_mu);
    struct exec_model *m = NULL; /* the first free slot */
    for (size_t i = 0; !m && i < EXEC_MAX_MODELS; i++)
        if (!exec_engine.models[i].model)
            m = &exec_engine.models[i];
    if (m) {
        memset(m, 0, sizeof(*m));
        m->model = model;
        m->s = s;
        rf_idle_clock_init(&m->clock, c->idle_ns, rf_now_ns());
        m->number = free_number();
        exec_engine.loads++;
        snprintf(m->path, sizeof(m->path), "%s", path);
        numbered(m->report, sizeof(m->report), c->report, m->number);
        numbered(m->metrics, sizeof(m->metrics), c->metrics, m->number);
        numbered(m->spool, sizeof(m->spool), c->spool, m->number);
    }
    bool start_idle = m && c->idle_ns && !exec_engine.idle_started;
    exec_engine.idle_started |= start_idle;
    pthread_mutex_unlock(&exec_engine.table_mu);
    if (!m) {
        exec_engine.host->say("exec: %s is not managed: %d models are already", path,
                              EXEC_MAX_MODELS);
        rf_session_free(s);
        return;
    }
    if (start_idle && pthread_create(&exec_engine.idle_tid, NULL, exec_idle_thread, NULL) != 0)
        exec_engine.host->say("exec: cannot start the idle thread: no idle boundary");
    if (c->verbose)
        exec_engine.host->say("exec: managing %s (policy %s, pid %ld)", path,
                              rf_policy_name(p.policy), (long)getpid());
    exec_control_start();
    pthread_mutex_lock(&exec_engine.session_mu);
    m->op_open = true; /* the load's operation (after_load boundary) ends before any decode */
    exec_op_end(m, -1);
    pthread_mutex_unlock(&exec_engine.session_mu);
}

static void hook_model_freeing(struct llama_model *model)
{
    pthread_mutex_lock(&exec_engine.table_mu);
    struct exec_model *m = model_of(model);
    pthread_mutex_unlock(&exec_engine.table_mu);
    if (!m)
        return;
    pthread_mutex_lock(&exec_engine.session_mu);
    exec_op_end(m, RF_BOUNDARY_AFTER_SESSION);
    rf_session_free(m->s);
    pthread_mutex_lock(&exec_engine.table_mu);
    m->s = NULL;
    m->model = NULL;
    pthread_mutex_unlock(&exec_engine.table_mu);
    pthread_mutex_unlock(&exec_engine.session_mu);
    exec_control_forget((size_t)(m - exec_engine.models));
}

static int hook_context_admit(struct llama_model *model, const struct forge_exec_context *want)
{
    pthread_mutex_lock(&exec_engine.table_mu);
    struct exec_model *m = model_of(model);
    pthread_mutex_unlock(&exec_engine.table_mu);
    return m ? exec_context_admit(m, want) : 0;
}

/*
 * A managed model's context params decorated by its session (rf_session_context_params_decorate:
 * under streaming, the eval callback of the operation's read-ahead window, chaining the
 * program's). -1 (said): out of memory, the context is not created.
 */
static int hook_context_params(struct llama_model *model, struct llama_context_params *params,
                               void **token)
{
    pthread_mutex_lock(&exec_engine.table_mu);
    struct exec_model *m = model_of(model);
    struct rf_session *s = m ? m->s : NULL;
    pthread_mutex_unlock(&exec_engine.table_mu);
    struct forge_window_decoration *d = NULL;
    int rc = s ? rf_session_context_params_decorate(s, params, &d) : 0;
    *token = d;
    if (rc < 0)
        exec_engine.host->say("exec: %s: cannot decorate a context's parameters: %s: its "
                              "creation fails",
                              m->path, rf_strerror(rc));
    return rc < 0 ? -1 : 0;
}

/*
 * Records ctx of model with its decoration (token; freed here when ctx is NULL or -1). 0:
 * recorded, or not a managed model's; -1 (said): a managed model's context the table has no
 * room for (out of memory): its decodes would take no lease and a release could run under
 * them, so the shim frees it and the program sees its creation fail.
 */
static int hook_context_created(struct llama_model *model, struct llama_context *ctx,
                                uint32_t n_ctx, const struct forge_exec_context *asked, void *token)
{
    if (!ctx) {
        forge_window_decoration_free(token);
        return 0;
    }
    pthread_mutex_lock(&exec_engine.table_mu);
    struct exec_model *m = model_of(model);
    struct exec_ctx *e = NULL;
    if (m && exec_engine.n_ctxs == exec_engine.cap_ctxs) {
        size_t cap = exec_engine.cap_ctxs ? 2 * exec_engine.cap_ctxs : 8;
        void *p = reallocarray(exec_engine.ctxs, cap, sizeof(*exec_engine.ctxs));
        if (p) {
            exec_engine.ctxs = p;
            exec_engine.cap_ctxs = cap;
        }
    }
    if (m && exec_engine.n_ctxs < exec_engine.cap_ctxs) {
        e = &exec_engine.ctxs[exec_engine.n_ctxs++];
        *e = (struct exec_ctx){.ctx = ctx,
                               .m = m,
                               .n_ctx = n_ctx ? n_ctx : exec_engine.host->n_ctx(ctx),
                               .type_k = asked->type_k,
                               .type_v = asked->type_v,
                               .window = token};
        m->contexts++;
        m->last_n_ctx = e->n_ctx;
        rf_session_context_alive(m->s, true);
    }
    pthread_mutex_unlock(&exec_engine.table_mu);
    if (!e)
        forge_window_decoration_free(token); /* not a managed model's, or not recorded */
    if (!m || e)
        return 0;
    exec_engine.host->say("exec: out of memory: cannot record a context of %s (it would run "
                          "without the execution lease): its creation fails",
                          m->path);
    return -1;
}

/* Ends e's lease when a submission is in flight (completion observed). Under table_mu. */
static void complete(struct exec_ctx *e)
{
    if (!e->in_flight)
        return;
    e->in_flight = false;
    rf_idle_clock_finish(&e->m->clock, rf_now_ns());
    exec_control_wake_done(e->m, e->ctx);
    rf_session_lease_end(e->m->s);
}

/*
 * Before ctx is freed or submitted again: a submission still in flight is
 * synchronized and its
 * lease ended. The synchronization (libllama's own) runs outside table_mu.
 */
static void settle(struct llama_context *ctx)
{
    pthread_mutex_lock(&exec_engine.table_mu);
    struct exec_ctx *e = ctx_of(ctx);
    bool in_flight = e && e->in_flight;
    pthread_mutex_unlock(&exec_engine.table_mu);
    if (!in_flight)
        return;
    exec_engine.host->synchronize(ctx);
    pthread_mutex_lock(&exec_engine.table_mu);
    if ((e = ctx_of(ctx)))
        complete(e);
    pthread_mutex_unlock(&exec_engine.table_mu);
}

/* The decoration of the context this thread is freeing (hook_context_freeing to _freed: one
   llama_free call, no nesting). */
static __thread struct forge_window_decoration *freeing_window;

/*
 * Before llama_free(ctx): its lease ended and its entry gone (another thread may get the same
 * address from llama_init_from_model at once), still counted alive: its buffers are. Returns
 * its model (NULL: not a managed model's context) for hook_context_freed.
 */
static void *hook_context_freeing(struct llama_context *ctx)
{
    settle(ctx);
    pthread_mutex_lock(&exec_engine.table_mu);
    struct exec_ctx *e = ctx_of(ctx);
    struct exec_model *m = e ? e->m : NULL;
    freeing_window = e ? e->window : NULL;
    if (e) {
        complete(e);
        exec_ctx_account(&m->ctxs_gone, e); /* its buffers in the operation's ledger */
        *e = exec_engine.ctxs[--exec_engine.n_ctxs];
    }
    pthread_mutex_unlock(&exec_engine.table_mu);
    return m;
}

/* After the real llama_free: its decoration freed, no longer counted; the last context's
   after_session boundary. */
static void hook_context_freed(void *freeing)
{
    struct exec_model *m = freeing;
    forge_window_decoration_free(freeing_window);
    freeing_window = NULL;
    if (!m)
        return;
    pthread_mutex_lock(&exec_engine.table_mu);
    rf_session_context_alive(m->s, false);
    bool last = --m->contexts == 0;
    pthread_mutex_unlock(&exec_engine.table_mu);
    if (last) {
        /* No context left: the strict after_session boundary ends the operation. */
        pthread_mutex_lock(&exec_engine.session_mu);
        exec_op_end(m, RF_BOUNDARY_AFTER_SESSION);
        pthread_mutex_unlock(&exec_engine.session_mu);
    }
}

/* The decoration whose window turn this thread's submission holds (hook_submit to
   hook_submitted: one llama_decode call). */
static __thread struct forge_window_decoration *submitting_window;

/* Takes mu within ns nanoseconds; false when it stays held that long. */
static bool lock_within(pthread_mutex_t *mu, uint64_t ns)
{
    uint64_t now = rf_now_ns();
    struct timespec until = rf_deadline_realtime(now + ns, now);
    return pthread_mutex_timedlock(mu, &until) == 0;
}

/*
 * How long a submission that starts an operation waits for the session: a boundary that
 * holds it (an idle release and its figures: milliseconds) ends first, so the operation's
 * staging, pins and window are in place for the decode. Past this bound the decode runs
 * outside an operation and the next submission starts it.
 */
#define START_LOCK_NS (1000ull * 1000000ull)

static void hook_submit(struct llama_context *ctx, int32_t n_tokens)
{
    settle(ctx); /* a second submission on a context: the first completes before it */
    pthread_mutex_lock(&exec_engine.table_mu);
    struct exec_ctx *e = ctx_of(ctx);
    struct exec_model *m = e ? e->m : NULL;
    submitting_window = e ? e->window : NULL;
    uint64_t t0 = rf_now_ns();
    /* another submission starting the operation: wait for its pins and window, then decode in
       it (a boundary running is waited for, within START_LOCK_NS: below) */
    while (m && m->starting)
        pthread_cond_wait(&exec_engine.start_cv, &exec_engine.table_mu);
    bool book = m && m->submits_bookkept <= m->clock.submits_closed;
    uint64_t cold = 0; /* the compute buffers of m's contexts that never decoded, bytes */
    bool warm = !exec_ctx_submit_cold(m, e, book, &cold);
    if (book)
        m->starting = true;
    pthread_mutex_unlock(&exec_engine.table_mu);
    if (!m)
        return;
    if (book) {
        if (lock_within(&exec_engine.session_mu, START_LOCK_NS)) {
            exec_op_begin(m, n_tokens, warm, cold);
            pthread_mutex_unlock(&exec_engine.session_mu);
        } else {
            book = false;
        }
        pthread_mutex_lock(&exec_engine.table_mu);
        m->starting = false;
        if (book) /* at once: a submission woken now is in this operation */
            m->submits_bookkept = m->clock.submits + 1;
        pthread_cond_broadcast(&exec_engine.start_cv);
        pthread_mutex_unlock(&exec_engine.table_mu);
    }
    uint64_t t1 = rf_now_ns();
    rf_session_lease_begin(m->s); /* waits while a release's madvise pass runs */
    uint64_t gate_ns = rf_now_ns() - t1, book_ns = t1 - t0;
    pthread_mutex_lock(&exec_engine.table_mu);
    e = ctx_of(ctx);
    uint64_t now = rf_now_ns();
    rf_idle_clock_submit(&m->clock, now);
    if (e) {
        e->in_flight = true;
        exec_control_wake_submit(m, ctx, t0);
    } else {
        rf_idle_clock_finish(&m->clock, now);
        rf_session_lease_end(m->s); /* freed meanwhile by another thread: nothing to hold */
    }
    if (!book && m->submits_bookkept <= m->clock.submits_closed)
        m->bookkeeping_skipped++;
    if (gate_ns > m->gate_wait_max_ns)
        m->gate_wait_max_ns = gate_ns;
    if (book_ns > m->bookkeeping_max_ns)
        m->bookkeeping_max_ns = book_ns;
    pthread_mutex_unlock(&exec_engine.table_mu);
    /* after the operation's start (the window installed) and the lease: the window's turn */
    forge_window_hook_decode_begin(submitting_window);
}

static void hook_submitted(struct llama_context *ctx, int32_t rc)
{
    forge_window_hook_decode_end(submitting_window); /* computed: the weights back */
    submitting_window = NULL;
    if (rc == 0)
        return;
    pthread_mutex_lock(&exec_engine.table_mu);
    struct exec_ctx *e = ctx_of(ctx);
    if (e)
        complete(e); /* nothing was submitted, or it stopped: no lease to hold */
    pthread_mutex_unlock(&exec_engine.table_mu);
}

static void hook_completed(struct llama_context *ctx)
{
    pthread_mutex_lock(&exec_engine.table_mu);
    struct exec_ctx *e = ctx_of(ctx);
    if (e)
        complete(e);
    pthread_mutex_unlock(&exec_engine.table_mu);
}

static uint64_t hook_state_size(struct llama_context *ctx, uint64_t size, bool partial)
{
    pthread_mutex_lock(&exec_engine.table_mu);
    struct exec_ctx *e = ctx_of(ctx);
    uint64_t seen = e ? exec_prompt_state_size(e->m, size, partial) : size;
    pthread_mutex_unlock(&exec_engine.table_mu);
    return seen;
}

static void hook_state(struct llama_context *ctx, uint64_t bytes, bool saved, bool partial)
{
    pthread_mutex_lock(&exec_engine.table_mu);
    struct exec_ctx *e = ctx_of(ctx);
    if (e)
        exec_prompt_state(e->m, bytes, saved, partial);
    pthread_mutex_unlock(&exec_engine.table_mu);
}

static const struct forge_exec_hooks hooks = {
    .before_load = hook_before_load,
    .load_begin = hook_load_begin,
    .load_end = hook_load_end,
    .loaded = hook_loaded,
    .model_freeing = hook_model_freeing,
    .context_params = hook_context_params,
    .context_admit = hook_context_admit,
    .context_created = hook_context_created,
    .context_freeing = hook_context_freeing,
    .context_freed = hook_context_freed,
    .submit = hook_submit,
    .submitted = hook_submitted,
    .completed = hook_completed,
    .state = hook_state,
    .state_size = hook_state_size,
};

/* At exit: every open operation ended and every model's figures written. */
/*
 * Takes mu within EXIT_LOCK_NS. False when it stays held: a program that calls exit() from a
 * signal handler (llama-server's second SIGINT/SIGTERM) may have interrupted this very thread
 * inside a boundary or a write that holds it, and waiting would never end.
 */
#define EXIT_LOCK_NS (5ull * 1000000000ull)
static bool exit_lock(pthread_mutex_t *mu)
{
    return lock_within(mu, EXIT_LOCK_NS);
}

__attribute__((destructor)) static void engine_exit(void)
{
    if (!exec_engine.host)
        return;
    if (!exit_lock(&exec_engine.table_mu)) {
        exec_engine.host->say("exec: the program exited while the engine was busy (exit() from a "
                              "signal handler?): the last operation is not ended in the report");
        return;
    }
    if (exec_engine.loads == 0 && exec_engine.loads_without_mmap > 0 && !exec_engine.cfg.verbose)
        exec_engine.host->say("exec: no model was managed: every load was without mmap (the "
                              "ledger measures the mapping)");
    exec_engine.stopping = true;
    pthread_cond_broadcast(&exec_engine.idle_cv);
    pthread_mutex_unlock(&exec_engine.table_mu);
    exec_control_stop();
    if (!exit_lock(&exec_engine.session_mu)) {
        exec_engine.host->say("exec: the program exited during a boundary or a write of the "
                              "report (exit() from a signal handler?): the last operation is not "
                              "ended in the report");
        return;
    }
    for (size_t i = 0; i < EXEC_MAX_MODELS; i++)
        if (exec_engine.models[i].s)
            exec_op_end(&exec_engine.models[i], -1);
    pthread_mutex_unlock(&exec_engine.session_mu);
}

__attribute__((visibility("default"))) const struct forge_exec_hooks *
rf_exec_engine_init(const struct forge_exec_host *host)
{
    char why[RF_ERR_MAX];
    exec_engine.host = host;
    if (exec_config_read(&exec_engine.cfg, why, sizeof(why)) < 0) {
        host->say("exec: %s: models are not managed", why);
        exec_engine.host = NULL;
        return NULL;
    }
    if (exec_engine.cfg.verbose)
        rf_log_set(log_sink, NULL);
    return &hooks;
}
