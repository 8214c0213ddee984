/*
 * libgomp's wait under streaming (omp_env.h). OMP_WAIT_POLICY=PASSIVE alone
 * makes every waiting thread sleep at once, at each of a token's hundreds of
 * barriers as well as while a decode waits for a read; a short spin first
 * keeps the barriers' waits of microseconds off the futex (measured in
 * docs/STREAMING.md).
 */
#include "omp_env.h"

#include <errno.h>
#include <stdlib.h>

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
