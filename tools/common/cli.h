/* Shared helpers of the ramforge CLI: messages, number parsing, byte formatting. */
#ifndef RAMFORGE_CLI_H
#define RAMFORGE_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "ramforge/core/policy.h"
#include "ramforge/error.h"
#include "ramforge/forge/forge.h"

#define RF_PROGRAM "ramforge"
#define RF_EXIT_FAILURE 1 /* the work failed */
#define RF_EXIT_USAGE 2   /* bad command line */

/* "ramforge: <message>" on stderr. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * "ramforge: warning: streaming: no read-ahead window (<rf_strerror(rc)>):
 * the streamed layers are read by the decode's faults" on stderr: what run
 * and serve say when rf_session_stream_window_open fails (rc < 0).
 */
void cli_warn_no_window(int rc);

/*
 * Flushes and closes standard output at the end of a command and returns
 * the exit status: status unchanged when everything written reached it,
 * otherwise one "ramforge: cannot write standard output: <reason>" line
 * on stderr and RF_EXIT_FAILURE (a full disk, a closed descriptor, a
 * broken pipe would otherwise lose the text silently with exit 0).
 */
int cli_finish_stdout(int status);

/*
 * fflush(stdout) that remembers the reason of a failure for
 * cli_finish_stdout (the stream discards the text, so the reason would be
 * lost by the end). Returns 0 or the negative errno.
 */
int cli_flush_stdout(void);

/*
 * The command being run ("run", "inspect", ...), held once: main sets it
 * before dispatching, and every usage error names it in its --help hint.
 * NULL (never set): the top level. Borrowed.
 */
void cli_set_command(const char *name);

/*
 * "ramforge: <message>" and "Try 'ramforge CMD --help' for more
 * information." on stderr, CMD the one cli_set_command set ("Try
 * 'ramforge --help'" at the top level).
 */
void cli_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * Reports the option getopt_long just refused ('?' unknown or ambiguous,
 * ':' missing argument; call with opterr = 0 and an optstring starting
 * with ':') as one "ramforge: ..." line plus the --help hint: an ambiguous
 * prefix with the options it matches, an unknown long option with the
 * closest of longopts ("did you mean --memory-target?", cli_closest).
 * Returns RF_EXIT_USAGE.
 */
struct option;
int cli_bad_option(int c, char **argv, const struct option *longopts);

/*
 * The default of a command's getopt switch: for 'h' prints usage(stdout)
 * and returns 0 (--help), otherwise cli_bad_option's line and
 * RF_EXIT_USAGE.
 */
int cli_help_or_bad_option(int c, char **argv, const struct option *longopts,
                           void (*usage)(FILE *out));

/*
 * The candidate closest to word by edit distance (insertions, deletions,
 * substitutions and adjacent transpositions, ASCII case-insensitive), if
 * it is within a third of word's length (at least 1, at most 3 edits);
 * NULL when none is. The first of equally close candidates wins.
 */
const char *cli_closest(const char *word, const char *const *candidates, size_t n);

/*
 * Parses a decimal integer in [min, max] from the whole of s. On failure
 * prints "ramforge: invalid <what> 's': <reason>" with the --help hint (a
 * usage error) and returns false.
 */
bool cli_parse_int(const char *what, const char *s, long long min, long long max, long long *out);

/* --profile-history N of run and serve: 1..RF_PROFILE_MAX_HISTORY entries. */
bool cli_parse_profile_history(const char *s, long long *out);

/*
 * Parses a size option (bytes or 512MiB, 2G, ...; rf_parse_size) of at
 * most INT64_MAX; "0" only with allow_zero. On failure prints the usage
 * error and returns false.
 */
bool cli_parse_size(const char *opt, const char *arg, bool allow_zero, uint64_t *out);

/* --residency-policy P: false after printing the usage error. */
bool cli_parse_policy(const char *arg, enum rf_policy_profile *out);

/* --release-mode dontneed|pageout: false after printing the usage error. */
bool cli_parse_release_mode(const char *arg, enum rf_release_mode *out);

/*
 * The policy's target rules: a policy that requires --memory-target has
 * one, and the reserve is below it. False after printing the usage error.
 */
bool cli_check_target(enum rf_policy_profile policy, bool has_target, uint64_t target_bytes,
                      uint64_t reserve_bytes);

/* Formats bytes as "1.50 MiB" (or the exact integer when raw). buf >= 32. */
const char *cli_format_bytes(uint64_t bytes, bool raw, char *buf, size_t len);

/*
 * Copies in to buf (len bytes, always NUL-terminated, truncated if need be)
 * with every "N bytes" written in IEC units as cli_format_bytes does
 * ("24121344 bytes" -> "23.00 MiB"): the library's reasons keep exact
 * bytes for the JSON report, the human output reads them this way. Core's
 * rf_size_text, the rule exec's engine uses too.
 */
const char *cli_iec_text(const char *in, char *buf, size_t len);

/*
 * A signed byte difference as cli_format_bytes writes sizes, with its sign
 * always shown: "+1.33 GiB", "-320.00 KiB", "+0 B". Returns buf.
 */
const char *cli_format_signed_bytes(int64_t bytes, char *buf, size_t len);

/* A measured change in words, IEC units, into buf: "fell by 858.17 MiB", "rose by 1.00 KiB",
 * "did not change". Returns buf. */
const char *cli_format_change(int64_t bytes, char *buf, size_t len);

/* Formats nanoseconds as "12.3 ms". buf >= 32. */
const char *cli_format_ns(uint64_t ns, char *buf, size_t len);

/* text wrapped at 79 columns on spaces (no indent) into buf of len bytes, cut to fit; buf. */
const char *cli_wrap(const char *text, char *buf, size_t len);

int cmd_run(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_mkmodel(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_watch(int argc, char **argv);
int cmd_exec(int argc, char **argv);

/* The log sink the CLI installs: llama.cpp and library messages on stderr with --verbose. */
void cli_log_sink(enum rf_log_level level, const char *msg, void *user_data);

/*
 * The thread count when -t was not given (*n_threads 0): the physical cores
 * (rfsys_physical_cores), as llama.cpp's own tools default to; left 0
 * (llama.cpp's default) when the topology cannot be read.
 */
void cli_default_threads(long long *n_threads);

/*
 * Refuses llama.cpp command-line flags ramforge does not take (-ngl,
 * --no-mmap, -b, --predict, ...) with "not supported" and what to use
 * instead, before getopt could misparse them (-ngl 0 as -n "gl"). The
 * values of the command's own options (longopts, shortopts as getopt_long
 * takes them) are skipped: -p -b is a prompt. Returns true when argv has
 * none; else prints the usage error (exit status 2).
 */
bool cli_reject_llama_flags(int argc, char **argv, const struct option *longopts,
                            const char *shortopts);

/*
 * After getopt_long: no operand may be left (argv[optind]) and -m/--model
 * must have been given (model non-NULL). Prints the usage error and
 * returns false when either fails (exit status 2).
 */
bool cli_check_model_operands(int argc, char **argv, const char *model);

#endif
