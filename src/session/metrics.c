/*
 * The report as Prometheus text (ramforge/session/metrics.h): the families of
 * serve's /metrics, run's --metrics-file and exec's engine, written with
 * core's text writer (ramforge/core/prom.h) and to a file with core's
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

void rf_metrics_model_labels(struct rf_prom *p, const char *path)
{
    const char *slash = path ? strrchr(path, '/') : NULL;
    rf_prom_label(p, "model", slash ? slash + 1 : path);
    rf_prom_label(p, "path", path);
}

/* A sample of name with the model's labels (the caller adds more and its value). */
static void series(struct rf_prom *p, const char *name, const char *path)
{
    rf_prom_sample(p, name);
    rf_metrics_model_labels(p, path);
}

/* The operation's ledger and its last sample. */
static void ledger_metrics(struct rf_prom *f, const struct rf_report *r, const char *m)
{
    const struct rf_ledger *l = r->ledger;
    rf_prom_family(f, "ramforge_ledger_bytes", "gauge",
                   "The operation's memory ledger, bytes; provenance says what kind of figure.");
    for (int c = 0; l && c < RF_LEDGER_N_CATEGORIES; c++) {
        const struct rf_ledger_entry *e = &l->entries[c];
        if (!e->has_value)
            continue;
        series(f, "ramforge_ledger_bytes", m);
        rf_prom_label(f, "category", rf_ledger_category_name(e->category));
        rf_prom_label(f, "provenance", rf_provenance_name(e->provenance));
        rf_prom_u64(f, e->value_bytes);
    }
    rf_prom_family(
        f, "ramforge_ledger_unknown", "gauge",
        "1 for a ledger category whose value is unknown (absent from ramforge_ledger_bytes).");
    for (int c = 0; l && c < RF_LEDGER_N_CATEGORIES; c++) {
        if (l->entries[c].has_value)
            continue;
        series(f, "ramforge_ledger_unknown", m);
        rf_prom_label(f, "category", rf_ledger_category_name(l->entries[c].category));
        rf_prom_u64(f, 1);
    }
    const struct rf_residency_sample *last = r->n_samples ? &r->samples[r->n_samples - 1] : NULL;
    /* The figures without the sample's name (a label that changed value broke a graph's
       series); which sample they are is its own info series. */
    rf_prom_family(f, "ramforge_mapping_rss_bytes", "gauge",
                   "Resident bytes of the model mappings at the operation's last sample.");
    if (last && last->has_mapping) {
        series(f, "ramforge_mapping_rss_bytes", m);
        rf_prom_u64(f, last->mapping_rss_bytes);
    }
    rf_prom_family(f, "ramforge_process_rss_bytes", "gauge",
                   "VmRSS at the operation's last sample.");
    if (last && last->has_process_rss) {
        series(f, "ramforge_process_rss_bytes", m);
        rf_prom_u64(f, last->process_rss_bytes);
    }
    rf_prom_family(
        f, "ramforge_operation_last_sample_info", "gauge",
        "1, labelled with the boundary of the operation's last sample (the two gauges above).");
    if (last && last->label) {
        series(f, "ramforge_operation_last_sample_info", m);
        rf_prom_label(f, "sample", last->label);
        rf_prom_u64(f, 1);
    }
}

/* The operation's admission outcome and staging. */
static void operation_metrics(struct rf_prom *f, const struct rf_report *r, const char *m)
{
    const struct rf_admission_result *a = r->admission;
    rf_prom_family(f, "ramforge_operation_admission", "gauge",
                   "1 for the operation's admission outcome; absent when none was decided.");
    for (int o = RF_ADMIT_ADMITTED; a && o <= RF_ADMIT_UNKNOWN; o++) {
        series(f, "ramforge_operation_admission", m);
        rf_prom_label(f, "outcome", rf_admission_outcome_name((enum rf_admission_outcome)o));
        rf_prom_u64(f, (int)a->outcome == o);
    }
    rf_prom_family(f, "ramforge_operation_admission_refused", "gauge",
                   "1 when admission refused the operation; absent when none was decided.");
    if (a) {
        series(f, "ramforge_operation_admission_refused", m);
        rf_prom_u64(f, a->refused ? 1 : 0);
    }
    rf_prom_family(f, "ramforge_operation_staging_selected_bytes", "gauge",
                   "Bytes the operation's staging plan selected; absent without a plan.");
    if (r->staging) {
        series(f, "ramforge_operation_staging_selected_bytes", m);
        rf_prom_u64(f, r->staging->selected_bytes);
    }
    rf_prom_family(
        f, "ramforge_operation_staging_accepted_bytes", "gauge",
        "Bytes madvise(MADV_WILLNEED) accepted for the operation; absent if staging did not "
        "run.");
    if (r->staging && r->staging_attempted) {
        series(f, "ramforge_operation_staging_accepted_bytes", m);
        rf_prom_u64(f, r->staging_accepted_bytes);
    }
}

/* One series of the operation of type (gauge, counter), absent (the family alone) when
   unknown. */
static void op_series(struct rf_prom *f, const char *m, const char *name, const char *type,
                      const char *help, bool has, double v)
{
    rf_prom_family(f, name, type, help);
    if (has) {
        series(f, name, m);
        rf_prom_double(f, v); /* bytes and counts exactly */
    }
}

static void op_gauge(struct rf_prom *f, const char *m, const char *name, const char *help, bool has,
                     double v)
{
    op_series(f, m, name, "gauge", help, has, v);
}

/* The operation's speed and storage traffic: what a dashboard graphs across requests. */
static void speed_metrics(struct rf_prom *f, const struct rf_report *r, const char *m)
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
static void release_metrics(struct rf_prom *f, const struct rf_report *r,
                            const struct rf_release_totals *dropped, const char *m)
{
    struct rf_release_totals t = {0};
    if (dropped)
        t = *dropped;
    rf_release_totals_add(&t, r->applications, r->n_applications);
    rf_prom_family(f, "ramforge_release_applications_total", "counter",
                   "Release applications attempted this session.");
    series(f, "ramforge_release_applications_total", m);
    rf_prom_u64(f, t.applications);
    /* an overflowed sum is unknown: no sample (never a wrapped number) */
    rf_prom_family(f, "ramforge_release_requested_bytes_total", "counter",
                   "Bytes of release ranges submitted to madvise this session.");
    if (!t.overflowed) {
        series(f, "ramforge_release_requested_bytes_total", m);
        rf_prom_u64(f, t.requested_bytes);
    }
    rf_prom_family(f, "ramforge_release_accepted_bytes_total", "counter",
                   "Bytes madvise accepted this session (not reclamation).");
    if (!t.overflowed) {
        series(f, "ramforge_release_accepted_bytes_total", m);
        rf_prom_u64(f, t.accepted_bytes);
    }
    static const char *const names[3] = {"mapping_rss", "process_rss", "cgroup_current"};
    rf_prom_family(f, "ramforge_release_observed_delta_bytes", "gauge",
                   "Observed change across this session's releases, summed (negative: fell).");
    for (int k = 0; k < 3; k++) {
        if (!t.has_delta[k] || t.overflowed)
            continue;
        series(f, "ramforge_release_observed_delta_bytes", m);
        rf_prom_label(f, "measure", names[k]);
        rf_prom_i64(f, t.delta_bytes[k]);
    }
}

/*
 * A MoE model's routing as observed (the operation's residency.experts:
 * serve's and exec's since the session began) and admission's expected
 * hit rate at its budget (docs/MOE.md).
 */
static void routing_metrics(struct rf_prom *f, const struct rf_report *r,
                            const struct rf_report *figures, const char *m)
{
    const struct rf_routing *g = r->routing;
    const struct rf_admission_result *a = figures->admission;
    char text[16];

    if (g) {
        rf_prom_family(f, "ramforge_experts_selections_total", "counter",
                       "Expert selections the router made in a MoE layer (tokens routed x "
                       "experts used), observed through the eval callback.");
        for (uint32_t l = 0; l < g->n_layer; l++) {
            series(f, "ramforge_experts_selections_total", m);
            snprintf(text, sizeof(text), "%" PRIu32, l);
            rf_prom_label(f, "layer", text);
            rf_prom_u64(f, g->tokens[l] * g->n_expert_used);
        }
        uint32_t sizes[RF_ROUTING_REPORT_SIZES];
        size_t n = rf_routing_report_sizes(g, sizes);
        rf_prom_family(f, "ramforge_experts_lru_hit_ratio", "gauge",
                       "Share of the observed expert selections a per-layer LRU cache of "
                       "cache_experts experts would have held.");
        for (size_t i = 0; i < n; i++) {
            uint64_t hits, sel;
            if (rf_routing_lru_hits(g, -1, sizes[i], &hits, &sel) < 0 || !sel)
                continue;
            series(f, "ramforge_experts_lru_hit_ratio", m);
            snprintf(text, sizeof(text), "%" PRIu32, sizes[i]);
            rf_prom_label(f, "cache_experts", text);
            rf_prom_double(f, (double)hits / (double)sel);
        }
    }
    if (a && a->has_experts) {
        op_gauge(f, m, "ramforge_experts_expected_hit_ratio",
                 "Admission: the hit rate expected of the expert cache the budget leaves "
                 "(observed routing, else uniform c/n).",
                 true, a->expert_hit_rate);
        op_gauge(f, m, "ramforge_experts_cache_experts",
                 "Admission: experts per layer the budget's expert cache holds.", true,
                 (double)a->cache_experts);
        op_gauge(f, m, "ramforge_experts_stream_bytes_per_token",
                 "Admission: routed bytes a token is expected to read (the cache's misses).", true,
                 (double)a->expert_stream_bytes);
    }
}

/*
 * The expert cache of a MoE model under streaming (docs/MOE.md): counters over
 * the session's operations, the last operation's resident bytes and c.
 */
static void expert_cache_metrics(struct rf_prom *f, const struct rf_report *r, const char *m)
{
    const struct rf_stream_report *sr = r->streaming;
    if (!sr || !sr->experts_total.on)
        return;
    const struct rf_stream_experts *t = &sr->experts_total, *x = &sr->experts;
    op_series(f, m, "ramforge_expert_cache_hits_total", "counter",
              "Expert selections the expert cache held (every operation's).", true,
              (double)t->hits);
    op_series(f, m, "ramforge_expert_cache_misses_total", "counter",
              "Expert selections the expert cache read from storage (every operation's).", true,
              (double)t->misses);
    op_series(f, m, "ramforge_expert_cache_read_bytes_total", "counter",
              "Bytes the expert cache read from the model file (every operation's).", true,
              (double)t->bytes_read);
    op_gauge(f, m, "ramforge_expert_cache_resident_bytes",
             "The expert cache's resident pages at the operation's end (mincore).", x->on,
             (double)x->resident_bytes);
    op_gauge(f, m, "ramforge_expert_cache_experts_per_layer",
             "Experts a layer the expert cache keeps (the plan's c).", x->on, (double)x->per_layer);
    op_gauge(f, m, "ramforge_expert_cache_slots",
             "Experts the expert cache holds at once over every layer (the plan's T).", x->on,
             (double)x->slots);
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
        h->streaming.experts = r->streaming->experts;
        h->streaming.experts_total = r->streaming->experts_total;
        h->rep.streaming = &h->streaming;
    }
}

/* figures: the operation whose admission, staging and speed families are written (op, or
   the last one that ran a request). */
static int metrics_write(const struct rf_report *op, const struct rf_report *figures,
                         const struct rf_report *session, const struct rf_release_totals *dropped,
                         const char *model, struct rf_prom *p)
{
    if (!op || !p)
        return -EINVAL;
    char canon[PATH_MAX];
    if (model && realpath(model, canon)) /* else the path as given */
        model = canon;
    ledger_metrics(p, op, model);
    operation_metrics(p, figures, model);
    speed_metrics(p, figures, model);
    release_metrics(p, session ? session : op, dropped, model);
    routing_metrics(p, op, figures, model);
    expert_cache_metrics(p, figures, model);
    return p->error;
}

/* The text of p after write returned rc, into *out. */
static int taken(struct rf_prom *p, int rc, char **out)
{
    if (rc < 0) {
        rf_prom_free(p);
        return rc;
    }
    return rf_prom_take(p, out);
}

int rf_metrics_text(const struct rf_report *op, const struct rf_report *session, const char *model,
                    char **out)
{
    struct rf_prom p;
    if (!out)
        return -EINVAL;
    *out = NULL;
    rf_prom_init(&p);
    return taken(&p, metrics_write(op, op, session, NULL, model, &p), out);
}

int rf_session_metrics_write(struct rf_session *s, const char *model, struct rf_prom *p)
{
    if (!s)
        return -EINVAL;
    const struct rf_report *op = rf_session_report(s, RF_REPORT_OPERATION);
    const struct rf_report *figures = !op || ran_request(op) || !s->held.has ? op : &s->held.rep;
    return metrics_write(op, figures, rf_session_report(s, RF_REPORT_SESSION), &s->dropped_releases,
                         model, p);
}

int rf_session_metrics_text(struct rf_session *s, const char *model, char **out)
{
    struct rf_prom p;
    if (!out)
        return -EINVAL;
    *out = NULL;
    rf_prom_init(&p);
    return taken(&p, rf_session_metrics_write(s, model, &p), out);
}

int rf_metrics_write_file(const char *text, const char *path)
{
    if (!text || !path)
        return -EINVAL;
    return rf_file_write_text(path, text);
}
