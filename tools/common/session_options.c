/*
 * The options run, serve and exec share (session_options.h): one getopt_long
 * loop, one parser of the shared options, one mapping to
 * rf_session_params.
 */
#include "session_options.h"

#include "cli.h"

/* One shared option: 0 when taken, RF_EXIT_USAGE after the message, -1 when not shared. */
static int shared_option(const struct session_command *cmd, int c, const char *arg,
                         struct session_options *so)
{
    switch (c) {
    case 'm':
        so->model = arg;
        return 0;
    case 'v':
        so->verbose = true;
        return 0;
    case 'q':
        so->quiet = true;
        return 0;
    case SESSION_OPT_MEMORY_LIMIT:
        if (!cli_parse_size("--memory-limit", arg, false, &so->memory_limit))
            return RF_EXIT_USAGE;
        so->has_memory_limit = true;
        return 0;
    case 'n':
        if (!cli_parse_int("token count (-n)", arg, cmd->n_predict_to_context ? -1 : 1, 1000000,
                           &so->n_predict))
            return RF_EXIT_USAGE;
        if (so->n_predict == 0) { /* serve's -1..1000000 but 0 */
            cli_usage_error("invalid token count (-n) '0': expected -1 (up to the context) or "
                            "1..1000000");
            return RF_EXIT_USAGE;
        }
        return 0;
    case 't':
        return cli_parse_int("thread count (-t)", arg, 1, 1024, &so->n_threads) ? 0 : RF_EXIT_USAGE;
    case 'c':
        return cli_parse_int("context size (-c)", arg, 1, 16777216, &so->n_ctx) ? 0 : RF_EXIT_USAGE;
    case SESSION_OPT_POLICY:
        return cli_parse_policy(arg, &so->policy) ? 0 : RF_EXIT_USAGE;
    case SESSION_OPT_TARGET:
        if (!cli_parse_size("--memory-target", arg, false, &so->target_bytes))
            return RF_EXIT_USAGE;
        so->has_target = true;
        return 0;
    case SESSION_OPT_RESERVE:
        if (!cli_parse_size("--safety-reserve", arg, true, &so->reserve_bytes))
            return RF_EXIT_USAGE;
        so->has_reserve = true;
        return 0;
    case SESSION_OPT_RELEASE_MODE:
        so->has_release_mode = true;
        return cli_parse_release_mode(arg, &so->release_mode) ? 0 : RF_EXIT_USAGE;
    case SESSION_OPT_STAGING:
        if (!cli_parse_size("--staging-budget", arg, false, &so->staging_budget))
            return RF_EXIT_USAGE;
        so->has_staging = true;
        return 0;
    case SESSION_OPT_REPORT_JSON:
        so->json_path = arg;
        return 0;
    case SESSION_OPT_PROFILE:
        so->profile_path = arg;
        return 0;
    case SESSION_OPT_PROFILE_HISTORY:
        return cli_parse_profile_history(arg, &so->profile_history) ? 0 : RF_EXIT_USAGE;
    default:
        return -1;
    }
}

int session_options_parse(const struct session_command *cmd, int argc, char **argv,
                          struct session_options *so)
{
    int c;

    if (!cli_reject_llama_flags(argc, argv, cmd->longopts, cmd->shortopts))
        return RF_EXIT_USAGE;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, cmd->shortopts, cmd->longopts, NULL)) != -1) {
        if (c == 'h') {
            cmd->usage(stdout);
            return 0;
        }
        int rc = shared_option(cmd, c, optarg, so);
        if (rc < 0)
            rc = cmd->own(c, optarg, cmd->ud);
        if (rc < 0)
            return cli_bad_option(c, argv, cmd->longopts);
        if (rc > 0)
            return rc;
    }
    if (!cli_check_model_operands(argc, argv, cmd->no_model ? "" : so->model))
        return RF_EXIT_USAGE;
    return -1;
}

struct rf_session_params session_options_params(const struct session_options *so, uint64_t entry_ns)
{
    struct rf_session_params p = rf_session_default_params();
    p.policy = so->policy;
    p.has_target = so->has_target;
    p.target_bytes = so->target_bytes;
    p.reserve_bytes = so->reserve_bytes;
    p.release_mode = so->release_mode;
    p.n_threads = (int32_t)so->n_threads;
    p.entry_ns = entry_ns;
    return p;
}

void session_options_warn_release_mode(const struct session_options *so)
{
    if (so->has_release_mode && !rf_policy_mutates(so->policy))
        cli_error("warning: --release-mode has no effect with --residency-policy %s (it does "
                  "not release)",
                  rf_policy_name(so->policy));
}
