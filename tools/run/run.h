/* ramforge run: shared by the command line (run_options.c), the orchestration (cmd_run.c) and
   the printer (run_print.c). */
#ifndef RAMFORGE_TOOLS_RUN_H
#define RAMFORGE_TOOLS_RUN_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "common/session_options.h"
#include "ramforge/core/admission.h"
#include "ramforge/core/policy.h"
#include "ramforge/core/report.h"
#include "ramforge/core/residency.h"
#include "ramforge/forge/forge.h"

/* What `ramforge run`'s command line asked for. */
struct run_options {
    struct session_options sess; /* -m, -n, -t, -c, the policy, target, ... (shared with serve) */
    const char *prompt;
    long long seed;
    long long page_budget;       /* --residency-page-budget, pages */
    uint64_t stream_window;      /* --stream-window, bytes; 0: the planner's default */
    bool stream_sequential;      /* false: --no-stream-sequential */
    bool stream_hugepage;        /* false: --no-stream-hugepage */
    long long stream_prefetch;   /* --stream-prefetch-layers, layers ahead; 0: off */
    long long stream_read_ahead; /* --stream-read-ahead, ring slots; 0: off */
    bool stream_read_ahead_set;  /* given: not turned off by --stream-window/-prefetch */
    bool stream_spin_wait;       /* --stream-spin-wait: no OMP_WAIT_POLICY=PASSIVE exec */
    bool prompt_from_stdin;      /* -f -: read once, so run cannot execute itself again */
    bool observe_dispatch;
    bool has_dispatch_events, has_dispatch_sample_pages; /* given on the command line */
    long long dispatch_events;                           /* observer capacity, events */
    long long dispatch_sample_pages; /* pre-dispatch sampling per weight source; 0: off */
    bool human_report;               /* --residency-report: the details after the summary */
    const char *metrics_path; /* --metrics-file: Prometheus text (ramforge/session/metrics.h) */
    const char
        *svg_path; /* --residency-svg: the residency picture (ramforge/core/residency_svg.h) */
    bool repack;
    bool mlock;
    enum rf_admission_mode admission; /* --admission enforce|warn|off */
    bool access_probe;                /* --access-probe: classify weights with the graph probe */
    bool sample_smaps;                /* --sample-smaps: every sample reads smaps (Rss and Pss) */
    bool release_dead_file_pages;     /* --dead-file-pages release|keep */
    bool verify;
    bool hold;
};

/*
 * Parses run's options into *o (defaults set by the caller). Returns -1 to
 * continue, or the exit status (0 after --help, 2 on a usage error, with
 * the message printed).
 */
int run_parse_options(int argc, char **argv, struct run_options *o);

/* Warns on stderr of the options *o's policy does not use (run_warnings.c); called once the
   process that does the work runs (after run executed itself again, if it did). */
void run_warn_unused_options(const struct run_options *o);

/*
 * Whether the JSON report (or the metrics file) can be written to path before inference: a
 * regular file (or none yet) that is not the model, in a writable
 * directory. Prints the reason when not.
 */
bool run_report_path_usable(const char *path, const char *model);

/* Whether --residency-report-json is "-": the report alone on standard output. */
bool run_json_to_stdout(const struct run_options *o);

/* Writes JSON text and a newline on stdout and flushes it: 0 or -errno. */
int run_put_json(const char *text);

/*
 * run --memory-limit (run_supervise.c): forks into a fresh memory cgroup
 * (limit_cgroup_supervise). Returns -1 in the child, which records through
 * *shared (NULL: nothing is recorded) what its parent needs to write the
 * report of a run the kernel killed; in the parent, once the child ended
 * (its report written for it when it was killed before writing one and
 * --residency-report-json was given, or why not said), the exit status.
 */
struct run_shared;
int run_supervise(const struct run_options *o, struct rf_session_params params,
                  struct run_shared **shared);
/* In the child: what it is doing (stage static, e.g. "loading the model"); sh NULL: no-op. */
void run_shared_stage(struct run_shared *sh, const char *stage);
/* In the child: its latest admission decision (copied); sh NULL: no-op. */
void run_shared_admission(struct run_shared *sh, const struct rf_admission_result *a);
/* In the child: its report was written; sh NULL: no-op. */
void run_shared_written(struct run_shared *sh);

/* --residency-svg: the snapshots taken during the run (run_svg.c). */
#define RUN_SVG_SNAPSHOTS 2 /* after_load, end_of_session; the report's is the last panel */
struct run_svg {
    struct rf_residency_snapshot snaps[RUN_SVG_SNAPSHOTS]; /* n taken, owned */
    const char *labels[RUN_SVG_SNAPSHOTS];                 /* static */
    size_t n;
};
struct rf_session;
void run_svg_init(struct run_svg *v);
void run_svg_free(struct run_svg *v);
/* Takes a snapshot labelled label (static) now; a failure is a warning on stderr. */
void run_svg_take(struct run_svg *v, struct rf_session *s, const char *label);
/* The snapshot after the load: labelled after_load_release when that boundary released. */
void run_svg_take_after_load(struct run_svg *v, struct rf_session *s);
/* Writes the picture of v's snapshots and the report's end-of-run one to path; 0 or -1 (said). */
int run_svg_write(struct run_svg *v, struct rf_session *s, const char *path);

/*
 * Prints the bounded human-readable report of r on stderr: the summary
 * first (run_print_summary), then the details; the internal terms (model
 * instance, inventory generation, native contract, lifetime counts) and the
 * warnings true of every run only when verbose.
 */
void run_print_report(const struct rf_report *r, bool verbose);

/* The answer first (run_summary.c): where the memory went, the limit, before -> after. */
void run_print_summary(FILE *f, const struct rf_report *r);

/*
 * An admission decision that is not a plain fit, on stderr: one line (the
 * headline, "refused" or "warning"; when: "" or " before loading"), the
 * ways out with what each saves, and with verbose the reason in full.
 */
void run_print_admission(const struct rf_admission_result *a, const char *when, bool verbose);

/* Whether a report warning holds for every run of its kind (documented; shown with -v). */
bool run_warning_is_general(const char *w);
/* The report's storage-traffic line and, under streaming, the plan and the pins (f: stderr). */
void run_print_streaming(FILE *f, const struct rf_report *r);

#endif
