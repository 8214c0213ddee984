/*
 * What `ramforge bench` prints: a progress line per run on stderr while it
 * runs (unless --quiet), and at the end the human summary on stdout, one
 * line per (condition, policy) group, built from summary.json so the two
 * cannot disagree. Durations go through cli_format_ns, sizes through
 * cli_format_bytes; an unknown figure prints as "-".
 */
#ifndef RAMFORGE_BENCH_PRINT_H
#define RAMFORGE_BENCH_PRINT_H

#include <jansson.h>
#include <stddef.h>

#include "bench_options.h"
#include "bench_results.h"

/*
 * The progress line of row r, the k-th (0-based) of n_rows, on stderr:
 * "[k+1/n] CONDITION POLICY #REP: " then "failed (not run)" when the run
 * did not start, else its label, TTFT and end-to-end time.
 */
void bench_print_progress(const struct bench_options *o, const struct bench_row *r, size_t k,
                          size_t n_rows);

/*
 * A cold load (the median load of isolated-nonresident runs, TTFT not
 * included) at most this many times the physical read limit is called
 * disk-bound.
 */
#define BENCH_DISK_BOUND_RATIO 1.5

/*
 * The human summary of bench_summary_json's document on stdout; with
 * --memory-limit a second table (decode tokens/s, ratio to off, the
 * bound as tokens/s, the ratio to the bound); the physical limit; then
 * the verdicts, one line each: per isolated-nonresident policy "POLICY:
 * cold load is disk-bound|not disk-bound: X.XXx the physical read limit
 * (load T, then TTFT T)", and per group with a bound "POLICY (CONDITION,
 * memory limit): X.XXx the bound per token".
 */
void bench_print_table(json_t *summary);

#endif
