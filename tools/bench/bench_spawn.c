/*
 * One `ramforge run` process per repetition (see bench_spawn.h): the
 * argument vector, fork, an optional cgroup join and exec with redirected standard streams, wait4
 * for the exit status and rusage, and the run's error line read back.
 */
#include "bench_spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_cleanup.h"
#include "common/cli.h"
#include "ramforge/core/timing.h"

extern char **environ;

void bench_run_message(const char *err_path, char *out, size_t len)
{
    static const char prefix[] = RF_PROGRAM ": ";
    char buf[4096], *line, *pick = NULL, *save = NULL;
    ssize_t n = 0;
    int fd = open(err_path, O_RDONLY | O_CLOEXEC);

    out[0] = '\0';
    if (fd < 0)
        return;
    off_t size = lseek(fd, 0, SEEK_END);
    off_t from = size > (off_t)sizeof(buf) - 1 ? size - (off_t)sizeof(buf) + 1 : 0;
    if (size > 0)
        n = pread(fd, buf, sizeof(buf) - 1, from);
    close(fd);
    if (n <= 0)
        return;
    buf[n] = '\0';
    char *last = NULL;
    for (line = strtok_r(buf, "\r\n", &save); line; line = strtok_r(NULL, "\r\n", &save)) {
        last = line;
        if (strncmp(line, prefix, sizeof(prefix) - 1) == 0)
            pick = line + sizeof(prefix) - 1;
    }
    snprintf(out, len, "%s", pick ? pick : last ? last : "");
}

int bench_spawn_run(const struct bench_options *o, size_t variant, const char *model_path,
                    const char *base, const struct rfsys_cgroup_child *cg,
                    struct bench_process *out)
{
    const struct bench_variant *var = &o->variants[variant];
    char out_path[PATH_MAX], err_path[PATH_MAX], json_path[PATH_MAX], n_buf[24], t_buf[24];
    char *argv[16 + 2 * BENCH_MAX_ARGS];
    size_t k = 0;
    struct rusage ru;
    pid_t pid;
    int rc, wst;

    snprintf(out_path, sizeof(out_path), "%s.out", base);
    snprintf(err_path, sizeof(err_path), "%s.err", base);
    snprintf(json_path, sizeof(json_path), "%s.json", base);
    snprintf(n_buf, sizeof(n_buf), "%lld", o->n_predict);
    snprintf(t_buf, sizeof(t_buf), "%lld", o->n_threads);
    unlink(json_path); /* a report left by an earlier bench must not pass for this run's */
    argv[k++] = (char *)RF_PROGRAM;
    argv[k++] = (char *)"run";
    argv[k++] = (char *)"-m";
    argv[k++] = (char *)model_path;
    argv[k++] = (char *)"-p";
    argv[k++] = (char *)o->prompt;
    argv[k++] = (char *)"-n";
    argv[k++] = n_buf;
    if (o->n_threads > 0) {
        argv[k++] = (char *)"-t";
        argv[k++] = t_buf;
    }
    argv[k++] = (char *)"--residency-policy";
    argv[k++] = (char *)rf_policy_name(var->policy);
    argv[k++] = (char *)"--residency-report-json";
    argv[k++] = json_path;
    for (size_t i = 0; i < o->n_common; i++)
        argv[k++] = o->common_args[i];
    for (size_t i = 0; i < var->n_args; i++)
        argv[k++] = var->args[i];
    argv[k] = NULL;

    int fds[4] = {-1, -1, -1, -1}; /* stdin, stdout, stderr, cgroup.procs */
    int pipefd[2] = {-1, -1};
    fds[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
    fds[1] = open(out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    fds[2] = open(err_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    rc = fds[0] < 0 || fds[1] < 0 || fds[2] < 0 ? -errno : 0;
    if (rc == 0 && cg) {
        fds[3] = rfsys_cgroup_child_open_procs(cg);
        rc = fds[3] < 0 ? fds[3] : 0;
    }
    if (rc == 0 && pipe2(pipefd, O_CLOEXEC) < 0)
        rc = -errno;
    if (rc < 0)
        goto out;
    fflush(NULL);
    sigset_t old;
    bench_cleanup_block(&old);
    uint64_t t0 = rf_now_ns();
    pid = fork();
    if (pid == 0) {
        /* The child: async-signal-safe calls only until exec. */
        int err[2] = {0, 0};
        bench_cleanup_child_reset(&old);
        if (fds[3] >= 0 && (err[1] = rfsys_cgroup_child_join(fds[3])) < 0)
            err[0] = 1;
        for (int fd = 0; !err[0] && fd < 3; fd++) {
            /* dup2 onto itself keeps FD_CLOEXEC (bench started with that fd closed) */
            if ((fds[fd] == fd ? fcntl(fd, F_SETFD, 0) : dup2(fds[fd], fd)) < 0) {
                err[0] = 2;
                err[1] = -errno;
            }
        }
        if (!err[0]) {
            execve(BENCH_SELF_EXE, argv, environ);
            err[0] = 2;
            err[1] = -errno;
        }
        if (write(pipefd[1], err, sizeof(err)) < 0)
            _exit(127);
        _exit(127);
    }
    if (pid < 0) {
        rc = -errno;
        bench_cleanup_restore(&old);
        goto out;
    }
    bench_cleanup_set_child(pid);
    bench_cleanup_restore(&old);
    close(pipefd[1]);
    pipefd[1] = -1;
    int child_err[2] = {0, 0};
    ssize_t n;
    while ((n = read(pipefd[0], child_err, sizeof(child_err))) < 0 && errno == EINTR)
        ;
    while (wait4(pid, &wst, 0, &ru) < 0) {
        if (errno != EINTR) {
            rc = -errno;
            bench_cleanup_set_child(0);
            goto out;
        }
    }
    bench_cleanup_set_child(0);
    out->process_ns = rf_now_ns() - t0;
    out->has_maxrss = ru.ru_maxrss > 0;
    out->maxrss_bytes = out->has_maxrss ? (uint64_t)ru.ru_maxrss * 1024 : 0;
    out->major_faults = (uint64_t)ru.ru_majflt;
    out->read_bytes = (uint64_t)ru.ru_inblock * 512;
    out->status = WIFEXITED(wst) ? WEXITSTATUS(wst) : 128 + WTERMSIG(wst);
    out->setup_error = n == (ssize_t)sizeof(child_err) ? child_err[1] : 0;
    out->setup_step = !out->setup_error   ? NULL
                      : child_err[0] == 1 ? "join the memory cgroup"
                                          : "exec";
out:
    for (int i = 0; i < 4; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    if (pipefd[0] >= 0)
        close(pipefd[0]);
    if (pipefd[1] >= 0)
        close(pipefd[1]);
    return rc;
}

void bench_run_remove_outputs(const char *base)
{
    static const char *const exts[] = {".out", ".err", ".json"};

    for (size_t i = 0; i < sizeof(exts) / sizeof(exts[0]); i++) {
        char path[PATH_MAX + 8];
        snprintf(path, sizeof(path), "%s%s", base, exts[i]);
        unlink(path);
    }
}

/* obj.key as a non-negative integer into *v (left unknown otherwise). */
