/* ramforge serve's command line: the options, their checks and the usage text. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cli.h"
#include "ramforge/forge/forge_common.h"
#include "serve.h"

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: %s serve -m MODEL [OPTIONS]\n"
            "\n"
            "Serve MODEL over HTTP with llama-server's endpoints (/completion,\n"
            "/v1/completions, /v1/chat/completions, /apply-template, /tokenize,\n"
            "/detokenize, /health, /props, /slots, /v1/models, /metrics, the token counts)\n"
            "plus /residency, one "
            "request at a time, each in its own context\n"
            "that is dropped before the next (a quiescent boundary). Per request:\n"
            "admission (503 with the reason when refused), staging after an idle release,\n"
            "generation, the after_session boundary of the policy, the operation report.\n"
            "After --idle-seconds without a request the idle boundary releases cold\n"
            "weight pages down to --memory-target (memory-bound), the model stays loaded.\n"
            "\n"
            "Options:\n"
            "  -m, --model PATH              GGUF model (required)\n"
            "      --host ADDR[,ADDR...]     IPv4 or IPv6 addresses to listen on, each and\n"
            "                                only it (at most 8, e.g. 127.0.0.1,::1; default\n"
            "                                127.0.0.1)\n"
            "      --port N                  TCP port, 0..65535 (default 8080; 0: any free\n"
            "                                port, printed on stderr)\n"
            "  -c, --ctx-size N              largest context of a request (prompt +\n"
            "                                n_predict), tokens (default: the model's\n"
            "                                training context)\n"
            "  -n, --n-predict N             a request's n_predict when it gives none\n"
            "                                (default 128; -1: up to the context)\n"
            "  -t, --threads N               threads, 1..1024 (default: the physical cores,\n"
            "                                as llama.cpp's tools)\n"
            "      --residency-policy P      off, observe (default), conservative,\n"
            "                                memory-bound, reuse-aware, active, streaming\n"
            "                                (see 'ramforge run --help'; streaming, when the\n"
            "                                file exceeds the limit: serve runs itself again\n"
            "                                with OMP_WAIT_POLICY=PASSIVE GOMP_SPINCOUNT=300\n"
            "                                unless the policy is set, as run does)\n"
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
            "      --timeout N               close a connection idle for N seconds once its\n"
            "                                request head is in (default 600)\n"
            "      --header-timeout N        close a connection that has not sent a whole\n"
            "                                request head (its first, or the next on a\n"
            "                                keep-alive connection) within N seconds, 1..3600\n"
            "                                (default 10)\n"
            "      --max-connections N       open connections, 1..65536 (default 256); beyond\n"
            "                                N new ones close those that have waited longest\n"
            "                                for a request head; with all N in a request, 4\n"
            "                                more are kept for /health alone (other\n"
            "                                requests: 503)\n"
            "      --max-connections-per-address N\n"
            "                                open connections of one client address,\n"
            "                                1..65536 (default 32); beyond them a new one is\n"
            "                                closed at once, so one client cannot take every\n"
            "                                slot and /health stays reachable\n"
            "      --alias NAME[,NAME...]    the model's names (/v1/models' aliases); the\n"
            "                                alphabetically first is its id and its name in\n"
            "                                the answers, as llama-server (default: -m's path)\n"
            "      --tags TAG[,TAG...]       /v1/models' tags (default: none)\n"
            "      --seed N                  seed of a request that gives none, 0..2^32-2\n"
            "                                (default -1: random)\n"
            "      --prompt-cache            keep the last request's context alive, its KV\n"
            "                                cache's common prefix with the next prompt\n"
            "                                reused (llama-server's cache_prompt, one slot);\n"
            "                                freed before the idle boundary and before a\n"
            "                                release after each request\n"
            "      --batch-size N            decode a prompt in batches of at most N tokens,\n"
            "                                1..1048576 (default 2048, as llama-server's;\n"
            "                                return_progress reports each batch)\n"
            "      --metrics                 answer /metrics (Prometheus: llama-server's\n"
            "                                llamacpp: series, then ramforge's); without it\n"
            "                                /metrics answers 501, as llama-server's\n"
            "      --slots                   answer /slots (default)\n"
            "      --no-slots                /slots answers 501, as llama-server's\n"
            "      --chat-template T         the chat template: one of llama.cpp's built-in\n"
            "                                names (chatml, llama3, command-r, ...) or a\n"
            "                                template llama_chat_apply_template recognises\n"
            "                                (default: the model's; checked at start)\n"
            "      --jinja                   chat templates through llama.cpp's Jinja engine\n"
            "                                (its common library, as llama-server --jinja):\n"
            "                                the model's, or --chat-template as a Jinja\n"
            "                                template or chatml; refused by a build without\n"
            "                                libllama-common\n"
            "      --no-jinja                llama_chat_apply_template (default)\n"
            "      --temp T                  temperature of a request that gives none, 0..100\n"
            "                                (default 0.8)\n"
            "      --backend-sampling        a request's backend_sampling when it gives none\n"
            "                                (llama-server's spelling --backend_sampling too):\n"
            "                                the sampler chain runs in the model's graph\n"
            "                                (llama_set_sampler; the rest of the chain the\n"
            "                                backend cannot run, on the CPU); a grammar or\n"
            "                                n_probs without post_sampling_probs keep it on\n"
            "                                the CPU, as llama-server\n"
            "      --sleep-idle-seconds N    llama-server's sleep as serve does it:\n"
            "                                --idle-seconds N and, unless --memory-target is\n"
            "                                given, memory-bound to one page (the idle\n"
            "                                release takes every weight page it can; /props\n"
            "                                is_sleeping is true once it did, until a request\n"
            "                                that uses the model; while asleep /metrics\n"
            "                                answers ramforge's series as they were before)\n"
            "      --cors-origins LIST       Origins answered with Access-Control-Allow-*\n"
            "                                headers: '*' (default: any, reflected, as\n"
            "                                llama-server), 'localhost' (http://localhost,\n"
            "                                127.0.0.1 or [::1], any port), a comma-\n"
            "                                separated list, or none\n"
            "      --residency-report-json PATH\n"
            "                                at exit (SIGINT, SIGTERM), write the session\n"
            "                                report (schema_version 1, every operation)\n"
            "      --memory-limit SIZE       serve in a fresh child memory cgroup of its own\n"
            "                                with that hard limit (as run's; root or a\n"
            "                                delegated cgroup); removed at exit\n"
            "  -q, --quiet                   no line on stderr per request (status, tokens,\n"
            "                                time to first token, tok/s) and per idle release\n"
            "                                (bytes requested, accepted, observed)\n"
            "  -v, --verbose                 show llama.cpp's log\n"
            "  -h, --help                    show this help\n"
            "\n"
            "Errors answer llama-server's shape {\"error\":{\"code\",\"message\",\"type\"}}:\n"
            "400 bad body, 401 key, 404, 405, 413 body over 1 MiB, 503 queue full,\n"
            "admission refused or shutting down. A request field serve does not\n"
            "implement is refused with 400 naming it, never ignored; /v1/chat/completions\n"
            "uses the model's chat template through llama_chat_apply_template (--jinja:\n"
            "llama.cpp's Jinja engine); json_schema and response_format's schemas become\n"
            "a grammar through llama.cpp's json_schema_to_grammar (libllama-common).\n"
            "docs/guide/serve.md lists the fields.\n",
            RF_PROGRAM);
}

/* serve's own long-only options (the shared ones: session_options.h). */
enum {
    OPT_HOST = SESSION_OPT_END,
    OPT_PORT,
    OPT_IDLE,
    OPT_QUEUE,
    OPT_HISTORY,
    OPT_API_KEY,
    OPT_TIMEOUT,
    OPT_PROFILE_SAVE_EVERY,
    OPT_HEAD_TIMEOUT,
    OPT_MAX_CONNECTIONS,
    OPT_MAX_PER_ADDRESS,
    OPT_ALIAS,
    OPT_SEED,
    OPT_CORS_ORIGINS,
    OPT_SLOTS,
    OPT_NO_SLOTS,
    OPT_TEMP,
    OPT_SLEEP,
    OPT_TAGS,
    OPT_CHAT_TEMPLATE,
    OPT_JINJA,
    OPT_NO_JINJA,
    OPT_METRICS,
    OPT_BATCH_SIZE,
    OPT_PROMPT_CACHE,
    OPT_BACKEND_SAMPLING,
};

/* An option's text must not be empty (false: said so). */
static bool non_empty(const char *what, const char *arg)
{
    if (*arg)
        return true;
    cli_usage_error("%s is empty", what);
    return false;
}

/* serve's own options (session_command.own): 0, the exit status, or -1 for an unknown code. */
static int serve_option(int c, const char *arg, void *ud)
{
    struct serve_options *o = ud;

    switch (c) {
    case OPT_HOST:
        o->host = arg;
        break;
    case OPT_PORT:
        if (!cli_parse_int("port (--port)", arg, 0, 65535, &o->port))
            return RF_EXIT_USAGE;
        break;
    case OPT_IDLE:
        if (!cli_parse_int("idle time (--idle-seconds)", arg, 0, 86400 * 365, &o->idle_seconds))
            return RF_EXIT_USAGE;
        break;
    case OPT_HISTORY:
        if (!cli_parse_int("operations kept (--history)", arg, 1, 1000000, &o->history))
            return RF_EXIT_USAGE;
        break;
    case OPT_QUEUE:
        if (!cli_parse_int("queue length (--queue)", arg, 1, 4096, &o->queue))
            return RF_EXIT_USAGE;
        break;
    case OPT_API_KEY:
    case OPT_ALIAS:
        if (!non_empty(c == OPT_ALIAS ? "the alias (--alias)" : "the API key", arg))
            return RF_EXIT_USAGE;
        *(c == OPT_ALIAS ? &o->alias : &o->api_key) = arg;
        break;
    case OPT_TIMEOUT:
        if (!cli_parse_int("timeout (--timeout)", arg, 1, 86400, &o->timeout_s))
            return RF_EXIT_USAGE;
        break;
    case OPT_HEAD_TIMEOUT:
        if (!cli_parse_int("request head timeout (--header-timeout)", arg, 1, 3600,
                           &o->head_timeout_s))
            return RF_EXIT_USAGE;
        break;
    case OPT_MAX_CONNECTIONS:
        if (!cli_parse_int("connections (--max-connections)", arg, 1, 65536, &o->max_connections))
            return RF_EXIT_USAGE;
        break;
    case OPT_MAX_PER_ADDRESS:
        if (!cli_parse_int("connections of one address (--max-connections-per-address)", arg, 1,
                           65536, &o->max_per_address))
            return RF_EXIT_USAGE;
        break;
    case OPT_PROFILE_SAVE_EVERY:
        if (!cli_parse_int("requests (--profile-save-every)", arg, 0, 1000000000,
                           &o->profile_save_every))
            return RF_EXIT_USAGE;
        break;
    case OPT_SEED:
        if (!cli_parse_int("seed (--seed)", arg, -1, 4294967294LL, &o->seed))
            return RF_EXIT_USAGE;
        break;
    case OPT_CORS_ORIGINS:
        if (!non_empty("the CORS origins (--cors-origins: '*', localhost, a list or none)", arg))
            return RF_EXIT_USAGE;
        o->cors_origins = strcmp(arg, "none") ? arg : NULL;
        break;
    case OPT_TEMP: {
        char *end = NULL;
        o->temperature = strtod(arg, &end);
        if (!*arg || *end || !(o->temperature >= 0.0 && o->temperature <= 100.0)) {
            cli_usage_error("invalid temperature (--temp) '%s': expected a number in 0..100", arg);
            return RF_EXIT_USAGE;
        }
        break;
    }
    case OPT_SLEEP:
        if (!cli_parse_int("idle time (--sleep-idle-seconds)", arg, 1, 86400 * 365,
                           &o->idle_seconds))
            return RF_EXIT_USAGE;
        o->sleep = true;
        break;
    case OPT_CHAT_TEMPLATE:
        if (!non_empty("the chat template (--chat-template)", arg))
            return RF_EXIT_USAGE;
        o->chat_template = arg;
        break;
    case OPT_JINJA:
        if (!forge_common_available()) {
            cli_usage_error("--jinja needs llama.cpp's common library (libllama-common): this "
                            "ramforge was built without it (scripts/build-llama-server.sh "
                            "installs it into the pinned prefix; then rebuild)");
            return RF_EXIT_USAGE;
        }
        o->jinja = true;
        break;
    case OPT_NO_JINJA:
        o->jinja = false;
        break;
    case OPT_TAGS:
        if (!non_empty("the tags (--tags)", arg))
            return RF_EXIT_USAGE;
        o->tags = arg;
        break;
    case OPT_BATCH_SIZE:
        if (!cli_parse_int("batch size (--batch-size)", arg, 1, 1048576, &o->batch_size))
            return RF_EXIT_USAGE;
        break;
    case OPT_METRICS:
        o->metrics = true;
        break;
    case OPT_PROMPT_CACHE:
        o->prompt_cache = true;
        break;
    case OPT_BACKEND_SAMPLING:
        o->backend_sampling = true;
        break;
    case OPT_SLOTS:
    case OPT_NO_SLOTS:
        o->no_slots = c == OPT_NO_SLOTS;
        break;
    default:
        return -1;
    }
    return 0;
}

int serve_parse_options(int argc, char **argv, struct serve_options *o)
{
    static const struct option opts[] = {
        SESSION_LONGOPT_MODEL,
        {"host", required_argument, NULL, OPT_HOST},
        {"port", required_argument, NULL, OPT_PORT},
        SESSION_LONGOPT_CTX_SIZE,
        SESSION_LONGOPT_N_PREDICT,
        SESSION_LONGOPT_THREADS,
        SESSION_LONGOPT_POLICY,
        SESSION_LONGOPT_TARGET,
        SESSION_LONGOPT_RESERVE,
        SESSION_LONGOPT_RELEASE_MODE,
        {"idle-seconds", required_argument, NULL, OPT_IDLE},
        SESSION_LONGOPT_STAGING,
        {"queue", required_argument, NULL, OPT_QUEUE},
        {"history", required_argument, NULL, OPT_HISTORY},
        {"api-key", required_argument, NULL, OPT_API_KEY},
        {"timeout", required_argument, NULL, OPT_TIMEOUT},
        {"header-timeout", required_argument, NULL, OPT_HEAD_TIMEOUT},
        {"max-connections", required_argument, NULL, OPT_MAX_CONNECTIONS},
        {"max-connections-per-address", required_argument, NULL, OPT_MAX_PER_ADDRESS},
        {"alias", required_argument, NULL, OPT_ALIAS},
        {"tags", required_argument, NULL, OPT_TAGS},
        {"chat-template", required_argument, NULL, OPT_CHAT_TEMPLATE},
        {"jinja", no_argument, NULL, OPT_JINJA},
        {"no-jinja", no_argument, NULL, OPT_NO_JINJA},
        {"seed", required_argument, NULL, OPT_SEED},
        {"cors-origins", required_argument, NULL, OPT_CORS_ORIGINS},
        {"slots", no_argument, NULL, OPT_SLOTS},
        {"metrics", no_argument, NULL, OPT_METRICS},
        {"batch-size", required_argument, NULL, OPT_BATCH_SIZE},
        {"prompt-cache", no_argument, NULL, OPT_PROMPT_CACHE},
        {"backend-sampling", no_argument, NULL, OPT_BACKEND_SAMPLING},
        {"backend_sampling", no_argument, NULL, OPT_BACKEND_SAMPLING}, /* llama-server's too */
        {"temp", required_argument, NULL, OPT_TEMP},
        {"sleep-idle-seconds", required_argument, NULL, OPT_SLEEP},
        {"no-slots", no_argument, NULL, OPT_NO_SLOTS},
        SESSION_LONGOPT_REPORT_JSON,
        SESSION_LONGOPT_PROFILE,
        SESSION_LONGOPT_PROFILE_HISTORY,
        {"profile-save-every", required_argument, NULL, OPT_PROFILE_SAVE_EVERY},
        SESSION_LONGOPT_MEMORY_LIMIT,
        SESSION_LONGOPT_QUIET,
        SESSION_LONGOPT_VERBOSE,
        SESSION_LONGOPT_HELP,
        {NULL, 0, NULL, 0},
    };
    const struct session_command cmd = {.longopts = opts,
                                        .shortopts = ":" SESSION_SHORTOPTS,
                                        .usage = usage,
                                        .own = serve_option,
                                        .ud = o,
                                        .n_predict_to_context = true};
    const struct session_options *so = &o->sess;

    int rc = session_options_parse(&cmd, argc, argv, &o->sess);
    if (rc >= 0)
        return rc;
    for (const char *p = o->alias; p && *p;) { /* the first alias in byte order, as std::set */
        size_t n = strcspn(p, ",");
        if (n && n < sizeof(o->alias_first) &&
            (!o->alias_first[0] || strncmp(p, o->alias_first, sizeof(o->alias_first)) < 0))
            snprintf(o->alias_first, sizeof(o->alias_first), "%.*s", (int)n, p);
        p += n + (p[n] == ',');
    }
    if (o->sleep && !o->sess.has_target) { /* llama-server's sleep: release what can be */
        if (o->sess.policy == RF_POLICY_OBSERVE)
            o->sess.policy = RF_POLICY_MEMORY_BOUND;
        o->sess.has_target = true;
        o->sess.target_bytes = (uint64_t)sysconf(_SC_PAGESIZE);
    }
    if (!cli_check_target(so->policy, so->has_target, so->target_bytes, so->reserve_bytes))
        return RF_EXIT_USAGE;
    if (so->policy == RF_POLICY_OFF && (o->idle_seconds || so->has_staging || so->has_target))
        cli_error("warning: --idle-seconds, --staging-budget and --memory-target have no "
                  "effect with --residency-policy off");
    if (so->profile_path && so->policy == RF_POLICY_OFF) {
        cli_usage_error("--profile needs a residency policy (not off)");
        return RF_EXIT_USAGE;
    }
    session_options_warn_release_mode(so);
    return -1;
}
