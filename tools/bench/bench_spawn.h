/*
 * One repetition of `ramforge bench`: `ramforge run` started as a separate
 * process of this same binary, its stdin /dev/null, its stdout, stderr and
 * JSON report written to three files that share one base path:
 *
 *   BASE.out    the run's stdout
 *   BASE.err    the run's stderr (its error line, when it fails)
 *   BASE.json   the run's operation report (--residency-report-json)
 *
 * bench waits for each process before the next starts; nothing here reads
 * the report (bench_report.h does).
 */
#ifndef RAMFORGE_BENCH_SPAWN_H
#define RAMFORGE_BENCH_SPAWN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bench_options.h"
#include "ramforge/sys/cgroup_child.h"

/* The run processes execute this same binary. */
#define BENCH_SELF_EXE "/proc/self/exe"

/* How one run process ended, measured by bench around it. */
struct bench_process {
    int status;             /* exit status; 128 + N when killed by signal N */
    uint64_t process_ns;    /* CLOCK_MONOTONIC from posix_spawn to wait4's return */
    bool has_maxrss;        /* false: wait4 gave no ru_maxrss */
    uint64_t maxrss_bytes;  /* wait4 ru_maxrss of the process (KiB at the kernel) * 1024 */
    uint64_t major_faults;  /* wait4 ru_majflt of the process */
    uint64_t read_bytes;    /* wait4 ru_inblock * 512: bytes the process read from storage */
    int setup_error;        /* -errno: the child could not join its cgroup or exec (status 127) */
    const char *setup_step; /* "join the memory cgroup" or "exec"; NULL when setup_error is 0 */
};

/*
 * Runs `ramforge run -m MODEL_PATH -p PROMPT -n N [-t T] --residency-policy
 * POLICY --residency-report-json BASE.json` plus o's --run-args words and
 * the --policy-args words of o->variants[variant], and waits for it. A
 * BASE.json left by an earlier bench is removed first, so it cannot pass
 * for this run's. With cg (NULL: none), the child writes its pid to cg's
 * cgroup.procs between fork and exec, so the run is charged to cg from
 * its first instruction. The child's pid is given to bench_cleanup while
 * it runs. Returns 0 with *out filled (a child that could not join or
 * exec: status 127 and out->setup_error), or the -errno of fork, of
 * opening the output files or cgroup.procs, or of wait4 (the process then
 * did not start or was lost; *out is untouched).
 */
int bench_spawn_run(const struct bench_options *o, size_t variant, const char *model_path,
                    const char *base, const struct rfsys_cgroup_child *cg,
                    struct bench_process *out);

/*
 * The message of a run's stderr file (BASE.err): its last "ramforge: "
 * line without that prefix, else its last non-empty line, looked for in
 * the file's last 4 KiB; at most len - 1 bytes into out, "" if none.
 */
void bench_run_message(const char *err_path, char *out, size_t len);

/* Removes BASE.out, BASE.err and BASE.json (those that exist). */
void bench_run_remove_outputs(const char *base);

#endif
