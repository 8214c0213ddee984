/*
 * ramforge inspect: the command line, and the tensor inventory of a model
 * as a table or JSON; --page-cache (which of each tensor's file pages are
 * in the kernel's page cache, inspect_page_cache.c) and -c (the fit
 * check, inspect_fit.c) are views of their own.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <unistd.h>

#include "common/cli.h"
#include "inspect_experts.h"
#include "inspect_fit.h"
#include "inspect_page_cache.h"
#include "inspect_table.h"
#include "ramforge/core/inventory.h"
#include "ramforge/core/report_json.h"
#include "ramforge/core/residency.h"
#include "ramforge/error.h"
#include "ramforge/forge/forge.h"
#include "run/run.h"

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: %s inspect [OPTIONS] MODEL\n"
            "       %s inspect [OPTIONS] -m MODEL\n"
            "       %s inspect --page-cache [OPTIONS] MODEL...\n"
            "       %s inspect -c N [--memory-limit SIZE] [--admission MODE] [-J] MODEL\n"
            "\n"
            "Load MODEL through llama.cpp (mmap) and print its tensor inventory: per tensor\n"
            "the native index, name, type, file offset, logical bytes, page range [first,end)\n"
            "in file pages, bytes of pages shared with other tensors, the unique reclaimable\n"
            "estimate, what the graph reads (file mapping or an anonymous repacked copy) and\n"
            "release eligibility; then totals. No prompt is run; unless --no-probe, one\n"
            "token is decoded on a throw-away context to see which weights the graph reads.\n"
            "On a mixture-of-experts model, then its experts: the routed expert tensors\n"
            "(ffn_*_exps) cut into per-expert slices, the routed and dense bytes, and what\n"
            "a token reads (the dense part + k/n of the routed experts) beside the file size\n"
            "(docs/MOE.md); -c's read per token counts the same.\n"
            "\n"
            "With --page-cache, llama.cpp does not load the model (its load reads every\n"
            "page): the GGUF header gives the tensor table, the file is mapped read-only\n"
            "without populating it, and per tensor page range the pages in the kernel's\n"
            "page cache are counted with mincore, or with cachestat when mincore would lie\n"
            "(a file this user neither owns nor may write: the kernel then reports every\n"
            "page resident, so those pages are shown unknown). Then totals over the\n"
            "tensors' pages and over the whole file, each with its source. Page cache is\n"
            "not the same as pages mapped in a process (smaps Rss, 'run' reports that).\n"
            "Every figure is taken before ramforge reads anything; then it reads only the\n"
            "GGUF header, with O_DIRECT where the filesystem allows it (nothing enters\n"
            "the page cache; elsewhere without readahead, and it says why), and reports\n"
            "the pages that read brought into the page cache. No tensor data is read,\n"
            "prefetched or evicted. The model\n"
            "file's filesystem is named, with what the figures mean there.\n"
            "\n"
            "With -c N, the fit check: would `run -c N` be admitted? The decision run makes\n"
            "before loading (GGUF header: weights mapped, repacked copies, KV cache of N\n"
            "cells padded to 256; graph scratch unknown) against the limits of the cgroups\n"
            "this command runs in, or a hypothetical --memory-limit; nothing is loaded.\n"
            "Exit status 0: it would be admitted, 1: refused (or the check failed); a\n"
            "refusal is also one line on stderr.\n"
            "\n"
            "--json prints one document (kind ramforge.inspect.inventory or\n"
            "ramforge.inspect.page_cache, schema_version 1; schema/inspect.schema.json);\n"
            "with several files, one ramforge.inspect.page_cache_list holding them;\n"
            "with -c, kind ramforge.fit_check (schema/fit_check.schema.json).\n"
            "\n"
            "Options:\n"
            "  -m, --model PATH the model, as run's -m (or give it as the operand)\n"
            "  -J, --json       print the inventory as JSON\n"
            "  -b, --bytes      print sizes in bytes instead of KiB/MiB/GiB\n"
            "      --no-probe   do not run the access probe (access stays unknown)\n"
            "      --no-repack  load without llama.cpp's extra buffer types (no CPU_REPACK)\n"
            "      --page-cache report each tensor's pages in the page cache (no model load;\n"
            "                   --no-probe and --no-repack do not apply)\n"
            "      --residency-page-budget N\n"
            "                   with --page-cache: inspect at most N pages (default %llu);\n"
            "                   pages past the budget are unknown, never nonresident. It\n"
            "                   bounds the tensor pass and the whole-file pass separately\n"
            "      --residency-svg PATH\n"
            "                   with --page-cache: also draw the snapshot as SVG (one row\n"
            "                   per layer, one column per tensor kind; temporary file +\n"
            "                   rename)\n"
            "  -c, --ctx-size N the fit check for a context of N tokens (1..16777216)\n"
            "      --memory-limit SIZE\n"
            "                   with -c: check against one hypothetical cgroup of this hard\n"
            "                   limit holding only the run (e.g. a container's), not the\n"
            "                   cgroups this command runs in\n"
            "      --admission MODE\n"
            "                   with -c: warn (default: refuse only a charge over a hard\n"
            "                   limit), enforce (also unknown and thrashing), as run's,\n"
            "                   or off (the verdict is shown, exit 0 whatever it is)\n"
            "  -o, --output LIST\n"
            "                   with --page-cache: the table's columns, comma-separated;\n"
            "                   '+LIST' adds to the defaults (as fincore's -o):\n",
            RF_PROGRAM, RF_PROGRAM, RF_PROGRAM, RF_PROGRAM,
            (unsigned long long)RF_RESIDENCY_DEFAULT_BUDGET_PAGES);
    inspect_table_usage(out);
    fprintf(out, "  -n, --noheadings with --page-cache: the rows alone (no heading line, no\n"
                 "                   summary lines), for scripts\n"
                 "      --by-layer   with --page-cache: one row per layer (blk.N) and per other\n"
                 "                   tensor group (token_embd, output, ...); sums over the\n"
                 "                   group's tensors, so a page two tensors share counts twice\n"
                 "  -v, --verbose    show llama.cpp's log\n"
                 "  -h, --help       show this help\n");
    char wrapped[1024]; /* RF_SIZE_RULE, wrapped */
    fprintf(out, "\n%s\n", cli_wrap(RF_SIZE_RULE, wrapped, sizeof(wrapped)));
}

static void print_table(const struct rf_inventory *inv, bool raw)
{
    char b1[32], b2[32], b3[32], b4[32];
    printf("%5s  %-28s %-6s %12s %11s %17s %10s %11s %-13s %s\n", "index", "name", "type", "offset",
           "bytes", "pages", "shared", "unique", "access", "eligibility");
    for (size_t i = 0; i < inv->n; i++) {
        const struct rf_inventory_entry *e = &inv->entries[i];
        char pages[40] = "-";
        if (e->file_backed)
            snprintf(pages, sizeof(pages), "[%" PRIu64 ",%" PRIu64 ")", e->pages.first_page,
                     e->pages.end_page);
        printf("%5u  %-28s %-6s %12" PRIu64 " %11s %17s %10s %11s %-13s %s\n", e->key.tensor_index,
               e->name, e->type_name, e->file_offset_bytes,
               cli_format_bytes(e->logical_bytes, raw, b1, sizeof(b1)), pages,
               e->file_backed ? cli_format_bytes(e->shared_page_bytes, raw, b2, sizeof(b2)) : "-",
               e->file_backed ? cli_format_bytes(e->unique_reclaimable_bytes, raw, b3, sizeof(b3))
                              : "-",
               rf_weight_access_name(e->access), rf_eligibility_name(e->eligibility));
    }
    const struct rf_inventory_totals *t = &inv->totals;
    printf("\ninventory generation %" PRIu64 ", page size %s\n", inv->generation,
           cli_format_bytes(inv->page_bytes, true, b1, sizeof(b1)));
    bool probed = false;
    for (size_t i = 0; i < inv->n && !probed; i++)
        probed = inv->entries[i].access != RF_ACCESS_UNKNOWN;
    char n_anon[32] = "unknown (no probe)";
    if (probed)
        snprintf(n_anon, sizeof(n_anon), "%" PRIu64, t->n_anonymous);
    printf("tensors: %" PRIu64 " (inside the file mapping %" PRIu64
           ", read from an anonymous copy %s, eligible %" PRIu64 ")\n",
           t->n_tensors, t->n_file_backed, n_anon, t->n_eligible);
    printf("logical bytes: %s (inside the file mapping %s, read from an anonymous copy %s)\n",
           cli_format_bytes(t->logical_bytes, raw, b1, sizeof(b1)),
           cli_format_bytes(t->file_backed_logical_bytes, raw, b2, sizeof(b2)),
           probed ? cli_format_bytes(t->anonymous_logical_bytes, raw, b3, sizeof(b3))
                  : "unknown (no probe)");
    printf("mapped page ranges: %s, shared pages: %s, unique reclaimable (estimate): %s\n",
           cli_format_bytes(t->mapped_virtual_bytes, raw, b1, sizeof(b1)),
           cli_format_bytes(t->shared_page_bytes, raw, b2, sizeof(b2)),
           cli_format_bytes(t->unique_reclaimable_bytes, raw, b4, sizeof(b4)));
}

int cmd_inspect(int argc, char **argv)
{
    static const struct option opts[] = {
        {"model", required_argument, NULL, 'm'},
        {"json", no_argument, NULL, 'J'},
        {"bytes", no_argument, NULL, 'b'},
        {"no-probe", no_argument, NULL, 'P'},
        {"no-repack", no_argument, NULL, 'R'},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {"page-cache", no_argument, NULL, 'C'},
        {"residency-page-budget", required_argument, NULL, 'B'},
        {"residency-svg", required_argument, NULL, 'S'},
        {"ctx-size", required_argument, NULL, 'c'},
        {"memory-limit", required_argument, NULL, 'M'},
        {"admission", required_argument, NULL, 'A'},
        {"output", required_argument, NULL, 'o'},
        {"noheadings", no_argument, NULL, 'n'},
        {"by-layer", no_argument, NULL, 'L'},
        {NULL, 0, NULL, 0},
    };
    bool page_cache = false, budget_given = false;
    const char *svg_path = NULL;
    struct fit_options fit = {.repack = true, .mode = RF_ADMISSION_WARN};
    bool mode_given = false;
    long long budget = (long long)RF_RESIDENCY_DEFAULT_BUDGET_PAGES;
    struct forge_model_params mp = forge_model_default_params();
    bool json = false, raw = false, verbose = false;
    const char *model = NULL, *columns = NULL;
    bool noheadings = false, by_layer = false;
    struct forge_model *m = NULL;
    struct rf_inventory inv;
    char err[FORGE_ERR_MAX];
    int c, status = RF_EXIT_FAILURE, rc;

    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":m:Jbo:nvhc:", opts, NULL)) != -1) {
        switch (c) {
        case 'm':
            model = optarg;
            break;
        case 'o':
            columns = optarg;
            break;
        case 'n':
            noheadings = true;
            break;
        case 'L':
            by_layer = true;
            break;
        case 'J':
            json = true;
            break;
        case 'b':
            raw = true;
            break;
        case 'P':
            mp.probe_access = false;
            break;
        case 'R':
            mp.use_extra_bufts = false;
            break;
        case 'v':
            verbose = true;
            break;
        case 'C':
            page_cache = true;
            break;
        case 'B':
            if (!cli_parse_int("page budget (--residency-page-budget)", optarg, 0, INT64_MAX,
                               &budget))
                return RF_EXIT_USAGE;
            budget_given = true;
            break;
        case 'S':
            svg_path = optarg;
            break;
        case 'c':
            if (!cli_parse_int("context size (-c)", optarg, 1, 16777216, &fit.n_ctx))
                return RF_EXIT_USAGE;
            break;
        case 'M':
            if (!cli_parse_size("--memory-limit", optarg, false, &fit.limit_bytes))
                return RF_EXIT_USAGE;
            fit.has_limit = true;
            break;
        case 'A':
            if (rf_admission_mode_parse(optarg, &fit.mode) < 0) {
                cli_usage_error("unknown --admission '%s' (expected warn, enforce "
                                "or off)",
                                optarg);
                return RF_EXIT_USAGE;
            }
            mode_given = true;
            break;
        default: /* 'h' too */
            return cli_help_or_bad_option(c, argv, opts, usage);
        }
    }
    if ((columns || noheadings || by_layer) && !page_cache) {
        cli_usage_error("-o, -n and --by-layer need --page-cache");
        return RF_EXIT_USAGE;
    }
    if ((columns || noheadings || by_layer) && json) {
        cli_usage_error("-o, -n and --by-layer shape the table: not with --json");
        return RF_EXIT_USAGE;
    }
    if ((fit.has_limit || mode_given) && !fit.n_ctx) {
        cli_usage_error("--memory-limit and --admission need -c (the fit check)");
        return RF_EXIT_USAGE;
    }
    if (fit.n_ctx && (page_cache || !mp.probe_access)) {
        cli_usage_error("-c (the fit check) does not go with --page-cache or "
                        "--no-probe");
        return RF_EXIT_USAGE;
    }
    if (budget_given && !page_cache) {
        cli_usage_error("--residency-page-budget needs --page-cache");
        return RF_EXIT_USAGE;
    }
    if (svg_path && !page_cache) {
        cli_usage_error("--residency-svg needs --page-cache");
        return RF_EXIT_USAGE;
    }
    if (!model && optind >= argc) {
        cli_usage_error("missing MODEL");
        return RF_EXIT_USAGE;
    }
    int n_models = (model ? 1 : 0) + (argc - optind);
    if (!page_cache && n_models > 1) {
        cli_usage_error("more than one MODEL (several only with --page-cache)");
        return RF_EXIT_USAGE;
    }
    if (svg_path && n_models > 1) {
        cli_usage_error("--residency-svg draws one MODEL, not %d", n_models);
        return RF_EXIT_USAGE;
    }
    if (svg_path && !run_report_path_usable(svg_path, model ? model : argv[optind]))
        return RF_EXIT_FAILURE;
    if (verbose)
        rf_log_set(cli_log_sink, NULL);
    forge_init(verbose); /* routes gguf's own messages through the log */
    if (!page_cache && !model)
        model = argv[optind];
    if (fit.n_ctx) {
        fit.model = model;
        fit.json = json;
        fit.raw = raw;
        fit.repack = mp.use_extra_bufts;
        return inspect_fit(&fit);
    }
    if (page_cache)
        return inspect_page_cache_files(model, argc - optind, argv + optind, columns, by_layer,
                                        noheadings, raw, json, (uint64_t)budget, svg_path);
    rf_inventory_init(&inv);
    if (forge_model_load(model, &mp, &m, err) < 0) {
        cli_error("%s", err);
        goto out;
    }
    size_t n, nm;
    const struct rf_tensor_meta *t = forge_model_tensors(m, &n);
    const struct rf_mapping_meta *mm = forge_model_mappings(m, &nm);
    rc = rf_inventory_build(t, n, mm, nm, (uint64_t)sysconf(_SC_PAGESIZE), 1, &inv);
    if (rc < 0) {
        cli_error("%s: cannot build the inventory: %s", model, rf_strerror(rc));
        goto out;
    }
    struct forge_model_info info;
    forge_model_get_info(m, &info);
    if (json) {
        json_t *doc;
        if (rf_inventory_to_json(&inv, true, &doc) < 0 ||
            inspect_envelope(doc, INSPECT_KIND_INVENTORY) < 0 ||
            inspect_experts_json(&inv, &info, doc) < 0) {
            cli_error("out of memory");
            goto out;
        }
        json_dumpf(doc, stdout, JSON_INDENT(2) | JSON_SORT_KEYS);
        fputc('\n', stdout);
        json_decref(doc);
    } else {
        print_table(&inv, raw);
        if ((rc = inspect_experts_print(&inv, &info, raw)) < 0) {
            cli_error("%s: cannot split the experts: %s", model, rf_strerror(rc));
            goto out;
        }
    }
    status = cli_flush_stdout() == 0 ? 0 : RF_EXIT_FAILURE;
out:
    rf_inventory_free(&inv);
    forge_model_free(m);
    return status;
}
