/*
 * --memory-limit: the command's work in a child memory cgroup of its own
 * (see limit_cgroup.h).
 */
#include "limit_cgroup.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_cleanup.h"
#include "cli.h"

int limit_cgroup_create(const char *name, uint64_t limit_bytes, struct rfsys_cgroup_child *cg,
                        char *reason, size_t len)
{
    sigset_t old;
    bench_cleanup_block(&old); /* no signal between the mkdir and its registration */
    int rc = rfsys_cgroup_child_create(NULL, "self", name, limit_bytes, cg);
    if (rc == 0)
        bench_cleanup_set_cgroup(cg);
    bench_cleanup_restore(&old);
    if (rc == 0)
        return 0;
    if (rc == -EOPNOTSUPP && cg->version == RFSYS_CGROUP_NONE)
        snprintf(reason, len, "--memory-limit: no memory cgroup controller found");
    else if (rc == -EOPNOTSUPP)
        snprintf(reason, len,
                 "--memory-limit: %s has no memory.max (the memory controller is not enabled "
                 "in the parent's cgroup.subtree_control)",
                 cg->path);
    else if (rc == -EACCES || rc == -EPERM || rc == -EROFS)
        snprintf(reason, len, "--memory-limit: cannot create the cgroup %s: %s (needs root)",
                 cg->path, strerror(-rc));
    else
        snprintf(reason, len, "--memory-limit: cannot create the cgroup %s: %s",
                 cg->path[0] ? cg->path : name, strerror(-rc));
    return rc;
}

/* After the child ended: what the cgroup recorded, on stderr; the exit status. */
static int finish(const struct rfsys_cgroup_child *cg, int wstatus, bool quiet)
{
    struct rfsys_cgroup_child_stats st;
    char b1[32], b2[32];
    bool killed = WIFSIGNALED(wstatus);
    int status = killed ? RF_EXIT_FAILURE : WEXITSTATUS(wstatus);

    if (rfsys_cgroup_child_read(cg, &st) < 0)
        memset(&st, 0, sizeof(st));
    const char *limit = st.has_limit && !st.limit_max
                            ? cli_format_bytes(st.limit_bytes, false, b1, sizeof(b1))
                            : "unknown";
    const char *peak =
        st.has_peak ? cli_format_bytes(st.peak_bytes, false, b2, sizeof(b2)) : "unknown";
    if (killed && st.has_oom_kill && st.oom_kill > 0)
        cli_error("the kernel's OOM killer killed the run in its memory cgroup (limit %s, peak "
                  "%s): try a larger --memory-limit or --residency-policy streaming",
                  limit, peak);
    else if (killed)
        cli_error("the run was killed by signal %d (%s)", WTERMSIG(wstatus),
                  strsignal(WTERMSIG(wstatus)));
    else if (!quiet)
        fprintf(stderr,
                "  memory cgroup of --memory-limit: limit %s (%" PRIu64 " bytes), peak %s (this "
                "run only)%s\n",
                limit, st.has_limit ? st.limit_bytes : 0, peak,
                st.has_failcnt && st.failcnt ? ", limit reached" : "");
    return status;
}

int limit_cgroup_enter(const char *prefix, uint64_t limit_bytes, bool quiet)
{
    struct rfsys_cgroup_child cg;
    char name[64], reason[RFSYS_CGROUP_CHILD_PATH_MAX + 128];
    sigset_t old;
    int fd, rc, wstatus = 0, status = RF_EXIT_FAILURE;
    pid_t pid;

    memset(&cg, 0, sizeof(cg));
    snprintf(name, sizeof(name), "%s%ld", prefix, (long)getpid());
    if ((rc = bench_cleanup_install()) < 0) {
        cli_error("--memory-limit: cannot install the signal handlers: %s", strerror(-rc));
        return RF_EXIT_FAILURE;
    }
    if (limit_cgroup_create(name, limit_bytes, &cg, reason, sizeof(reason)) < 0) {
        cli_error("%s", reason);
        return RF_EXIT_FAILURE;
    }
    if ((fd = rfsys_cgroup_child_open_procs(&cg)) < 0) {
        cli_error("--memory-limit: cannot open %s/cgroup.procs: %s", cg.path, strerror(-fd));
        goto out;
    }
    fflush(NULL);
    bench_cleanup_block(&old);
    pid = fork();
    if (pid == 0) {
        rc = rfsys_cgroup_child_join(fd);
        close(fd);
        bench_cleanup_child_reset(&old);
        if (rc == 0)
            return -1;
        cli_error("--memory-limit: cannot join the cgroup %s: %s", cg.path, strerror(-rc));
        _exit(RF_EXIT_FAILURE);
    }
    if (pid > 0)
        bench_cleanup_set_child(pid);
    bench_cleanup_restore(&old);
    close(fd);
    if (pid < 0) {
        cli_error("--memory-limit: cannot fork: %s", strerror(errno));
        goto out;
    }
    while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR)
        ;
    bench_cleanup_set_child(0);
    status = finish(&cg, wstatus, quiet);
out:
    if (rfsys_cgroup_child_remove(&cg) < 0)
        cli_error("--memory-limit: cannot remove the cgroup %s", cg.path);
    bench_cleanup_set_cgroup(NULL);
    return status;
}
