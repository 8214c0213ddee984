/*
 * ramforge watch PID... | --all: the memory ledger of running llama.cpp
 * processes read from outside, one reading per interval, as a terminal
 * view, JSON lines, a node_exporter textfile or a /metrics endpoint; with
 * --release-idle, non-destructive advice on an idle process's model
 * mapping; with --budget, one byte budget over them (docs/BUDGET.md). The
 * modules are listed in watch.h.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/cli.h"
#include "common/metrics_listen.h"
#include "ramforge/core/policy.h"
#include "ramforge/session/metrics.h"
#include "watch.h"

static volatile sig_atomic_t g_stop;

static void on_signal(int sig)
{
    (void)sig;
    g_stop = 1;
}

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: %s watch [OPTIONS] PID...\n"
            "       %s watch [OPTIONS] --all | --cgroup DIR\n"
            "\n"
            "The memory ledger of running llama.cpp processes, read from outside (procfs,\n"
            "pagemap, the model file's page cache, the cgroup tree) without touching them:\n"
            "per model mapping Rss, Pss, Locked and per-layer mapped and page-cache pages;\n"
            "per process VmRSS, RssAnon, RssFile, RssShmem, VmSwap, VmHWM and anonymous\n"
            "growth; per cgroup level limit, usage, reclaimable cache, oom_kill, and the room\n"
            "before the binding level's OOM kill. Anonymous memory (KV cache, prompt cache,\n"
            "scratch) is one figure: it cannot be split from outside.\n"
            "\n"
            "Options:\n"
            "  -a, --all                 every process that maps a GGUF file (those whose maps\n"
            "                            cannot be read are counted, with the reason)\n"
            "      --cgroup DIR          every process of the cgroup directory DIR and of its\n"
            "                            descendants that maps a GGUF file\n"
            "  -i, --interval SECONDS    time between readings (default 1; 0.1 to 3600)\n"
            "  -n, --iterations N        stop after N readings (default: until interrupted)\n"
            "      --once                one reading (-n 1)\n"
            "  -j, --json                JSON lines, one per process and reading, with --all\n"
            "                            one more per reading (schema/watch.schema.json)\n"
            "  -b, --bytes               exact bytes in the terminal view\n"
            "      --metrics-file PATH   write Prometheus text to PATH after each reading\n"
            "                            (atomic: node_exporter's textfile collector); a failed\n"
            "                            write is a warning, counted and retried next reading\n"
            "      --listen ADDR:PORT    serve the latest reading on http://ADDR:PORT/metrics\n"
            "      --release-idle SECONDS\n"
            "                            when a process's CPU time has not moved for SECONDS\n"
            "                            (never while its /proc/PID/stat cannot be read),\n"
            "                            advise its model mapping's pages out with\n"
            "                            process_madvise down to --memory-target (off by default;\n"
            "                            only r--s pages of the model file, never anonymous\n"
            "                            memory; no gate: the process may begin a decode\n"
            "                            meanwhile, its tokens cannot change, only its speed)\n"
            "      --memory-target SIZE  the model mapping Rss to advise down to (512MiB, ...)\n"
            "      --release-mode MODE   pageout (default: reclaim now) or cold (deactivate:\n"
            "                            reclaimed first under pressure, Rss need not drop)\n"
            "      --budget SIZE         keep the pages the watched models hold (each file once)\n"
            "                            under SIZE: over it, ask the least recently active\n"
            "                            process first for its own cold file pages (exec's\n"
            "                            submissions, else CPU time): through exec's gate at its\n"
            "                            next idle moment where its control channel answers,\n"
            "                            else by advice (process_madvise pageout, no gate);\n"
            "                            never anonymous memory; one line on stderr per release\n"
            "                            and why that one (docs/BUDGET.md)\n"
            "      --keep PID|MODEL      with --budget: never release from this process, or from\n"
            "                            this model (its file name or path); repeatable\n"
            "  -h, --help                show this help\n"
            "\n"
            "A figure that cannot be read (another user's process, a kernel that refuses) is\n"
            "unknown with the reason, never 0. Exit status: 0 success, 1 failure (a PID that\n"
            "names no process), 2 bad command line.\n",
            RF_PROGRAM, RF_PROGRAM);
}

static bool parse_seconds(const char *opt, const char *s, double min, double max, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v) || v < min || v > max) {
        cli_usage_error("invalid %s '%s': expected seconds from %g to %g", opt, s, min, max);
        return false;
    }
    *out = v;
    return true;
}

enum {
    OPT_ONCE = 256,
    OPT_METRICS_FILE,
    OPT_LISTEN,
    OPT_RELEASE_IDLE,
    OPT_TARGET,
    OPT_MODE,
    OPT_BUDGET,
    OPT_KEEP,
    OPT_CGROUP
};

static int parse_options(int argc, char **argv, struct watch_options *o)
{
    static const struct option longopts[] = {
        {"all", no_argument, NULL, 'a'},
        {"interval", required_argument, NULL, 'i'},
        {"iterations", required_argument, NULL, 'n'},
        {"once", no_argument, NULL, OPT_ONCE},
        {"json", no_argument, NULL, 'j'},
        {"bytes", no_argument, NULL, 'b'},
        {"metrics-file", required_argument, NULL, OPT_METRICS_FILE},
        {"listen", required_argument, NULL, OPT_LISTEN},
        {"release-idle", required_argument, NULL, OPT_RELEASE_IDLE},
        {"memory-target", required_argument, NULL, OPT_TARGET},
        {"release-mode", required_argument, NULL, OPT_MODE},
        {"budget", required_argument, NULL, OPT_BUDGET},
        {"keep", required_argument, NULL, OPT_KEEP},
        {"cgroup", required_argument, NULL, OPT_CGROUP},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    bool has_target = false, has_mode = false;
    long long v;
    int c;

    o->interval_s = 1.0;
    o->release_mode = RFSYS_ADVISE_PAGEOUT;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":ai:n:jbh", longopts, NULL)) != -1) {
        switch (c) {
        case 'a':
            o->all = true;
            break;
        case 'i':
            if (!parse_seconds("--interval", optarg, 0.1, 3600, &o->interval_s))
                return RF_EXIT_USAGE;
            break;
        case 'n':
            if (!cli_parse_int("--iterations", optarg, 1, 1000000000, &o->iterations))
                return RF_EXIT_USAGE;
            break;
        case OPT_ONCE:
            o->iterations = 1;
            break;
        case 'j':
            o->json = true;
            break;
        case 'b':
            o->raw = true;
            break;
        case OPT_METRICS_FILE:
            o->metrics_file = optarg;
            break;
        case OPT_LISTEN:
            o->listen = optarg;
            break;
        case OPT_RELEASE_IDLE:
            o->release = true;
            if (!parse_seconds("--release-idle", optarg, 0.1, 86400, &o->release_idle_s))
                return RF_EXIT_USAGE;
            break;
        case OPT_TARGET:
            has_target = true;
            if (!cli_parse_size("--memory-target", optarg, true, &o->target_bytes))
                return RF_EXIT_USAGE;
            break;
        case OPT_MODE:
            has_mode = true;
            if (!strcmp(optarg, "cold")) {
                o->release_mode = RFSYS_ADVISE_COLD;
            } else if (!strcmp(optarg, "pageout")) {
                o->release_mode = RFSYS_ADVISE_PAGEOUT;
            } else {
                cli_usage_error("invalid --release-mode '%s': expected cold or pageout", optarg);
                return RF_EXIT_USAGE;
            }
            break;
        case OPT_BUDGET:
            o->budget = true;
            if (!cli_parse_size("--budget", optarg, true, &o->budget_bytes))
                return RF_EXIT_USAGE;
            break;
        case OPT_KEEP: {
            char **v = realloc(o->keep, (o->n_keep + 1) * sizeof(*v));
            if (!v) {
                cli_error("out of memory");
                return RF_EXIT_FAILURE;
            }
            o->keep = v;
            v[o->n_keep++] = optarg;
            break;
        }
        case OPT_CGROUP:
            o->cgroup = optarg;
            break;
        default: {
            int rc = cli_help_or_bad_option(c, argv, longopts, usage);
            return rc ? rc : -1; /* -1: --help was shown */
        }
        }
    }
    if ((o->all || o->cgroup) == (optind < argc) || (o->all && o->cgroup)) {
        cli_usage_error(o->all && o->cgroup ? "--all and --cgroup: choose one"
                        : o->all            ? "--all takes no PID operands"
                        : o->cgroup         ? "--cgroup takes no PID operands"
                                            : "no PID given (or --all, or --cgroup)");
        return RF_EXIT_USAGE;
    }
    if ((o->n_keep && !o->budget) || (o->budget && o->release) ||
        (o->budget && o->iterations == 1)) {
        cli_usage_error(o->n_keep && !o->budget ? "--keep needs --budget"
                        : o->release ? "--budget and --release-idle: choose one (the budget "
                                       "releases idle processes itself)"
                                     : "--budget needs more than one reading to measure its "
                                       "releases");
        return RF_EXIT_USAGE;
    }
    if (o->release != has_target || (has_mode && !o->release)) {
        cli_usage_error(o->release ? "--release-idle needs --memory-target"
                                   : "--memory-target and --release-mode need --release-idle");
        return RF_EXIT_USAGE;
    }
    if (o->release && o->iterations == 1) {
        cli_usage_error("--release-idle needs more than one reading to see a process idle");
        return RF_EXIT_USAGE;
    }
    o->n_pids = (size_t)(argc - optind);
    o->pids = calloc(o->n_pids ? o->n_pids : 1, sizeof(int));
    if (!o->pids) {
        cli_error("out of memory");
        return RF_EXIT_FAILURE;
    }
    for (size_t i = 0; i < o->n_pids; i++) {
        if (!cli_parse_int("PID", argv[optind + (int)i], 1, 4194304, &v))
            return RF_EXIT_USAGE;
        o->pids[i] = (int)v;
    }
    return 0;
}

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Adds a proc for pid unless one is watched; false when out of memory. */
static bool add_proc(struct watch_proc ***procs, size_t *n, int pid)
{
    for (size_t i = 0; i < *n; i++)
        if ((*procs)[i]->pid == pid && (*procs)[i]->state == WATCH_RUNNING)
            return true;
    struct watch_proc **v = realloc(*procs, (*n + 1) * sizeof(**procs));
    if (!v)
        return false;
    *procs = v;
    v[*n] = malloc(sizeof(*v[*n]));
    if (!v[*n])
        return false;
    watch_proc_init(v[(*n)++], pid);
    return true;
}

/* Drops the procs that were reported gone in the previous reading. */
static void drop_gone(struct watch_proc **procs, size_t *n)
{
    size_t k = 0;
    for (size_t i = 0; i < *n; i++) {
        if (procs[i]->state == WATCH_RUNNING) {
            procs[k++] = procs[i];
        } else {
            watch_budget_gone(procs[i]);
            watch_proc_clear_models(procs[i]);
            free(procs[i]);
        }
    }
    *n = k;
}

/* The --metrics-file writes so far. */
struct file_state {
    int last_rc;            /* the last write's result: 0 or -errno */
    uint64_t errors;        /* failed writes since the watch began */
    uint64_t outage_errors; /* failed writes since the last that succeeded */
};

/*
 * The text of reading r to --metrics-file and --listen. A failed file write
 * is a warning once per change of state (a new reason, or written again),
 * not at each reading; it is counted in fs->errors, which the text carries
 * from then on (the endpoint's at once), and retried at the next reading:
 * the watch and its endpoint go on. Only a text that cannot be rendered
 * (out of memory) fails.
 */
static int publish(const struct watch_options *o, struct watch_reading *r,
                   struct watch_proc **procs, size_t n, struct file_state *fs)
{
    char *text = NULL;
    int rc;

    r->metrics_file = o->metrics_file != NULL;
    r->metrics_file_errors = fs->errors;
    rc = watch_metrics_text(r, procs, n, &text);
    if (rc == 0 && o->metrics_file) {
        int wrc = rf_metrics_write_file(text, o->metrics_file);
        if (wrc < 0 && wrc != fs->last_rc)
            cli_error("warning: cannot write %s: %s; watching on, retrying at each reading "
                      "(ramforge_watch_metrics_file_errors_total)",
                      o->metrics_file, rf_strerror(wrc));
        else if (wrc == 0 && fs->last_rc < 0)
            cli_error("%s written again after %" PRIu64 " failed write%s", o->metrics_file,
                      fs->outage_errors, fs->outage_errors == 1 ? "" : "s");
        fs->last_rc = wrc;
        fs->outage_errors = wrc < 0 ? fs->outage_errors + 1 : 0;
        if (wrc < 0 && o->listen) { /* the endpoint's text counts this failure at once */
            r->metrics_file_errors = fs->errors + 1;
            free(text);
            text = NULL;
            rc = watch_metrics_text(r, procs, n, &text);
        }
        if (wrc < 0)
            fs->errors++;
    }
    if (rc < 0) {
        cli_error("cannot render metrics: %s", rf_strerror(rc));
        return rc;
    }
    if (o->listen)
        metrics_listen_publish(text);
    else
        free(text);
    return 0;
}

static int watch_loop(const struct watch_options *o)
{
    struct watch_proc **procs = NULL;
    size_t n = 0;
    int status = 0;
    struct file_state fs = {0, 0, 0};

    for (size_t i = 0; i < o->n_pids; i++) {
        if (kill(o->pids[i], 0) < 0 && errno == ESRCH) {
            cli_error("no process %d", o->pids[i]);
            status = RF_EXIT_FAILURE;
            goto out;
        }
        if (!add_proc(&procs, &n, o->pids[i]))
            goto oom;
    }
    for (uint64_t reading = 1; !g_stop; reading++) {
        struct watch_reading r = {.time_s = clock_s(CLOCK_REALTIME),
                                  .now_s = clock_s(CLOCK_MONOTONIC),
                                  .index = reading,
                                  .all = o->all};
        drop_gone(procs, &n);
        if (o->all || o->cgroup) {
            int *pids;
            size_t np;
            int rc = o->all ? watch_find_all(&pids, &np, &r.unreadable)
                            : watch_find_cgroup(o->cgroup, &pids, &np, &r.unreadable);
            if (rc < 0) {
                cli_error("cannot list %s: %s", o->all ? "/proc" : o->cgroup, rf_strerror(rc));
                status = RF_EXIT_FAILURE;
                goto out;
            }
            for (size_t i = 0; i < np; i++)
                if (pids[i] != (int)getpid() && !add_proc(&procs, &n, pids[i])) {
                    free(pids);
                    goto oom;
                }
            free(pids);
        } else if (n == 0) {
            break; /* every process named has gone */
        }
        for (size_t i = 0; i < n; i++) {
            watch_proc_read(procs[i], r.now_s);
            watch_release_maybe(procs[i], o, r.now_s);
        }
        if (o->budget)
            watch_budget_run(procs, n, o, r.now_s, &r.budget);
        if (o->json) {
            for (size_t i = 0; i < n; i++)
                if (watch_json_line(stdout, &r, procs[i]) < 0)
                    goto oom;
            if (o->all && watch_json_all(stdout, &r, n) < 0)
                goto oom;
        } else {
            watch_view(stdout, &r, procs, n, o->raw, o->iterations != 1 && isatty(STDOUT_FILENO));
        }
        if (cli_flush_stdout() < 0 ||
            ((o->metrics_file || o->listen) && publish(o, &r, procs, n, &fs) < 0)) {
            status = RF_EXIT_FAILURE;
            goto out;
        }
        if (o->iterations && reading >= (uint64_t)o->iterations)
            break;
        struct timespec ts = {(time_t)o->interval_s,
                              (long)((o->interval_s - (double)(time_t)o->interval_s) * 1e9)};
        while (!g_stop && nanosleep(&ts, &ts) < 0 && errno == EINTR)
            ;
    }
    goto out;
oom:
    cli_error("out of memory");
    status = RF_EXIT_FAILURE;
out:
    for (size_t i = 0; i < n; i++) {
        watch_proc_clear_models(procs[i]);
        free(procs[i]->budget);
        free(procs[i]);
    }
    free(procs);
    watch_model_cache_free();
    return status;
}

int cmd_watch(int argc, char **argv)
{
    struct watch_options o;
    struct sigaction sa;
    int status;

    memset(&o, 0, sizeof(o));
    status = parse_options(argc, argv, &o);
    if (status != 0) {
        free(o.pids);
        free(o.keep);
        return status < 0 ? 0 : status;
    }
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESETHAND; /* a second signal ends a watch blocked on a full stdout */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    int rc = o.listen ? metrics_listen_start("--listen", o.listen, false, NULL, NULL) : 0;
    if (rc < 0) {
        free(o.pids);
        free(o.keep);
        return rc == -EINVAL ? RF_EXIT_USAGE : RF_EXIT_FAILURE;
    }
    status = watch_loop(&o);
    if (o.listen)
        metrics_listen_stop();
    free(o.pids);
    free(o.keep);
    return status;
}
