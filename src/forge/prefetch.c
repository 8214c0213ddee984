/*
 * Prefetch (forge_prefetch.h): MADV_WILLNEED over validated ranges of the
 * model's file mapping, in bounded chunks, under the exclusive side of the
 * execution gate.
 *
 * Expected workload: one call before inference with the ranges of a
 * staging plan (a few to a few thousand ranges, up to the model's size),
 * so about 8 thousand madvise calls per GiB at the default chunk. The
 * loop (validation against one fresh read of /proc/self/maps taken under
 * the gate, checked sums, chunked calls) is advise.c's, shared with
 * release; prefetch does not protect shared pages (a read hint takes
 * nothing from a neighbour).
 */
#include "forge_internal.h"

#include "ramforge/forge/forge_prefetch.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "ramforge/core/timing.h"
#include "ramforge/sys/pages.h"

/* The chunk for a requested chunk_bytes: 0 = default; whole pages, at least one. */
static uint64_t chunk_for(uint64_t chunk_bytes, uint64_t page_bytes)
{
    uint64_t c = chunk_bytes == 0 ? FORGE_PREFETCH_DEFAULT_CHUNK_BYTES : chunk_bytes;

    c -= c % page_bytes;
    return c == 0 ? page_bytes : c;
}

int forge_model_prefetch(struct forge_model *m, const struct rf_file_range *ranges, size_t n,
                         uint64_t chunk_bytes, struct forge_prefetch_result *out)
{
    const uint64_t t0 = rf_now_ns();
    struct forge_advise_params p = {.advice = MADV_WILLNEED, .protect_shared = false};
    struct forge_advise_tally t;
    int rc;

    if (!out)
        return -EINVAL;
    p.chunk_bytes = chunk_for(chunk_bytes, rfsys_page_bytes());
    rc = forge_advise_ranges(m, ranges, n, &p, &t, NULL);
    FORGE_RESULT_FROM_TALLY(out, t, t0);
    out->chunk_bytes = p.chunk_bytes;
    return rc;
}
