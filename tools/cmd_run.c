/*
 * ramforge run: greedy generation under the memory ledger.
 *
 * Loads the model through forge (mmap), builds the inventory (policy
 * observe), samples process, mapping and cgroup figures after load and
 * after the session is dropped, fills the ledger and its reconciliation,
 * prints the generated text on stdout, and writes the human report
 * (stderr) and the JSON operation report on request.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "ramforge/error.h"
#include "ramforge/forge.h"
#include "ramforge/inventory.h"
#include "ramforge/ledger.h"
#include "ramforge/measure.h"
#include "ramforge/report.h"
#include "ramforge/timing.h"

struct run_options {
    const char *model;
    const char *prompt;
    long long n_predict;
    long long n_threads; /* 0: llama.cpp default */
    long long n_ctx;     /* 0: prompt + n_predict */
    long long seed;
    bool observe;        /* --residency-policy observe (default) vs off */
    bool human_report;
    const char *json_path;
    bool repack;
    bool hold;
    bool verbose;
};

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: %s run -m MODEL [-p PROMPT] [-n N] [OPTIONS]\n"
            "\n"
            "Load MODEL through llama.cpp (mmap), generate N tokens greedily (the decode\n"
            "loop of llama.cpp's examples/simple), print the generated text on stdout, and\n"
            "account for the model's memory.\n"
            "\n"
            "Options:\n"
            "  -m, --model PATH              GGUF model (required)\n"
            "  -p, --prompt TEXT             prompt (default \"Hello my name is\")\n"
            "  -n, --n-predict N             tokens to generate, 1..1000000 (default 32)\n"
            "  -t, --threads N               threads, 1..1024 (default: llama.cpp's)\n"
            "  -c, --ctx-size N              context size in tokens (default: prompt + N)\n"
            "  -s, --seed N                  recorded in the report; greedy decoding does not\n"
            "                                use it (default 0)\n"
            "      --residency-policy P      off      run without inventory or ledger\n"
            "                                observe  build the inventory, the ledger and its\n"
            "                                         reconciliation; change nothing (default)\n"
            "      --residency-report        print the human-readable report on stderr\n"
            "      --residency-report-json PATH\n"
            "                                write the JSON operation report (schema_version 1)\n"
            "                                to PATH (temporary file + rename: never partial)\n"
            "      --no-repack               load without llama.cpp's extra buffer types\n"
            "                                (no CPU_REPACK copies of Q4_0 weights)\n"
            "      --hold                    after the report, keep the model loaded until\n"
            "                                standard input closes (compare with\n"
            "                                /proc/PID/smaps, fincore, vmtouch)\n"
            "  -v, --verbose                 show llama.cpp's log\n"
            "  -h, --help                    show this help\n"
            "\n"
            "Figures carry their provenance: exact_measured (read from /proc or the cgroup),\n"
            "native_logical (tensor sizes from the GGUF table: not residency), requested,\n"
            "native_accepted, estimated, or unknown (null, with the reason). They are never\n"
            "added into one total.\n",
            RF_PROGRAM);
}

enum { OPT_POLICY = 256, OPT_REPORT, OPT_REPORT_JSON, OPT_NO_REPACK, OPT_HOLD };

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
        {"residency-report", no_argument, NULL, OPT_REPORT},
        {"residency-report-json", required_argument, NULL, OPT_REPORT_JSON},
        {"no-repack", no_argument, NULL, OPT_NO_REPACK},
        {"hold", no_argument, NULL, OPT_HOLD},
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
            if (!strcmp(optarg, "observe")) {
                o->observe = true;
            } else if (!strcmp(optarg, "off")) {
                o->observe = false;
            } else {
                cli_usage_error("run ", "unknown residency policy '%s' (expected off or observe)",
                                optarg);
                return RF_EXIT_USAGE;
            }
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
        case OPT_HOLD:
            o->hold = true;
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
    return -1;
}

/* Fails early, before inference, when the report's directory is not writable. */
static bool report_dir_writable(const char *path)
{
    char *copy = strdup(path);
    if (!copy) {
        cli_error("out of memory");
        return false;
    }
    const char *dir = dirname(copy);
    bool ok = access(dir, W_OK | X_OK) == 0;
    if (!ok)
        cli_error("cannot write %s: %s", path, strerror(errno));
    free(copy);
    return ok;
}

static void add_warning(struct rf_report *r, const char *w)
{
    if (r->n_warnings < RF_REPORT_MAX_WARNINGS)
        r->warnings[r->n_warnings++] = w;
}

static void print_human_report(const struct rf_report *r)
{
    char b1[32], b2[32];
    FILE *f = stderr;

    fprintf(f, "\n== ramforge residency report (schema %d), policy %s ==\n",
            RF_REPORT_SCHEMA_VERSION, r->policy);
    fprintf(f, "model: %s (%s), file %s, native tensor size %s, instance %" PRIu64 "\n",
            r->model_path, r->model_desc,
            cli_format_bytes(r->model_file_size_bytes, false, b1, sizeof(b1)),
            cli_format_bytes(r->model_native_size_bytes, false, b2, sizeof(b2)), r->instance_id);
    if (r->inventory) {
        const struct rf_inventory_totals *t = &r->inventory->totals;
        fprintf(f,
                "inventory: generation %" PRIu64 ", %" PRIu64 " tensors: %" PRIu64
                " file-backed, %" PRIu64 " read from an anonymous copy, %" PRIu64 " eligible\n",
                r->inventory->generation, t->n_tensors, t->n_file_backed, t->n_anonymous,
                t->n_eligible);
    } else {
        fprintf(f, "inventory: not built (%s)\n", r->not_built_reason);
    }
    if (r->ledger) {
        fprintf(f, "ledger (categories are not additive; no total):\n");
        for (int c = 0; c < RF_LEDGER_N_CATEGORIES; c++) {
            const struct rf_ledger_entry *e = &r->ledger->entries[c];
            fprintf(f, "  %-20s %12s  %-15s %s\n",
                    rf_ledger_category_name((enum rf_ledger_category)c),
                    e->has_value ? cli_format_bytes(e->value_bytes, false, b1, sizeof(b1))
                                 : "unknown",
                    rf_provenance_name(e->provenance), e->has_value ? e->source : e->note);
        }
        const struct rf_reconciliation *rc = r->reconciliation;
        fprintf(f, "reconciliation (signed differences, not overhead):\n");
        if (rc->rss_minus_mapping_resident_bytes.has_value)
            fprintf(f, "  process RSS - mapping resident: %+.2f MiB\n",
                    (double)rc->rss_minus_mapping_resident_bytes.value / 1048576.0);
        else
            fprintf(f, "  process RSS - mapping resident: unknown\n");
        if (rc->cgroup_current_minus_rss_bytes.has_value)
            fprintf(f, "  cgroup current - process RSS:   %+.2f MiB\n",
                    (double)rc->cgroup_current_minus_rss_bytes.value / 1048576.0);
        else
            fprintf(f, "  cgroup current - process RSS:   unknown\n");
    } else {
        fprintf(f, "ledger: not built (%s)\n", r->not_built_reason);
    }
    const struct rf_timing *t = r->timing;
    fprintf(f, "timing:");
    static const enum rf_timer shown[] = {RF_TIMER_MODEL_LOAD, RF_TIMER_OBSERVATION,
                                          RF_TIMER_TTFT, RF_TIMER_INFERENCE, RF_TIMER_END_TO_END};
    for (size_t i = 0; i < sizeof(shown) / sizeof(shown[0]); i++)
        if (t->has[shown[i]])
            fprintf(f, " %s %s", rf_timer_name(shown[i]),
                    cli_format_ns(t->ns[shown[i]], b1, sizeof(b1)));
    fputc('\n', f);
    char fp[32];
    rf_token_fingerprint(r->tokens, r->n_tokens, fp);
    fprintf(f, "output: %zu prompt tokens, %zu generated, %s\n", r->n_prompt, r->n_tokens, fp);
    for (size_t i = 0; i < r->n_warnings; i++)
        fprintf(f, "warning: %s\n", r->warnings[i]);
}

/* Waits until standard input closes (--hold). */
static void hold_until_stdin_closes(void)
{
    char buf[256];
    fprintf(stderr, "%s: holding pid %ld with the model loaded; close standard input to exit\n",
            RF_PROGRAM, (long)getpid());
    while (fread(buf, 1, sizeof(buf), stdin) > 0 || (!feof(stdin) && errno == EINTR))
        ;
}

int cmd_run(int argc, char **argv)
{
    uint64_t t_entry = rf_now_ns();
    struct run_options o = {
        .prompt = "Hello my name is",
        .n_predict = 32,
        .observe = true,
        .repack = true,
    };
    struct forge_model_params mp = forge_model_default_params();
    struct forge_generate_result gen = {0};
    struct forge_model *m = NULL;
    struct forge_model_info info;
    struct rfsys_cgroup_memory cg;
    struct rf_reconciliation recon;
    struct rf_inventory inv;
    struct rf_ledger ledger;
    struct rf_timing timing;
    struct rf_report rep;
    char err[FORGE_ERR_MAX];
    int status = RF_EXIT_FAILURE, rc;

    rc = parse_options(argc, argv, &o);
    if (rc >= 0)
        return rc;
    if (o.json_path && !report_dir_writable(o.json_path))
        return RF_EXIT_FAILURE;
    if (o.verbose)
        rf_log_set(cli_log_sink, NULL);
    forge_init(o.verbose);

    rf_timing_init(&timing);
    rf_inventory_init(&inv);
    rf_ledger_init(&ledger);
    memset(&rep, 0, sizeof(rep));
    memset(&cg, 0, sizeof(cg));

    mp.use_extra_bufts = o.repack;
    mp.probe_access = o.observe;
    mp.n_threads = o.n_threads > 0 ? (int)o.n_threads : 2;
    uint64_t t0 = rf_now_ns();
    if (forge_model_load(o.model, &mp, &m, err) < 0) {
        cli_error("%s", err);
        goto out;
    }
    forge_model_get_info(m, &info);
    rf_timing_set(&timing, RF_TIMER_MODEL_LOAD, rf_now_ns() - t0 - info.probe_ns);

    size_t n_tensors, n_mappings;
    const struct rf_tensor_meta *tensors = forge_model_tensors(m, &n_tensors);
    const struct rf_mapping_meta *mappings = forge_model_mappings(m, &n_mappings);
    if (o.observe) {
        rf_timing_add(&timing, RF_TIMER_OBSERVATION, info.probe_ns);
        t0 = rf_now_ns();
        rc = rf_inventory_build(tensors, n_tensors, mappings, n_mappings,
                                (uint64_t)sysconf(_SC_PAGESIZE), 1, &inv);
        if (rc < 0) {
            cli_error("%s: cannot build the inventory: %s", o.model, rf_strerror(rc));
            goto out;
        }
        rf_measure_sample(NULL, "self", mappings, n_mappings, "after_load", &rep.samples[0], NULL);
        rf_timing_add(&timing, RF_TIMER_OBSERVATION, rf_now_ns() - t0);
    }

    struct forge_generate_params gp = {
        .prompt = o.prompt,
        .n_predict = (int32_t)o.n_predict,
        .n_ctx = (uint32_t)o.n_ctx,
        .n_threads = (int32_t)o.n_threads,
    };
    if (forge_generate(m, &gp, &gen, err) < 0) {
        cli_error("%s: %s", o.model, err);
        goto out;
    }
    rf_timing_set(&timing, RF_TIMER_CONTEXT_INIT, gen.context_init_ns);
    rf_timing_set(&timing, RF_TIMER_INFERENCE, gen.inference_ns);
    rf_timing_set(&timing, RF_TIMER_PROMPT, gen.prompt_ns);
    rf_timing_set(&timing, RF_TIMER_TTFT, gen.ttft_ns);
    rf_timing_set(&timing, RF_TIMER_DECODE, gen.decode_ns);
    rf_timing_set(&timing, RF_TIMER_SYNCHRONIZATION, gen.sync_ns);

    /* The session (context) is dropped: sample the quiescent model. */
    if (o.observe) {
        t0 = rf_now_ns();
        rf_measure_sample(NULL, "self", mappings, n_mappings, "after_session", &rep.samples[1],
                          &cg);
        rf_measure_fill_ledger(&ledger, &inv, info.access_probed, &rep.samples[1], &cg, "self");
        rf_ledger_reconcile(&ledger, true, inv.totals.mapped_virtual_bytes, &recon);
        rf_timing_add(&timing, RF_TIMER_OBSERVATION, rf_now_ns() - t0);
    }
    rf_timing_set(&timing, RF_TIMER_END_TO_END, rf_now_ns() - t_entry);

    printf("%s\n", gen.text);
    fflush(stdout);

    rep.ramforge_version = RAMFORGE_VERSION;
    rep.llama_cpp_version = forge_llama_version();
    rep.model_path = info.path;
    rep.model_desc = info.desc;
    rep.model_file_size_bytes = info.file_size_bytes;
    rep.model_native_size_bytes = info.size_bytes;
    rep.model_n_params = info.n_params;
    rep.instance_id = forge_model_instance_id(m);
    rep.access_probed = info.access_probed;
    rep.policy = o.observe ? "observe" : "off";
    if (o.observe) {
        rep.inventory = &inv;
        rep.ledger = &ledger;
        rep.reconciliation = &recon;
        rep.cgroup_version = cg.version == RFSYS_CGROUP_V1   ? "v1"
                             : cg.version == RFSYS_CGROUP_V2 ? "v2"
                                                             : "none";
        rep.cgroup_dir = cg.version != RFSYS_CGROUP_NONE ? cg.dir : NULL;
        rep.has_cgroup_limit = cg.has_limit;
        rep.cgroup_limit_unlimited = cg.limit_unlimited;
        rep.cgroup_limit_bytes = cg.limit_bytes;
    } else {
        rep.not_built_reason = "residency policy off: no inventory, ledger or sample was taken";
    }
    rep.timing = &timing;
    rep.active_contexts = 0; /* forge_generate freed its context */
    rep.prompt_tokens = gen.prompt_tokens;
    rep.n_prompt = gen.n_prompt;
    rep.tokens = gen.tokens;
    rep.n_tokens = gen.n_tokens;
    rep.text = gen.text;
    rep.n_ctx = gen.n_ctx;
    rep.n_threads = (int32_t)o.n_threads;
    rep.seed = (uint32_t)o.seed;

    if (o.observe) {
        add_warning(&rep, "FileBackedResident is this process's mapping RSS: it is neither the "
                          "file's page cache nor the cgroup charge");
        add_warning(&rep, "KvCache, GraphScratch and Runtime are unknown: the pinned llama.cpp C "
                          "API does not report them; they are inside ProcessRss");
        if (inv.totals.n_anonymous > 0)
            add_warning(&rep, "some weights are read from anonymous repacked copies: their file "
                              "pages stay mapped and resident but are never read again");
        if (cg.version == RFSYS_CGROUP_NONE)
            add_warning(&rep, "no cgroup memory controller was found: cgroup figures are unknown");
    }

    if (o.human_report)
        print_human_report(&rep);
    if (o.json_path) {
        json_t *doc;
        rc = rf_report_to_json(&rep, &doc);
        if (rc == 0) {
            rc = rf_json_write_file(doc, o.json_path);
            json_decref(doc);
        }
        if (rc < 0) {
            cli_error("cannot write %s: %s", o.json_path, rf_strerror(rc));
            goto out;
        }
    }
    if (o.hold)
        hold_until_stdin_closes();
    status = 0;
out:
    forge_generate_result_free(&gen);
    rf_inventory_free(&inv);
    forge_model_free(m);
    return status;
}
