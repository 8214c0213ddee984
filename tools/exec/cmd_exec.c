/*
 * ramforge exec: runs an unmodified llama.cpp program with ramforge's
 * preload (libramforge-preload.so, and the engine it loads,
 * libramforge-exec.so; docs/EXEC.md). This command only parses the
 * options, checks PROGRAM (exec_check.c), puts the options in the
 * environment, where the preload of PROGRAM and of every child it starts
 * reads them, and replaces itself with PROGRAM; with --memory-limit or
 * --metrics-listen it runs PROGRAM as its child instead and stays
 * (exec_parent.c).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cli.h"
#include "common/metrics_listen.h"
#include "common/omp_env.h"
#include "common/session_options.h"
#include "exec.h"
#include "exec_parent.h"
#include "ramforge/core/admission.h"
#include "ramforge/core/policy.h"
#include "run/run.h"

#define PRELOAD_NAME "libramforge-preload.so"
#define ENGINE_NAME "libramforge-exec.so"
#ifndef RAMFORGE_EXEC_LIBDIR_REL
#define RAMFORGE_EXEC_LIBDIR_REL "../lib" /* the installed libdir, relative to the bindir */
#endif

/* What exec's own options asked for. */
struct exec_options {
    struct session_options sess;
    enum rf_admission_mode admission;
    long long idle_seconds;    /* 0: no idle boundary */
    long long history;         /* 0: the engine's default */
    long long budget_quiet_ms; /* 0: the engine's default (1000) */
    const char *metrics_path;
    const char *listen;      /* --metrics-listen [ADDR:]PORT */
    bool keep_cache_ram;     /* --keep-cache-ram: llama-server's --cache-ram not sized */
    bool has_cache_ram;      /* PROGRAM is llama-server with a prompt-cache bound: */
    long long cache_ram_mib; /* its --cache-ram, MiB */
    /* PROGRAM's KV cache types (-ctk, -ctv), if it said */
    struct rf_operation_request kv;
};

enum {
    EXEC_OPT_ADMISSION = SESSION_OPT_END,
    EXEC_OPT_IDLE,
    EXEC_OPT_HISTORY,
    EXEC_OPT_METRICS,
    EXEC_OPT_LISTEN,
    EXEC_OPT_KEEP_CACHE_RAM,
    EXEC_OPT_BUDGET_QUIET,
};

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: %s exec [OPTIONS] -- PROGRAM [ARGS...]\n"
            "\n"
            "Run PROGRAM, an unmodified llama.cpp program linked to libllama as a shared\n"
            "library (llama-server, llama-cli, examples/simple...), with ramforge's preload:\n"
            "every model it loads with mmap gets a session (the ledger, admission, the\n"
            "policy's releases, staging, streaming), each llama_decode/llama_encode holds\n"
            "the execution lease until its context synchronizes, and admission decides\n"
            "before each load from the GGUF header (refused: the load returns NULL, one\n"
            "'ramforge:' line on stderr as run words it, once though llama-server asks\n"
            "twice, the report written; a file that is not GGUF: one line saying so).\n"
            "The options travel in the environment: the children PROGRAM starts are\n"
            "managed the same way.\n"
            "\n"
            "An operation is the submissions between two boundaries: it ends after\n"
            "--idle-seconds without one (the idle boundary, also with contexts alive),\n"
            "when the last context is freed, when the model is freed, or at exit.\n"
            "\n"
            "Options (as 'ramforge run', for every model PROGRAM loads):\n"
            "      --residency-policy P      observe (default); off, conservative, memory-bound,\n"
            "                                reuse-aware, active, streaming (the read-ahead\n"
            "                                window in PROGRAM's contexts, their decodes of\n"
            "                                one model one at a time while it is installed;\n"
            "                                a MoE model's routed experts in an LRU expert\n"
            "                                cache; OMP_WAIT_POLICY=PASSIVE GOMP_SPINCOUNT=300\n"
            "                                unless the policy is set)\n"
            "      --memory-target SIZE      each model's target (memory-bound, active)\n"
            "      --safety-reserve SIZE     taken off the target (default 0)\n"
            "      --release-mode MODE       how the policy releases: dontneed (default),\n"
            "                                pageout\n"
            "      --admission MODE          warn (default: refuse a load over a hard\n"
            "                                limit), enforce, off\n"
            "  -c, --ctx-size N              the context admission before the load counts\n"
            "                                (default: llama-server's or llama-cli's own -c;\n"
            "                                else unknown: the smallest counted, and the\n"
            "                                context decided when PROGRAM creates it)\n"
            "      --idle-seconds N          after N seconds without a decode and none in\n"
            "                                flight, run the idle boundary (the policy's\n"
            "                                release), contexts alive or not (default 0:\n"
            "                                never); a decode arriving during the release\n"
            "                                waits for its madvise pass (docs/EXEC.md)\n"
            "      --staging-budget SIZE     before the first decode after an idle release,\n"
            "                                prefetch at most SIZE bytes of the weights the\n"
            "                                graph reads (MADV_WILLNEED)\n"
            "      --history N               operations the session report keeps,\n"
            "                                1..1000000 (default 64)\n"
            "      --budget-quiet-ms N       a watch --budget release request is taken\n"
            "                                after N ms without a submission and none in\n"
            "                                flight (default 1000; docs/BUDGET.md)\n"
            "      --residency-report-json PATH\n"
            "                                the session report, rewritten atomically at\n"
            "                                each boundary and at exit; %%p in PATH is the\n"
            "                                process id (a child's own file); a second model\n"
            "                                loaded beside the first writes PATH.2, ...\n"
            "      --metrics-file PATH       Prometheus text for node_exporter's textfile\n"
            "                                collector, rewritten with the report; labels\n"
            "                                pid, model and path (as watch's)\n"
            "      --metrics-listen [ADDR:]PORT\n"
            "                                serve GET /metrics on ADDR:PORT (default address\n"
            "                                127.0.0.1): the figures above and the live ones\n"
            "                                (each process's VmRSS and model mapping Rss, the\n"
            "                                memory cgroup), read at each scrape\n"
            "      --keep-cache-ram          llama-server without --cache-ram under a limit:\n"
            "                                keep its default (8192 MiB) instead of the\n"
            "                                room under the limit after the model, its\n"
            "                                context and a margin of an eighth of the\n"
            "                                limit (the default, said in one line; a\n"
            "                                --cache-ram of yours is kept, warned when it\n"
            "                                cannot fit), and let its prompt cache grow\n"
            "                                while an operation is over the hard limit\n"
            "                                (by default its saves are then skipped)\n"
            "      --memory-limit SIZE       run PROGRAM in a fresh child memory cgroup with\n"
            "                                that hard limit (as run's; root or a delegated\n"
            "                                cgroup); removed at exit\n"
            "  -v, --verbose                 a line per managed model (and llama.cpp's\n"
            "                                memory-fit probe, a load that allocates\n"
            "                                nothing) and per idle boundary: what its release\n"
            "                                requested, what the kernel accepted (madvise),\n"
            "                                the mapping's measured change; the library's\n"
            "                                warnings\n"
            "  -h, --help                    show this help\n"
            "\n"
            "With --metrics-listen or --memory-limit, exec stays as PROGRAM's parent: it\n"
            "passes SIGINT, SIGTERM and SIGHUP on (not a terminal's Ctrl-C, which PROGRAM\n"
            "gets itself) and exits with PROGRAM's status. PROGRAM dies with it, even\n"
            "with a parent killed by SIGKILL; what PROGRAM leaves in its cgroup gets\n"
            "SIGTERM, then SIGKILL 5 s later.\n"
            "\n"
            "Refused, in one line: a PROGRAM that links llama.cpp statically (use 'ramforge\n"
            "watch'), a statically linked one, one whose libllama is not the build ramforge\n"
            "was made against. A PROGRAM without libllama runs, and the preload does\n"
            "nothing in it. docs/guide/exec.md has the rest.\n",
            RF_PROGRAM);
}

static int own_option(int c, const char *arg, void *ud)
{
    struct exec_options *o = ud;
    switch (c) {
    case EXEC_OPT_ADMISSION:
        if (rf_admission_mode_parse(arg, &o->admission) < 0) {
            cli_usage_error("invalid --admission '%s': expected enforce, warn or off", arg);
            return RF_EXIT_USAGE;
        }
        return 0;
    case EXEC_OPT_IDLE:
        return cli_parse_int("--idle-seconds", arg, 0, 86400 * 365, &o->idle_seconds)
                   ? 0
                   : RF_EXIT_USAGE;
    case EXEC_OPT_HISTORY:
        return cli_parse_int("--history", arg, 1, 1000000, &o->history) ? 0 : RF_EXIT_USAGE;
    case EXEC_OPT_BUDGET_QUIET:
        return cli_parse_int("--budget-quiet-ms", arg, 1, 86400000, &o->budget_quiet_ms)
                   ? 0
                   : RF_EXIT_USAGE;
    case EXEC_OPT_METRICS:
        o->metrics_path = arg;
        return 0;
    case EXEC_OPT_KEEP_CACHE_RAM:
        o->keep_cache_ram = true;
        return 0;
    case EXEC_OPT_LISTEN: {
        struct sockaddr_in addr;
        o->listen = arg;
        return metrics_listen_parse("--metrics-listen", arg, true, &addr) < 0 ? RF_EXIT_USAGE : 0;
    }
    default:
        return -1;
    }
}

/* Sets name to the decimal v, or removes it (has false): an outer exec's value never leaks. */
static int set_u64(const char *name, bool has, uint64_t v)
{
    char text[32];
    snprintf(text, sizeof(text), "%" PRIu64, v);
    return has ? setenv(name, text, 1) : unsetenv(name);
}

static int set_str(const char *name, const char *v)
{
    return v ? setenv(name, v, 1) : unsetenv(name);
}

/* The preload's environment: the two libraries and the options. */
static bool set_environment(const struct exec_options *o, const char *preload, const char *engine)
{
    const struct session_options *s = &o->sess;
    const char *old = getenv("LD_PRELOAD");
    char *ld = NULL;
    if (asprintf(&ld, "%s%s%s", preload, old && old[0] ? ":" : "", old ? old : "") < 0) {
        cli_error("out of memory");
        return false;
    }
    int rc = setenv("LD_PRELOAD", ld, 1);
    free(ld);
    rc |= setenv("RAMFORGE_EXEC_ENGINE", engine, 1);
    rc |= setenv("RAMFORGE_EXEC_POLICY", rf_policy_name(s->policy), 1);
    rc |= set_u64("RAMFORGE_EXEC_TARGET_BYTES", s->has_target, s->target_bytes);
    rc |= set_u64("RAMFORGE_EXEC_RESERVE_BYTES", s->has_reserve, s->reserve_bytes);
    rc |= set_str("RAMFORGE_EXEC_RELEASE_MODE",
                  s->release_mode == RF_RELEASE_PAGEOUT ? "pageout" : "dontneed");
    rc |= set_str("RAMFORGE_EXEC_ADMISSION", rf_admission_mode_name(o->admission));
    rc |= set_u64("RAMFORGE_EXEC_STAGING_BYTES", s->has_staging, s->staging_budget);
    rc |= set_u64("RAMFORGE_EXEC_IDLE_SECONDS", o->idle_seconds > 0, (uint64_t)o->idle_seconds);
    rc |= set_u64("RAMFORGE_EXEC_CTX_SIZE", s->n_ctx > 0, (uint64_t)s->n_ctx);
    rc |= set_u64("RAMFORGE_EXEC_CACHE_TYPE_K", o->kv.has_cache_types, o->kv.type_k);
    rc |= set_u64("RAMFORGE_EXEC_CACHE_TYPE_V", o->kv.has_cache_types, o->kv.type_v);
    rc |= set_u64("RAMFORGE_EXEC_HISTORY", o->history > 0, (uint64_t)o->history);
    rc |= set_u64("RAMFORGE_EXEC_CACHE_RAM_MIB", o->has_cache_ram, (uint64_t)o->cache_ram_mib);
    rc |= set_str("RAMFORGE_EXEC_CACHE_STOP", o->has_cache_ram && !o->keep_cache_ram ? "1" : NULL);
    rc |= set_u64("RAMFORGE_EXEC_BUDGET_QUIET_MS", o->budget_quiet_ms > 0,
                  (uint64_t)o->budget_quiet_ms);
    rc |= set_str("RAMFORGE_EXEC_REPORT_JSON", s->json_path);
    rc |= set_str("RAMFORGE_EXEC_METRICS_FILE", o->metrics_path);
    rc |= set_str("RAMFORGE_EXEC_VERBOSE", s->verbose ? "1" : NULL);
    rc |= unsetenv("RAMFORGE_EXEC_METRICS_SPOOL"); /* set by exec's parent, for its child */
    /* streaming: libgomp's threads sleep at a barrier after a short spin instead of spinning
       while a decode waits for a read (run's rule, docs/STREAMING.md), unless already said */
    if (s->policy == RF_POLICY_STREAMING && cli_streaming_omp_env() < 0)
        rc = -1;
    if (rc) {
        cli_error("exec: cannot set the environment: %s", strerror(errno));
        return false;
    }
    return true;
}

/* dir/name into out when it is a readable file. */
static bool found_in(const char *dir, const char *name, char out[PATH_MAX])
{
    return snprintf(out, PATH_MAX, "%s/%s", dir, name) < PATH_MAX && access(out, R_OK) == 0;
}

/* The preload and the engine: beside this program (the build tree), else the installed libdir. */
static bool find_libraries(char preload[PATH_MAX], char engine[PATH_MAX])
{
    char self[PATH_MAX], dir[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0) {
        cli_error("exec: cannot find this program's own path: %s", strerror(errno));
        return false;
    }
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    *slash = '\0';
    if (found_in(self, PRELOAD_NAME, preload) && found_in(self, ENGINE_NAME, engine))
        return true;
    snprintf(dir, sizeof(dir), "%s/%s", self, RAMFORGE_EXEC_LIBDIR_REL);
    if (found_in(dir, PRELOAD_NAME, preload) && found_in(dir, ENGINE_NAME, engine))
        return true;
    cli_error("exec: cannot find %s and %s (looked in %s and %s)", PRELOAD_NAME, ENGINE_NAME, self,
              dir);
    return false;
}

/* A report or metrics path can be written (%p: this pid stands for the child's). */
static bool path_usable(const char *path)
{
    return !path || run_report_path_usable(path, "");
}

int cmd_exec(int argc, char **argv)
{
    static const struct option longopts[] = {
        SESSION_LONGOPT_POLICY,
        SESSION_LONGOPT_TARGET,
        SESSION_LONGOPT_RESERVE,
        SESSION_LONGOPT_RELEASE_MODE,
        {"admission", required_argument, NULL, EXEC_OPT_ADMISSION},
        SESSION_LONGOPT_CTX_SIZE,
        {"idle-seconds", required_argument, NULL, EXEC_OPT_IDLE},
        SESSION_LONGOPT_STAGING,
        {"history", required_argument, NULL, EXEC_OPT_HISTORY},
        {"budget-quiet-ms", required_argument, NULL, EXEC_OPT_BUDGET_QUIET},
        SESSION_LONGOPT_REPORT_JSON,
        {"metrics-file", required_argument, NULL, EXEC_OPT_METRICS},
        {"metrics-listen", required_argument, NULL, EXEC_OPT_LISTEN},
        {"keep-cache-ram", no_argument, NULL, EXEC_OPT_KEEP_CACHE_RAM},
        SESSION_LONGOPT_MEMORY_LIMIT,
        SESSION_LONGOPT_VERBOSE,
        SESSION_LONGOPT_HELP,
        {NULL, 0, NULL, 0},
    };
    struct exec_options o = {.sess = {.policy = RF_POLICY_OBSERVE}, .admission = RF_ADMISSION_WARN};
    const struct session_command cmd = {longopts,   "+:c:vh", usage,
                                        own_option, &o,       .no_model = true};
    char program[PATH_MAX], preload[PATH_MAX], engine[PATH_MAX];

    int end = 1; /* exec's own arguments end at "--" */
    while (end < argc && strcmp(argv[end], "--") != 0)
        end++;
    int rc = session_options_parse(&cmd, end, argv, &o.sess);
    if (rc >= 0)
        return rc;
    if (end >= argc - 1) {
        cli_usage_error("missing -- PROGRAM [ARGS...]");
        return RF_EXIT_USAGE;
    }
    if (rf_policy_requires_target(o.sess.policy) && !o.sess.has_target) {
        cli_usage_error("--residency-policy %s requires --memory-target",
                        rf_policy_name(o.sess.policy));
        return RF_EXIT_USAGE;
    }
    if (o.sess.has_target && o.sess.has_reserve && o.sess.reserve_bytes >= o.sess.target_bytes) {
        cli_usage_error("--safety-reserve must be less than --memory-target");
        return RF_EXIT_USAGE;
    }
    session_options_warn_release_mode(&o.sess);
    if (!o.sess.n_ctx) /* llama-server's own -c: admission before the load counts it */
        o.sess.n_ctx = exec_program_ctx_size(argc - end - 1, argv + end + 1);
    exec_program_cache_types(argc - end - 1, argv + end + 1, &o.kv);
    o.has_cache_ram = exec_program_cache_ram(argc - end - 1, argv + end + 1, &o.cache_ram_mib);
    exec_cache_fit(argc - end - 1, argv + end + 1, &o.sess, o.keep_cache_ram, &o.has_cache_ram,
                   &o.cache_ram_mib);
    if (!path_usable(o.sess.json_path) || !path_usable(o.metrics_path))
        return RF_EXIT_FAILURE;
    if (!find_libraries(preload, engine) || !exec_find_program(argv[end + 1], program) ||
        !exec_check_program(program) || !set_environment(&o, preload, engine))
        return RF_EXIT_FAILURE;
    if (o.listen || o.sess.has_memory_limit) {
        struct exec_parent parent = {.listen = o.listen,
                                     .streaming = o.sess.policy == RF_POLICY_STREAMING};
        rc = exec_parent_run(&parent, o.sess.has_memory_limit ? &o.sess.memory_limit : NULL);
        if (rc >= 0)
            return rc; /* the parent; the child runs PROGRAM */
    }
    execv(program, argv + end + 1);
    cli_error("exec: cannot run %s: %s", program, strerror(errno));
    return errno == ENOENT ? 127 : 126;
}
