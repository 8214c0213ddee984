/*
 * ramforge serve's /metrics (with --metrics): Prometheus text format 0.0.4.
 * llama-server's names where they overlap (tools/server/server-context.cpp, metrics
 * handler: llamacpp:prompt_tokens_total, llamacpp:tokens_predicted_total,
 * llamacpp:requests_processing, ...), then the server's own counters
 * (requests, admission outcomes, staging, idle boundaries), the live
 * figures read at scrape time (VmRSS, the cgroup's usage and limit), then the
 * report's families from the writer `run --metrics-file` shares
 * (ramforge/session/metrics.h): the last operation's ledger, last sample,
 * admission and staging, and the session's releases, each series with the
 * model label.
 */
#include <stdlib.h>
#include <string.h>

#include "ramforge/session/metrics.h"
#include "ramforge/session/session_ext.h"
#include "ramforge/sys/sys.h"
#include "serve.h"

const char *serve_residency_name(enum serve_residency r)
{
    switch (r) {
    case SERVE_RESIDENT:
        return "resident";
    case SERVE_IDLE_RELEASED:
        return "idle_released";
    case SERVE_IDLE_RELEASE_REFUSED:
        return "idle_release_refused";
    case SERVE_STAGING:
        return "staging";
    }
    return "unknown";
}

/* A family of one sample without labels. */
static void metric_u64(struct rf_prom *f, const char *name, const char *type, const char *help,
                       uint64_t v)
{
    rf_prom_family(f, name, type, help);
    rf_prom_sample(f, name);
    rf_prom_u64(f, v);
}

static void metric_double(struct rf_prom *f, const char *name, const char *type, const char *help,
                          double v)
{
    rf_prom_family(f, name, type, help);
    rf_prom_sample(f, name);
    rf_prom_double(f, v);
}

/*
 * Read at scrape time, unlike the report's families (the last operation's): the process's
 * VmRSS and its memory cgroup's usage and effective hard limit, exact_measured, each absent
 * when it could not be read (or, the limit, when none is set).
 */
static void live_metrics(struct rf_prom *f)
{
    struct rfsys_status st;
    struct rfsys_cgroup_memory cg;
    bool has_cg =
        rfsys_read_cgroup_memory(NULL, "self", &cg) == 0 && cg.version != RFSYS_CGROUP_NONE;

    rf_prom_family(f, "ramforge_live_process_rss_bytes", "gauge",
                   "VmRSS read at scrape time (/proc/self/status).");
    if (rfsys_read_status(NULL, "self", &st) == 0 && st.has_vm_rss) {
        rf_prom_sample(f, "ramforge_live_process_rss_bytes");
        rf_prom_u64(f, st.vm_rss_bytes);
    }
    rf_prom_family(f, "ramforge_live_cgroup_current_bytes", "gauge",
                   "The memory cgroup's usage read at scrape time (memory.current or "
                   "memory.usage_in_bytes).");
    if (has_cg && cg.has_current) {
        rf_prom_sample(f, "ramforge_live_cgroup_current_bytes");
        rf_prom_u64(f, cg.current_bytes);
    }
    rf_prom_family(
        f, "ramforge_live_cgroup_limit_bytes", "gauge",
        "The memory cgroup's effective hard limit read at scrape time; absent when none.");
    if (has_cg && cg.has_limit && !cg.limit_unlimited) {
        rf_prom_sample(f, "ramforge_live_cgroup_limit_bytes");
        rf_prom_u64(f, cg.limit_bytes);
    }
}

/* tokens / ns in tokens per second, 0 without time. */
static double per_second(uint64_t tokens, uint64_t ns)
{
    return ns ? (double)tokens / ((double)ns / 1e9) : 0.0;
}

/*
 * llama-server's other series where serve has the figure (under sv->mu):
 * nothing is drafted (no speculative decoding), so those counters are 0; the throughput gauges
 * cover the time since the last /metrics, as llama-server's.
 */
static void llama_server_more(struct rf_prom *f, struct serve *sv)
{
    metric_u64(f, "llamacpp:prompt_tokens_cached_total", "counter",
               "Number of prompt tokens served from the cache.", sv->prompt_tokens_cached_total);
    metric_u64(f, "llamacpp:n_decode_total", "counter", "Total number of llama_decode() calls",
               sv->n_decode_total);
    metric_u64(f, "llamacpp:n_tokens_max", "counter", "Largest observed n_tokens.",
               sv->n_tokens_max);
    metric_u64(f, "llamacpp:spec_decode_num_draft_tokens_total", "counter",
               "Total number of draft tokens generated.", 0);
    metric_u64(f, "llamacpp:spec_decode_num_accepted_tokens_total", "counter",
               "Total number of draft tokens accepted.", 0);
    metric_u64(f, "llamacpp:spec_decode_num_drafts_total", "counter",
               "Total number of speculative decoding drafts.", 0);
    metric_double(f, "llamacpp:prompt_tokens_seconds", "gauge",
                  "Average prompt throughput in tokens/s.",
                  per_second(sv->prompt_tokens_total - sv->bucket_prompt_tokens,
                             sv->prompt_ns_total - sv->bucket_prompt_ns));
    metric_double(f, "llamacpp:predicted_tokens_seconds", "gauge",
                  "Average generation throughput in tokens/s.",
                  per_second(sv->tokens_predicted_total - sv->bucket_predicted,
                             sv->decode_ns_total - sv->bucket_decode_ns));
    metric_u64(f, "llamacpp:n_busy_slots_per_decode", "gauge",
               "Average number of busy slots per llama_decode() call", sv->n_decode_total ? 1 : 0);
    sv->bucket_prompt_tokens = sv->prompt_tokens_total;
    sv->bucket_prompt_ns = sv->prompt_ns_total;
    sv->bucket_predicted = sv->tokens_predicted_total;
    sv->bucket_decode_ns = sv->decode_ns_total;
}

/* llama-server's series: the counters kept by the server itself (under sv->mu). */
static void llama_server_metrics(struct rf_prom *f, struct serve *sv)
{
    metric_u64(f, "llamacpp:prompt_tokens_total", "counter", "Number of prompt tokens processed.",
               sv->prompt_tokens_total);
    metric_double(f, "llamacpp:prompt_seconds_total", "counter", "Prompt process time",
                  (double)sv->prompt_ns_total / 1e9);
    metric_u64(f, "llamacpp:tokens_predicted_total", "counter",
               "Number of generation tokens processed.", sv->tokens_predicted_total);
    metric_double(f, "llamacpp:tokens_predicted_seconds_total", "counter", "Predict process time",
                  (double)sv->decode_ns_total / 1e9);
    llama_server_more(f, sv);
    metric_u64(f, "llamacpp:requests_processing", "gauge", "Number of requests processing.",
               sv->processing);
    metric_u64(f, "llamacpp:requests_deferred", "gauge", "Number of requests deferred.",
               sv->queue.n);
}

/* ramforge's counters kept by the server itself. */
static void server_metrics(struct rf_prom *f, struct serve *sv)
{
    pthread_mutex_lock(&sv->mu);
    metric_u64(f, "ramforge_requests_total", "counter", "Generations run to their end.",
               sv->requests_total);
    metric_u64(f, "ramforge_requests_cancelled_total", "counter",
               "Generations stopped because the client left or the server stopped.",
               sv->cancelled_total);
    metric_u64(f, "ramforge_requests_rejected_queue_full_total", "counter",
               "Requests answered 503 because the queue was full.", sv->rejected_queue_full);
    rf_prom_family(f, "ramforge_admission_total", "counter",
                   "Admission decisions by outcome (one per request, policy not off).");
    for (int o = 0; o < 4; o++) {
        rf_prom_sample(f, "ramforge_admission_total");
        rf_prom_label(f, "outcome", rf_admission_outcome_name((enum rf_admission_outcome)o));
        rf_prom_u64(f, sv->admission[o]);
    }
    metric_u64(f, "ramforge_admission_refused_total", "counter",
               "Requests admission refused (answered 503).", sv->admission_refused);
    metric_u64(f, "ramforge_idle_boundaries_total", "counter", "Idle boundaries run.",
               sv->idle_boundaries);
    metric_u64(f, "ramforge_staging_requested_bytes_total", "counter",
               "Bytes staging selected (MADV_WILLNEED submitted), summed over operations.",
               sv->staging_requested_bytes);
    metric_u64(f, "ramforge_staging_accepted_bytes_total", "counter",
               "Bytes madvise(MADV_WILLNEED) accepted, summed over operations.",
               sv->staging_accepted_bytes);
    rf_prom_family(f, "ramforge_residency_state", "gauge",
                   "1 for the residency state the server is in (resident, idle_released, "
                   "idle_release_refused, staging).");
    for (int r = SERVE_RESIDENT; r <= SERVE_STAGING; r++) {
        rf_prom_sample(f, "ramforge_residency_state");
        rf_prom_label(f, "state", serve_residency_name((enum serve_residency)r));
        rf_prom_u64(f, (int)sv->residency == r);
    }
    pthread_mutex_unlock(&sv->mu);
}

char *serve_metrics_ramforge_text(struct serve *sv)
{
    struct rf_prom f;
    char *text = NULL;
    rf_prom_init(&f);
    server_metrics(&f, sv);
    live_metrics(&f);
    pthread_mutex_lock(&sv->session_mu);
    metric_u64(&f, "ramforge_operations_total", "counter",
               "Operations ended (the load, each request, each idle boundary).",
               rf_session_operations(sv->session));
    /* The report's families: the writer run --metrics-file shares (ramforge/session/metrics.h). */
    int rc = rf_session_metrics_write(sv->session, sv->o->sess.model, &f);
    pthread_mutex_unlock(&sv->session_mu);
    if (rc < 0) {
        rf_prom_free(&f);
        return NULL;
    }
    return rf_prom_take(&f, &text) == 0 ? text : NULL;
}

char *serve_metrics_text(struct serve *sv)
{
    struct rf_prom f;
    char *text = NULL, *own = NULL;
    rf_prom_init(&f);
    pthread_mutex_lock(&sv->mu);
    llama_server_metrics(&f, sv);
    bool kept = sv->sleeping && sv->metrics_kept;
    if (kept)
        own = strdup(sv->metrics_kept);
    pthread_mutex_unlock(&sv->mu);
    if (!kept && (own = serve_metrics_ramforge_text(sv)) && sv->o->sleep) {
        /* awake: the text a sleep would answer with, unless a request ran since */
        char *copy = strdup(own);
        pthread_mutex_lock(&sv->mu);
        if (!sv->sleeping && !sv->processing && copy) {
            free(sv->metrics_kept);
            sv->metrics_kept = copy;
            copy = NULL;
        }
        pthread_mutex_unlock(&sv->mu);
        free(copy);
    }
    if (!own) {
        rf_prom_free(&f);
        return NULL;
    }
    rf_prom_raw(&f, own, strlen(own)); /* the ramforge families: whole, or kept while asleep */
    free(own);
    return rf_prom_take(&f, &text) == 0 ? text : NULL;
}
