/*
 * ramforge inspect: the tensor inventory of a model, as a table or JSON;
 * with --page-cache, which of each tensor's file pages are in the kernel's
 * page cache, read without loading the model through llama.cpp (whose
 * mmap load prefetches every page).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "cli.h"
#include "core/report_json.h"
#include "inspect_fit.h"
#include "inspect_table.h"
#include "ramforge/error.h"
#include "ramforge/forge.h"
#include "ramforge/forge_pages.h"
#include "ramforge/fs_profile.h"
#include "ramforge/inventory.h"
#include "ramforge/pages.h"
#include "ramforge/report.h"
#include "ramforge/residency.h"
#include "ramforge/residency_svg.h"
#include "run.h"

/* What the own-reads figures mean, said in the output itself. */
#define OWN_READS_NOTE                                                                             \
    "every page-cache figure was taken before ramforge read the GGUF header; that read "           \
    "(without readahead) then brought brought_in_pages into the page cache, which stay there"

/* What --page-cache measures, said in the output itself. */
#define PAGE_CACHE_NOTE                                                                            \
    "pages of the model file in the kernel's page cache (mincore on a fresh read-only "            \
    "mapping, or cachestat); not pages mapped in any process (smaps Rss)"

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
            "GGUF header, without readahead, and reports the pages that read brought into\n"
            "the page cache. No tensor data is read, prefetched or evicted. The model\n"
            "file's filesystem is named, with what the figures mean there.\n"
            "\n"
            "With -c N, the fit check: would `run -c N` be admitted? The decision run makes\n"
            "before loading (GGUF header: weights mapped, repacked copies, KV cache of N\n"
            "cells padded to 256; graph scratch unknown) against the limits of the cgroups\n"
            "this command runs in, or a hypothetical --memory-limit; nothing is loaded.\n"
            "Exit status 0: it would be admitted, 1: refused (or the check failed).\n"
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

/*
 * Page states as they were before ramforge read the GGUF header. The
 * header read (without readahead) brings pages [0, header_pages) into the
 * page cache; so the first min(file_pages, BEFORE_MAX_PAGES) pages are
 * observed before that read and every later answer for them comes from
 * this capture. Pages past the capture are observed live, except those the
 * read touched (unknown: their state before the read was not seen).
 */
#define BEFORE_MAX_PAGES (1ull << 22) /* 16 GiB of 4 KiB pages; 4 MiB of states */

struct before_read {
    struct rfsys_file_pages *fp;
    uint8_t *states;       /* [0, pages): RF_PAGE_* before the header read; owned */
    uint64_t pages;        /* pages captured */
    int error;             /* first sampler error of the capture, 0 if none */
    uint64_t header_bytes; /* ramforge read [0, header_bytes) of the file */
    uint64_t header_pages; /* ceil(header_bytes / page) */
    uint64_t brought_in;   /* pages not in the page cache before the read, in it after */
    uint64_t unobserved;   /* header pages past the capture: not seen before the read */
};

static int before_capture(struct rfsys_file_pages *fp, struct before_read *b)
{
    memset(b, 0, sizeof(*b));
    b->fp = fp;
    b->pages = fp->file_pages < BEFORE_MAX_PAGES ? fp->file_pages : BEFORE_MAX_PAGES;
    b->states = malloc(b->pages ? (size_t)b->pages : 1);
    if (!b->states)
        return -ENOMEM;
    for (uint64_t first = 0; first < b->pages; first += RF_PAGE_WINDOW_PAGES) {
        uint64_t n = b->pages - first;
        n = n < RF_PAGE_WINDOW_PAGES ? n : RF_PAGE_WINDOW_PAGES;
        int rc = rfsys_file_pages_sample(fp, first, n, b->states + first);
        if (rc < 0 && !b->error)
            b->error = rc;
    }
    return 0;
}

/* After the header read: which of its pages it brought into the page cache. */
static void before_account(struct before_read *b, uint64_t header_bytes)
{
    uint8_t states[RF_PAGE_WINDOW_PAGES];
    const uint64_t pb = b->fp->page_bytes;

    b->header_bytes = header_bytes;
    b->header_pages = header_bytes / pb + (header_bytes % pb != 0);
    if (b->header_pages > b->fp->file_pages)
        b->header_pages = b->fp->file_pages;
    uint64_t seen = b->header_pages < b->pages ? b->header_pages : b->pages;
    b->unobserved = b->header_pages - seen;
    for (uint64_t first = 0; first < seen; first += RF_PAGE_WINDOW_PAGES) {
        uint64_t n = seen - first < RF_PAGE_WINDOW_PAGES ? seen - first : RF_PAGE_WINDOW_PAGES;
        if (rfsys_file_pages_sample(b->fp, first, n, states) < 0) {
            b->unobserved += n;
            continue;
        }
        for (uint64_t i = 0; i < n; i++)
            if (b->states[first + i] == RF_PAGE_NONRESIDENT && states[i] == RF_PAGE_RESIDENT)
                b->brought_in++;
    }
}

/* States of [first_page, first_page + n_pages) as they were before the header read. */
static int before_sample(struct before_read *b, uint64_t first_page, uint64_t n_pages,
                         uint8_t *states)
{
    int rc = 0;
    for (uint64_t i = 0; i < n_pages;) {
        uint64_t p = first_page + i, n;
        if (p < b->pages) {
            n = b->pages - p < n_pages - i ? b->pages - p : n_pages - i;
            memcpy(states + i, b->states + p, (size_t)n);
            if (b->error && !rc)
                rc = b->error;
        } else if (p < b->header_pages) {
            n = b->header_pages - p < n_pages - i ? b->header_pages - p : n_pages - i;
            memset(states + i, RF_PAGE_UNKNOWN, (size_t)n);
        } else {
            n = n_pages - i;
            int r = rfsys_file_pages_sample(b->fp, p, n, states + i);
            if (r < 0 && !rc)
                rc = r;
        }
        i += n;
    }
    return rc;
}

/* The page-cache sampler over the observation mapping (mapping 0 only). */
static int file_sampler(void *ud, int32_t mapping_index, uint64_t first_page, uint64_t n_pages,
                        uint8_t *states)
{
    if (mapping_index != 0) {
        memset(states, RF_PAGE_UNKNOWN, (size_t)n_pages);
        return -ENXIO;
    }
    return before_sample(ud, first_page, n_pages, states);
}

/* Page-cache figures of the whole file, [0, file_pages), within the budget. */
struct file_count {
    uint64_t pages;       /* file pages */
    uint64_t inspected;   /* pages asked about (min(pages, budget)) */
    uint64_t resident;    /* in the page cache */
    uint64_t nonresident; /* not in the page cache */
    uint64_t unknown;     /* pages - resident - nonresident */
    int first_error;      /* sampler error, 0 if none */
};

static void count_file(struct before_read *b, uint64_t budget, struct file_count *fc)
{
    uint8_t states[RF_PAGE_WINDOW_PAGES];
    struct rfsys_file_pages *fp = b->fp;
    uint64_t todo = fp->file_pages < budget ? fp->file_pages : budget;

    memset(fc, 0, sizeof(*fc));
    fc->pages = fp->file_pages;
    for (uint64_t first = 0; first < todo;) {
        uint64_t n = todo - first < RF_PAGE_WINDOW_PAGES ? todo - first : RF_PAGE_WINDOW_PAGES;
        int rc = before_sample(b, first, n, states);
        if (rc < 0 && !fc->first_error)
            fc->first_error = rc;
        for (uint64_t i = 0; i < n; i++) {
            if (states[i] == RF_PAGE_RESIDENT)
                fc->resident++;
            else if (states[i] == RF_PAGE_NONRESIDENT)
                fc->nonresident++;
        }
        first += n;
    }
    fc->inspected = todo;
    fc->unknown = fc->pages - fc->resident - fc->nonresident;
}

/* "mincore", "cachestat", or "unknown: <why>". */
static void source_text(const struct rfsys_file_pages *fp, char *buf, size_t len)
{
    if (fp->method == RFSYS_PAGES_MINCORE)
        snprintf(buf, len, "mincore");
    else if (fp->method == RFSYS_PAGES_CACHESTAT)
        snprintf(buf, len, "cachestat");
    else
        snprintf(buf, len, "unknown: %s; cachestat: %s", fp->mincore_reason,
                 rf_strerror(fp->cachestat_error));
}

/* pages * page_bytes as a JSON integer; null on overflow. */
static json_t *jpage_bytes(uint64_t pages, uint64_t page_bytes)
{
    uint64_t b;
    if (__builtin_mul_overflow(pages, page_bytes, &b) || b > (uint64_t)INT64_MAX)
        return json_null();
    return json_integer((json_int_t)b);
}

static json_t *ju64(uint64_t v)
{
    return v <= (uint64_t)INT64_MAX ? json_integer((json_int_t)v) : json_null();
}

struct page_cache_view {
    const char *path;
    struct rfsys_file_pages *fp;
    const struct rf_inventory *inv;
    const struct rf_residency_snapshot *snap;
    const struct file_count *file;
    uint64_t budget;
    const char *source;
    int cachestat_rc;          /* whole-file cachestat, before the header read */
    const char *cachestat_why; /* when cachestat_rc < 0: why the figure is unknown */
    struct rfsys_cachestat cs;
    const struct before_read *before;
};

/* What ramforge's own header read did to the page cache. */
static json_t *own_reads_json(const struct page_cache_view *v)
{
    const struct before_read *b = v->before;
    json_t *o = json_object();
    if (!o)
        return NULL;
    json_object_set_new(o, "header_read_bytes", ju64(b->header_bytes));
    json_object_set_new(o, "header_pages", ju64(b->header_pages));
    json_object_set_new(o, "brought_in_pages", ju64(b->brought_in));
    json_object_set_new(o, "brought_in_bytes", jpage_bytes(b->brought_in, v->fp->page_bytes));
    json_object_set_new(o, "unobserved_pages", ju64(b->unobserved));
    json_object_set_new(o, "note", json_string(OWN_READS_NOTE));
    return o;
}

static json_t *page_cache_json(const struct page_cache_view *v)
{
    const uint64_t pb = v->fp->page_bytes;
    const struct rf_residency_population *tp = &v->snap->coverage.general;
    json_t *doc = json_object(), *model = json_object(), *pc = json_object();
    json_t *tot = json_object(), *file = json_object(), *tensors = json_array(), *snap = NULL;
    char dev[32];

    if (!doc || !model || !pc || !tot || !file || !tensors ||
        rf_residency_snapshot_to_json(v->snap, false, &snap) < 0)
        goto fail;
    snprintf(dev, sizeof(dev), "%u:%u", major(v->fp->st.st_dev), minor(v->fp->st.st_dev));
    json_object_set_new(model, "path", json_string(v->path));
    json_object_set_new(model, "size_bytes", ju64(v->fp->map_bytes));
    json_object_set_new(model, "page_bytes", ju64(pb));
    json_object_set_new(model, "file_pages", ju64(v->fp->file_pages));
    json_object_set_new(model, "device", json_string(dev));
    json_object_set_new(model, "inode", ju64((uint64_t)v->fp->st.st_ino));
    json_object_set_new(doc, "model", model);
    model = NULL;

    json_object_set_new(pc, "note", json_string(PAGE_CACHE_NOTE));
    json_object_set_new(pc, "source", json_string(v->source));
    json_object_set_new(pc, "mincore_trustworthy", json_boolean(v->fp->mincore_trustworthy));
    json_object_set_new(pc, "mincore_reason", json_string(v->fp->mincore_reason));
    json_object_set_new(pc, "cachestat_available", json_boolean(v->fp->cachestat_error == 0));
    json_object_set_new(pc, "cachestat_error",
                        v->fp->cachestat_error ? json_string(rf_strerror(v->fp->cachestat_error))
                                               : json_null());
    json_object_set_new(pc, "page_budget_pages", ju64(v->budget));

    /* the union of the tensors' pages (no plan here: every page is "general") */
    json_object_set_new(tot, "available_pages", ju64(tp->available_pages));
    json_object_set_new(tot, "sampled_pages", ju64(tp->sampled_pages));
    json_object_set_new(tot, "resident_pages", ju64(tp->resident_pages));
    json_object_set_new(tot, "nonresident_pages", ju64(tp->nonresident_pages));
    json_object_set_new(tot, "unknown_pages", ju64(tp->unknown_pages));
    json_object_set_new(tot, "resident_bytes", jpage_bytes(tp->resident_pages, pb));
    json_object_set_new(tot, "coverage_bp",
                        tp->has_coverage ? json_integer(tp->coverage_bp) : json_null());
    json_object_set_new(pc, "tensor_pages", tot);
    tot = NULL;

    json_object_set_new(file, "pages", ju64(v->file->pages));
    json_object_set_new(file, "inspected_pages", ju64(v->file->inspected));
    json_object_set_new(file, "resident_pages", ju64(v->file->resident));
    json_object_set_new(file, "nonresident_pages", ju64(v->file->nonresident));
    json_object_set_new(file, "unknown_pages", ju64(v->file->unknown));
    json_object_set_new(file, "resident_bytes", jpage_bytes(v->file->resident, pb));
    json_object_set_new(file, "source", json_string(v->source));
    json_object_set_new(pc, "file", file);
    file = NULL;

    if (v->cachestat_rc == 0) {
        json_t *c = json_object();
        if (!c)
            goto fail;
        json_object_set_new(c, "nr_cache", ju64(v->cs.nr_cache));
        json_object_set_new(c, "nr_dirty", ju64(v->cs.nr_dirty));
        json_object_set_new(c, "nr_writeback", ju64(v->cs.nr_writeback));
        json_object_set_new(c, "nr_evicted", ju64(v->cs.nr_evicted));
        json_object_set_new(c, "nr_recently_evicted", ju64(v->cs.nr_recently_evicted));
        json_object_set_new(c, "cached_bytes", jpage_bytes(v->cs.nr_cache, pb));
        json_object_set_new(c, "source", json_string("cachestat"));
        json_object_set_new(pc, "file_cachestat", c);
        json_object_set_new(pc, "file_cachestat_reason", json_null());
    } else {
        json_object_set_new(pc, "file_cachestat", json_null());
        json_object_set_new(pc, "file_cachestat_reason", json_string(v->cachestat_why));
    }
    json_t *own = own_reads_json(v), *fs = rf_fs_to_json(v->fp->fs_magic);
    if (!own || !fs) {
        json_decref(own);
        json_decref(fs);
        goto fail;
    }
    json_object_set_new(pc, "own_reads", own);
    json_object_set_new(doc, "filesystem", fs);
    json_object_set_new(pc, "snapshot", snap);
    snap = NULL;
    json_object_set_new(doc, "page_cache", pc);
    pc = NULL;

    for (size_t i = 0; i < v->inv->n; i++) {
        const struct rf_inventory_entry *e = &v->inv->entries[i];
        const struct rf_residency_resource *r = &v->snap->resources[i];
        bool has = r->mapping_index >= 0;
        json_t *t = json_object();
        if (!t)
            goto fail;
        json_object_set_new(t, "index", json_integer(e->key.tensor_index));
        json_object_set_new(t, "name", json_string(e->name));
        json_object_set_new(t, "type", json_string(e->type_name));
        json_object_set_new(t, "file_offset_bytes", ju64(e->file_offset_bytes));
        json_object_set_new(t, "logical_bytes", ju64(e->logical_bytes));
        json_object_set_new(t, "first_page", has ? ju64(r->pages.first_page) : json_null());
        json_object_set_new(t, "end_page", has ? ju64(r->pages.end_page) : json_null());
        json_object_set_new(t, "page_cache_inspected_pages", ju64(r->inspected_pages));
        json_object_set_new(t, "page_cache_resident_pages", ju64(r->resident_pages));
        json_object_set_new(t, "page_cache_nonresident_pages", ju64(r->nonresident_pages));
        json_object_set_new(t, "page_cache_unknown_pages", ju64(r->unknown_pages));
        json_object_set_new(t, "page_cache_resident_bytes", jpage_bytes(r->resident_pages, pb));
        json_object_set_new(t, "sampled", json_string(rf_residency_sampled_name(r->sampled)));
        if (json_array_append_new(tensors, t) < 0)
            goto fail;
    }
    json_object_set_new(doc, "tensors", tensors);
    return doc;
fail:
    json_decref(doc);
    json_decref(model);
    json_decref(pc);
    json_decref(tot);
    json_decref(file);
    json_decref(tensors);
    json_decref(snap);
    return NULL;
}

/* "12.34%" from basis points, or "-" without a denominator. */
static const char *format_bp(bool has, uint32_t bp, char *buf, size_t len)
{
    if (!has)
        snprintf(buf, len, "-");
    else
        snprintf(buf, len, "%u.%02u%%", bp / 100, bp % 100);
    return buf;
}

static void page_cache_table(const struct page_cache_view *v, const struct inspect_table *table)
{
    const uint64_t pb = v->fp->page_bytes;
    const struct rf_residency_population *tp = &v->snap->coverage.general;
    const bool raw = table->raw;
    char b1[32], b2[32];

    inspect_table_print(table, v->path, v->inv, v->snap, pb);
    if (table->noheadings)
        return;
    printf("\n%s\n", PAGE_CACHE_NOTE);
    printf("source: %s\n", v->source);
    printf("mincore: %s (%s)\n", v->fp->mincore_trustworthy ? "trustworthy" : "not trustworthy",
           v->fp->mincore_reason);
    printf("tensor pages: %" PRIu64 " unique, in page cache %" PRIu64 " (%s), not in page cache "
           "%" PRIu64 ", unknown %" PRIu64 "; coverage %s\n",
           tp->available_pages, tp->resident_pages,
           cli_format_bytes(tp->resident_pages * pb, raw, b1, sizeof(b1)), tp->nonresident_pages,
           tp->unknown_pages, format_bp(tp->has_coverage, tp->coverage_bp, b2, sizeof(b2)));
    printf("whole file: %" PRIu64 " pages, in page cache %" PRIu64 " (%s), not in page cache "
           "%" PRIu64 ", unknown %" PRIu64 " (%s)\n",
           v->file->pages, v->file->resident,
           cli_format_bytes(v->file->resident * pb, raw, b1, sizeof(b1)), v->file->nonresident,
           v->file->unknown, v->source);
    if (v->cachestat_rc == 0)
        printf("whole file, cachestat: %" PRIu64 " pages cached (%s), dirty %" PRIu64
               ", writeback %" PRIu64 ", evicted %" PRIu64 ", recently evicted %" PRIu64 "\n",
               v->cs.nr_cache, cli_format_bytes(v->cs.nr_cache * pb, raw, b1, sizeof(b1)),
               v->cs.nr_dirty, v->cs.nr_writeback, v->cs.nr_evicted, v->cs.nr_recently_evicted);
    else
        printf("whole file, cachestat: unknown: %s\n", v->cachestat_why);
    const struct rf_fs_profile *fs = rf_fs_profile_of(v->fp->fs_magic);
    printf("filesystem: %s (f_type 0x%" PRIx64 ")%s%s\n", fs->name, v->fp->fs_magic,
           fs->page_figures_why ? "; " : "", fs->page_figures_why ? fs->page_figures_why : "");
    if (fs->release_why)
        printf("release on this filesystem: %s: %s\n", rf_fs_release_name(fs->release),
               fs->release_why);
    printf("ramforge's own reads: the GGUF header, %" PRIu64 " bytes (%" PRIu64
           " pages), read without readahead after every figure above was taken; they brought "
           "%" PRIu64 " pages (%s) into the page cache",
           v->before->header_bytes, v->before->header_pages, v->before->brought_in,
           cli_format_bytes(v->before->brought_in * pb, raw, b1, sizeof(b1)));
    if (v->before->unobserved)
        printf(", %" PRIu64 " more not observed before the read", v->before->unobserved);
    printf("\n");
    printf("page budget: %" PRIu64 " pages per pass; tensor pass asked about %" PRIu64
           " pages, whole-file pass %" PRIu64 "%s\n",
           v->budget, v->snap->coverage.budget_used_pages, v->file->inspected,
           v->snap->coverage.budget_exhausted || v->file->inspected < v->file->pages
               ? " (budget exhausted: the rest is unknown)"
               : "");
}

/*
 * inspect --page-cache: the tensor table from the GGUF header, the file
 * mapped read-only without populating it, one snapshot over the tensors'
 * page ranges and one count over the whole file.
 */
static int inspect_page_cache(const char *path, const struct inspect_table *shape, bool json,
                              json_t *list, uint64_t budget, const char *svg_path)
{
    struct forge_gguf_table table;
    struct rfsys_file_pages fp;
    struct rf_inventory inv;
    struct rf_residency_snapshot snap;
    struct file_count file;
    struct before_read before;
    char err[FORGE_ERR_MAX], source[RF_RESIDENCY_SOURCE_MAX];
    int status = RF_EXIT_FAILURE, rc;

    memset(&fp, 0, sizeof(fp));
    memset(&table, 0, sizeof(table));
    memset(&before, 0, sizeof(before));
    fp.fd = -1;
    rf_inventory_init(&inv);
    rf_residency_snapshot_init(&snap);
    /* observe first (open + map read nothing), then read the header */
    rc = rfsys_file_pages_open(path, &fp);
    if (rc < 0) {
        if (forge_gguf_read_table(path, &table, err) < 0)
            cli_error("%s", err); /* the same failure, said as the GGUF check says it */
        else
            cli_error("cannot map %s: %s", path, rf_strerror(rc));
        goto out;
    }
    rc = before_capture(&fp, &before);
    if (rc < 0) {
        cli_error("%s: %s", path, rf_strerror(rc));
        goto out;
    }
    struct page_cache_view v = {.path = path,
                                .fp = &fp,
                                .inv = &inv,
                                .snap = &snap,
                                .file = &file,
                                .budget = budget,
                                .source = source,
                                .before = &before};
    v.cachestat_rc = rfsys_cachestat(fp.fd, 0, 0, &v.cs);
    v.cachestat_why = v.cachestat_rc < 0 ? rf_strerror(v.cachestat_rc) : NULL;
    const struct rf_fs_profile *fs = rf_fs_profile_of(fp.fs_magic);
    if (v.cachestat_rc == 0 && !fs->cachestat_valid) {
        v.cachestat_rc = -EOPNOTSUPP;
        v.cachestat_why = fs->cachestat_why;
    }
    rc = forge_gguf_read_table(path, &table, err);
    if (rc < 0) {
        cli_error("%s", err);
        goto out;
    }
    before_account(&before, table.header_read_bytes);
    if ((uint64_t)fp.st.st_ino != table.mapping.inode ||
        major(fp.st.st_dev) != table.mapping.dev_major ||
        minor(fp.st.st_dev) != table.mapping.dev_minor ||
        (uint64_t)fp.st.st_size != table.mapping.file_size_bytes) {
        cli_error("%s: the file changed while it was read", path);
        goto out;
    }
    /* the observation mapping covers the whole file from offset 0 */
    table.mapping.validated = true;
    table.mapping.map_offset_bytes = 0;
    table.mapping.map_length_bytes = fp.file_pages * fp.page_bytes;
    rc = rf_inventory_build(table.tensors, table.n_tensors, &table.mapping, 1, fp.page_bytes, 1,
                            &inv);
    if (rc < 0) {
        cli_error("%s: cannot build the inventory: %s", path, rf_strerror(rc));
        goto out;
    }
    source_text(&fp, source, sizeof(source));
    struct rf_residency_params rp = rf_residency_default_params();
    rp.page_budget_pages = budget;
    rp.sample = file_sampler;
    rp.sample_ud = &before;
    rp.source = source;
    rc = rf_residency_snapshot_take(&inv, &rp, &snap);
    if (rc < 0) {
        cli_error("%s: cannot take the page-cache snapshot: %s", path, rf_strerror(rc));
        goto out;
    }
    count_file(&before, budget, &file);
    if (svg_path) {
        struct rf_residency_svg_boundary b = {"inspect --page-cache", &snap};
        struct rf_residency_svg_params sp = {
            .title = path, .inventory = &inv, .boundaries = &b, .n_boundaries = 1};
        rc = rf_residency_svg_write(&sp, svg_path);
        if (rc < 0) {
            cli_error("cannot write %s: %s", svg_path, rf_strerror(rc));
            goto out;
        }
    }

    if (json) {
        json_t *doc = page_cache_json(&v);
        if (!doc || inspect_envelope(doc, INSPECT_KIND_PAGE_CACHE) < 0) {
            json_decref(doc);
            cli_error("out of memory");
            goto out;
        }
        if (list) {
            json_array_append_new(list, doc);
        } else {
            json_dumpf(doc, stdout, JSON_INDENT(2) | JSON_SORT_KEYS);
            fputc('\n', stdout);
            json_decref(doc);
        }
    } else {
        page_cache_table(&v, shape);
    }
    status = cli_flush_stdout() == 0 ? 0 : RF_EXIT_FAILURE;
out:
    free(before.states);
    rf_residency_snapshot_free(&snap);
    rf_inventory_free(&inv);
    rfsys_file_pages_close(&fp);
    forge_gguf_table_free(&table);
    return status;
}

/*
 * inspect --page-cache over -m MODEL and the operands, in that order: one
 * table each (headed "==> PATH <==" when several), or one JSON document
 * (a page_cache_list when several). Every file is tried; the status is
 * that of the worst.
 */
static int inspect_page_cache_files(const char *model, int n, char **paths, const char *columns,
                                    bool by_layer, bool noheadings, bool raw, bool json,
                                    uint64_t budget, const char *svg_path)
{
    struct inspect_table table;
    int total = (model ? 1 : 0) + n, status = 0;
    json_t *list = NULL;

    if (!inspect_table_parse(columns, by_layer, noheadings, raw, &table))
        return RF_EXIT_USAGE;
    if (json && total > 1 && !(list = json_array())) {
        cli_error("out of memory");
        return RF_EXIT_FAILURE;
    }
    for (int i = model ? -1 : 0; i < n; i++) {
        const char *path = i < 0 ? model : paths[i];
        if (total > 1 && !json && !noheadings)
            printf("%s==> %s <==\n", i == (model ? -1 : 0) ? "" : "\n", path);
        int rc = inspect_page_cache(path, &table, json, list, budget, svg_path);
        if (rc > status)
            status = rc;
    }
    if (list) {
        json_t *doc = json_object();
        if (!doc || inspect_envelope(doc, INSPECT_KIND_PAGE_CACHE_LIST) < 0 ||
            json_object_set_new(doc, "files", list) < 0) {
            json_decref(doc);
            cli_error("out of memory");
            return RF_EXIT_FAILURE;
        }
        json_dumpf(doc, stdout, JSON_INDENT(2) | JSON_SORT_KEYS);
        fputc('\n', stdout);
        json_decref(doc);
        if (cli_flush_stdout() != 0)
            status = RF_EXIT_FAILURE;
    }
    return status;
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
        case 'h':
            usage(stdout);
            return 0;
        default:
            return cli_bad_option(c, argv, opts);
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
    if (json) {
        json_t *doc;
        if (rf_inventory_to_json(&inv, true, &doc) < 0 ||
            inspect_envelope(doc, INSPECT_KIND_INVENTORY) < 0) {
            cli_error("out of memory");
            goto out;
        }
        json_dumpf(doc, stdout, JSON_INDENT(2) | JSON_SORT_KEYS);
        fputc('\n', stdout);
        json_decref(doc);
    } else {
        print_table(&inv, raw);
    }
    status = cli_flush_stdout() == 0 ? 0 : RF_EXIT_FAILURE;
out:
    rf_inventory_free(&inv);
    forge_model_free(m);
    return status;
}
