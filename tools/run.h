/* ramforge run: shared by the command line (run_options.c), the orchestration (cmd_run.c) and
   the printer (run_print.c). */
#ifndef RAMFORGE_TOOLS_RUN_H
#define RAMFORGE_TOOLS_RUN_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "ramforge/admission.h"
#include "ramforge/forge.h"
#include "ramforge/policy.h"
#include "ramforge/report.h"

/* What `ramforge run`'s command line asked for. */
struct run_options {
    const char *model;
    const char *prompt;
    long long n_predict;
    long long n_threads; /* 0: llama.cpp default */
    long long n_ctx;     /* 0: prompt + n_predict */
    long long seed;
    enum rf_policy_profile policy;
    bool has_target;
    uint64_t target_bytes;
    uint64_t reserve_bytes;
    enum forge_release_mode release_mode;
    bool has_reserve, has_release_mode; /* given on the command line */
    long long page_budget;              /* --residency-page-budget, pages */
    bool has_staging;
    uint64_t staging_budget; /* --staging-budget, bytes */
    uint64_t stream_window;  /* --stream-window, bytes; 0: the planner's default */
    bool stream_sequential;  /* false: --no-stream-sequential */
    bool observe_dispatch;
    bool has_dispatch_events, has_dispatch_sample_pages; /* given on the command line */
    long long dispatch_events;                           /* observer capacity, events */
    long long dispatch_sample_pages; /* pre-dispatch sampling per weight source; 0: off */
    bool human_report;
    const char *json_path;
    const char *metrics_path; /* --metrics-file: Prometheus text (ramforge/metrics.h) */
    bool repack;
    bool mlock;
    enum rf_admission_mode admission; /* --admission enforce|warn|off */
    bool access_probe;                /* --access-probe: classify weights with the graph probe */
    bool sample_smaps;                /* --sample-smaps: every sample reads smaps (Rss and Pss) */
    bool release_dead_file_pages;     /* --dead-file-pages release|keep */
    bool verify;
    bool hold;
    bool verbose;
};

/*
 * Parses run's options into *o (defaults set by the caller). Returns -1 to
 * continue, or the exit status (0 after --help, 2 on a usage error, with
 * the message printed).
 */
int run_parse_options(int argc, char **argv, struct run_options *o);

/*
 * Whether the JSON report (or the metrics file) can be written to path before inference: a
 * regular file (or none yet) that is not the model, in a writable
 * directory. Prints the reason when not.
 */
bool run_report_path_usable(const char *path, const char *model);

/* Prints the bounded human-readable report of r on stderr. */
void run_print_report(const struct rf_report *r);
/* The report's storage-traffic line and, under streaming, the plan and the pins (f: stderr). */
void run_print_streaming(FILE *f, const struct rf_report *r);

#endif
