/*
 * Private to src/session (and its unit tests): the session struct and the
 * table of native operations the session calls, so tests drive the whole
 * boundary sequence on a fake native layer without llama.cpp.
 */
#ifndef RAMFORGE_SESSION_INTERNAL_H
#define RAMFORGE_SESSION_INTERNAL_H

#include "ramforge/binding.h"
#include "ramforge/dispatch.h"
#include "ramforge/forge.h"
#include "ramforge/forge_pages.h"
#include "ramforge/forge_prefetch.h"
#include "ramforge/inventory.h"
#include "ramforge/ledger.h"
#include "ramforge/measure.h"
#include "ramforge/lifetime.h"
#include "ramforge/report.h"
#include "ramforge/residency.h"
#include "ramforge/session.h"
#include "ramforge/staging.h"
#include "ramforge/sys.h"
#include "ramforge/timing.h"

/*
 * What the session asks of the native layer. The forge table
 * (rf_session_forge_native) calls forge and the sys probes; tests supply
 * their own. ud is the table's user data.
 */
struct rf_session_native {
    /* The gate's facts now (contract, instance, quiescence, counters). */
    void (*lifetime)(void *ud, struct rf_native_lifetime *out);
    /* A point-in-time sample labelled label; cg receives the cgroup figures. */
    void (*sample)(void *ud, const char *label, struct rf_residency_sample *out,
                   struct rfsys_cgroup_memory *cg);
    /* forge_model_release's contract. */
    int (*release)(void *ud, const struct rf_file_range *ranges, size_t n,
                   enum forge_release_mode mode, struct forge_release_result *out, int *errs);
    /* forge_model_prefetch's contract, default chunk. */
    int (*prefetch)(void *ud, const struct rf_file_range *ranges, size_t n,
                    struct forge_prefetch_result *out);
    /* forge_model_page_source's contract; page_sampler samples pages (residency.h). */
    int (*page_source)(void *ud, struct forge_page_source *out);
    rf_page_sampler_fn page_sampler;
    /* The execution lease around a decode. */
    void (*lease_begin)(void *ud);
    void (*lease_end)(void *ud);
};

/* The model a session is bound to, as plain tables (borrowed for the session's life). */
struct rf_session_model {
    const struct rf_tensor_meta *tensors;
    size_t n_tensors;
    const struct rf_mapping_meta *mappings;
    size_t n_mappings;
    struct forge_model_info info;
    uint64_t instance_id;
    uint64_t page_bytes; /* kernel page size */
    uint64_t load_ns;    /* model load, probe excluded; 0: not loaded by ramforge */
};

/*
 * Creates a session over model with the native table (both borrowed,
 * outliving the session) and runs the after_load boundary. Errors: -EINVAL,
 * -ENOMEM, an inventory error.
 */
int rf_session_create_native(const struct rf_session_model *model,
                             const struct rf_session_native *native, void *ud,
                             struct rf_session_params params, struct rf_session **out);

/*
 * Applies a plan built elsewhere at boundary (a before sample is taken;
 * the after sample is labelled boundary too). For tests of the apply
 * path's refusals. Returns as apply_plan in session.c: 1 (bytes accepted),
 * 0, -RF_ESTALE (another generation), -ENOENT (a tensor not in the
 * inventory), -EPROTO, -ENOMEM, -EINVAL.
 */
int rf_session_apply_plan(struct rf_session *s, const char *boundary, const struct rf_plan *plan);

/* The forge-backed table; ud is the struct forge_model *. */
extern const struct rf_session_native rf_session_forge_native;

#endif
