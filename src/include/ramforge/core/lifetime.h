/*
 * The resource-lifetime state machine: one state per inventory resource
 * (model tensor), advanced only along the legal transitions of the spec's
 * diagram plus the loops a real run needs (next decode, next session, a
 * released weight referenced again) and the explicit non-release outcomes.
 *
 * The invariant the machine exists for: ExecutionCompleted never moves
 * directly to ReleaseEligible. A resource becomes eligible only after an
 * OperationBoundarySynchronized observation (the native gate quiescent).
 * FinalUseProven is reserved for a future contract that proves no future
 * graph can reuse the resource; nothing transitions into it. A failed native
 * release ends in ReleaseFailed with its negative errno kept, never in
 * Reconciled.
 *
 * Expected workload: a few hundred to a few thousand resources, advanced in
 * bulk a handful of times per session; every operation on one resource is
 * O(1). Not thread-safe: one owner advances a struct rf_lifetime.
 */
#ifndef RAMFORGE_LIFETIME_H
#define RAMFORGE_LIFETIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum rf_lifetime_state {
    RF_LT_DISCOVERED = 0,                  /* listed in the inventory */
    RF_LT_OWNED,                           /* the loaded model instance owns it */
    RF_LT_REFERENCED,                      /* a context's graph may read it */
    RF_LT_EXECUTION_SUBMITTED,             /* a graph using it was submitted */
    RF_LT_EXECUTION_COMPLETED,             /* that graph completed (not a boundary) */
    RF_LT_OPERATION_BOUNDARY_SYNCHRONIZED, /* synchronized, contexts dropped, quiescent */
    RF_LT_RELEASE_ELIGIBLE,                /* the policy may select it */
    RF_LT_RELEASE_SELECTED,                /* a plan selected it */
    RF_LT_RELEASE_REQUESTED,               /* the native release call was made */
    RF_LT_NATIVE_ACCEPTED,                 /* the native layer accepted the request */
    RF_LT_NATIVE_FAILURE,                  /* the native layer refused it */
    RF_LT_RECONCILED,                      /* acceptance reconciled with observations */
    RF_LT_RELEASE_FAILED,                  /* failed release, errno kept */
    RF_LT_FINAL_USE_PROVEN,                /* reserved: unreachable today */
    RF_LT_INVALIDATED,                     /* generation refreshed: terminal */
    RF_LT_SHARED_OR_REUSED,                /* not released: shared pages or reuse */
    RF_LT_UNKNOWN,                         /* lifetime could not be established */
    RF_LT_N
};

/*
 * The spec's CamelCase name of s ("Discovered", "ExecutionCompleted",
 * "OperationBoundarySynchronized", ...). NULL for a value out of range.
 */
const char *rf_lifetime_state_name(enum rf_lifetime_state s);

/*
 * Whether from -> to is a legal transition (see the table in lifetime.c).
 * Self-transitions are never legal; out-of-range states are never legal.
 */
bool rf_lifetime_transition_legal(enum rf_lifetime_state from, enum rf_lifetime_state to);

/*
 * The states of n resources, indexed like the inventory. errors[i] is the
 * negative errno of a failed native release, nonzero only while states[i]
 * is RF_LT_RELEASE_FAILED. Owned by the struct: init allocates, free
 * releases. Fields are read-only to callers; change them through the API.
 */
struct rf_lifetime {
    enum rf_lifetime_state *states; /* n entries */
    int *errors;                    /* n entries: 0 or a negative errno */
    int *past_errors;               /* n entries: the errno of the last failed release the
                                       resource left (re-referenced since); 0: none */
    size_t n;                       /* resources */
};

/*
 * Allocates n resources, all RF_LT_DISCOVERED with no error. n == 0 is
 * valid (NULL arrays). The caller releases with rf_lifetime_free.
 * Errors: -EINVAL (NULL lt), -ENOMEM; on error *lt is all zero.
 */
int rf_lifetime_init(struct rf_lifetime *lt, size_t n);

/* Frees the arrays and zeroes *lt. NULL, or a zeroed struct, is a no-op. */
void rf_lifetime_free(struct rf_lifetime *lt);

/*
 * Moves resource i to state to. Leaving RF_LT_RELEASE_FAILED (to
 * Referenced, Invalidated or Unknown) moves its error to past_errors (the
 * history keeps the failure); entering
 * RF_LT_RELEASE_FAILED through here records no errno (use rf_lifetime_fail
 * to keep one). Errors: -EINVAL for a NULL lt, i >= n, or an illegal
 * transition; the state is then unchanged.
 */
int rf_lifetime_advance(struct rf_lifetime *lt, size_t i, enum rf_lifetime_state to);

/*
 * Records a failed native release of resource i: RF_LT_RELEASE_REQUESTED ->
 * RF_LT_NATIVE_FAILURE -> RF_LT_RELEASE_FAILED, keeping err (a negative
 * errno, e.g. -EBUSY from the execution gate). Errors: -EINVAL for a NULL
 * lt, i >= n, err >= 0, or a resource not in RF_LT_RELEASE_REQUESTED; the
 * state and error are then unchanged.
 */
int rf_lifetime_fail(struct rf_lifetime *lt, size_t i, int err);

/*
 * The negative errno kept for resource i: nonzero only for a
 * RF_LT_RELEASE_FAILED resource failed through rf_lifetime_fail, 0
 * otherwise. Returns -EINVAL for a NULL lt or i >= n; a caller that must
 * tell that apart from a kept -EINVAL checks i < lt->n first.
 */
int rf_lifetime_error(const struct rf_lifetime *lt, size_t i);

/*
 * Writes the number of resources in each state to counts (indexed by
 * state, RF_LT_N entries, all written). A NULL lt counts nothing.
 */
void rf_lifetime_counts(const struct rf_lifetime *lt, uint64_t counts[RF_LT_N]);

/*
 * The invariant checker, for assert(): lt is non-NULL, its arrays are
 * non-NULL when n > 0, every state is in range, every error is 0 or
 * negative, and an error is nonzero only on RF_LT_RELEASE_FAILED. O(n).
 */
bool rf_lifetime_check(const struct rf_lifetime *lt);

#ifdef __cplusplus
}
#endif

#endif
