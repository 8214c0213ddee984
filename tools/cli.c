/* Shared helpers of the ramforge CLI (see cli.h). */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "ramforge/policy.h"
#include "ramforge/sys.h"

void cli_error(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s: ", RF_PROGRAM);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

void cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s: ", RF_PROGRAM);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry '%s %s--help' for more information.\n", RF_PROGRAM, cmd ? cmd : "");
}

int cli_bad_option(const char *cmd, int c, char **argv)
{
    const char *opt = argv[optind - 1];
    char shortopt[3] = {'-', (char)optopt, '\0'};

    if (optopt && strncmp(opt, "--", 2) != 0)
        opt = shortopt;
    if (c == ':')
        cli_usage_error(cmd, "option '%s' requires an argument", opt);
    else
        cli_usage_error(cmd, "unrecognized option '%s'", opt);
    return RF_EXIT_USAGE;
}

bool cli_parse_int(const char *what, const char *s, long long min, long long max, long long *out)
{
    char *end;
    long long v;

    errno = 0;
    v = strtoll(s, &end, 10);
    if (*s == '\0' || *end != '\0' || !(*s == '-' || *s == '+' || (*s >= '0' && *s <= '9'))) {
        cli_error("invalid %s '%s': not a whole number", what, s);
        return false;
    }
    if (errno == ERANGE || v < min || v > max) {
        cli_error("invalid %s '%s': must be between %lld and %lld", what, s, min, max);
        return false;
    }
    *out = v;
    return true;
}

const char *cli_format_bytes(uint64_t bytes, bool raw, char *buf, size_t len)
{
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double v = (double)bytes;
    int u = 0;

    if (raw || bytes < 1024) {
        snprintf(buf, len, "%" PRIu64 "%s", bytes, raw ? "" : " B");
        return buf;
    }
    while (v >= 1024.0 && u < 6) {
        v /= 1024.0;
        u++;
    }
    snprintf(buf, len, "%.2f %s", v, units[u]);
    return buf;
}

const char *cli_format_ns(uint64_t ns, char *buf, size_t len)
{
    if (ns >= 1000000000ull)
        snprintf(buf, len, "%.3f s", (double)ns / 1e9);
    else
        snprintf(buf, len, "%.3f ms", (double)ns / 1e6);
    return buf;
}

void cli_log_sink(enum rf_log_level level, const char *msg, void *user_data)
{
    (void)level;
    (void)user_data;
    fprintf(stderr, "%s\n", msg);
}

bool cli_parse_size(const char *cmd, const char *opt, const char *arg, bool allow_zero,
                    uint64_t *out)
{
    if (allow_zero && strcmp(arg, "0") == 0) {
        *out = 0;
        return true;
    }
    int rc = rf_parse_size(arg, out);
    /* Reports carry byte counts as JSON integers: at most INT64_MAX (8 EiB - 1). */
    if (rc == 0 && *out > (uint64_t)INT64_MAX)
        rc = -EOVERFLOW;
    if (rc == -EOVERFLOW)
        cli_usage_error(cmd, "invalid size for %s '%s': too large (at most 8 EiB - 1)", opt, arg);
    else if (rc < 0)
        cli_usage_error(cmd,
                        "invalid size for %s '%s': expected a positive size such as "
                        "512MiB, 2G or 300000000",
                        opt, arg);
    return rc == 0;
}

bool cli_parse_policy(const char *cmd, const char *arg, enum rf_policy_profile *out)
{
    if (rf_policy_parse(arg, out) == 0)
        return true;
    cli_usage_error(cmd,
                    "unknown residency policy '%s' (expected off, observe, conservative, "
                    "memory-bound, reuse-aware, active or streaming)",
                    arg);
    return false;
}

bool cli_parse_release_mode(const char *cmd, const char *arg, enum forge_release_mode *out)
{
    if (!strcmp(arg, "dontneed")) {
        *out = FORGE_RELEASE_DONTNEED;
    } else if (!strcmp(arg, "pageout")) {
        *out = FORGE_RELEASE_PAGEOUT;
    } else {
        cli_usage_error(cmd, "unknown release mode '%s' (expected dontneed or pageout)", arg);
        return false;
    }
    return true;
}

bool cli_check_target(const char *cmd, enum rf_policy_profile policy, bool has_target,
                      uint64_t target_bytes, uint64_t reserve_bytes)
{
    if (rf_policy_requires_target(policy) && !has_target) {
        cli_usage_error(cmd, "--residency-policy %s needs --memory-target SIZE",
                        rf_policy_name(policy));
        return false;
    }
    if (has_target && reserve_bytes >= target_bytes) {
        cli_usage_error(cmd,
                        "--safety-reserve (%" PRIu64 " bytes) must be below --memory-target "
                        "(%" PRIu64 " bytes)",
                        reserve_bytes, target_bytes);
        return false;
    }
    return true;
}

void cli_default_threads(long long *n_threads)
{
    uint32_t cores;
    if (*n_threads == 0 && rfsys_physical_cores(NULL, &cores) == 0)
        *n_threads = cores;
}

/* Whether argument a is one of the command's options followed by a separate value. */
static bool takes_value(const char *a, const struct option *longopts, const char *shortopts)
{
    if (a[0] != '-' || a[1] == '\0')
        return false;
    if (a[1] == '-') {
        for (const struct option *o = longopts; o && o->name; o++)
            if (strcmp(a + 2, o->name) == 0)
                return o->has_arg == required_argument;
        return false;
    }
    const char *c = strchr(shortopts, a[1]);
    return c && a[1] != ':' && c[1] == ':' && a[2] == '\0';
}

bool cli_reject_llama_flags(const char *cmd, int argc, char **argv, const struct option *longopts,
                            const char *shortopts)
{
    static const struct {
        const char *flag, *instead;
    } known[] = {
        {"-ngl", "ramforge runs on the CPU: no layer is offloaded"},
        {"--n-gpu-layers", "ramforge runs on the CPU: no layer is offloaded"},
        {"--gpu-layers", "ramforge runs on the CPU: no layer is offloaded"},
        {"--no-mmap", "the model is always mapped: the ledger measures the mapping"},
        {"-b", "the batch is the prompt (-c sets the context)"},
        {"--batch-size", "the batch is the prompt (-c sets the context)"},
        {"-ub", "the batch is the prompt (-c sets the context)"},
        {"--ubatch-size", "the batch is the prompt (-c sets the context)"},
        {"--predict", "use -n/--n-predict"},
        {"-fa", "llama.cpp's default attention is used"},
        {"--flash-attn", "llama.cpp's default attention is used"},
    };
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0)
            return true;
        if (takes_value(argv[i], longopts, shortopts)) {
            i++; /* its value, whatever it looks like */
            continue;
        }
        for (size_t k = 0; k < sizeof(known) / sizeof(known[0]); k++) {
            size_t n = strlen(known[k].flag);
            if (strncmp(argv[i], known[k].flag, n) == 0 &&
                (argv[i][n] == '\0' || argv[i][n] == '=')) {
                cli_usage_error(cmd, "llama.cpp's %s is not supported: %s", known[k].flag,
                                known[k].instead);
                return false;
            }
        }
    }
    return true;
}

bool cli_check_model_operands(const char *cmd, int argc, char **argv, const char *model)
{
    if (optind < argc) {
        cli_usage_error(cmd, "unexpected argument '%s'", argv[optind]);
        return false;
    }
    if (!model) {
        cli_usage_error(cmd, "missing -m/--model PATH");
        return false;
    }
    return true;
}
