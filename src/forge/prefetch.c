/*
 * Prefetch (forge_prefetch.h): MADV_WILLNEED over validated ranges of the
 * model's file mapping, in bounded chunks, under the exclusive side of the
 * execution gate.
 *
 * Expected workload: one call before inference with the ranges of a
 * staging plan (a few to a few thousand ranges, up to the model's size),
 * so about 8 thousand madvise calls per GiB at the default chunk. Each
 * range is validated once (forge_range_validate, shared with release),
 * against one fresh read of /proc/self/maps taken under the gate.
 */
#include "forge_internal.h"

#include "ramforge/forge_prefetch.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "ramforge/pages.h"
#include "ramforge/sys.h"
#include "ramforge/timing.h"

/* The chunk for a requested chunk_bytes: 0 = default; whole pages, at least one. */
static uint64_t chunk_for(uint64_t chunk_bytes, uint64_t page_bytes)
{
    uint64_t c = chunk_bytes == 0 ? FORGE_PREFETCH_DEFAULT_CHUNK_BYTES : chunk_bytes;

    c -= c % page_bytes;
    return c == 0 ? page_bytes : c;
}

static void note_error(struct forge_prefetch_result *out, int err)
{
    if (!out->first_error)
        out->first_error = err;
}

/* WILLNEED over [va, va + len) in chunks; counts calls and accepted bytes. */
static void advise_chunks(uint64_t va, uint64_t len, struct forge_prefetch_result *out)
{
    for (uint64_t off = 0; off < len; off += out->chunk_bytes) {
        uint64_t step = len - off < out->chunk_bytes ? len - off : out->chunk_bytes;

        out->n_calls++;
        if (madvise((void *)(uintptr_t)(va + off), (size_t)step, MADV_WILLNEED) != 0) {
            out->n_failed_calls++;
            note_error(out, -errno);
        } else {
            out->accepted_bytes += step; /* <= requested_bytes, which was checked */
        }
    }
}

int forge_model_prefetch(struct forge_model *m, const struct rf_file_range *ranges, size_t n,
                         uint64_t chunk_bytes, struct forge_prefetch_result *out)
{
    const uint64_t page = rfsys_page_bytes();
    const uint64_t t0 = rf_now_ns();
    struct rfsys_maps maps;
    int rc;

    if (!out)
        return -EINVAL;
    memset(out, 0, sizeof(*out));
    out->chunk_bytes = chunk_for(chunk_bytes, page);
    if (!m || (!ranges && n > 0)) {
        out->elapsed_ns = rf_now_ns() - t0;
        return -EINVAL;
    }
    rc = forge_gate_try_release(&m->gate);
    if (rc < 0) {
        out->elapsed_ns = rf_now_ns() - t0;
        return rc;
    }
    rfsys_maps_init(&maps);
    rc = rfsys_read_maps(NULL, "self", &maps);
    if (rc < 0)
        goto out;
    for (size_t i = 0; i < n; i++) {
        const struct rf_file_range *r = &ranges[i];
        uint64_t va, len, sum;
        int err;

        if (r->pages.end_page <= r->pages.first_page)
            continue;
        out->n_ranges++;
        err = forge_range_validate(m, &maps, r, page, &va, &len);
        if (__builtin_add_overflow(out->requested_bytes, len, &sum))
            err = -EOVERFLOW; /* not counted, not touched */
        else
            out->requested_bytes = sum;
        if (err) {
            out->n_refused++;
            note_error(out, err);
            continue;
        }
        advise_chunks(va, len, out);
    }
out:
    rfsys_maps_free(&maps);
    forge_gate_end_release(&m->gate);
    out->elapsed_ns = rf_now_ns() - t0;
    return rc;
}
