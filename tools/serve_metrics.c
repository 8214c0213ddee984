/*
 * ramforge serve's /metrics: Prometheus text format 0.0.4. llama-server's
 * names where they overlap (tools/server/server-context.cpp, metrics
 * handler: llamacpp:prompt_tokens_total, llamacpp:tokens_predicted_total,
 * llamacpp:requests_processing, ...), then ramforge's: the last operation's
 * ledger (one gauge per category with a value, its provenance a label; an
 * unknown category is absent and ramforge_ledger_unknown says so), the
 * session's releases (requested, accepted, observed deltas), staging,
 * admission outcomes and idle boundaries.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "ramforge/ledger.h"
#include "ramforge/report.h"
#include "ramforge/session.h"
#include "serve.h"

static void family(FILE *f, const char *name, const char *type, const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void metric_u64(FILE *f, const char *name, const char *type, const char *help, uint64_t v)
{
    family(f, name, type, help);
    fprintf(f, "%s %" PRIu64 "\n", name, v);
}

/* The counters kept by the server itself (under sv->mu). */
static void server_metrics(FILE *f, struct serve *sv)
{
    pthread_mutex_lock(&sv->mu);
    metric_u64(f, "llamacpp:prompt_tokens_total", "counter", "Number of prompt tokens processed.",
               sv->prompt_tokens_total);
    family(f, "llamacpp:prompt_seconds_total", "counter", "Prompt process time");
    fprintf(f, "llamacpp:prompt_seconds_total %.6f\n", (double)sv->prompt_ns_total / 1e9);
    metric_u64(f, "llamacpp:tokens_predicted_total", "counter",
               "Number of generation tokens processed.", sv->tokens_predicted_total);
    family(f, "llamacpp:tokens_predicted_seconds_total", "counter", "Predict process time");
    fprintf(f, "llamacpp:tokens_predicted_seconds_total %.6f\n", (double)sv->decode_ns_total / 1e9);
    metric_u64(f, "llamacpp:requests_processing", "gauge", "Number of requests processing.",
               sv->processing);
    metric_u64(f, "llamacpp:requests_deferred", "gauge", "Number of requests deferred.",
               sv->queued);
    metric_u64(f, "ramforge_requests_total", "counter", "Generations run to their end.",
               sv->requests_total);
    metric_u64(f, "ramforge_requests_cancelled_total", "counter",
               "Generations stopped because the client left or the server stopped.",
               sv->cancelled_total);
    metric_u64(f, "ramforge_requests_rejected_queue_full_total", "counter",
               "Requests answered 503 because the queue was full.", sv->rejected_queue_full);
    family(f, "ramforge_admission_total", "counter",
           "Admission decisions by outcome (one per request, policy not off).");
    for (int o = 0; o < 4; o++)
        fprintf(f, "ramforge_admission_total{outcome=\"%s\"} %" PRIu64 "\n",
                rf_admission_outcome_name((enum rf_admission_outcome)o), sv->admission[o]);
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
    family(f, "ramforge_residency_state", "gauge",
           "1 for the residency state the server is in (resident, idle_released, staging).");
    for (int r = SERVE_RESIDENT; r <= SERVE_STAGING; r++)
        fprintf(f, "ramforge_residency_state{state=\"%s\"} %d\n",
                serve_residency_name((enum serve_residency)r), (int)sv->residency == r);
    pthread_mutex_unlock(&sv->mu);
}

/* The last operation's ledger and last sample (r: RF_REPORT_OPERATION). */
static void ledger_metrics(FILE *f, const struct rf_report *r)
{
    const struct rf_ledger *l = r ? r->ledger : NULL;
    family(f, "ramforge_ledger_bytes", "gauge",
           "The last operation's memory ledger, bytes; provenance says what kind of figure.");
    for (int c = 0; l && c < RF_LEDGER_N_CATEGORIES; c++) {
        const struct rf_ledger_entry *e = &l->entries[c];
        if (e->has_value)
            fprintf(f, "ramforge_ledger_bytes{category=\"%s\",provenance=\"%s\"} %" PRIu64 "\n",
                    rf_ledger_category_name(e->category), rf_provenance_name(e->provenance),
                    e->value_bytes);
    }
    family(f, "ramforge_ledger_unknown", "gauge",
           "1 for a ledger category whose value is unknown (absent from ramforge_ledger_bytes).");
    for (int c = 0; l && c < RF_LEDGER_N_CATEGORIES; c++)
        if (!l->entries[c].has_value)
            fprintf(f, "ramforge_ledger_unknown{category=\"%s\"} 1\n",
                    rf_ledger_category_name(l->entries[c].category));
    const struct rf_residency_sample *last =
        r && r->n_samples ? &r->samples[r->n_samples - 1] : NULL;
    if (last && last->has_mapping) {
        family(f, "ramforge_mapping_rss_bytes", "gauge",
               "Resident bytes of the model mappings at the last operation's last sample.");
        fprintf(f, "ramforge_mapping_rss_bytes{sample=\"%s\"} %" PRIu64 "\n", last->label,
                last->mapping_rss_bytes);
    }
    if (last) {
        family(f, "ramforge_process_rss_bytes", "gauge",
               "VmRSS at the last operation's last sample.");
        fprintf(f, "ramforge_process_rss_bytes{sample=\"%s\"} %" PRIu64 "\n", last->label,
                last->process_rss_bytes);
    }
}

/* The session's releases: requested and accepted bytes, observed deltas (signed sums). */
static void release_metrics(FILE *f, const struct rf_report *r)
{
    uint64_t req = 0, acc = 0, n = 0;
    int64_t d[3] = {0};
    bool has[3] = {false};
    for (size_t i = 0; r && i < r->n_applications; i++) {
        const struct rf_report_application *a = &r->applications[i];
        if (!a->attempted)
            continue;
        n++;
        req += a->requested_bytes;
        acc += a->accepted_bytes;
        const struct rf_recon_value *v[3] = {&a->mapping_delta, &a->rss_delta, &a->cgroup_delta};
        for (int k = 0; k < 3; k++)
            if (v[k]->has_value) {
                d[k] += v[k]->value;
                has[k] = true;
            }
    }
    metric_u64(f, "ramforge_release_applications_total", "counter",
               "Release applications attempted this session.", n);
    metric_u64(f, "ramforge_release_requested_bytes_total", "counter",
               "Bytes of release ranges submitted to madvise this session.", req);
    metric_u64(f, "ramforge_release_accepted_bytes_total", "counter",
               "Bytes madvise accepted this session (not reclamation).", acc);
    static const char *const names[3] = {"mapping_rss", "process_rss", "cgroup_current"};
    family(f, "ramforge_release_observed_delta_bytes", "gauge",
           "Observed change across this session's releases, summed (negative: fell).");
    for (int k = 0; k < 3; k++)
        if (has[k])
            fprintf(f, "ramforge_release_observed_delta_bytes{measure=\"%s\"} %" PRId64 "\n",
                    names[k], d[k]);
}

char *serve_metrics_text(struct serve *sv)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return NULL;
    server_metrics(f, sv);
    pthread_mutex_lock(&sv->session_mu);
    metric_u64(f, "ramforge_operations_total", "counter",
               "Operations ended (the load, each request, each idle boundary).",
               rf_session_operations(sv->session));
    ledger_metrics(f, rf_session_report(sv->session, RF_REPORT_OPERATION));
    release_metrics(f, rf_session_report(sv->session, RF_REPORT_SESSION));
    pthread_mutex_unlock(&sv->session_mu);
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}
