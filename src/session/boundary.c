/*
 * The session's boundaries: resource lifetimes, the after_load boundary,
 * planning and applying releases under the gate, release rounds re-planned
 * from the measurement, the after-session and idle boundaries, and the
 * inventory refresh.
 *
 * Lifetimes: every transition the session requests must be legal; an
 * illegal one is an error (-EPROTO) that reaches the report, and the
 * invariants are checked after each boundary in debug builds.
 */
#include "session_internal.h"

#include "ramforge/core/fs_profile.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ramforge/core/policy.h"
#include "ramforge/error.h"

/* ------------------------------------------------------------------ lifetimes */

/* Advances resource i; an illegal transition is a bug, reported as -EPROTO. */
static int lt_move(struct rf_session *s, size_t i, enum rf_lifetime_state to)
{
    if (rf_lifetime_advance(&s->lt, i, to) == 0)
        return 0;
    ses_add_warning(s, "an illegal resource-lifetime transition was refused (a ramforge bug): "
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
        if (rc == 0 &&
            (e->eligibility == RF_ELIGIBLE || e->eligibility == RF_ELIGIBLE_DEAD_FILE_PAGES))
            rc = lt_move(s, i, RF_LT_RELEASE_ELIGIBLE);
    }
    assert(rf_lifetime_check(&s->lt));
    return rc;
}

/*
 * After load: Discovered -> Owned -> Referenced (the probe's graph read it,
 * or the model holds it) or Unknown, then the probe's execution when the
 * probe ran.
 */
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
    /* The probe's one-token decode is an execution; placement alone is not. */
    return rc || !s->model.info.access_probed ? rc : lt_execution_boundary(s);
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
    return s->alive_ok ? rf_binding_may_select_alive(&s->binding, why)
                       : rf_binding_may_select(&s->binding, why);
}

/* ------------------------------------------------------------------ release */

bool ses_file_changed(struct rf_session *s)
{
    char why[RF_ERR_MAX];
    bool changed = false;
    if (!s->native->file_changed ||
        s->native->file_changed(s->ud, &changed, why, sizeof(why)) < 0 || !changed)
        return false;
    snprintf(s->file_changed, sizeof(s->file_changed),
             "the model file changed since the load (%s): nothing is released", why);
    ses_add_warning(s, s->file_changed);
    return true;
}

void ses_app_attempted(struct rf_report_application *app, const struct forge_release_result *res)
{
    app->attempted = true;
    app->requested_bytes = res->requested_bytes;
    app->accepted_bytes = res->accepted_bytes;
    app->n_failed = res->n_failed;
    app->protected_bytes = res->protected_bytes;
    app->first_error = res->first_error;
}

int ses_app_measure_after(struct rf_session *s, struct rf_report_application *app, size_t before_i,
                          const char *after_label)
{
    long after_i = ses_take_sample(s, after_label, RF_MEASURE_MAPPING_RSS);
    if (after_i < 0)
        return (int)after_i;
    app->after_label = s->samples[after_i].label; /* after_label, with its round */
    const struct rf_residency_sample *before = &s->samples[before_i];
    const struct rf_residency_sample *after = &s->samples[after_i];
    app->mapping_delta = ses_delta(after->has_mapping, after->mapping_rss_bytes,
                                   before->has_mapping, before->mapping_rss_bytes);
    app->rss_delta = ses_delta(after->has_process_rss, after->process_rss_bytes,
                               before->has_process_rss, before->process_rss_bytes);
    app->cgroup_delta = ses_delta(after->has_cgroup_current, after->cgroup_current_bytes,
                                  before->has_cgroup_current, before->cgroup_current_bytes);
    return 0;
}

struct rf_report_application *ses_new_application(struct rf_session *s, const char *boundary)
{
    struct rf_plan *plan = calloc(1, sizeof(*plan));
    if (!plan || ses_grow((void **)&s->apps, &s->cap_apps, s->n_apps + 1, sizeof(*s->apps)) < 0 ||
        ses_grow((void **)&s->plans, &s->cap_plans, s->n_plans + 1, sizeof(*s->plans)) < 0) {
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

/* A plan on a filesystem whose pages are the file's storage (fs_profile.h) is not applied. */
static const char FS_NO_FREE_REASON[] =
    "the model file is on a filesystem whose pages are its storage (tmpfs, ramfs or "
    "hugetlbfs): a release would drop the mapping's RSS but free no memory";
static const char FS_NO_FREE_WARNING[] =
    "release not attempted: the model file is on a filesystem whose pages are its storage "
    "(tmpfs, ramfs or hugetlbfs): a release would drop the mapping's RSS but free no memory";

/*
 * Plans at a boundary and, for a mutating policy observed quiescent,
 * applies the plan (apply_plan). Returns 0 (the new application's
 * accepted_bytes say what was accepted) or a negative error.
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

    struct rf_report_application *app = ses_new_application(s, boundary);
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
    if (plan->n_shared_dead_selected)
        ses_add_warning(s, "conservative released dead file pages of repacked weights that "
                           "share pages, an exception to its zero-shared rule (never read "
                           "again; a page shared with a tensor not selected is kept): see "
                           "the after_load plan's reason");
    if (!rf_policy_mutates(s->p.policy)) {
        app->refused_reason = "the policy does not mutate";
        return 0;
    }
    if (!may) {
        app->refused_reason = why;
        return 0;
    }
    if (plan->n_selected > 0 &&
        rf_fs_profile_of(s->model.info.fs_magic)->release == RF_FS_RELEASE_NO_FREE) {
        app->refused_reason = FS_NO_FREE_REASON;
        ses_add_warning(s, FS_NO_FREE_WARNING);
        return 0;
    }
    return apply_plan(s, app, plan, before_i, after_label);
}

int rf_session_apply_plan(struct rf_session *s, const char *boundary, const struct rf_plan *plan)
{
    if (!s || !boundary || !plan)
        return -EINVAL;
    ses_op_open(s);
    long before = ses_take_sample(s, boundary, RF_MEASURE_MAPPING_RSS);
    struct rf_report_application *app = before < 0 ? NULL : ses_new_application(s, boundary);
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
 * SharedOrReused. Returns 0 (app->accepted_bytes: what was accepted),
 * -RF_ESTALE (a plan of another generation), -ENOENT (a selected tensor not
 * in the inventory), -EPROTO (an illegal transition), -ENOMEM.
 */
static int apply_plan(struct rf_session *s, struct rf_report_application *app,
                      const struct rf_plan *plan, size_t before_i, const char *after_label)
{
    int rc = 0;

    if (plan->generation != s->inv.generation) {
        app->refused_reason = "the plan is of another inventory generation";
        ses_add_warning(s, "a release plan of another inventory generation was refused");
        return -RF_ESTALE;
    }
    if (plan->n_selected == 0) {
        app->refused_reason = "the plan selected nothing";
        return 0;
    }
    if (ses_file_changed(s)) {
        /* Replaced (another inode) or truncated: not the file the plan was made from. */
        app->refused_reason = s->file_changed;
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
            ses_add_warning(s, "a release plan named a tensor the inventory does not hold: the "
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
    enum forge_release_mode mode =
        s->p.release_mode == RF_RELEASE_PAGEOUT ? FORGE_RELEASE_PAGEOUT : FORGE_RELEASE_DONTNEED;
    rc = s->native->release(s->ud, plan->release, plan->n_release, mode, &res, errs);
    if (rc < 0) {
        /* The gate refused (a lease in flight): nothing was advised. */
        app->refused_reason = rc == -EBUSY ? "the execution gate was busy" : rf_strerror(rc);
        for (size_t k = 0; k < plan->n_selected; k++)
            if (s->lt.states[pos[k]] == RF_LT_RELEASE_REQUESTED)
                rf_lifetime_fail(&s->lt, pos[k], rc);
        rc = 0;
        goto out;
    }
    ses_app_attempted(app, &res);
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
    rc = ses_app_measure_after(s, app, before_i, after_label);
    if (rc < 0)
        goto out;
    for (size_t k = 0; k < plan->n_selected && rc == 0; k++)
        if (s->lt.states[pos[k]] == RF_LT_NATIVE_ACCEPTED)
            rc = lt_move(s, pos[k], RF_LT_RECONCILED);
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
    /* Without releases this is the boundary's last sample, the ledger's: smaps at once. */
    long before = ses_take_sample(s, boundary,
                                  rf_policy_mutates(s->p.policy) ? RF_MEASURE_MAPPING_RSS
                                                                 : RF_MEASURE_MAPPING_SMAPS);
    if (before < 0)
        return (int)before;
    for (int round = 0; round < RF_SESSION_RELEASE_ROUNDS; round++) {
        int rc = plan_and_apply(s, boundary, false, (size_t)before, after_label);
        if (rc < 0 || s->apps[s->n_apps - 1].accepted_bytes == 0)
            return rc;
        const struct rf_residency_sample *now = ses_last_sample(s);
        const struct rf_plan *p = s->apps[s->n_apps - 1].plan;
        if (!p->has_soft_target || !now->has_mapping ||
            now->mapping_rss_bytes <= p->soft_target_bytes)
            return 0;
        before = (long)(s->n_samples - 1);
    }
    return 0;
}

/* The after_load boundary: no context exists. */
int ses_after_load(struct rf_session *s)
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
    long loaded = ses_take_sample(s, "after_load", RF_MEASURE_MAPPING_RSS);
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

/* ------------------------------------------------------------------ boundaries */

/*
 * The resources walk one execution when executions completed since the
 * last walk, and only at a quiescent boundary, or with contexts alive but
 * none in flight at the idle boundary that allows them (s->alive_ok;
 * otherwise a plan records why nothing may be selected).
 */
static int walk_if_quiescent(struct rf_session *s)
{
    struct rf_native_lifetime nl;
    s->native->lifetime(s->ud, &nl);
    bool settled = s->alive_ok
                       ? nl.in_flight_contexts == 0
                       : nl.quiescent && nl.in_flight_contexts == 0 && nl.active_contexts == 0;
    if (!settled || nl.execution_generation == s->walked_generation)
        return 0;
    s->walked_generation = nl.execution_generation;
    return lt_execution_boundary(s);
}

int ses_operation_walk(struct rf_session *s)
{
    const char *why;
    if (!s->op.rep.has_native)
        observe_native(s, "end_of_operation", &why);
    return walk_if_quiescent(s);
}

/*
 * A boundary after executions (after_session, after_verify, idle; with
 * s->alive_ok, idle with contexts alive): the pins undone, one execution
 * walked, then the release rounds.
 */
static int execution_boundary(struct rf_session *s, const char *label, const char *after_label)
{
    ses_stream_unpin(s, label); /* pins never meet a release */
    int rc = walk_if_quiescent(s);
    if (rc == 0)
        rc = release_rounds(s, label, after_label);
    if (rc < 0)
        ses_add_warning(s, "a boundary failed: its plan or release is incomplete (see "
                           "application)");
    return rc;
}

int rf_session_boundary(struct rf_session *s, enum rf_boundary b)
{
    static const char *const labels[][2] = {
        [RF_BOUNDARY_AFTER_SESSION] = {"after_session", "after_release"},
        [RF_BOUNDARY_AFTER_VERIFY] = {"after_verify", "after_verify_release"},
        [RF_BOUNDARY_IDLE] = {"idle", "idle_release"},
    };
    if (!s || s->p.policy == RF_POLICY_OFF)
        return -EINVAL;
    ses_op_open(s);
    switch (b) {
    case RF_BOUNDARY_END_OF_SESSION: {
        /* The process and the cgroup only: the boundaries around it read the mapping. */
        long i = ses_take_sample(s, "end_of_session", RF_MEASURE_MAPPING_NONE);
        return i < 0 ? (int)i : 0;
    }
    case RF_BOUNDARY_AFTER_SESSION:
    case RF_BOUNDARY_AFTER_VERIFY:
    case RF_BOUNDARY_IDLE:
        return execution_boundary(s, labels[b][0], labels[b][1]);
    }
    return -EINVAL;
}

int rf_session_idle_alive_boundary(struct rf_session *s)
{
    if (!s || s->p.policy == RF_POLICY_OFF)
        return -EINVAL;
    ses_op_open(s);
    s->alive_ok = true;
    int rc = execution_boundary(s, "idle_alive", "idle_alive_release");
    s->alive_ok = false;
    return rc;
}

int rf_session_refresh(struct rf_session *s)
{
    if (!s || s->p.policy == RF_POLICY_OFF)
        return -EINVAL;
    ses_op_open(s);
    struct rf_inventory inv;
    struct rf_lifetime lt;
    rf_inventory_init(&inv);
    int rc =
        rf_inventory_build(s->model.tensors, s->model.n_tensors, s->model.mappings,
                           s->model.n_mappings, s->model.page_bytes, s->inv.generation + 1, &inv);
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
    ses_profile_reorder(s); /* a persisted profile's names map onto the new generation */
    s->op.rep.invalidated_resources = s->invalidated;
    return lt_after_load(s);
}
