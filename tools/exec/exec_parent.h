/*
 * ramforge exec's parent: with --memory-limit or --metrics-listen, exec
 * runs PROGRAM as its child (in a fresh memory cgroup with the limit) and
 * stays to wait for it and serve its figures on /metrics (exec_parent.c
 * says where they come from).
 */
#ifndef RAMFORGE_TOOLS_EXEC_PARENT_H
#define RAMFORGE_TOOLS_EXEC_PARENT_H

#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* The parent's state; zero it, then set listen. */
struct exec_parent {
    const char *listen;   /* --metrics-listen [ADDR:]PORT; NULL: no endpoint */
    char spool[PATH_MAX]; /* the engine's spool directory (mkdtemp); "" : none */
    atomic_int child;     /* PROGRAM's pid once forked; 0 before */
    bool streaming;       /* --residency-policy streaming (the OOM line does not suggest it) */
};

/*
 * Forks: in the child (in the cgroup of *limit_bytes; NULL: none) returns
 * -1, and the caller runs PROGRAM there. The parent, with listen set,
 * first makes the spool directory (its path in the environment the child
 * inherits) and listens; then it waits for the child, passing SIGINT,
 * SIGTERM and SIGHUP on, stops listening, removes the spool and the
 * cgroup, and returns the child's exit status (1 and said: it was killed,
 * or the cgroup, the spool or the endpoint could not be made).
 */
int exec_parent_run(struct exec_parent *p, const uint64_t *limit_bytes);

#endif
