/*
 * Page release (forge.h, forge_model_release): MADV_DONTNEED or
 * MADV_PAGEOUT over validated ranges of the model's file mapping, under
 * the exclusive side of the execution gate, leaving out the pages shared
 * with tensors outside the request. The loop, its validation and the
 * protection rule are advise.c's, shared with prefetch.
 */
#include "forge_internal.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21
#endif

int forge_model_release(struct forge_model *m, const struct rf_file_range *ranges, size_t n,
                        enum forge_release_mode mode, struct forge_release_result *out,
                        int *range_errors)
{
    const struct forge_advise_params p = {
        .advice = mode == FORGE_RELEASE_PAGEOUT ? MADV_PAGEOUT : MADV_DONTNEED,
        .chunk_bytes = 0, /* one call per piece of a range */
        .protect_shared = true,
    };
    struct forge_advise_tally t;
    int rc;

    if (!out)
        return -EINVAL;
    rc = forge_advise_ranges(m, ranges, n, &p, &t, range_errors);
    memset(out, 0, sizeof(*out));
    out->requested_bytes = t.requested_bytes;
    out->accepted_bytes = t.accepted_bytes;
    out->protected_bytes = t.protected_bytes;
    out->n_failed = t.n_failed;
    out->first_error = t.first_error;
    return rc;
}
