/* ramforge serve's command line: the options, their checks and the usage text. */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "serve.h"

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: %s serve -m MODEL [OPTIONS]\n"
            "\n"
            "Serve MODEL over HTTP with llama-server's endpoints (/completion,\n"
            "/v1/completions, /tokenize, /detokenize, /health, /props, /v1/models,\n"
            "/metrics) plus /residency, one request at a time, each in its own context\n"
            "that is dropped before the next (a quiescent boundary). Per request:\n"
            "admission (503 with the reason when refused), staging after an idle release,\n"
            "generation, the after_session boundary of the policy, the operation report.\n"
            "After --idle-seconds without a request the idle boundary releases cold\n"
            "weight pages down to --memory-target (memory-bound), the model stays loaded.\n"
            "\n"
            "Options:\n"
            "  -m, --model PATH              GGUF model (required)\n"
            "      --host ADDR               IPv4 address to bind (default 127.0.0.1)\n"
            "      --port N                  TCP port, 0..65535 (default 8080; 0: any free\n"
            "                                port, printed on stderr)\n"
            "  -c, --ctx-size N              largest context of a request (prompt +\n"
            "                                n_predict), tokens (default: the model's\n"
            "                                training context)\n"
            "  -n, --n-predict N             a request's n_predict when it gives none\n"
            "                                (default 128)\n"
            "  -t, --threads N               threads, 1..1024 (default: the physical cores,\n"
            "                                as llama.cpp's tools)\n"
            "      --residency-policy P      off, observe (default), conservative,\n"
            "                                memory-bound, reuse-aware, active, streaming\n"
            "                                (see 'ramforge run --help')\n"
            "      --memory-target SIZE      memory target (memory-bound, active)\n"
            "      --safety-reserve SIZE     taken off the target (default 0)\n"
            "      --release-mode MODE       dontneed (default) or pageout\n"
            "      --idle-seconds N          run the idle boundary (the policy's release)\n"
            "                                once after N seconds without a request (default\n"
            "                                0: never). With a releasing policy, requests then\n"
            "                                end with a sample only and the release waits for\n"
            "                                the idle time; without it every request ends with\n"
            "                                the after_session boundary and its release, as\n"
            "                                'ramforge run'\n"
            "      --staging-budget SIZE     before the first request after an idle release,\n"
            "                                prefetch at most SIZE bytes of the weights the\n"
            "                                graph reads (MADV_WILLNEED)\n"
            "      --queue N                 requests waiting behind the running one,\n"
            "                                1..4096 (default 16); a full queue answers 503\n"
            "      --history N               operations whose samples, plans and releases the\n"
            "                                session report (/residency) keeps, 1..1000000\n"
            "                                (default 64); older ones are counted as dropped\n"
            "      --profile PATH            persisted access profile (as run's): read at\n"
            "                                start, orders the idle release (cold first) and\n"
            "                                the wake-up staging (hot first); every request\n"
            "                                runs the dispatch observer, whose trace updates\n"
            "                                it; saved atomically at shutdown\n"
            "      --profile-history N       prediction history entries kept (1..4096,\n"
            "                                default 32)\n"
            "      --profile-save-every K    also save the profile after every K requests\n"
            "                                (default 0: at shutdown only)\n"
            "      --api-key KEY             require 'Authorization: Bearer KEY' (or\n"
            "                                X-Api-Key) on every endpoint but /health and\n"
            "                                /models, as llama-server\n"
            "      --timeout N               close a connection idle for N seconds (default\n"
            "                                600)\n"
            "      --residency-report-json PATH\n"
            "                                at exit (SIGINT, SIGTERM), write the session\n"
            "                                report (schema_version 1, every operation)\n"
            "  -v, --verbose                 show llama.cpp's log\n"
            "  -h, --help                    show this help\n"
            "\n"
            "Errors answer llama-server's shape {\"error\":{\"code\",\"message\",\"type\"}}:\n"
            "400 bad body, 401 key, 404, 405, 413 body over 1 MiB, 503 queue full,\n"
            "admission refused or shutting down. README.md, 'Serving'.\n",
            RF_PROGRAM);
}

enum {
    OPT_HOST = 256,
    OPT_PORT,
    OPT_POLICY,
    OPT_TARGET,
    OPT_RESERVE,
    OPT_RELEASE_MODE,
    OPT_IDLE,
    OPT_STAGING,
    OPT_QUEUE,
    OPT_HISTORY,
    OPT_API_KEY,
    OPT_TIMEOUT,
    OPT_REPORT_JSON,
    OPT_PROFILE,
    OPT_PROFILE_HISTORY,
    OPT_PROFILE_SAVE_EVERY,
};

int serve_parse_options(int argc, char **argv, struct serve_options *o)
{
    static const struct option opts[] = {
        {"model", required_argument, NULL, 'm'},
        {"host", required_argument, NULL, OPT_HOST},
        {"port", required_argument, NULL, OPT_PORT},
        {"ctx-size", required_argument, NULL, 'c'},
        {"n-predict", required_argument, NULL, 'n'},
        {"threads", required_argument, NULL, 't'},
        {"residency-policy", required_argument, NULL, OPT_POLICY},
        {"memory-target", required_argument, NULL, OPT_TARGET},
        {"safety-reserve", required_argument, NULL, OPT_RESERVE},
        {"release-mode", required_argument, NULL, OPT_RELEASE_MODE},
        {"idle-seconds", required_argument, NULL, OPT_IDLE},
        {"staging-budget", required_argument, NULL, OPT_STAGING},
        {"queue", required_argument, NULL, OPT_QUEUE},
        {"history", required_argument, NULL, OPT_HISTORY},
        {"api-key", required_argument, NULL, OPT_API_KEY},
        {"timeout", required_argument, NULL, OPT_TIMEOUT},
        {"residency-report-json", required_argument, NULL, OPT_REPORT_JSON},
        {"profile", required_argument, NULL, OPT_PROFILE},
        {"profile-history", required_argument, NULL, OPT_PROFILE_HISTORY},
        {"profile-save-every", required_argument, NULL, OPT_PROFILE_SAVE_EVERY},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;
    opterr = 0;
    if (!cli_reject_llama_flags(argc, argv, opts, ":m:c:n:t:vh"))
        return RF_EXIT_USAGE;
    while ((c = getopt_long(argc, argv, ":m:c:n:t:vh", opts, NULL)) != -1) {
        switch (c) {
        case 'm':
            o->model = optarg;
            break;
        case OPT_HOST:
            o->host = optarg;
            break;
        case OPT_PORT:
            if (!cli_parse_int("port (--port)", optarg, 0, 65535, &o->port))
                return RF_EXIT_USAGE;
            break;
        case 'c':
            if (!cli_parse_int("context size (-c)", optarg, 1, 16777216, &o->n_ctx))
                return RF_EXIT_USAGE;
            break;
        case 'n':
            if (!cli_parse_int("token count (-n)", optarg, 1, 1000000, &o->n_predict))
                return RF_EXIT_USAGE;
            break;
        case 't':
            if (!cli_parse_int("thread count (-t)", optarg, 1, 1024, &o->n_threads))
                return RF_EXIT_USAGE;
            break;
        case OPT_POLICY:
            if (!cli_parse_policy(optarg, &o->policy))
                return RF_EXIT_USAGE;
            break;
        case OPT_TARGET:
            if (!cli_parse_size("--memory-target", optarg, false, &o->target_bytes))
                return RF_EXIT_USAGE;
            o->has_target = true;
            break;
        case OPT_RESERVE:
            if (!cli_parse_size("--safety-reserve", optarg, true, &o->reserve_bytes))
                return RF_EXIT_USAGE;
            break;
        case OPT_RELEASE_MODE:
            o->has_release_mode = true;
            if (!cli_parse_release_mode(optarg, &o->release_mode))
                return RF_EXIT_USAGE;
            break;
        case OPT_IDLE:
            if (!cli_parse_int("idle time (--idle-seconds)", optarg, 0, 86400 * 365,
                               &o->idle_seconds))
                return RF_EXIT_USAGE;
            break;
        case OPT_STAGING:
            if (!cli_parse_size("--staging-budget", optarg, false, &o->staging_budget))
                return RF_EXIT_USAGE;
            o->has_staging = true;
            break;
        case OPT_HISTORY:
            if (!cli_parse_int("operations kept (--history)", optarg, 1, 1000000, &o->history))
                return RF_EXIT_USAGE;
            break;
        case OPT_QUEUE:
            if (!cli_parse_int("queue length (--queue)", optarg, 1, 4096, &o->queue))
                return RF_EXIT_USAGE;
            break;
        case OPT_API_KEY:
            if (!*optarg) {
                cli_usage_error("the API key is empty");
                return RF_EXIT_USAGE;
            }
            o->api_key = optarg;
            break;
        case OPT_TIMEOUT:
            if (!cli_parse_int("timeout (--timeout)", optarg, 1, 86400, &o->timeout_s))
                return RF_EXIT_USAGE;
            break;
        case OPT_REPORT_JSON:
            o->json_path = optarg;
            break;
        case OPT_PROFILE:
            o->profile_path = optarg;
            break;
        case OPT_PROFILE_HISTORY:
            if (!cli_parse_profile_history(optarg, &o->profile_history))
                return RF_EXIT_USAGE;
            break;
        case OPT_PROFILE_SAVE_EVERY:
            if (!cli_parse_int("requests (--profile-save-every)", optarg, 0, 1000000000,
                               &o->profile_save_every))
                return RF_EXIT_USAGE;
            break;
        case 'v':
            o->verbose = true;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            return cli_bad_option(c, argv, opts);
        }
    }
    if (!cli_check_model_operands(argc, argv, o->model))
        return RF_EXIT_USAGE;
    if (!cli_check_target(o->policy, o->has_target, o->target_bytes, o->reserve_bytes))
        return RF_EXIT_USAGE;
    if (o->policy == RF_POLICY_OFF && (o->idle_seconds || o->has_staging || o->has_target))
        cli_error("warning: --idle-seconds, --staging-budget and --memory-target have no "
                  "effect with --residency-policy off");
    if (o->profile_path && o->policy == RF_POLICY_OFF) {
        cli_usage_error("--profile needs a residency policy (not off)");
        return RF_EXIT_USAGE;
    }
    if (o->has_release_mode && !rf_policy_mutates(o->policy))
        cli_error("warning: --release-mode has no effect with --residency-policy %s (it does "
                  "not release)",
                  rf_policy_name(o->policy));
    return -1;
}
