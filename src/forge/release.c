/*
 * Page release and its validation. Under the exclusive side of the
 * execution gate, each requested range of file pages is located in a
 * fresh read of /proc/self/maps: it must lie wholly inside one r--s VMA of
 * the model file (same dev+inode) at the file offset it claims. Only then
 * is it advised away (MADV_DONTNEED or MADV_PAGEOUT). A range that is not
 * validated is never touched: madvise on the anonymous CPU_REPACK copy of a
 * weight corrupts inference. The validation, forge_range_validate, is
 * shared with prefetch (prefetch.c).
 */
#include "forge_internal.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ramforge/sys.h"

#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21
#endif

/* The VMA of maps that holds [va, va + len) of the model file at file_off, or NULL. */
static const struct rfsys_mapping *validate_range(const struct forge_model *m,
                                                  const struct rfsys_maps *maps, uint64_t va,
                                                  uint64_t len, uint64_t file_off)
{
    const struct rf_mapping_meta *mm = &m->mapping;
    for (size_t i = 0; i < maps->n; i++) {
        const struct rfsys_mapping *v = &maps->v[i];
        if (va < v->start_addr || va + len > v->end_addr)
            continue;
        if (strcmp(v->perms, "r--s") != 0 || v->inode != mm->inode ||
            v->dev_major != mm->dev_major || v->dev_minor != mm->dev_minor ||
            v->offset_bytes + (va - v->start_addr) != file_off)
            return NULL;
        return v;
    }
    return NULL;
}

int forge_range_validate(const struct forge_model *m, const struct rfsys_maps *maps,
                         const struct rf_file_range *r, uint64_t page_bytes, uint64_t *va,
                         uint64_t *len_bytes)
{
    uint64_t file_off, len;

    *va = 0;
    *len_bytes = 0;
    if (__builtin_mul_overflow(r->pages.first_page, page_bytes, &file_off) ||
        __builtin_mul_overflow(r->pages.end_page - r->pages.first_page, page_bytes, &len))
        return -EOVERFLOW;
    *len_bytes = len;
    if (r->mapping_index != 0 || !m->mapping.validated || file_off < m->mapping.map_offset_bytes ||
        len > m->mapping.map_length_bytes ||
        file_off - m->mapping.map_offset_bytes > m->mapping.map_length_bytes - len)
        return -EFAULT;
    *va = (uint64_t)m->map_start + (file_off - m->mapping.map_offset_bytes);
    if (!validate_range(m, maps, *va, len, file_off)) {
        *va = 0;
        return -EFAULT;
    }
    return 0;
}

int forge_model_release(struct forge_model *m, const struct rf_file_range *ranges, size_t n,
                        enum forge_release_mode mode, struct forge_release_result *out,
                        int *range_errors)
{
    const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    struct rfsys_maps maps;
    int rc;

    memset(out, 0, sizeof(*out));
    rc = forge_gate_try_release(&m->gate);
    if (rc < 0)
        return rc;
    rfsys_maps_init(&maps);
    rc = rfsys_read_maps(NULL, "self", &maps);
    if (rc < 0)
        goto out;
    for (size_t i = 0; i < n; i++) {
        const struct rf_file_range *r = &ranges[i];
        uint64_t len, va;
        int err;

        if (r->pages.end_page <= r->pages.first_page) {
            if (range_errors)
                range_errors[i] = 0;
            continue;
        }
        err = forge_range_validate(m, &maps, r, page, &va, &len);
        out->requested_bytes += len; /* 0 on -EOVERFLOW */
        if (!err &&
            madvise((void *)(uintptr_t)va, len,
                    mode == FORGE_RELEASE_PAGEOUT ? MADV_PAGEOUT : MADV_DONTNEED) != 0)
            err = -errno;
        if (err) {
            out->n_failed++;
            if (!out->first_error)
                out->first_error = err;
        } else {
            out->accepted_bytes += len;
        }
        if (range_errors)
            range_errors[i] = err;
    }
out:
    rfsys_maps_free(&maps);
    forge_gate_end_release(&m->gate);
    return rc;
}
