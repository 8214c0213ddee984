/*
 * Pinning (forge_pin.h): mlock and munlock over validated ranges of the
 * model's file mapping, through advise.c's loop (validation against one
 * fresh read of /proc/self/maps under the gate, checked sums).
 *
 * Expected workload: one pin before an operation's session with the ranges
 * of a streaming plan (a few merged ranges, up to the model's size) and
 * one unpin before the next release boundary; one call per range.
 */
#include "forge_internal.h"

#include "ramforge/core/error_text.h"
#include "ramforge/forge/forge_pin.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "ramforge/core/timing.h"

static int pin_ranges(struct forge_model *m, const struct rf_file_range *ranges, size_t n, int lock,
                      int advice, struct forge_pin_result *out)
{
    const uint64_t t0 = rf_now_ns();
    struct forge_advise_params p = {.advice = advice, .lock = lock, .chunk_bytes = 0};
    struct forge_advise_tally t;

    if (!out)
        return -EINVAL;
    int rc = forge_advise_ranges(m, ranges, n, &p, &t, NULL);
    FORGE_RESULT_FROM_TALLY(out, t, t0);
    return rc;
}

int forge_model_pin(struct forge_model *m, const struct rf_file_range *ranges, size_t n,
                    struct forge_pin_result *out)
{
    return pin_ranges(m, ranges, n, 1, 0, out);
}

int forge_model_unpin(struct forge_model *m, const struct rf_file_range *ranges, size_t n,
                      struct forge_pin_result *out)
{
    return pin_ranges(m, ranges, n, -1, 0, out);
}

int forge_model_advise_stream(struct forge_model *m, const struct rf_file_range *ranges, size_t n,
                              enum forge_stream_advice advice, struct forge_pin_result *out)
{
    static const int madv[] = {
        [FORGE_STREAM_SEQUENTIAL] = MADV_SEQUENTIAL, [FORGE_STREAM_NORMAL] = MADV_NORMAL,
        [FORGE_STREAM_HUGEPAGE] = MADV_HUGEPAGE,     [FORGE_STREAM_NOHUGEPAGE] = MADV_NOHUGEPAGE,
        [FORGE_STREAM_RANDOM] = MADV_RANDOM,
    };
    if ((unsigned)advice >= sizeof(madv) / sizeof(madv[0]))
        return -EINVAL;
    return pin_ranges(m, ranges, n, 0, madv[advice], out);
}

const char *forge_pin_error_reason(int err)
{
    static const char over_limit[] = "mlock refused: the locked bytes exceed RLIMIT_MEMLOCK "
                                     "(without CAP_IPC_LOCK) or the pages could not be locked";
    static const struct rf_err_text texts[] = {
        {0, NULL},
        {-ENOMEM, over_limit},
        {-EAGAIN, over_limit},
        {-EPERM, "mlock refused: no CAP_IPC_LOCK and RLIMIT_MEMLOCK is 0"},
        {-EFAULT, "a range is not a validated file-backed range of the model mapping"},
        {-EBUSY, "the execution gate was busy (a context in flight or a release running)"},
        {-ENOSYS, "the native layer cannot pin"},
    };
    return rf_strerror_in(RF_ERR_TEXTS(texts), err, "mlock failed");
}
