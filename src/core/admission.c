/*
 * Admission: one decision per run from optional figures, with every sum
 * checked and every unknown figure leading to Unknown rather than to a
 * guess. See admission.h for the order of the rules.
 */
#include "ramforge/admission.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define RF_ANON_NOTE                                                                               \
    "page release may not address it: the excess is likely anonymous (KV cache, graph scratch, "   \
    "runtime, repacked copies)"

static const char *const outcome_names[] = {
    [RF_ADMIT_ADMITTED] = "admitted",
    [RF_ADMIT_WARNING] = "admitted_with_warning",
    [RF_ADMIT_REJECTED] = "rejected",
    [RF_ADMIT_UNKNOWN] = "unknown",
};

const char *rf_admission_outcome_name(enum rf_admission_outcome o)
{
    if ((unsigned)o >= sizeof(outcome_names) / sizeof(outcome_names[0]))
        return NULL;
    return outcome_names[o];
}

/* Copies src (NULL: "") into dst of size bytes, truncating, NUL-terminated. */
static void copy_str(char *dst, size_t size, const char *src)
{
    size_t len = src ? strnlen(src, size - 1) : 0;

    if (len)
        memcpy(dst, src, len);
    dst[len] = '\0';
}

/* Sets the outcome and formats the reason (truncated to fit). */
__attribute__((format(printf, 3, 4))) static void
decide(struct rf_admission_result *out, enum rf_admission_outcome o, const char *fmt, ...)
{
    va_list ap;

    out->outcome = o;
    va_start(ap, fmt);
    vsnprintf(out->reason, sizeof(out->reason), fmt, ap);
    va_end(ap);
}

/*
 * Fills the soft-target excess of a known request and whether it is likely
 * anonymous. Needs out->has_soft_target.
 */
static void soft_excess(const struct rf_admission_input *in, struct rf_admission_result *out)
{
    if (!out->has_soft_target || in->request_bytes <= out->soft_target_bytes)
        return;
    out->has_excess = true;
    out->excess_bytes = in->request_bytes - out->soft_target_bytes;
    if (in->has_reclaimable)
        out->excess_likely_anonymous = in->reclaimable_bytes < out->excess_bytes;
    else
        out->excess_likely_anonymous =
            in->has_non_file && in->non_file_bytes > out->soft_target_bytes;
}

/* The hard-limit rule. Returns true when it decided the outcome. */
static bool hard_check(const struct rf_admission_input *in, struct rf_admission_result *out)
{
    uint64_t growth, charge, limit = in->hard_limit_bytes;

    if (!in->has_hard_limit || in->hard_unlimited)
        return false;
    if (!in->has_cgroup_current) {
        decide(out, RF_ADMIT_UNKNOWN,
               "the cgroup hard limit of %" PRIu64
               " bytes is enforced but the cgroup's current charge is unknown",
               limit);
        return true;
    }
    /* Without RSS the whole request is growth: an upper bound, not a charge. */
    growth = in->request_bytes;
    if (in->has_process_rss)
        growth = in->request_bytes > in->process_rss_bytes
                     ? in->request_bytes - in->process_rss_bytes
                     : 0;
    if (__builtin_add_overflow(in->cgroup_current_bytes, growth, &charge)) {
        decide(out, RF_ADMIT_REJECTED,
               "the projected cgroup charge overflows 64 bits (current %" PRIu64
               " bytes plus %" PRIu64 " bytes of growth)",
               in->cgroup_current_bytes, growth);
        return true;
    }
    if (!in->has_process_rss) {
        if (charge <= limit) {
            out->hard_limit_checked = true;
            return false;
        }
        decide(out, RF_ADMIT_UNKNOWN,
               "the process RSS is unknown, so the cgroup charge may reach %" PRIu64
               " bytes, over the hard limit of %" PRIu64 " bytes",
               charge, limit);
        return true;
    }
    out->hard_limit_checked = true;
    out->has_projected_charge = true;
    out->projected_charge_bytes = charge;
    if (charge <= limit)
        return false;
    out->has_hard_excess = true;
    out->hard_excess_bytes = charge - limit;
    decide(out, RF_ADMIT_REJECTED,
           "the projected cgroup charge of %" PRIu64 " bytes exceeds the hard limit of %" PRIu64
           " bytes by %" PRIu64 " bytes",
           charge, limit, out->hard_excess_bytes);
    return true;
}

int rf_admission_decide(const struct rf_admission_input *in, struct rf_admission_result *out)
{
    uint64_t with_reserve;
    size_t k;

    if (!out)
        return -EINVAL;
    memset(out, 0, sizeof(*out));
    if (!in || in->n_unknown > RF_ADMISSION_MAX_UNKNOWN)
        return -EINVAL;
    for (k = 0; k < in->n_unknown; k++)
        if (!in->unknown_components[k])
            return -EINVAL;
    if (in->has_target && in->reserve_bytes >= in->target_bytes)
        return -EINVAL;

    for (k = 0; k < in->n_unknown; k++)
        copy_str(out->unknown_components[k], RF_ADMISSION_NAME_MAX, in->unknown_components[k]);
    out->n_unknown = in->n_unknown;
    if (in->has_hard_limit)
        copy_str(out->hard_limit_source, sizeof(out->hard_limit_source), in->hard_limit_source);
    out->has_reclaimable = in->has_reclaimable;
    out->reclaimable_bytes = in->has_reclaimable ? in->reclaimable_bytes : 0;
    if (in->has_target) {
        out->has_soft_target = true;
        out->soft_target_bytes = in->target_bytes - in->reserve_bytes; /* reserve < target */
    }

    if (!in->has_request) {
        decide(out, RF_ADMIT_UNKNOWN,
               "the run's memory request could not be measured, so it is not admitted");
        return 0;
    }
    soft_excess(in, out);
    if (__builtin_add_overflow(in->request_bytes, in->reserve_bytes, &with_reserve)) {
        decide(out, RF_ADMIT_REJECTED,
               "the request of %" PRIu64 " bytes plus the safety reserve of %" PRIu64
               " bytes overflows 64 bits",
               in->request_bytes, in->reserve_bytes);
        return 0;
    }
    if (hard_check(in, out))
        return 0;

    if (out->has_excess) {
        if (out->excess_likely_anonymous)
            decide(out, RF_ADMIT_WARNING,
                   "the request of %" PRIu64 " bytes exceeds the soft target of %" PRIu64
                   " bytes by %" PRIu64 " bytes; " RF_ANON_NOTE,
                   in->request_bytes, out->soft_target_bytes, out->excess_bytes);
        else if (in->has_reclaimable)
            decide(out, RF_ADMIT_WARNING,
                   "the request of %" PRIu64 " bytes exceeds the soft target of %" PRIu64
                   " bytes by %" PRIu64
                   " bytes, within the eligible-reclaimable estimate of %" PRIu64 " bytes",
                   in->request_bytes, out->soft_target_bytes, out->excess_bytes,
                   in->reclaimable_bytes);
        else
            decide(out, RF_ADMIT_WARNING,
                   "the request of %" PRIu64 " bytes exceeds the soft target of %" PRIu64
                   " bytes by %" PRIu64 " bytes, and no eligible-reclaimable estimate is available",
                   in->request_bytes, out->soft_target_bytes, out->excess_bytes);
    } else if (out->has_soft_target) {
        decide(out, RF_ADMIT_ADMITTED,
               "the request of %" PRIu64 " bytes fits the soft target of %" PRIu64 " bytes",
               in->request_bytes, out->soft_target_bytes);
    } else if (out->hard_limit_checked) {
        decide(out, RF_ADMIT_ADMITTED,
               "the request of %" PRIu64 " bytes fits the cgroup hard limit of %" PRIu64
               " bytes, and no target was set",
               in->request_bytes, in->hard_limit_bytes);
    } else {
        decide(out, RF_ADMIT_ADMITTED,
               "the request of %" PRIu64 " bytes has no enforced hard limit or target to exceed",
               in->request_bytes);
    }
    return 0;
}
