/*
 * Pinning (the streaming residency policy): mlock and munlock over
 * validated page ranges of the model's file mapping, so that the pinned
 * pages stay resident (unevictable) while the rest of the weights stream
 * through the page cache.
 *
 * Pinning is not a release: it only keeps file pages in memory and never
 * changes what the graph reads. The ranges are validated as release and
 * prefetch validate theirs (advise.c: wholly inside gapless r--s VMAs of
 * the model file at the file offsets they claim); a range that is not validated
 * (an anonymous repacked copy, outside the mapping) is never touched.
 */
#ifndef RAMFORGE_FORGE_PIN_H
#define RAMFORGE_FORGE_PIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ramforge/core/intervals.h"
#include "ramforge/forge/forge.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a pin or unpin call did. */
struct forge_pin_result {
    uint64_t requested_bytes; /* bytes of the non-empty ranges submitted */
    uint64_t accepted_bytes;  /* bytes of the calls mlock / munlock returned 0 for */
    size_t n_ranges;          /* non-empty ranges submitted */
    size_t n_refused;         /* ranges refused by validation (-EFAULT) or overflow: untouched */
    uint64_t n_calls;         /* mlock / munlock calls made (one per range) */
    uint64_t n_failed_calls;  /* of those, returned an error */
    int first_error;          /* negative errno of the first refusal or failure, 0 if none:
                                 -ENOMEM / -EAGAIN (RLIMIT_MEMLOCK, or the pages could not
                                 be locked), -EPERM (no CAP_IPC_LOCK and a zero limit) */
    uint64_t elapsed_ns;      /* wall time of the call, the reads mlock makes included */
};

/*
 * Locks the file pages of ranges (file pages of mapping 0) with mlock, one
 * call per range, under the exclusive side of the execution gate taken
 * without blocking (-EBUSY while a context is in flight or a release runs:
 * nothing is locked). mlock reads every page it locks: the call takes the
 * time of reading the ranges from storage. A failed range does not stop
 * the others; on any failure the caller should undo the rest with
 * forge_model_unpin (the streaming policy falls back to plain behaviour).
 * Returns 0 when the gate was taken (*out holds the outcomes), -EINVAL,
 * -EBUSY, -ENOMEM, or the error of reading /proc/self/maps; on a negative
 * return nothing was locked and *out (when not NULL) is zero.
 */
int forge_model_pin(struct forge_model *m, const struct rf_file_range *ranges, size_t n,
                    struct forge_pin_result *out);

/* munlock over the same validated ranges; as forge_model_pin otherwise. */
int forge_model_unpin(struct forge_model *m, const struct rf_file_range *ranges, size_t n,
                      struct forge_pin_result *out);

/* The hints forge_model_advise_stream gives the streamed ranges, and their undoing. */
enum forge_stream_advice {
    FORGE_STREAM_SEQUENTIAL, /* madvise(MADV_SEQUENTIAL): read ahead aggressively, and do
                                not promote pages referenced through the mapping (use-once) */
    FORGE_STREAM_NORMAL,     /* madvise(MADV_NORMAL): undoes SEQUENTIAL */
    FORGE_STREAM_HUGEPAGE,   /* madvise(MADV_HUGEPAGE): a fault reads PMD-sized folios (2 MiB
                                on x86-64) and maps them whole, so reclaim unmaps one folio
                                where it unmapped 512 pages (a 512th of the TLB
                                shootdowns) */
    FORGE_STREAM_NOHUGEPAGE, /* madvise(MADV_NOHUGEPAGE): undoes HUGEPAGE (Linux has no advice
                                back to "neither"; under THP "madvise" or "never" this faults
                                as an unadvised mapping does) */
    FORGE_STREAM_RANDOM,     /* madvise(MADV_RANDOM): a fault reads its page only, no
                                read-around (for token_embd, read a few rows a token);
                                undone with NORMAL */
};

/*
 * madvise(advice) over the same validated ranges: the streamed layers'
 * pages (docs/STREAMING.md has the measurements behind each hint). A hint
 * on the VMA, not a release: no page is dropped. -EINVAL for an advice
 * outside the enum; as forge_model_pin otherwise (a refused madvise, e.g.
 * MADV_HUGEPAGE on a kernel without THP, is out->first_error).
 */
int forge_model_advise_stream(struct forge_model *m, const struct rf_file_range *ranges, size_t n,
                              enum forge_stream_advice advice, struct forge_pin_result *out);

/* A static sentence for a pin error (rlimit, capability, busy gate...). */
const char *forge_pin_error_reason(int err);

#ifdef __cplusplus
}
#endif

#endif
