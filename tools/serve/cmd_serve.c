/*
 * ramforge serve: one model under the session layer, served over HTTP
 * (serve_http.c). This file is the worker: it takes queued requests one at
 * a time and walks the session's boundaries for each (ramforge/session.h):
 *
 *   rf_session_operation_start: admission (refused: 503 with the reason),
 *   staging (only after an idle release, with --staging-budget), the
 *   streaming pins -> the read-ahead window under streaming ->
 *   forge_generate in a context of its own (end_of_session sample) -> after_session
 *   boundary (not with a releasing policy and --idle-seconds: see
 *   release_waits_for_idle) -> rf_session_operation_end
 *
 * and, after --idle-seconds without a request, once: the idle boundary
 * (the policy's release to the target) -> rf_session_operation_end.
 * SIGINT/SIGTERM: stop accepting, cancel the running generation after its
 * current token, answer the queued requests 503, write the session report,
 * exit 0.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/cli.h"
#include "common/limit_cgroup.h"
#include "ramforge/core/idle_clock.h"
#include "ramforge/core/report.h"
#include "ramforge/core/residency.h"
#include "ramforge/core/staging.h"
#include "ramforge/core/stream_window.h"
#include "ramforge/core/timing.h"
#include "ramforge/error.h"
#include "ramforge/forge/forge_observer.h"
#include "ramforge/session/host.h"
#include "ramforge/session/session_ext.h"
#include "ramforge/tools/defaults.h"
#include "serve.h"

/* forge_generate's hook: the request's context is alive, its buffers allocated. */
static void end_of_session(void *ud)
{
    struct serve *sv = ud;
    pthread_mutex_lock(&sv->session_mu);
    rf_session_boundary(sv->session, RF_BOUNDARY_END_OF_SESSION);
    pthread_mutex_unlock(&sv->session_mu);
}

/*
 * The start of job's operation (policy not off): admission, staging after an
 * idle release, the streaming pins (rf_session_operation_start). Returns false
 * when the job was answered (refused).
 */
static bool admit_and_stage(struct serve *sv, struct serve_job *j)
{
    struct rf_operation_start_params sp = {
        .request = {.n_prompt = (uint32_t)j->n_prompt, .n_predict = (uint32_t)j->n_predict},
        .admit = true,
        .staging_budget_bytes = sv->o->sess.has_staging ? sv->o->sess.staging_budget : 0,
    };
    if (sv->o->prompt_cache && j->cache_prompt) /* the kept context is of -c tokens */
        sp.request.n_predict = sv->n_ctx_limit - (uint32_t)j->n_prompt;
    struct rf_operation_start st;
    pthread_mutex_lock(&sv->mu);
    if (sp.staging_budget_bytes && sv->residency == SERVE_IDLE_RELEASED)
        sv->residency = SERVE_STAGING; /* what /metrics says while the host stages */
    pthread_mutex_unlock(&sv->mu);
    pthread_mutex_lock(&sv->session_mu);
    rf_session_operation_start(sv->session, &sp, &st);
    pthread_mutex_unlock(&sv->session_mu);
    const struct rf_admission_result *adm = &st.admission;
    pthread_mutex_lock(&sv->mu);
    sv->staging_requested_bytes += st.staging_requested_bytes;
    sv->staging_accepted_bytes += st.staging_accepted_bytes;
    if (st.admission_decided && (unsigned)adm->outcome < 4)
        sv->admission[adm->outcome]++;
    sv->admission_refused += st.admission_decided && adm->refused;
    pthread_mutex_unlock(&sv->mu);
    if (st.refused) {
        serve_job_finish(j, 503, "admission refused the request (%s, --admission %s): %s",
                         rf_admission_outcome_name(adm->outcome), rf_admission_mode_name(adm->mode),
                         adm->reason);
        pthread_mutex_lock(&sv->session_mu);
        rf_session_operation_end(sv->session, NULL);
        pthread_mutex_unlock(&sv->session_mu);
        return false;
    }
    if (st.admission_decided && sv->o->sess.verbose && adm->outcome != RF_ADMIT_ADMITTED)
        cli_error("warning: admission %s: %s", rf_admission_outcome_name(adm->outcome),
                  adm->reason);
    if (st.staging_error < 0)
        cli_error("cannot plan staging: %s", rf_strerror(st.staging_error));
    pthread_mutex_lock(&sv->mu);
    sv->residency = SERVE_RESIDENT;
    pthread_mutex_unlock(&sv->mu);
    return true;
}

/*
 * With a releasing policy and --idle-seconds, a request ends with the
 * end_of_session sample only: the release waits for the idle boundary, so
 * requests arriving back to back find the pages they faulted in still
 * resident. Otherwise every request ends with the after_session boundary,
 * as `ramforge run` does (a releasing policy then releases after each).
 */
static bool release_waits_for_idle(const struct serve_options *o)
{
    return o->idle_seconds > 0 && rf_policy_mutates(o->sess.policy);
}

/* One line per request on stderr (not with -q): status, tokens, first token, decode rate. */
static void log_request(const struct serve *sv, struct serve_job *j)
{
    if (sv->o->sess.quiet)
        return;
    pthread_mutex_lock(&j->mu);
    double ttft_ms = (double)j->prompt_ns / 1e6,
           tps = j->decode_ns && j->n_tokens > 1
                     ? (double)(j->n_tokens - 1) * 1e9 / (double)j->decode_ns
                     : 0.0;
    fprintf(stderr,
            "%s serve: request: %d, %zu prompt + %zu generated tokens, first token after "
            "%.1f ms, %.2f tok/s\n",
            RF_PROGRAM, j->status, j->n_prompt, j->n_tokens, ttft_ms, tps);
    pthread_mutex_unlock(&j->mu);
}

/*
 * --prompt-cache: takes the kept context out of sv (NULL: none), to be
 * freed before a boundary that needs the model quiescent or when a request
 * asks for no cache.
 */
static struct forge_context *serve_forget_prompt(struct serve *sv)
{
    struct forge_context *fc = sv->kept;
    sv->kept = NULL;
    return fc;
}

/* Runs one queued request through the session's boundaries and answers it. */
static void run_job(struct serve *sv, struct serve_job *j)
{
    const bool observing = sv->o->sess.policy != RF_POLICY_OFF;
    struct forge_generate_result gen = {0};
    char err[FORGE_ERR_MAX];

    if (atomic_load(&j->cancelled)) {
        serve_job_finish(j, 499, "the client closed the connection before the request ran");
        return;
    }
    if (observing && !admit_and_stage(sv, j)) {
        log_request(sv, j);
        return;
    }
    struct forge_generate_params gp = {
        .n_threads = (int32_t)sv->o->sess.n_threads,
        .on_session_end = observing ? end_of_session : NULL,
        .user_data = sv,
        .observer = serve_profile_observer(sv),
    };
    int rc = 0;
    /* streaming: the host's read-ahead window over this operation's pins, as run reads them;
       a context made with it must not outlive it: no prompt cache while it is installed */
    struct forge_window *window = NULL;
    if (observing && sv->o->sess.policy == RF_POLICY_STREAMING) {
        pthread_mutex_lock(&sv->session_mu);
        int wrc = rf_session_stream_window_open(sv->session, &window);
        pthread_mutex_unlock(&sv->session_mu);
        if (wrc < 0 && sv->o->sess.verbose)
            cli_warn_no_window(wrc);
    }
    gp.window = window;
    if (sv->o->prompt_cache && j->cache_prompt && !window) {
        gp.keep = &sv->kept;
        gp.n_ctx = sv->n_ctx_limit; /* llama-server's slot: one context of -c, reused */
    } else
        forge_context_free(serve_forget_prompt(sv));
    bool word = serve_generate(sv, j, &gp, &gen, err, &rc);
    pthread_mutex_lock(&sv->session_mu);
    rf_session_stream_window_close(sv->session, window);
    if (rc == 0)
        serve_profile_trace(sv);
    if (observing && !release_waits_for_idle(sv->o) && rf_policy_mutates(sv->o->sess.policy))
        forge_context_free(serve_forget_prompt(sv)); /* a release after each request: no cache */
    if (observing && !release_waits_for_idle(sv->o) && !sv->kept) {
        int brc = rf_session_boundary(sv->session, RF_BOUNDARY_AFTER_SESSION);
        if (brc < 0)
            cli_error("the after_session boundary failed: %s", rf_strerror(brc));
    }
    struct rf_operation_output out = rf_session_output_of(&gen, j->seed);
    int orc = rf_session_operation_end(sv->session, rc == 0 ? &out : NULL);
    if (orc < 0)
        cli_error("cannot end the operation: %s", rf_strerror(orc));
    serve_profile_after_request(sv);
    pthread_mutex_unlock(&sv->session_mu);

    if (rc < 0) {
        serve_job_finish(j, rc == -EINVAL ? 400 : 500, "%s", err);
    } else {
        pthread_mutex_lock(&sv->mu);
        sv->requests_total++;
        sv->prompt_tokens_total += gen.n_prompt - gen.n_cached;
        sv->prompt_tokens_cached_total += gen.n_cached;
        sv->tokens_predicted_total += gen.n_tokens;
        sv->prompt_ns_total += gen.prompt_ns;
        /* a decode before each sample, and one a prompt batch before the last */
        sv->n_decode_total +=
            gen.n_tokens + gen.stopped_eog + (gen.n_prompt - 1) / (uint64_t)sv->o->batch_size;
        if (gen.n_prompt + gen.n_tokens > sv->n_tokens_max)
            sv->n_tokens_max = gen.n_prompt + gen.n_tokens;
        sv->decode_ns_total += gen.decode_ns;
        sv->cancelled_total += gen.cancelled;
        sv->processing = false; /* counted before the answer is released to the client */
        pthread_mutex_unlock(&sv->mu);
        pthread_mutex_lock(&j->mu);
        j->stop_type = word ? "word" : gen.cancelled ? "none" : gen.stopped_eog ? "eos" : "limit";
        j->prompt_ns = gen.prompt_ns;
        j->n_cached = gen.n_cached;
        j->n_kv_kept = gen.n_kv_kept;
        j->decode_ns = gen.decode_ns;
        pthread_mutex_unlock(&j->mu);
        serve_job_finish(j, 200, NULL);
    }
    log_request(sv, j);
    forge_generate_result_free(&gen);
}

/* One line per idle release on stderr (not with -q): bytes requested, accepted, and the
 * measured change of the mapping RSS with the figure it reached (the sample after the last
 * release). */
static void log_idle(const struct rf_idle_result *r)
{
    char b1[32], b2[32], b3[48], b4[32];

    if (!r->attempted) {
        fprintf(stderr, "%s serve: idle: nothing released\n", RF_PROGRAM);
        return;
    }
    bool known = r->has_mapping_change;
    fprintf(stderr, "%s serve: idle release: requested %s, accepted %s; mapping RSS %s%s%s\n",
            RF_PROGRAM, cli_format_bytes(r->requested_bytes, false, b1, sizeof(b1)),
            cli_format_bytes(r->accepted_bytes, false, b2, sizeof(b2)),
            known ? cli_format_change(r->mapping_change_bytes, b3, sizeof(b3)) : "change unknown",
            !r->has_mapping_after               ? ""
            : known && !r->mapping_change_bytes ? ", at "
                                                : ", to ",
            r->has_mapping_after ? cli_format_bytes(r->mapping_after_bytes, false, b4, sizeof(b4))
                                 : "");
}

/* The idle boundary: the policy's release with the model quiescent, then its report. */
static void run_idle(struct serve *sv)
{
    struct rf_idle_result idle;
    serve_sleep_enter(sv);
    forge_context_free(serve_forget_prompt(sv)); /* the model quiescent: the cache goes first */
    pthread_mutex_lock(&sv->session_mu);
    rf_session_idle(sv->session, false, &idle);
    if (idle.error < 0)
        cli_error("the idle boundary failed: %s", rf_strerror(idle.error));
    enum serve_residency state = idle.outcome == RF_IDLE_RELEASED  ? SERVE_IDLE_RELEASED
                                 : idle.outcome == RF_IDLE_REFUSED ? SERVE_IDLE_RELEASE_REFUSED
                                                                   : SERVE_RESIDENT;
    if (!sv->o->sess.quiet)
        log_idle(&idle);
    int orc = rf_session_operation_end(sv->session, NULL);
    if (orc < 0)
        cli_error("cannot end the idle operation: %s", rf_strerror(orc));
    pthread_mutex_unlock(&sv->session_mu);
    pthread_mutex_lock(&sv->mu);
    sv->idle_boundaries++;
    sv->residency = state;
    snprintf(sv->idle_reason, sizeof(sv->idle_reason), "%s", idle.reason);
    pthread_mutex_unlock(&sv->mu);
    serve_sleep_entered(sv, state);
    if (sv->o->sess.verbose)
        cli_error("idle boundary ran after %lld s without a request", sv->o->idle_seconds);
}

/* The worker: jobs in order, the idle boundary when due, until stopping. */
static void worker(struct serve *sv)
{
    pthread_mutex_lock(&sv->mu);
    while (!atomic_load(&sv->stopping)) {
        struct serve_job *j = serve_dequeue(sv);
        if (j) {
            sv->processing = true;
            rf_idle_clock_submit(&sv->idle, rf_now_ns());
            serve_wake_locked(sv); /* drops what /metrics kept: none is kept while processing */
            pthread_mutex_unlock(&sv->mu);
            run_job(sv, j);
            serve_job_put(j);
            pthread_mutex_lock(&sv->mu);
            sv->processing = false;
            rf_idle_clock_finish(&sv->idle, rf_now_ns());
            continue;
        }
        uint64_t now = rf_now_ns(), due = 0;
        switch (rf_idle_clock_due(&sv->idle, now, &due)) {
        case RF_IDLE_QUIET:
            pthread_cond_wait(&sv->cv, &sv->mu);
            break;
        case RF_IDLE_DUE:
            rf_idle_clock_closed(&sv->idle, sv->idle.submits);
            pthread_mutex_unlock(&sv->mu);
            run_idle(sv);
            pthread_mutex_lock(&sv->mu);
            break;
        case RF_IDLE_NOT_DUE: {
            struct timespec ts = rf_deadline_realtime(due, now);
            pthread_cond_timedwait(&sv->cv, &sv->mu, &ts);
            break;
        }
        }
    }
    /* Stopping: what is still queued never runs. */
    serve_queue_drain(sv);
    pthread_mutex_unlock(&sv->mu);
}

/* SIGINT/SIGTERM (blocked in every thread): set stopping and wake the worker. */
static void *signal_thread(void *ud)
{
    struct serve *sv = ud;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    int sig = 0;
    sigwait(&set, &sig);
    if (sv->o->sess.verbose)
        cli_error("signal %d: stopping", sig);
    pthread_mutex_lock(&sv->mu);
    atomic_store(&sv->stopping, true);
    pthread_cond_broadcast(&sv->cv);
    pthread_mutex_unlock(&sv->mu);
    return NULL;
}

/*
 * The session parameters of the options: the shared ones', then serve's
 * own. run's other fields (admission mode, page budget, streaming tuning,
 * ...) have no serve option: rf_session_default_params' values, which are
 * run's defaults too.
 */
static struct rf_session_params session_params(const struct serve_options *o, uint64_t t_entry)
{
    struct rf_session_params p = session_options_params(&o->sess, t_entry);
    p.history_operations = (uint64_t)o->history; /* a long-lived session: bounded history */
    if (p.policy == RF_POLICY_STREAMING) /* the plan's ring, for the host's read-ahead window */
        p.stream_read_ahead_slots = RF_STREAM_READ_AHEAD_DEFAULT_SLOTS;
    return p;
}

int cmd_serve(int argc, char **argv)
{
    uint64_t t_entry = rf_now_ns();
    struct serve_options o = {
        .host = "127.0.0.1",
        .port = 8080,
        .sess = {.n_predict = 128, .policy = RF_POLICY_OBSERVE},
        .history = 64,
        .queue = 16,
        .timeout_s = 600,
        .head_timeout_s = 10,
        .max_connections = 256,
        .max_per_address = 32,
        .seed = -1,
        .temperature = 0.8,
        .cors_origins = "*",
        .batch_size = 2048,
    };
    struct serve sv = {.o = &o};
    char err[FORGE_ERR_MAX];
    int status = RF_EXIT_FAILURE;
    pthread_t sig_tid;
    bool sig_started = false;

    int rc = serve_parse_options(argc, argv, &o);
    if (rc >= 0)
        return rc;
    if (o.sess.has_memory_limit &&
        (rc = limit_cgroup_enter("rf-serve-", o.sess.memory_limit, o.sess.quiet,
                                 o.sess.policy == RF_POLICY_STREAMING)) >= 0)
        return rc; /* the parent: the server was the child, in the cgroup */
    cli_default_threads(&o.sess.n_threads);
    if (o.sess.verbose)
        rf_log_set(cli_log_sink, NULL);
    forge_init(o.sess.verbose);

    /* Block the stop signals before any thread starts: the signal thread takes them. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    pthread_mutex_init(&sv.session_mu, NULL);
    pthread_mutex_init(&sv.mu, NULL);
    pthread_mutex_init(&sv.conns_mu, NULL);
    pthread_cond_init(&sv.cv, NULL);
    atomic_init(&sv.stopping, false);

    struct forge_model_params mp = forge_model_default_params();
    mp.probe_access = o.sess.policy != RF_POLICY_OFF && rf_policy_mutates(o.sess.policy);
    mp.placement_access = o.sess.policy != RF_POLICY_OFF;
    mp.n_threads = (int)o.sess.n_threads;
    rc = rf_session_load(o.sess.model, &mp, session_params(&o, t_entry), &sv.session, err);
    if (rc < 0) {
        cli_error("%s", err);
        goto out;
    }
    sv.model = rf_session_forge_model(sv.session);
    if (!serve_profile_open(&sv) || !serve_chat_template_check(&sv))
        goto out;
    forge_model_get_info(sv.model, &sv.info);
    sv.n_ctx_limit = o.sess.n_ctx
                         ? (uint32_t)o.sess.n_ctx
                         : (uint32_t)(sv.info.n_ctx_train > 0 ? sv.info.n_ctx_train : 4096);
    sv.t_start_s = (uint64_t)time(NULL);
    /* The load counts as a submission: the first idle boundary may come before any request. */
    uint64_t t_loaded = rf_now_ns();
    rf_idle_clock_init(&sv.idle,
                       o.idle_seconds > 0 && o.sess.policy != RF_POLICY_OFF
                           ? (uint64_t)o.idle_seconds * 1000000000ull
                           : 0,
                       t_loaded);
    rf_idle_clock_touch(&sv.idle, t_loaded);
    /* The load's operation (after_load boundary) ends before the first request. */
    rc = rf_session_operation_end(sv.session, NULL);
    if (rc < 0 && rc != -EINVAL) {
        cli_error("%s: cannot end the load operation: %s", o.sess.model, rf_strerror(rc));
        goto out;
    }
    if (pthread_create(&sig_tid, NULL, signal_thread, &sv) != 0) {
        cli_error("cannot start the signal thread");
        goto out;
    }
    sig_started = true;
    rc = serve_http_start(&sv);
    if (rc < 0)
        goto out;
    worker(&sv);
    serve_http_stop(&sv);
    forge_context_free(serve_forget_prompt(&sv));
    status = serve_profile_close(&sv) ? 0 : RF_EXIT_FAILURE;
    if (o.sess.json_path) {
        rc = rf_session_report_write(sv.session, RF_REPORT_SESSION, o.sess.json_path);
        if (rc < 0) {
            cli_error("cannot write %s: %s", o.sess.json_path, rf_strerror(rc));
            status = RF_EXIT_FAILURE;
        }
    }
out:
    if (sig_started && status != 0 && !atomic_load(&sv.stopping)) {
        /* A start-up failure: wake the signal thread with the signal it waits for. */
        pthread_kill(sig_tid, SIGTERM);
    }
    if (sig_started)
        pthread_join(sig_tid, NULL);
    forge_observer_free(sv.observer);
    forge_chat_templates_free(sv.templates);
    free(sv.metrics_kept);
    rf_session_free(sv.session);
    pthread_cond_destroy(&sv.cv);
    pthread_mutex_destroy(&sv.conns_mu);
    pthread_mutex_destroy(&sv.mu);
    pthread_mutex_destroy(&sv.session_mu);
    return status;
}
