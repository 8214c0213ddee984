/* Shared helpers of the ramforge CLI (see cli.h). */
#include "cli.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "ramforge/core/policy.h"
#include "ramforge/core/profile.h"
#include "ramforge/sys/sys.h"

void cli_error(const char *fmt, ...)
{
    /* Library reasons reach the user here: their "N bytes" in IEC units (cli_iec_text never
     * lengthens a text); a message longer than the buffer is printed as it is. */
    char msg[4096], text[sizeof(msg)];
    va_list ap;
    fprintf(stderr, "%s: ", RF_PROGRAM);
    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < sizeof(msg)) {
        fputs(cli_iec_text(msg, text, sizeof(text)), stderr);
    } else {
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
    }
    fputc('\n', stderr);
}

static int stdout_errno; /* reason of the first failed flush of stdout, 0 if none */

void cli_warn_no_window(int rc)
{
    cli_error("warning: streaming: no read-ahead window (%s): the streamed layers are read by "
              "the decode's faults",
              rf_strerror(rc));
}

int cli_flush_stdout(void)
{
    if (fflush(stdout) == 0)
        return 0;
    int err = errno ? errno : EIO;
    if (!stdout_errno)
        stdout_errno = err;
    return -err;
}

int cli_finish_stdout(int status)
{
    bool failed = ferror(stdout) != 0;
    /* A write failed inside printf leaves its reason in errno, unless a
     * later call replaced it: the best guess left when no flush saw it. */
    if (failed && !stdout_errno)
        stdout_errno = errno;
    errno = 0;
    if (fclose(stdout) != 0) {
        failed = true;
        if (!stdout_errno && errno)
            stdout_errno = errno;
    }
    if (!failed)
        return status;
    if (stdout_errno)
        cli_error("cannot write standard output: %s", strerror(stdout_errno));
    else
        cli_error("cannot write standard output: write error");
    return RF_EXIT_FAILURE;
}

static const char *cli_command; /* "run" etc. (cli_set_command); NULL: the top level */

void cli_set_command(const char *name)
{
    cli_command = name;
}

void cli_usage_error(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s: ", RF_PROGRAM);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry '%s %s%s--help' for more information.\n", RF_PROGRAM,
            cli_command ? cli_command : "", cli_command ? " " : "");
}

/*
 * Optimal string alignment distance (Levenshtein plus adjacent
 * transposition, so "rnu" is one edit from "run"), ASCII case-insensitive.
 * Words longer than CLI_WORD_MAX count as far from everything.
 */
#define CLI_WORD_MAX 64
static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    size_t d[CLI_WORD_MAX + 1][CLI_WORD_MAX + 1];

    if (la > CLI_WORD_MAX || lb > CLI_WORD_MAX)
        return SIZE_MAX;
    for (size_t i = 0; i <= la; i++)
        d[i][0] = i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = j;
    for (size_t i = 1; i <= la; i++) {
        for (size_t j = 1; j <= lb; j++) {
            size_t cost = tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]);
            size_t v = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < v)
                v = d[i][j - 1] + 1;
            if (d[i - 1][j - 1] + cost < v)
                v = d[i - 1][j - 1] + cost;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < v)
                v = d[i - 2][j - 2] + 1;
            d[i][j] = v;
        }
    }
    return d[la][lb];
}

const char *cli_closest(const char *word, const char *const *candidates, size_t n)
{
    size_t len = strlen(word), best = SIZE_MAX;
    const char *found = NULL;

    if (len == 0)
        return NULL;
    /* A third of the word, at least 1 and at most 3 edits: "rnu" -> run, not "xyz" -> run. */
    size_t limit = len / 3 < 1 ? 1 : len / 3 > 3 ? 3 : len / 3;
    for (size_t i = 0; i < n; i++) {
        size_t dist = edit_distance(word, candidates[i]);
        if (dist <= limit && dist < best) {
            best = dist;
            found = candidates[i];
        }
    }
    return found;
}

/* The long option names of longopts, at most max of them; returns how many. */
static size_t long_names(const struct option *longopts, const char **names, size_t max)
{
    size_t n = 0;
    for (const struct option *o = longopts; o && o->name && n < max; o++)
        names[n++] = o->name;
    return n;
}

/*
 * "--re" matching several long options (getopt_long refuses it as
 * ambiguous): lists them and returns true.
 */
static bool report_ambiguous(const char *name, size_t len, const struct option *longopts)
{
    char list[1024] = "";
    size_t used = 0, matches = 0;

    for (const struct option *o = longopts; o && o->name; o++) {
        if (strncmp(o->name, name, len) != 0)
            continue;
        if (strlen(o->name) == len)
            return false; /* an exact match is never ambiguous */
        matches++;
        int w = snprintf(list + used, sizeof(list) - used, "%s--%s", used ? ", " : "", o->name);
        if (w > 0 && (size_t)w < sizeof(list) - used)
            used += (size_t)w;
    }
    if (matches < 2)
        return false;
    cli_usage_error("option '--%.*s' is ambiguous; possibilities: %s", (int)len, name, list);
    return true;
}

int cli_bad_option(int c, char **argv, const struct option *longopts)
{
    const char *opt = argv[optind - 1];
    char shortopt[3] = {'-', (char)optopt, '\0'};
    const char *names[128];

    if (optopt && strncmp(opt, "--", 2) != 0)
        opt = shortopt;
    if (c == ':') {
        cli_usage_error("option '%s' requires an argument", opt);
        return RF_EXIT_USAGE;
    }
    if (strncmp(opt, "--", 2) == 0 && opt[2]) {
        const char *name = opt + 2;
        size_t len = strcspn(name, "=");
        char word[CLI_WORD_MAX + 1];

        if (report_ambiguous(name, len, longopts))
            return RF_EXIT_USAGE;
        snprintf(word, sizeof(word), "%.*s", (int)len, name);
        const char *best = cli_closest(word, names, long_names(longopts, names, 128));
        if (best) {
            cli_usage_error("unrecognized option '--%s'; did you mean --%s?", word, best);
            return RF_EXIT_USAGE;
        }
    }
    cli_usage_error("unrecognized option '%s'", opt);
    return RF_EXIT_USAGE;
}

int cli_help_or_bad_option(int c, char **argv, const struct option *longopts,
                           void (*usage)(FILE *out))
{
    if (c != 'h')
        return cli_bad_option(c, argv, longopts);
    usage(stdout);
    return 0;
}

bool cli_parse_int(const char *what, const char *s, long long min, long long max, long long *out)
{
    char *end;
    long long v;

    errno = 0;
    v = strtoll(s, &end, 10);
    if (*s == '\0' || *end != '\0' || !(*s == '-' || *s == '+' || (*s >= '0' && *s <= '9'))) {
        cli_usage_error("invalid %s '%s': not a whole number", what, s);
        return false;
    }
    if (errno == ERANGE || v < min || v > max) {
        cli_usage_error("invalid %s '%s': must be between %lld and %lld", what, s, min, max);
        return false;
    }
    *out = v;
    return true;
}

const char *cli_format_bytes(uint64_t bytes, bool raw, char *buf, size_t len)
{
    if (raw)
        snprintf(buf, len, "%" PRIu64, bytes);
    return raw ? buf : rf_size_format(bytes, buf, len);
}

const char *cli_format_signed_bytes(int64_t bytes, char *buf, size_t len)
{
    char mag[32];
    uint64_t m = bytes < 0 ? (uint64_t)0 - (uint64_t)bytes : (uint64_t)bytes;
    snprintf(buf, len, "%c%s", bytes < 0 ? '-' : '+', cli_format_bytes(m, false, mag, sizeof(mag)));
    return buf;
}

const char *cli_format_change(int64_t bytes, char *buf, size_t len)
{
    char mag[32];
    uint64_t m = bytes < 0 ? (uint64_t)0 - (uint64_t)bytes : (uint64_t)bytes;
    if (!bytes)
        snprintf(buf, len, "did not change");
    else
        snprintf(buf, len, "%s by %s", bytes < 0 ? "fell" : "rose",
                 cli_format_bytes(m, false, mag, sizeof(mag)));
    return buf;
}

const char *cli_iec_text(const char *in, char *buf, size_t len)
{
    return rf_size_text(in, buf, len);
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
    /* "N bytes" in IEC units as everywhere else in human output; a message too long for the
     * buffer (each rewrite can grow a number by a few characters) is printed as it is. */
    char text[4096];
    if (strlen(msg) < sizeof(text) / 2)
        msg = cli_iec_text(msg, text, sizeof(text));
    fprintf(stderr, "%s\n", msg);
}

bool cli_parse_size(const char *opt, const char *arg, bool allow_zero, uint64_t *out)
{
    if (allow_zero && strcmp(arg, "0") == 0) {
        *out = 0;
        return true;
    }
    int rc = rf_parse_size(arg, out);
    /* Reports carry byte counts as JSON integers: at most INT64_MAX (8 EiB - 1). */
    if (rc == 0 && *out > (uint64_t)INT64_MAX)
        rc = -EOVERFLOW;
    char hint[160];
    if (rc == -EOVERFLOW)
        cli_usage_error("invalid size for %s '%s': too large (at most 8 EiB - 1)", opt, arg);
    else if (rc == -EDOM)
        cli_usage_error("invalid size for %s '%s': not a whole number of bytes", opt, arg);
    else if (rc < 0 && rf_size_hint(arg, hint, sizeof(hint)))
        cli_usage_error("invalid size for %s '%s': %s", opt, arg, hint);
    else if (rc < 0)
        cli_usage_error("invalid size for %s '%s': expected a positive size such as "
                        "512Mi, 2Gi, 2G, 1e9 or 300000000",
                        opt, arg);
    return rc == 0;
}

bool cli_parse_policy(const char *arg, enum rf_policy_profile *out)
{
    if (rf_policy_parse(arg, out) == 0)
        return true;
    cli_usage_error("unknown residency policy '%s' (expected off, observe, conservative, "
                    "memory-bound, reuse-aware, active or streaming)",
                    arg);
    return false;
}

bool cli_parse_release_mode(const char *arg, enum rf_release_mode *out)
{
    if (rf_release_mode_parse(arg, out) < 0) {
        cli_usage_error("unknown release mode '%s' (expected " RF_RELEASE_MODE_NAMES ")", arg);
        return false;
    }
    return true;
}

bool cli_check_target(enum rf_policy_profile policy, bool has_target, uint64_t target_bytes,
                      uint64_t reserve_bytes)
{
    if (rf_policy_requires_target(policy) && !has_target) {
        cli_usage_error("--residency-policy %s needs --memory-target SIZE", rf_policy_name(policy));
        return false;
    }
    if (has_target && reserve_bytes >= target_bytes) {
        char b1[32], b2[32];
        cli_usage_error("--safety-reserve (%s) must be below --memory-target (%s)",
                        cli_format_bytes(reserve_bytes, false, b1, sizeof(b1)),
                        cli_format_bytes(target_bytes, false, b2, sizeof(b2)));
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

bool cli_reject_llama_flags(int argc, char **argv, const struct option *longopts,
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
                cli_usage_error("llama.cpp's %s is not supported: %s", known[k].flag,
                                known[k].instead);
                return false;
            }
        }
    }
    return true;
}

bool cli_check_model_operands(int argc, char **argv, const char *model)
{
    if (optind < argc) {
        cli_usage_error("unexpected argument '%s'", argv[optind]);
        return false;
    }
    if (!model) {
        cli_usage_error("missing -m/--model PATH");
        return false;
    }
    return true;
}

bool cli_parse_profile_history(const char *s, long long *out)
{
    return cli_parse_int("entries (--profile-history)", s, 1, RF_PROFILE_MAX_HISTORY, out);
}

const char *cli_wrap(const char *text, char *buf, size_t len)
{
    size_t n = 0, col = 0;

    for (const char *w = text; *w && n + 1 < len;) {
        size_t wl = strcspn(w, " ");
        if (col && col + 1 + wl > 79) {
            buf[n++] = '\n';
            col = 0;
        } else if (col) {
            buf[n++] = ' ';
            col++;
        }
        for (size_t i = 0; i < wl && n + 1 < len; i++, col++)
            buf[n++] = w[i];
        w += wl;
        w += strspn(w, " ");
    }
    if (len)
        buf[n] = '\0';
    return buf;
}
