/*
 * The resource-lifetime state machine: a table of legal transitions and a
 * per-resource state array advanced through it.
 *
 * Every operation on one resource is a table look-up; only the counts and
 * the invariant checker walk all n resources. Illegal requests change
 * nothing and return -EINVAL, so a caller's bug shows as an error, never as
 * a resource silently reported released.
 */
#include "ramforge/core/lifetime.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char *const state_names[RF_LT_N] = {
    [RF_LT_DISCOVERED] = "Discovered",
    [RF_LT_OWNED] = "Owned",
    [RF_LT_REFERENCED] = "Referenced",
    [RF_LT_EXECUTION_SUBMITTED] = "ExecutionSubmitted",
    [RF_LT_EXECUTION_COMPLETED] = "ExecutionCompleted",
    [RF_LT_OPERATION_BOUNDARY_SYNCHRONIZED] = "OperationBoundarySynchronized",
    [RF_LT_RELEASE_ELIGIBLE] = "ReleaseEligible",
    [RF_LT_RELEASE_SELECTED] = "ReleaseSelected",
    [RF_LT_RELEASE_REQUESTED] = "ReleaseRequested",
    [RF_LT_NATIVE_ACCEPTED] = "NativeAccepted",
    [RF_LT_NATIVE_FAILURE] = "NativeFailure",
    [RF_LT_RECONCILED] = "Reconciled",
    [RF_LT_RELEASE_FAILED] = "ReleaseFailed",
    [RF_LT_FINAL_USE_PROVEN] = "FinalUseProven",
    [RF_LT_INVALIDATED] = "Invalidated",
    [RF_LT_SHARED_OR_REUSED] = "SharedOrReused",
    [RF_LT_UNKNOWN] = "Unknown",
};

#define B(s) (UINT32_C(1) << (s))
/* The explicit non-release outcomes open to every live state. */
#define OUTCOMES (B(RF_LT_INVALIDATED) | B(RF_LT_UNKNOWN))

/*
 * Legal transitions, from -> the set of states it may move to:
 *
 *   from                            to
 *   ------------------------------  ----------------------------------------
 *   Discovered                      Owned
 *   Owned                           Referenced
 *   Referenced                      ExecutionSubmitted
 *   ExecutionSubmitted              ExecutionCompleted
 *   ExecutionCompleted              OperationBoundarySynchronized,
 *                                   ExecutionSubmitted (next decode)
 *   OperationBoundarySynchronized   ReleaseEligible,
 *                                   ExecutionSubmitted (next session)
 *   ReleaseEligible                 ReleaseSelected, SharedOrReused,
 *                                   ExecutionSubmitted (not selected; next
 *                                   session)
 *   ReleaseSelected                 ReleaseRequested, SharedOrReused
 *   ReleaseRequested                NativeAccepted, NativeFailure
 *   NativeAccepted                  Reconciled
 *   NativeFailure                   ReleaseFailed
 *   Reconciled                      Referenced (a later session uses the
 *                                   weight again: its pages re-fault)
 *   ReleaseFailed                   Referenced (likewise)
 *   SharedOrReused                  Referenced (a later session uses it)
 *   Unknown                         Invalidated
 *   FinalUseProven                  nothing (reserved, unreachable)
 *   Invalidated                     nothing (terminal)
 *
 * and every state but FinalUseProven and Invalidated may also move to
 * Invalidated (generation refresh) and Unknown, except Unknown -> Unknown.
 *
 * Deliberately absent: ExecutionCompleted -> ReleaseEligible (graph
 * completion is not an operation boundary: a synchronized context still
 * owns the weights for future tokens), any edge into FinalUseProven, and
 * every self-transition.
 */
static const uint32_t legal_next[RF_LT_N] = {
    [RF_LT_DISCOVERED] = B(RF_LT_OWNED) | OUTCOMES,
    [RF_LT_OWNED] = B(RF_LT_REFERENCED) | OUTCOMES,
    [RF_LT_REFERENCED] = B(RF_LT_EXECUTION_SUBMITTED) | OUTCOMES,
    [RF_LT_EXECUTION_SUBMITTED] = B(RF_LT_EXECUTION_COMPLETED) | OUTCOMES,
    [RF_LT_EXECUTION_COMPLETED] =
        B(RF_LT_OPERATION_BOUNDARY_SYNCHRONIZED) | B(RF_LT_EXECUTION_SUBMITTED) | OUTCOMES,
    [RF_LT_OPERATION_BOUNDARY_SYNCHRONIZED] =
        B(RF_LT_RELEASE_ELIGIBLE) | B(RF_LT_EXECUTION_SUBMITTED) | OUTCOMES,
    [RF_LT_RELEASE_ELIGIBLE] = B(RF_LT_RELEASE_SELECTED) | B(RF_LT_SHARED_OR_REUSED) |
                               B(RF_LT_EXECUTION_SUBMITTED) | OUTCOMES,
    [RF_LT_RELEASE_SELECTED] = B(RF_LT_RELEASE_REQUESTED) | B(RF_LT_SHARED_OR_REUSED) | OUTCOMES,
    [RF_LT_RELEASE_REQUESTED] = B(RF_LT_NATIVE_ACCEPTED) | B(RF_LT_NATIVE_FAILURE) | OUTCOMES,
    [RF_LT_NATIVE_ACCEPTED] = B(RF_LT_RECONCILED) | OUTCOMES,
    [RF_LT_NATIVE_FAILURE] = B(RF_LT_RELEASE_FAILED) | OUTCOMES,
    [RF_LT_RECONCILED] = B(RF_LT_REFERENCED) | OUTCOMES,
    [RF_LT_RELEASE_FAILED] = B(RF_LT_REFERENCED) | OUTCOMES,
    [RF_LT_FINAL_USE_PROVEN] = 0,
    [RF_LT_INVALIDATED] = 0,
    [RF_LT_SHARED_OR_REUSED] = B(RF_LT_REFERENCED) | OUTCOMES,
    [RF_LT_UNKNOWN] = B(RF_LT_INVALIDATED),
};

_Static_assert(RF_LT_N <= 32, "legal_next holds one bit per state");

static bool state_valid(enum rf_lifetime_state s)
{
    return (unsigned)s < (unsigned)RF_LT_N;
}

/* The invariant for one resource (i < n). */
static bool entry_ok(const struct rf_lifetime *lt, size_t i)
{
    if (!state_valid(lt->states[i]) || lt->errors[i] > 0 || lt->past_errors[i] > 0)
        return false;
    return lt->errors[i] == 0 || lt->states[i] == RF_LT_RELEASE_FAILED;
}

const char *rf_lifetime_state_name(enum rf_lifetime_state s)
{
    return state_valid(s) ? state_names[s] : NULL;
}

bool rf_lifetime_transition_legal(enum rf_lifetime_state from, enum rf_lifetime_state to)
{
    if (!state_valid(from) || !state_valid(to))
        return false;
    return (legal_next[from] & B(to)) != 0;
}

int rf_lifetime_init(struct rf_lifetime *lt, size_t n)
{
    size_t i;

    if (!lt)
        return -EINVAL;
    memset(lt, 0, sizeof(*lt));
    if (n == 0)
        return 0;
    lt->states = calloc(n, sizeof(*lt->states));
    lt->errors = calloc(n, sizeof(*lt->errors));
    lt->past_errors = calloc(n, sizeof(*lt->past_errors));
    if (!lt->states || !lt->errors || !lt->past_errors) {
        rf_lifetime_free(lt);
        return -ENOMEM;
    }
    for (i = 0; i < n; i++)
        lt->states[i] = RF_LT_DISCOVERED;
    lt->n = n;
    assert(rf_lifetime_check(lt));
    return 0;
}

void rf_lifetime_free(struct rf_lifetime *lt)
{
    if (!lt)
        return;
    free(lt->past_errors);
    free(lt->errors);
    free(lt->states);
    memset(lt, 0, sizeof(*lt));
}

int rf_lifetime_advance(struct rf_lifetime *lt, size_t i, enum rf_lifetime_state to)
{
    if (!lt || i >= lt->n)
        return -EINVAL;
    assert(entry_ok(lt, i));
    if (!rf_lifetime_transition_legal(lt->states[i], to))
        return -EINVAL;
    lt->states[i] = to;
    if (to != RF_LT_RELEASE_FAILED && lt->errors[i]) {
        lt->past_errors[i] = lt->errors[i]; /* the history keeps the failure */
        lt->errors[i] = 0;
    }
    assert(entry_ok(lt, i));
    return 0;
}

int rf_lifetime_fail(struct rf_lifetime *lt, size_t i, int err)
{
    if (!lt || i >= lt->n || err >= 0)
        return -EINVAL;
    assert(entry_ok(lt, i));
    if (lt->states[i] != RF_LT_RELEASE_REQUESTED)
        return -EINVAL;
    /* Both steps of the diagram, so the path is the table's, not a shortcut. */
    assert(rf_lifetime_transition_legal(RF_LT_RELEASE_REQUESTED, RF_LT_NATIVE_FAILURE));
    assert(rf_lifetime_transition_legal(RF_LT_NATIVE_FAILURE, RF_LT_RELEASE_FAILED));
    lt->states[i] = RF_LT_RELEASE_FAILED;
    lt->errors[i] = err;
    assert(entry_ok(lt, i));
    return 0;
}

int rf_lifetime_error(const struct rf_lifetime *lt, size_t i)
{
    if (!lt || i >= lt->n)
        return -EINVAL;
    return lt->states[i] == RF_LT_RELEASE_FAILED ? lt->errors[i] : 0;
}

void rf_lifetime_counts(const struct rf_lifetime *lt, uint64_t counts[RF_LT_N])
{
    size_t i;

    memset(counts, 0, RF_LT_N * sizeof(counts[0]));
    if (!lt)
        return;
    assert(rf_lifetime_check(lt));
    for (i = 0; i < lt->n; i++)
        if (state_valid(lt->states[i]))
            counts[lt->states[i]]++;
}

bool rf_lifetime_check(const struct rf_lifetime *lt)
{
    size_t i;

    if (!lt)
        return false;
    if (lt->n > 0 && (!lt->states || !lt->errors || !lt->past_errors))
        return false;
    for (i = 0; i < lt->n; i++)
        if (!entry_ok(lt, i))
            return false;
    return true;
}
