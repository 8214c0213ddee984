/*
 * libgomp's wait under streaming (omp_env.h). ggml's OpenMP threads wait
 * for each other at every barrier by spinning (libgomp's default): under
 * streaming, while one decode thread waits for a read, the other spins,
 * 83-89% of a limited run's CPU samples. OMP_WAIT_POLICY=PASSIVE alone makes
 * every waiting thread sleep at once, at each of a token's hundreds of
 * barriers as well as while a decode waits for a read; a short spin first
 * keeps the barriers' waits of microseconds off the futex (both measured in
 * docs/STREAMING.md).
 */
#include "omp_env.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "ramforge/sys/sys.h"

int cli_streaming_omp_env(void)
{
    int set = 0;
    const char *policy = getenv("OMP_WAIT_POLICY"), *spin = getenv("GOMP_SPINCOUNT");
    if (policy && *policy) /* libgomp takes an empty value for unset */
        return 0;
    if (setenv("OMP_WAIT_POLICY", "PASSIVE", 1) != 0)
        return -errno;
    set |= CLI_OMP_SET_POLICY;
    if (!spin || !*spin) {
        if (setenv("GOMP_SPINCOUNT", CLI_GOMP_SPINCOUNT, 1) != 0) {
            int rc = -errno;
            cli_streaming_omp_env_undo(set);
            return rc;
        }
        set |= CLI_OMP_SET_SPINCOUNT;
    }
    return set;
}

void cli_streaming_omp_env_undo(int set)
{
    if (set > 0 && (set & CLI_OMP_SET_POLICY))
        unsetenv("OMP_WAIT_POLICY");
    if (set > 0 && (set & CLI_OMP_SET_SPINCOUNT))
        unsetenv("GOMP_SPINCOUNT");
}

bool cli_file_over_limit(const struct session_options *so)
{
    struct rfsys_cgroup_memory *cg = calloc(1, sizeof(*cg));
    uint64_t limit = so->has_memory_limit ? so->memory_limit : UINT64_MAX;
    struct stat st;
    if (cg && rfsys_read_cgroup_memory(NULL, "self", cg) == 0 && cg->has_limit &&
        !cg->limit_unlimited && cg->limit_bytes < limit)
        limit = cg->limit_bytes;
    free(cg);
    return stat(so->model, &st) == 0 && limit != UINT64_MAX && (uint64_t)st.st_size > limit;
}

void cli_exec_streaming_omp_env(int argc, char **argv)
{
    char **args = calloc((size_t)argc + 2, sizeof(*args));
    int set = args ? cli_streaming_omp_env() : 0;
    if (set <= 0) {
        free(args);
        return;
    }
    args[0] = (char *)RF_PROGRAM;
    memcpy(args + 1, argv, (size_t)argc * sizeof(*args)); /* argv[0] is the command */
    execv("/proc/self/exe", args);
    cli_streaming_omp_env_undo(set);
    free(args);
}
