/*
 * `ramforge bench --memory-limit SIZE`: each run process in a fresh child
 * memory cgroup with that limit (ramforge/sys/cgroup_child.h), what the
 * cgroup recorded, and the per-token bound of a run under the limit:
 *
 *   per-token time >= t_c + max(0, W - R) / B
 *
 *   t_c  warm per-token decode time, from a calibration run without limit
 *        (policy observe, which does not mutate; warm model file)
 *   W    file-backed weight bytes the graph reads per token
 *   R    bytes of them that can stay resident: limit - anonymous weights -
 *        KV cache - graph scratch - runtime
 *   B    the physical read limit: the sequential read bandwidth of the cold
 *        isolated copy bench measures (summary.json physical_limit)
 *
 * W and R come from a run report through bench_bound_inputs_from_report
 * (bench_report.h), the one place that knows the report keys: a report's
 * streaming.plan (working_set_bytes, resident_bytes) when it has one, else W =
 * model.inventory.totals. file_backed_logical_bytes and R from the ledger's AnonymousWeights,
 * KvCache, GraphScratch and Runtime (unknown Runtime counts as 0, which
 * makes R larger and the bound lower: never an unreachable bound).
 */
#ifndef RAMFORGE_BENCH_LIMIT_H
#define RAMFORGE_BENCH_LIMIT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bench_options.h"
#include "bench_prepare.h"
#include "bench_results.h"
#include "ramforge/sys/cgroup_child.h"

/* Child cgroups are named BENCH_CGROUP_PREFIX<bench pid>-<run number>. */
#define BENCH_CGROUP_PREFIX "rf-bench-"

/*
 * Makes run k's cgroup below bench's own memory cgroup with
 * o->memory_limit and hands it to bench_cleanup. Returns 0, or -errno
 * with reason (len bytes) set to a line that says what failed and why
 * (root needed, no memory controller, v2 controller not delegated).
 */
int bench_limit_cgroup_create(const struct bench_options *o, size_t k,
                              struct rfsys_cgroup_child *cg, char *reason, size_t len);

/*
 * After run r's process was reaped: reads cg into r's run_cgroup_*
 * figures, sets r->reason when the cgroup's OOM killer killed the run,
 * removes cg and takes it from bench_cleanup. Returns 0 or the -errno of
 * the removal (printed).
 */
int bench_limit_cgroup_finish(struct rfsys_cgroup_child *cg, struct bench_row *r);

/* The calibration run: t_c and the bound inputs, without a limit. */
struct bench_calibration {
    bool ran;   /* the run process was started */
    bool ok;    /* completed, decode tokens/s known */
    double tps; /* its decode tokens/s */
    /* its wait4 ru_majflt and ru_inblock * 512: a calibration that read much of the
       model from storage was not warm, and its t_c is too long */
    uint64_t major_faults, read_bytes;
    char report[96];
    char error[BENCH_ERR_MAX]; /* why not ok; "" */
    struct bench_bound_inputs in;
};

/*
 * Runs the calibration: o->model made warm and verified, one `run` with
 * policy observe and o's --run-args (no policy args, no cgroup) writing
 * runs/calibration-warm.json. Fills *cal. Returns -1 to go on, or the exit
 * status that stops the bench (RF_EXIT_USAGE: 'run' rejected the
 * arguments).
 */
int bench_limit_calibrate(const struct bench_options *o, struct bench_calibration *cal);

/*
 * summary.json's "memory_limit" object: the limit, the calibration and,
 * per (condition, policy) group in groups (the already built array, in
 * order), its "bound" object: t_c, W, R, B, the bound per token and as
 * tokens/s, the median per-token time and its ratio to the bound. Returns
 * a new reference, or NULL when out of memory.
 */
json_t *bench_limit_json(const struct bench_options *o, const struct bench_calibration *cal,
                         const struct bench_copy *cp, const struct bench_row *rows, size_t n_rows,
                         json_t *groups);

#endif
