/*
 * The report as Prometheus text (exposition format 0.0.4, which
 * node_exporter's textfile collector and prometheus_client read): the
 * report's families for `ramforge serve`'s /metrics, `ramforge run
 * --metrics-file` and exec's engine, so all carry the same names and
 * labels, written with the one text writer (ramforge/core/prom.h).
 *
 * Every series carries model="<label>" (the model path as given), so the
 * files of several runs can sit side by side in one collector directory.
 * An unknown figure is never written as 0: it is absent, and for the
 * ledger ramforge_ledger_unknown{category} 1 says so.
 */
#ifndef RAMFORGE_METRICS_H
#define RAMFORGE_METRICS_H

#include <stdbool.h>
#include <stdint.h>

#include "ramforge/core/prom.h"
#include "ramforge/core/report.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Renders, from op (RF_REPORT_OPERATION: ledger, last sample, admission,
 * staging) and session (RF_REPORT_SESSION: the releases summed over the
 * session's applications; may be op itself), these families:
 *   ramforge_ledger_bytes{model,category,provenance}   gauge, bytes
 *   ramforge_ledger_unknown{model,category}            gauge, 1
 *   ramforge_mapping_rss_bytes{model,sample}           gauge, bytes (last sample)
 *   ramforge_process_rss_bytes{model,sample}           gauge, bytes (last sample)
 *   ramforge_operation_admission{model,outcome}        gauge, 1 for the outcome
 *   ramforge_operation_admission_refused{model}        gauge, 0 or 1
 *   ramforge_operation_staging_selected_bytes{model}   gauge, bytes of the plan
 *   ramforge_operation_staging_accepted_bytes{model}   gauge, bytes madvise accepted
 *   ramforge_release_applications_total{model}         counter
 *   ramforge_release_requested_bytes_total{model}      counter, bytes
 *   ramforge_release_accepted_bytes_total{model}       counter, bytes
 *   ramforge_release_observed_delta_bytes{model,measure} gauge, signed bytes
 * A family whose figure is not known (no admission decided, no staging
 * plan, no sample) has its HELP/TYPE lines and no sample. model is a
 * label value (escaped here); NULL is written as "".
 *
 * The release counters of session are its retained applications only (see
 * rf_session_metrics_text for a session's own). An unknown (overflowed)
 * byte total has no sample. *out is a NUL-terminated string the caller
 * frees with free(). Errors: -EINVAL (op or out NULL), -ENOMEM.
 */
int rf_metrics_text(const struct rf_report *op, const struct rf_report *session, const char *model,
                    char **out);

struct rf_session;

/*
 * As rf_metrics_text, for session s: its operation report and its session
 * report (rf_session_report of each scope), with the releases of the
 * operations the history cap (params.history_operations) dropped still
 * counted, so the ramforge_release_*_total counters never decrease over
 * the session's life. serve's /metrics and run's --metrics-file. Errors:
 * -EINVAL (NULL s or out), -ENOMEM.
 */
int rf_session_metrics_text(struct rf_session *s, const char *model, char **out);

/*
 * As rf_session_metrics_text, written into p: after p's constant labels
 * (exec's pid) and beside the caller's own families, each family's HELP
 * and TYPE once. Returns 0, -EINVAL (NULL s or p) or p->error.
 */
int rf_session_metrics_write(struct rf_session *s, const char *model, struct rf_prom *p);

/* Attempted release applications summed: what the ramforge_release_* families count. */
struct rf_release_totals {
    uint64_t applications;    /* attempted applications */
    uint64_t requested_bytes; /* bytes submitted to madvise */
    uint64_t accepted_bytes;  /* bytes madvise accepted */
    int64_t delta_bytes[3];   /* observed mapping RSS, process RSS, cgroup current deltas */
    bool has_delta[3];        /* some application measured delta_bytes[k] */
    bool overflowed;          /* a sum passed its type: the byte totals are unknown */
};

/* Adds the attempted applications among apps[0..n) to *t (checked sums). */
void rf_release_totals_add(struct rf_release_totals *t, const struct rf_report_application *apps,
                           size_t n);

/* model="<the file's name>",path="<path>" on p's open sample for the canonical path of a model
   file: one model, one series, however -m spelled its path. */
void rf_metrics_model_labels(struct rf_prom *p, const char *path);

/*
 * Writes text to path atomically: a temporary file in the same directory
 * (path.tmp.XXXXXX), fsync'd, mode 0644, renamed over path, so a
 * collector never reads half a file. Errors: -errno of the failing call
 * (the temporary file is removed).
 */
int rf_metrics_write_file(const char *text, const char *path);

#ifdef __cplusplus
}
#endif

#endif
