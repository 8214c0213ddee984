/*
 * --memory-limit SIZE of run and serve (and bench's runs): a fresh child
 * memory cgroup of the command's own with that hard limit
 * (ramforge/sys/cgroup_child.h; cgroup v1 or v2), so "keep it under N" is a
 * cap the kernel holds. The command forks: the child joins the cgroup and
 * does the work; the parent waits, says what the cgroup recorded, removes
 * it and exits with the child's status. No cgroup is left behind:
 *
 *   signals   SIGINT, SIGTERM or SIGHUP to the parent is passed on to the
 *             child (serve stops gracefully), once: one the kernel sent
 *             to the whole process group (the terminal's Ctrl-C, si_code
 *             SI_KERNEL) reached the child already and is not sent again
 *             (llama-server takes a second SIGINT for "terminate now").
 *             Once the child ended, the parent ends as the child did.
 *   leftovers processes the child left in the cgroup (a server started in
 *             the background) get SIGTERM when it ends, SIGKILL 5 s later
 *             (at once on a stop signal), as systemd's
 *             KillMode=control-group; then the cgroup is removed. A
 *             cgroup that cannot be removed is said and the exit status
 *             is 1 where it would have been 0.
 *   SIGKILL   the child dies with its parent (PR_SET_PDEATHSIG SIGKILL,
 *             kept across exec). The empty cgroup a killed parent left is
 *             removed by the next --memory-limit command of this cgroup
 *             (rf-run-, rf-serve-, rf-exec-, rf-bench- and a pid this
 *             system does not run; said). Processes the child's own
 *             children started outlive such a kill, and their cgroup stays
 *             (said).
 */
#ifndef RAMFORGE_LIMIT_CGROUP_H
#define RAMFORGE_LIMIT_CGROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ramforge/sys/cgroup_child.h"

/*
 * rfsys_cgroup_child_create of NAME below this process's memory cgroup with
 * limit_bytes, handed to bench_cleanup's signal handler (no signal between
 * the mkdir and that). Returns 0, or -errno with reason (len bytes) a line
 * naming what failed and why (root needed, no memory controller, v2
 * controller not delegated).
 */
int limit_cgroup_create(const char *name, uint64_t limit_bytes, struct rfsys_cgroup_child *cg,
                        char *reason, size_t len);

/* How the child ended, as the supervising parent saw it. */
struct limit_end {
    int wstatus;                        /* waitpid's */
    int stop;                           /* the stop signal passed on to the child; 0: none */
    bool quiet;                         /* no footer after a normal exit */
    bool streaming;                     /* the run streams: the OOM line does not suggest it */
    int read_error;                     /* -errno of reading the cgroup's figures; 0: read */
    struct rfsys_cgroup_child_stats st; /* the cgroup's figures when read_error is 0 */
};

enum limit_end_kind {
    LIMIT_END_NONE,   /* nothing to say (quiet, or a stop signal passed on) */
    LIMIT_END_OOM,    /* the kernel's OOM killer killed the run in the cgroup */
    LIMIT_END_KILLED, /* another signal killed it */
    LIMIT_END_FOOTER, /* it exited: the cgroup's limit and peak */
};

/*
 * The line to write on stderr once the child ended (limit_text.c), into
 * buf (len bytes; "" with LIMIT_END_NONE): an OOM kill names the ways out
 * not in use already; a limit or peak that could not be read is "unknown"
 * with why, never 0 bytes.
 */
enum limit_end_kind limit_cgroup_end_text(const struct limit_end *e, char *buf, size_t len);

/*
 * Runs the rest of the command in a fresh child cgroup named
 * PREFIX<pid> with limit_bytes. Returns -1 in the child, which goes on
 * with the command inside the cgroup; in the parent, after the child
 * ended and the cgroup was removed, the exit status to return (the
 * child's; 1 when it was killed, said on stderr with the cgroup's
 * figures, or when the cgroup could not be made, said). quiet: no line
 * of the cgroup's figures after a normal exit. streaming: the command
 * runs under --residency-policy streaming (the OOM line says so).
 */
int limit_cgroup_enter(const char *prefix, uint64_t limit_bytes, bool quiet, bool streaming);

/* What a supervising parent does beside waiting for its child (exec --metrics-listen). Each
   hook may be NULL. */
struct limit_parent {
    int (*start)(void *ud);             /* the stop signals blocked, before the fork: threads
                                           started here keep them blocked; < 0: fail (said) */
    void (*child)(pid_t pid, void *ud); /* the child's pid, in the parent after the fork */
    void (*stop)(void *ud);             /* after the child ended, or after a failure past start */
    /* after the child ended and its line was written, before the cgroup is removed (run's
       report of a killed run) */
    void (*ended)(const struct limit_end *e, enum limit_end_kind kind, void *ud);
    void *ud;
};

/*
 * limit_cgroup_enter with hooks (NULL: none) and an optional cgroup:
 * limit_bytes NULL forks and supervises without one (no cgroup line at
 * exit). Returns -1 in the child, else the exit status as
 * limit_cgroup_enter.
 */
int limit_cgroup_supervise(const char *prefix, const uint64_t *limit_bytes, bool quiet,
                           bool streaming, const struct limit_parent *hooks);

#endif
