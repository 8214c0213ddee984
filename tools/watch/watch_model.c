/*
 * ramforge watch: one model file mapped by a watched process. The tensor
 * table comes from the file's GGUF header (forge_gguf_read_table: no
 * tensor data is read, no llama.cpp load), opened through
 * /proc/PID/map_files so that the file the process maps is read even when
 * the path now names another one; then, per file page, whether the
 * process maps it (its pagemap's present bits) and whether the kernel
 * caches it (mincore on ramforge's own read-only mapping, or cachestat:
 * never faulting a page in), summed per tensor, per layer and over the
 * whole file.
 */
#include "watch.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "ramforge/core/fs_profile.h"
#include "ramforge/core/intervals.h"
#include "ramforge/core/inventory.h"

bool watch_is_gguf(const char *path)
{
    char magic[4];
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return false;
    bool yes = pread(fd, magic, sizeof(magic), 0) == (ssize_t)sizeof(magic) &&
               memcmp(magic, "GGUF", 4) == 0;
    close(fd);
    return yes;
}

void watch_model_free(struct watch_model *wm)
{
    if (!wm)
        return;
    free(wm->vmas);
    free(wm->layers);
    free(wm->mapped_states);
    free(wm->cache_states);
    rf_inventory_free(&wm->inv);
    memset(wm, 0, sizeof(*wm));
}

/* The VMAs of the model's file (same device and inode), in address order. */
static int collect_vmas(struct watch_model *wm, const struct rfsys_maps *maps)
{
    for (size_t i = 0; i < maps->n; i++) {
        const struct rfsys_mapping *m = &maps->v[i];
        if (m->inode != wm->inode || m->dev_major != wm->dev_major || m->dev_minor != wm->dev_minor)
            continue;
        struct watch_vma *v = realloc(wm->vmas, (wm->n_vmas + 1) * sizeof(*v));
        if (!v)
            return -ENOMEM;
        wm->vmas = v;
        v[wm->n_vmas].start_addr = m->start_addr;
        v[wm->n_vmas].end_addr = m->end_addr;
        v[wm->n_vmas].offset_bytes = m->offset_bytes;
        memcpy(v[wm->n_vmas].perms, m->perms, sizeof(m->perms));
        wm->n_vmas++;
    }
    return 0;
}

/* Opens the file the process maps: its map_files link, else the path if it is the same inode. */
static int open_mapped(struct watch_model *wm, const char *pid, char *path, size_t len)
{
    struct stat st;
    const struct watch_vma *v = &wm->vmas[0];

    snprintf(path, len, "/proc/%s/map_files/%" PRIx64 "-%" PRIx64, pid, v->start_addr, v->end_addr);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    int link_err = fd < 0 ? -errno : 0;
    bool path_same = stat(wm->path, &st) == 0 && st.st_ino == wm->inode &&
                     major(st.st_dev) == wm->dev_major && minor(st.st_dev) == wm->dev_minor;
    wm->replaced = !path_same && !wm->deleted;
    if (fd >= 0) {
        close(fd);
        return 0;
    }
    if (path_same) {
        snprintf(path, len, "%s", wm->path);
        return 0;
    }
    snprintf(wm->table_reason, sizeof(wm->table_reason),
             "the file the process maps (inode %" PRIu64 ") is no longer at %s and %s is not "
             "readable: %s",
             wm->inode, wm->path, path, rf_strerror(link_err));
    return link_err;
}

/* Pages of the file's fragment [first, end) mapped by the process: pagemap per VMA. */
static int sample_mapped(struct watch_model *wm, int pagemap_fd, uint64_t file_pages)
{
    uint64_t page = wm->page_bytes;
    int rc = 0;
    bool scanned = true;

    memset(wm->mapped_states, RF_PAGE_NONRESIDENT, file_pages); /* not mapped: not present */
    for (size_t i = 0; i < wm->n_vmas && rc == 0; i++) {
        const struct watch_vma *v = &wm->vmas[i];
        uint64_t first = v->offset_bytes / page;
        uint64_t n = (v->end_addr - v->start_addr) / page;
        if (first >= file_pages)
            continue;
        if (n > file_pages - first)
            n = file_pages - first;
        bool s;
        rc = rfsys_pagemap_present(pagemap_fd, v->start_addr, n, wm->mapped_states + first, &s);
        scanned = scanned && s;
    }
    wm->mapped_source = scanned ? "pagemap_scan" : "pagemap";
    if (rc < 0)
        memset(wm->mapped_states, RF_PAGE_UNKNOWN, file_pages);
    return rc;
}

static void pages_add(struct watch_pages *w, const uint8_t *states, struct rf_page_range r,
                      uint64_t page)
{
    struct rf_page_counts c = {0, 0, 0};
    if (states && r.end_page > r.first_page)
        rf_page_counts_add(&c, states + r.first_page, r.end_page - r.first_page);
    if (!states)
        c.unknown_pages = r.end_page - r.first_page;
    w->has = w->has || c.resident_pages || c.nonresident_pages;
    w->resident_bytes += c.resident_pages * page;
    w->nonresident_bytes += c.nonresident_pages * page;
    w->unknown_bytes += c.unknown_pages * page;
}

/* N of blk.N., or WATCH_OTHER_LAYER. */
static int layer_of(const char *name)
{
    int32_t n = rf_tensor_layer_of(name);
    return n >= 0 ? (int)n : WATCH_OTHER_LAYER;
}

/* Positions of the inventory's entries ordered by first page (qsort over a copy). */
static const struct rf_inventory *g_sort_inv;

static int by_first_page(const void *a, const void *b)
{
    const struct rf_inventory_entry *x = &g_sort_inv->entries[*(const size_t *)a];
    const struct rf_inventory_entry *y = &g_sort_inv->entries[*(const size_t *)b];
    return x->pages.first_page < y->pages.first_page ? -1
                                                     : x->pages.first_page > y->pages.first_page;
}

/*
 * Per-layer, whole and dead-weight sums over the tensors' pages, in page
 * order: a page two tensors share counts once, in the layer of the first.
 */
static int sum_layers(struct watch_model *wm)
{
    const struct rf_inventory *inv = &wm->inv;
    int max_layer = -1;
    uint64_t page = wm->page_bytes, next = 0;
    uint64_t file_pages = (wm->file_bytes + page - 1) / page;
    size_t *order = malloc((inv->n ? inv->n : 1) * sizeof(*order));

    if (!order)
        return -ENOMEM;
    for (size_t i = 0; i < inv->n; i++) {
        order[i] = i;
        if (layer_of(inv->entries[i].name) > max_layer)
            max_layer = layer_of(inv->entries[i].name);
    }
    wm->n_layers = (size_t)(max_layer + 2); /* blk.0 .. blk.max, then the others */
    wm->layers = calloc(wm->n_layers, sizeof(*wm->layers));
    if (!wm->layers) {
        free(order);
        return -ENOMEM;
    }
    for (size_t l = 0; l < wm->n_layers; l++)
        wm->layers[l].layer = l + 1 < wm->n_layers ? (int)l : WATCH_OTHER_LAYER;
    g_sort_inv = inv;
    qsort(order, inv->n, sizeof(*order), by_first_page);
    for (size_t k = 0; k < inv->n; k++) {
        const struct rf_inventory_entry *e = &inv->entries[order[k]];
        int l = layer_of(e->name);
        struct watch_layer *wl = &wm->layers[l < 0 ? wm->n_layers - 1 : (size_t)l];
        bool copied = forge_gguf_tensor_copied(e->name, e->type_name);
        wl->logical_bytes += e->logical_bytes;
        if (copied)
            wm->dead_logical_bytes += e->logical_bytes;
        struct rf_page_range r = {e->pages.first_page > next ? e->pages.first_page : next,
                                  e->pages.end_page < file_pages ? e->pages.end_page : file_pages};
        if (!e->file_backed || r.end_page <= r.first_page)
            continue;
        next = r.end_page;
        pages_add(&wl->mapped, wm->mapped_states, r, page);
        pages_add(&wl->cache, wm->cache_states, r, page);
        pages_add(&wm->mapped, wm->mapped_states, r, page);
        pages_add(&wm->cache, wm->cache_states, r, page);
        if (copied)
            pages_add(&wm->dead, wm->mapped_states, r, page);
    }
    free(order);
    return 0;
}

/*
 * Tensor tables kept across readings, so that a file's header is parsed
 * once, not once a second: keyed by device, inode, size and mtime, the
 * least recently used replaced.
 */
#define TABLE_CACHE 8
static struct cached_table {
    bool used;
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
    uint64_t last_use; /* g_table_uses when last returned */
    struct forge_gguf_table t;
} g_tables[TABLE_CACHE];
static uint64_t g_table_uses;

void watch_model_cache_free(void)
{
    for (size_t i = 0; i < TABLE_CACHE; i++)
        forge_gguf_table_free(&g_tables[i].t);
    memset(g_tables, 0, sizeof(g_tables));
}

/* The tensor table of the file at path (borrowed from the cache), or NULL with err set. */
static const struct forge_gguf_table *table_of(const char *path, char err[FORGE_ERR_MAX])
{
    struct cached_table *e = &g_tables[0];
    struct stat st;

    if (stat(path, &st) < 0) {
        snprintf(err, FORGE_ERR_MAX, "cannot stat %s: %s", path, strerror(errno));
        return NULL;
    }
    for (size_t i = 0; i < TABLE_CACHE; i++) {
        struct cached_table *c = &g_tables[i];
        if (c->used && c->dev == st.st_dev && c->ino == st.st_ino && c->size == st.st_size &&
            c->mtime.tv_sec == st.st_mtim.tv_sec && c->mtime.tv_nsec == st.st_mtim.tv_nsec) {
            c->last_use = ++g_table_uses;
            return &c->t;
        }
        if (!c->used || (e->used && c->last_use < e->last_use))
            e = c;
    }
    forge_gguf_table_free(&e->t);
    memset(e, 0, sizeof(*e));
    if (forge_gguf_read_table(path, &e->t, err) < 0)
        return NULL;
    *e = (struct cached_table){true,       st.st_dev,      st.st_ino, st.st_size,
                               st.st_mtim, ++g_table_uses, e->t};
    return &e->t;
}

/* The page-cache state of every page of the file: cachestat where it counts, else mincore. */
static int sample_cache(struct watch_model *wm, struct rfsys_file_pages *fp, uint64_t file_pages)
{
    int rc = 0;

    if (fp->cachestat_error == 0 && rf_fs_profile_of(fp->fs_magic)->cachestat_valid) {
        /* the cost follows the resident/nonresident runs, not the pages (mincore: per page) */
        wm->cache_source = "cachestat";
        return rfsys_cachestat_pages(fp->fd, fp->page_bytes, 0, file_pages, wm->cache_states, NULL);
    }
    wm->cache_source = rfsys_page_method_name(fp->method);
    for (uint64_t at = 0; rc == 0 && at < file_pages; at += RF_PAGE_WINDOW_PAGES) {
        uint64_t n =
            file_pages - at < RF_PAGE_WINDOW_PAGES ? file_pages - at : RF_PAGE_WINDOW_PAGES;
        rc = rfsys_file_pages_sample(fp, at, n, wm->cache_states + at);
    }
    return rc;
}

/* The tensor table, the inventory over the process's fragment, and both page observations. */
static void read_pages(struct watch_model *wm, const struct watch_proc *p, const char *path)
{
    const struct forge_gguf_table *table;
    struct rf_mapping_meta mapping;
    struct rfsys_file_pages fp;
    char err[FORGE_ERR_MAX];
    uint64_t first = UINT64_MAX, end = 0;
    int rc;

    memset(&fp, 0, sizeof(fp));
    fp.fd = -1;
    table = table_of(path, err);
    if (!table) {
        snprintf(wm->table_reason, sizeof(wm->table_reason), "%s", err);
        goto out;
    }
    mapping = table->mapping;
    if (mapping.inode != wm->inode || mapping.dev_major != wm->dev_major ||
        mapping.dev_minor != wm->dev_minor) {
        snprintf(wm->table_reason, sizeof(wm->table_reason),
                 "the file changed while it was read (inode %" PRIu64 ", the process maps %" PRIu64
                 ")",
                 mapping.inode, wm->inode);
        goto out;
    }
    wm->page_bytes = rfsys_page_bytes();
    wm->file_bytes = mapping.file_size_bytes;
    for (size_t i = 0; i < wm->n_vmas; i++) {
        uint64_t e = wm->vmas[i].offset_bytes + (wm->vmas[i].end_addr - wm->vmas[i].start_addr);
        first = wm->vmas[i].offset_bytes < first ? wm->vmas[i].offset_bytes : first;
        end = e > end ? e : end;
    }
    mapping.validated = true;
    mapping.map_offset_bytes = first;
    mapping.map_length_bytes = end - first;
    rc = rf_inventory_build(table->tensors, table->n_tensors, &mapping, 1, wm->page_bytes, 1,
                            &wm->inv);
    if (rc < 0) {
        snprintf(wm->table_reason, sizeof(wm->table_reason), "cannot build the inventory: %s",
                 rf_strerror(rc));
        goto out;
    }
    wm->has_table = true;
    wm->logical_bytes = wm->inv.totals.logical_bytes;
    if (wm->inv.totals.n_file_backed == 0)
        snprintf(wm->mapped_reason, sizeof(wm->mapped_reason),
                 "the process maps no tensor data of this file (%zu mapping(s) of %" PRIu64
                 " bytes): its weights are not mmap'd",
                 wm->n_vmas, end - first);
    uint64_t file_pages = (wm->file_bytes + wm->page_bytes - 1) / wm->page_bytes;
    wm->mapped_states = calloc(file_pages ? file_pages : 1, 1);
    wm->cache_states = calloc(file_pages ? file_pages : 1, 1);
    if (!wm->mapped_states || !wm->cache_states) {
        wm->has_table = false;
        snprintf(wm->table_reason, sizeof(wm->table_reason), "out of memory");
        goto out;
    }
    int pm = wm->mapped_reason[0] ? -ENODATA : rfsys_pagemap_open(NULL, p->pid_s);
    rc = pm < 0 ? pm : sample_mapped(wm, pm, file_pages);
    if (pm >= 0)
        close(pm);
    if (rc < 0 && !wm->mapped_reason[0])
        snprintf(wm->mapped_reason, sizeof(wm->mapped_reason), "/proc/%s/pagemap: %s", p->pid_s,
                 rf_strerror(rc));
    rc = rfsys_file_pages_open(path, &fp);
    if (rc == 0)
        rc = sample_cache(wm, &fp, file_pages);
    if (rc < 0) {
        memset(wm->cache_states, RF_PAGE_UNKNOWN, file_pages);
        snprintf(wm->cache_reason, sizeof(wm->cache_reason), "%s: %s",
                 fp.fd >= 0 && !fp.mincore_trustworthy ? fp.mincore_reason : "page cache",
                 rf_strerror(rc));
    }
    struct rf_page_range whole = {0, file_pages};
    pages_add(&wm->file_cache, wm->cache_states, whole, wm->page_bytes);
    if (sum_layers(wm) < 0) {
        wm->has_table = false;
        snprintf(wm->table_reason, sizeof(wm->table_reason), "out of memory");
    }
out:
    rfsys_file_pages_close(&fp);
}

/* The mapping's sums: smaps when fresh (kept in p), else the last smaps with the pagemap Rss. */
static void mapping_sums(struct watch_model *wm, struct watch_proc *p,
                         const struct rfsys_maps *maps, bool fresh, double now_s)
{
    if (fresh) {
        int rc = rfsys_maps_sum_file(maps, wm->dev_major, wm->dev_minor, wm->inode, NULL, &wm->sum);
        wm->has_sum = rc == 0 && wm->sum.complete;
        wm->rss_source = "smaps";
        if (!wm->has_sum)
            snprintf(wm->sum_reason, sizeof(wm->sum_reason), "/proc/%s/smaps: %s", p->pid_s,
                     rc < 0 ? rf_strerror(rc) : "a mapping had no smaps figures");
        else if (p->n_smaps_last < WATCH_MAX_MODELS)
            p->smaps_last[p->n_smaps_last++] =
                (struct watch_smaps_sum){wm->dev_major, wm->dev_minor, wm->inode, wm->sum};
        return;
    }
    for (size_t i = 0; i < p->n_smaps_last; i++) {
        if (p->smaps_last[i].inode != wm->inode || p->smaps_last[i].dev_major != wm->dev_major ||
            p->smaps_last[i].dev_minor != wm->dev_minor)
            continue;
        wm->sum = p->smaps_last[i].sum;
        wm->has_sum = true;
        wm->rss_source = "smaps";
        wm->smaps_age_s = now_s - p->smaps_at_s;
        if (wm->has_table && !wm->mapped_reason[0] && wm->mapped_source) {
            struct rf_page_counts c = {0, 0, 0};
            rf_page_counts_add(&c, wm->mapped_states,
                               (wm->file_bytes + wm->page_bytes - 1) / wm->page_bytes);
            wm->sum.rss_bytes = c.resident_pages * wm->page_bytes;
            wm->rss_source = wm->mapped_source;
        }
        return;
    }
    snprintf(wm->sum_reason, sizeof(wm->sum_reason),
             "smaps is read every %.0f s and not since this mapping appeared", WATCH_SMAPS_EVERY_S);
}

void watch_model_read(struct watch_model *wm, struct watch_proc *p, const struct rfsys_maps *maps,
                      size_t m, bool fresh, double now_s)
{
    const struct rfsys_mapping *mp = &maps->v[m];
    char path[4096 + 64];

    memset(wm, 0, sizeof(*wm));
    rf_inventory_init(&wm->inv);
    snprintf(wm->path, sizeof(wm->path), "%s", mp->path ? mp->path : "");
    wm->dev_major = mp->dev_major;
    wm->dev_minor = mp->dev_minor;
    wm->inode = mp->inode;
    wm->deleted = mp->deleted;
    if (collect_vmas(wm, maps) < 0) {
        snprintf(wm->table_reason, sizeof(wm->table_reason), "out of memory");
        return;
    }
    if (open_mapped(wm, p->pid_s, path, sizeof(path)) == 0)
        read_pages(wm, p, path);
    mapping_sums(wm, p, maps, fresh, now_s);
}
