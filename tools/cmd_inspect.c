/* ramforge inspect: the tensor inventory of a model, as a table or JSON. */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cli.h"
#include "ramforge/error.h"
#include "ramforge/forge.h"
#include "ramforge/inventory.h"
#include "ramforge/report.h"

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: %s inspect [OPTIONS] MODEL\n"
            "\n"
            "Load MODEL through llama.cpp (mmap) and print its tensor inventory: per tensor\n"
            "the native index, name, type, file offset, logical bytes, page range [first,end)\n"
            "in file pages, bytes of pages shared with other tensors, the unique reclaimable\n"
            "estimate, what the graph reads (file mapping or an anonymous repacked copy) and\n"
            "release eligibility; then totals. No prompt is run; unless --no-probe, one\n"
            "token is decoded on a throw-away context to see which weights the graph reads.\n"
            "\n"
            "Options:\n"
            "  -J, --json       print the inventory as JSON\n"
            "  -b, --bytes      print sizes in bytes instead of KiB/MiB/GiB\n"
            "      --no-probe   do not run the access probe (access stays unknown)\n"
            "      --no-repack  load without llama.cpp's extra buffer types (no CPU_REPACK)\n"
            "  -v, --verbose    show llama.cpp's log\n"
            "  -h, --help       show this help\n",
            RF_PROGRAM);
}

static void print_table(const struct rf_inventory *inv, bool raw)
{
    char b1[32], b2[32], b3[32], b4[32];
    printf("%5s  %-28s %-6s %12s %11s %17s %10s %11s %-13s %s\n", "index", "name", "type",
           "offset", "bytes", "pages", "shared", "unique", "access", "eligibility");
    for (size_t i = 0; i < inv->n; i++) {
        const struct rf_inventory_entry *e = &inv->entries[i];
        char pages[40] = "-";
        if (e->file_backed)
            snprintf(pages, sizeof(pages), "[%" PRIu64 ",%" PRIu64 ")", e->pages.first_page,
                     e->pages.end_page);
        printf("%5u  %-28s %-6s %12" PRIu64 " %11s %17s %10s %11s %-13s %s\n",
               e->key.tensor_index, e->name, e->type_name, e->file_offset_bytes,
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
        {"json", no_argument, NULL, 'J'},    {"bytes", no_argument, NULL, 'b'},
        {"no-probe", no_argument, NULL, 'P'}, {"no-repack", no_argument, NULL, 'R'},
        {"verbose", no_argument, NULL, 'v'}, {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct forge_model_params mp = forge_model_default_params();
    bool json = false, raw = false, verbose = false;
    struct forge_model *m = NULL;
    struct rf_inventory inv;
    char err[FORGE_ERR_MAX];
    int c, status = RF_EXIT_FAILURE, rc;

    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":Jbvh", opts, NULL)) != -1) {
        switch (c) {
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
        case 'h':
            usage(stdout);
            return 0;
        default:
            return cli_bad_option("inspect ", c, argv);
        }
    }
    if (optind != argc - 1) {
        cli_usage_error("inspect ", optind >= argc ? "missing MODEL" : "more than one MODEL");
        return RF_EXIT_USAGE;
    }
    if (verbose)
        rf_log_set(cli_log_sink, NULL);
    forge_init(verbose);
    rf_inventory_init(&inv);
    if (forge_model_load(argv[optind], &mp, &m, err) < 0) {
        cli_error("%s", err);
        goto out;
    }
    size_t n, nm;
    const struct rf_tensor_meta *t = forge_model_tensors(m, &n);
    const struct rf_mapping_meta *mm = forge_model_mappings(m, &nm);
    rc = rf_inventory_build(t, n, mm, nm, (uint64_t)sysconf(_SC_PAGESIZE), 1, &inv);
    if (rc < 0) {
        cli_error("%s: cannot build the inventory: %s", argv[optind], rf_strerror(rc));
        goto out;
    }
    if (json) {
        json_t *doc;
        if (rf_inventory_to_json(&inv, true, &doc) < 0) {
            cli_error("out of memory");
            goto out;
        }
        json_dumpf(doc, stdout, JSON_INDENT(2) | JSON_SORT_KEYS);
        fputc('\n', stdout);
        json_decref(doc);
    } else {
        print_table(&inv, raw);
    }
    status = fflush(stdout) == 0 ? 0 : RF_EXIT_FAILURE;
out:
    rf_inventory_free(&inv);
    forge_model_free(m);
    return status;
}
