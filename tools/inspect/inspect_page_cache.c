/*
 * ramforge inspect --page-cache: which of each tensor's file pages are in
 * the kernel's page cache, read without loading the model through
 * llama.cpp (whose mmap load prefetches every page): the tensor table from
 * the GGUF header, one snapshot over the tensors' page ranges and one
 * count over the whole file, as a table or JSON (inspect_page_cache.h).
 */
#include "inspect_page_cache.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>

#include "common/cli.h"
#include "inspect_before.h"
#include "inspect_table.h"
#include "ramforge/core/fs_profile.h"
#include "ramforge/core/inventory.h"
#include "ramforge/core/json_util.h"
#include "ramforge/core/report.h"
#include "ramforge/core/report_json.h"
#include "ramforge/core/residency.h"
#include "ramforge/core/residency_svg.h"
#include "ramforge/error.h"
#include "ramforge/forge/forge_pages.h"
#include "ramforge/sys/pages.h"

/* What the own-reads figures mean, said in the output itself. */
#define OWN_READS_NOTE                                                                             \
    "every page-cache figure was taken before ramforge read the GGUF header; that read (with "     \
    "O_DIRECT where the filesystem allows it: direct_io; otherwise without readahead) then "       \
    "brought brought_in_pages into the page cache, which stay there"

/* What --page-cache measures, said in the output itself. */
#define PAGE_CACHE_NOTE                                                                            \
    "pages of the model file in the kernel's page cache (mincore on a fresh read-only "            \
    "mapping, or cachestat); not pages mapped in any process (smaps Rss)"

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
    const char *direct_reason; /* why the header read was not O_DIRECT; NULL: it was */
};

/* What ramforge's own header read did to the page cache. */
static json_t *own_reads_json(const struct page_cache_view *v)
{
    const struct before_read *b = v->before;
    json_t *o = json_object();
    if (!o)
        return NULL;
    json_object_set_new(o, "header_read_bytes", rf_json_u64(true, b->header_bytes));
    json_object_set_new(o, "header_pages", rf_json_u64(true, b->header_pages));
    json_object_set_new(o, "brought_in_pages", rf_json_u64(true, b->brought_in));
    json_object_set_new(o, "brought_in_bytes", jpage_bytes(b->brought_in, v->fp->page_bytes));
    json_object_set_new(o, "unobserved_pages", rf_json_u64(true, b->unobserved));
    json_object_set_new(o, "direct_io", json_boolean(!v->direct_reason));
    json_object_set_new(o, "direct_io_reason", rf_json_str(v->direct_reason));
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
    json_object_set_new(model, "path", rf_json_str(v->path));
    json_object_set_new(model, "size_bytes", rf_json_u64(true, v->fp->map_bytes));
    json_object_set_new(model, "page_bytes", rf_json_u64(true, pb));
    json_object_set_new(model, "file_pages", rf_json_u64(true, v->fp->file_pages));
    json_object_set_new(model, "device", json_string(dev));
    json_object_set_new(model, "inode", rf_json_u64(true, (uint64_t)v->fp->st.st_ino));
    json_object_set_new(doc, "model", model);
    model = NULL;

    json_object_set_new(pc, "note", json_string(PAGE_CACHE_NOTE));
    json_object_set_new(pc, "source", rf_json_str(v->source));
    json_object_set_new(pc, "mincore_trustworthy", json_boolean(v->fp->mincore_trustworthy));
    json_object_set_new(pc, "mincore_reason", rf_json_str(v->fp->mincore_reason));
    json_object_set_new(pc, "cachestat_available", json_boolean(v->fp->cachestat_error == 0));
    json_object_set_new(pc, "cachestat_error",
                        v->fp->cachestat_error ? json_string(rf_strerror(v->fp->cachestat_error))
                                               : json_null());
    json_object_set_new(pc, "page_budget_pages", rf_json_u64(true, v->budget));

    /* the union of the tensors' pages (no plan here: every page is "general") */
    json_object_set_new(tot, "available_pages", rf_json_u64(true, tp->available_pages));
    json_object_set_new(tot, "sampled_pages", rf_json_u64(true, tp->sampled_pages));
    json_object_set_new(tot, "resident_pages", rf_json_u64(true, tp->resident_pages));
    json_object_set_new(tot, "nonresident_pages", rf_json_u64(true, tp->nonresident_pages));
    json_object_set_new(tot, "unknown_pages", rf_json_u64(true, tp->unknown_pages));
    json_object_set_new(tot, "resident_bytes", jpage_bytes(tp->resident_pages, pb));
    json_object_set_new(tot, "coverage_bp",
                        tp->has_coverage ? json_integer(tp->coverage_bp) : json_null());
    json_object_set_new(pc, "tensor_pages", tot);
    tot = NULL;

    json_object_set_new(file, "pages", rf_json_u64(true, v->file->pages));
    json_object_set_new(file, "inspected_pages", rf_json_u64(true, v->file->inspected));
    json_object_set_new(file, "resident_pages", rf_json_u64(true, v->file->resident));
    json_object_set_new(file, "nonresident_pages", rf_json_u64(true, v->file->nonresident));
    json_object_set_new(file, "unknown_pages", rf_json_u64(true, v->file->unknown));
    json_object_set_new(file, "resident_bytes", jpage_bytes(v->file->resident, pb));
    json_object_set_new(file, "source", rf_json_str(v->source));
    json_object_set_new(pc, "file", file);
    file = NULL;

    if (v->cachestat_rc == 0) {
        json_t *c = json_object();
        if (!c)
            goto fail;
        json_object_set_new(c, "nr_cache", rf_json_u64(true, v->cs.nr_cache));
        json_object_set_new(c, "nr_dirty", rf_json_u64(true, v->cs.nr_dirty));
        json_object_set_new(c, "nr_writeback", rf_json_u64(true, v->cs.nr_writeback));
        json_object_set_new(c, "nr_evicted", rf_json_u64(true, v->cs.nr_evicted));
        json_object_set_new(c, "nr_recently_evicted", rf_json_u64(true, v->cs.nr_recently_evicted));
        json_object_set_new(c, "cached_bytes", jpage_bytes(v->cs.nr_cache, pb));
        json_object_set_new(c, "source", json_string("cachestat"));
        json_object_set_new(pc, "file_cachestat", c);
        json_object_set_new(pc, "file_cachestat_reason", json_null());
    } else {
        json_object_set_new(pc, "file_cachestat", json_null());
        json_object_set_new(pc, "file_cachestat_reason", rf_json_str(v->cachestat_why));
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
        json_object_set_new(t, "name", rf_json_str(e->name));
        json_object_set_new(t, "type", rf_json_str(e->type_name));
        json_object_set_new(t, "file_offset_bytes", rf_json_u64(true, e->file_offset_bytes));
        json_object_set_new(t, "logical_bytes", rf_json_u64(true, e->logical_bytes));
        json_object_set_new(t, "first_page", rf_json_u64(has, r->pages.first_page));
        json_object_set_new(t, "end_page", rf_json_u64(has, r->pages.end_page));
        json_object_set_new(t, "page_cache_inspected_pages", rf_json_u64(true, r->inspected_pages));
        json_object_set_new(t, "page_cache_resident_pages", rf_json_u64(true, r->resident_pages));
        json_object_set_new(t, "page_cache_nonresident_pages",
                            rf_json_u64(true, r->nonresident_pages));
        json_object_set_new(t, "page_cache_unknown_pages", rf_json_u64(true, r->unknown_pages));
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
           " pages), read %s after every figure above was taken; they brought "
           "%" PRIu64 " pages (%s) into the page cache",
           v->before->header_bytes, v->before->header_pages,
           v->direct_reason ? "without readahead" : "with O_DIRECT", v->before->brought_in,
           cli_format_bytes(v->before->brought_in * pb, raw, b1, sizeof(b1)));
    if (v->direct_reason)
        printf(" (no O_DIRECT: %s)", v->direct_reason);
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
    rc = inspect_before_capture(&fp, &before);
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
    inspect_before_account(&before, table.header_read_bytes);
    v.direct_reason = table.header_direct_reason;
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
    rp.sample = inspect_before_sampler;
    rp.sample_ud = &before;
    rp.source = source;
    rc = rf_residency_snapshot_take(&inv, &rp, &snap);
    if (rc < 0) {
        cli_error("%s: cannot take the page-cache snapshot: %s", path, rf_strerror(rc));
        goto out;
    }
    inspect_count_file(&before, budget, &file);
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
int inspect_page_cache_files(const char *model, int n, char **paths, const char *columns,
                             bool by_layer, bool noheadings, bool raw, bool json, uint64_t budget,
                             const char *svg_path)
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
