/*
 * ramforge run: greedy generation under the memory ledger and a residency
 * policy.
 *
 * The run walks the safe boundaries of the specification:
 *   load (+ access probe) -> after_load boundary: inventory, lifetimes,
 *     quiescence observation, sample; a mutating policy releases the file
 *     pages of weights the graph reads from anonymous copies (they cost
 *     nothing to lose)
 *   admission against the cgroup hard limit and the soft target
 *   session: greedy generation on one context, which is then dropped
 *   after_session boundary: quiescence observation, sample, plan; a
 *     mutating policy releases what the plan selected, under the native gate
 *   optional verify session: the same prompt again, tokens compared
 * then the ledger, the reconciliation and the reports.
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
#include "ramforge/admission.h"
#include "ramforge/binding.h"
#include "ramforge/error.h"
#include "ramforge/forge.h"
#include "ramforge/forge_observer.h"
#include "ramforge/forge_pages.h"
#include "ramforge/forge_prefetch.h"
#include "ramforge/staging.h"
#include "ramforge/dispatch.h"
#include "ramforge/residency.h"
#include "ramforge/inventory.h"
#include "ramforge/ledger.h"
#include "ramforge/lifetime.h"
#include "ramforge/measure.h"
#include "ramforge/policy.h"
#include "ramforge/report.h"
#include "ramforge/timing.h"
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
    bool verify;
    bool hold;
    bool verbose;
    bool access_probe; /* --access-probe: classify weights with the graph probe */
    bool sample_smaps; /* --sample-smaps: every sample reads smaps (Rss and Pss) */
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
            "      --access-probe            classify the weights by a one-token decode graph\n"
            "                                (costs about one token's time) instead of by\n"
            "                                where llama.cpp placed them; default for the\n"
            "                                policies that release\n"
            "      --sample-smaps            read smaps (Rss and Pss; walks every page) at every\n"
            "                                sample, not only the ledger's (default: the\n"
            "                                others count resident pages with PAGEMAP_SCAN)\n"
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
    OPT_ACCESS_PROBE,
    OPT_SAMPLE_SMAPS,
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
        {"access-probe", no_argument, NULL, OPT_ACCESS_PROBE},
        {"sample-smaps", no_argument, NULL, OPT_SAMPLE_SMAPS},
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
        case OPT_REPORT:
            o->human_report = true;
            break;
        case OPT_REPORT_JSON:
            o->json_path = optarg;
            break;
        case OPT_NO_REPACK:
            o->repack = false;
            break;
        case OPT_ACCESS_PROBE:
            o->access_probe = true;
            break;
        case OPT_SAMPLE_SMAPS:
            o->sample_smaps = true;
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
    if (o->policy == RF_POLICY_OFF && (o->access_probe || o->sample_smaps))
        cli_error("warning: --access-probe and --sample-smaps have no effect with "
                  "--residency-policy off");
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

/* Everything one run owns; freed in run_state_free. */
struct run_state {
    struct run_options o;
    struct forge_model *m;
    struct forge_model_info info;
    const struct rf_mapping_meta *mappings;
    size_t n_mappings;
    struct rf_inventory inv;
    struct rf_lifetime lt;
    struct rf_binding binding;
    struct rf_plan plans[RF_REPORT_MAX_APPLICATIONS]; /* one per release boundary/round */
    size_t n_plans;
    uint8_t *exclude; /* inventory positions released and not referenced since */
    struct rf_admission_result admission;
    struct rf_ledger ledger;
    struct rf_reconciliation recon;
    struct rf_timing timing;
    struct rfsys_cgroup_memory cg;
    struct forge_generate_result gen, verify_gen;
    struct rf_report rep;
    size_t n_samples;
    struct rf_residency_snapshot snapshot;
    struct forge_page_source page_source;
    struct rf_staging_plan staging;
    struct forge_observer *observer;
    struct rf_dispatch_summary dispatch;
    uint32_t *profile_order; /* from a complete dispatch trace; NULL: none */
    size_t n_profile_order;
};

static void add_warning(struct rf_report *r, const char *w)
{
    if (r->n_warnings < RF_REPORT_MAX_WARNINGS)
        r->warnings[r->n_warnings++] = w;
}

/* Takes the next residency sample; returns it. */
static struct rf_residency_sample *take_sample_with(struct run_state *s, const char *label,
                                                    enum rf_measure_mapping what)
{
    size_t i = s->n_samples < RF_REPORT_MAX_SAMPLES ? s->n_samples++ : RF_REPORT_MAX_SAMPLES - 1;
    struct rf_residency_sample *smp = &s->rep.samples[i];
    uint64_t t0 = rf_now_ns();
    rf_measure_sample(NULL, "self", s->mappings, s->n_mappings,
                      s->o.sample_smaps ? RF_MEASURE_MAPPING_SMAPS : what, label, smp, &s->cg);
    rf_timing_add(&s->timing, RF_TIMER_OBSERVATION, rf_now_ns() - t0);
    return smp;
}

/* The mapping's resident bytes by PAGEMAP_SCAN (smaps with --sample-smaps). */
static struct rf_residency_sample *take_sample(struct run_state *s, const char *label)
{
    return take_sample_with(s, label, RF_MEASURE_MAPPING_RSS);
}

/* Advances resource i to `to` when legal; illegal requests are left as they are. */
static void lt_move(struct run_state *s, size_t i, enum rf_lifetime_state to)
{
    if (rf_lifetime_transition_legal(s->lt.states[i], to))
        rf_lifetime_advance(&s->lt, i, to);
}

/* Walks every referenced resource through one execution that ended at a dropped context. */
static void lt_execution(struct run_state *s)
{
    for (size_t i = 0; i < s->lt.n; i++) {
        enum rf_lifetime_state st = s->lt.states[i];
        if (st == RF_LT_UNKNOWN || st == RF_LT_INVALIDATED || st == RF_LT_SHARED_OR_REUSED)
            continue;
        /* The graph reads a repacked copy: released file pages are not referenced again. */
        if (st == RF_LT_RECONCILED && s->inv.entries[i].access == RF_ACCESS_ANONYMOUS)
            continue;
        if (st == RF_LT_RECONCILED || st == RF_LT_RELEASE_FAILED)
            lt_move(s, i, RF_LT_REFERENCED);
        lt_move(s, i, RF_LT_EXECUTION_SUBMITTED);
        lt_move(s, i, RF_LT_EXECUTION_COMPLETED);
        lt_move(s, i, RF_LT_OPERATION_BOUNDARY_SYNCHRONIZED);
    }
}

/* At a synchronized boundary: eligible resources become ReleaseEligible. */
static void lt_boundary(struct run_state *s)
{
    for (size_t i = 0; i < s->lt.n; i++) {
        enum rf_eligibility e = s->inv.entries[i].eligibility;
        if (e == RF_ELIGIBLE || e == RF_ELIGIBLE_DEAD_FILE_PAGES)
            lt_move(s, i, RF_LT_RELEASE_ELIGIBLE);
    }
}

/*
 * After load: Discovered -> Owned -> Referenced (the probe's graph read it,
 * or the model holds it) -> the probe's execution, when the probe ran.
 */
static void lt_after_load(struct run_state *s)
{
    for (size_t i = 0; i < s->lt.n; i++) {
        lt_move(s, i, RF_LT_OWNED);
        enum rf_weight_access a = s->inv.entries[i].access;
        if (a == RF_ACCESS_FILE_BACKED || a == RF_ACCESS_ANONYMOUS)
            lt_move(s, i, RF_LT_REFERENCED);
        else
            lt_move(s, i, RF_LT_UNKNOWN); /* not referenced by the observed graph */
    }
    if (s->info.access_probed) {
        lt_execution(s);
        lt_boundary(s);
    }
}

/* Records the native lifetime facts at a boundary; returns whether selection may proceed. */
static bool observe_native(struct run_state *s, const char *boundary, const char **why)
{
    struct forge_model_lifetime fl;
    forge_model_lifetime_state(s->m, &fl);
    struct rf_native_lifetime nl = {
        .has_contract = true,
        .contract_version = fl.contract_version,
        .instance_id = fl.instance_id,
        .quiescent = fl.quiescent,
        .in_flight_contexts = fl.in_flight_contexts,
        .active_contexts = fl.active_contexts,
        .execution_generation = fl.execution_generation,
    };
    rf_binding_observe(&s->binding, &nl, boundary);
    s->rep.has_native = true;
    s->rep.native = nl;
    s->rep.native_boundary = boundary;
    return rf_binding_may_select(&s->binding, why);
}

static struct rf_recon_value delta(bool has_a, uint64_t after, bool has_b, uint64_t before)
{
    struct rf_recon_value v = {false, 0};
    if (has_a && has_b && after <= INT64_MAX && before <= INT64_MAX) {
        v.has_value = true;
        v.value = (int64_t)after - (int64_t)before;
    }
    return v;
}

/*
 * Plans at a boundary and, for a mutating policy, applies the plan under the
 * gate: lifetimes ReleaseEligible -> ReleaseSelected -> ReleaseRequested ->
 * NativeAccepted -> Reconciled, or NativeFailure -> ReleaseFailed with the
 * errno of the refused range. Returns 0 or a negative error of the planner.
 */
static int plan_and_apply(struct run_state *s, const char *boundary, bool dead_pages_only,
                          const struct rf_residency_sample *before, const char *after_label)
{
    const char *why = NULL;
    bool may = observe_native(s, boundary, &why);
    struct rf_plan_params pp = rf_plan_default_params();
    uint64_t t0 = rf_now_ns();
    int rc;

    if (s->n_plans >= RF_REPORT_MAX_APPLICATIONS)
        return 0;
    struct rf_plan *plan = &s->plans[s->n_plans++];
    struct rf_report_application *app = &s->rep.applications[s->rep.n_applications++];
    for (size_t i = 0; i < s->lt.n; i++)
        s->exclude[i] = s->lt.states[i] == RF_LT_RECONCILED;
    pp.exclude = s->exclude;
    pp.profile_order = s->profile_order;
    pp.n_profile_order = s->n_profile_order;

    app->boundary = boundary;
    pp.profile = s->o.policy;
    pp.has_target = s->o.has_target;
    pp.target_bytes = s->o.target_bytes;
    pp.reserve_bytes = s->o.reserve_bytes;
    pp.has_mapping_resident = before->has_mapping;
    pp.mapping_resident_bytes = before->mapping_rss_bytes;
    pp.binding_ok = may;
    pp.binding_reason = why;
    pp.dead_pages_only = dead_pages_only;
    rc = rf_plan_build(&s->inv, &pp, plan);
    rf_timing_add(&s->timing, RF_TIMER_PLANNING, rf_now_ns() - t0);
    if (rc < 0)
        return rc;
    /* The report shows the last plan that selected something (or the first plan). */
    if (!s->rep.plan || plan->n_selected > 0) {
        s->rep.plan = plan;
        s->rep.plan_boundary = boundary;
    }
    if (!rf_policy_mutates(s->o.policy)) {
        app->refused_reason = "the policy does not mutate";
        return 0;
    }
    if (!may) {
        app->refused_reason = why;
        return 0;
    }
    if (plan->n_release == 0) {
        app->refused_reason = plan->n_selected ? "every selected page is shared with an "
                                                 "unselected tensor"
                                               : "the plan selected nothing";
        return 0;
    }

    const struct rf_file_range *ranges = plan->release;
    int *errs = calloc(plan->n_release, sizeof(int));
    if (!errs)
        return -ENOMEM;
    /* plan->selected holds tensor indices: turn them into inventory positions. */
    size_t *pos = calloc(plan->n_selected ? plan->n_selected : 1, sizeof(*pos));
    if (!pos) {
        free(errs);
        return -ENOMEM;
    }
    for (size_t k = 0; k < plan->n_selected; k++) {
        const struct rf_inventory_entry *e = NULL;
        struct rf_resource_key key = {plan->generation, plan->selected[k]};
        rf_inventory_lookup(&s->inv, key, &e);
        pos[k] = e ? (size_t)(e - s->inv.entries) : 0;
        lt_move(s, pos[k], RF_LT_RELEASE_SELECTED);
        lt_move(s, pos[k], RF_LT_RELEASE_REQUESTED);
    }
    struct forge_release_result res;
    rc = forge_model_release(s->m, ranges, plan->n_release, s->o.release_mode, &res, errs);
    if (rc < 0) {
        /* The gate refused (a context in flight): nothing was advised. */
        app->refused_reason = rc == -EBUSY ? "the execution gate was busy" : rf_strerror(rc);
        for (size_t k = 0; k < plan->n_selected; k++)
            rf_lifetime_fail(&s->lt, pos[k], rc);
        free(errs);
        free(pos);
        return 0;
    }
    app->attempted = true;
    app->requested_bytes = res.requested_bytes;
    app->accepted_bytes = res.accepted_bytes;
    app->n_failed = res.n_failed;
    app->first_error = res.first_error;
    for (size_t k = 0; k < plan->n_selected; k++) {
        size_t i = pos[k];
        int err = 0;
        for (size_t r = 0; r < plan->n_release && !err; r++) {
            struct rf_page_range hit =
                rf_page_range_intersect(plan->release[r].pages, s->inv.entries[i].pages);
            if (errs[r] && plan->release[r].mapping_index == s->inv.entries[i].mapping_index &&
                rf_page_range_pages(hit) > 0)
                err = errs[r];
        }
        if (err)
            rf_lifetime_fail(&s->lt, i, err);
        else
            lt_move(s, i, RF_LT_NATIVE_ACCEPTED);
    }
    free(errs);

    const struct rf_residency_sample *after = take_sample(s, after_label);
    app->mapping_delta = delta(after->has_mapping, after->mapping_rss_bytes, before->has_mapping,
                               before->mapping_rss_bytes);
    app->rss_delta = delta(after->has_process_rss, after->process_rss_bytes,
                           before->has_process_rss, before->process_rss_bytes);
    app->cgroup_delta = delta(after->has_cgroup_current, after->cgroup_current_bytes,
                              before->has_cgroup_current, before->cgroup_current_bytes);
    for (size_t k = 0; k < plan->n_selected; k++)
        lt_move(s, pos[k], RF_LT_RECONCILED);
    free(pos);
    return app->accepted_bytes > 0 ? 1 : 0;
}

#define RF_RELEASE_ROUNDS 3 /* re-plans at one boundary while the measurement misses */

/*
 * A boundary after a session: plan and release, then re-plan from the new
 * measurement (released resources excluded) while the measured mapping RSS
 * is still above the soft target and the last round released something:
 * the plan's estimate assumes selected pages were resident, the measurement
 * decides.
 */
static int release_rounds(struct run_state *s, const char *boundary, const char *after_label)
{
    /* Without releases this is the boundary's last sample, the ledger's: smaps at once. */
    const struct rf_residency_sample *before = take_sample_with(
        s, boundary,
        rf_policy_mutates(s->o.policy) ? RF_MEASURE_MAPPING_RSS : RF_MEASURE_MAPPING_SMAPS);
    for (int round = 0; round < RF_RELEASE_ROUNDS; round++) {
        int rc = plan_and_apply(s, boundary, false, before, after_label);
        if (rc <= 0)
            return rc;
        const struct rf_residency_sample *now = &s->rep.samples[s->n_samples - 1];
        const struct rf_plan *p = s->rep.plan;
        if (!p->has_soft_target || !now->has_mapping ||
            now->mapping_rss_bytes <= p->soft_target_bytes)
            return 0;
        before = now;
    }
    return 0;
}

/* KV cache bytes estimated from the hyperparameters: K and V, f16, n_ctx cells. */
static bool estimate_kv(const struct forge_model_info *info, uint64_t n_ctx, uint64_t *out)
{
    if (info->n_head <= 0 || info->n_head_kv <= 0 || info->n_layer <= 0 || info->n_embd <= 0)
        return false;
    uint64_t per_token = (uint64_t)info->n_embd / (uint64_t)info->n_head *
                         (uint64_t)info->n_head_kv * 2 /* K, V */ * 2 /* f16 */;
    return !__builtin_mul_overflow(per_token, (uint64_t)info->n_layer, out) &&
           !__builtin_mul_overflow(*out, n_ctx, out);
}

/* Admission before the session. Returns false when the run is refused. */
static bool admit(struct run_state *s, const struct rf_residency_sample *now, uint64_t n_ctx_est)
{
    struct rf_admission_input in;
    uint64_t kv = 0, req;
    bool has_kv = estimate_kv(&s->info, n_ctx_est, &kv);
    const char *why;

    memset(&in, 0, sizeof(in));
    in.has_request = now->has_process_rss && has_kv &&
                     !__builtin_add_overflow(now->process_rss_bytes, kv, &req);
    in.request_bytes = in.has_request ? req : 0;
    in.has_target = s->o.has_target;
    in.target_bytes = s->o.target_bytes;
    in.reserve_bytes = s->o.reserve_bytes;
    in.has_hard_limit = s->cg.has_limit;
    in.hard_unlimited = s->cg.limit_unlimited;
    in.hard_limit_bytes = s->cg.limit_bytes;
    in.hard_limit_source = s->cg.limit_source[0] ? s->cg.limit_source : NULL;
    in.has_cgroup_current = now->has_cgroup_current;
    in.cgroup_current_bytes = now->cgroup_current_bytes;
    in.has_process_rss = now->has_process_rss;
    in.process_rss_bytes = now->process_rss_bytes;
    /* Reclaimable only with a matching contract observed quiescent. */
    if (rf_policy_mutates(s->o.policy) && rf_binding_may_select(&s->binding, &why)) {
        in.has_reclaimable = true;
        in.reclaimable_bytes = s->inv.totals.unique_reclaimable_bytes;
    }
    if (now->has_process_rss && now->has_mapping &&
        now->process_rss_bytes >= now->mapping_rss_bytes) {
        in.has_non_file = true;
        in.non_file_bytes = now->process_rss_bytes - now->mapping_rss_bytes + kv;
    }
    in.unknown_components[in.n_unknown++] = "GraphScratch";
    in.unknown_components[in.n_unknown++] = "Runtime";
    if (rf_admission_decide(&in, &s->admission) < 0) {
        s->rep.admission_reason = "admission could not decide (invalid input)";
        return true;
    }
    s->rep.admission = &s->admission;
    return s->admission.outcome != RF_ADMIT_REJECTED;
}

/*
 * The page-level snapshot at the end of the run: mincore over the model
 * mapping (or unknown where the kernel's fake-residency rule applies), the
 * plan's selection first, within the page budget; and the file's
 * page-cache figure from cachestat.
 */
static void take_page_snapshot(struct run_state *s)
{
    struct rf_residency_params rp = rf_residency_default_params();
    uint64_t t0 = rf_now_ns();

    if (forge_model_page_source(s->m, &s->page_source) < 0) {
        s->rep.page_snapshot_reason = "the model mapping's page source is unavailable";
        return;
    }
    struct forge_page_pass pass;
    forge_page_pass_begin(s->m, &pass);
    rp.page_budget_pages = (uint64_t)s->o.page_budget;
    rp.sample = forge_page_pass_sampler;
    rp.sample_ud = &pass;
    rp.source = s->page_source.source;
    if (s->rep.plan) {
        rp.targeted = s->rep.plan->selected;
        rp.n_targeted = s->rep.plan->n_selected;
    }
    if (rf_residency_snapshot_take(&s->inv, &rp, &s->snapshot) == 0)
        s->rep.page_snapshot = &s->snapshot;
    else
        s->rep.page_snapshot_reason = "the page snapshot failed";
    forge_page_pass_end(&pass);
    s->rep.has_file_cache = s->page_source.file_cache_error == 0;
    s->rep.file_cached_pages = s->page_source.file_cached_pages;
    s->rep.file_cache_page_bytes = s->page_source.page_bytes;
    s->rep.file_cache_source = s->page_source.file_cache_source;
    rf_timing_add(&s->timing, RF_TIMER_OBSERVATION, rf_now_ns() - t0);
}

/*
 * Attributes the observer's events to the inventory; a complete trace
 * becomes the access profile reuse-aware orders by: never-dispatched
 * weights first, then by latest first use in graph order (the next token
 * needs those last).
 */
static void summarize_dispatch(struct run_state *s)
{
    struct forge_observer_stats st;
    size_t n_events;
    const struct rf_dispatch_event *ev = forge_observer_events(s->observer, &n_events);

    forge_observer_stats(s->observer, &st);
    if (s->o.policy == RF_POLICY_OFF) {
        s->rep.dispatch_reason = "residency policy off: no inventory to attribute events to";
        return;
    }
    if (rf_dispatch_summarize(&s->inv, forge_model_instance_id(s->m), ev, n_events,
                              st.dropped_events, &s->dispatch) < 0) {
        s->rep.dispatch_reason = "the dispatch events could not be attributed";
        return;
    }
    s->rep.dispatch = &s->dispatch;
    if (!s->dispatch.complete) {
        s->rep.profile_reason = "the dispatch trace is incomplete (events were dropped): no "
                                "profile; raise --dispatch-events";
        return;
    }
    size_t n = s->dispatch.n_tensors;
    uint32_t *by_rank = malloc((n ? n : 1) * sizeof(uint32_t)); /* rank -> tensor index */
    s->profile_order = calloc(n ? n : 1, sizeof(uint32_t));
    if (!s->profile_order || !by_rank) {
        free(by_rank);
        return;
    }
    memset(by_rank, 0xff, (n ? n : 1) * sizeof(uint32_t));
    for (size_t i = 0; i < n; i++) {
        uint32_t rank = s->dispatch.tensors[i].first_order;
        if (rank == UINT32_MAX || rank >= n)
            s->profile_order[s->n_profile_order++] = s->inv.entries[i].key.tensor_index;
        else
            by_rank[rank] = s->inv.entries[i].key.tensor_index;
    }
    for (size_t rank = n; rank-- > 0;)
        if (by_rank[rank] != UINT32_MAX)
            s->profile_order[s->n_profile_order++] = by_rank[rank];
    free(by_rank);
    s->rep.profile_order = s->profile_order;
    s->rep.n_profile_order = s->n_profile_order;
    s->rep.profile_source = "dispatch trace of this run's session (--observe-dispatch)";
}

/*
 * Pages of the staged tensors (the partial one included) in the page cache
 * (mincore), and how many pages of them were sampled.
 */
static void staged_cache(struct run_state *s, struct rf_recon_value *cached,
                         struct rf_recon_value *sampled)
{
    struct rf_residency_params rp = rf_residency_default_params();
    struct rf_residency_snapshot snap;
    struct forge_page_source src;
    uint32_t *targets = calloc(s->staging.n_staged + 1, sizeof(uint32_t));

    rf_residency_snapshot_init(&snap);
    if (!targets || forge_model_page_source(s->m, &src) < 0) {
        free(targets);
        return;
    }
    memcpy(targets, s->staging.staged, s->staging.n_staged * sizeof(uint32_t));
    size_t n_targets = s->staging.n_staged;
    if (s->staging.has_partial)
        targets[n_targets++] = s->staging.partial_tensor_index;
    /* The targeted population comes first: this budget covers it and little more. */
    uint64_t pages = 0;
    for (size_t k = 0; k < n_targets; k++) {
        const struct rf_inventory_entry *e = NULL;
        struct rf_resource_key key = {s->inv.generation, targets[k]};
        if (rf_inventory_lookup(&s->inv, key, &e) == 0)
            pages += rf_page_range_pages(e->pages);
    }
    rp.page_budget_pages = pages;
    rp.sample = forge_page_sampler;
    rp.sample_ud = s->m;
    rp.source = src.source;
    rp.targeted = targets;
    rp.n_targeted = n_targets;
    if (rf_residency_snapshot_take(&s->inv, &rp, &snap) == 0 &&
        snap.coverage.targeted.resident_pages <= INT64_MAX) {
        cached->has_value = sampled->has_value = true;
        cached->value = (int64_t)snap.coverage.targeted.resident_pages;
        sampled->value = (int64_t)(snap.coverage.targeted.resident_pages +
                                   snap.coverage.targeted.nonresident_pages);
    }
    rf_residency_snapshot_free(&snap);
    free(targets);
}

/*
 * Staging before the session: plan the union of the page ranges of the
 * weights the graph reads (file order), within the budget, and prefetch
 * them in bounded chunks; observe the staged tensors' page-cache state and
 * the mapping RSS before and after. Returns 0 or a planner error.
 */
static int stage(struct run_state *s)
{
    struct rf_staging_params sp = rf_staging_default_params();
    struct forge_prefetch_result res;
    struct rf_report *r = &s->rep;
    uint64_t t0 = rf_now_ns();
    int rc;

    sp.budget_bytes = s->o.staging_budget;
    rc = rf_staging_plan_build(&s->inv, &sp, &s->staging);
    if (rc < 0)
        return rc;
    r->staging = &s->staging;
    if (s->staging.n_ranges == 0) {
        r->staging_refused_reason = "the staging plan selected nothing";
        rf_timing_add(&s->timing, RF_TIMER_STAGING, rf_now_ns() - t0);
        return 0;
    }
    staged_cache(s, &r->staging_cached_before, &r->staging_sampled_pages);
    const struct rf_residency_sample *before = &s->rep.samples[s->n_samples - 1];
    rc = forge_model_prefetch(s->m, s->staging.ranges, s->staging.n_ranges,
                              FORGE_PREFETCH_DEFAULT_CHUNK_BYTES, &res);
    if (rc < 0) {
        r->staging_refused_reason = rc == -EBUSY ? "the execution gate was busy" : rf_strerror(rc);
    } else {
        r->staging_attempted = true;
        r->staging_accepted_bytes = res.accepted_bytes;
        r->staging_chunk_bytes = res.chunk_bytes;
        r->staging_calls = res.n_calls;
        r->staging_failed_calls = res.n_failed_calls;
        r->staging_error = res.first_error;
    }
    rf_timing_add(&s->timing, RF_TIMER_STAGING, rf_now_ns() - t0);
    staged_cache(s, &r->staging_cached_after, &r->staging_sampled_pages);
    const struct rf_residency_sample *after = take_sample(s, "after_staging");
    r->staging_mapping_delta = delta(after->has_mapping, after->mapping_rss_bytes,
                                     before->has_mapping, before->mapping_rss_bytes);
    return 0;
}

/*
 * forge_generate's hook: the session's context is alive, its buffers
 * allocated. The process and the cgroup only: the boundaries before and
 * after the session read the mapping.
 */
static void sample_end_of_session(void *user_data)
{
    struct run_state *s = user_data;
    if (s->o.policy != RF_POLICY_OFF)
        take_sample_with(s, "end_of_session", RF_MEASURE_MAPPING_NONE);
}

static void run_state_free(struct run_state *s)
{
    forge_generate_result_free(&s->gen);
    forge_generate_result_free(&s->verify_gen);
    for (size_t i = 0; i < RF_REPORT_MAX_APPLICATIONS; i++)
        rf_plan_free(&s->plans[i]);
    free(s->exclude);
    rf_lifetime_free(&s->lt);
    rf_residency_snapshot_free(&s->snapshot);
    rf_dispatch_summary_free(&s->dispatch);
    rf_staging_plan_free(&s->staging);
    forge_observer_free(s->observer);
    free(s->profile_order);
    rf_inventory_free(&s->inv);
    forge_model_free(s->m);
}

/* Fills the ledger's native categories from the session's memory breakdown. */
static void fill_native_ledger(struct run_state *s, uint64_t n_ctx)
{
    uint64_t kv;
    if (s->gen.has_memory_breakdown) {
        rf_ledger_set(&s->ledger, RF_LEDGER_KV_CACHE, s->gen.kv_cache_bytes, RF_PROV_NATIVE_LOGICAL,
                      "llama_get_memory_breakdown (context buffers)",
                      "allocated by the session's context; freed when the session was dropped");
        rf_ledger_set(&s->ledger, RF_LEDGER_GRAPH_SCRATCH, s->gen.compute_bytes,
                      RF_PROV_NATIVE_LOGICAL, "llama_get_memory_breakdown (compute buffers)",
                      "allocated by the session's context; freed when the session was dropped");
    } else {
        if (estimate_kv(&s->info, n_ctx, &kv))
            rf_ledger_set(&s->ledger, RF_LEDGER_KV_CACHE, kv, RF_PROV_ESTIMATED,
                          "model hyperparameters x context size (f16 K and V)",
                          "llama_get_memory_breakdown is not available in this build");
        else
            rf_ledger_set_unknown(&s->ledger, RF_LEDGER_KV_CACHE, "llama_get_memory_breakdown",
                                  "not available in this build, and the hyperparameters are "
                                  "unknown");
        rf_ledger_set_unknown(&s->ledger, RF_LEDGER_GRAPH_SCRATCH, "llama_get_memory_breakdown",
                              "not available in this build");
    }
}

static void fill_report_cgroup(struct run_state *s);

static int write_reports(struct run_state *s)
{
    fill_report_cgroup(s);
    if (s->o.human_report)
        run_print_report(&s->rep);
    if (s->o.json_path) {
        json_t *doc;
        int rc = rf_report_to_json(&s->rep, &doc);
        if (rc == 0) {
            rc = rf_json_write_file(doc, s->o.json_path);
            json_decref(doc);
        }
        if (rc < 0) {
            cli_error("cannot write %s: %s", s->o.json_path, rf_strerror(rc));
            return rc;
        }
    }
    return 0;
}

static void fill_report_identity(struct run_state *s)
{
    struct rf_report *r = &s->rep;
    r->ramforge_version = RAMFORGE_VERSION;
    r->llama_cpp_version = forge_llama_version();
    r->model_path = s->info.path;
    r->model_desc = s->info.desc;
    r->model_file_size_bytes = s->info.file_size_bytes;
    r->model_native_size_bytes = s->info.size_bytes;
    r->model_n_params = s->info.n_params;
    r->instance_id = forge_model_instance_id(s->m);
    r->access_probed = s->info.access_probed;
    r->access_basis = s->info.access_basis;
    r->policy = rf_policy_name(s->o.policy);
    r->policy_plans = rf_policy_plans(s->o.policy);
    r->policy_mutates = rf_policy_mutates(s->o.policy);
    r->has_target = s->o.has_target;
    r->target_bytes = s->o.target_bytes;
    r->reserve_bytes = s->o.reserve_bytes;
    r->release_mode = !r->policy_mutates                            ? NULL
                      : s->o.release_mode == FORGE_RELEASE_PAGEOUT ? "pageout"
                                                                   : "dontneed";
    r->timing = &s->timing;

    r->seed = (uint32_t)s->o.seed;
    if (s->o.policy == RF_POLICY_OFF) {
        r->not_built_reason = "residency policy off: no inventory, ledger or sample was taken";
        r->plan_reason = "residency policy off";
        r->admission_reason = "residency policy off";
        r->page_snapshot_reason = "residency policy off";
        return;
    }
    r->inventory = &s->inv;
    r->lifetime = &s->lt;
}

/* The cgroup facts of the last sample (rf_measure_sample fills s->cg). */
static void fill_report_cgroup(struct run_state *s)
{
    struct rf_report *r = &s->rep;
    if (s->o.policy == RF_POLICY_OFF)
        return;
    r->cgroup_version = s->cg.version == RFSYS_CGROUP_V1   ? "v1"
                        : s->cg.version == RFSYS_CGROUP_V2 ? "v2"
                                                           : "none";
    r->cgroup_dir = s->cg.version != RFSYS_CGROUP_NONE ? s->cg.dir : NULL;
    r->has_cgroup_limit = s->cg.has_limit;
    r->cgroup_limit_unlimited = s->cg.limit_unlimited;
    r->cgroup_limit_bytes = s->cg.limit_bytes;
}

static void set_output(struct run_state *s)
{
    s->rep.prompt_tokens = s->gen.prompt_tokens;
    s->rep.n_prompt = s->gen.n_prompt;
    s->rep.tokens = s->gen.tokens;
    s->rep.n_tokens = s->gen.n_tokens;
    s->rep.text = s->gen.text;
    s->rep.n_ctx = s->gen.n_ctx;
    s->rep.n_threads = s->gen.n_threads;
}

static void add_warnings(struct run_state *s)
{
    struct rf_report *r = &s->rep;
    if (s->o.policy == RF_POLICY_OFF)
        return;
    add_warning(r, "FileBackedResident is this process's mapping RSS: it is neither the file's "
                   "page cache nor the cgroup charge");
    if (!s->gen.has_memory_breakdown)
        add_warning(r, "KvCache and GraphScratch are not reported by this llama.cpp build");
    add_warning(r, "the ledger is sampled after the session was dropped: the session's KV cache "
                   "and scratch were freed with it and are in ProcessRssPeak, not ProcessRss "
                   "(residency.samples end_of_session has the RSS with them)");
    add_warning(r, "Runtime is unknown: allocator, loader and tokenizer memory are inside "
                   "ProcessRss");
    if (s->inv.totals.n_anonymous > 0)
        add_warning(r, "some weights are read from anonymous repacked copies: their file pages "
                       "stay mapped and resident but are never read again");
    if (s->cg.version == RFSYS_CGROUP_NONE)
        add_warning(r, "no cgroup memory controller was found: cgroup figures are unknown");
    if (r->policy_mutates)
        add_warning(r, "a release request is not reclamation: accepted bytes are what madvise "
                       "took; only the measured deltas show what changed");
    if (r->admission && r->admission->outcome == RF_ADMIT_WARNING)
        add_warning(r, "the run exceeds the soft target (see admission.reason)");
    for (size_t i = 0; i < r->n_applications; i++)
        if (r->applications[i].n_failed)
            add_warning(r, "the kernel refused part of a release: those resources are "
                           "ReleaseFailed, not released");
}

int cmd_run(int argc, char **argv)
{
    uint64_t t_entry = rf_now_ns();
    struct run_state *s = calloc(1, sizeof(*s));
    struct forge_model_params mp = forge_model_default_params();
    char err[FORGE_ERR_MAX];
    int status = RF_EXIT_FAILURE, rc;

    if (!s) {
        cli_error("out of memory");
        return RF_EXIT_FAILURE;
    }
    s->o.prompt = "Hello my name is";
    s->o.n_predict = 32;
    s->o.policy = RF_POLICY_OBSERVE;
    s->o.repack = true;
    s->o.page_budget = (long long)RF_RESIDENCY_DEFAULT_BUDGET_PAGES;
    s->o.dispatch_events = 32768;
    rc = parse_options(argc, argv, &s->o);
    if (rc >= 0) {
        free(s);
        return rc;
    }
    const struct run_options *o = &s->o;
    const bool observing = o->policy != RF_POLICY_OFF;
    if (o->json_path && !report_path_usable(o->json_path, o->model))
        goto out;
    if (o->verbose)
        rf_log_set(cli_log_sink, NULL);
    forge_init(o->verbose);
    rf_timing_init(&s->timing);
    rf_inventory_init(&s->inv);
    rf_ledger_init(&s->ledger);
    rf_residency_snapshot_init(&s->snapshot);
    rf_dispatch_summary_init(&s->dispatch);
    rf_staging_plan_init(&s->staging);
    for (size_t i = 0; i < RF_REPORT_MAX_APPLICATIONS; i++)
        rf_plan_init(&s->plans[i]);

    /*
     * Before the load: llama.cpp maps and populates the whole file, so a
     * file larger than the room under an enforced cgroup limit may be
     * killed before admission runs. A warning, not a refusal: pages already
     * cached may be charged already, or elsewhere.
     */
    if (observing) {
        struct rfsys_cgroup_memory pre;
        struct stat mst;
        if (rfsys_read_cgroup_memory(NULL, "self", &pre) == 0 && pre.has_limit &&
            !pre.limit_unlimited && pre.has_current && stat(o->model, &mst) == 0 &&
            (pre.current_bytes >= pre.limit_bytes ||
             (uint64_t)mst.st_size > pre.limit_bytes - pre.current_bytes))
            cli_error("warning: loading maps and reads all %lld bytes of %s, more than the %" PRIu64
                      " bytes left under the cgroup limit (%s): the load itself may be "
                      "reclaimed or killed",
                      (long long)mst.st_size, o->model,
                      pre.current_bytes >= pre.limit_bytes ? 0 : pre.limit_bytes - pre.current_bytes,
                      pre.limit_source);
    }

    /* Load. */
    mp.use_extra_bufts = o->repack;
    mp.mlock = o->mlock;
    mp.probe_access = observing && (rf_policy_mutates(o->policy) || o->access_probe);
    mp.placement_access = observing;
    mp.n_threads = (int)o->n_threads;
    uint64_t t0 = rf_now_ns();
    if (forge_model_load(o->model, &mp, &s->m, err) < 0) {
        cli_error("%s", err);
        goto out;
    }
    forge_model_get_info(s->m, &s->info);
    rf_timing_set(&s->timing, RF_TIMER_MODEL_LOAD, rf_now_ns() - t0 - s->info.probe_ns);
    size_t n_tensors;
    const struct rf_tensor_meta *tensors = forge_model_tensors(s->m, &n_tensors);
    s->mappings = forge_model_mappings(s->m, &s->n_mappings);
    fill_report_identity(s);

    /* The after_load boundary: no context exists. */
    if (observing) {
        rf_timing_add(&s->timing, RF_TIMER_OBSERVATION, s->info.probe_ns);
        t0 = rf_now_ns();
        rc = rf_inventory_build(tensors, n_tensors, s->mappings, s->n_mappings,
                                (uint64_t)sysconf(_SC_PAGESIZE), 1, &s->inv);
        if (rc == 0)
            rc = rf_lifetime_init(&s->lt, s->inv.n);
        if (rc == 0 && !(s->exclude = calloc(s->inv.n ? s->inv.n : 1, 1)))
            rc = -ENOMEM;
        rf_timing_add(&s->timing, RF_TIMER_PLANNING, rf_now_ns() - t0);
        if (rc < 0) {
            cli_error("%s: cannot build the inventory: %s", o->model, rf_strerror(rc));
            goto out;
        }
        lt_after_load(s);
        rf_binding_bind(&s->binding, forge_model_instance_id(s->m));
        const struct rf_residency_sample *loaded = take_sample(s, "after_load");
        if (rf_policy_mutates(o->policy)) {
            rc = plan_and_apply(s, "after_load", true, loaded, "after_load_release");
            if (rc < 0) {
                cli_error("%s: cannot plan: %s", o->model, rf_strerror(rc));
                goto out;
            }
        } else {
            const char *why;
            observe_native(s, "after_load", &why);
        }
        const struct rf_residency_sample *now = &s->rep.samples[s->n_samples - 1];
        uint64_t n_ctx_est = o->n_ctx ? (uint64_t)o->n_ctx : (uint64_t)o->n_predict + 64;
        if (!admit(s, now, n_ctx_est)) {
            cli_error("admission rejected the run: %s", s->admission.reason);
            rf_timing_set(&s->timing, RF_TIMER_END_TO_END, rf_now_ns() - t_entry);
            s->rep.plan_reason = "the run was rejected before the session";
            write_reports(s);
            goto out;
        }
        if (s->admission.outcome == RF_ADMIT_WARNING)
            cli_error("warning: %s", s->admission.reason);
        if (o->has_staging) {
            rc = stage(s);
            if (rc < 0) {
                cli_error("%s: cannot plan staging: %s", o->model, rf_strerror(rc));
                goto out;
            }
        }
    }

    /* The session. */
    struct forge_generate_params gp = {
        .prompt = o->prompt,
        .n_predict = (int32_t)o->n_predict,
        .n_ctx = (uint32_t)o->n_ctx,
        .n_threads = (int32_t)o->n_threads,
        .on_session_end = sample_end_of_session,
        .user_data = s,
    };
    if (o->observe_dispatch) {
        rc = forge_observer_create((size_t)o->dispatch_events, &s->observer);
        if (rc < 0) {
            cli_error("cannot allocate the dispatch observer (%lld events): %s",
                      o->dispatch_events, rf_strerror(rc));
            goto out;
        }
        rc = forge_observer_set_sampling(s->observer, s->m, (uint32_t)o->dispatch_sample_pages);
        if (rc < 0) {
            cli_error("cannot set up pre-dispatch sampling: %s", rf_strerror(rc));
            goto out;
        }
        gp.observer = s->observer;
    }
    if (forge_generate(s->m, &gp, &s->gen, err) < 0) {
        cli_error("%s: %s", o->model, err);
        goto out;
    }
    rf_timing_set(&s->timing, RF_TIMER_CONTEXT_INIT, s->gen.context_init_ns);
    rf_timing_set(&s->timing, RF_TIMER_INFERENCE, s->gen.inference_ns);
    rf_timing_set(&s->timing, RF_TIMER_PROMPT, s->gen.prompt_ns);
    rf_timing_set(&s->timing, RF_TIMER_TTFT, s->gen.ttft_ns);
    rf_timing_set(&s->timing, RF_TIMER_DECODE, s->gen.decode_ns);
    rf_timing_set(&s->timing, RF_TIMER_SYNCHRONIZATION, s->gen.sync_ns);
    set_output(s);

    gp.observer = NULL; /* the verify session runs without the observer */
    if (s->observer)
        summarize_dispatch(s);

    /* The after_session boundary: the context was dropped. */
    if (observing) {
        lt_execution(s);
        lt_boundary(s);
        rc = release_rounds(s, "after_session", "after_release");
        if (rc == 0 && o->verify) {
            gp.on_session_end = NULL;
            if (forge_generate(s->m, &gp, &s->verify_gen, err) < 0) {
                cli_error("%s: verify session: %s", o->model, err);
                goto out;
            }
            s->rep.verified = true;
            s->rep.verify_tokens = s->verify_gen.tokens;
            s->rep.n_verify_tokens = s->verify_gen.n_tokens;
            s->rep.verify_tokens_equal =
                s->verify_gen.n_tokens == s->gen.n_tokens &&
                memcmp(s->verify_gen.tokens, s->gen.tokens, s->gen.n_tokens * sizeof(int32_t)) == 0;
            /* The verify session re-faulted pages: its boundary is a safe one too. */
            lt_execution(s);
            lt_boundary(s);
            rc = release_rounds(s, "after_verify", "after_verify_release");
        }
        if (rc < 0) {
            cli_error("%s: cannot plan: %s", o->model, rf_strerror(rc));
            goto out;
        }
        struct rf_residency_sample *last = &s->rep.samples[s->n_samples - 1];
        if (rf_policy_mutates(o->policy) && s->rep.plan && s->rep.plan->has_soft_target &&
            last->has_mapping && last->mapping_rss_bytes > s->rep.plan->soft_target_bytes) {
            cli_error("warning: the measured mapping RSS of %" PRIu64 " bytes is above the soft "
                      "target of %" PRIu64 " bytes: %s",
                      last->mapping_rss_bytes, s->rep.plan->soft_target_bytes,
                      s->rep.plan->reason);
            add_warning(&s->rep, "the measured mapping RSS after release is above the soft "
                                 "target (see plan.reason and residency.samples)");
        }
        /* The ledger's sample: Rss and Pss from one smaps read. */
        if (!last->mapping_source || strcmp(last->mapping_source, "smaps") != 0) {
            uint64_t t_smaps = rf_now_ns();
            rf_measure_sample_mapping(NULL, "self", s->mappings, s->n_mappings,
                                      RF_MEASURE_MAPPING_SMAPS, last);
            rf_timing_add(&s->timing, RF_TIMER_OBSERVATION, rf_now_ns() - t_smaps);
        }
        rf_measure_fill_ledger(&s->ledger, &s->inv, s->info.access_basis, last, &s->cg, "self");
        fill_native_ledger(s, s->gen.n_ctx);
        if (s->rep.staging) {
            rf_ledger_set(&s->ledger, RF_LEDGER_STAGING_REQUESTED, s->staging.selected_bytes,
                          RF_PROV_REQUESTED, "ramforge staging plan (union of page ranges)",
                          "page bytes submitted to MADV_WILLNEED, within --staging-budget");
            if (s->rep.staging_attempted)
                rf_ledger_set(&s->ledger, RF_LEDGER_STAGING_ACCEPTED,
                              s->rep.staging_accepted_bytes, RF_PROV_NATIVE_ACCEPTED,
                              "madvise(MADV_WILLNEED) return values",
                              "bytes of the prefetch hints the kernel took: not residency");
            else
                rf_ledger_set_unknown(&s->ledger, RF_LEDGER_STAGING_ACCEPTED, "ramforge staging",
                                      s->rep.staging_refused_reason);
        }
        take_page_snapshot(s);
        rf_ledger_reconcile(&s->ledger, true, s->inv.totals.mapped_virtual_bytes, &s->recon);
        s->rep.ledger = &s->ledger;
        s->rep.reconciliation = &s->recon;
    }
    rf_timing_set(&s->timing, RF_TIMER_END_TO_END, rf_now_ns() - t_entry);

    printf("%s\n", s->gen.text);
    fflush(stdout);
    add_warnings(s);
    if (write_reports(s) < 0)
        goto out;
    if (s->rep.verified && !s->rep.verify_tokens_equal) {
        cli_error("the verify session's tokens differ from the first session's");
        goto out;
    }
    if (o->hold) {
        char buf[256];
        fprintf(stderr, "%s: holding pid %ld with the model loaded; close standard input to exit\n",
                RF_PROGRAM, (long)getpid());
        while (fread(buf, 1, sizeof(buf), stdin) > 0)
            ;
    }
    status = 0;
out:
    run_state_free(s);
    free(s);
    return status;
}
