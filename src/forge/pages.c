/*
 * Page sampling over a loaded model's file mapping (see forge_pages.h).
 *
 * Every call re-checks what it relies on, so a stale view gives unknown
 * pages with a reason instead of a guessed value:
 *   1. the page range lies inside the validated mapping fragment that
 *      forge_model_load recorded (map_offset_bytes, map_length_bytes);
 *   2. the file at the model's path is still the mapped file
 *      (device+inode), and mincore is trustworthy for it (the kernel's
 *      can_do_mincore rule; else every page would read resident);
 *   3. each address is found in a fresh /proc/self/maps, streamed through
 *      a stack buffer, in an r--s VMA of that file at the right offset.
 * Only then does mincore run, piece by piece when the range spans
 * adjacent VMAs. Nothing is allocated, so this may run right before a
 * node's dispatch; a call costs an open, a few stat-like calls and one
 * read of /proc/self/maps.
 *
 * A page pass (forge_page_pass_begin) does checks 2 and 3's read once for
 * a whole snapshot: its windows cost one mincore call each. A snapshot of
 * a 1.1 GiB model is 70 windows of 4096 pages; re-validating each took
 * about 5 ms here, mincore alone about 0.5 ms.
 */
#include "forge_internal.h"

#include "ramforge/core/error_text.h"
#include "ramforge/core/search.h"
#include "ramforge/forge/forge_pages.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "ramforge/core/fs_profile.h"
#include "ramforge/core/intervals.h"
#include "ramforge/error.h"

const char *forge_page_error_reason(int err)
{
    static const struct rf_err_text texts[] = {
        {0, ""},
        {-ENXIO, "no validated file mapping for these pages"},
        {-EFAULT, "the range is not inside the model file's validated r--s mapping"},
        {-ENOENT, "the model mapping disappeared from /proc/self/maps"},
        {-ENOMEM, "mincore found the range unmapped: the model mapping disappeared"},
        {-EACCES, "mincore reports every page of a file the process neither owns nor may write "
                  "as resident (kernel rule can_do_mincore): pages unknown"},
        {-ESTALE, "the file at the model's path is not the mapped file (replaced or removed): "
                  "cannot check whether mincore is trustworthy"},
        {-EBADMSG, "malformed line in /proc/self/maps"},
    };
    return rf_strerror_in(RF_ERR_TEXTS(texts), err, NULL);
}

/*
 * Opens the model's path and checks it is the mapped file. Returns the fd
 * (caller closes) or -ESTALE. *st receives its fstat.
 */
static int open_model_file(const struct forge_model *m, struct stat *st)
{
    const struct rf_mapping_meta *mm = &m->mapping;
    int fd = open(mm->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -ESTALE;
    if (fstat(fd, st) != 0 || (uint64_t)st->st_ino != mm->inode ||
        major(st->st_dev) != mm->dev_major || minor(st->st_dev) != mm->dev_minor) {
        close(fd);
        return -ESTALE;
    }
    return fd;
}

/* 0 when mincore on the model file is trustworthy, -EACCES or -ESTALE. */
static int check_trust(const struct forge_model *m)
{
    struct stat st;
    int fd = open_model_file(m, &st);
    if (fd < 0)
        return fd;
    bool trustworthy = false;
    rfsys_mincore_trustworthy(&st, fd, &trustworthy, NULL);
    close(fd);
    return trustworthy ? 0 : -EACCES;
}

/* An address to search the VMAs of maps for. */
struct va_key {
    const struct rfsys_maps *maps;
    uint64_t va;
};

static bool vma_end_above(const void *ctx, size_t i)
{
    const struct va_key *k = ctx;
    return k->maps->v[i].end_addr > k->va;
}

/* The VMA of maps (address order) that contains va; -ENOENT when none does. */
static int find_in(const struct rfsys_maps *maps, uint64_t va, struct rfsys_vma *out)
{
    struct va_key k = {maps, va};
    size_t lo = rf_partition_point(maps->n, vma_end_above, &k);
    if (lo == maps->n || va < maps->v[lo].start_addr)
        return -ENOENT;
    const struct rfsys_mapping *v = &maps->v[lo];
    out->start_addr = v->start_addr;
    out->end_addr = v->end_addr;
    out->offset_bytes = v->offset_bytes;
    memcpy(out->perms, v->perms, sizeof(out->perms));
    out->dev_major = v->dev_major;
    out->dev_minor = v->dev_minor;
    out->inode = v->inode;
    return 0;
}

/*
 * The VMA at va must be the model file's r--s mapping with va at
 * file_off: looked up in maps (a pass's read) or, when NULL, in a fresh
 * read of /proc/self/maps.
 */
static int locate(const struct forge_model *m, const struct rfsys_maps *maps, uint64_t va,
                  uint64_t file_off, struct rfsys_vma *vma)
{
    const struct rf_mapping_meta *mm = &m->mapping;
    int rc = maps ? find_in(maps, va, vma) : rfsys_maps_find(NULL, "self", va, vma);
    if (rc < 0)
        return rc; /* -ENOENT: gone; -EBADMSG: malformed */
    if (strcmp(vma->perms, "r--s") != 0 || vma->inode != mm->inode ||
        vma->dev_major != mm->dev_major || vma->dev_minor != mm->dev_minor ||
        vma->offset_bytes + (va - vma->start_addr) != file_off)
        return -EFAULT;
    return 0;
}

/*
 * The sampler proper: states holds n_pages bytes. No allocation. maps
 * NULL: checks trust and reads /proc/self/maps here; else the caller did
 * both (a page pass).
 */
static int sample_range(struct forge_model *m, const struct rfsys_maps *maps, int32_t mapping_index,
                        uint64_t first_page, uint64_t n_pages, uint8_t *states)
{
    const struct rf_mapping_meta *mm = &m->mapping;
    const uint64_t page = rfsys_page_bytes();
    uint64_t end_page, map_first, map_end, cur;
    int rc;

    if (mapping_index != 0 || !mm->validated || m->map_end <= m->map_start)
        return -ENXIO;
    map_first = mm->map_offset_bytes / page;
    map_end = (mm->map_offset_bytes + mm->map_length_bytes) / page; /* checked at build */
    if (__builtin_add_overflow(first_page, n_pages, &end_page) || first_page < map_first ||
        end_page > map_end)
        return -EFAULT;
    rc = maps ? 0 : check_trust(m);
    if (rc < 0)
        return rc;
    for (cur = first_page; cur < end_page;) {
        struct rfsys_vma vma;
        uint64_t file_off = cur * page; /* < map end: no overflow */
        uint64_t va = (uint64_t)m->map_start + (file_off - mm->map_offset_bytes);
        rc = locate(m, maps, va, file_off, &vma);
        if (rc < 0)
            return rc;
        uint64_t k = (vma.end_addr - va) / page;
        if (k > end_page - cur)
            k = end_page - cur;
        if (k == 0)
            return -EFAULT; /* a VMA end that is not page aligned */
        rc = rfsys_mincore((const void *)(uintptr_t)va, k * page, states + (cur - first_page),
                           (size_t)k);
        if (rc < 0)
            return rc;
        cur += k;
    }
    for (uint64_t i = 0; i < n_pages; i++)
        states[i] = states[i] ? RF_PAGE_RESIDENT : RF_PAGE_NONRESIDENT;
    return 0;
}

int forge_model_sample_pages(struct forge_model *m, int32_t mapping_index, uint64_t first_page,
                             uint64_t n_pages, uint8_t *states)
{
    if (!m || !states)
        return -EINVAL;
    if (n_pages == 0)
        return 0;
    int rc = sample_range(m, NULL, mapping_index, first_page, n_pages, states);
    if (rc < 0)
        memset(states, RF_PAGE_UNKNOWN, (size_t)n_pages);
    return rc;
}

int forge_page_pass_begin(struct forge_model *m, struct forge_page_pass *out)
{
    if (!out)
        return -EINVAL;
    memset(out, 0, sizeof(*out));
    rfsys_maps_init(&out->maps);
    out->m = m;
    if (!m)
        return -EINVAL;
    out->error = check_trust(m);
    if (out->error == 0)
        out->error = rfsys_read_maps(NULL, "self", &out->maps);
    return 0;
}

int forge_page_pass_sample(struct forge_page_pass *p, int32_t mapping_index, uint64_t first_page,
                           uint64_t n_pages, uint8_t *states)
{
    if (!p || !p->m || !states)
        return -EINVAL;
    if (n_pages == 0)
        return 0;
    int rc = p->error ? p->error
                      : sample_range(p->m, &p->maps, mapping_index, first_page, n_pages, states);
    if (rc < 0)
        memset(states, RF_PAGE_UNKNOWN, (size_t)n_pages);
    return rc;
}

void forge_page_pass_end(struct forge_page_pass *p)
{
    if (!p)
        return;
    rfsys_maps_free(&p->maps);
    p->m = NULL;
}

int forge_sample_tensor_pages(struct forge_model *m, uint32_t tensor_index,
                              uint8_t states[RF_PAGE_WINDOW_PAGES], struct forge_tensor_sample *out)
{
    const uint64_t page = rfsys_page_bytes();
    struct rf_page_range r;

    if (out) {
        memset(out, 0, sizeof(*out));
        out->tensor_index = tensor_index;
        out->mapping_index = -1;
        out->reason = "";
    }
    if (!m || !states || !out)
        return -EINVAL;
    if (tensor_index >= m->n_tensors) {
        out->error = -ENOENT;
        out->reason = "no such tensor";
        return -ENOENT;
    }
    const struct rf_tensor_meta *t = &m->tensors[tensor_index];
    const struct rf_mapping_meta *mm = &m->mapping;
    uint64_t t_end;
    if (t->mapping_index != 0 || !mm->validated ||
        __builtin_add_overflow(t->file_offset_bytes, t->logical_bytes, &t_end) ||
        t->file_offset_bytes < mm->map_offset_bytes ||
        t_end > mm->map_offset_bytes + mm->map_length_bytes ||
        rf_page_range_outward(t->file_offset_bytes, t->logical_bytes, page, &r) < 0) {
        out->error = -ENXIO;
        out->reason = "the tensor has no validated file mapping range (not file-backed)";
        return 0;
    }
    out->mapping_index = 0;
    out->first_page = r.first_page;
    out->end_page = r.end_page;
    uint64_t range = rf_page_range_pages(r);
    uint64_t n = range < RF_PAGE_WINDOW_PAGES ? range : RF_PAGE_WINDOW_PAGES;
    out->truncated = range > n;
    out->inspected_pages = n;
    if (n > 0) {
        int rc = forge_model_sample_pages(m, 0, r.first_page, n, states);
        out->error = rc;
        out->reason = forge_page_error_reason(rc);
    }
    struct rf_page_counts c = {0};
    rf_page_counts_add(&c, states, n);
    out->resident_pages = c.resident_pages;
    out->nonresident_pages = c.nonresident_pages;
    out->unknown_pages = c.unknown_pages;
    out->complete = !out->truncated && out->unknown_pages == 0 && out->error == 0;
    return 0;
}

/* Pages of the validated mapping fragment in the page cache, by one page pass. */
static int fragment_cached(struct forge_model *m, uint64_t *out)
{
    const struct rf_mapping_meta *mm = &m->mapping;
    const uint64_t page = rfsys_page_bytes();
    const uint64_t end = (mm->map_offset_bytes + mm->map_length_bytes) / page;
    uint8_t window[RF_PAGE_WINDOW_PAGES];
    struct forge_page_pass pass;
    struct rf_page_counts c = {0};
    int rc;

    forge_page_pass_begin(m, &pass);
    rc = pass.error;
    for (uint64_t cur = mm->map_offset_bytes / page; rc == 0 && cur < end;) {
        uint64_t k = end - cur < RF_PAGE_WINDOW_PAGES ? end - cur : RF_PAGE_WINDOW_PAGES;
        rc = forge_page_pass_sample(&pass, 0, cur, k, window);
        if (rc == 0)
            rf_page_counts_add(&c, window, k);
        cur += k;
    }
    forge_page_pass_end(&pass);
    *out = c.resident_pages;
    return rc;
}

/*
 * The whole file's cached pages: mincore over the mapping plus cachestat
 * over the rest where mincore is trustworthy, else cachestat over all.
 */
static void file_cache(struct forge_model *m, int fd, struct forge_page_source *out)
{
    const struct rf_mapping_meta *mm = &m->mapping;
    struct rfsys_cachestat head, tail, all;
    const struct rf_fs_profile *fs = rf_fs_profile_of(m->info.fs_magic);
    uint64_t in_map;
    int rc;

    if (out->mincore_trustworthy && mm->validated && fragment_cached(m, &in_map) == 0) {
        uint64_t map_end = mm->map_offset_bytes + mm->map_length_bytes;
        uint64_t outside = mm->map_offset_bytes / out->page_bytes +
                           (map_end / out->page_bytes < out->file_pages
                                ? out->file_pages - map_end / out->page_bytes
                                : 0);
        memset(&head, 0, sizeof(head));
        memset(&tail, 0, sizeof(tail));
        rc = mm->map_offset_bytes > 0 ? rfsys_cachestat(fd, 0, mm->map_offset_bytes, &head) : 0;
        if (rc == 0 && map_end < mm->file_size_bytes)
            rc = rfsys_cachestat(fd, map_end, 0, &tail);
        if (rc == 0 && (outside == 0 || fs->cachestat_valid)) {
            out->file_cache_error = 0;
            out->file_cached_pages = in_map + head.nr_cache + tail.nr_cache;
            if (outside)
                snprintf(out->file_cache_source, sizeof(out->file_cache_source),
                         "mincore (mapped pages) + cachestat (%llu pages outside the mapping)",
                         (unsigned long long)outside);
            else
                snprintf(out->file_cache_source, sizeof(out->file_cache_source), "mincore");
            return;
        }
    }
    if (!fs->cachestat_valid) {
        /* cachestat answers for this descriptor, but not about the file's pages */
        out->file_cache_error = -EOPNOTSUPP;
        out->file_cached_pages = 0;
        snprintf(out->file_cache_source, sizeof(out->file_cache_source), "unknown: %s",
                 fs->cachestat_why);
        return;
    }
    rc = rfsys_cachestat(fd, 0, 0, &all);
    out->file_cache_error = rc;
    out->file_cached_pages = rc == 0 ? all.nr_cache : 0;
    if (rc == 0)
        snprintf(out->file_cache_source, sizeof(out->file_cache_source), "cachestat");
    else if (rc == -ENOSYS)
        snprintf(out->file_cache_source, sizeof(out->file_cache_source),
                 "unknown: cachestat is not available (Linux 6.5+)");
    else if (rc == -EPERM)
        snprintf(out->file_cache_source, sizeof(out->file_cache_source),
                 "unknown: the kernel refused cachestat for this file (%s)", rf_strerror(rc));
    else
        snprintf(out->file_cache_source, sizeof(out->file_cache_source), "unknown: %s",
                 forge_page_error_reason(rc));
}

int forge_model_page_source(struct forge_model *m, struct forge_page_source *out)
{
    struct stat st;
    int fd;

    if (!m || !out)
        return -EINVAL;
    memset(out, 0, sizeof(*out));
    out->page_bytes = rfsys_page_bytes();
    out->file_pages = m->mapping.file_size_bytes / out->page_bytes +
                      (m->mapping.file_size_bytes % out->page_bytes != 0);
    out->mincore_reason = forge_page_error_reason(-ESTALE);
    out->file_cache_error = -ESTALE;
    snprintf(out->file_cache_source, sizeof(out->file_cache_source), "unknown: %s",
             forge_page_error_reason(-ESTALE));
    fd = open_model_file(m, &st);
    if (fd >= 0) {
        rfsys_mincore_trustworthy(&st, fd, &out->mincore_trustworthy, &out->mincore_reason);
        file_cache(m, fd, out);
        close(fd);
    }
    if (!m->mapping.validated)
        snprintf(out->source, sizeof(out->source), "unknown: %s", forge_page_error_reason(-ENXIO));
    else if (out->mincore_trustworthy)
        snprintf(out->source, sizeof(out->source), "mincore");
    else
        snprintf(out->source, sizeof(out->source), "unknown: %s", out->mincore_reason);
    return 0;
}
