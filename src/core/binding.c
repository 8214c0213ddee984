/* Binding of the policy manager to a model instance, and the quiescence rule. */
#include "ramforge/core/binding.h"

#include <string.h>

void rf_binding_bind(struct rf_binding *b, uint64_t instance_id)
{
    memset(b, 0, sizeof(*b));
    b->bound = true;
    b->instance_id = instance_id;
}

void rf_binding_observe(struct rf_binding *b, const struct rf_native_lifetime *lt,
                        const char *boundary)
{
    b->observed = true;
    b->last = *lt;
    b->boundary = boundary;
}

/* The rule of both calls; allow_alive waives "zero active contexts". */
static bool may_select(const struct rf_binding *b, bool allow_alive, const char **reason)
{
    const struct rf_native_lifetime *lt = &b->last;
    const char *why = NULL;

    if (!b->bound)
        why = "the manager is not bound to a model instance";
    else if (!b->observed)
        why = "no quiescence observation was recorded";
    else if (!lt->has_contract)
        why = "the native layer exposes no lifetime contract";
    else if (lt->contract_version != RF_CONTRACT_VERSION)
        why = "the native lifetime contract version does not match";
    else if (lt->instance_id != b->instance_id)
        why = "the observation is of another model instance";
    else if (lt->in_flight_contexts > 0)
        why = "contexts are in flight";
    else if (lt->active_contexts > 0 && !allow_alive)
        why = "contexts are alive (the session was not dropped)";
    else if (!lt->quiescent && !allow_alive)
        why = "the model is not quiescent";
    if (reason)
        *reason = why                       ? why
                  : lt->active_contexts > 0 ? "bound, contract 1, contexts alive and none in "
                                              "flight (the idle boundary with contexts alive)"
                                            : "bound, contract 1, observed quiescent";
    return why == NULL;
}

bool rf_binding_may_select(const struct rf_binding *b, const char **reason)
{
    return may_select(b, false, reason);
}

bool rf_binding_may_select_alive(const struct rf_binding *b, const char **reason)
{
    return may_select(b, true, reason);
}
