/*
 * ramforge bench: `ramforge run` as a separate process per repetition, over
 * a list of residency policies and cache conditions, with each run's cache
 * condition prepared and verified before the process starts (spec:
 * "Cache-condition preparation", "Execution timing").
 *
 * The workload: a few policies x two conditions x a few repetitions, each
 * run a fresh process of this same binary (/proc/self/exe) writing its JSON
 * operation report, which is read back with jansson. Runs are ordered
 * condition by condition, then repetition, then policy, so slow drift of
 * the machine spreads over all policies alike.
 *
 * Outputs, in the output directory DIR:
 *   results.tsv    one row per run (columns: TSV_COLUMNS below)
 *   summary.json   per (condition, policy): label counts, medians, the
 *                  ratios to the `off` policy of the same bench run; the
 *                  physical limit of a cold load (copy size / sequential
 *                  read bandwidth of the cold copy, measured in this run)
 *   runs/          each run's report (.json), stdout (.out) and stderr (.err)
 * Both summary files are written through a temporary file and a rename.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_prepare.h"
#include "cli.h"
#include "core/report_json.h"
#include "ramforge/policy.h"
#include "ramforge/report.h"
#include "ramforge/timing.h"

#ifndef RAMFORGE_VERSION
#define RAMFORGE_VERSION "0.0.0"
#endif

extern char **environ;

#define BENCH_MAX_VARIANTS 16    /* entries of --policies */
#define BENCH_MAX_ARGS 64        /* extra run arguments per run, --run-args included */
#define BENCH_MAX_POLICY_ARGS 64 /* --policy-args options */
#define BENCH_NAME_MAX 40        /* characters of a policy entry's name */
#define BENCH_MAX_REPETITIONS 1000
#define BENCH_DEFAULT_PROMPT "Hello my name is"
#define BENCH_DEFAULT_N_PREDICT 16
#define BENCH_DEFAULT_REPETITIONS 3
#define BENCH_DEFAULT_POLICIES "off,observe"
#define BENCH_DEFAULT_CONDITIONS "warm,isolated-nonresident"
#define BENCH_SELF_EXE "/proc/self/exe" /* the run processes execute this same binary */
/*
 * Preparations tried before a run keeps a label other than its condition's
 * own: a drop right after a write can leave pages the kernel was still
 * handling (the LRU batches), which the next drop takes.
 */
#define BENCH_PREPARE_ATTEMPTS 3

/* One entry of --policies: a residency policy under a name, with its own run arguments. */
struct bench_variant {
    char name[BENCH_NAME_MAX + 1]; /* the outputs' policy column and file names */
    enum rf_policy_profile policy; /* --residency-policy of its runs */
    char *args[BENCH_MAX_ARGS];    /* --policy-args words (owned) */
    size_t n_args;
};

struct bench_options {
    const char *model;
    const char *prompt;
    const char *out_dir;
    const char *copy_dir; /* NULL: out_dir */
    long long n_predict;
    long long n_threads; /* 0: not given (run's default) */
    long long repetitions;
    struct bench_variant variants[BENCH_MAX_VARIANTS];
    size_t n_variants;
    enum bench_condition conditions[BENCH_COND_N];
    size_t n_conditions;
    char *common_args[BENCH_MAX_ARGS]; /* --run-args words (owned) */
    size_t n_common;
    const char *policy_args[BENCH_MAX_POLICY_ARGS]; /* raw NAME=ARGS, applied after parsing */
    size_t n_policy_args;
    bool keep_copy;
    bool quiet;
};

/* Per-run figures: the medians' inputs and results.tsv's metric columns. */
enum bench_metric {
    M_LOAD = 0,    /* timing.model_load_ns */
    M_STAGING,     /* timing.staging_ns */
    M_TTFT,        /* timing.ttft_ns */
    M_DECODE_TPS,  /* (n_generated_tokens - 1) / timing.decode_ns */
    M_E2E,         /* timing.end_to_end_ns */
    M_PROCESS,     /* bench's own clock: spawn to exit of the run process */
    M_PEAK_RSS,    /* ledger ProcessRssPeak */
    M_MAXRSS,      /* wait4 ru_maxrss of the run process */
    M_MAPPING_RSS, /* ledger FileBackedResident */
    M_CG_CURRENT,  /* ledger CgroupCurrent */
    M_CG_PEAK,     /* ledger CgroupPeak */
    M_N
};

static const struct {
    const char *name; /* column and summary key */
    bool real;        /* tokens/s: 3 decimals; else an integer */
} metric_info[M_N] = {
    [M_LOAD] = {"load_ns", false},
    [M_STAGING] = {"staging_ns", false},
    [M_TTFT] = {"ttft_ns", false},
    [M_DECODE_TPS] = {"decode_tokens_per_s", true},
    [M_E2E] = {"end_to_end_ns", false},
    [M_PROCESS] = {"process_ns", false},
    [M_PEAK_RSS] = {"peak_rss_bytes", false},
    [M_MAXRSS] = {"rusage_maxrss_bytes", false},
    [M_MAPPING_RSS] = {"mapping_rss_bytes", false},
    [M_CG_CURRENT] = {"cgroup_current_bytes", false},
    [M_CG_PEAK] = {"cgroup_peak_bytes", false},
};

struct bench_value {
    bool has;   /* false: unknown or absent (an empty TSV cell, JSON null; never 0) */
    uint64_t u; /* integer metrics */
    double d;   /* real metrics, rounded to 3 decimals */
};

struct bench_row {
    enum bench_condition cond;
    size_t variant; /* index into options.variants */
    long long rep;  /* 1-based */
    enum bench_label label;
    bool probed; /* prep holds a verification */
    struct bench_residency prep;
    int run_status; /* -1 not started; exit status; 128 + signal */
    struct bench_value v[M_N];
    char fingerprint[48]; /* output.token_fingerprint; "" if absent */
    char report[96];      /* "runs/<condition>-<policy>-<rep>.json"; "" if none */
};

#define BENCH_LIMIT_READS 3 /* cold reads of the copy for the physical limit; the fastest counts */

/* The isolated copy and the physical limit measured on it. */
struct bench_copy {
    bool wanted; /* the isolated-nonresident condition was asked for */
    bool made;
    char path[PATH_MAX];
    char error[BENCH_ERR_MAX]; /* why it could not be made; "" */
    struct bench_copy_info info;
    bool read_measured; /* the timed read ran */
    uint64_t read_bytes;
    uint64_t read_ns;
    enum bench_label read_label; /* the copy's state before the timed read */
    char read_error[BENCH_ERR_MAX];
};

#define TSV_COLUMNS                                                                                \
    "condition\tlabel\tpolicy\tresidency_policy\trepetition\trun_status\tload_ns\tstaging_ns\t"    \
    "ttft_ns\tdecode_tokens_per_s\tend_to_end_ns\tprocess_ns\tpeak_rss_bytes\t"                    \
    "rusage_maxrss_bytes\tmapping_rss_bytes\tcgroup_current_bytes\tcgroup_peak_bytes\t"            \
    "token_fingerprint\tprep_method\tprep_resident_pages\tprep_nonresident_pages\t"                \
    "prep_unknown_pages\treport"

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: %s bench -m MODEL -o DIR [OPTIONS]\n"
            "\n"
            "Run '%s run' on MODEL as a separate process per repetition, for each policy\n"
            "and cache condition, and summarize the runs' reports. Each run's cache\n"
            "condition is prepared and verified (mincore, or cachestat) just before its\n"
            "process starts; the verification gives the run its label.\n"
            "\n"
            "Conditions (--conditions, comma-separated, in this order):\n"
            "  warm                  MODEL is read with large reads, so its pages are in the\n"
            "                        page cache; label warm when every page is resident,\n"
            "                        else partial (or unknown)\n"
            "  isolated-nonresident  MODEL is copied once to DIR/isolated-<name> (read with\n"
            "                        O_DIRECT where possible, so MODEL's own page cache is\n"
            "                        left as it was; a progress bar on a terminal); before\n"
            "                        each run the copy is fsync'd, dropped with\n"
            "                        posix_fadvise(POSIX_FADV_DONTNEED) and verified; the\n"
            "                        run loads the copy. Label controlled only when every\n"
            "                        page is nonresident; else warm, partial or unknown\n"
            "  A preparation that fails (the copy cannot be made: no space, a directory\n"
            "  that cannot be written) gives the label failed and the run does not start.\n"
            "  MODEL is only ever read. No global cache drop, no privileged command. The\n"
            "  labels say what the file's page cache held when the process started: not\n"
            "  physical reclamation, PSS, or the mapping's residency after loading.\n"
            "\n"
            "Options:\n"
            "  -m, --model PATH         GGUF model (required; never modified)\n"
            "  -o, --output DIR         output directory (required; created if missing)\n"
            "  -p, --prompt TEXT        prompt of every run (default \"%s\")\n"
            "  -n, --n-predict N        tokens per run, 1..1000000 (default %d)\n"
            "  -t, --threads N          threads per run, 1..1024 (default: run's)\n"
            "  -r, --repetitions N      runs per policy and condition, 1..%d (default %d)\n"
            "      --policies LIST      comma-separated entries POLICY or NAME=POLICY\n"
            "                           (default %s). POLICY is a --residency-policy:\n"
            "                           off, observe, conservative, memory-bound,\n"
            "                           reuse-aware, active. NAME (letters, digits, . _ + -;\n"
            "                           default: POLICY) tells entries of one policy apart,\n"
            "                           e.g. off,observe,staged=observe; the entry named\n"
            "                           'off' is the baseline of the ratios\n"
            "      --policy-args NAME=ARGS\n"
            "                           extra 'run' arguments for the runs of entry NAME,\n"
            "                           e.g. --policy-args 'memory-bound=--memory-target\n"
            "                           300MiB'; repeatable\n"
            "      --run-args ARGS      extra 'run' arguments for every run; repeatable\n"
            "                           ARGS are split at spaces (no quoting). bench sets\n"
            "                           -m, -p, -n, -t, --residency-policy and\n"
            "                           --residency-report-json itself; --hold is refused\n"
            "      --conditions LIST    warm, isolated-nonresident (default %s)\n"
            "      --copy-dir DIR2      where the isolated copy goes (default DIR); it is\n"
            "                           removed at the end unless --keep-copy\n"
            "      --keep-copy          keep the isolated copy\n"
            "  -q, --quiet              no per-run progress lines\n"
            "  -h, --help               show this help\n"
            "\n"
            "results.tsv has one row per run (policies x conditions x repetitions):\n"
            "  condition, label, policy (entry name), residency_policy, repetition,\n"
            "  run_status (exit status of the run process, 128+N for signal N; empty when\n"
            "  it did not start), load_ns, staging_ns, ttft_ns, end_to_end_ns (the\n"
            "  report's timing.*_ns), decode_tokens_per_s ((generated tokens - 1) /\n"
            "  timing.decode_ns), process_ns (bench's clock around the process: exec and\n"
            "  report writing included), peak_rss_bytes (ledger ProcessRssPeak),\n"
            "  rusage_maxrss_bytes (wait4 ru_maxrss of the process: also for policy off,\n"
            "  which keeps no ledger), mapping_rss_bytes (ledger FileBackedResident),\n"
            "  cgroup_current_bytes, cgroup_peak_bytes (ledger CgroupCurrent, CgroupPeak:\n"
            "  the whole cgroup), token_fingerprint, the verification (prep_method and\n"
            "  page counts) and the report's path. An unknown or absent figure is an\n"
            "  empty cell, never 0.\n"
            "\n"
            "summary.json gives, per condition and policy, the counts of each label and\n"
            "the medians of every figure over the runs that completed with the\n"
            "condition's own label (warm: warm; isolated-nonresident: controlled): runs\n"
            "of other labels are counted, never mixed in; ratio_to_off is the median\n"
            "end-to-end time and TTFT over those of the 'off' entry in the same condition\n"
            "of this bench run (null without one). physical_limit: the isolated copy,\n"
            "dropped from the cache and verified, read cold three times with %u MiB reads\n"
            "and timed (the fastest counts):\n"
            "bytes, seconds, MB/s, and limit_seconds = model size / that bandwidth, the\n"
            "time below which no cold load of this file on this disk can go.\n"
            "\n"
            "Exit status: 0 when at least one run completed, 1 when none could (the\n"
            "summaries are still written), 2 for a bad command line or run arguments\n"
            "that 'run' rejects.\n",
            RF_PROGRAM, RF_PROGRAM, BENCH_DEFAULT_PROMPT, BENCH_DEFAULT_N_PREDICT,
            BENCH_MAX_REPETITIONS, BENCH_DEFAULT_REPETITIONS, BENCH_DEFAULT_POLICIES,
            BENCH_DEFAULT_CONDITIONS, BENCH_IO_BYTES >> 20);
}

enum {
    OPT_POLICIES = 256,
    OPT_POLICY_ARGS,
    OPT_RUN_ARGS,
    OPT_CONDITIONS,
    OPT_COPY_DIR,
    OPT_KEEP_COPY,
};

static void options_free(struct bench_options *o)
{
    for (size_t i = 0; i < o->n_common; i++)
        free(o->common_args[i]);
    for (size_t v = 0; v < o->n_variants; v++)
        for (size_t i = 0; i < o->variants[v].n_args; i++)
            free(o->variants[v].args[i]);
}

/* Run options bench sets itself (long forms; also matched as --opt=value). */
static const char *const reserved_long[] = {
    "--model",   "--prompt",           "--n-predict",
    "--threads", "--residency-policy", "--residency-report-json",
    "--hold"};

/* NULL when word may be passed to run, else the reserved option it names. */
static const char *reserved_arg(const char *word)
{
    static const char shorts[] = "mpnt";
    for (size_t i = 0; i < sizeof(reserved_long) / sizeof(reserved_long[0]); i++) {
        size_t len = strlen(reserved_long[i]);
        if (strncmp(word, reserved_long[i], len) == 0 && (word[len] == '\0' || word[len] == '='))
            return reserved_long[i];
    }
    if (word[0] == '-' && word[1] && strchr(shorts, word[1])) {
        static char shortopt[3] = "-?";
        shortopt[1] = word[1];
        return shortopt;
    }
    return NULL;
}

/*
 * Splits s at spaces and tabs and appends the words (strdup'd) to
 * words[*n..]. Returns false after a usage message (too many words, a
 * reserved option, out of memory).
 */
static bool split_args(const char *opt, const char *s, char **words, size_t *n)
{
    const char *p = s;
    while (*p) {
        while (*p == ' ' || *p == '\t')
            p++;
        if (!*p)
            break;
        const char *end = p;
        while (*end && *end != ' ' && *end != '\t')
            end++;
        if (*n >= BENCH_MAX_ARGS) {
            cli_usage_error("bench ", "too many run arguments in %s (at most %d per run)", opt,
                            BENCH_MAX_ARGS);
            return false;
        }
        char *w = strndup(p, (size_t)(end - p));
        if (!w) {
            cli_error("out of memory");
            return false;
        }
        const char *r = reserved_arg(w);
        if (r) {
            cli_usage_error("bench ", "%s: '%s' is set by bench itself (use bench's own option)%s",
                            opt, w, strcmp(r, "--hold") == 0 ? "; --hold would never end" : "");
            free(w);
            return false;
        }
        words[(*n)++] = w;
        p = end;
    }
    return true;
}

static bool valid_name(const char *s, size_t len)
{
    if (len == 0 || len > BENCH_NAME_MAX)
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '+' || c == '-'))
            return false;
    }
    return true;
}

/* --policies LIST into o->variants. Returns false after a usage message. */
static bool parse_policies(const char *list, struct bench_options *o)
{
    const char *p = list;

    for (size_t v = 0; v < o->n_variants; v++) /* a repeated --policies replaces the list */
        for (size_t i = 0; i < o->variants[v].n_args; i++)
            free(o->variants[v].args[i]);
    o->n_variants = 0;
    for (;;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char entry[128];
        if (len == 0 || len >= sizeof(entry)) {
            cli_usage_error("bench ", "invalid --policies '%s': %s", list,
                            len ? "an entry is too long" : "an entry is empty");
            return false;
        }
        memcpy(entry, p, len);
        entry[len] = '\0';
        char *eq = strchr(entry, '=');
        const char *name = entry, *policy = eq ? eq + 1 : entry;
        if (eq)
            *eq = '\0';
        if (o->n_variants >= BENCH_MAX_VARIANTS) {
            cli_usage_error("bench ", "too many --policies entries (at most %d)",
                            BENCH_MAX_VARIANTS);
            return false;
        }
        struct bench_variant *var = &o->variants[o->n_variants];
        memset(var, 0, sizeof(*var));
        if (rf_policy_parse(policy, &var->policy) < 0) {
            cli_usage_error("bench ",
                            "unknown policy '%s' in --policies (expected off, observe, "
                            "conservative, memory-bound, reuse-aware or active)",
                            policy);
            return false;
        }
        if (!valid_name(name, strlen(name))) {
            cli_usage_error("bench ",
                            "invalid policy name '%s' in --policies: 1 to %d letters, digits, "
                            "'.', '_', '+' or '-'",
                            name, BENCH_NAME_MAX);
            return false;
        }
        for (size_t i = 0; i < o->n_variants; i++) {
            if (strcmp(o->variants[i].name, name) == 0) {
                cli_usage_error("bench ",
                                "policy '%s' is listed twice in --policies (name "
                                "the entries: NAME=POLICY)",
                                name);
                return false;
            }
        }
        snprintf(var->name, sizeof(var->name), "%s", name);
        o->n_variants++;
        if (!end)
            return true;
        p = end + 1;
    }
}

/* --conditions LIST into o->conditions. Returns false after a usage message. */
static bool parse_conditions(const char *list, struct bench_options *o)
{
    const char *p = list;

    o->n_conditions = 0;
    for (;;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char entry[64];
        enum bench_condition c;
        snprintf(entry, sizeof(entry), "%.*s", (int)(len < sizeof(entry) ? len : 0), p);
        if (len >= sizeof(entry) || bench_condition_parse(entry, &c) < 0) {
            cli_usage_error("bench ",
                            "unknown condition '%.*s' in --conditions (expected warm or "
                            "isolated-nonresident)",
                            (int)len, p);
            return false;
        }
        for (size_t i = 0; i < o->n_conditions; i++) {
            if (o->conditions[i] == c) {
                cli_usage_error("bench ", "condition '%s' is listed twice in --conditions", entry);
                return false;
            }
        }
        o->conditions[o->n_conditions++] = c;
        if (!end)
            return true;
        p = end + 1;
    }
}

/* Applies the raw --policy-args NAME=ARGS to their entries. */
static bool apply_policy_args(struct bench_options *o)
{
    for (size_t k = 0; k < o->n_policy_args; k++) {
        const char *s = o->policy_args[k];
        const char *eq = strchr(s, '=');
        size_t v;
        if (!eq || eq == s) {
            cli_usage_error("bench ", "invalid --policy-args '%s': expected NAME=ARGS", s);
            return false;
        }
        for (v = 0; v < o->n_variants; v++)
            if (strlen(o->variants[v].name) == (size_t)(eq - s) &&
                strncmp(o->variants[v].name, s, (size_t)(eq - s)) == 0)
                break;
        if (v == o->n_variants) {
            cli_usage_error("bench ", "--policy-args '%s': no entry named '%.*s' in --policies", s,
                            (int)(eq - s), s);
            return false;
        }
        if (!split_args("--policy-args", eq + 1, o->variants[v].args, &o->variants[v].n_args))
            return false;
        if (o->n_common + o->variants[v].n_args > BENCH_MAX_ARGS) {
            cli_usage_error("bench ", "too many run arguments for '%s' (at most %d per run)",
                            o->variants[v].name, BENCH_MAX_ARGS);
            return false;
        }
    }
    return true;
}

static bool has_word(char *const *words, size_t n, const char *opt)
{
    size_t len = strlen(opt);
    for (size_t i = 0; i < n; i++)
        if (strncmp(words[i], opt, len) == 0 && (words[i][len] == '\0' || words[i][len] == '='))
            return true;
    return false;
}

/* Returns -1 to continue, or the exit status. */
static int parse_options(int argc, char **argv, struct bench_options *o)
{
    static const struct option opts[] = {
        {"model", required_argument, NULL, 'm'},
        {"output", required_argument, NULL, 'o'},
        {"prompt", required_argument, NULL, 'p'},
        {"n-predict", required_argument, NULL, 'n'},
        {"threads", required_argument, NULL, 't'},
        {"repetitions", required_argument, NULL, 'r'},
        {"policies", required_argument, NULL, OPT_POLICIES},
        {"policy-args", required_argument, NULL, OPT_POLICY_ARGS},
        {"run-args", required_argument, NULL, OPT_RUN_ARGS},
        {"conditions", required_argument, NULL, OPT_CONDITIONS},
        {"copy-dir", required_argument, NULL, OPT_COPY_DIR},
        {"keep-copy", no_argument, NULL, OPT_KEEP_COPY},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *policies = BENCH_DEFAULT_POLICIES, *conditions = BENCH_DEFAULT_CONDITIONS;
    int c;

    o->prompt = BENCH_DEFAULT_PROMPT;
    o->n_predict = BENCH_DEFAULT_N_PREDICT;
    o->repetitions = BENCH_DEFAULT_REPETITIONS;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":m:o:p:n:t:r:qh", opts, NULL)) != -1) {
        switch (c) {
        case 'm':
            o->model = optarg;
            break;
        case 'o':
            o->out_dir = optarg;
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
        case 'r':
            if (!cli_parse_int("repetition count (-r)", optarg, 1, BENCH_MAX_REPETITIONS,
                               &o->repetitions))
                return RF_EXIT_USAGE;
            break;
        case OPT_POLICIES:
            policies = optarg;
            break;
        case OPT_POLICY_ARGS:
            if (o->n_policy_args >= BENCH_MAX_POLICY_ARGS) {
                cli_usage_error("bench ", "too many --policy-args (at most %d)",
                                BENCH_MAX_POLICY_ARGS);
                return RF_EXIT_USAGE;
            }
            o->policy_args[o->n_policy_args++] = optarg;
            break;
        case OPT_RUN_ARGS:
            if (!split_args("--run-args", optarg, o->common_args, &o->n_common))
                return RF_EXIT_USAGE;
            break;
        case OPT_CONDITIONS:
            conditions = optarg;
            break;
        case OPT_COPY_DIR:
            o->copy_dir = optarg;
            break;
        case OPT_KEEP_COPY:
            o->keep_copy = true;
            break;
        case 'q':
            o->quiet = true;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            return cli_bad_option("bench ", c, argv);
        }
    }
    if (optind < argc) {
        cli_usage_error("bench ", "unexpected argument '%s'", argv[optind]);
        return RF_EXIT_USAGE;
    }
    if (!o->model) {
        cli_usage_error("bench ", "missing -m/--model PATH");
        return RF_EXIT_USAGE;
    }
    if (!o->out_dir || !*o->out_dir) {
        cli_usage_error("bench ", "missing -o/--output DIR");
        return RF_EXIT_USAGE;
    }
    if (o->copy_dir && !*o->copy_dir) {
        cli_usage_error("bench ", "--copy-dir is empty");
        return RF_EXIT_USAGE;
    }
    if (!*o->prompt) {
        cli_usage_error("bench ", "the prompt is empty");
        return RF_EXIT_USAGE;
    }
    if (!parse_policies(policies, o) || !parse_conditions(conditions, o) || !apply_policy_args(o))
        return RF_EXIT_USAGE;
    for (size_t v = 0; v < o->n_variants; v++) {
        const struct bench_variant *var = &o->variants[v];
        if (rf_policy_requires_target(var->policy) &&
            !has_word(o->common_args, o->n_common, "--memory-target") &&
            !has_word(var->args, var->n_args, "--memory-target")) {
            cli_usage_error("bench ",
                            "policy '%s' (%s) needs a target: --policy-args '%s=--memory-target "
                            "SIZE' or --run-args '--memory-target SIZE'",
                            var->name, rf_policy_name(var->policy), var->name);
            return RF_EXIT_USAGE;
        }
    }
    return -1;
}

/* Like mkdir -p. Returns 0 or -errno (-ENOTDIR when PATH or a parent is not a directory). */
static int mkdir_p(const char *path)
{
    char buf[PATH_MAX];
    struct stat st;

    if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
        return -ENAMETOOLONG;
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0755) < 0 && errno != EEXIST)
            return -errno;
        *p = '/';
    }
    if (mkdir(buf, 0755) < 0 && errno != EEXIST)
        return -errno;
    if (stat(buf, &st) < 0)
        return -errno;
    return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

/* Creates DIR (and parents) and checks a file can be created in it. */
static int prepare_dir(const char *dir)
{
    char tmp[PATH_MAX];
    int rc = mkdir_p(dir), fd;

    if (rc < 0)
        return rc;
    if (snprintf(tmp, sizeof(tmp), "%s/.ramforge-bench.XXXXXX", dir) >= (int)sizeof(tmp))
        return -ENAMETOOLONG;
    fd = mkstemp(tmp);
    if (fd < 0)
        return -errno;
    close(fd);
    unlink(tmp);
    return 0;
}

/*
 * The message of a run's stderr: its last "ramforge: " line without that
 * prefix, else its last non-empty line; at most len - 1 bytes, "" if none.
 */
static void run_message(const char *path, char *out, size_t len)
{
    static const char prefix[] = RF_PROGRAM ": ";
    char buf[4096], *line, *pick = NULL, *save = NULL;
    ssize_t n = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);

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

/*
 * Runs `ramforge run` for row r on model_path: stdin /dev/null, stdout and
 * stderr into base.out / base.err, the report into base.json. Sets
 * r->run_status, process_ns and the rusage figure. Returns 0 or -errno of
 * posix_spawn/wait4 (the row is then not started).
 */
static int spawn_run(const struct bench_options *o, struct bench_row *r, const char *model_path,
                     const char *base)
{
    const struct bench_variant *var = &o->variants[r->variant];
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
    r->v[M_PROCESS] = (struct bench_value){.has = true, .u = rf_now_ns() - t0};
    if (ru.ru_maxrss > 0)
        r->v[M_MAXRSS] = (struct bench_value){.has = true, .u = (uint64_t)ru.ru_maxrss * 1024};
    r->run_status = WIFEXITED(wst) ? WEXITSTATUS(wst) : 128 + WTERMSIG(wst);
    return 0;
}

/* obj.key as a non-negative integer into *v (left unknown otherwise). */
static void get_u64(json_t *obj, const char *key, struct bench_value *v)
{
    json_t *j = json_object_get(obj, key);
    if (json_is_integer(j) && json_integer_value(j) >= 0)
        *v = (struct bench_value){.has = true, .u = (uint64_t)json_integer_value(j)};
}

/* Reads the run's report into r's metrics. Returns 0 or -errno / -EBADMSG. */
static int read_report(const char *path, struct bench_row *r, char *err, size_t errlen)
{
    json_error_t je;
    json_t *doc = json_load_file(path, 0, &je);

    if (!doc) {
        snprintf(err, errlen, "cannot read the report %s: %s", path, je.text);
        return -EBADMSG;
    }
    json_t *timing = json_object_get(doc, "timing");
    get_u64(timing, "model_load_ns", &r->v[M_LOAD]);
    get_u64(timing, "staging_ns", &r->v[M_STAGING]);
    get_u64(timing, "ttft_ns", &r->v[M_TTFT]);
    get_u64(timing, "end_to_end_ns", &r->v[M_E2E]);

    json_t *output = json_object_get(doc, "output");
    struct bench_value decode = {0}, generated = {0};
    get_u64(timing, "decode_ns", &decode);
    get_u64(output, "n_generated_tokens", &generated);
    if (decode.has && decode.u > 0 && generated.has && generated.u >= 2) {
        double tps = (double)(generated.u - 1) * 1e9 / (double)decode.u;
        /* 3 decimals, as results.tsv prints it: the medians use the same values */
        double rounded = (double)(long long)(tps * 1000.0 + 0.5) / 1000.0;
        r->v[M_DECODE_TPS] = (struct bench_value){.has = true, .d = rounded};
    }
    const char *fp = json_string_value(json_object_get(output, "token_fingerprint"));
    if (fp)
        snprintf(r->fingerprint, sizeof(r->fingerprint), "%s", fp);

    static const struct {
        const char *category;
        enum bench_metric m;
    } ledger_map[] = {
        {"ProcessRssPeak", M_PEAK_RSS},
        {"FileBackedResident", M_MAPPING_RSS},
        {"CgroupCurrent", M_CG_CURRENT},
        {"CgroupPeak", M_CG_PEAK},
    };
    json_t *entries = json_object_get(json_object_get(doc, "ledger"), "entries");
    size_t i;
    json_t *e;
    json_array_foreach(entries, i, e) {
        const char *cat = json_string_value(json_object_get(e, "category"));
        for (size_t k = 0; cat && k < sizeof(ledger_map) / sizeof(ledger_map[0]); k++)
            if (strcmp(cat, ledger_map[k].category) == 0)
                get_u64(e, "value_bytes", &r->v[ledger_map[k].m]);
    }
    json_decref(doc);
    return 0;
}

/* The label a completed run must have for the medians of its condition. */
static enum bench_label own_label(enum bench_condition c)
{
    return c == BENCH_COND_WARM ? BENCH_LABEL_WARM : BENCH_LABEL_CONTROLLED;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double value_of(const struct bench_value *v, enum bench_metric m)
{
    return metric_info[m].real ? v->d : (double)v->u;
}

/*
 * The median of metric m over the rows of (cond, variant) that completed
 * with the condition's own label; false when none has the figure. scratch
 * holds at least n_rows doubles.
 */
static bool group_median(const struct bench_row *rows, size_t n_rows, enum bench_condition cond,
                         size_t variant, enum bench_metric m, double *scratch, double *out)
{
    size_t n = 0;
    for (size_t i = 0; i < n_rows; i++) {
        const struct bench_row *r = &rows[i];
        if (r->cond == cond && r->variant == variant && r->run_status == 0 &&
            r->label == own_label(cond) && r->v[m].has)
            scratch[n++] = value_of(&r->v[m], m);
    }
    if (n == 0)
        return false;
    qsort(scratch, n, sizeof(double), cmp_double);
    *out = n % 2 ? scratch[n / 2] : (scratch[n / 2 - 1] + scratch[n / 2]) / 2.0;
    return true;
}

/* An integral value as a JSON integer (exact below 2^53), else a real. */
static json_t *json_number(double x)
{
    if (x >= 0 && x < 9007199254740992.0 && (double)(json_int_t)x == x)
        return json_integer((json_int_t)x);
    return json_real(x);
}

static json_t *json_u64_or_null(bool has, uint64_t v)
{
    return has && v <= (uint64_t)INT64_MAX ? json_integer((json_int_t)v) : json_null();
}

static json_t *json_str_or_null(const char *s)
{
    json_t *j = s && *s ? json_string(s) : NULL;
    return j ? j : json_null();
}

static void tsv_value(FILE *f, const struct bench_value *v, enum bench_metric m)
{
    if (!v->has)
        return;
    if (metric_info[m].real)
        fprintf(f, "%.3f", v->d);
    else
        fprintf(f, "%" PRIu64, v->u);
}

/* Writes path through a temporary file and a rename. Returns 0 or -errno. */
static int write_tsv(const char *path, const struct bench_options *o, const struct bench_row *rows,
                     size_t n_rows)
{
    char tmp[PATH_MAX];
    int fd, rc = 0;
    FILE *f;

    if (snprintf(tmp, sizeof(tmp), "%s.tmp.XXXXXX", path) >= (int)sizeof(tmp))
        return -ENAMETOOLONG;
    fd = mkstemp(tmp);
    if (fd < 0)
        return -errno;
    f = fdopen(fd, "w");
    if (!f) {
        rc = -errno;
        close(fd);
        unlink(tmp);
        return rc;
    }
    fprintf(f, "%s\n", TSV_COLUMNS);
    for (size_t i = 0; i < n_rows; i++) {
        const struct bench_row *r = &rows[i];
        const struct bench_variant *var = &o->variants[r->variant];
        fprintf(f, "%s\t%s\t%s\t%s\t%lld\t", bench_condition_name(r->cond),
                bench_label_name(r->label), var->name, rf_policy_name(var->policy), r->rep);
        if (r->run_status >= 0)
            fprintf(f, "%d", r->run_status);
        for (int m = 0; m < M_N; m++) {
            fputc('\t', f);
            tsv_value(f, &r->v[m], (enum bench_metric)m);
        }
        fprintf(f, "\t%s\t", r->fingerprint);
        if (r->probed)
            fprintf(f, "%s\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64,
                    rfsys_page_method_name(r->prep.method), r->prep.resident_pages,
                    r->prep.nonresident_pages, r->prep.unknown_pages);
        else
            fputs("\t\t\t", f);
        fprintf(f, "\t%s\n", r->report);
    }
    if (fflush(f) != 0 || fsync(fd) < 0)
        rc = -errno;
    if (fclose(f) != 0 && rc == 0)
        rc = -errno;
    if (rc == 0 && (chmod(tmp, 0644) < 0 || rename(tmp, path) < 0))
        rc = -errno;
    if (rc < 0)
        unlink(tmp);
    return rc;
}

static json_t *labels_json(const unsigned counts[BENCH_LABEL_N])
{
    json_t *j = json_object();
    for (int l = 0; j && l < BENCH_LABEL_N; l++)
        json_object_set_new(j, bench_label_name((enum bench_label)l), json_integer(counts[l]));
    return j;
}

static json_t *physical_limit_json(const struct bench_copy *cp)
{
    json_t *j = json_object();
    bool ok = cp->read_measured && cp->read_ns > 0 && cp->read_bytes > 0;
    double secs = ok ? (double)cp->read_ns / 1e9 : 0, bw = ok ? (double)cp->read_bytes / secs : 0;
    const char *reason = NULL;

    if (!cp->wanted)
        reason = "no isolated-nonresident condition: no cold copy was read";
    else if (!cp->made)
        reason = "the isolated copy could not be made";
    else if (!ok)
        reason = cp->read_error[0] ? cp->read_error : "the cold read did not run";
    json_object_set_new(j, "bytes", json_u64_or_null(ok, cp->read_bytes));
    json_object_set_new(j, "read_seconds", ok ? json_real(secs) : json_null());
    json_object_set_new(j, "read_mb_per_s", ok ? json_real(bw / 1e6) : json_null());
    json_object_set_new(j, "limit_seconds",
                        ok ? json_real((double)cp->info.bytes / bw) : json_null());
    json_object_set_new(j, "label",
                        ok ? json_string(bench_label_name(cp->read_label)) : json_null());
    json_object_set_new(j, "method",
                        json_string("the isolated copy fsync'd, dropped with POSIX_FADV_DONTNEED "
                                    "and verified, then read start to end with 8 MiB "
                                    "read(2)s (POSIX_FADV_SEQUENTIAL), timed with "
                                    "CLOCK_MONOTONIC, three times, the fastest kept; MB = 10^6 "
                                    "bytes; limit_seconds = model "
                                    "size / that bandwidth. label: the copy's verified state "
                                    "before the read (controlled: every page nonresident)"));
    json_object_set_new(j, "reason", json_str_or_null(reason));
    return j;
}

static json_t *summary_json(const struct bench_options *o, const char *model_path,
                            uint64_t model_bytes, const struct bench_row *rows, size_t n_rows,
                            const struct bench_copy *cp)
{
    json_t *doc = json_object(), *a, *groups = json_array(), *fps = json_array();
    double *scratch = malloc((n_rows ? n_rows : 1) * sizeof(double));
    size_t completed = 0;
    char exe[PATH_MAX];
    ssize_t n_exe = readlink(BENCH_SELF_EXE, exe, sizeof(exe) - 1);

    if (!doc || !groups || !fps || !scratch) {
        json_decref(doc);
        json_decref(groups);
        json_decref(fps);
        free(scratch);
        return NULL;
    }
    exe[n_exe > 0 ? n_exe : 0] = '\0';
    json_object_set_new(doc, "schema_version", json_integer(1));
    json_object_set_new(doc, "kind", json_string("ramforge.bench.summary"));
    json_object_set_new(doc, "ramforge_version", json_string(RAMFORGE_VERSION));
    json_object_set_new(doc, "binary", json_str_or_null(exe));
    json_object_set_new(doc, "model",
                        json_pack("{s:o,s:I}", "path", json_str_or_null(model_path), "size_bytes",
                                  (json_int_t)model_bytes));
    json_object_set_new(doc, "run",
                        json_pack("{s:o,s:I,s:o,s:I}", "prompt", json_str_or_null(o->prompt),
                                  "n_predict", (json_int_t)o->n_predict, "threads",
                                  o->n_threads > 0 ? json_integer(o->n_threads) : json_null(),
                                  "repetitions", (json_int_t)o->repetitions));
    a = json_array();
    for (size_t i = 0; a && i < o->n_conditions; i++)
        json_array_append_new(a, json_string(bench_condition_name(o->conditions[i])));
    json_object_set_new(doc, "conditions", a);

    a = json_array();
    for (size_t v = 0; a && v < o->n_variants; v++) {
        json_t *args = json_array();
        for (size_t i = 0; args && i < o->n_common; i++)
            json_array_append_new(args, json_str_or_null(o->common_args[i]));
        for (size_t i = 0; args && i < o->variants[v].n_args; i++)
            json_array_append_new(args, json_str_or_null(o->variants[v].args[i]));
        json_array_append_new(a,
                              json_pack("{s:s,s:s,s:o}", "name", o->variants[v].name,
                                        "residency_policy", rf_policy_name(o->variants[v].policy),
                                        "run_args", args ? args : json_null()));
    }
    json_object_set_new(doc, "policies", a);

    if (cp->wanted) {
        json_t *c = json_object();
        json_object_set_new(c, "path", json_str_or_null(cp->path));
        json_object_set_new(c, "made", json_boolean(cp->made));
        json_object_set_new(c, "error", json_str_or_null(cp->error));
        json_object_set_new(c, "bytes", json_u64_or_null(cp->made, cp->info.bytes));
        json_object_set_new(c, "copy_seconds",
                            cp->made ? json_real((double)cp->info.ns / 1e9) : json_null());
        json_object_set_new(c, "source_read", json_str_or_null(cp->info.source_note));
        json_object_set_new(c, "kept", json_boolean(cp->made && o->keep_copy));
        json_object_set_new(doc, "isolated_copy", c);
    } else {
        json_object_set_new(doc, "isolated_copy", json_null());
    }
    json_object_set_new(doc, "physical_limit", physical_limit_json(cp));

    size_t off = o->n_variants;
    for (size_t v = 0; v < o->n_variants; v++)
        if (strcmp(o->variants[v].name, "off") == 0)
            off = v;
    for (size_t ci = 0; ci < o->n_conditions; ci++) {
        enum bench_condition cond = o->conditions[ci];
        double off_e2e = 0, off_ttft = 0;
        bool has_off_e2e =
            off < o->n_variants && group_median(rows, n_rows, cond, off, M_E2E, scratch, &off_e2e);
        bool has_off_ttft = off < o->n_variants &&
                            group_median(rows, n_rows, cond, off, M_TTFT, scratch, &off_ttft);
        for (size_t v = 0; v < o->n_variants; v++) {
            unsigned counts[BENCH_LABEL_N] = {0};
            unsigned runs = 0, done = 0, median_runs = 0;
            for (size_t i = 0; i < n_rows; i++) {
                const struct bench_row *r = &rows[i];
                if (r->cond != cond || r->variant != v)
                    continue;
                runs++;
                counts[r->label]++;
                done += r->run_status == 0;
                median_runs += r->run_status == 0 && r->label == own_label(cond);
            }
            json_t *g = json_object(), *med = json_object(), *ratio = json_object();
            double e2e = 0, ttft = 0;
            for (int m = 0; m < M_N; m++) {
                double x;
                bool has = group_median(rows, n_rows, cond, v, (enum bench_metric)m, scratch, &x);
                json_object_set_new(med, metric_info[m].name,
                                    has ? (metric_info[m].real ? json_real(x) : json_number(x))
                                        : json_null());
                if (m == M_E2E && has)
                    e2e = x;
                if (m == M_TTFT && has)
                    ttft = x;
            }
            bool has_e2e = json_is_number(json_object_get(med, "end_to_end_ns"));
            bool has_ttft = json_is_number(json_object_get(med, "ttft_ns"));
            json_object_set_new(ratio, "end_to_end",
                                has_e2e && has_off_e2e && off_e2e > 0 ? json_real(e2e / off_e2e)
                                                                      : json_null());
            json_object_set_new(ratio, "ttft",
                                has_ttft && has_off_ttft && off_ttft > 0
                                    ? json_real(ttft / off_ttft)
                                    : json_null());
            json_object_set_new(g, "condition", json_string(bench_condition_name(cond)));
            json_object_set_new(g, "policy", json_string(o->variants[v].name));
            json_object_set_new(g, "residency_policy",
                                json_string(rf_policy_name(o->variants[v].policy)));
            json_object_set_new(g, "runs", json_integer(runs));
            json_object_set_new(g, "completed", json_integer(done));
            json_object_set_new(g, "labels", labels_json(counts));
            json_object_set_new(g, "median_label", json_string(bench_label_name(own_label(cond))));
            json_object_set_new(g, "median_runs", json_integer(median_runs));
            json_object_set_new(g, "median", med);
            json_object_set_new(g, "ratio_to_off", ratio);
            json_array_append_new(groups, g);
        }
    }
    json_object_set_new(doc, "groups", groups);

    for (size_t i = 0; i < n_rows; i++) {
        bool seen = !rows[i].fingerprint[0];
        completed += rows[i].run_status == 0;
        for (size_t k = 0; !seen && k < json_array_size(fps); k++)
            seen = strcmp(json_string_value(json_array_get(fps, k)), rows[i].fingerprint) == 0;
        if (!seen)
            json_array_append_new(fps, json_string(rows[i].fingerprint));
    }
    json_object_set_new(doc, "token_fingerprints", fps);
    json_object_set_new(doc, "runs_total", json_integer((json_int_t)n_rows));
    json_object_set_new(doc, "runs_completed", json_integer((json_int_t)completed));
    json_object_set_new(
        doc, "note",
        json_string("medians over the runs that completed (run_status 0) with the condition's "
                    "own label (warm: warm; isolated-nonresident: controlled); runs of other "
                    "labels are counted in labels, never mixed into the medians. Timings are "
                    "the run reports' timing.*_ns (end_to_end excludes process start and "
                    "report writing; process_ns is bench's clock around the process). "
                    "ratio_to_off: the median over the median of the policy named 'off' in "
                    "the same condition of this bench run; null when it is absent or a median "
                    "is null. Labels describe the model file's page cache when the run process "
                    "started: not physical reclamation, PSS or mapping residency after load."));
    free(scratch);
    return doc;
}

/* The human summary on stdout: one line per group, then the physical limit. */
static void print_table(json_t *summary)
{
    json_t *groups = json_object_get(summary, "groups"), *g;
    size_t i;
    char b1[32], b2[32], b3[32];

    printf("%-21s %-14s %-5s %-22s %11s %11s %11s %7s %7s\n", "condition", "policy", "runs",
           "labels", "load", "ttft", "end-to-end", "e2e/off", "ttft/off");
    json_array_foreach(groups, i, g) {
        char labels[64] = "", runs[16];
        json_t *counts = json_object_get(g, "labels"), *med = json_object_get(g, "median");
        json_t *ratio = json_object_get(g, "ratio_to_off");
        const char *key;
        json_t *val;
        json_object_foreach(counts, key, val) {
            size_t len = strlen(labels);
            if (json_integer_value(val) > 0)
                snprintf(labels + len, sizeof(labels) - len, "%s%s %lld", len ? ", " : "", key,
                         (long long)json_integer_value(val));
        }
        snprintf(runs, sizeof(runs), "%lld/%lld",
                 (long long)json_integer_value(json_object_get(g, "completed")),
                 (long long)json_integer_value(json_object_get(g, "runs")));
        json_t *load = json_object_get(med, "load_ns"), *ttft = json_object_get(med, "ttft_ns");
        json_t *e2e = json_object_get(med, "end_to_end_ns");
        json_t *re = json_object_get(ratio, "end_to_end"), *rt = json_object_get(ratio, "ttft");
        char re_s[16] = "-", rt_s[16] = "-";
        if (json_is_number(re))
            snprintf(re_s, sizeof(re_s), "%.2f", json_number_value(re));
        if (json_is_number(rt))
            snprintf(rt_s, sizeof(rt_s), "%.2f", json_number_value(rt));
        printf(
            "%-21s %-14s %-5s %-22s %11s %11s %11s %7s %7s\n",
            json_string_value(json_object_get(g, "condition")),
            json_string_value(json_object_get(g, "policy")), runs, labels,
            json_is_number(load) ? cli_format_ns((uint64_t)json_number_value(load), b1, 32) : "-",
            json_is_number(ttft) ? cli_format_ns((uint64_t)json_number_value(ttft), b2, 32) : "-",
            json_is_number(e2e) ? cli_format_ns((uint64_t)json_number_value(e2e), b3, 32) : "-",
            re_s, rt_s);
    }
    json_t *pl = json_object_get(summary, "physical_limit");
    if (json_is_number(json_object_get(pl, "limit_seconds")))
        printf("physical limit: %s read cold (%s) in %.3f s = %.1f MB/s: no cold load of this "
               "file on this disk can take less than %.3f s\n",
               cli_format_bytes((uint64_t)json_integer_value(json_object_get(pl, "bytes")), false,
                                b1, sizeof(b1)),
               json_string_value(json_object_get(pl, "label")),
               json_number_value(json_object_get(pl, "read_seconds")),
               json_number_value(json_object_get(pl, "read_mb_per_s")),
               json_number_value(json_object_get(pl, "limit_seconds")));
    else
        printf("physical limit: not measured (%s)\n",
               json_string_value(json_object_get(pl, "reason")));
}

/*
 * Makes the isolated copy and measures the physical limit on it: copy,
 * flush and drop, verify, one timed read. Prints the one-line error of a
 * copy that cannot be made.
 */
static void make_copy(const struct bench_options *o, struct bench_copy *cp)
{
    const char *dir = o->copy_dir ? o->copy_dir : o->out_dir;
    const char *base = strrchr(o->model, '/');
    struct bench_residency res;
    char err[BENCH_ERR_MAX];
    int rc;

    base = base ? base + 1 : o->model;
    if (snprintf(cp->path, sizeof(cp->path), "%s/isolated-%s", dir, base) >=
        (int)sizeof(cp->path)) {
        snprintf(cp->error, sizeof(cp->error), "cannot write %s/isolated-%s: %s", dir, base,
                 strerror(ENAMETOOLONG));
        goto fail;
    }
    rc = mkdir_p(dir);
    if (rc < 0) {
        snprintf(cp->error, sizeof(cp->error), "cannot create directory %s: %s", dir,
                 strerror(-rc));
        goto fail;
    }
    rc = bench_copy_file(o->model, cp->path, !o->quiet && isatty(STDERR_FILENO), &cp->info,
                         cp->error);
    if (rc < 0)
        goto fail;
    cp->made = true;

    /*
     * The physical limit: the same copy, cold, read BENCH_LIMIT_READS times;
     * the fastest read counts (a shared machine only ever slows a read down).
     */
    for (int read = 0; read < BENCH_LIMIT_READS; read++) {
        uint64_t bytes, ns;
        for (int attempt = 1; attempt <= BENCH_PREPARE_ATTEMPTS; attempt++) {
            if (bench_evict_file(cp->path, cp->read_error) < 0)
                return;
            bench_probe_file(cp->path, &res);
            cp->read_label = bench_label_for(BENCH_COND_ISOLATED, &res);
            if (cp->read_label == BENCH_LABEL_CONTROLLED || cp->read_label == BENCH_LABEL_UNKNOWN)
                break;
        }
        if (bench_read_file(cp->path, &bytes, &ns, err) < 0) {
            snprintf(cp->read_error, sizeof(cp->read_error), "%s", err);
            return;
        }
        if (!cp->read_measured || ns < cp->read_ns) {
            cp->read_bytes = bytes;
            cp->read_ns = ns;
        }
        cp->read_measured = true;
    }
    return;
fail:
    cli_error("%s (isolated-nonresident runs are labeled failed)", cp->error);
}

/* Prepares row r's cache condition and verifies it; sets r->label. */
static void prepare_row(const struct bench_options *o, const struct bench_copy *cp,
                        struct bench_row *r)
{
    const char *path = r->cond == BENCH_COND_WARM ? o->model : cp->path;
    char err[BENCH_ERR_MAX];

    r->label = BENCH_LABEL_FAILED;
    if (r->cond == BENCH_COND_ISOLATED && !cp->made)
        return; /* its error was printed once */
    for (int attempt = 1; attempt <= BENCH_PREPARE_ATTEMPTS; attempt++) {
        if (r->cond == BENCH_COND_WARM ? bench_read_file(path, NULL, NULL, err) < 0
                                       : bench_evict_file(path, err) < 0) {
            cli_error("%s (run labeled failed)", err);
            r->probed = false;
            r->label = BENCH_LABEL_FAILED;
            return;
        }
        if (bench_probe_file(path, &r->prep) < 0) {
            cli_error("cannot probe the page cache of %s: %s (run labeled failed)", path,
                      strerror(-r->prep.error));
            r->probed = false;
            r->label = BENCH_LABEL_FAILED;
            return;
        }
        r->probed = true;
        r->label = bench_label_for(r->cond, &r->prep);
        if (r->label == own_label(r->cond) || r->label == BENCH_LABEL_UNKNOWN)
            return;
    }
}

/*
 * One run: prepares row r's condition, starts the run process, reads its
 * report. k is the row's index (for messages). Returns -1 to go on, or
 * the exit status that stops the bench: RF_EXIT_USAGE when 'run' rejected
 * the arguments, RF_EXIT_FAILURE when no process could be started.
 */
static int bench_one(const struct bench_options *o, const struct bench_copy *cp,
                     struct bench_row *r, size_t k, size_t n_rows)
{
    const char *cname = bench_condition_name(r->cond), *pname = o->variants[r->variant].name;
    char base[PATH_MAX], path[PATH_MAX], msg[BENCH_ERR_MAX], b1[32], b2[32];
    int rc;

    r->run_status = -1;
    prepare_row(o, cp, r);
    if (r->label == BENCH_LABEL_FAILED) {
        if (!o->quiet)
            fprintf(stderr, "[%zu/%zu] %s %s #%lld: failed (not run)\n", k + 1, n_rows, cname,
                    pname, r->rep);
        return -1;
    }
    snprintf(r->report, sizeof(r->report), "runs/%s-%s-%lld.json", cname, pname, r->rep);
    if (snprintf(base, sizeof(base), "%s/runs/%s-%s-%lld", o->out_dir, cname, pname, r->rep) >=
        (int)sizeof(base) - 5) {
        cli_error("cannot write %s/runs: %s", o->out_dir, strerror(ENAMETOOLONG));
        return RF_EXIT_FAILURE;
    }
    rc = spawn_run(o, r, r->cond == BENCH_COND_WARM ? o->model : cp->path, base);
    if (rc < 0) {
        cli_error("cannot start %s run: %s", BENCH_SELF_EXE, strerror(-rc));
        r->report[0] = '\0';
        return RF_EXIT_FAILURE;
    }
    snprintf(path, sizeof(path), "%s.err", base);
    if (r->run_status == RF_EXIT_USAGE) {
        run_message(path, msg, sizeof(msg));
        cli_error("'run' rejected the arguments of policy '%s': %s", pname, msg);
        /* A bad command line leaves nothing behind: this run's captured output goes. */
        static const char *const exts[] = {".out", ".err", ".json"};
        for (size_t i = 0; i < sizeof(exts) / sizeof(exts[0]); i++) {
            char leftover[PATH_MAX + 8];
            snprintf(leftover, sizeof(leftover), "%s%s", base, exts[i]);
            unlink(leftover);
        }
        return RF_EXIT_USAGE;
    }
    if (r->run_status != 0) {
        run_message(path, msg, sizeof(msg));
        cli_error("run %zu (%s %s #%lld) exited with status %d: %s", k + 1, cname, pname, r->rep,
                  r->run_status, msg);
        r->report[0] = '\0';
        return -1;
    }
    snprintf(path, sizeof(path), "%s.json", base);
    if (read_report(path, r, msg, sizeof(msg)) < 0) {
        cli_error("%s", msg);
        r->report[0] = '\0';
    }
    if (!o->quiet)
        fprintf(stderr, "[%zu/%zu] %s %s #%lld: %s, ttft %s, end-to-end %s\n", k + 1, n_rows,
                cname, pname, r->rep, bench_label_name(r->label),
                r->v[M_TTFT].has ? cli_format_ns(r->v[M_TTFT].u, b1, sizeof(b1)) : "-",
                r->v[M_E2E].has ? cli_format_ns(r->v[M_E2E].u, b2, sizeof(b2)) : "-");
    return -1;
}

/* Checks MODEL is a regular file this process can open; *st gets its fstat. */
static bool model_usable(const char *model, struct stat *st)
{
    int fd = open(model, O_RDONLY | O_CLOEXEC);
    int rc = fd < 0 || fstat(fd, st) < 0 ? -errno : 0;

    if (fd >= 0)
        close(fd);
    if (rc == 0 && !S_ISREG(st->st_mode)) {
        cli_error("cannot open %s: not a regular file", model);
        return false;
    }
    if (rc < 0)
        cli_error("cannot open %s: %s", model, strerror(-rc));
    return rc == 0;
}

int cmd_bench(int argc, char **argv)
{
    struct bench_options o;
    struct bench_copy *cp = NULL;
    struct bench_row *rows = NULL;
    json_t *summary = NULL;
    char path[PATH_MAX];
    struct stat st;
    size_t n_rows = 0, k = 0, completed = 0;
    int rc, status = RF_EXIT_FAILURE;

    memset(&o, 0, sizeof(o));
    rc = parse_options(argc, argv, &o);
    if (rc >= 0) {
        status = rc;
        goto out;
    }
    if (!model_usable(o.model, &st))
        goto out;
    rc = prepare_dir(o.out_dir);
    if (rc == 0) {
        snprintf(path, sizeof(path), "%s/runs", o.out_dir);
        rc = prepare_dir(path);
    }
    if (rc < 0) {
        cli_error("cannot write the output directory %s: %s", o.out_dir, strerror(-rc));
        goto out;
    }
    n_rows = o.n_conditions * (size_t)o.repetitions * o.n_variants;
    rows = calloc(n_rows, sizeof(*rows));
    cp = calloc(1, sizeof(*cp));
    if (!rows || !cp) {
        cli_error("out of memory");
        goto out;
    }
    for (size_t ci = 0; ci < o.n_conditions; ci++) {
        if (o.conditions[ci] == BENCH_COND_ISOLATED) {
            cp->wanted = true;
            make_copy(&o, cp);
        }
        for (long long rep = 1; rep <= o.repetitions; rep++) {
            for (size_t v = 0; v < o.n_variants; v++, k++) {
                rows[k].cond = o.conditions[ci];
                rows[k].variant = v;
                rows[k].rep = rep;
                rc = bench_one(&o, cp, &rows[k], k, n_rows);
                if (rc >= 0) {
                    status = rc;
                    goto out;
                }
                completed += rows[k].run_status == 0;
            }
        }
    }

    snprintf(path, sizeof(path), "%s/results.tsv", o.out_dir);
    rc = write_tsv(path, &o, rows, n_rows);
    if (rc < 0) {
        cli_error("cannot write %s: %s", path, strerror(-rc));
        goto out;
    }
    summary = summary_json(&o, o.model, (uint64_t)st.st_size, rows, n_rows, cp);
    if (!summary) {
        cli_error("out of memory");
        goto out;
    }
    snprintf(path, sizeof(path), "%s/summary.json", o.out_dir);
    rc = rf_json_write_file(summary, path);
    if (rc < 0) {
        cli_error("cannot write %s: %s", path, strerror(-rc));
        goto out;
    }
    print_table(summary);
    if (completed == 0) {
        cli_error("no run completed (see %s/results.tsv)", o.out_dir);
        goto out;
    }
    status = 0;
out:
    if (cp && cp->made && !o.keep_copy)
        unlink(cp->path);
    json_decref(summary);
    free(cp);
    free(rows);
    options_free(&o);
    return status;
}
