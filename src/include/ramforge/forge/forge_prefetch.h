/*
 * forge prefetch: MADV_WILLNEED over planned file page ranges of a loaded
 * model (the staging plan of staging.h), in bounded chunks.
 *
 * A prefetch is a hint. What it reports is what was requested and what the
 * madvise calls accepted (returned 0); neither proves that a page became
 * resident. Residency is observed separately (forge_pages.h), and a hint
 * that changed nothing is a valid observation.
 *
 * Ranges are validated exactly as release validates them (release.c): in a
 * fresh read of /proc/self/maps each range must lie wholly inside r--s
 * VMAs of the model file (same device+inode) that follow one another
 * without a gap, at the file offsets it claims;
 * any other range is refused and never touched.
 *
 * Chunks. One MADV_WILLNEED call reads ahead at most max(the device's
 * optimal I/O size, the file's readahead window) (mm/readahead.c,
 * force_page_cache_ra); the rest of a larger call's range is silently not
 * read. That limit is 8 MiB on this machine's disk (read_ahead_kb 8192,
 * max_sectors_kb 4096; the 16 and 32 MiB rows show it) and would be
 * 1.25 MiB on a common default disk (read_ahead_kb 128, max_sectors_kb
 * 1280); it is never below the file's readahead window, read_ahead_kb,
 * 128 KiB by default. Measured on a cold
 * copy of a generated tinyllama Q8_0 model (1.1 GiB), page-cache residency
 * of the file after WILLNEED over the whole mapping in chunks of:
 *
 *   chunk    calls   time in calls   time to 99% resident   final residency
 *   128 KiB   8926   268-297 ms      330-382 ms             100%
 *   512 KiB   2232   257-580 ms      433-795 ms             100%
 *     1 MiB   1116   254-633 ms      274-880 ms             100%
 *     2 MiB    558   520-688 ms      697-863 ms             99.9-100%
 *     8 MiB    140   263-577 ms      409-821 ms             100%
 *    16 MiB     70   234-445 ms      never (5 s)            50.2%
 *    32 MiB     35    59-66 ms       never (5 s)            25.1%
 *
 * (3 runs, Linux 6.18, virtio disk, 2 CPUs; the command is in
 * tests/forge/test_prefetch.c, test_measure_chunks.) Up to the per-call
 * limit the chunk size does not change the time, which the disk's
 * bandwidth sets (1.3-4.3 GB/s here), nor the residency reached;
 * above it the excess is lost (16 MiB: half, 32 MiB: a quarter). The
 * default, 128 KiB, is the default readahead window, so it stays under
 * the limit on any disk with default settings, at no measured cost here
 * (8 thousand calls per GiB, about 30 us each including I/O submission).
 */
#ifndef RAMFORGE_FORGE_PREFETCH_H
#define RAMFORGE_FORGE_PREFETCH_H

#include <stddef.h>
#include <stdint.h>

#include "ramforge/forge/forge.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Default bytes per MADV_WILLNEED call (see the table above): 128 KiB. */
#define FORGE_PREFETCH_DEFAULT_CHUNK_BYTES (128u * 1024u)

struct forge_prefetch_result {
    uint64_t requested_bytes; /* bytes of the non-empty ranges submitted, refused ones
                                 too (not a range whose bytes do not fit: -EOVERFLOW) */
    uint64_t accepted_bytes;  /* bytes of the calls madvise returned 0 for: a hint taken,
                                 not residency */
    uint64_t chunk_bytes;     /* bytes per call used (a page multiple) */
    size_t n_ranges;          /* non-empty ranges submitted */
    size_t n_refused;         /* ranges refused by validation (-EFAULT) or overflow
                                 (-EOVERFLOW): not touched */
    uint64_t n_calls;         /* madvise calls made */
    uint64_t n_failed_calls;  /* of those, returned an error */
    int first_error;          /* negative errno of the first refusal or failure, 0 if none */
    uint64_t elapsed_ns;      /* wall time of the whole call (CLOCK_MONOTONIC), gate included */
};

/*
 * Issues MADV_WILLNEED over each of the n ranges (file pages of the
 * model's mapping, as forge_model_release takes them) in calls of at most
 * chunk_bytes each: 0 means FORGE_PREFETCH_DEFAULT_CHUNK_BYTES; another
 * value is rounded down to whole pages, at least one page. Empty ranges
 * are ignored. A failed call does not stop the range's later chunks.
 *
 * The gate. Prefetch cannot corrupt inference: WILLNEED only reads file
 * pages into the page cache. It takes the exclusive side of the execution
 * gate anyway, without blocking, as release does, and holds it across
 * every call, so that a prefetch and a release never interleave (a
 * WILLNEED racing a MADV_PAGEOUT would undo it, and both measurements
 * would mean nothing) and staging stays a step before inference, the
 * step TTFT excludes. So: -EBUSY at once, changing nothing, while a
 * context is in flight or a release runs; while a prefetch runs, a
 * release gets -EBUSY and new submissions wait. The calls take the I/O
 * submission time (about 0.25-0.6 s per GiB here, table above).
 *
 * Byte counts are checked: a range whose bytes (pages * page size, or
 * the running sum of requested bytes) pass 2^64 is refused with
 * -EOVERFLOW and not touched. Returns 0 when the gate was taken (see
 * *out for per-range outcomes), -EBUSY, -EINVAL (NULL m or out, ranges
 * NULL with n > 0), -ENOMEM, or the error of reading /proc/self/maps.
 * *out, when not NULL, is always filled (zero but chunk_bytes and
 * elapsed_ns when nothing ran).
 */
int forge_model_prefetch(struct forge_model *m, const struct rf_file_range *ranges, size_t n,
                         uint64_t chunk_bytes, struct forge_prefetch_result *out);

#ifdef __cplusplus
}
#endif

#endif
