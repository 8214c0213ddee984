/*
 * Signal cleanup of `ramforge bench` (see bench_cleanup.h).
 */
#include "bench_cleanup.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const int handled[] = {SIGINT, SIGTERM, SIGHUP};
#define N_HANDLED (sizeof(handled) / sizeof(handled[0]))

static struct {
    char copy[PATH_MAX];
    struct rfsys_cgroup_child cg;
    bool has_cg;
    volatile pid_t child;
} state;

static void handler(int sig)
{
    int saved = errno;

    if (state.child > 0) {
        kill(state.child, SIGKILL);
        while (waitpid(state.child, NULL, 0) < 0 && errno == EINTR)
            ;
        state.child = 0;
    }
    if (state.has_cg)
        rfsys_cgroup_child_remove(&state.cg);
    if (state.copy[0])
        unlink(state.copy);
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = SIG_DFL;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, NULL);
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, sig);
    sigprocmask(SIG_UNBLOCK, &s, NULL);
    raise(sig);
    errno = saved;
}

int bench_cleanup_install(void)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < N_HANDLED; i++)
        sigaddset(&sa.sa_mask, handled[i]);
    for (size_t i = 0; i < N_HANDLED; i++)
        if (sigaction(handled[i], &sa, NULL) < 0)
            return -errno;
    return 0;
}

void bench_cleanup_block(sigset_t *old)
{
    sigset_t s;

    sigemptyset(&s);
    for (size_t i = 0; i < N_HANDLED; i++)
        sigaddset(&s, handled[i]);
    sigprocmask(SIG_BLOCK, &s, old);
}

void bench_cleanup_restore(const sigset_t *old)
{
    sigprocmask(SIG_SETMASK, old, NULL);
}

void bench_cleanup_child_reset(const sigset_t *old)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = SIG_DFL;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < N_HANDLED; i++)
        sigaction(handled[i], &sa, NULL);
    sigprocmask(SIG_SETMASK, old, NULL);
}

void bench_cleanup_set_copy(const char *path)
{
    sigset_t old;

    bench_cleanup_block(&old);
    snprintf(state.copy, sizeof(state.copy), "%s", path ? path : "");
    bench_cleanup_restore(&old);
}

void bench_cleanup_set_cgroup(const struct rfsys_cgroup_child *cg)
{
    sigset_t old;

    bench_cleanup_block(&old);
    state.has_cg = cg != NULL;
    if (cg)
        state.cg = *cg;
    bench_cleanup_restore(&old);
}

void bench_cleanup_set_child(pid_t pid)
{
    sigset_t old;

    bench_cleanup_block(&old);
    state.child = pid;
    bench_cleanup_restore(&old);
}
