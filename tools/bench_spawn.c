/*
 * One `ramforge run` process per repetition (see bench_spawn.h): the
 * argument vector, posix_spawn with redirected standard streams, wait4 for
 * the exit status and ru_maxrss, and the run's error line read back.
 */
#include "bench_spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "ramforge/timing.h"

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
                    const char *base, struct bench_process *out)
{
    const struct bench_variant *var = &o->variants[variant];
    char out_path[PATH_MAX], err_path[PATH_MAX], json_path[PATH_MAX], n_buf[24], t_buf[24];
    char *argv[16 + 2 * BENCH_MAX_ARGS];
    size_t k = 0;
    posix_spawn_file_actions_t fa;
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

    rc = posix_spawn_file_actions_init(&fa);
    if (rc)
        return -rc;
    if ((rc = posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0)) ||
        (rc = posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, out_path,
                                               O_WRONLY | O_CREAT | O_TRUNC, 0644)) ||
        (rc = posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, err_path,
                                               O_WRONLY | O_CREAT | O_TRUNC, 0644))) {
        posix_spawn_file_actions_destroy(&fa);
        return -rc;
    }
    fflush(NULL);
    uint64_t t0 = rf_now_ns();
    rc = posix_spawn(&pid, BENCH_SELF_EXE, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc)
        return -rc;
    while (wait4(pid, &wst, 0, &ru) < 0) {
        if (errno != EINTR)
            return -errno;
    }
    out->process_ns = rf_now_ns() - t0;
    out->has_maxrss = ru.ru_maxrss > 0;
    out->maxrss_bytes = out->has_maxrss ? (uint64_t)ru.ru_maxrss * 1024 : 0;
    out->status = WIFEXITED(wst) ? WEXITSTATUS(wst) : 128 + WTERMSIG(wst);
    return 0;
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
