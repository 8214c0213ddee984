/*
 * The report's sections about what the policy did: the release plans and
 * their application per boundary, staging, the native lifetime, resource
 * lifetimes, the access profile and the dispatch observer's summary. Part
 * of the report writer (report.c); a section not run keeps its keys, null,
 * with a reason.
 */
#include "ramforge/error.h"
#include "report_sections.h"

#include <stdlib.h>
#include <string.h>

#define RF_REPORT_MAX_SELECTED_NAMES 64

json_t *rf_report_plan_json(const struct rf_report *r)
{
    static const char *keys[] = {"profile_used", "selected_count", "selected_bytes", NULL};
    const struct rf_plan *p = r->plan;
    json_t *o, *names;

    if (!p)
        return rf_report_absent_section(r->plan_reason ? r->plan_reason : "no plan", keys);
    o = json_object();
    names = json_array();
    if (!o || !names) {
        json_decref(o);
        json_decref(names);
        return NULL;
    }
    json_object_set_new(o, "profile_used", json_boolean(p->profile_used));
    json_object_set_new(o, "selected_count", rf_json_u64(true, p->n_selected));
    json_object_set_new(o, "selected_bytes", rf_json_u64(true, p->selected_logical_bytes));
    json_object_set_new(o, "boundary", rf_json_str(r->plan_boundary));
    json_object_set_new(o, "applied", json_boolean(p->applied_profile));
    json_object_set_new(o, "generation", rf_json_u64(true, p->generation));
    json_object_set_new(o, "candidate_count", rf_json_u64(true, p->n_candidates));
    json_object_set_new(o, "soft_target_bytes",
                        rf_json_u64(p->has_soft_target, p->soft_target_bytes));
    json_object_set_new(o, "release_bytes", rf_json_u64(true, p->release_bytes));
    json_object_set_new(o, "shared_bytes_protected", rf_json_u64(true, p->shared_bytes_protected));
    json_object_set_new(
        o, "estimated_resident_after_bytes",
        rf_json_u64(p->has_estimated_resident_after, p->estimated_resident_after_bytes));
    json_object_set_new(o, "target_met", json_boolean(p->target_met));
    for (size_t i = 0; i < p->n_selected && i < RF_REPORT_MAX_SELECTED_NAMES; i++) {
        const struct rf_inventory_entry *e = NULL;
        struct rf_resource_key key = {p->generation, p->selected[i]};
        if (r->inventory && rf_inventory_lookup(r->inventory, key, &e) == 0)
            json_array_append_new(names, rf_json_str(e->name));
    }
    json_object_set_new(o, "selected", names);
    json_object_set_new(o, "selected_truncated",
                        json_boolean(p->n_selected > RF_REPORT_MAX_SELECTED_NAMES));
    json_object_set_new(o, "reason", rf_json_str(p->reason));
    /* Every plan of the operation, one per boundary and release round. */
    json_t *all = json_array();
    uint64_t total = 0;
    for (size_t i = 0; all && i < r->n_applications; i++) {
        const struct rf_plan *q = r->applications[i].plan;
        if (!q)
            continue;
        total += q->n_selected;
        json_array_append_new(
            all,
            json_pack("{s:s?, s:o, s:o, s:o, s:o, s:b, s:b, s:o}", "boundary",
                      r->applications[i].boundary, "selected_count",
                      rf_json_u64(true, q->n_selected), "selected_bytes",
                      rf_json_u64(true, q->selected_logical_bytes), "release_bytes",
                      rf_json_u64(true, q->release_bytes), "shared_bytes_protected",
                      rf_json_u64(true, q->shared_bytes_protected), "profile_used", q->profile_used,
                      "target_met", q->target_met, "reason", rf_json_str(q->reason)));
    }
    json_object_set_new(o, "plans", all);
    json_object_set_new(o, "selected_count_all_plans", rf_json_u64(true, total));
    return o;
}

static json_t *jrecon(struct rf_recon_value v)
{
    return v.has_value ? json_integer(v.value) : json_null();
}

/* A delta of a boundary that was not attempted is not an observation. */
static struct rf_recon_value attempted_or_null(const struct rf_report_application *a,
                                               struct rf_recon_value v)
{
    if (!a->attempted)
        v.has_value = false;
    return v;
}

/* One application.boundaries entry: an attempted boundary's figures, or only its reason. */
static void list_boundary(json_t *b, const struct rf_report_application *a)
{
    json_object_set_new(b, "boundary", rf_json_str(a->boundary));
    json_object_set_new(b, "requested_by", rf_json_str(a->requested_by));
    json_object_set_new(b, "attempted", json_boolean(a->attempted));
    /* A boundary not attempted has no figures, only its reason (never null). */
    json_object_set_new(b, "refused_reason",
                        a->attempted
                            ? json_null()
                            : rf_json_str(a->refused_reason ? a->refused_reason : "not attempted"));
    json_object_set_new(b, "requested_bytes", rf_json_u64(a->attempted, a->requested_bytes));
    json_object_set_new(b, "accepted_bytes", rf_json_u64(a->attempted, a->accepted_bytes));
    json_object_set_new(b, "failed_ranges", rf_json_u64(a->attempted, a->n_failed));
    json_object_set_new(b, "protected_bytes", rf_json_u64(a->attempted, a->protected_bytes));
    json_object_set_new(b, "error",
                        a->attempted && a->first_error ? json_string(rf_strerror(a->first_error))
                                                       : json_null());
    json_object_set_new(b, "observed_mapping_delta_bytes",
                        jrecon(attempted_or_null(a, a->mapping_delta)));
    json_object_set_new(b, "observed_rss_delta_bytes", jrecon(attempted_or_null(a, a->rss_delta)));
    json_object_set_new(b, "observed_cgroup_delta_bytes",
                        jrecon(attempted_or_null(a, a->cgroup_delta)));
}

json_t *rf_report_application_json(const struct rf_report *r)
{
    static const char *keys[] = {"requested_bytes", "accepted_bytes",
                                 "observed_mapping_delta_bytes", "observed_cgroup_delta_bytes",
                                 NULL};
    uint64_t req = 0, acc = 0;
    struct rf_recon_value md = {true, 0}, cd = {true, 0};
    json_t *o, *list;
    bool any = false;

    for (size_t i = 0; i < r->n_applications; i++)
        any |= r->applications[i].attempted;
    if (!any) {
        /* Every boundary's reason ("after_load: ...; after_session: ..."), not the first only. */
        char why[RF_ERR_MAX] = "";
        size_t at = 0;
        for (size_t i = 0; i < r->n_applications && at < sizeof(why); i++) {
            const struct rf_report_application *a = &r->applications[i];
            int len = snprintf(why + at, sizeof(why) - at, "%s%s%s%s", at ? "; " : "",
                               a->boundary ? a->boundary : "", a->boundary ? ": " : "",
                               a->refused_reason ? a->refused_reason : "not attempted");
            at += len > 0 ? (size_t)len : 0;
        }
        return rf_report_absent_section(
            r->n_applications   ? why
            : r->policy_mutates ? "no release boundary ran in this operation (the policy "
                                  "releases at after_session, after_verify or idle)"
                                : "no release was requested (the policy does not mutate)",
            keys);
    }
    o = json_object();
    list = json_array();
    if (!o || !list) {
        json_decref(o);
        json_decref(list);
        return NULL;
    }
    /* The newest RF_REPORT_MAX_APPLICATIONS are listed; the totals cover every one. */
    size_t skip = r->n_applications > RF_REPORT_MAX_APPLICATIONS
                      ? r->n_applications - RF_REPORT_MAX_APPLICATIONS
                      : 0;
    for (size_t i = 0; i < r->n_applications; i++) {
        const struct rf_report_application *a = &r->applications[i];
        json_t *b = i < skip ? NULL : json_object();
        if (b) {
            list_boundary(b, a);
            json_array_append_new(list, b);
        }
        if (!a->attempted)
            continue;
        /* checked sums: an overflow or a missing delta leaves the total null */
        if (__builtin_add_overflow(req, a->requested_bytes, &req) ||
            __builtin_add_overflow(acc, a->accepted_bytes, &acc))
            req = acc = UINT64_MAX;
        md.has_value = md.has_value && a->mapping_delta.has_value &&
                       !__builtin_add_overflow(md.value, a->mapping_delta.value, &md.value);
        cd.has_value = cd.has_value && a->cgroup_delta.has_value &&
                       !__builtin_add_overflow(cd.value, a->cgroup_delta.value, &cd.value);
    }
    json_object_set_new(o, "requested_bytes", rf_json_u64(req != UINT64_MAX, req));
    json_object_set_new(o, "accepted_bytes", rf_json_u64(acc != UINT64_MAX, acc));
    json_object_set_new(o, "observed_mapping_delta_bytes", jrecon(md));
    json_object_set_new(o, "observed_cgroup_delta_bytes", jrecon(cd));
    json_object_set_new(o, "release_mode", rf_json_str(r->release_mode));
    json_object_set_new(o, "boundaries", list);
    json_object_set_new(o, "boundaries_dropped", json_integer((json_int_t)skip));
    json_object_set_new(o, "note",
                        json_string("requested and accepted bytes are page bytes submitted to "
                                    "and accepted by madvise, not reclamation; deltas are "
                                    "measured after - before each release (negative = dropped); "
                                    "the cgroup charge may not move when mapping RSS falls"));
    return o;
}

json_t *rf_report_native_json(const struct rf_report *r)
{
    const struct rf_native_lifetime *n = &r->native;
    if (!r->has_native)
        return json_pack("{s:n, s:o, s:n, s:n, s:n, s:n, s:n, s:n, s:s}", "contract_version",
                         "instance_id", rf_json_u64(r->instance_id != 0, r->instance_id),
                         "quiescent", "in_flight_contexts", "active_contexts",
                         "execution_generation", "context_execution_generation", "observed_at",
                         "reason", "no lifetime observation was taken");
    return json_pack(
        "{s:o, s:o, s:b, s:I, s:I, s:o, s:o, s:o, s:o}", "contract_version",
        n->has_contract ? json_integer(n->contract_version) : json_null(), "instance_id",
        rf_json_u64(true, n->instance_id), "quiescent", n->quiescent, "in_flight_contexts",
        (json_int_t)n->in_flight_contexts, "active_contexts", (json_int_t)n->active_contexts,
        "execution_generation", rf_json_u64(true, n->execution_generation),
        "context_execution_generation",
        rf_json_u64(r->context_execution_generation > 0, r->context_execution_generation),
        "observed_at", rf_json_str(r->native_boundary), "reason",
        n->has_contract ? json_null()
                        : json_string("the native layer exposes no lifetime contract"));
}

json_t *rf_report_lifetime_json(const struct rf_report *r)
{
    static const char *keys[] = {"state_counts", NULL};
    uint64_t counts[RF_LT_N];
    json_t *o, *c, *failed;

    if (!r->lifetime)
        return rf_report_absent_section("resource lifetimes were not tracked (policy off)", keys);
    rf_lifetime_counts(r->lifetime, counts);
    o = json_object();
    c = json_object();
    failed = json_array();
    if (!o || !c || !failed) {
        json_decref(o);
        json_decref(c);
        json_decref(failed);
        return NULL;
    }
    for (int s = 0; s < RF_LT_N; s++)
        json_object_set_new(c, rf_lifetime_state_name((enum rf_lifetime_state)s),
                            rf_json_u64(true, counts[s]));
    for (size_t i = 0; i < r->lifetime->n && json_array_size(failed) < 32; i++) {
        if (r->lifetime->states[i] != RF_LT_RELEASE_FAILED || !r->inventory || i >= r->inventory->n)
            continue;
        int err = rf_lifetime_error(r->lifetime, i);
        json_array_append_new(failed, json_pack("{s:o, s:o}", "name",
                                                rf_json_str(r->inventory->entries[i].name), "error",
                                                err ? json_string(rf_strerror(err)) : json_null()));
    }
    uint64_t past = 0;
    for (size_t i = 0; i < r->lifetime->n; i++)
        past += r->lifetime->past_errors[i] != 0;
    json_object_set_new(o, "state_counts", c);
    json_object_set_new(o, "release_failed", failed);
    json_object_set_new(o, "resources_failed_before", rf_json_u64(true, past));
    json_object_set_new(o, "invalidated_resources", rf_json_u64(true, r->invalidated_resources));
    json_object_set_new(o, "resources", rf_json_u64(true, r->lifetime->n));
    return o;
}

json_t *rf_report_staging_json(const struct rf_report *r, const char **keys)
{
    const struct rf_staging_plan *p = r->staging;
    if (!p)
        return rf_report_absent_section(
            r->staging_reason ? r->staging_reason : "no staging was planned or requested", keys);
    json_t *o = json_object();
    if (!o)
        return NULL;
    json_object_set_new(o, "budget_bytes", rf_json_u64(true, p->budget_bytes));
    json_object_set_new(o, "selected_bytes", rf_json_u64(true, p->selected_bytes));
    json_object_set_new(o, "accepted_bytes",
                        rf_json_u64(r->staging_attempted, r->staging_accepted_bytes));
    json_object_set_new(o, "observed_mapping_delta_bytes", jrecon(r->staging_mapping_delta));
    json_object_set_new(o, "candidate_count", rf_json_u64(true, p->n_candidates));
    json_object_set_new(o, "staged_count", rf_json_u64(true, p->n_staged));
    json_object_set_new(o, "partial_count", rf_json_u64(true, p->n_partial));
    json_object_set_new(o, "skipped_count", rf_json_u64(true, p->n_skipped));
    json_object_set_new(o, "candidate_bytes", rf_json_u64(true, p->candidate_bytes));
    json_object_set_new(o, "overlap_bytes_avoided", rf_json_u64(true, p->overlap_bytes_avoided));
    json_object_set_new(o, "skipped_bytes", rf_json_u64(true, p->skipped_bytes));
    json_object_set_new(o, "order_used", json_boolean(p->order_used));
    json_object_set_new(o, "attempted", json_boolean(r->staging_attempted));
    json_object_set_new(o, "refused_reason",
                        r->staging_attempted ? json_null()
                                             : rf_json_str(r->staging_refused_reason));
    json_object_set_new(o, "chunk_bytes",
                        rf_json_u64(r->staging_attempted, r->staging_chunk_bytes));
    json_object_set_new(o, "calls", rf_json_u64(r->staging_attempted, r->staging_calls));
    json_object_set_new(o, "failed_calls",
                        rf_json_u64(r->staging_attempted, r->staging_failed_calls));
    json_object_set_new(
        o, "error", r->staging_error ? json_string(rf_strerror(r->staging_error)) : json_null());
    json_object_set_new(o, "staged_tensor_pages_in_page_cache_before",
                        jrecon(r->staging_cached_before));
    json_object_set_new(o, "staged_tensor_pages_in_page_cache_after",
                        jrecon(r->staging_cached_after));
    json_object_set_new(o, "staged_tensor_pages_sampled", jrecon(r->staging_sampled_pages));
    json_object_set_new(o, "reason", rf_json_str(p->reason));
    json_object_set_new(o, "note",
                        json_string("selected_bytes is the union of the staged page ranges; "
                                    "accepted_bytes are what MADV_WILLNEED took: a hint, not "
                                    "residency; the page-cache figures (mincore) are the "
                                    "observation, and a hint that changed nothing is valid"));
    return o;
}

#define RF_REPORT_MAX_ACCESS_NAMES 32

/* Names of the first RF_REPORT_MAX_ACCESS_NAMES tensor indices of order, via the inventory. */
static json_t *index_names(const struct rf_inventory *inv, const uint32_t *order, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && inv && i < n && json_array_size(a) < RF_REPORT_MAX_ACCESS_NAMES; i++) {
        const struct rf_inventory_entry *e = NULL;
        struct rf_resource_key key = {inv->generation, order[i]};
        if (rf_inventory_lookup(inv, key, &e) == 0)
            json_array_append_new(a, rf_json_str(e->name));
    }
    return a;
}

json_t *rf_report_profile_json(const struct rf_report *r, const char **keys)
{
    if (!r->profile_source)
        return rf_report_absent_section(
            r->profile_reason ? r->profile_reason : "no access profile was available", keys);
    json_t *o = json_object();
    if (!o)
        return NULL;
    json_object_set_new(o, "source", rf_json_str(r->profile_source));
    json_object_set_new(o, "profile_used",
                        r->plan ? json_boolean(r->plan->profile_used) : json_false());
    json_object_set_new(o, "complete", json_boolean(r->dispatch && r->dispatch->complete));
    json_object_set_new(o, "generation",
                        r->inventory ? rf_json_u64(true, r->inventory->generation) : json_null());
    json_object_set_new(o, "resources", rf_json_u64(true, r->n_profile_order));
    json_object_set_new(o, "order",
                        json_string("coldest first: never dispatched, then by "
                                    "latest first use in graph order"));
    json_object_set_new(o, "access_names",
                        index_names(r->inventory, r->profile_order, r->n_profile_order));
    json_object_set_new(o, "access_names_truncated",
                        json_boolean(r->n_profile_order > RF_REPORT_MAX_ACCESS_NAMES));
    return o;
}

json_t *rf_report_dispatch_json(const struct rf_report *r)
{
    const struct rf_dispatch_summary *d = r->dispatch;
    if (!d)
        return json_pack("{s:n, s:s}", "events", "reason",
                         r->dispatch_reason ? r->dispatch_reason
                                            : "the dispatch observer was not enabled");
    json_t *o = json_object(), *first = NULL;
    if (!o)
        return NULL;
    /* Tensors in graph order of first use (bounded). */
    uint32_t *order = calloc(d->n_tensors ? d->n_tensors : 1, sizeof(*order));
    size_t n_named = 0;
    if (order && r->inventory) {
        for (size_t i = 0; i < d->n_tensors && i < r->inventory->n; i++)
            if (d->tensors[i].first_order != UINT32_MAX && d->tensors[i].first_order < d->n_tensors)
                order[d->tensors[i].first_order] = r->inventory->entries[i].key.tensor_index;
        n_named = d->tensors_named < d->n_tensors ? d->tensors_named : d->n_tensors;
        first = index_names(r->inventory, order, n_named);
    }
    free(order);
    json_object_set_new(o, "events", rf_json_u64(true, d->events));
    json_object_set_new(o, "dropped_events", rf_json_u64(true, d->dropped_events));
    json_object_set_new(o, "complete", json_boolean(d->complete));
    json_object_set_new(o, "source_refs", rf_json_u64(true, d->source_refs));
    json_object_set_new(o, "attributed_refs", rf_json_u64(true, d->attributed_refs));
    json_object_set_new(o, "unattributed_refs", rf_json_u64(true, d->unattributed_refs));
    json_object_set_new(o, "weight_refs", rf_json_u64(true, d->weight_refs));
    json_object_set_new(o, "unattributed_weight_refs",
                        rf_json_u64(true, d->unattributed_weight_refs));
    json_object_set_new(o, "tensors_named", rf_json_u64(true, d->tensors_named));
    json_object_set_new(o, "first_use", first ? first : json_array());
    json_object_set_new(o, "first_use_truncated",
                        json_boolean(n_named > RF_REPORT_MAX_ACCESS_NAMES));
    json_object_set_new(o, "caveat", json_string(d->caveat));
    const struct rf_dispatch_sampling *sp = &d->sampling;
    json_object_set_new(
        o, "pre_dispatch_sampling",
        json_pack("{s:b, s:b, s:o, s:o, s:o, s:o, s:o, s:o, s:{s:o, s:o, s:o, s:o, s:o, s:o}, s:s}",
                  "enabled", sp->enabled, "sampling_complete", sp->sampling_complete,
                  "max_pages_per_source", rf_json_u64(true, sp->max_pages_per_source), "samples",
                  rf_json_u64(true, sp->samples), "pages_inspected",
                  rf_json_u64(true, sp->pages_inspected), "pages_resident",
                  rf_json_u64(true, sp->pages_resident), "pages_nonresident",
                  rf_json_u64(true, sp->pages_nonresident), "pages_unknown",
                  rf_json_u64(true, sp->pages_unknown), "by_status", "complete",
                  rf_json_u64(true, sp->complete), "partial", rf_json_u64(true, sp->partial),
                  "truncated", rf_json_u64(true, sp->truncated), "missing",
                  rf_json_u64(true, sp->missing), "failed", rf_json_u64(true, sp->failed),
                  "disabled", rf_json_u64(true, sp->disabled), "note",
                  sp->note ? sp->note : RF_DISPATCH_SAMPLING_NOTE));
    return o;
}
