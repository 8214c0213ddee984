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
#include "ramforge/timing.h"

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

/* After the child ended: what the cgroup recorded, on stderr (limit_cgroup_end_text), and the
   hooks' ended; the exit status. */
static int finish(const struct rfsys_cgroup_child *cg, struct limit_end *e,
                  const struct limit_parent *hooks)
{
    char line[512];
    enum limit_end_kind kind;

    e->read_error = rfsys_cgroup_child_read(cg, &e->st);
    if (e->read_error > 0)
        e->read_error = 0;
    kind = limit_cgroup_end_text(e, line, sizeof(line));
    if (kind == LIMIT_END_OOM || kind == LIMIT_END_KILLED)
        cli_error("%s", line);
    else if (kind == LIMIT_END_FOOTER)
        fprintf(stderr, "%s\n", line);
    if (hooks && hooks->ended)
        hooks->ended(e, kind, hooks->ud);
    return WIFSIGNALED(e->wstatus) ? RF_EXIT_FAILURE : WEXITSTATUS(e->wstatus);
}

/* Bounds the wait for a busy cgroup to empty: a loaded host can take seconds to move an
   exited process's last charges (rfsys_cgroup_child_remove itself waits about a second). */
#define REMOVE_DEADLINE_NS (10 * 1000000000ULL)

/* rfsys_cgroup_child_remove, retried while -EBUSY until REMOVE_DEADLINE_NS: 0 or -errno. */
static int remove_cgroup(const struct rfsys_cgroup_child *cg)
{
    uint64_t deadline = rf_now_ns() + REMOVE_DEADLINE_NS;
    int rc;

    while ((rc = rfsys_cgroup_child_remove(cg)) == -EBUSY && rf_now_ns() < deadline)
        ;
    return rc;
}

int limit_cgroup_supervise(const char *prefix, const uint64_t *limit_bytes, bool quiet,
                           bool streaming, const struct limit_parent *hooks)
{
    struct rfsys_cgroup_child cg;
    char name[64], reason[RFSYS_CGROUP_CHILD_PATH_MAX + 128];
    sigset_t set, old;
    siginfo_t info;
    struct sigaction ign = {.sa_handler = SIG_IGN}, old_pipe;
    int fd = -1, rc, wstatus = 0, status = RF_EXIT_FAILURE, got = 0;
    bool started = false, pipe_ignored = false;
    pid_t pid;

    memset(&cg, 0, sizeof(cg));
    snprintf(name, sizeof(name), "%s%ld", prefix, (long)getpid());
    /* From before the mkdir to the rmdir, the stop signals and SIGCHLD wait in sigwaitinfo
       (in every thread: a hook's threads start with them blocked). */
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGCHLD);
    sigprocmask(SIG_BLOCK, &set, &old);
    if (hooks && hooks->start && hooks->start(hooks->ud) < 0) {
        sigprocmask(SIG_SETMASK, &old, NULL);
        return RF_EXIT_FAILURE;
    }
    started = hooks != NULL;
    if (limit_bytes && limit_cgroup_create(name, *limit_bytes, &cg, reason, sizeof(reason)) < 0) {
        cli_error("%s", reason);
        goto out;
    }
    if (limit_bytes && (fd = rfsys_cgroup_child_open_procs(&cg)) < 0) {
        cli_error("--memory-limit: cannot open %s/cgroup.procs: %s", cg.path, strerror(-fd));
        goto out;
    }
    fflush(NULL);
    pid = fork();
    if (pid == 0) {
        rc = fd >= 0 ? rfsys_cgroup_child_join(fd) : 0;
        if (fd >= 0)
            close(fd);
        sigprocmask(SIG_SETMASK, &old, NULL);
        if (rc == 0)
            return -1;
        cli_error("--memory-limit: cannot join the cgroup %s: %s", cg.path, strerror(-rc));
        _exit(RF_EXIT_FAILURE);
    }
    if (fd >= 0)
        close(fd);
    if (pid < 0) {
        cli_error("cannot fork: %s", strerror(errno));
        goto out;
    }
    /* A closed stderr or stdout (`2>&1 | head -1`) must not kill this process before the
       cgroup is removed: its writes fail with EPIPE instead; a child killed by SIGPIPE is
       ended the same way below, after the cleanup. */
    pipe_ignored = sigaction(SIGPIPE, &ign, &old_pipe) == 0;
    if (hooks && hooks->child)
        hooks->child(pid, hooks->ud);
    /* The child does the work; a stop signal is passed on to it (serve stops gracefully). */
    for (;;) {
        int sig = sigwaitinfo(&set, &info);
        if (sig == SIGCHLD && waitpid(pid, &wstatus, WNOHANG) == pid)
            break;
        if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
            got = sig;
            kill(pid, sig);
        }
    }
    if (WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGPIPE)
        got = SIGPIPE; /* said by none: the reader is gone */
    if (limit_bytes) {
        struct limit_end e = {
            .wstatus = wstatus, .stop = got, .quiet = quiet || got, .streaming = streaming};
        status = finish(&cg, &e, hooks);
    } else
        status = WIFSIGNALED(wstatus) ? RF_EXIT_FAILURE : WEXITSTATUS(wstatus);
out:
    if (started && hooks->stop)
        hooks->stop(hooks->ud);
    if (cg.created && remove_cgroup(&cg) < 0)
        cli_error("--memory-limit: cannot remove the cgroup %s", cg.path);
    bench_cleanup_set_cgroup(NULL);
    if (pipe_ignored)
        sigaction(SIGPIPE, &old_pipe, NULL);
    if (got && WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == got) {
        signal(got, SIG_DFL); /* end as the child did: killed by that signal */
        sigprocmask(SIG_SETMASK, &old, NULL);
        raise(got);
    }
    sigprocmask(SIG_SETMASK, &old, NULL);
    return status;
}

int limit_cgroup_enter(const char *prefix, uint64_t limit_bytes, bool quiet, bool streaming)
{
    return limit_cgroup_supervise(prefix, &limit_bytes, quiet, streaming, NULL);
}
