/*
 * The operations of a program ramforge does not drive (docs/EXEC.md): an
 * operation opens at the first submission after the load or after the
 * boundary that ended the previous one, and ends at the next of: the idle
 * boundary (no submission for --idle-seconds and none in flight; contexts
 * alive or not), the last context freed (after_session), the model freed,
 * or the process's exit. Under streaming the operation's start installs the
 * read-ahead window for the program's contexts (their params decorated at
 * creation, engine.c) and its end removes it, before the boundary. Each
 * ends with rf_session_operation_end, kept in
 * the session's bounded history, and the figures rewritten atomically:
 * the session report and the node_exporter textfile.
 */
#include "preload_internal.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ramforge/core/idle_clock.h"
#include "ramforge/core/policy.h"
#include "ramforge/core/timing.h"
#include "ramforge/session/host.h"
#include "ramforge/session/metrics.h"
#include "ramforge/session/session_ext.h"

/* Whether m has submissions since the last operation ended (table_mu inside); *submits:
   how many so far, the count the operation's end covers. */
static bool submitted_since(struct exec_model *m, uint64_t *submits)
{
    pthread_mutex_lock(&exec_engine.table_mu);
    *submits = m->clock.submits;
    bool since = rf_idle_clock_pending(&m->clock);
    pthread_mutex_unlock(&exec_engine.table_mu);
    return since;
}

void exec_op_begin(struct exec_model *m, int32_t n_tokens, bool warm, uint64_t cold_bytes)
{
    const struct exec_config *c = &exec_engine.cfg;
    m->op_open = true;
    if (c->params.policy == RF_POLICY_OFF)
        return;
    struct rf_operation_start_params sp = {
        /* in the contexts: their KV caches were admitted at their creation and are in the
           process's memory already (engine_admit.c; admission reads it now), their compute
           buffers too once they decoded: those of the contexts that did not are the growth */
        .request = {.n_prompt = n_tokens > 0 ? (uint32_t)n_tokens : 1,
                    .n_predict = 1,
                    .in_context = true,
                    .context_warm = warm,
                    .compute_bytes = warm ? 0 : cold_bytes},
        .admit = c->params.admission_mode != RF_ADMISSION_OFF, /* recorded: a submission is
                                                                  never refused */
        .staging_budget_bytes = c->has_staging ? c->staging_bytes : 0,
    };
    struct rf_operation_start st;
    /* staging after an idle release; streaming: pins and window undone at the operation's
       boundary */
    rf_session_operation_start(m->s, &sp, &st);
    bool installed; /* streaming: the decorated contexts' read-ahead window */
    int wrc = rf_session_stream_window_install(m->s, &installed);
    if (wrc < 0 && c->verbose)
        exec_engine.host->say("exec: %s: streaming: no read-ahead window (%s): the streamed "
                              "layers are read by the decode's faults",
                              m->path, rf_strerror(wrc));
    exec_op_admission(m, &st);
    const struct rf_report *r = rf_session_report(m->s, RF_REPORT_OPERATION);
    /* the plan not applied though the file does not fit: said once */
    if (r && r->streaming && r->streaming->plan_short && !m->stream_unplanned_said) {
        m->stream_unplanned_said = true;
        exec_engine.host->say("exec: warning: %s: streaming: %s", m->path,
                              r->streaming->plan_reason);
    }
}

/* Ends the operation: its report frozen, the submissions so far counted, the figures out. */
static void op_close(struct exec_model *m, uint64_t submits)
{
    struct rf_operation_output out;
    exec_prompt_push(m);
    int rc = rf_session_operation_end(m->s, exec_op_output(m, &out) ? &out : NULL);
    if (rc < 0)
        exec_engine.host->say("exec: %s: cannot end the operation: %s", m->path, rf_strerror(rc));
    m->op_open = false;
    pthread_mutex_lock(&exec_engine.table_mu);
    rf_idle_clock_closed(&m->clock, submits);
    m->operations++;
    pthread_mutex_unlock(&exec_engine.table_mu);
    exec_write_figures(m);
}

void exec_op_end(struct exec_model *m, int b)
{
    uint64_t submits;
    bool ran = submitted_since(m, &submits);
    if (!ran && !m->op_open)
        return;
    rf_session_stream_window_remove(m->s); /* its ring freed before the boundary samples */
    if (b >= 0 && ran && exec_engine.cfg.params.policy != RF_POLICY_OFF) {
        int rc = rf_session_boundary(m->s, (enum rf_boundary)b);
        if (rc < 0)
            exec_engine.host->say("exec: %s: the boundary failed: %s", m->path, rf_strerror(rc));
    }
    op_close(m, submits);
}

/*
 * The -v line of an idle boundary in the specification's words: the bytes its releases
 * requested, the bytes madvise accepted (native_accepted: a request taken, not proof of
 * reclamation) and the model mapping's Rss change measured around them. Under session_mu.
 */
static void say_idle(struct exec_model *m, bool alive, const struct rf_idle_result *r, uint64_t ns)
{
    char req[32], acc[32], mag[32], change[64];
    int64_t delta = r->mapping_change_bytes;
    uint64_t abs_delta = delta < 0 ? (uint64_t)0 - (uint64_t)delta : (uint64_t)delta;
    if (!r->has_mapping_change)
        snprintf(change, sizeof(change), "not measured");
    else if (delta == 0)
        snprintf(change, sizeof(change), "did not change");
    else
        snprintf(change, sizeof(change), "%s by %s", delta < 0 ? "fell" : "rose",
                 rf_size_format(abs_delta, mag, sizeof(mag)));
    exec_engine.host->say(
        "exec: %s: idle boundary (%s): release requested %s, the kernel "
        "accepted %s (madvise), the mapping's Rss measured: %s; %.1f ms",
        m->path, alive ? "contexts alive" : "no context",
        r->requested_bytes == UINT64_MAX ? "unknown"
                                         : rf_size_format(r->requested_bytes, req, sizeof(req)),
        r->accepted_bytes == UINT64_MAX ? "unknown"
                                        : rf_size_format(r->accepted_bytes, acc, sizeof(acc)),
        change, (double)ns / 1e6);
}

void exec_op_idle(struct exec_model *m, bool alive)
{
    uint64_t submits;
    if (!submitted_since(m, &submits))
        return;
    uint64_t t0 = rf_now_ns();
    struct rf_idle_result idle;
    rf_session_stream_window_remove(m->s); /* its ring freed before the release */
    rf_session_idle(m->s, alive, &idle);
    if (idle.error < 0)
        exec_engine.host->say("exec: %s: the idle boundary failed: %s", m->path,
                              rf_strerror(idle.error));
    pthread_mutex_lock(&exec_engine.table_mu);
    m->idle_boundaries++;
    m->idle_alive_boundaries += alive;
    pthread_mutex_unlock(&exec_engine.table_mu);
    if (exec_engine.cfg.verbose)
        say_idle(m, alive, &idle, rf_now_ns() - t0);
    op_close(m, submits);
}

/* The engine's own families (ramforge_exec_*), after the session's in p. */
static void exec_families(struct exec_model *m, struct rf_prom *p)
{
    pthread_mutex_lock(&exec_engine.table_mu);
    const struct {
        const char *name, *type, *help;
        double v;
    } fam[] = {
        {"ramforge_exec_contexts_alive", "gauge", "Contexts of the model the program holds.",
         m->contexts},
        {"ramforge_exec_submissions_total", "counter",
         "llama_decode and llama_encode calls on the model's contexts.", (double)m->clock.submits},
        {"ramforge_exec_operations_total", "counter", "Operations ended (the load's included).",
         (double)m->operations},
        {"ramforge_exec_idle_boundaries_total", "counter", "Idle boundaries run.",
         (double)m->idle_boundaries},
        {"ramforge_exec_idle_alive_boundaries_total", "counter",
         "Idle boundaries run with contexts alive.", (double)m->idle_alive_boundaries},
        {"ramforge_exec_gate_wait_max_seconds", "gauge",
         "The longest a submission waited in the execution gate (a release's madvise pass).",
         (double)m->gate_wait_max_ns / 1e9},
        {"ramforge_exec_bookkeeping_max_seconds", "gauge",
         "The longest an operation's bookkeeping delayed its first submission (admission, "
         "staging, pins).",
         (double)m->bookkeeping_max_ns / 1e9},
        {"ramforge_exec_operation_rejections_total", "counter",
         "Operations whose admission was rejected or unknown while the program decoded (warned, "
         "not stopped).",
         (double)m->op_rejections},
        {"ramforge_exec_operation_over_bytes", "gauge",
         "The last operation's projected charge over the binding hard limit (0: not over).",
         (double)m->op_over_bytes},
        {"ramforge_exec_budget_releases_total", "counter",
         "watch --budget releases taken through the control channel at the model's idle moment.",
         (double)m->budget_releases},
        {"ramforge_exec_budget_accepted_bytes_total", "counter",
         "Bytes madvise accepted in those releases (not proof of reclamation).",
         (double)m->budget_accepted_bytes},
        {"ramforge_exec_budget_wakes_total", "counter",
         "First submissions after a budget release, timed (the wake).", (double)m->budget_wakes},
        {"ramforge_exec_budget_wake_seconds", "gauge",
         "The last wake: the first submission after a budget release, from its start (gate and "
         "bookkeeping included) to its completion observed, the first token's logits; 0 before "
         "the first (ramforge_exec_budget_wakes_total).",
         (double)m->wake_last_ns / 1e9},
    };
    pthread_mutex_unlock(&exec_engine.table_mu);
    char canon[PATH_MAX];
    if (!realpath(m->path, canon)) /* else the path as given */
        snprintf(canon, sizeof(canon), "%s", m->path);
    for (size_t i = 0; i < sizeof(fam) / sizeof(fam[0]); i++) {
        rf_prom_family(p, fam[i].name, fam[i].type, fam[i].help);
        rf_prom_sample(p, fam[i].name);
        rf_metrics_model_labels(p, canon);
        rf_prom_double(p, fam[i].v);
    }
    exec_prompt_families(m, p, canon);
}

void exec_write_figures(struct exec_model *m)
{
    int rc;
    if (m->report[0] && (rc = rf_session_report_write(m->s, RF_REPORT_SESSION, m->report)) < 0)
        exec_engine.host->say("exec: cannot write %s: %s", m->report, rf_strerror(rc));
    if (!m->metrics[0] && !m->spool[0])
        return;
    /* every series labelled pid first: the label watch's series carry too */
    struct rf_prom p;
    char pid[24], *all = NULL;
    snprintf(pid, sizeof(pid), "%ld", (long)getpid());
    rf_prom_init(&p);
    rc = rf_prom_const_label(&p, "pid", pid);
    if (rc == 0 && (rc = rf_session_metrics_write(m->s, m->path, &p)) == 0)
        exec_families(m, &p);
    if (rc < 0)
        rf_prom_free(&p);
    else
        rc = rf_prom_take(&p, &all);
    const char *paths[2] = {m->metrics, m->spool};
    for (int i = 0, wrc; i < 2; i++)
        if (paths[i][0] && (wrc = rc < 0 ? rc : rf_metrics_write_file(all, paths[i])) < 0)
            exec_engine.host->say("exec: cannot write %s: %s", paths[i], rf_strerror(wrc));
    free(all);
}

/* The model whose idle boundary is due now (alive: contexts kept), else the next due time. */
static struct exec_model *due_model(uint64_t now, bool *alive, uint64_t *next)
{
    *next = now + exec_engine.cfg.idle_ns;
    for (size_t i = 0; i < EXEC_MAX_MODELS; i++) {
        struct exec_model *m = &exec_engine.models[i];
        uint64_t due = 0;
        enum rf_idle_due d = m->s ? rf_idle_clock_due(&m->clock, now, &due) : RF_IDLE_QUIET;
        if (d == RF_IDLE_DUE) {
            *alive = m->contexts > 0;
            return m;
        }
        if (d == RF_IDLE_NOT_DUE && due < *next)
            *next = due;
    }
    return NULL;
}

void *exec_idle_thread(void *ud)
{
    (void)ud;
    pthread_mutex_lock(&exec_engine.table_mu);
    while (!exec_engine.stopping) {
        bool alive = false;
        uint64_t now = rf_now_ns(), next;
        struct exec_model *m = due_model(now, &alive, &next);
        if (m) {
            pthread_mutex_unlock(&exec_engine.table_mu);
            pthread_mutex_lock(&exec_engine.session_mu);
            if (m->s)
                exec_op_idle(m, alive);
            pthread_mutex_unlock(&exec_engine.session_mu);
            pthread_mutex_lock(&exec_engine.table_mu);
            continue;
        }
        struct timespec ts = rf_deadline_realtime(next + 1000000, now); /* 1 ms past due */
        pthread_cond_timedwait(&exec_engine.idle_cv, &exec_engine.table_mu, &ts);
    }
    pthread_mutex_unlock(&exec_engine.table_mu);
    return NULL;
}
