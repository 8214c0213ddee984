/*
 * The report as Prometheus text (ramforge/session/metrics.h): one writer for
 * serve's /metrics and run's --metrics-file. Plain stdio (no jansson); the
 * text is built in an open_memstream buffer and written with core's
 * rf_file_write_atomic. The release families are counters over the whole
 * session: the retained applications plus those the history cap dropped.
 * The operation's admission, staging and speed families are those of the
 * last operation that ran a request: an operation that ran none (serve's
 * idle boundary) keeps them (ses_held), so a dashboard's tok/s, TTFT, load
 * time and admission panels do not go blank while the server is idle; the
 * load time, the session's, is written for every operation after the load.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ramforge/core/report_json.h"
#include "ramforge/session/metrics.h"

#include "session_internal.h"

static void family(FILE *f, const char *name, const char *type, const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void rf_metrics_label(FILE *f, const char *name, const char *value)
{
    fprintf(f, "%s=\"", name);
    for (const char *p = value ? value : ""; *p; p++) {
        if (*p == '\\' || *p == '"')
            fputc('\\', f);
        if (*p == '\n')
            fputs("\\n", f);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

void rf_metrics_model_labels(FILE *f, const char *path)
{
    const char *slash = path ? strrchr(path, '/') : NULL;
    rf_metrics_label(f, "model", slash ? slash + 1 : path);
    fputc(',', f);
    rf_metrics_label(f, "path", path);
}

/* name{model=...,path=... (the caller closes the braces). */
static void series(FILE *f, const char *name, const char *path)
{
    fprintf(f, "%s{", name);
    rf_metrics_model_labels(f, path);
}

/* The operation's ledger and its last sample. */
static void ledger_metrics(FILE *f, const struct rf_report *r, const char *m)
{
    const struct rf_ledger *l = r->ledger;
    family(f, "ramforge_ledger_bytes", "gauge",
           "The operation's memory ledger, bytes; provenance says what kind of figure.");
    for (int c = 0; l && c < RF_LEDGER_N_CATEGORIES; c++) {
        const struct rf_ledger_entry *e = &l->entries[c];
        if (!e->has_value)
            continue;
        series(f, "ramforge_ledger_bytes", m);
        fprintf(f, ",category=\"%s\",provenance=\"%s\"} %" PRIu64 "\n",
                rf_ledger_category_name(e->category), rf_provenance_name(e->provenance),
                e->value_bytes);
    }
    family(f, "ramforge_ledger_unknown", "gauge",
           "1 for a ledger category whose value is unknown (absent from ramforge_ledger_bytes).");
    for (int c = 0; l && c < RF_LEDGER_N_CATEGORIES; c++) {
        if (l->entries[c].has_value)
            continue;
        series(f, "ramforge_ledger_unknown", m);
        fprintf(f, ",category=\"%s\"} 1\n", rf_ledger_category_name(l->entries[c].category));
    }
    const struct rf_residency_sample *last = r->n_samples ? &r->samples[r->n_samples - 1] : NULL;
    /* The figures without the sample's name (a label that changed value broke a graph's
       series); which sample they are is its own info series. */
    family(f, "ramforge_mapping_rss_bytes", "gauge",
           "Resident bytes of the model mappings at the operation's last sample.");
    if (last && last->has_mapping) {
        series(f, "ramforge_mapping_rss_bytes", m);
        fprintf(f, "} %" PRIu64 "\n", last->mapping_rss_bytes);
    }
    family(f, "ramforge_process_rss_bytes", "gauge", "VmRSS at the operation's last sample.");
    if (last && last->has_process_rss) {
        series(f, "ramforge_process_rss_bytes", m);
        fprintf(f, "} %" PRIu64 "\n", last->process_rss_bytes);
    }
    family(f, "ramforge_operation_last_sample_info", "gauge",
           "1, labelled with the boundary of the operation's last sample (the two gauges above).");
    if (last && last->label) {
        series(f, "ramforge_operation_last_sample_info", m);
        fputc(',', f);
        rf_metrics_label(f, "sample", last->label);
        fputs("} 1\n", f);
    }
}

/* The operation's admission outcome and staging. */
static void operation_metrics(FILE *f, const struct rf_report *r, const char *m)
{
    const struct rf_admission_result *a = r->admission;
    family(f, "ramforge_operation_admission", "gauge",
           "1 for the operation's admission outcome; absent when none was decided.");
    for (int o = RF_ADMIT_ADMITTED; a && o <= RF_ADMIT_UNKNOWN; o++) {
        series(f, "ramforge_operation_admission", m);
        fprintf(f, ",outcome=\"%s\"} %d\n", rf_admission_outcome_name((enum rf_admission_outcome)o),
                (int)a->outcome == o);
    }
    family(f, "ramforge_operation_admission_refused", "gauge",
           "1 when admission refused the operation; absent when none was decided.");
    if (a) {
        series(f, "ramforge_operation_admission_refused", m);
        fprintf(f, "} %d\n", a->refused ? 1 : 0);
    }
    family(f, "ramforge_operation_staging_selected_bytes", "gauge",
           "Bytes the operation's staging plan selected; absent without a plan.");
    if (r->staging) {
        series(f, "ramforge_operation_staging_selected_bytes", m);
        fprintf(f, "} %" PRIu64 "\n", r->staging->selected_bytes);
    }
    family(f, "ramforge_operation_staging_accepted_bytes", "gauge",
           "Bytes madvise(MADV_WILLNEED) accepted for the operation; absent if staging did not "
           "run.");
    if (r->staging && r->staging_attempted) {
        series(f, "ramforge_operation_staging_accepted_bytes", m);
        fprintf(f, "} %" PRIu64 "\n", r->staging_accepted_bytes);
    }
}

/* One gauge of the operation, absent (the family alone) when unknown. */
static void op_gauge(FILE *f, const char *m, const char *name, const char *help, bool has, double v)
{
    family(f, name, "gauge", help);
    if (has) {
        series(f, name, m);
        /* bytes and counts exactly, rates and times to 9 significant digits */
        if (v == (double)(uint64_t)v && v < 9007199254740992.0)
            fprintf(f, "} %" PRIu64 "\n", (uint64_t)v);
        else
            fprintf(f, "} %.9g\n", v);
    }
}

/* The operation's speed and storage traffic: what a dashboard graphs across requests. */
static void speed_metrics(FILE *f, const struct rf_report *r, const char *m)
{
    const struct rf_timing *t = r->timing;
    const struct rf_stream_report *io = r->streaming;
    double tps;
    bool has_tps = rf_report_decode_tokens_per_s(r, &tps);

    op_gauge(f, m, "ramforge_operation_decode_tokens_per_second",
             "Decode rate of the operation: (generated tokens - 1) / decode time.", has_tps, tps);
    op_gauge(f, m, "ramforge_operation_ttft_seconds",
             "Time from the operation's inference start to its first sampled token.",
             t && t->has[RF_TIMER_TTFT], t ? (double)t->ns[RF_TIMER_TTFT] / 1e9 : 0);
    op_gauge(f, m, "ramforge_operation_model_load_seconds",
             "Time the model load took (the session's; the same for every operation).",
             t && t->has[RF_TIMER_MODEL_LOAD], t ? (double)t->ns[RF_TIMER_MODEL_LOAD] / 1e9 : 0);
    op_gauge(f, m, "ramforge_operation_tokens_generated", "Tokens the operation generated.",
             r->n_tokens > 0 || (t && t->has[RF_TIMER_DECODE]), (double)r->n_tokens);
    op_gauge(f, m, "ramforge_operation_storage_read_bytes",
             "Bytes the operation fetched from storage (/proc/self/io read_bytes delta).",
             io && io->has_read_bytes, io ? (double)io->read_bytes : 0);
    const struct rf_admission_result *a = r->admission;
    const struct rf_cgroup_level *bind = a && a->has_binding ? &a->cgroups[a->binding].level : NULL;
    op_gauge(f, m, "ramforge_cgroup_limit_bytes",
             "The binding cgroup hard limit at the operation's admission (the least room).",
             bind != NULL, bind ? (double)bind->limit.bytes : 0);
    op_gauge(f, m, "ramforge_operation_major_faults",
             "Major page faults of the operation (/proc/self/stat majflt delta).",
             io && io->has_major_faults, io ? (double)io->major_faults : 0);
}

void rf_release_totals_add(struct rf_release_totals *t, const struct rf_report_application *apps,
                           size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const struct rf_report_application *a = &apps[i];
        if (!a->attempted)
            continue;
        t->applications++;
        t->overflowed |=
            __builtin_add_overflow(t->requested_bytes, a->requested_bytes, &t->requested_bytes) ||
            __builtin_add_overflow(t->accepted_bytes, a->accepted_bytes, &t->accepted_bytes);
        const struct rf_recon_value *v[3] = {&a->mapping_delta, &a->rss_delta, &a->cgroup_delta};
        for (int k = 0; k < 3; k++)
            if (v[k]->has_value) {
                t->overflowed |=
                    __builtin_add_overflow(t->delta_bytes[k], v[k]->value, &t->delta_bytes[k]);
                t->has_delta[k] = true;
            }
    }
}

/* The session's releases (dropped: those the history cap took out of r; may be NULL). */
static void release_metrics(FILE *f, const struct rf_report *r,
                            const struct rf_release_totals *dropped, const char *m)
{
    struct rf_release_totals t = {0};
    if (dropped)
        t = *dropped;
    rf_release_totals_add(&t, r->applications, r->n_applications);
    family(f, "ramforge_release_applications_total", "counter",
           "Release applications attempted this session.");
    series(f, "ramforge_release_applications_total", m);
    fprintf(f, "} %" PRIu64 "\n", t.applications);
    /* an overflowed sum is unknown: no sample (never a wrapped number) */
    family(f, "ramforge_release_requested_bytes_total", "counter",
           "Bytes of release ranges submitted to madvise this session.");
    if (!t.overflowed) {
        series(f, "ramforge_release_requested_bytes_total", m);
        fprintf(f, "} %" PRIu64 "\n", t.requested_bytes);
    }
    family(f, "ramforge_release_accepted_bytes_total", "counter",
           "Bytes madvise accepted this session (not reclamation).");
    if (!t.overflowed) {
        series(f, "ramforge_release_accepted_bytes_total", m);
        fprintf(f, "} %" PRIu64 "\n", t.accepted_bytes);
    }
    static const char *const names[3] = {"mapping_rss", "process_rss", "cgroup_current"};
    family(f, "ramforge_release_observed_delta_bytes", "gauge",
           "Observed change across this session's releases, summed (negative: fell).");
    for (int k = 0; k < 3; k++) {
        if (!t.has_delta[k] || t.overflowed)
            continue;
        series(f, "ramforge_release_observed_delta_bytes", m);
        fprintf(f, ",measure=\"%s\"} %" PRId64 "\n", names[k], t.delta_bytes[k]);
    }
}

/* Whether r's operation ran a request: an admission decided, or tokens. */
static bool ran_request(const struct rf_report *r)
{
    const struct rf_timing *t = r->timing;
    return r->admission || r->n_tokens > 0 ||
           (t && (t->has[RF_TIMER_TTFT] || t->has[RF_TIMER_DECODE]));
}

void ses_metrics_hold(struct rf_session *s)
{
    const struct rf_report *r = rf_session_report(s, RF_REPORT_OPERATION);
    struct ses_held *h = &s->held;
    if (!r || !ran_request(r))
        return;
    memset(h, 0, sizeof(*h));
    h->has = true;
    if (r->timing)
        h->timing = *r->timing;
    /* the load time is the session's (only the first operation's timing holds it) */
    if (!h->timing.has[RF_TIMER_MODEL_LOAD] && s->model.load_ns)
        rf_timing_set(&h->timing, RF_TIMER_MODEL_LOAD, s->model.load_ns);
    h->rep.timing = &h->timing;
    h->rep.n_tokens = r->n_tokens;
    if (r->admission) {
        h->admission = *r->admission;
        h->rep.admission = &h->admission;
    }
    if (r->staging) {
        h->staging.selected_bytes = r->staging->selected_bytes;
        h->rep.staging = &h->staging;
        h->rep.staging_attempted = r->staging_attempted;
        h->rep.staging_accepted_bytes = r->staging_accepted_bytes;
    }
    if (r->streaming) {
        h->streaming.has_read_bytes = r->streaming->has_read_bytes;
        h->streaming.read_bytes = r->streaming->read_bytes;
        h->streaming.has_major_faults = r->streaming->has_major_faults;
        h->streaming.major_faults = r->streaming->major_faults;
        h->rep.streaming = &h->streaming;
    }
}

/* figures: the operation whose admission, staging and speed families are written (op, or
   the last one that ran a request). */
static int metrics_text(const struct rf_report *op, const struct rf_report *figures,
                        const struct rf_report *session, const struct rf_release_totals *dropped,
                        const char *model, char **out)
{
    char *text = NULL;
    size_t len = 0;
    if (!op || !out)
        return -EINVAL;
    *out = NULL;
    char canon[PATH_MAX];
    if (model && realpath(model, canon)) /* else the path as given */
        model = canon;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return -ENOMEM;
    ledger_metrics(f, op, model);
    operation_metrics(f, figures, model);
    speed_metrics(f, figures, model);
    release_metrics(f, session ? session : op, dropped, model);
    if (fclose(f) != 0) {
        free(text);
        return -ENOMEM;
    }
    *out = text;
    return 0;
}

int rf_metrics_text(const struct rf_report *op, const struct rf_report *session, const char *model,
                    char **out)
{
    return metrics_text(op, op, session, NULL, model, out);
}

int rf_session_metrics_text(struct rf_session *s, const char *model, char **out)
{
    if (!s)
        return -EINVAL;
    const struct rf_report *op = rf_session_report(s, RF_REPORT_OPERATION);
    const struct rf_report *figures = !op || ran_request(op) || !s->held.has ? op : &s->held.rep;
    return metrics_text(op, figures, rf_session_report(s, RF_REPORT_SESSION), &s->dropped_releases,
                        model, out);
}

int rf_metrics_write_file(const char *text, const char *path)
{
    if (!text || !path)
        return -EINVAL;
    return rf_file_write_text(path, text);
}
