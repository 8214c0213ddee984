/*
 * The session: one residency manager bound to one loaded model instance,
 * running the specification's boundary sequence for any number of
 * operations (see ramforge/session.h for the sequence).
 *
 * Storage: samples, applications and plans of every operation live in
 * arrays that grow (an operation's report is the slice it appended); the
 * per-operation state (admission, staging, dispatch, output, ledger, page
 * snapshot, warnings, timing) lives in `op` and is reset when the next
 * operation opens. Nothing is silently overwritten: a full array grows or
 * the call fails with -ENOMEM.
 *
 * Lifetimes: every transition the session requests must be legal; an
 * illegal one is an error (-EPROTO) that reaches the report, and the
 * invariants are checked after each boundary in debug builds.
 */
#include "session_internal.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/report_json.h"
#include "ramforge/admission.h"
#include "ramforge/error.h"
#include "ramforge/forge_observer.h"
#include "ramforge/policy.h"

#ifndef RAMFORGE_VERSION
#define RAMFORGE_VERSION "unknown"
#endif

/* Per-operation state; reset when the next operation opens. */
struct session_op {
    uint64_t index;       /* 1, 2, ... */
    bool ended;           /* rf_session_operation_end ran */
    uint64_t start_ns;    /* when the operation opened */
    size_t first_sample;  /* its slice of the session's samples */
    size_t first_app;     /* its slice of the session's applications */
    struct rf_report rep; /* the operation's report fields (arrays excluded) */
    struct rf_timing timing;
    struct rf_admission_result admission;
    struct rf_staging_plan staging;
    struct rf_dispatch_summary dispatch;
    struct rf_residency_snapshot snapshot;
    struct forge_page_source page_source; /* of the end-of-operation snapshot */
    struct rf_ledger ledger;
    struct rf_reconciliation recon;
    int32_t *prompt_tokens, *tokens, *verify_tokens; /* owned copies */
    char *text;
    const char **warnings; /* n_warnings, static strings */
    size_t n_warnings, cap_warnings;
    bool has_memory_breakdown;
    uint64_t kv_cache_bytes, compute_bytes;
    uint64_t kv_n_ctx; /* the context size of the KV estimate */
};

struct rf_session {
    struct rf_session_params p;
    const struct rf_session_native *native;
    void *ud;
    struct forge_model *m; /* forge-backed sessions; NULL on a fake native layer */
    bool owns_model;
    struct rf_session_model model;
    struct rf_inventory inv;
    struct rf_lifetime lt;
    struct rf_binding binding;
    uint8_t *exclude;                 /* inv.n: not ReleaseEligible now */
    struct rfsys_cgroup_memory cg;    /* cgroup figures of the last sample */
    uint32_t leases;                  /* leases held through the session */
    uint64_t walked_generation;       /* native execution generation the lifetimes walked */
    uint64_t invalidated;             /* resources of older generations made Invalidated */

    struct rf_residency_sample *samples;
    size_t n_samples, cap_samples;
    struct rf_report_application *apps;
    size_t n_apps, cap_apps;
    struct rf_plan **plans; /* one per application; stable pointers */
    size_t n_plans, cap_plans;

    uint32_t *profile_order; /* from a complete dispatch trace; NULL: none */
    size_t n_profile_order;

    struct session_op op;
    uint64_t n_ended;
    struct rf_report view; /* rf_session_report's assembly */
};

/* Grows *arr (elements of size elem) to hold need; 0 or -ENOMEM. */
static int grow(void **arr, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap * 2 : 8;
    while (n < need)
        n *= 2;
    size_t bytes;
    if (__builtin_mul_overflow(n, elem, &bytes))
        return -ENOMEM;
    void *p = realloc(*arr, bytes);
    if (!p)
        return -ENOMEM;
    *arr = p;
    *cap = n;
    return 0;
}

struct rf_session_params rf_session_default_params(void)
{
    struct rf_session_params p = {
        .policy = RF_POLICY_OBSERVE,
        .release_mode = FORGE_RELEASE_DONTNEED,
        .release_dead_file_pages = true,
        .page_budget_pages = RF_RESIDENCY_DEFAULT_BUDGET_PAGES,
        .probe_access = true,
    };
    return p;
}

static void add_warning(struct rf_session *s, const char *w)
{
    struct session_op *op = &s->op;
    for (size_t i = 0; i < op->n_warnings; i++)
        if (op->warnings[i] == w)
            return;
    if (grow((void **)&op->warnings, &op->cap_warnings, op->n_warnings + 1,
             sizeof(*op->warnings)) == 0)
        op->warnings[op->n_warnings++] = w;
}

/* ------------------------------------------------------------------ operations */

static void op_free(struct session_op *op)
{
    rf_staging_plan_free(&op->staging);
    rf_dispatch_summary_free(&op->dispatch);
    rf_residency_snapshot_free(&op->snapshot);
    free(op->prompt_tokens);
    free(op->tokens);
    free(op->verify_tokens);
    free(op->text);
    free(op->warnings);
}

/* The report fields every operation starts from: identity and policy. */
static void op_identity(struct rf_session *s, struct rf_report *r)
{
    const struct rf_session_params *p = &s->p;
    r->ramforge_version = RAMFORGE_VERSION;
    r->llama_cpp_version = s->m ? forge_llama_version() : "none (native layer under test)";
    r->model_path = s->model.info.path;
    r->model_desc = s->model.info.desc;
    r->model_file_size_bytes = s->model.info.file_size_bytes;
    r->model_native_size_bytes = s->model.info.size_bytes;
    r->model_n_params = s->model.info.n_params;
    r->instance_id = s->model.instance_id;
    r->access_probed = s->model.info.access_probed;
    r->policy = rf_policy_name(p->policy);
    r->policy_plans = rf_policy_plans(p->policy);
    r->policy_mutates = rf_policy_mutates(p->policy);
    r->has_target = p->has_target;
    r->target_bytes = p->target_bytes;
    r->reserve_bytes = p->reserve_bytes;
    r->release_dead_file_pages = p->release_dead_file_pages;
    r->release_mode = !r->policy_mutates                        ? NULL
                      : p->release_mode == FORGE_RELEASE_PAGEOUT ? "pageout"
                                                                 : "dontneed";
    if (p->policy == RF_POLICY_OFF) {
        r->not_built_reason = "residency policy off: no inventory, ledger or sample was taken";
        r->plan_reason = "residency policy off";
        r->admission_reason = "residency policy off";
        r->page_snapshot_reason = "residency policy off";
        return;
    }
    r->inventory = &s->inv;
    r->lifetime = &s->lt;
}

/* Opens the next operation when the current one has ended. */
static void op_open(struct rf_session *s)
{
    struct session_op *op = &s->op;
    if (op->index && !op->ended)
        return;
    uint64_t index = op->index + 1;
    op_free(op);
    memset(op, 0, sizeof(*op));
    op->index = index;
    op->start_ns = rf_now_ns();
    op->first_sample = s->n_samples;
    op->first_app = s->n_apps;
    rf_timing_init(&op->timing);
    rf_staging_plan_init(&op->staging);
    rf_dispatch_summary_init(&op->dispatch);
    rf_residency_snapshot_init(&op->snapshot);
    rf_ledger_init(&op->ledger);
    memset(&op->rep, 0, sizeof(op->rep));
    op_identity(s, &op->rep);
    op->rep.invalidated_resources = s->invalidated;
    op->rep.timing = &op->timing;
}

/* ------------------------------------------------------------------ samples */

/* Takes the next sample; returns its index or -ENOMEM. */
static long take_sample(struct rf_session *s, const char *label)
{
    if (grow((void **)&s->samples, &s->cap_samples, s->n_samples + 1, sizeof(*s->samples)) < 0)
        return -ENOMEM;
    struct rf_residency_sample *smp = &s->samples[s->n_samples];
    uint64_t t0 = rf_now_ns();
    memset(smp, 0, sizeof(*smp));
    s->native->sample(s->ud, label, smp, &s->cg);
    smp->label = label;
    smp->taken = true;
    rf_timing_add(&s->op.timing, RF_TIMER_OBSERVATION, rf_now_ns() - t0);
    return (long)s->n_samples++;
}

static const struct rf_residency_sample *last_sample(const struct rf_session *s)
{
    return s->n_samples ? &s->samples[s->n_samples - 1] : NULL;
}

static struct rf_recon_value delta(bool has_a, uint64_t after, bool has_b, uint64_t before)
{
    struct rf_recon_value v = {false, 0};
    if (has_a && has_b && after <= INT64_MAX && before <= INT64_MAX) {
        v.has_value = true;
        v.value = (int64_t)after - (int64_t)before;
    }
    return v;
}

/* ------------------------------------------------------------------ lifetimes */

/* Advances resource i; an illegal transition is a bug, reported as -EPROTO. */
static int lt_move(struct rf_session *s, size_t i, enum rf_lifetime_state to)
{
    if (rf_lifetime_advance(&s->lt, i, to) == 0)
        return 0;
    add_warning(s, "an illegal resource-lifetime transition was refused (a ramforge bug): "
                   "lifetime counts may be incomplete");
    rf_log(RF_LOG_ERROR, "session: illegal lifetime transition of resource %zu: %s -> %s", i,
           rf_lifetime_state_name(s->lt.states[i]), rf_lifetime_state_name(to));
    return -EPROTO;
}

/*
 * Walks every resource the graph reads through one execution that ended
 * at a dropped context, up to OperationBoundarySynchronized, and then the
 * release-eligible ones to ReleaseEligible. Resources with no lifetime
 * (Unknown, Invalidated) stay; released file pages of repacked weights are
 * never referenced again.
 */
static int lt_execution_boundary(struct rf_session *s)
{
    int rc = 0;
    for (size_t i = 0; i < s->lt.n && rc == 0; i++) {
        enum rf_lifetime_state st = s->lt.states[i];
        const struct rf_inventory_entry *e = &s->inv.entries[i];
        switch (st) {
        case RF_LT_UNKNOWN:
        case RF_LT_INVALIDATED:
        case RF_LT_FINAL_USE_PROVEN:
            continue;
        case RF_LT_RECONCILED:
            if (e->access == RF_ACCESS_ANONYMOUS)
                continue;
            __attribute__((fallthrough)); /* a later session re-faults its pages */
        case RF_LT_RELEASE_FAILED:
        case RF_LT_SHARED_OR_REUSED:
            rc = lt_move(s, i, RF_LT_REFERENCED);
            break;
        default:
            break;
        }
        if (rc == 0)
            rc = lt_move(s, i, RF_LT_EXECUTION_SUBMITTED);
        if (rc == 0)
            rc = lt_move(s, i, RF_LT_EXECUTION_COMPLETED);
        if (rc == 0)
            rc = lt_move(s, i, RF_LT_OPERATION_BOUNDARY_SYNCHRONIZED);
        if (rc == 0 && (e->eligibility == RF_ELIGIBLE ||
                        e->eligibility == RF_ELIGIBLE_DEAD_FILE_PAGES))
            rc = lt_move(s, i, RF_LT_RELEASE_ELIGIBLE);
    }
    assert(rf_lifetime_check(&s->lt));
    return rc;
}

/* After load: Discovered -> Owned -> Referenced (the probe saw it) or Unknown. */
static int lt_after_load(struct rf_session *s)
{
    int rc = 0;
    for (size_t i = 0; i < s->lt.n && rc == 0; i++) {
        enum rf_weight_access a = s->inv.entries[i].access;
        rc = lt_move(s, i, RF_LT_OWNED);
        if (rc == 0)
            rc = lt_move(s, i,
                         a == RF_ACCESS_FILE_BACKED || a == RF_ACCESS_ANONYMOUS
                             ? RF_LT_REFERENCED
                             : RF_LT_UNKNOWN); /* not referenced by the observed graph */
    }
    return rc ? rc : lt_execution_boundary(s);
}

/* ------------------------------------------------------------------ native facts */

/* Records the native lifetime facts at a boundary; returns whether selection may proceed. */
static bool observe_native(struct rf_session *s, const char *boundary, const char **why)
{
    struct rf_native_lifetime nl;
    s->native->lifetime(s->ud, &nl);
    rf_binding_observe(&s->binding, &nl, boundary);
    s->op.rep.has_native = true;
    s->op.rep.native = nl;
    s->op.rep.native_boundary = boundary;
    return rf_binding_may_select(&s->binding, why);
}

/* ------------------------------------------------------------------ release */

/* Appends an empty application with its own plan; NULL on -ENOMEM. */
static struct rf_report_application *new_application(struct rf_session *s, const char *boundary)
{
    struct rf_plan *plan = calloc(1, sizeof(*plan));
    if (!plan || grow((void **)&s->apps, &s->cap_apps, s->n_apps + 1, sizeof(*s->apps)) < 0 ||
        grow((void **)&s->plans, &s->cap_plans, s->n_plans + 1, sizeof(*s->plans)) < 0) {
        free(plan);
        return NULL;
    }
    rf_plan_init(plan);
    s->plans[s->n_plans++] = plan;
    struct rf_report_application *app = &s->apps[s->n_apps++];
    memset(app, 0, sizeof(*app));
    app->boundary = boundary;
    app->plan = plan;
    return app;
}

/* Whether any page of entry e is in one of the plan's release ranges. */
static bool entry_released(const struct rf_plan *plan, const struct rf_inventory_entry *e)
{
    for (size_t r = 0; r < plan->n_release; r++)
        if (plan->release[r].mapping_index == e->mapping_index &&
            rf_page_range_pages(rf_page_range_intersect(plan->release[r].pages, e->pages)) > 0)
            return true;
    return false;
}

static int apply_plan(struct rf_session *s, struct rf_report_application *app,
                      const struct rf_plan *plan, size_t before_i, const char *after_label);

/*
 * Plans at a boundary and, for a mutating policy observed quiescent,
 * applies the plan (apply_plan). Returns 1 when bytes were accepted, 0
 * when not, or a negative error.
 */
static int plan_and_apply(struct rf_session *s, const char *boundary, bool dead_pages_only,
                          size_t before_i, const char *after_label)
{
    const char *why = NULL;
    bool may = observe_native(s, boundary, &why);
    struct rf_plan_params pp = rf_plan_default_params();
    const struct rf_residency_sample *before = &s->samples[before_i];
    uint64_t t0 = rf_now_ns();
    int rc;

    struct rf_report_application *app = new_application(s, boundary);
    if (!app)
        return -ENOMEM;
    struct rf_plan *plan = (struct rf_plan *)app->plan;
    for (size_t i = 0; i < s->lt.n; i++)
        s->exclude[i] = s->lt.states[i] != RF_LT_RELEASE_ELIGIBLE;
    pp.exclude = s->exclude;
    pp.profile_order = s->profile_order;
    pp.n_profile_order = s->n_profile_order;
    pp.profile = s->p.policy;
    pp.has_target = s->p.has_target;
    pp.target_bytes = s->p.target_bytes;
    pp.reserve_bytes = s->p.reserve_bytes;
    pp.has_mapping_resident = before->has_mapping;
    pp.mapping_resident_bytes = before->mapping_rss_bytes;
    pp.binding_ok = may;
    pp.binding_reason = why;
    pp.dead_pages_only = dead_pages_only;
    rc = rf_plan_build(&s->inv, &pp, plan);
    rf_timing_add(&s->op.timing, RF_TIMER_PLANNING, rf_now_ns() - t0);
    if (rc < 0)
        return rc;
    if (!s->op.rep.plan || plan->n_selected > 0) {
        s->op.rep.plan = plan;
        s->op.rep.plan_boundary = boundary;
    }
    if (!rf_policy_mutates(s->p.policy)) {
        app->refused_reason = "the policy does not mutate";
        return 0;
    }
    if (!may) {
        app->refused_reason = why;
        return 0;
    }
    return apply_plan(s, app, plan, before_i, after_label);
}

int rf_session_apply_plan(struct rf_session *s, const char *boundary, const struct rf_plan *plan)
{
    if (!s || !boundary || !plan)
        return -EINVAL;
    op_open(s);
    long before = take_sample(s, boundary);
    struct rf_report_application *app = before < 0 ? NULL : new_application(s, boundary);
    if (!app)
        return -ENOMEM;
    app->plan = plan;
    return apply_plan(s, app, plan, (size_t)before, boundary);
}

/*
 * Applies plan (whose application is app) under the gate: lifetimes
 * ReleaseEligible -> ReleaseSelected -> ReleaseRequested -> NativeAccepted
 * -> Reconciled, or NativeFailure -> ReleaseFailed with the errno of the
 * refused range; a selected resource whose pages were all protected ends
 * SharedOrReused. Returns 1 when bytes were accepted, 0 when not, -RF_ESTALE
 * (a plan of another generation), -ENOENT (a selected tensor not in the
 * inventory), -EPROTO (an illegal transition), -ENOMEM.
 */
static int apply_plan(struct rf_session *s, struct rf_report_application *app,
                      const struct rf_plan *plan, size_t before_i, const char *after_label)
{
    const struct rf_residency_sample *before;
    int rc;

    if (plan->generation != s->inv.generation) {
        app->refused_reason = "the plan is of another inventory generation";
        add_warning(s, "a release plan of another inventory generation was refused");
        return -RF_ESTALE;
    }
    if (plan->n_selected == 0) {
        app->refused_reason = "the plan selected nothing";
        return 0;
    }

    /* plan->selected holds tensor indices: turn them into inventory positions. */
    size_t *pos = calloc(plan->n_selected, sizeof(*pos));
    int *errs = calloc(plan->n_release ? plan->n_release : 1, sizeof(int));
    size_t n_requested = 0;
    if (!pos || !errs) {
        rc = -ENOMEM;
        goto out;
    }
    for (size_t k = 0; k < plan->n_selected; k++) {
        const struct rf_inventory_entry *e = NULL;
        struct rf_resource_key key = {plan->generation, plan->selected[k]};
        rc = rf_inventory_lookup(&s->inv, key, &e);
        if (rc < 0) {
            app->refused_reason = "a selected tensor is not in the inventory";
            add_warning(s, "a release plan named a tensor the inventory does not hold: the "
                           "release was refused");
            goto out;
        }
        pos[k] = (size_t)(e - s->inv.entries);
        rc = lt_move(s, pos[k], RF_LT_RELEASE_SELECTED);
        if (rc == 0)
            rc = entry_released(plan, e) ? lt_move(s, pos[k], RF_LT_RELEASE_REQUESTED)
                                         : lt_move(s, pos[k], RF_LT_SHARED_OR_REUSED);
        if (rc < 0)
            goto out;
        n_requested += s->lt.states[pos[k]] == RF_LT_RELEASE_REQUESTED;
    }
    if (n_requested == 0) {
        app->refused_reason = "every selected page is shared with an unselected tensor";
        goto out;
    }
    struct forge_release_result res;
    rc = s->native->release(s->ud, plan->release, plan->n_release, s->p.release_mode, &res, errs);
    if (rc < 0) {
        /* The gate refused (a lease in flight): nothing was advised. */
        app->refused_reason = rc == -EBUSY ? "the execution gate was busy" : rf_strerror(rc);
        for (size_t k = 0; k < plan->n_selected; k++)
            if (s->lt.states[pos[k]] == RF_LT_RELEASE_REQUESTED)
                rf_lifetime_fail(&s->lt, pos[k], rc);
        rc = 0;
        goto out;
    }
    app->attempted = true;
    app->requested_bytes = res.requested_bytes;
    app->accepted_bytes = res.accepted_bytes;
    app->n_failed = res.n_failed;
    app->protected_bytes = res.protected_bytes;
    app->first_error = res.first_error;
    for (size_t k = 0; k < plan->n_selected && rc == 0; k++) {
        size_t i = pos[k];
        int err = 0;
        if (s->lt.states[i] != RF_LT_RELEASE_REQUESTED)
            continue;
        for (size_t r = 0; r < plan->n_release && !err; r++) {
            struct rf_page_range hit =
                rf_page_range_intersect(plan->release[r].pages, s->inv.entries[i].pages);
            if (errs[r] && plan->release[r].mapping_index == s->inv.entries[i].mapping_index &&
                rf_page_range_pages(hit) > 0)
                err = errs[r];
        }
        rc = err ? rf_lifetime_fail(&s->lt, i, err) : lt_move(s, i, RF_LT_NATIVE_ACCEPTED);
    }
    if (rc < 0)
        goto out;
    long after_i = take_sample(s, after_label);
    if (after_i < 0) {
        rc = (int)after_i;
        goto out;
    }
    before = &s->samples[before_i];
    const struct rf_residency_sample *after = &s->samples[after_i];
    app->mapping_delta = delta(after->has_mapping, after->mapping_rss_bytes, before->has_mapping,
                               before->mapping_rss_bytes);
    app->rss_delta = delta(after->has_process_rss, after->process_rss_bytes,
                           before->has_process_rss, before->process_rss_bytes);
    app->cgroup_delta = delta(after->has_cgroup_current, after->cgroup_current_bytes,
                              before->has_cgroup_current, before->cgroup_current_bytes);
    for (size_t k = 0; k < plan->n_selected && rc == 0; k++)
        if (s->lt.states[pos[k]] == RF_LT_NATIVE_ACCEPTED)
            rc = lt_move(s, pos[k], RF_LT_RECONCILED);
    if (rc == 0)
        rc = app->accepted_bytes > 0 ? 1 : 0;
out:
    free(pos);
    free(errs);
    assert(rf_lifetime_check(&s->lt));
    return rc;
}

/*
 * A boundary after a session: plan and release, then re-plan from the new
 * measurement (released resources excluded) while the measured mapping RSS
 * is still above the soft target and the last round released something:
 * the plan's estimate assumes selected pages were resident, the
 * measurement decides.
 */
static int release_rounds(struct rf_session *s, const char *boundary, const char *after_label)
{
    long before = take_sample(s, boundary);
    if (before < 0)
        return (int)before;
    for (int round = 0; round < RF_SESSION_RELEASE_ROUNDS; round++) {
        int rc = plan_and_apply(s, boundary, false, (size_t)before, after_label);
        if (rc <= 0)
            return rc;
        const struct rf_residency_sample *now = last_sample(s);
        const struct rf_plan *p = s->apps[s->n_apps - 1].plan;
        if (!p->has_soft_target || !now->has_mapping ||
            now->mapping_rss_bytes <= p->soft_target_bytes)
            return 0;
        before = (long)(s->n_samples - 1);
    }
    return 0;
}

/* ------------------------------------------------------------------ create */

static void session_free_arrays(struct rf_session *s)
{
    for (size_t i = 0; i < s->n_plans; i++) {
        rf_plan_free(s->plans[i]);
        free(s->plans[i]);
    }
    free(s->plans);
    free(s->apps);
    free(s->samples);
}

void rf_session_free(struct rf_session *s)
{
    if (!s)
        return;
    op_free(&s->op);
    session_free_arrays(s);
    free(s->exclude);
    free(s->profile_order);
    rf_lifetime_free(&s->lt);
    rf_inventory_free(&s->inv);
    if (s->owns_model)
        forge_model_free(s->m);
    free(s);
}

static bool params_valid(const struct rf_session_params *p)
{
    if (!rf_policy_name(p->policy))
        return false;
    if (rf_policy_requires_target(p->policy) && !p->has_target)
        return false;
    if (p->has_target && p->reserve_bytes >= p->target_bytes)
        return false;
    /* Reports carry byte counts as JSON integers. */
    if (p->target_bytes > (uint64_t)INT64_MAX || p->reserve_bytes > (uint64_t)INT64_MAX)
        return false;
    return p->release_mode == FORGE_RELEASE_DONTNEED || p->release_mode == FORGE_RELEASE_PAGEOUT;
}

/* The after_load boundary: no context exists. */
static int after_load(struct rf_session *s)
{
    uint64_t t0 = rf_now_ns();
    int rc = rf_inventory_build(s->model.tensors, s->model.n_tensors, s->model.mappings,
                                s->model.n_mappings, s->model.page_bytes, 1, &s->inv);
    if (rc == 0)
        rc = rf_lifetime_init(&s->lt, s->inv.n);
    if (rc == 0 && !(s->exclude = calloc(s->inv.n ? s->inv.n : 1, 1)))
        rc = -ENOMEM;
    rf_timing_add(&s->op.timing, RF_TIMER_PLANNING, rf_now_ns() - t0);
    if (rc < 0)
        return rc;
    rc = lt_after_load(s);
    if (rc < 0)
        return rc;
    rf_binding_bind(&s->binding, s->model.instance_id);
    struct rf_native_lifetime nl;
    s->native->lifetime(s->ud, &nl);
    s->walked_generation = nl.execution_generation; /* the probe's execution, walked above */
    long loaded = take_sample(s, "after_load");
    if (loaded < 0)
        return (int)loaded;
    if (rf_policy_mutates(s->p.policy) && s->p.release_dead_file_pages) {
        rc = plan_and_apply(s, "after_load", true, (size_t)loaded, "after_load_release");
        return rc < 0 ? rc : 0;
    }
    const char *why;
    observe_native(s, "after_load", &why);
    return 0;
}

/* Creates the session; m (may be NULL) is owned when owns, also on error. */
static int session_create(const struct rf_session_model *model,
                          const struct rf_session_native *native, void *ud,
                          struct rf_session_params params, struct forge_model *m, bool owns,
                          struct rf_session **out)
{
    if (!out)
        return -EINVAL;
    *out = NULL;
    bool ok = model && native && params_valid(&params);
    struct rf_session *s = ok ? calloc(1, sizeof(*s)) : NULL;
    if (!s) {
        if (owns)
            forge_model_free(m);
        return ok ? -ENOMEM : -EINVAL;
    }
    s->m = m;
    s->owns_model = owns;
    s->p = params;
    if (!s->p.entry_ns)
        s->p.entry_ns = rf_now_ns();
    s->native = native;
    s->ud = ud;
    s->model = *model;
    rf_inventory_init(&s->inv);
    op_open(s);
    s->op.start_ns = s->p.entry_ns;
    if (model->load_ns)
        rf_timing_set(&s->op.timing, RF_TIMER_MODEL_LOAD, model->load_ns);
    if (params.policy != RF_POLICY_OFF) {
        rf_timing_add(&s->op.timing, RF_TIMER_OBSERVATION, model->info.probe_ns);
        int rc = after_load(s);
        if (rc < 0) {
            rf_session_free(s);
            return rc;
        }
    }
    *out = s;
    return 0;
}

int rf_session_create_native(const struct rf_session_model *model,
                             const struct rf_session_native *native, void *ud,
                             struct rf_session_params params, struct rf_session **out)
{
    return session_create(model, native, ud, params, NULL, false, out);
}

/* Session over a forge model; takes ownership of m when owns. */
static int create_forge(struct forge_model *m, bool owns, uint64_t load_ns,
                        struct rf_session_params params, struct rf_session **out,
                        char err[FORGE_ERR_MAX])
{
    struct rf_session_model model = {0};
    model.tensors = forge_model_tensors(m, &model.n_tensors);
    model.mappings = forge_model_mappings(m, &model.n_mappings);
    forge_model_get_info(m, &model.info);
    model.instance_id = forge_model_instance_id(m);
    model.page_bytes = (uint64_t)sysconf(_SC_PAGESIZE);
    model.load_ns = load_ns;
    int rc = session_create(&model, &rf_session_forge_native, m, params, m, owns, out);
    if (rc < 0)
        snprintf(err, FORGE_ERR_MAX, "%s: cannot start the session: %s", model.info.path,
                 rf_strerror(rc));
    return rc;
}

int rf_session_load(const char *path, const struct forge_model_params *mp,
                    struct rf_session_params params, struct rf_session **out,
                    char err[FORGE_ERR_MAX])
{
    struct forge_model_params fp = mp ? *mp : forge_model_default_params();
    struct forge_model *m;

    if (!out || !path || !params_valid(&params)) {
        snprintf(err, FORGE_ERR_MAX, "invalid session parameters");
        return -EINVAL;
    }
    if (!mp) {
        fp.probe_access = params.probe_access && params.policy != RF_POLICY_OFF;
        fp.n_threads = params.n_threads;
    }
    uint64_t t0 = rf_now_ns();
    int rc = forge_model_load(path, &fp, &m, err);
    if (rc < 0)
        return rc;
    struct forge_model_info info;
    forge_model_get_info(m, &info);
    return create_forge(m, true, rf_now_ns() - t0 - info.probe_ns, params, out, err);
}

int rf_session_wrap(struct llama_model *model, const char *path, struct rf_session_params params,
                    struct rf_session **out, char err[FORGE_ERR_MAX])
{
    struct forge_model_params fp = forge_model_default_params();
    struct forge_model *m;

    if (!out || !path || !model || !params_valid(&params)) {
        snprintf(err, FORGE_ERR_MAX, "invalid session parameters");
        return -EINVAL;
    }
    fp.probe_access = params.probe_access && params.policy != RF_POLICY_OFF;
    fp.n_threads = params.n_threads;
    int rc = forge_model_wrap(model, path, &fp, &m, err);
    if (rc < 0)
        return rc;
    return create_forge(m, true, 0, params, out, err);
}

struct forge_model *rf_session_forge_model(struct rf_session *s)
{
    return s ? s->m : NULL;
}

uint64_t rf_session_operations(const struct rf_session *s)
{
    return s ? s->n_ended : 0;
}

int rf_session_refresh(struct rf_session *s)
{
    if (!s || s->p.policy == RF_POLICY_OFF)
        return -EINVAL;
    op_open(s);
    struct rf_inventory inv;
    struct rf_lifetime lt;
    rf_inventory_init(&inv);
    int rc = rf_inventory_build(s->model.tensors, s->model.n_tensors, s->model.mappings,
                                s->model.n_mappings, s->model.page_bytes, s->inv.generation + 1,
                                &inv);
    if (rc == 0)
        rc = rf_lifetime_init(&lt, inv.n);
    if (rc < 0) {
        rf_inventory_free(&inv);
        return rc;
    }
    /* Every attempt of the old generation is stale. */
    for (size_t i = 0; i < s->lt.n; i++) {
        enum rf_lifetime_state st = s->lt.states[i];
        if (st != RF_LT_INVALIDATED && st != RF_LT_FINAL_USE_PROVEN &&
            lt_move(s, i, RF_LT_INVALIDATED) == 0)
            s->invalidated++;
    }
    rf_lifetime_free(&s->lt);
    rf_inventory_free(&s->inv);
    s->inv = inv;
    s->lt = lt;
    uint8_t *ex = realloc(s->exclude, s->inv.n ? s->inv.n : 1);
    if (!ex)
        return -ENOMEM;
    s->exclude = ex;
    free(s->profile_order); /* a profile of the old generation */
    s->profile_order = NULL;
    s->n_profile_order = 0;
    s->op.rep.invalidated_resources = s->invalidated;
    return lt_after_load(s);
}

/* ------------------------------------------------------------------ leases */

int rf_session_lease_begin(struct rf_session *s)
{
    if (!s)
        return -EINVAL;
    s->native->lease_begin(s->ud);
    __atomic_add_fetch(&s->leases, 1, __ATOMIC_ACQ_REL);
    return 0;
}

void rf_session_lease_end(struct rf_session *s)
{
    if (!s)
        return;
    uint32_t held = __atomic_load_n(&s->leases, __ATOMIC_ACQUIRE);
    /* An end without a begin is ignored: the gate's counters stay consistent. */
    while (held > 0 && !__atomic_compare_exchange_n(&s->leases, &held, held - 1, false,
                                                    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        ;
    if (held > 0)
        s->native->lease_end(s->ud);
}

/* ------------------------------------------------------------------ admission */

/* llama.cpp pads the context size to a multiple of 256 cells. */
#define RF_KV_CELL_PAD 256u

/* KV cache bytes estimated from the hyperparameters: K and V, f16, n_ctx cells. */
static bool estimate_kv(const struct forge_model_info *info, uint64_t n_ctx, uint64_t *out)
{
    if (info->n_head <= 0 || info->n_head_kv <= 0 || info->n_layer <= 0 || info->n_embd <= 0)
        return false;
    uint64_t per_token = (uint64_t)info->n_embd / (uint64_t)info->n_head *
                         (uint64_t)info->n_head_kv * 2 /* K, V */ * 2 /* f16 */;
    return !__builtin_mul_overflow(per_token, (uint64_t)info->n_layer, out) &&
           !__builtin_mul_overflow(*out, n_ctx, out);
}

/* Context cells of a request: n_ctx, else prompt + n_predict; padded like llama.cpp. */
static uint64_t request_cells(const struct rf_operation_request *r)
{
    uint64_t n = r->n_ctx ? r->n_ctx : (uint64_t)(r->n_prompt ? r->n_prompt : 64) + r->n_predict;
    return (n + RF_KV_CELL_PAD - 1) / RF_KV_CELL_PAD * RF_KV_CELL_PAD;
}

int rf_session_admit(struct rf_session *s, const struct rf_operation_request *request,
                     struct rf_admission_result *out)
{
    if (!s || !request || s->p.policy == RF_POLICY_OFF)
        return -EINVAL;
    op_open(s);
    const struct rf_residency_sample *now = last_sample(s);
    struct rf_admission_input in;
    uint64_t kv = 0, req;
    bool has_kv = estimate_kv(&s->model.info, request_cells(request), &kv);
    const char *why;

    memset(&in, 0, sizeof(in));
    in.has_request = now && now->has_process_rss && has_kv &&
                     !__builtin_add_overflow(now->process_rss_bytes, kv, &req);
    in.request_bytes = in.has_request ? req : 0;
    in.has_target = s->p.has_target;
    in.target_bytes = s->p.target_bytes;
    in.reserve_bytes = s->p.reserve_bytes;
    in.has_hard_limit = s->cg.has_limit;
    in.hard_unlimited = s->cg.limit_unlimited;
    in.hard_limit_bytes = s->cg.limit_bytes;
    in.hard_limit_source = s->cg.limit_source[0] ? s->cg.limit_source : NULL;
    if (now) {
        in.has_cgroup_current = now->has_cgroup_current;
        in.cgroup_current_bytes = now->cgroup_current_bytes;
        in.has_process_rss = now->has_process_rss;
        in.process_rss_bytes = now->process_rss_bytes;
    }
    /* Reclaimable only with a matching contract observed quiescent. */
    if (rf_policy_mutates(s->p.policy) && rf_binding_may_select(&s->binding, &why)) {
        in.has_reclaimable = true;
        in.reclaimable_bytes = s->inv.totals.unique_reclaimable_bytes;
    }
    if (now && now->has_process_rss && now->has_mapping &&
        now->process_rss_bytes >= now->mapping_rss_bytes) {
        in.has_non_file = true;
        in.non_file_bytes = now->process_rss_bytes - now->mapping_rss_bytes + kv;
    }
    in.unknown_components[in.n_unknown++] = "GraphScratch";
    in.unknown_components[in.n_unknown++] = "Runtime";
    int rc = rf_admission_decide(&in, &s->op.admission);
    if (rc < 0) {
        s->op.rep.admission_reason = "admission could not decide (invalid input)";
        return rc;
    }
    s->op.rep.admission = &s->op.admission;
    if (s->op.admission.outcome == RF_ADMIT_WARNING)
        add_warning(s, "the run exceeds the soft target (see admission.reason)");
    if (out)
        *out = s->op.admission;
    return 0;
}

/* ------------------------------------------------------------------ staging */

/*
 * Pages of the staged tensors (the partial one included) in the page
 * cache (mincore), and how many pages of them were sampled.
 */
static void staged_cache(struct rf_session *s, struct rf_recon_value *cached,
                         struct rf_recon_value *sampled)
{
    const struct rf_staging_plan *sp = &s->op.staging;
    struct rf_residency_params rp = rf_residency_default_params();
    struct rf_residency_snapshot snap;
    struct forge_page_source src;
    uint32_t *targets = calloc(sp->n_staged + 1, sizeof(uint32_t));

    rf_residency_snapshot_init(&snap);
    if (!targets || s->native->page_source(s->ud, &src) < 0) {
        free(targets);
        return;
    }
    memcpy(targets, sp->staged, sp->n_staged * sizeof(uint32_t));
    size_t n_targets = sp->n_staged;
    if (sp->has_partial)
        targets[n_targets++] = sp->partial_tensor_index;
    /* The targeted population comes first: this budget covers it and little more. */
    uint64_t pages = 0;
    for (size_t k = 0; k < n_targets; k++) {
        const struct rf_inventory_entry *e = NULL;
        struct rf_resource_key key = {s->inv.generation, targets[k]};
        if (rf_inventory_lookup(&s->inv, key, &e) == 0)
            pages += rf_page_range_pages(e->pages);
    }
    rp.page_budget_pages = pages;
    rp.sample = s->native->page_sampler;
    rp.sample_ud = s->ud;
    rp.source = src.source;
    rp.targeted = targets;
    rp.n_targeted = n_targets;
    if (rf_residency_snapshot_take(&s->inv, &rp, &snap) == 0 &&
        snap.coverage.targeted.resident_pages <= INT64_MAX) {
        cached->has_value = sampled->has_value = true;
        cached->value = (int64_t)snap.coverage.targeted.resident_pages;
        sampled->value = (int64_t)(snap.coverage.targeted.resident_pages +
                                   snap.coverage.targeted.nonresident_pages);
    }
    rf_residency_snapshot_free(&snap);
    free(targets);
}

int rf_session_stage(struct rf_session *s, uint64_t budget_bytes)
{
    if (!s || s->p.policy == RF_POLICY_OFF || budget_bytes == 0)
        return -EINVAL;
    op_open(s);
    struct rf_staging_params sp = rf_staging_default_params();
    struct forge_prefetch_result res;
    struct rf_report *r = &s->op.rep;
    uint64_t t0 = rf_now_ns();
    int rc;

    sp.budget_bytes = budget_bytes;
    rc = rf_staging_plan_build(&s->inv, &sp, &s->op.staging);
    if (rc < 0)
        return rc;
    r->staging = &s->op.staging;
    if (s->op.staging.n_ranges == 0) {
        r->staging_refused_reason = "the staging plan selected nothing";
        rf_timing_add(&s->op.timing, RF_TIMER_STAGING, rf_now_ns() - t0);
        return 0;
    }
    staged_cache(s, &r->staging_cached_before, &r->staging_sampled_pages);
    if (!s->n_samples && take_sample(s, "before_staging") < 0)
        return -ENOMEM;
    size_t before_i = s->n_samples - 1;
    rc = s->native->prefetch(s->ud, s->op.staging.ranges, s->op.staging.n_ranges, &res);
    if (rc < 0) {
        r->staging_refused_reason = rc == -EBUSY ? "the execution gate was busy" : rf_strerror(rc);
    } else {
        r->staging_attempted = true;
        r->staging_accepted_bytes = res.accepted_bytes;
        r->staging_chunk_bytes = res.chunk_bytes;
        r->staging_calls = res.n_calls;
        r->staging_failed_calls = res.n_failed_calls;
        r->staging_error = res.first_error;
    }
    rf_timing_add(&s->op.timing, RF_TIMER_STAGING, rf_now_ns() - t0);
    staged_cache(s, &r->staging_cached_after, &r->staging_sampled_pages);
    long after_i = take_sample(s, "after_staging");
    if (after_i < 0)
        return (int)after_i;
    const struct rf_residency_sample *before = &s->samples[before_i], *after = &s->samples[after_i];
    r->staging_mapping_delta = delta(after->has_mapping, after->mapping_rss_bytes,
                                     before->has_mapping, before->mapping_rss_bytes);
    return 0;
}

/* ------------------------------------------------------------------ boundaries */

int rf_session_boundary(struct rf_session *s, enum rf_boundary b)
{
    static const char *const labels[][2] = {
        [RF_BOUNDARY_AFTER_SESSION] = {"after_session", "after_release"},
        [RF_BOUNDARY_AFTER_VERIFY] = {"after_verify", "after_verify_release"},
        [RF_BOUNDARY_IDLE] = {"idle", "idle_release"},
    };
    if (!s || s->p.policy == RF_POLICY_OFF)
        return -EINVAL;
    op_open(s);
    switch (b) {
    case RF_BOUNDARY_END_OF_SESSION: {
        long i = take_sample(s, "end_of_session");
        return i < 0 ? (int)i : 0;
    }
    case RF_BOUNDARY_AFTER_SESSION:
    case RF_BOUNDARY_AFTER_VERIFY:
    case RF_BOUNDARY_IDLE: {
        /*
         * The resources walk one execution when executions completed since
         * the last walk, and only at a quiescent boundary (otherwise the
         * plan records why nothing may be selected).
         */
        struct rf_native_lifetime nl;
        int rc = 0;
        s->native->lifetime(s->ud, &nl);
        if (nl.quiescent && nl.in_flight_contexts == 0 && nl.active_contexts == 0 &&
            nl.execution_generation != s->walked_generation) {
            rc = lt_execution_boundary(s);
            s->walked_generation = nl.execution_generation;
        }
        if (rc == 0)
            rc = release_rounds(s, labels[b][0], labels[b][1]);
        if (rc < 0)
            add_warning(s, "a boundary failed: its plan or release is incomplete (see "
                           "application)");
        return rc;
    }
    }
    return -EINVAL;
}

/* ------------------------------------------------------------------ dispatch */

int rf_session_dispatch_trace(struct rf_session *s, const struct forge_observer *obs)
{
    struct forge_observer_stats st;
    size_t n_events;

    if (!s || !obs)
        return -EINVAL;
    op_open(s);
    struct rf_report *r = &s->op.rep;
    if (s->p.policy == RF_POLICY_OFF) {
        r->dispatch_reason = "residency policy off: no inventory to attribute events to";
        return 0;
    }
    const struct rf_dispatch_event *ev = forge_observer_events(obs, &n_events);
    forge_observer_stats(obs, &st);
    rf_dispatch_summary_free(&s->op.dispatch);
    if (rf_dispatch_summarize(&s->inv, s->model.instance_id, ev, n_events, st.dropped_events,
                              &s->op.dispatch) < 0) {
        r->dispatch_reason = "the dispatch events could not be attributed";
        return 0;
    }
    r->dispatch = &s->op.dispatch;
    if (!s->op.dispatch.complete) {
        r->profile_reason = "the dispatch trace is incomplete (events were dropped): no "
                            "profile; raise --dispatch-events";
        return 0;
    }
    size_t n = s->op.dispatch.n_tensors;
    uint32_t *by_rank = malloc((n ? n : 1) * sizeof(uint32_t)); /* rank -> tensor index */
    uint32_t *order = calloc(n ? n : 1, sizeof(uint32_t));
    size_t n_order = 0;
    if (!order || !by_rank) {
        free(by_rank);
        free(order);
        return -ENOMEM;
    }
    memset(by_rank, 0xff, (n ? n : 1) * sizeof(uint32_t));
    for (size_t i = 0; i < n; i++) {
        uint32_t rank = s->op.dispatch.tensors[i].first_order;
        if (rank == UINT32_MAX || rank >= n)
            order[n_order++] = s->inv.entries[i].key.tensor_index;
        else
            by_rank[rank] = s->inv.entries[i].key.tensor_index;
    }
    for (size_t rank = n; rank-- > 0;)
        if (by_rank[rank] != UINT32_MAX)
            order[n_order++] = by_rank[rank];
    free(by_rank);
    free(s->profile_order);
    s->profile_order = order;
    s->n_profile_order = n_order;
    r->profile_order = order;
    r->n_profile_order = n_order;
    r->profile_source = "dispatch trace of this run's session (--observe-dispatch)";
    return 0;
}

/* ------------------------------------------------------------------ operation end */

/* Copies n int32 ids; *dst NULL for none. */
static int copy_ids(int32_t **dst, const int32_t *src, size_t n)
{
    *dst = NULL;
    if (!src || !n)
        return 0;
    *dst = malloc(n * sizeof(int32_t));
    if (!*dst)
        return -ENOMEM;
    memcpy(*dst, src, n * sizeof(int32_t));
    return 0;
}

static int record_output(struct rf_session *s, const struct rf_operation_output *o)
{
    struct session_op *op = &s->op;
    struct rf_report *r = &op->rep;
    if (copy_ids(&op->prompt_tokens, o->prompt_tokens, o->n_prompt) < 0 ||
        copy_ids(&op->tokens, o->tokens, o->n_tokens) < 0 ||
        copy_ids(&op->verify_tokens, o->verify_tokens, o->n_verify_tokens) < 0 ||
        (o->text && !(op->text = strdup(o->text))))
        return -ENOMEM;
    r->prompt_tokens = op->prompt_tokens;
    r->n_prompt = op->prompt_tokens ? o->n_prompt : 0;
    r->tokens = op->tokens;
    r->n_tokens = op->tokens ? o->n_tokens : 0;
    r->text = op->text;
    r->n_ctx = o->n_ctx;
    r->n_threads = o->n_threads;
    r->seed = o->seed;
    if (o->verify_tokens) {
        r->verified = true;
        r->verify_tokens = op->verify_tokens;
        r->n_verify_tokens = o->n_verify_tokens;
        r->verify_tokens_equal = o->n_verify_tokens == o->n_tokens && o->tokens &&
                                 memcmp(o->verify_tokens, o->tokens,
                                        o->n_tokens * sizeof(int32_t)) == 0;
    }
    rf_timing_set(&op->timing, RF_TIMER_CONTEXT_INIT, o->context_init_ns);
    rf_timing_set(&op->timing, RF_TIMER_INFERENCE, o->inference_ns);
    rf_timing_set(&op->timing, RF_TIMER_PROMPT, o->prompt_ns);
    rf_timing_set(&op->timing, RF_TIMER_TTFT, o->ttft_ns);
    rf_timing_set(&op->timing, RF_TIMER_DECODE, o->decode_ns);
    rf_timing_set(&op->timing, RF_TIMER_SYNCHRONIZATION, o->sync_ns);
    op->has_memory_breakdown = o->has_memory_breakdown;
    op->kv_cache_bytes = o->kv_cache_bytes;
    op->compute_bytes = o->compute_bytes;
    op->kv_n_ctx = o->n_ctx;
    return 0;
}

/* The ledger's native categories: the session's memory breakdown, else an estimate. */
static void fill_native_ledger(struct rf_session *s)
{
    struct session_op *op = &s->op;
    uint64_t kv;
    if (op->has_memory_breakdown) {
        rf_ledger_set(&op->ledger, RF_LEDGER_KV_CACHE, op->kv_cache_bytes, RF_PROV_NATIVE_LOGICAL,
                      "llama_get_memory_breakdown (context buffers)",
                      "allocated by the session's context; freed when the session was dropped");
        rf_ledger_set(&op->ledger, RF_LEDGER_GRAPH_SCRATCH, op->compute_bytes,
                      RF_PROV_NATIVE_LOGICAL, "llama_get_memory_breakdown (compute buffers)",
                      "allocated by the session's context; freed when the session was dropped");
        return;
    }
    if (op->kv_n_ctx && estimate_kv(&s->model.info, op->kv_n_ctx, &kv))
        rf_ledger_set(&op->ledger, RF_LEDGER_KV_CACHE, kv, RF_PROV_ESTIMATED,
                      "model hyperparameters x context size (f16 K and V)",
                      "llama_get_memory_breakdown did not answer for this operation");
    else
        rf_ledger_set_unknown(&op->ledger, RF_LEDGER_KV_CACHE, "llama_get_memory_breakdown",
                              "not reported for this operation, and the context size or the "
                              "hyperparameters are unknown");
    rf_ledger_set_unknown(&op->ledger, RF_LEDGER_GRAPH_SCRATCH, "llama_get_memory_breakdown",
                          "not reported for this operation");
}

/*
 * The page-level snapshot at the end of the operation: mincore over the
 * model mapping (or unknown where the kernel's fake-residency rule
 * applies), the plan's selection first, within the page budget; and the
 * file's page-cache figure from cachestat.
 */
static void take_page_snapshot(struct rf_session *s)
{
    struct rf_residency_params rp = rf_residency_default_params();
    struct forge_page_source *src = &s->op.page_source;
    struct rf_report *r = &s->op.rep;
    uint64_t t0 = rf_now_ns();

    if (s->native->page_source(s->ud, src) < 0) {
        r->page_snapshot_reason = "the model mapping's page source is unavailable";
        return;
    }
    rp.page_budget_pages = s->p.page_budget_pages;
    rp.sample = s->native->page_sampler;
    rp.sample_ud = s->ud;
    rp.source = src->source;
    if (r->plan) {
        rp.targeted = r->plan->selected;
        rp.n_targeted = r->plan->n_selected;
    }
    if (rf_residency_snapshot_take(&s->inv, &rp, &s->op.snapshot) == 0)
        r->page_snapshot = &s->op.snapshot;
    else
        r->page_snapshot_reason = "the page snapshot failed";
    r->has_file_cache = src->cachestat_error == 0;
    r->file_cached_pages = src->cachestat.nr_cache;
    r->file_cache_page_bytes = src->page_bytes;
    r->file_cache_source = src->cachestat_source;
    rf_timing_add(&s->op.timing, RF_TIMER_OBSERVATION, rf_now_ns() - t0);
}

static void end_warnings(struct rf_session *s)
{
    struct rf_report *r = &s->op.rep;
    if (s->p.policy == RF_POLICY_OFF)
        return;
    add_warning(s, "FileBackedResident is this process's mapping RSS: it is neither the file's "
                   "page cache nor the cgroup charge");
    if (!s->op.has_memory_breakdown)
        add_warning(s, "KvCache and GraphScratch are not reported by this llama.cpp build");
    add_warning(s, "the ledger is sampled after the session was dropped: the session's KV cache "
                   "and scratch were freed with it and are in ProcessRssPeak, not ProcessRss "
                   "(residency.samples end_of_session has the RSS with them)");
    add_warning(s, "Runtime is unknown: allocator, loader and tokenizer memory are inside "
                   "ProcessRss");
    if (s->inv.totals.n_anonymous > 0)
        add_warning(s, "some weights are read from anonymous repacked copies: their file pages "
                       "stay mapped and resident but are never read again");
    if (s->cg.version == RFSYS_CGROUP_NONE)
        add_warning(s, "no cgroup memory controller was found: cgroup figures are unknown");
    if (r->policy_mutates)
        add_warning(s, "a release request is not reclamation: accepted bytes are what madvise "
                       "took; only the measured deltas show what changed");
    for (size_t i = s->op.first_app; i < s->n_apps; i++)
        if (s->apps[i].n_failed)
            add_warning(s, "the kernel refused part of a release: those resources are "
                           "ReleaseFailed, not released");
    const struct rf_residency_sample *last = last_sample(s);
    if (r->policy_mutates && r->plan && r->plan->has_soft_target && last && last->has_mapping &&
        last->mapping_rss_bytes > r->plan->soft_target_bytes)
        add_warning(s, "the measured mapping RSS after release is above the soft target (see "
                       "plan.reason and residency.samples)");
}

int rf_session_operation_end(struct rf_session *s, const struct rf_operation_output *out)
{
    if (!s)
        return -EINVAL;
    op_open(s);
    struct session_op *op = &s->op;
    int rc = out ? record_output(s, out) : 0;
    if (rc < 0)
        return rc;
    if (s->p.policy != RF_POLICY_OFF) {
        const struct rf_residency_sample *last = last_sample(s);
        rf_measure_fill_ledger(&op->ledger, &s->inv, s->model.info.access_probed, last, &s->cg,
                               "self");
        fill_native_ledger(s);
        if (op->rep.staging) {
            rf_ledger_set(&op->ledger, RF_LEDGER_STAGING_REQUESTED, op->staging.selected_bytes,
                          RF_PROV_REQUESTED, "ramforge staging plan (union of page ranges)",
                          "page bytes submitted to MADV_WILLNEED, within --staging-budget");
            if (op->rep.staging_attempted)
                rf_ledger_set(&op->ledger, RF_LEDGER_STAGING_ACCEPTED,
                              op->rep.staging_accepted_bytes, RF_PROV_NATIVE_ACCEPTED,
                              "madvise(MADV_WILLNEED) return values",
                              "bytes of the prefetch hints the kernel took: not residency");
            else
                rf_ledger_set_unknown(&op->ledger, RF_LEDGER_STAGING_ACCEPTED,
                                      "ramforge staging", op->rep.staging_refused_reason);
        }
        take_page_snapshot(s); /* budget 0: every page unknown, never nonresident */
        rf_ledger_reconcile(&op->ledger, true, s->inv.totals.mapped_virtual_bytes, &op->recon);
        op->rep.ledger = &op->ledger;
        op->rep.reconciliation = &op->recon;
        end_warnings(s);
    }
    rf_timing_set(&op->timing, RF_TIMER_END_TO_END, rf_now_ns() - op->start_ns);
    op->ended = true;
    s->n_ended++;
    return 0;
}

/* ------------------------------------------------------------------ reports */

static void fill_cgroup(const struct rf_session *s, struct rf_report *r)
{
    if (s->p.policy == RF_POLICY_OFF)
        return;
    r->cgroup_version = s->cg.version == RFSYS_CGROUP_V1   ? "v1"
                        : s->cg.version == RFSYS_CGROUP_V2 ? "v2"
                                                           : "none";
    r->cgroup_dir = s->cg.version != RFSYS_CGROUP_NONE ? s->cg.dir : NULL;
    r->has_cgroup_limit = s->cg.has_limit;
    r->cgroup_limit_unlimited = s->cg.limit_unlimited;
    r->cgroup_limit_bytes = s->cg.limit_bytes;
}

const struct rf_report *rf_session_report(struct rf_session *s, enum rf_report_scope scope)
{
    struct rf_report *r = &s->view;
    bool all = scope == RF_REPORT_SESSION;
    size_t fs = all ? 0 : s->op.first_sample, fa = all ? 0 : s->op.first_app;

    *r = s->op.rep;
    r->scope = all ? "session" : "operation";
    r->operation_index = s->op.index;
    r->n_operations = s->op.index;
    r->samples = s->samples + fs;
    r->n_samples = s->n_samples - fs;
    r->applications = s->apps + fa;
    r->n_applications = s->n_apps - fa;
    r->warnings = s->op.warnings;
    r->n_warnings = s->op.n_warnings;
    fill_cgroup(s, r);
    return r;
}

int rf_session_report_json(struct rf_session *s, enum rf_report_scope scope, char **out)
{
    json_t *doc;
    if (!s || !out)
        return -EINVAL;
    int rc = rf_report_to_json(rf_session_report(s, scope), &doc);
    if (rc < 0)
        return rc;
    *out = json_dumps(doc, JSON_INDENT(2) | JSON_SORT_KEYS);
    json_decref(doc);
    return *out ? 0 : -ENOMEM;
}

int rf_session_report_write(struct rf_session *s, enum rf_report_scope scope, const char *path)
{
    json_t *doc;
    if (!s || !path)
        return -EINVAL;
    int rc = rf_report_to_json(rf_session_report(s, scope), &doc);
    if (rc < 0)
        return rc;
    rc = rf_json_write_file(doc, path);
    json_decref(doc);
    return rc;
}

void rf_session_foreach_warning(const struct rf_session *s,
                                void (*fn)(const char *warning, void *ud), void *ud)
{
    if (!s || !fn)
        return;
    for (size_t i = 0; i < s->op.n_warnings; i++)
        fn(s->op.warnings[i], ud);
}
