/*
 * The results of `ramforge bench`: one row per run with its figures, and
 * the two files made from the rows in the output directory:
 *
 *   results.tsv    one row per run (columns: BENCH_TSV_COLUMNS)
 *   summary.json   per (condition, policy): label counts, the medians of
 *                  every figure over the runs that completed with the
 *                  condition's own label, the ratios to the policy entry
 *                  named BENCH_BASELINE; the isolated copy and the
 *                  physical limit of a cold load measured on it
 *
 * An unknown or absent figure is an empty TSV cell and a JSON null, never
 * 0. The workload is a few hundred rows at most; medians sort a copy.
 */
#ifndef RAMFORGE_BENCH_RESULTS_H
#define RAMFORGE_BENCH_RESULTS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bench_options.h"
#include "bench_prepare.h"

/* The policy entry the ratios (ratio_to_off) divide by. */
#define BENCH_BASELINE "off"

/* Per-run figures: the medians' inputs and results.tsv's metric columns, in column order. */
enum bench_metric {
    BENCH_M_LOAD = 0,    /* timing.model_load_ns */
    BENCH_M_STAGING,     /* timing.staging_ns */
    BENCH_M_TTFT,        /* timing.ttft_ns */
    BENCH_M_DECODE_TPS,  /* (n_generated_tokens - 1) / timing.decode_ns */
    BENCH_M_E2E,         /* timing.end_to_end_ns */
    BENCH_M_PROCESS,     /* bench's own clock: spawn to exit of the run process */
    BENCH_M_PEAK_RSS,    /* ledger ProcessRssPeak */
    BENCH_M_MAXRSS,      /* wait4 ru_maxrss of the run process */
    BENCH_M_MAPPING_RSS, /* ledger FileBackedResident */
    BENCH_M_CG_CURRENT,  /* ledger CgroupCurrent */
    BENCH_M_CG_PEAK,     /* ledger CgroupPeak */
    BENCH_M_N
};

/*
 * "load_ns", ..., "cgroup_peak_bytes": metric m's results.tsv column and
 * summary.json median key; NULL outside the enum.
 */
const char *bench_metric_name(enum bench_metric m);

/* One figure of one run. */
struct bench_value {
    bool has;   /* false: unknown or absent (an empty TSV cell, JSON null; never 0) */
    uint64_t u; /* integer metrics */
    double d;   /* real metrics, rounded to 3 decimals */
};

#define BENCH_FINGERPRINT_MAX 48 /* bytes of a row's token fingerprint, NUL included */

/* One run: what it was asked, how its condition was verified, what it measured. */
struct bench_row {
    enum bench_condition cond;
    size_t variant; /* index into options.variants */
    long long rep;  /* 1-based */
    enum bench_label label;
    bool probed; /* prep holds a verification */
    struct bench_residency prep;
    int run_status; /* -1 not started; exit status; 128 + signal */
    struct bench_value v[BENCH_M_N];
    char fingerprint[BENCH_FINGERPRINT_MAX]; /* output.token_fingerprint; "" if absent */
    char report[96]; /* "runs/<condition>-<policy>-<rep>.json"; "" if none */
};

/* results.tsv's header line (without the newline). */
#define BENCH_TSV_COLUMNS                                                                          \
    "condition\tlabel\tpolicy\tresidency_policy\trepetition\trun_status\tload_ns\tstaging_ns\t"    \
    "ttft_ns\tdecode_tokens_per_s\tend_to_end_ns\tprocess_ns\tpeak_rss_bytes\t"                    \
    "rusage_maxrss_bytes\tmapping_rss_bytes\tcgroup_current_bytes\tcgroup_peak_bytes\t"            \
    "token_fingerprint\tprep_method\tprep_resident_pages\tprep_nonresident_pages\t"                \
    "prep_unknown_pages\treport"

/*
 * Writes results.tsv to PATH through a temporary file in the same
 * directory, fsync'd, mode 0644, then renamed over PATH: a reader never
 * sees half a file. Returns 0 or -errno (the temporary file is removed).
 */
int bench_write_tsv(const char *path, const struct bench_options *o, const struct bench_row *rows,
                    size_t n_rows);

/*
 * Builds summary.json from the rows, the model's size (bytes, its fstat)
 * and the isolated copy cp. Returns a new reference the caller
 * json_decref's, or NULL when out of memory.
 */
json_t *bench_summary_json(const struct bench_options *o, uint64_t model_bytes,
                           const struct bench_row *rows, size_t n_rows,
                           const struct bench_copy *cp);

/*
 * summary.json's figures as Prometheus text (labels spelled by
 * ramforge/metrics.h's rf_metrics_label): per group (model, condition,
 * policy, residency_policy) ramforge_bench_runs, _completed, _median_runs,
 * ramforge_bench_median_<figure> for every results.tsv figure, and
 * ramforge_bench_ratio_to_off{measure="end_to_end"|"ttft"}; then
 * ramforge_bench_physical_limit_seconds{model}. A null figure is absent,
 * never 0. Returns a string the caller frees, or NULL when out of memory.
 */
char *bench_summary_metrics(const json_t *summary);

#endif
