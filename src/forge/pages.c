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
 */
#include "forge_internal.h"

#include "ramforge/forge_pages.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "ramforge/error.h"
#include "ramforge/intervals.h"

const char *forge_page_error_reason(int err)
{
    switch (err) {
    case 0:
        return "";
    case -ENXIO:
        return "no validated file mapping for these pages";
    case -EFAULT:
        return "the range is not inside the model file's validated r--s mapping";
    case -ENOENT:
        return "the model mapping disappeared from /proc/self/maps";
    case -ENOMEM:
        return "mincore found the range unmapped: the model mapping disappeared";
    case -EACCES:
        return "mincore reports every page of a file the process neither owns nor may write "
               "as resident (kernel rule can_do_mincore): pages unknown";
    case -ESTALE:
        return "the file at the model's path is not the mapped file (replaced or removed): "
               "cannot check whether mincore is trustworthy";
    case -EBADMSG:
        return "malformed line in /proc/self/maps";
    default:
        return rf_strerror(err);
    }
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
    int rc = rfsys_mincore_trustworthy(&st, fd, NULL);
    close(fd);
    return rc == 1 ? 0 : -EACCES;
}

/* The VMA at va must be the model file's r--s mapping with va at file_off. */
static int locate(const struct forge_model *m, uint64_t va, uint64_t file_off,
                  struct rfsys_vma *vma)
{
    const struct rf_mapping_meta *mm = &m->mapping;
    int rc = rfsys_maps_find(NULL, "self", va, vma);
    if (rc < 0)
        return rc; /* -ENOENT: gone; -EBADMSG: malformed */
    if (strcmp(vma->perms, "r--s") != 0 || vma->inode != mm->inode ||
        vma->dev_major != mm->dev_major || vma->dev_minor != mm->dev_minor ||
        vma->offset_bytes + (va - vma->start_addr) != file_off)
        return -EFAULT;
    return 0;
}

/* The sampler proper: states holds n_pages bytes. No allocation. */
static int sample_range(struct forge_model *m, int32_t mapping_index, uint64_t first_page,
                        uint64_t n_pages, uint8_t *states)
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
    rc = check_trust(m);
    if (rc < 0)
        return rc;
    for (cur = first_page; cur < end_page;) {
        struct rfsys_vma vma;
        uint64_t file_off = cur * page; /* < map end: no overflow */
        uint64_t va = (uint64_t)m->map_start + (file_off - mm->map_offset_bytes);
        rc = locate(m, va, file_off, &vma);
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
    int rc = sample_range(m, mapping_index, first_page, n_pages, states);
    if (rc < 0)
        memset(states, RF_PAGE_UNKNOWN, (size_t)n_pages);
    return rc;
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
    for (uint64_t i = 0; i < n; i++) {
        if (states[i] == RF_PAGE_RESIDENT)
            out->resident_pages++;
        else if (states[i] == RF_PAGE_NONRESIDENT)
            out->nonresident_pages++;
        else
            out->unknown_pages++;
    }
    out->complete = !out->truncated && out->unknown_pages == 0 && out->error == 0;
    return 0;
}

int forge_model_page_source(struct forge_model *m, struct forge_page_source *out)
{
    struct stat st;
    int fd, rc;

    if (!m || !out)
        return -EINVAL;
    memset(out, 0, sizeof(*out));
    out->page_bytes = rfsys_page_bytes();
    out->file_pages = m->mapping.file_size_bytes / out->page_bytes +
                      (m->mapping.file_size_bytes % out->page_bytes != 0);
    out->mincore_reason = forge_page_error_reason(-ESTALE);
    out->cachestat_error = -ESTALE;
    fd = open_model_file(m, &st);
    if (fd >= 0) {
        rc = rfsys_mincore_trustworthy(&st, fd, &out->mincore_reason);
        out->mincore_trustworthy = rc == 1;
        out->cachestat_error = rfsys_cachestat(fd, 0, 0, &out->cachestat);
        close(fd);
    }
    if (!m->mapping.validated)
        snprintf(out->source, sizeof(out->source), "unknown: %s", forge_page_error_reason(-ENXIO));
    else if (out->mincore_trustworthy)
        snprintf(out->source, sizeof(out->source), "mincore");
    else
        snprintf(out->source, sizeof(out->source), "unknown: %s", out->mincore_reason);
    if (out->cachestat_error == 0)
        snprintf(out->cachestat_source, sizeof(out->cachestat_source), "cachestat");
    else if (out->cachestat_error == -ENOSYS)
        snprintf(out->cachestat_source, sizeof(out->cachestat_source),
                 "unknown: cachestat is not available (Linux 6.5+)");
    else if (out->cachestat_error == -EPERM)
        snprintf(out->cachestat_source, sizeof(out->cachestat_source),
                 "unknown: the kernel refused cachestat for this file (%s)",
                 rf_strerror(out->cachestat_error));
    else
        snprintf(out->cachestat_source, sizeof(out->cachestat_source), "unknown: %s",
                 forge_page_error_reason(out->cachestat_error));
    return 0;
}
