/*
 * The command line of `ramforge bench` (see bench_options.h): getopt_long
 * over bench's options, the --policies / --conditions lists, the run
 * arguments bench passes on (split at spaces, checked against the options
 * bench sets itself), and the usage text.
 */
#include "bench_options.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cli.h"
#include "ramforge/tools/defaults.h"

#define BENCH_MAX_REPETITIONS 1000
#define BENCH_DEFAULT_N_PREDICT 16
#define BENCH_DEFAULT_REPETITIONS 3
#define BENCH_DEFAULT_POLICIES "off,observe"
#define BENCH_DEFAULT_CONDITIONS "warm,isolated-nonresident"

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
            "                           reuse-aware, active, streaming. NAME (letters,\n"
            "                           digits, . _ + -;\n"
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
            "      --copy-dir DIR2      where the isolated copy goes (default DIR; free space\n"
            "                           is checked first); it is removed at the end unless\n"
            "                           --keep-copy, and when bench is interrupted\n"
            "      --keep-copy          keep the isolated copy\n"
            "      --metrics-file PATH  also write summary.json's medians, ratios and run\n"
            "                           counts per condition and policy as Prometheus text\n"
            "                           (ramforge_bench_*, label model=-m's path) for\n"
            "                           node_exporter's textfile collector (temporary file +\n"
            "                           rename: never partial)\n"
            "      --memory-limit SIZE  run each run process in a fresh child memory cgroup\n"
            "                           (v1 memory.limit_in_bytes or v2 memory.max = SIZE,\n"
            "                           e.g. 900MiB) made below bench's own memory cgroup,\n"
            "                           joined between fork and exec and removed after the\n"
            "                           run (also when it fails or bench is interrupted).\n"
            "                           Needs root (or a delegated cgroup); otherwise each\n"
            "                           run is labeled failed with the reason. Adds one warm\n"
            "                           unlimited calibration run (policy observe) for t_c\n"
            "                           and the per-token bound t_c + max(0, W - R) / B.\n"
            "                           Use it with isolated-nonresident: pages cached\n"
            "                           before a run stay charged to bench's cgroup, so\n"
            "                           under warm the limit does not bite on the weights\n"
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
            "  the whole cgroup), major_faults and read_bytes (wait4 ru_majflt, ru_inblock\n"
            "  x 512 of the run process), with --memory-limit the run cgroup's\n"
            "  run_cgroup_limit_bytes, _failcnt (v1), _events_high, _events_max,\n"
            "  _events_oom (v2), _oom_kill, _peak_bytes, token_fingerprint, the\n"
            "  verification (prep_method and page counts), the report's path and\n"
            "  failure_reason (why a run failed: its error line, oom-killed, no cgroup).\n"
            "  An unknown or absent figure is an empty cell, never 0.\n"
            "\n"
            "summary.json gives, per condition and policy, the counts of each label and\n"
            "the medians of every figure over the runs that completed with the\n"
            "condition's own label (warm: warm; isolated-nonresident: controlled): runs\n"
            "of other labels are counted, never mixed in; ratio_to_off is the median\n"
            "end-to-end time and TTFT over those of the 'off' entry in the same condition\n"
            "of this bench run (null without one); decode_tokens_per_s: tokens/s over\n"
            "off's. With --memory-limit: memory_limit (the limit, the calibration run)\n"
            "and per group bound (t_c, W, R, B, bound_ns_per_token, ratio_to_bound:\n"
            "median per-token time / bound). physical_limit: the isolated copy,\n"
            "dropped from the cache and verified, read cold three times with %u MiB reads\n"
            "and timed (the fastest counts):\n"
            "bytes, seconds, MB/s, and limit_seconds = model size / that bandwidth, the\n"
            "time below which no cold load of this file on this disk can go.\n"
            "\n"
            "Exit status: 0 when at least one run completed, 1 when none could (the\n"
            "summaries are still written), 2 for a bad command line or run arguments\n"
            "that 'run' rejects.\n",
            RF_PROGRAM, RF_PROGRAM, RF_DEFAULT_PROMPT, BENCH_DEFAULT_N_PREDICT,
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
    OPT_METRICS_FILE,
    OPT_MEMORY_LIMIT,
};

void bench_options_free(struct bench_options *o)
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
            cli_usage_error("too many run arguments in %s (at most %d per run)", opt,
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
            cli_usage_error("%s: '%s' is set by bench itself (use bench's own option)%s", opt, w,
                            strcmp(r, "--hold") == 0 ? "; --hold would never end" : "");
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
            cli_usage_error("invalid --policies '%s': %s", list,
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
            cli_usage_error("too many --policies entries (at most %d)", BENCH_MAX_VARIANTS);
            return false;
        }
        struct bench_variant *var = &o->variants[o->n_variants];
        memset(var, 0, sizeof(*var));
        if (rf_policy_parse(policy, &var->policy) < 0) {
            cli_usage_error("unknown policy '%s' in --policies (expected off, observe, "
                            "conservative, memory-bound, reuse-aware, active or streaming)",
                            policy);
            return false;
        }
        if (!valid_name(name, strlen(name))) {
            cli_usage_error("invalid policy name '%s' in --policies: 1 to %d letters, digits, "
                            "'.', '_', '+' or '-'",
                            name, BENCH_NAME_MAX);
            return false;
        }
        for (size_t i = 0; i < o->n_variants; i++) {
            if (strcmp(o->variants[i].name, name) == 0) {
                cli_usage_error("policy '%s' is listed twice in --policies (name "
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
            cli_usage_error("unknown condition '%.*s' in --conditions (expected warm or "
                            "isolated-nonresident)",
                            (int)len, p);
            return false;
        }
        for (size_t i = 0; i < o->n_conditions; i++) {
            if (o->conditions[i] == c) {
                cli_usage_error("condition '%s' is listed twice in --conditions", entry);
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
            cli_usage_error("invalid --policy-args '%s': expected NAME=ARGS", s);
            return false;
        }
        for (v = 0; v < o->n_variants; v++)
            if (strlen(o->variants[v].name) == (size_t)(eq - s) &&
                strncmp(o->variants[v].name, s, (size_t)(eq - s)) == 0)
                break;
        if (v == o->n_variants) {
            cli_usage_error("--policy-args '%s': no entry named '%.*s' in --policies", s,
                            (int)(eq - s), s);
            return false;
        }
        if (!split_args("--policy-args", eq + 1, o->variants[v].args, &o->variants[v].n_args))
            return false;
        if (o->n_common + o->variants[v].n_args > BENCH_MAX_ARGS) {
            cli_usage_error("too many run arguments for '%s' (at most %d per run)",
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
int bench_options_parse(int argc, char **argv, struct bench_options *o)
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
        {"metrics-file", required_argument, NULL, OPT_METRICS_FILE},
        {"memory-limit", required_argument, NULL, OPT_MEMORY_LIMIT},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *policies = BENCH_DEFAULT_POLICIES, *conditions = BENCH_DEFAULT_CONDITIONS;
    int c;

    o->prompt = RF_DEFAULT_PROMPT;
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
                cli_usage_error("too many --policy-args (at most %d)", BENCH_MAX_POLICY_ARGS);
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
        case OPT_METRICS_FILE:
            o->metrics_path = optarg;
            break;
        case OPT_MEMORY_LIMIT:
            if (!cli_parse_size("--memory-limit", optarg, false, &o->memory_limit))
                return RF_EXIT_USAGE;
            break;
        case 'q':
            o->quiet = true;
            break;
        default: /* 'h' too */
            return cli_help_or_bad_option(c, argv, opts, usage);
        }
    }
    if (!cli_check_model_operands(argc, argv, o->model))
        return RF_EXIT_USAGE;
    if (!o->out_dir || !*o->out_dir) {
        cli_usage_error("missing -o/--output DIR");
        return RF_EXIT_USAGE;
    }
    if (o->copy_dir && !*o->copy_dir) {
        cli_usage_error("--copy-dir is empty");
        return RF_EXIT_USAGE;
    }
    if (!*o->prompt) {
        cli_usage_error("the prompt is empty");
        return RF_EXIT_USAGE;
    }
    if (!parse_policies(policies, o) || !parse_conditions(conditions, o) || !apply_policy_args(o))
        return RF_EXIT_USAGE;
    for (size_t v = 0; v < o->n_variants; v++) {
        const struct bench_variant *var = &o->variants[v];
        if (rf_policy_requires_target(var->policy) &&
            !has_word(o->common_args, o->n_common, "--memory-target") &&
            !has_word(var->args, var->n_args, "--memory-target")) {
            cli_usage_error("policy '%s' (%s) needs a target: --policy-args '%s=--memory-target "
                            "SIZE' or --run-args '--memory-target SIZE'",
                            var->name, rf_policy_name(var->policy), var->name);
            return RF_EXIT_USAGE;
        }
    }
    return -1;
}
