/*
 * libgomp's wait under streaming (docs/STREAMING.md, "libgomp's barrier
 * spin"): the environment run and serve give themselves and exec gives
 * PROGRAM.
 */
#ifndef RAMFORGE_TOOLS_OMP_ENV_H
#define RAMFORGE_TOOLS_OMP_ENV_H

#include <stdbool.h>

#include "session_options.h"

/* What a waiting OpenMP thread does before it sleeps on a futex: this many spins (a few
   microseconds), enough for the barriers between a token's ops, short of a read's wait. */
#define CLI_GOMP_SPINCOUNT "300"

/* What cli_streaming_omp_env set (bits). */
#define CLI_OMP_SET_POLICY 1
#define CLI_OMP_SET_SPINCOUNT 2

/*
 * Unless OMP_WAIT_POLICY is set and not empty (the user's choice stands, GOMP_SPINCOUNT with
 * it; libgomp takes an empty value for unset, and so does this call), sets
 * OMP_WAIT_POLICY=PASSIVE and, unless set, GOMP_SPINCOUNT=CLI_GOMP_SPINCOUNT in this
 * process's environment. libgomp reads both once, as it loads: they act in a program
 * executed after this call. The CLI_OMP_SET_* bits of what it set (0: left as the
 * environment said), or -errno (setenv; what it set is unset again).
 */
int cli_streaming_omp_env(void);

/* Unsets what cli_streaming_omp_env set (its return, the CLI_OMP_SET_* bits). */
void cli_streaming_omp_env_undo(int set);

/*
 * Whether so's model file exceeds the memory limit the command will be under (so's
 * --memory-limit, this process's cgroup's effective limit: the lower), so that streaming
 * streams; false when either is unknown. The file alone is compared, before any load.
 */
bool cli_file_over_limit(const struct session_options *so);

/*
 * Executes this program again (/proc/self/exe as "ramforge", then argv[0..argc): the command
 * and its arguments) with cli_streaming_omp_env's environment, when that call set something:
 * libgomp reads it once, as it loads. Returns only when it did not execute (nothing to set,
 * or the exec failed: what it set is unset again); the command then goes on as it is.
 */
void cli_exec_streaming_omp_env(int argc, char **argv);

#endif
