/*
 * ramforge serve's worker (serve_worker.h, library ramforge_serve_worker):
 * it takes the jobs the HTTP front queued (serve_queue.c) one at a time and
 * walks the session's boundaries for each (ramforge/session.h):
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
 * Stopping: what is still queued is answered 503 and never runs.
 */
#include <errno.h>
#include <stdio.h>
#include <time.h>

#include "common/cli.h"
#include "ramforge/core/idle_clock.h"
#include "ramforge/core/timing.h"
#include "ramforge/error.h"
#include "ramforge/session/host.h"
#include "ramforge/session/session_ext.h"
#include "serve.h"
#include "serve_worker.h"

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

struct forge_context *serve_forget_prompt(struct serve *sv)
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
        .routing = observing ? rf_session_routing(sv->session) : NULL, /* residency.experts */
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

void serve_worker_run(struct serve *sv)
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
