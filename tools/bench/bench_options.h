/*
 * The command line of `ramforge bench`: its options, their parser and the
 * usage text. The parser checks everything that can be checked before a
 * run starts (policy entries, conditions, run arguments that bench sets
 * itself, a policy that needs --memory-target without one) and prints one
 * usage message on the first error.
 */
#ifndef RAMFORGE_BENCH_OPTIONS_H
#define RAMFORGE_BENCH_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bench_prepare.h"
#include "ramforge/core/policy.h"

#define BENCH_MAX_VARIANTS 16    /* entries of --policies */
#define BENCH_MAX_ARGS 64        /* extra run arguments per run, --run-args included */
#define BENCH_MAX_POLICY_ARGS 64 /* --policy-args options */
#define BENCH_NAME_MAX 40        /* characters of a policy entry's name */

/* One entry of --policies: a residency policy under a name, with its own run arguments. */
struct bench_variant {
    char name[BENCH_NAME_MAX + 1]; /* the outputs' policy column and file names */
    enum rf_policy_profile policy; /* --residency-policy of its runs */
    char *args[BENCH_MAX_ARGS];    /* --policy-args words (owned) */
    size_t n_args;
};

/* The parsed command line; strings other than the args words point into argv. */
struct bench_options {
    const char *model;
    const char *prompt;
    const char *out_dir;
    const char *copy_dir; /* NULL: out_dir */
    long long n_predict;
    long long n_threads; /* 0: not given (run's default) */
    long long repetitions;
    struct bench_variant variants[BENCH_MAX_VARIANTS];
    size_t n_variants;
    enum bench_condition conditions[BENCH_COND_N];
    size_t n_conditions;
    char *common_args[BENCH_MAX_ARGS]; /* --run-args words (owned) */
    size_t n_common;
    const char *policy_args[BENCH_MAX_POLICY_ARGS]; /* raw NAME=ARGS, applied after parsing */
    size_t n_policy_args;
    const char *metrics_path; /* --metrics-file: the summary as Prometheus text; NULL: none */
    uint64_t memory_limit;    /* --memory-limit bytes; 0: none (runs in bench's cgroup) */
    bool keep_copy;
    bool quiet;
};

/*
 * Parses bench's argv (argv[0] is "bench") into *o, which the caller has
 * zeroed. Returns -1 when the bench is to run; else the exit status: 0
 * after --help (usage on stdout), RF_EXIT_USAGE after a one-line message on
 * stderr. Whatever it returns, the caller releases *o with
 * bench_options_free.
 */
int bench_options_parse(int argc, char **argv, struct bench_options *o);

/* Frees the words bench_options_parse copied (not o itself). */
void bench_options_free(struct bench_options *o);

#endif
