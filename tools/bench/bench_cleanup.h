/*
 * What an interrupted `ramforge bench` leaves behind, undone: on SIGINT,
 * SIGTERM or SIGHUP the handler kills and reaps the run process in
 * flight, removes its memory cgroup and the (possibly partial) isolated
 * copy, then re-raises the signal with its default action, so bench dies
 * of it as before. The normal path removes the same things itself and
 * clears them here.
 *
 * The state is process-global (one bench per process). Everything the
 * handler calls is async-signal-safe (kill, waitpid, rmdir, unlink,
 * nanosleep, sigaction, raise); the setters block the signals while they
 * change the state.
 */
#ifndef RAMFORGE_BENCH_CLEANUP_H
#define RAMFORGE_BENCH_CLEANUP_H

#include <signal.h>
#include <sys/types.h>

#include "ramforge/sys/cgroup_child.h"

/* Installs the handler for SIGINT, SIGTERM and SIGHUP. Returns 0 or -errno. */
int bench_cleanup_install(void);

/* The isolated copy's path (NULL: none) to unlink on a signal; copied. */
void bench_cleanup_set_copy(const char *path);

/* The run's cgroup (NULL: none) to remove on a signal; copied. */
void bench_cleanup_set_cgroup(const struct rfsys_cgroup_child *cg);

/* The run process in flight (0: none), killed with SIGKILL and reaped on a signal. */
void bench_cleanup_set_child(pid_t pid);

/* Blocks (block true) or unblocks the handled signals; *old gets the mask before. */
void bench_cleanup_block(sigset_t *old);

/* Restores the mask bench_cleanup_block saved. */
void bench_cleanup_restore(const sigset_t *old);

/*
 * For a forked child before exec: the default action for the handled
 * signals, then the mask old (async-signal-safe).
 */
void bench_cleanup_child_reset(const sigset_t *old);

#endif
