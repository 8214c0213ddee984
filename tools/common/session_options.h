/*
 * The options of the commands that run a session (run, serve; exec next):
 * the eleven they share besides -m/-v/-h, parsed by one getopt_long loop
 * (session_options.c) and mapped once to rf_session_params.
 *
 * A command lists the SESSION_LONGOPT_* entries it takes in its own
 * getopt_long table, where its --help shows them (the table's order is the
 * order of an ambiguous prefix's possibilities and decides between equally
 * close suggestions, so each command keeps its own), gives its own
 * long-only options codes from SESSION_OPT_END on, and starts its
 * optstring with ":" SESSION_SHORTOPTS.
 */
#ifndef RAMFORGE_TOOLS_SESSION_OPTIONS_H
#define RAMFORGE_TOOLS_SESSION_OPTIONS_H

#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "ramforge/core/policy.h"
#include "ramforge/forge/forge.h"
#include "ramforge/session.h"

/* What the shared options asked for; the command sets the defaults before parsing. */
struct session_options {
    const char *model;                 /* -m/--model PATH (required) */
    bool verbose;                      /* -v/--verbose: llama.cpp's and the library's log */
    long long n_predict;               /* -n/--n-predict N, 1..1000000 (serve: a request's default,
                                          -1 too: up to the context) */
    long long n_threads;               /* -t/--threads N, 1..1024; 0: not given */
    long long n_ctx;                   /* -c/--ctx-size N, tokens, 1..16777216; 0: not given */
    enum rf_policy_profile policy;     /* --residency-policy P */
    bool has_target;                   /* --memory-target given */
    uint64_t target_bytes;             /* --memory-target SIZE, bytes */
    bool has_reserve;                  /* --safety-reserve given */
    uint64_t reserve_bytes;            /* --safety-reserve SIZE, bytes; 0 allowed */
    bool has_release_mode;             /* --release-mode given */
    enum rf_release_mode release_mode; /* --release-mode dontneed|pageout */
    bool has_staging;                  /* --staging-budget given */
    uint64_t staging_budget;           /* --staging-budget SIZE, bytes */
    const char *json_path;             /* --residency-report-json PATH; NULL: none */
    const char *profile_path;          /* --profile PATH; NULL: none */
    long long profile_history;         /* --profile-history N entries; 0: the default */
    bool quiet;                        /* -q/--quiet: no summary (run), no log lines (serve) */
    bool has_memory_limit;             /* --memory-limit: in a child memory cgroup of its own */
    uint64_t memory_limit;             /* --memory-limit SIZE, bytes (limit_cgroup.h) */
};

/* getopt_long codes of the shared long-only options. */
enum {
    SESSION_OPT_POLICY = 256,
    SESSION_OPT_TARGET,
    SESSION_OPT_RESERVE,
    SESSION_OPT_RELEASE_MODE,
    SESSION_OPT_STAGING,
    SESSION_OPT_REPORT_JSON,
    SESSION_OPT_PROFILE,
    SESSION_OPT_PROFILE_HISTORY,
    SESSION_OPT_MEMORY_LIMIT,
    SESSION_OPT_END, /* a command's own long-only options start here */
};

/* The shared short options, for the command's optstring (after its leading ':'). */
#define SESSION_SHORTOPTS "m:n:t:c:vhq"

/* The shared getopt_long entries. */
#define SESSION_LONGOPT_MODEL                                                                      \
    {                                                                                              \
        "model", required_argument, NULL, 'm'                                                      \
    }
#define SESSION_LONGOPT_N_PREDICT                                                                  \
    {                                                                                              \
        "n-predict", required_argument, NULL, 'n'                                                  \
    }
#define SESSION_LONGOPT_THREADS                                                                    \
    {                                                                                              \
        "threads", required_argument, NULL, 't'                                                    \
    }
#define SESSION_LONGOPT_CTX_SIZE                                                                   \
    {                                                                                              \
        "ctx-size", required_argument, NULL, 'c'                                                   \
    }
#define SESSION_LONGOPT_POLICY                                                                     \
    {                                                                                              \
        "residency-policy", required_argument, NULL, SESSION_OPT_POLICY                            \
    }
#define SESSION_LONGOPT_TARGET                                                                     \
    {                                                                                              \
        "memory-target", required_argument, NULL, SESSION_OPT_TARGET                               \
    }
#define SESSION_LONGOPT_RESERVE                                                                    \
    {                                                                                              \
        "safety-reserve", required_argument, NULL, SESSION_OPT_RESERVE                             \
    }
#define SESSION_LONGOPT_RELEASE_MODE                                                               \
    {                                                                                              \
        "release-mode", required_argument, NULL, SESSION_OPT_RELEASE_MODE                          \
    }
#define SESSION_LONGOPT_STAGING                                                                    \
    {                                                                                              \
        "staging-budget", required_argument, NULL, SESSION_OPT_STAGING                             \
    }
#define SESSION_LONGOPT_REPORT_JSON                                                                \
    {                                                                                              \
        "residency-report-json", required_argument, NULL, SESSION_OPT_REPORT_JSON                  \
    }
#define SESSION_LONGOPT_PROFILE                                                                    \
    {                                                                                              \
        "profile", required_argument, NULL, SESSION_OPT_PROFILE                                    \
    }
#define SESSION_LONGOPT_PROFILE_HISTORY                                                            \
    {                                                                                              \
        "profile-history", required_argument, NULL, SESSION_OPT_PROFILE_HISTORY                    \
    }
#define SESSION_LONGOPT_MEMORY_LIMIT                                                               \
    {                                                                                              \
        "memory-limit", required_argument, NULL, SESSION_OPT_MEMORY_LIMIT                          \
    }
#define SESSION_LONGOPT_QUIET                                                                      \
    {                                                                                              \
        "quiet", no_argument, NULL, 'q'                                                            \
    }
#define SESSION_LONGOPT_VERBOSE                                                                    \
    {                                                                                              \
        "verbose", no_argument, NULL, 'v'                                                          \
    }
#define SESSION_LONGOPT_HELP                                                                       \
    {                                                                                              \
        "help", no_argument, NULL, 'h'                                                             \
    }

/* A session command's command line: its table, its help and its own options. */
struct session_command {
    const struct option *longopts; /* the whole table, {NULL, 0, NULL, 0}-terminated */
    const char *shortopts;         /* ":" SESSION_SHORTOPTS and the command's own */
    void (*usage)(FILE *out);      /* -h/--help, on stdout */
    /*
     * One of the command's own options (c getopt_long's code, arg optarg):
     * 0 when taken, the exit status after printing the usage error, or -1
     * for a code it does not know (getopt_long's '?' and ':' among them).
     */
    int (*own)(int c, const char *arg, void *ud);
    void *ud;
    bool no_model;             /* exec: no -m (PROGRAM loads its model); argv ends before PROGRAM */
    bool n_predict_to_context; /* -n -1 allowed: up to the context (serve's request default) */
};

/*
 * The one getopt_long loop of a session command: refuses llama.cpp's
 * flags (cli_reject_llama_flags), resets optind, parses argv into *so and
 * the command's own options through cmd->own, then requires -m (unless
 * cmd->no_model) and no operand left (cli_check_model_operands). Returns -1 to continue, or the
 * exit status (0 after --help, 2 on a usage error, with the message
 * printed).
 */
int session_options_parse(const struct session_command *cmd, int argc, char **argv,
                          struct session_options *so);

/*
 * rf_session_default_params() with what the shared options set: the
 * policy, the target and reserve, the release mode, the threads (n_threads
 * after cli_default_threads) and the end-to-end timer's start entry_ns.
 * The command sets its own fields on top.
 */
struct rf_session_params session_options_params(const struct session_options *so,
                                                uint64_t entry_ns);

/* The warning of --release-mode with a policy that does not release (stderr). */
void session_options_warn_release_mode(const struct session_options *so);

#endif
