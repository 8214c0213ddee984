/*
 * ramforge serve's main (cmd_serve): one model under the session layer,
 * served over HTTP. It wires serve's two parts, each a library of its own
 * (tools/serve/CMakeLists.txt): the HTTP front (ramforge_serve_http:
 * serve_http_start, the endpoints, the job queue) and the worker
 * (ramforge_serve_worker: serve_worker_run, the session's boundaries of
 * each job and the idle boundary). It parses the options, enters the
 * --memory-limit cgroup, loads the model, starts the front, runs the
 * worker on this thread until a stop, then stops the front.
 * SIGINT/SIGTERM: stop accepting, cancel the running generation after its
 * current token, answer the queued requests 503, write the session report,
 * exit 0.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <time.h>

#include "common/cli.h"
#include "common/limit_cgroup.h"
#include "common/omp_env.h"
#include "ramforge/core/idle_clock.h"
#include "ramforge/core/stream_window.h"
#include "ramforge/core/timing.h"
#include "ramforge/error.h"
#include "ramforge/forge/forge_observer.h"
#include "ramforge/session/session_ext.h"
#include "serve.h"
#include "serve_worker.h"

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
    if (o.sess.policy == RF_POLICY_STREAMING && cli_file_over_limit(&o.sess))
        cli_exec_streaming_omp_env(argc, argv); /* libgomp's wait under streaming: omp_env.h */
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
    serve_worker_run(&sv);
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
