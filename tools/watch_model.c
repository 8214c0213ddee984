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

#include "ramforge/intervals.h"

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

    memset(wm->mapped_states, RF_PAGE_NONRESIDENT, file_pages); /* not mapped: not present */
    for (size_t i = 0; i < wm->n_vmas && rc == 0; i++) {
        const struct watch_vma *v = &wm->vmas[i];
        uint64_t first = v->offset_bytes / page;
        uint64_t n = (v->end_addr - v->start_addr) / page;
        if (first >= file_pages)
            continue;
        if (n > file_pages - first)
            n = file_pages - first;
        rc = rfsys_pagemap_present(pagemap_fd, v->start_addr, n, wm->mapped_states + first);
    }
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

static int layer_of(const char *name)
{
    int n = -1;
    if (sscanf(name, "blk.%d.", &n) == 1 && n >= 0)
        return n;
    return WATCH_OTHER_LAYER;
}

/* Per-layer and dead-weight sums over the inventory (union of pages per layer). */
static int sum_layers(struct watch_model *wm)
{
    const struct rf_inventory *inv = &wm->inv;
    int max_layer = -1;
    uint64_t page = wm->page_bytes;
    uint8_t *seen = NULL;
    size_t file_pages = (size_t)((wm->file_bytes + page - 1) / page);

    for (size_t i = 0; i < inv->n; i++)
        if (layer_of(inv->entries[i].name) > max_layer)
            max_layer = layer_of(inv->entries[i].name);
    wm->n_layers = (size_t)(max_layer + 2); /* blk.0 .. blk.max, then the others */
    wm->layers = calloc(wm->n_layers, sizeof(*wm->layers));
    seen = calloc(file_pages ? file_pages : 1, 1);
    if (!wm->layers || !seen) {
        free(seen);
        return -ENOMEM;
    }
    for (size_t l = 0; l < wm->n_layers; l++)
        wm->layers[l].layer = l + 1 < wm->n_layers ? (int)l : WATCH_OTHER_LAYER;
    /* A page shared by two tensors counts once, in the layer of the first (file order). */
    for (size_t i = 0; i < inv->n; i++) {
        const struct rf_inventory_entry *e = &inv->entries[i];
        int l = layer_of(e->name);
        struct watch_layer *wl = &wm->layers[l < 0 ? wm->n_layers - 1 : (size_t)l];
        wl->logical_bytes += e->logical_bytes;
        bool copied = forge_gguf_tensor_copied(e->name, e->type_name);
        if (copied)
            wm->dead_logical_bytes += e->logical_bytes;
        for (uint64_t pg = e->pages.first_page; e->file_backed && pg < e->pages.end_page; pg++) {
            if (pg >= file_pages || seen[pg])
                continue;
            seen[pg] = 1;
            struct rf_page_range one = {pg, pg + 1};
            pages_add(&wl->mapped, wm->mapped_states, one, page);
            pages_add(&wl->cache, wm->cache_states, one, page);
            pages_add(&wm->mapped, wm->mapped_states, one, page);
            pages_add(&wm->cache, wm->cache_states, one, page);
            if (copied)
                pages_add(&wm->dead, wm->mapped_states, one, page);
        }
    }
    free(seen);
    return 0;
}

/* The tensor table, the inventory over the process's fragment, and both page observations. */
static void read_pages(struct watch_model *wm, const struct watch_proc *p, const char *path)
{
    struct forge_gguf_table table;
    struct rfsys_file_pages fp;
    char err[FORGE_ERR_MAX];
    uint64_t first = UINT64_MAX, end = 0;
    int rc;

    memset(&table, 0, sizeof(table));
    memset(&fp, 0, sizeof(fp));
    fp.fd = -1;
    rc = forge_gguf_read_table(path, &table, err);
    if (rc < 0) {
        snprintf(wm->table_reason, sizeof(wm->table_reason), "%s", err);
        goto out;
    }
    if (table.mapping.inode != wm->inode || table.mapping.dev_major != wm->dev_major ||
        table.mapping.dev_minor != wm->dev_minor) {
        snprintf(wm->table_reason, sizeof(wm->table_reason),
                 "the file changed while it was read (inode %" PRIu64 ", the process maps %" PRIu64
                 ")",
                 table.mapping.inode, wm->inode);
        goto out;
    }
    wm->page_bytes = rfsys_page_bytes();
    wm->file_bytes = table.mapping.file_size_bytes;
    for (size_t i = 0; i < wm->n_vmas; i++) {
        uint64_t e = wm->vmas[i].offset_bytes + (wm->vmas[i].end_addr - wm->vmas[i].start_addr);
        first = wm->vmas[i].offset_bytes < first ? wm->vmas[i].offset_bytes : first;
        end = e > end ? e : end;
    }
    table.mapping.validated = true;
    table.mapping.map_offset_bytes = first;
    table.mapping.map_length_bytes = end - first;
    rc = rf_inventory_build(table.tensors, table.n_tensors, &table.mapping, 1, wm->page_bytes, 1,
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
    wm->mapped_source = "pagemap";
    int pm = wm->mapped_reason[0] ? -ENODATA : rfsys_pagemap_open(NULL, p->pid_s);
    rc = pm < 0 ? pm : sample_mapped(wm, pm, file_pages);
    if (pm >= 0)
        close(pm);
    if (rc < 0 && !wm->mapped_reason[0])
        snprintf(wm->mapped_reason, sizeof(wm->mapped_reason), "/proc/%s/pagemap: %s", p->pid_s,
                 rf_strerror(rc));
    rc = rfsys_file_pages_open(path, &fp);
    if (rc == 0) {
        wm->cache_source = rfsys_page_method_name(fp.method);
        for (uint64_t at = 0; rc == 0 && at < file_pages; at += RF_PAGE_WINDOW_PAGES) {
            uint64_t n =
                file_pages - at < RF_PAGE_WINDOW_PAGES ? file_pages - at : RF_PAGE_WINDOW_PAGES;
            rc = rfsys_file_pages_sample(&fp, at, n, wm->cache_states + at);
        }
    }
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
    forge_gguf_table_free(&table);
}

void watch_model_read(struct watch_model *wm, const struct watch_proc *p,
                      const struct rfsys_maps *maps, size_t m)
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
    int rc = rfsys_maps_sum_file(maps, wm->dev_major, wm->dev_minor, wm->inode, NULL, &wm->sum);
    wm->has_sum = rc == 0 && wm->sum.complete;
    if (!wm->has_sum)
        snprintf(wm->sum_reason, sizeof(wm->sum_reason), "/proc/%s/smaps: %s", p->pid_s,
                 rc < 0 ? rf_strerror(rc) : "a mapping had no smaps figures");
    if (open_mapped(wm, p->pid_s, path, sizeof(path)) < 0)
        return;
    read_pages(wm, p, path);
}
