/*
 * Binding and quiescence: the policy manager binds to one loaded model
 * instance and may select resources for release only when the native
 * contract matches and the model was observed quiescent.
 *
 * The native layer's gate would let a release through with an idle
 * context; ramforge's policy is stricter (spec: "Native lifetime gate"):
 * it requires the native quiescent flag, zero in-flight and zero active
 * contexts, a known contract version and the bound instance. The native
 * release call stays the final enforcement point.
 */
#ifndef RAMFORGE_BINDING_H
#define RAMFORGE_BINDING_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The native lifetime contract version: what forge implements
 * (forge_model_lifetime.contract_version) and what the policy accepts from
 * a native layer (rf_binding_may_select refuses any other). Defined here only.
 */
#define RF_CONTRACT_VERSION 1

/* The native lifetime facts at one observation, as plain values. */
struct rf_native_lifetime {
    bool has_contract; /* false: the native layer exposes no contract */
    uint32_t contract_version;
    uint64_t instance_id;
    bool quiescent;
    uint32_t in_flight_contexts;
    uint32_t active_contexts;
    uint64_t execution_generation;
};

struct rf_binding {
    bool bound;
    uint64_t instance_id;           /* the instance bound to */
    bool observed;                  /* an observation was recorded */
    struct rf_native_lifetime last; /* the last observation */
    const char *boundary;           /* label of the last observation ("after_load", ...) */
};

/* Binds to instance_id; forgets earlier observations. */
void rf_binding_bind(struct rf_binding *b, uint64_t instance_id);

/* Records an observation taken at a boundary (label is borrowed, static). */
void rf_binding_observe(struct rf_binding *b, const struct rf_native_lifetime *lt,
                        const char *boundary);

/*
 * True when resources may be selected for release now. Otherwise false,
 * with *reason (static string) saying why: not bound, no observation,
 * contract missing, contract version mismatch, another instance, not
 * quiescent, contexts in flight, contexts alive.
 */
bool rf_binding_may_select(const struct rf_binding *b, const char **reason);

/*
 * As rf_binding_may_select, for the idle boundary of a program that keeps
 * its contexts (ramforge exec, docs/EXEC.md): contexts may be alive (the
 * native quiescent flag, which counts them, is waived too) but none may
 * be in flight. The native release's gate stays the final enforcement: a
 * decode in flight when the release takes the gate makes it fail with
 * EBUSY; one submitted while the release runs waits for its end.
 */
bool rf_binding_may_select_alive(const struct rf_binding *b, const char **reason);

#ifdef __cplusplus
}
#endif

#endif
