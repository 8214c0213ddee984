/*
 * ramforge run: greedy generation under the memory ledger and a residency
 * policy. Option parsing, printing and exit codes only: the boundary
 * sequence is the session layer's (ramforge/session.h):
 *   rf_session_load (load, probe, after_load boundary) -> rf_session_admit
 *   -> rf_session_stage -> forge_generate (end_of_session sample) ->
 *   after_session boundary -> optional verify session and after_verify
 *   boundary -> rf_session_operation_end -> the reports.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "ramforge/error.h"
#include "ramforge/forge.h"
#include "ramforge/forge_observer.h"
#include "ramforge/policy.h"
#include "ramforge/residency.h"
#include "ramforge/session.h"
#include "ramforge/timing.h"
#include "ramforge/report.h"
#include "ramforge/sys.h"
#include "run.h"

struct run_options {
    const char *model;
    const char *prompt;
    long long n_predict;
    long long n_threads; /* 0: llama.cpp default */
    long long n_ctx;     /* 0: prompt + n_predict */
    long long seed;
    enum rf_policy_profile policy;
    bool has_target;
    uint64_t target_bytes;
    uint64_t reserve_bytes;
    enum forge_release_mode release_mode;
    bool has_reserve, has_release_mode; /* given on the command line */
    long long page_budget; /* --residency-page-budget, pages */
    bool has_staging;
    uint64_t staging_budget; /* --staging-budget, bytes */
    bool observe_dispatch;
    bool has_dispatch_events, has_dispatch_sample_pages; /* given on the command line */
    long long dispatch_events; /* observer capacity, events */
    long long dispatch_sample_pages; /* pre-dispatch sampling per weight source; 0: off */
    bool human_report;
    const char *json_path;
    bool repack;
    bool mlock;
    bool release_dead_file_pages; /* --dead-file-pages release|keep */
    bool verify;
    bool hold;
    bool verbose;
};

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: %s run -m MODEL [-p PROMPT] [-n N] [OPTIONS]\n"
            "\n"
            "Load MODEL through llama.cpp (mmap), generate N tokens greedily (the decode\n"
            "loop of llama.cpp's examples/simple), print the generated text on stdout, and\n"
            "account for the model's memory; with a mutating policy, release cold weight\n"
            "pages at safe boundaries (after load, after the session is dropped).\n"
            "\n"
            "Options:\n"
            "  -m, --model PATH              GGUF model (required)\n"
            "  -p, --prompt TEXT             prompt (default \"Hello my name is\")\n"
            "  -n, --n-predict N             tokens to generate, 1..1000000 (default 32)\n"
            "  -t, --threads N               threads, 1..1024 (default: llama.cpp's)\n"
            "  -c, --ctx-size N              context size in tokens, 1..16777216 (default:\n"
            "                                prompt + N)\n"
            "  -s, --seed N                  recorded in the report; greedy decoding does not\n"
            "                                use it (default 0)\n"
            "      --residency-policy P      off           no inventory, ledger or plan\n"
            "                                observe       inventory, ledger, reconciliation and\n"
            "                                              (with a target) a plan; changes\n"
            "                                              nothing (default)\n"
            "                                conservative  release only tensors that share no\n"
            "                                              page, and the file pages of repacked\n"
            "                                              weights (shared pages protected);\n"
            "                                              without a target only the latter\n"
            "                                memory-bound  repacked weights' file pages, then\n"
            "                                              the largest tensors, until the\n"
            "                                              mapping fits the soft target\n"
            "                                reuse-aware   as memory-bound, ordered by the access\n"
            "                                              profile of a complete\n"
            "                                              --observe-dispatch trace; without\n"
            "                                              one the plan says profile_used=false\n"
            "                                active        alias of memory-bound\n"
            "      --memory-target SIZE      memory target (required by memory-bound and\n"
            "                                active). The plan brings the model mapping's\n"
            "                                resident bytes under target - reserve; admission\n"
            "                                compares the run's projected memory (RSS + KV\n"
            "                                cache) with it and warns. SIZE is bytes or 512MiB,\n"
            "                                2G, 1.5GiB, 300MB (IEC K/M/G/T = 1024, SI\n"
            "                                KB/MB/GB/TB = 1000)\n"
            "      --safety-reserve SIZE     taken off the target: soft target = target -\n"
            "                                reserve (default 0)\n"
            "      --release-mode MODE       dontneed (MADV_DONTNEED: drops the mapping's RSS,\n"
            "                                the page cache stays) or pageout (MADV_PAGEOUT:\n"
            "                                reclaims the pages); default dontneed\n"
            "      --dead-file-pages WHAT    release (default) or keep: with a mutating policy,\n"
            "                                release right after load, whatever the target, the\n"
            "                                file pages of weights the graph reads from a\n"
            "                                repacked anonymous copy (never read again)\n"
            "      --verify-session          after the release, run the prompt again and\n"
            "                                compare the tokens (pages re-fault from the file)\n"
            "      --residency-page-budget N at the end of the run, sample at most N pages of\n"
            "                                the model mapping with mincore (the plan's\n"
            "                                selection first); pages past the budget are\n"
            "                                unknown, never nonresident (default 1048576;\n"
            "                                0: no sampling)\n"
            "      --staging-budget SIZE     before the session, prefetch (MADV_WILLNEED, bounded\n"
            "                                chunks) the page ranges of the weights the graph\n"
            "                                reads, in file order, deduplicated, at most SIZE\n"
            "                                bytes; reports selected, accepted and the observed\n"
            "                                page-cache change (llama.cpp's load already\n"
            "                                prefetches: after a plain load it changes little)\n"
            "      --observe-dispatch        record one event per compute node of the session's\n"
            "                                graph before its kernel runs (cb_eval ask phase:\n"
            "                                no data read, no barrier added); attributes the\n"
            "                                weights it names; gives reuse-aware its access\n"
            "                                profile. Dispatch-start evidence only\n"
            "      --dispatch-events N       observer buffer, events (about 0.8 KiB each;\n"
            "                                default 32768); more are counted as dropped\n"
            "      --dispatch-sample-pages N with --observe-dispatch, sample with mincore up to\n"
            "                                N pages (1..4096) of each weight source before\n"
            "                                dispatch (point-in-time; default 0: off)\n"
            "      --residency-report        print the human-readable report on stderr\n"
            "      --residency-report-json PATH\n"
            "                                write the JSON operation report (schema_version 1)\n"
            "                                to PATH (temporary file + rename: never partial)\n"
            "      --no-repack               load without llama.cpp's extra buffer types\n"
            "                                (no CPU_REPACK copies of Q4_0 weights)\n"
            "      --mlock                   lock the model mapping (release is then refused\n"
            "                                by the kernel and reported as ReleaseFailed)\n"
            "      --hold                    after the report, keep the model loaded until\n"
            "                                standard input closes (compare with\n"
            "                                /proc/PID/smaps, fincore, vmtouch)\n"
            "  -v, --verbose                 show llama.cpp's log\n"
            "  -h, --help                    show this help\n"
            "\n"
            "Figures carry their provenance: exact_measured (read from /proc or the cgroup),\n"
            "native_logical (sizes from the GGUF table or llama.cpp: not residency),\n"
            "requested and native_accepted (bytes submitted to and accepted by madvise: not\n"
            "reclamation), estimated, or unknown (null, with the reason). They are never\n"
            "added into one total. Admission: a cgroup hard limit the run would exceed\n"
            "refuses the run (exit 1); exceeding only the soft target is a warning.\n"
            "README.md, 'Reading the report', explains every ledger category.\n",
            RF_PROGRAM);
}

enum {
    OPT_POLICY = 256,
    OPT_TARGET,
    OPT_RESERVE,
    OPT_RELEASE_MODE,
    OPT_VERIFY,
    OPT_REPORT,
    OPT_REPORT_JSON,
    OPT_NO_REPACK,
    OPT_MLOCK,
    OPT_HOLD,
    OPT_PAGE_BUDGET,
    OPT_OBSERVE_DISPATCH,
    OPT_STAGING_BUDGET,
    OPT_DISPATCH_EVENTS,
    OPT_DISPATCH_SAMPLE_PAGES,
    OPT_DEAD_FILE_PAGES,
};

static bool parse_size_option(const char *opt, const char *arg, bool allow_zero, uint64_t *out)
{
    if (allow_zero && strcmp(arg, "0") == 0) {
        *out = 0;
        return true;
    }
    int rc = rf_parse_size(arg, out);
    if (rc == -EOVERFLOW)
        cli_usage_error("run ", "invalid size for %s '%s': too large", opt, arg);
    else if (rc < 0)
        cli_usage_error("run ", "invalid size for %s '%s': expected a positive size such as "
                        "512MiB, 2G or 300000000", opt, arg);
    return rc == 0;
}

/* Returns -1 to continue, or the exit status. */
static int parse_options(int argc, char **argv, struct run_options *o)
{
    static const struct option opts[] = {
        {"model", required_argument, NULL, 'm'},
        {"prompt", required_argument, NULL, 'p'},
        {"n-predict", required_argument, NULL, 'n'},
        {"threads", required_argument, NULL, 't'},
        {"ctx-size", required_argument, NULL, 'c'},
        {"seed", required_argument, NULL, 's'},
        {"residency-policy", required_argument, NULL, OPT_POLICY},
        {"memory-target", required_argument, NULL, OPT_TARGET},
        {"safety-reserve", required_argument, NULL, OPT_RESERVE},
        {"release-mode", required_argument, NULL, OPT_RELEASE_MODE},
        {"verify-session", no_argument, NULL, OPT_VERIFY},
        {"residency-report", no_argument, NULL, OPT_REPORT},
        {"residency-report-json", required_argument, NULL, OPT_REPORT_JSON},
        {"no-repack", no_argument, NULL, OPT_NO_REPACK},
        {"mlock", no_argument, NULL, OPT_MLOCK},
        {"hold", no_argument, NULL, OPT_HOLD},
        {"residency-page-budget", required_argument, NULL, OPT_PAGE_BUDGET},
        {"observe-dispatch", no_argument, NULL, OPT_OBSERVE_DISPATCH},
        {"staging-budget", required_argument, NULL, OPT_STAGING_BUDGET},
        {"dispatch-events", required_argument, NULL, OPT_DISPATCH_EVENTS},
        {"dispatch-sample-pages", required_argument, NULL, OPT_DISPATCH_SAMPLE_PAGES},
        {"dead-file-pages", required_argument, NULL, OPT_DEAD_FILE_PAGES},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;

    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":m:p:n:t:c:s:vh", opts, NULL)) != -1) {
        switch (c) {
        case 'm':
            o->model = optarg;
            break;
        case 'p':
            o->prompt = optarg;
            break;
        case 'n':
            if (!cli_parse_int("token count (-n)", optarg, 1, 1000000, &o->n_predict))
                return RF_EXIT_USAGE;
            break;
        case 't':
            if (!cli_parse_int("thread count (-t)", optarg, 1, 1024, &o->n_threads))
                return RF_EXIT_USAGE;
            break;
        case 'c':
            if (!cli_parse_int("context size (-c)", optarg, 1, 16777216, &o->n_ctx))
                return RF_EXIT_USAGE;
            break;
        case 's':
            if (!cli_parse_int("seed (-s)", optarg, 0, UINT32_MAX, &o->seed))
                return RF_EXIT_USAGE;
            break;
        case OPT_POLICY:
            if (rf_policy_parse(optarg, &o->policy) < 0) {
                cli_usage_error("run ",
                                "unknown residency policy '%s' (expected off, observe, "
                                "conservative, memory-bound, reuse-aware or active)",
                                optarg);
                return RF_EXIT_USAGE;
            }
            break;
        case OPT_TARGET:
            if (!parse_size_option("--memory-target", optarg, false, &o->target_bytes))
                return RF_EXIT_USAGE;
            o->has_target = true;
            break;
        case OPT_RESERVE:
            if (!parse_size_option("--safety-reserve", optarg, true, &o->reserve_bytes))
                return RF_EXIT_USAGE;
            o->has_reserve = true;
            break;
        case OPT_RELEASE_MODE:
            o->has_release_mode = true;
            if (!strcmp(optarg, "dontneed")) {
                o->release_mode = FORGE_RELEASE_DONTNEED;
            } else if (!strcmp(optarg, "pageout")) {
                o->release_mode = FORGE_RELEASE_PAGEOUT;
            } else {
                cli_usage_error("run ", "unknown release mode '%s' (expected dontneed or pageout)",
                                optarg);
                return RF_EXIT_USAGE;
            }
            break;
        case OPT_VERIFY:
            o->verify = true;
            break;
        case OPT_DEAD_FILE_PAGES:
            if (!strcmp(optarg, "release") || !strcmp(optarg, "keep")) {
                o->release_dead_file_pages = !strcmp(optarg, "release");
            } else {
                cli_usage_error("run ", "unknown --dead-file-pages '%s' (expected release or keep)",
                                optarg);
                return RF_EXIT_USAGE;
            }
            break;
        case OPT_REPORT:
            o->human_report = true;
            break;
        case OPT_REPORT_JSON:
            o->json_path = optarg;
            break;
        case OPT_NO_REPACK:
            o->repack = false;
            break;
        case OPT_MLOCK:
            o->mlock = true;
            break;
        case OPT_HOLD:
            o->hold = true;
            break;
        case OPT_STAGING_BUDGET:
            if (!parse_size_option("--staging-budget", optarg, false, &o->staging_budget))
                return RF_EXIT_USAGE;
            o->has_staging = true;
            break;
        case OPT_OBSERVE_DISPATCH:
            o->observe_dispatch = true;
            break;
        case OPT_DISPATCH_EVENTS:
            if (!cli_parse_int("event count (--dispatch-events)", optarg, 1, 16777216,
                               &o->dispatch_events))
                return RF_EXIT_USAGE;
            o->has_dispatch_events = true;
            break;
        case OPT_DISPATCH_SAMPLE_PAGES:
            if (!cli_parse_int("pages per source (--dispatch-sample-pages)", optarg, 0, 4096,
                               &o->dispatch_sample_pages))
                return RF_EXIT_USAGE;
            o->has_dispatch_sample_pages = true;
            break;
        case OPT_PAGE_BUDGET:
            if (!cli_parse_int("page budget (--residency-page-budget)", optarg, 0, INT64_MAX,
                               &o->page_budget))
                return RF_EXIT_USAGE;
            break;
        case 'v':
            o->verbose = true;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            return cli_bad_option("run ", c, argv);
        }
    }
    if (optind < argc) {
        cli_usage_error("run ", "unexpected argument '%s'", argv[optind]);
        return RF_EXIT_USAGE;
    }
    if (!o->model) {
        cli_usage_error("run ", "missing -m/--model PATH");
        return RF_EXIT_USAGE;
    }
    if (!*o->prompt) {
        cli_usage_error("run ", "the prompt is empty");
        return RF_EXIT_USAGE;
    }
    if (rf_policy_requires_target(o->policy) && !o->has_target) {
        cli_usage_error("run ", "--residency-policy %s needs --memory-target SIZE",
                        rf_policy_name(o->policy));
        return RF_EXIT_USAGE;
    }
    if (o->has_target && o->reserve_bytes >= o->target_bytes) {
        cli_usage_error("run ",
                        "--safety-reserve (%" PRIu64 " bytes) must be below --memory-target "
                        "(%" PRIu64 " bytes)",
                        o->reserve_bytes, o->target_bytes);
        return RF_EXIT_USAGE;
    }
    /* Options the chosen policy does not use: say so rather than ignore them. */
    if (o->policy == RF_POLICY_OFF && (o->has_target || o->has_reserve))
        cli_error("warning: --memory-target and --safety-reserve have no effect with "
                  "--residency-policy off");
    else if (o->has_reserve && !o->has_target)
        cli_error("warning: --safety-reserve has no effect without --memory-target");
    if (!o->observe_dispatch && (o->has_dispatch_events || o->has_dispatch_sample_pages))
        cli_error("warning: --dispatch-events and --dispatch-sample-pages have no effect "
                  "without --observe-dispatch");
    if (o->has_staging && o->policy == RF_POLICY_OFF)
        cli_error("warning: --staging-budget has no effect with --residency-policy off (staging "
                  "plans over the inventory)");
    if (o->has_release_mode && !rf_policy_mutates(o->policy))
        cli_error("warning: --release-mode has no effect with --residency-policy %s (it does "
                  "not release)",
                  rf_policy_name(o->policy));
    if (o->policy == RF_POLICY_REUSE_AWARE && !o->has_target)
        cli_error("warning: --residency-policy reuse-aware without --memory-target selects "
                  "nothing");
    return -1;
}

/*
 * Fails early, before inference, when the report cannot be written: the
 * path names something that is not a regular file (a directory, a device,
 * a FIFO, a symlink: the report is renamed into place and would replace
 * it), the model itself, or its directory is not writable.
 */
static bool report_path_usable(const char *path, const char *model)
{
    struct stat st, ms;
    size_t len = strlen(path);

    if (len == 0 || path[len - 1] == '/') {
        cli_error("cannot write %s: not a file name", path);
        return false;
    }
    if (lstat(path, &st) == 0) {
        if (!S_ISREG(st.st_mode)) {
            cli_error("cannot write %s: exists and is not a regular file", path);
            return false;
        }
        if (stat(model, &ms) == 0 && ms.st_dev == st.st_dev && ms.st_ino == st.st_ino) {
            cli_error("cannot write %s: it is the model file", path);
            return false;
        }
    } else if (errno != ENOENT) {
        cli_error("cannot write %s: %s", path, strerror(errno));
        return false;
    }
    char *copy = strdup(path);
    if (!copy) {
        cli_error("out of memory");
        return false;
    }
    const char *dir = dirname(copy);
    struct stat ds;
    bool ok = stat(dir, &ds) == 0 && S_ISDIR(ds.st_mode) && access(dir, W_OK | X_OK) == 0;
    if (!ok)
        cli_error("cannot write %s: %s", path, errno ? strerror(errno) : "not a directory");
    free(copy);
    return ok;
}

/* forge_generate's hook: the session's context is alive, its buffers allocated. */
static void end_of_session(void *user_data)
{
    rf_session_boundary(user_data, RF_BOUNDARY_END_OF_SESSION);
}

/* The session parameters of the options. */
static struct rf_session_params session_params(const struct run_options *o, uint64_t t_entry)
{
    struct rf_session_params p = rf_session_default_params();
    p.policy = o->policy;
    p.has_target = o->has_target;
    p.target_bytes = o->target_bytes;
    p.reserve_bytes = o->reserve_bytes;
    p.release_mode = o->release_mode;
    p.release_dead_file_pages = o->release_dead_file_pages;
    p.page_budget_pages = (uint64_t)o->page_budget;
    p.entry_ns = t_entry;
    return p;
}

static int write_reports(struct rf_session *s, const struct run_options *o)
{
    if (o->human_report)
        run_print_report(rf_session_report(s, RF_REPORT_OPERATION));
    if (o->json_path) {
        int rc = rf_session_report_write(s, RF_REPORT_OPERATION, o->json_path);
        if (rc < 0) {
            cli_error("cannot write %s: %s", o->json_path, rf_strerror(rc));
            return rc;
        }
    }
    return 0;
}

/* Warns before the load when the file exceeds the room under an enforced cgroup limit. */
static void warn_before_load(const char *model)
{
    struct rfsys_cgroup_memory pre;
    struct stat mst;
    if (rfsys_read_cgroup_memory(NULL, "self", &pre) == 0 && pre.has_limit &&
        !pre.limit_unlimited && pre.has_current && stat(model, &mst) == 0 &&
        (pre.current_bytes >= pre.limit_bytes ||
         (uint64_t)mst.st_size > pre.limit_bytes - pre.current_bytes))
        cli_error("warning: loading maps and reads all %lld bytes of %s, more than the %" PRIu64
                  " bytes left under the cgroup limit (%s): the load itself may be "
                  "reclaimed or killed",
                  (long long)mst.st_size, model,
                  pre.current_bytes >= pre.limit_bytes ? 0 : pre.limit_bytes - pre.current_bytes,
                  pre.limit_source);
}

/* The measured mapping RSS after release against the soft target, on stderr. */
static void warn_above_target(struct rf_session *s)
{
    const struct rf_report *r = rf_session_report(s, RF_REPORT_OPERATION);
    const struct rf_residency_sample *last = r->n_samples ? &r->samples[r->n_samples - 1] : NULL;
    if (r->policy_mutates && r->plan && r->plan->has_soft_target && last && last->has_mapping &&
        last->mapping_rss_bytes > r->plan->soft_target_bytes)
        cli_error("warning: the measured mapping RSS of %" PRIu64 " bytes is above the soft "
                  "target of %" PRIu64 " bytes: %s",
                  last->mapping_rss_bytes, r->plan->soft_target_bytes, r->plan->reason);
}

int cmd_run(int argc, char **argv)
{
    uint64_t t_entry = rf_now_ns();
    struct run_options o = {
        .prompt = "Hello my name is",
        .n_predict = 32,
        .policy = RF_POLICY_OBSERVE,
        .repack = true,
        .release_dead_file_pages = true,
        .page_budget = (long long)RF_RESIDENCY_DEFAULT_BUDGET_PAGES,
        .dispatch_events = 32768,
    };
    struct forge_model_params mp = forge_model_default_params();
    struct forge_generate_result gen = {0}, verify = {0};
    struct forge_observer *observer = NULL;
    struct rf_session *s = NULL;
    char err[FORGE_ERR_MAX];
    int status = RF_EXIT_FAILURE, rc;

    rc = parse_options(argc, argv, &o);
    if (rc >= 0)
        return rc;
    const bool observing = o.policy != RF_POLICY_OFF;
    if (o.json_path && !report_path_usable(o.json_path, o.model))
        return RF_EXIT_FAILURE;
    if (o.verbose)
        rf_log_set(cli_log_sink, NULL);
    forge_init(o.verbose);
    if (observing)
        warn_before_load(o.model);

    mp.use_extra_bufts = o.repack;
    mp.mlock = o.mlock;
    mp.probe_access = observing;
    mp.n_threads = (int)o.n_threads;
    rc = rf_session_load(o.model, &mp, session_params(&o, t_entry), &s, err);
    if (rc < 0) {
        cli_error("%s", err);
        return RF_EXIT_FAILURE;
    }
    if (observing) {
        struct rf_operation_request req = {.n_ctx = (uint32_t)o.n_ctx,
                                           .n_predict = (uint32_t)o.n_predict};
        struct rf_admission_result adm;
        rc = rf_session_admit(s, &req, &adm);
        if (rc == 0 && adm.outcome == RF_ADMIT_REJECTED) {
            cli_error("admission rejected the run: %s", adm.reason);
            rf_session_operation_end(s, NULL);
            write_reports(s, &o);
            goto out;
        }
        if (rc == 0 && adm.outcome == RF_ADMIT_WARNING)
            cli_error("warning: %s", adm.reason);
        if (o.has_staging && (rc = rf_session_stage(s, o.staging_budget)) < 0) {
            cli_error("%s: cannot plan staging: %s", o.model, rf_strerror(rc));
            goto out;
        }
    }

    struct forge_generate_params gp = {
        .prompt = o.prompt,
        .n_predict = (int32_t)o.n_predict,
        .n_ctx = (uint32_t)o.n_ctx,
        .n_threads = (int32_t)o.n_threads,
        .on_session_end = observing ? end_of_session : NULL,
        .user_data = s,
    };
    if (o.observe_dispatch) {
        rc = forge_observer_create((size_t)o.dispatch_events, &observer);
        if (rc < 0) {
            cli_error("cannot allocate the dispatch observer (%lld events): %s",
                      o.dispatch_events, rf_strerror(rc));
            goto out;
        }
        rc = forge_observer_set_sampling(observer, rf_session_forge_model(s),
                                         (uint32_t)o.dispatch_sample_pages);
        if (rc < 0) {
            cli_error("cannot set up pre-dispatch sampling: %s", rf_strerror(rc));
            goto out;
        }
        gp.observer = observer;
    }
    if (forge_generate(rf_session_forge_model(s), &gp, &gen, err) < 0) {
        cli_error("%s: %s", o.model, err);
        goto out;
    }
    if (observer && (rc = rf_session_dispatch_trace(s, observer)) < 0) {
        cli_error("cannot attribute the dispatch trace: %s", rf_strerror(rc));
        goto out;
    }
    if (observing) {
        rc = rf_session_boundary(s, RF_BOUNDARY_AFTER_SESSION);
        if (rc == 0 && o.verify) {
            gp.observer = NULL; /* the verify session runs without the observer */
            gp.on_session_end = NULL;
            if (forge_generate(rf_session_forge_model(s), &gp, &verify, err) < 0) {
                cli_error("%s: verify session: %s", o.model, err);
                goto out;
            }
            /* The verify session re-faulted pages: its boundary is a safe one too. */
            rc = rf_session_boundary(s, RF_BOUNDARY_AFTER_VERIFY);
        }
        if (rc < 0) {
            cli_error("%s: cannot plan: %s", o.model, rf_strerror(rc));
            goto out;
        }
    }
    struct rf_operation_output out = {
        .prompt_tokens = gen.prompt_tokens, .n_prompt = gen.n_prompt,
        .tokens = gen.tokens, .n_tokens = gen.n_tokens, .text = gen.text,
        .n_ctx = gen.n_ctx, .n_threads = gen.n_threads, .seed = (uint32_t)o.seed,
        .context_init_ns = gen.context_init_ns, .prompt_ns = gen.prompt_ns,
        .ttft_ns = gen.ttft_ns, .decode_ns = gen.decode_ns, .sync_ns = gen.sync_ns,
        .inference_ns = gen.inference_ns, .has_memory_breakdown = gen.has_memory_breakdown,
        .kv_cache_bytes = gen.kv_cache_bytes, .compute_bytes = gen.compute_bytes,
        .verify_tokens = o.verify ? verify.tokens : NULL, .n_verify_tokens = verify.n_tokens,
    };
    rc = rf_session_operation_end(s, &out);
    if (rc < 0) {
        cli_error("%s: cannot end the operation: %s", o.model, rf_strerror(rc));
        goto out;
    }
    warn_above_target(s);

    printf("%s\n", gen.text);
    fflush(stdout);
    if (write_reports(s, &o) < 0)
        goto out;
    if (rf_session_report(s, RF_REPORT_OPERATION)->verified &&
        !rf_session_report(s, RF_REPORT_OPERATION)->verify_tokens_equal) {
        cli_error("the verify session's tokens differ from the first session's");
        goto out;
    }
    if (o.hold) {
        char buf[256];
        fprintf(stderr, "%s: holding pid %ld with the model loaded; close standard input to exit\n",
                RF_PROGRAM, (long)getpid());
        while (fread(buf, 1, sizeof(buf), stdin) > 0)
            ;
    }
    status = 0;
out:
    forge_generate_result_free(&gen);
    forge_generate_result_free(&verify);
    forge_observer_free(observer);
    rf_session_free(s);
    return status;
}
