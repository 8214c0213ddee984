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
    BENCH_M_LOAD = 0,        /* timing.model_load_ns */
    BENCH_M_STAGING,         /* timing.staging_ns */
    BENCH_M_TTFT,            /* timing.ttft_ns */
    BENCH_M_DECODE_TPS,      /* (n_generated_tokens - 1) / timing.decode_ns */
    BENCH_M_E2E,             /* timing.end_to_end_ns */
    BENCH_M_PROCESS,         /* bench's own clock: spawn to exit of the run process */
    BENCH_M_PEAK_RSS,        /* ledger ProcessRssPeak */
    BENCH_M_MAXRSS,          /* wait4 ru_maxrss of the run process */
    BENCH_M_MAPPING_RSS,     /* ledger FileBackedResident */
    BENCH_M_CG_CURRENT,      /* ledger CgroupCurrent */
    BENCH_M_CG_PEAK,         /* ledger CgroupPeak */
    BENCH_M_MAJFLT,          /* wait4 ru_majflt of the run process */
    BENCH_M_READ_BYTES,      /* wait4 ru_inblock * 512 of the run process */
    BENCH_M_RUN_CG_LIMIT,    /* --memory-limit: the run cgroup's limit file, read back */
    BENCH_M_RUN_CG_FAILCNT,  /* v1 memory.failcnt of the run cgroup */
    BENCH_M_RUN_CG_HIGH,     /* v2 memory.events high of the run cgroup */
    BENCH_M_RUN_CG_MAX,      /* v2 memory.events max */
    BENCH_M_RUN_CG_OOM,      /* v2 memory.events oom */
    BENCH_M_RUN_CG_OOM_KILL, /* v2 memory.events oom_kill, v1 memory.oom_control oom_kill */
    BENCH_M_RUN_CG_PEAK,     /* v1 memory.max_usage_in_bytes, v2 memory.peak of the run cgroup */
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

/*
 * What the per-token bound t_c + max(0, W - R) / B takes from one run's
 * report (bench_limit.h reads it): W, the file-backed weight bytes the
 * graph reads per token, and R, the bytes of them that can stay resident
 * under the limit, or the parts R is computed from.
 */
struct bench_bound_inputs {
    bool has_w;
    uint64_t w_bytes;
    bool has_r; /* the report gave R itself (streaming.plan) */
    uint64_t r_bytes;
    bool has_parts; /* the ledger's parts of the limit that cannot hold weights */
    uint64_t anonymous_bytes, kv_bytes, scratch_bytes, runtime_bytes;
    bool runtime_known; /* false: Runtime unknown, counted as 0 */
    const char *source; /* static: where W and R came from */
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
    char report[96];         /* "runs/<condition>-<policy>-<rep>.json"; "" if none */
    char reason[RF_ERR_MAX]; /* why the run failed (label failed, or a nonzero run_status); "" */
    struct bench_bound_inputs bound_in; /* from the report, --memory-limit only */
};

/* results.tsv's header line (without the newline). */
#define BENCH_TSV_COLUMNS                                                                          \
    "condition\tlabel\tpolicy\tresidency_policy\trepetition\trun_status\tload_ns\tstaging_ns\t"    \
    "ttft_ns\tdecode_tokens_per_s\tend_to_end_ns\tprocess_ns\tpeak_rss_bytes\t"                    \
    "rusage_maxrss_bytes\tmapping_rss_bytes\tcgroup_current_bytes\tcgroup_peak_bytes\t"            \
    "major_faults\tread_bytes\trun_cgroup_limit_bytes\trun_cgroup_failcnt\t"                       \
    "run_cgroup_events_high\trun_cgroup_events_max\trun_cgroup_events_oom\t"                       \
    "run_cgroup_oom_kill\trun_cgroup_peak_bytes\t"                                                 \
    "token_fingerprint\tprep_method\tprep_resident_pages\tprep_nonresident_pages\t"                \
    "prep_unknown_pages\treport\tfailure_reason"

/*
 * Writes results.tsv to PATH through a temporary file in the same
 * directory, fsync'd, mode 0644, then renamed over PATH: a reader never
 * sees half a file. Returns 0 or -errno (the temporary file is removed).
 */
int bench_write_tsv(const char *path, const struct bench_options *o, const struct bench_row *rows,
                    size_t n_rows);

/*
 * Builds summary.json from the rows, the model's size (bytes, its fstat),
 * the isolated copy cp and, with --memory-limit, the calibration run cal
 * (bench_limit.h: "memory_limit" and each group's "bound"; null and absent
 * without). Returns a new reference the caller
 * json_decref's, or NULL when out of memory.
 */
struct bench_calibration;
json_t *bench_summary_json(const struct bench_options *o, uint64_t model_bytes,
                           const struct bench_row *rows, size_t n_rows, const struct bench_copy *cp,
                           const struct bench_calibration *cal);

/*
 * summary.json's figures as Prometheus text (written with ramforge/core/prom.h,
 * the model labelled as run's and serve's): per group (model, condition,
 * policy, residency_policy) ramforge_bench_runs, _completed, _median_runs,
 * ramforge_bench_median_<figure> for every results.tsv figure, and
 * ramforge_bench_ratio_to_off{measure="end_to_end"|"ttft"}; then
 * ramforge_bench_physical_limit_seconds{model}. A null figure is absent,
 * never 0. Returns a string the caller frees, or NULL when out of memory.
 */
char *bench_summary_metrics(const json_t *summary);

#endif
