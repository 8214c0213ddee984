/*
 * Admission: whether a run's projected memory fits, decided before and
 * apart from planning.
 *
 * The cgroup hard limit, when enforced, is authoritative: a projected
 * charge above it is Rejected whatever the soft target says. The soft
 * target (target minus the safety reserve) only ever produces
 * AdmittedWithWarning. A request that cannot be measured is Unknown, never
 * silently admitted. Unknown memory components (KV cache, graph scratch,
 * runtime) are listed, not counted as zero, and when the excess is likely
 * anonymous the reason says page release may not address it. No rule here
 * assumes a release request lowers cgroup usage by the requested amount.
 *
 * Plain C over one input struct; one decision per run, O(1).
 */
#ifndef RAMFORGE_ADMISSION_H
#define RAMFORGE_ADMISSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RF_ADMISSION_MAX_UNKNOWN 8  /* unknown components listed per decision */
#define RF_ADMISSION_NAME_MAX 64    /* a component name, including the NUL */
#define RF_ADMISSION_SOURCE_MAX 600 /* a limit's source path, including the NUL */
#define RF_ADMISSION_REASON_MAX 512 /* the one-sentence reason, including the NUL */

enum rf_admission_outcome {
    RF_ADMIT_ADMITTED = 0, /* fits the hard limit and the soft target */
    RF_ADMIT_WARNING,      /* AdmittedWithWarning: over the soft target only */
    RF_ADMIT_REJECTED,     /* over the hard limit, or arithmetic overflow */
    RF_ADMIT_UNKNOWN,      /* a figure the decision needs is unknown */
};

/* "admitted", "admitted_with_warning", "rejected", "unknown"; NULL for a bad value. */
const char *rf_admission_outcome_name(enum rf_admission_outcome o);

/*
 * What admission is told. Every figure is optional (has_* false: unknown,
 * never zero). Strings are borrowed for the call only.
 */
struct rf_admission_input {
    bool has_request;
    uint64_t request_bytes; /* projected process memory of the run, bytes */

    bool has_target;
    uint64_t target_bytes;  /* the user's memory target, bytes */
    uint64_t reserve_bytes; /* safety reserve, bytes; added to the request, checked */

    bool has_hard_limit;           /* the cgroup limit was read */
    bool hard_unlimited;           /* v2 "max" / the v1 sentinel: nothing to enforce */
    uint64_t hard_limit_bytes;     /* meaningful when has_hard_limit && !hard_unlimited */
    const char *hard_limit_source; /* file the limit came from; may be NULL */

    bool has_cgroup_current;
    uint64_t cgroup_current_bytes; /* cgroup charge now, bytes */

    bool has_process_rss;
    uint64_t process_rss_bytes; /* this process's RSS now (already in the charge), bytes */

    /*
     * Eligible-reclaimable estimate, bytes. The caller sets has_reclaimable
     * only when the native lifetime contract matches and the model was
     * observed quiescent (native flag, zero in-flight and zero active
     * contexts), and counts only release-eligible resources: an ineligible
     * or unknown lifetime component is never counted as reclaimable.
     */
    bool has_reclaimable;
    uint64_t reclaimable_bytes;

    /* Anonymous: RSS minus mapping resident (KV cache, scratch, runtime, repacked copies). */
    bool has_non_file;
    uint64_t non_file_bytes;

    const char *unknown_components[RF_ADMISSION_MAX_UNKNOWN]; /* e.g. "KvCache"; non-NULL */
    size_t n_unknown;                                         /* <= RF_ADMISSION_MAX_UNKNOWN */
};

/* The decision. Figures are present only where they could be computed. */
struct rf_admission_result {
    enum rf_admission_outcome outcome;

    bool has_soft_target;
    uint64_t soft_target_bytes; /* target - reserve, bytes */

    /* How far the request exceeds the soft target (whatever the outcome), bytes. */
    bool has_excess;
    uint64_t excess_bytes;
    /*
     * The excess cannot be covered by the reclaimable estimate, or the
     * estimate is unknown and the non-file memory alone exceeds the soft
     * target: page release may not address it. False without an excess.
     */
    bool excess_likely_anonymous;

    bool has_reclaimable;       /* copied from the input: only when it was eligible */
    uint64_t reclaimable_bytes; /* bytes */

    bool hard_limit_checked; /* a finite hard limit was compared against the charge */
    bool has_projected_charge;
    uint64_t projected_charge_bytes; /* cgroup current + max(0, request - RSS), bytes */
    bool has_hard_excess;
    uint64_t hard_excess_bytes; /* projected charge - hard limit when Rejected by it, bytes */
    char hard_limit_source[RF_ADMISSION_SOURCE_MAX]; /* copy; "" when none */

    char reason[RF_ADMISSION_REASON_MAX]; /* one sentence, no trailing newline */

    char unknown_components[RF_ADMISSION_MAX_UNKNOWN][RF_ADMISSION_NAME_MAX]; /* copies */
    size_t n_unknown;
};

/*
 * Decides admission, in this order:
 *
 *   1. no request                          -> Unknown (never silently admitted)
 *   2. request + reserve overflows         -> Rejected
 *   3. a finite hard limit is known:
 *        cgroup current unknown            -> Unknown
 *        charge = current + max(0, request - RSS), checked;
 *        overflow                          -> Rejected
 *        RSS unknown: charge bound = current + request; over the limit
 *                                          -> Unknown (never rejected or
 *                                             admitted on a guess)
 *        charge > limit                    -> Rejected (authoritative)
 *   4. a target is known:
 *        request > target - reserve        -> AdmittedWithWarning, with excess
 *        otherwise                         -> Admitted
 *   5. no target                           -> Admitted (only the hard check applies)
 *
 * An unlimited or unread hard limit is not checked. Unknown components are
 * copied into out (truncated to RF_ADMISSION_NAME_MAX - 1) and do not
 * change the outcome. out is fully written on success; on error it is
 * zeroed. Errors: -EINVAL for NULL arguments, n_unknown >
 * RF_ADMISSION_MAX_UNKNOWN, a NULL component name, or has_target with
 * reserve_bytes >= target_bytes (the CLI reports "target below the safety
 * reserve").
 */
int rf_admission_decide(const struct rf_admission_input *in, struct rf_admission_result *out);

#ifdef __cplusplus
}
#endif

#endif
