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
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench_cleanup.h"
#include "cli.h"
#include "ramforge/core/timing.h"

/* The names of the cgroups this program makes, followed by the pid of the command. */
static const char *const own_prefixes[] = {"rf-run-", "rf-serve-", "rf-exec-", "rf-bench-"};

/* The empty cgroups of ramforge processes that no longer exist (a parent killed by SIGKILL
   cannot remove its own), removed; said on stderr. */
static void remove_stale(void)
{
    unsigned left = 0;
    int n = rfsys_cgroup_child_remove_stale(NULL, "self", own_prefixes,
                                            sizeof(own_prefixes) / sizeof(own_prefixes[0]), &left);
    if (n > 0)
        cli_error("--memory-limit: removed %d empty cgroup%s left by ramforge processes that no "
                  "longer exist",
                  n, n == 1 ? "" : "s");
    if (left > 0)
        cli_error("--memory-limit: %u cgroup%s of ramforge processes that no longer exist still "
                  "hold%s processes (left as they are; see rf-*/cgroup.procs beside this one's)",
                  left, left == 1 ? "" : "s", left == 1 ? "s" : "");
}

int limit_cgroup_create(const char *name, uint64_t limit_bytes, struct rfsys_cgroup_child *cg,
                        char *reason, size_t len)
{
    sigset_t old;
    remove_stale();
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

/* How long the processes the child left in its cgroup have after SIGTERM, before SIGKILL. */
#define LEFTOVER_GRACE_NS (5 * 1000000000ULL)

/*
 * The processes the child left in cg (PROGRAM started a server in the background and exited,
 * say), ended as systemd's KillMode=control-group ends a unit's: SIGTERM, then SIGKILL after
 * LEFTOVER_GRACE_NS or at once when a stop signal of set arrives meanwhile; said on stderr.
 * Returns when the cgroup is empty or REMOVE_DEADLINE_NS after the SIGKILL (the removal then
 * fails and says so).
 */
static void end_leftovers(const struct rfsys_cgroup_child *cg, const sigset_t *set)
{
    const struct timespec tick = {0, 20 * 1000 * 1000}; /* 20 ms between looks */
    int n = rfsys_cgroup_child_signal(cg, SIGTERM), sig = SIGTERM;
    uint64_t deadline = rf_now_ns() + LEFTOVER_GRACE_NS;
    siginfo_t info;

    if (n <= 0)
        return;
    cli_error("--memory-limit: the program ended and left %d process%s in the cgroup %s: sent "
              "SIGTERM",
              n, n == 1 ? "" : "es", cg->path);
    while (rfsys_cgroup_child_signal(cg, 0) > 0) {
        int got = sigtimedwait(set, &info, &tick);
        bool stop = got == SIGINT || got == SIGTERM || got == SIGHUP;
        if (sig == SIGTERM && (stop || rf_now_ns() >= deadline)) {
            sig = SIGKILL;
            n = rfsys_cgroup_child_signal(cg, SIGKILL);
            if (stop)
                cli_error("--memory-limit: %d process%s still in the cgroup %s at a stop signal: "
                          "sent SIGKILL",
                          n, n == 1 ? "" : "es", cg->path);
            else
                cli_error("--memory-limit: %d process%s still in the cgroup %s %llu seconds after "
                          "SIGTERM: sent SIGKILL",
                          n, n == 1 ? "" : "es", cg->path, LEFTOVER_GRACE_NS / 1000000000ULL);
            deadline = rf_now_ns() + REMOVE_DEADLINE_NS;
        } else if (sig == SIGKILL && rf_now_ns() >= deadline) {
            return;
        }
    }
}

/*
 * Whether the stop signal sig (its info) already reached the child, so that passing it on
 * would deliver it twice: the kernel (si_code SI_KERNEL) sends the terminal's SIGINT (Ctrl-C)
 * to the whole foreground process group, and SIGHUP of a terminal's hangup at its session
 * leader's exit, or of an orphaned process group, to a whole group too; the child is in this
 * process's group unless it left it. A SIGHUP the kernel sends to the session leader alone
 * (this process, its terminal hung up) and every signal sent by kill (SI_USER, SI_QUEUE,
 * SI_TKILL) are passed on.
 */
static bool reached_child(int sig, const siginfo_t *info, pid_t child)
{
    if (info->si_code != SI_KERNEL || sig == SIGTERM)
        return false;
    if (sig == SIGHUP && getsid(0) == getpid())
        return false;
    return getpgid(child) == getpgrp();
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
    pid_t pid, parent = getpid();

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
        /* The child dies with this process (kept across PROGRAM's exec): a parent killed by
           SIGKILL cannot pass anything on. The parent may be gone before the prctl: then the
           child has another parent and ends here. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(RF_EXIT_FAILURE);
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
    /* The child does the work; a stop signal is passed on to it (serve stops gracefully),
       once: not when the terminal sent it to the child too. */
    for (;;) {
        int sig = sigwaitinfo(&set, &info);
        if (sig == SIGCHLD && waitpid(pid, &wstatus, WNOHANG) == pid)
            break;
        if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
            got = sig;
            if (!reached_child(sig, &info, pid))
                kill(pid, sig);
        }
    }
    if (WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGPIPE)
        got = SIGPIPE; /* said by none: the reader is gone */
    if (limit_bytes) {
        struct limit_end e = {
            .wstatus = wstatus, .stop = got, .quiet = quiet || got, .streaming = streaming};
        end_leftovers(&cg, &set);
        status = finish(&cg, &e, hooks);
    } else {
        status = WIFSIGNALED(wstatus) ? RF_EXIT_FAILURE : WEXITSTATUS(wstatus);
    }
out:
    if (started && hooks->stop)
        hooks->stop(hooks->ud);
    if (cg.created && (rc = remove_cgroup(&cg)) < 0) {
        cli_error("--memory-limit: cannot remove the cgroup %s: %s", cg.path, strerror(-rc));
        if (status == 0)
            status = RF_EXIT_FAILURE; /* a cgroup left behind is not a clean run */
    }
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
