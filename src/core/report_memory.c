/*
 * The report's memory sections: the ledger with its reconciliation, the
 * residency samples, the policy, and the admission decision with the
 * cgroup hierarchy it read and the kernel's verdict over the run. Part of
 * the report writer (report.c); a figure not measured is null.
 */
#include "report_sections.h"

json_t *rf_report_ledger_json(const struct rf_ledger *l, const struct rf_reconciliation *rc)
{
    json_t *o = json_object(), *entries = json_array(), *rec = json_object();
    if (!o || !entries || !rec) {
        json_decref(o);
        json_decref(entries);
        json_decref(rec);
        return NULL;
    }
    for (int c = 0; c < RF_LEDGER_N_CATEGORIES; c++) {
        const struct rf_ledger_entry *e = &l->entries[c];
        json_array_append_new(
            entries, json_pack("{s:s, s:o, s:s, s:o, s:o}", RF_REPORT_KEY_ENTRY_CATEGORY,
                               rf_ledger_category_name((enum rf_ledger_category)c),
                               RF_REPORT_KEY_ENTRY_VALUE, rf_json_u64(e->has_value, e->value_bytes),
                               "provenance", rf_provenance_name(e->provenance), "source",
                               rf_json_str(e->source), "note", rf_json_str(e->note)));
    }
    json_object_set_new(o, RF_REPORT_KEY_LEDGER_ENTRIES, entries);
#define REC(field)                                                                                 \
    json_object_set_new(rec, #field,                                                               \
                        rc->field.has_value ? json_integer(rc->field.value) : json_null())
    REC(mapped_virtual_bytes);
    REC(mapped_resident_bytes);
    REC(process_rss_bytes);
    REC(cgroup_current_bytes);
    REC(cgroup_peak_bytes);
    REC(rss_minus_mapping_resident_bytes);
    REC(cgroup_current_minus_rss_bytes);
#undef REC
    json_object_set_new(rec, "note",
                        json_string("differences are signed and are not overhead: RSS holds KV "
                                    "cache, scratch and runtime pages; the cgroup charge holds "
                                    "page cache and kernel memory"));
    json_object_set_new(o, "reconciliation", rec);
    json_object_set_new(o, "note", json_string("categories are not additive; no total is given"));
    return o;
}

/* Why a sample has the mapping's resident bytes but no Pss, or no mapping figure at all. */
#define RF_REPORT_PSS_SKIPPED                                                                      \
    "Pss not read at this sample: it needs smaps, which walks every page of every mapping; "       \
    "the resident bytes come from PAGEMAP_SCAN (the ledger's sample reads smaps; "                 \
    "run --sample-smaps for every sample)"

#define RF_REPORT_MAPPING_SKIPPED                                                                  \
    "the mapping was not read at this sample, only the process and the cgroup: the "               \
    "boundaries before and after it read the mapping (run --sample-smaps for every sample)"

json_t *rf_report_sample_json(const struct rf_residency_sample *s)
{
    json_t *o = json_pack(
        "{s:s, s:b, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "label",
        s->label ? s->label : "", "taken", s->taken, "process_rss_bytes",
        rf_json_u64(s->has_process_rss, s->process_rss_bytes), "process_rss_peak_bytes",
        rf_json_u64(s->has_process_rss_peak, s->process_rss_peak_bytes), "mapping_rss_bytes",
        rf_json_u64(s->has_mapping, s->mapping_rss_bytes), "mapping_pss_bytes",
        rf_json_u64(s->has_mapping_pss, s->mapping_pss_bytes), "mapping_source",
        s->mapping_source ? rf_json_str(s->mapping_source) : json_null(), "cgroup_current_bytes",
        rf_json_u64(s->has_cgroup_current, s->cgroup_current_bytes), "cgroup_peak_bytes",
        rf_json_u64(s->has_cgroup_peak, s->cgroup_peak_bytes), "cgroup_events_high",
        rf_json_u64(s->has_cgroup_events, s->cgroup_events_high), "cgroup_events_max",
        rf_json_u64(s->has_cgroup_events, s->cgroup_events_max), "cgroup_events_oom",
        rf_json_u64(s->has_cgroup_events, s->cgroup_events_oom), "cgroup_events_oom_kill",
        rf_json_u64(s->has_cgroup_events, s->cgroup_events_oom_kill));
    if (o && s->has_mapping && !s->has_mapping_pss)
        json_object_set_new(o, "mapping_reason", json_string(RF_REPORT_PSS_SKIPPED));
    else if (o && s->mapping_not_read)
        json_object_set_new(o, "mapping_reason", json_string(RF_REPORT_MAPPING_SKIPPED));
    return o;
}

static json_t *hard_limit_json(const struct rf_report *r)
{
    json_t *hard = json_object();
    if (!hard)
        return NULL;
    json_object_set_new(hard, "cgroup_version", rf_json_str(r->cgroup_version));
    json_object_set_new(hard, "cgroup_dir", rf_json_str(r->cgroup_dir));
    if (r->cgroup_error) {
        char why[RF_CGROUP_PATH_MAX + 64];

        snprintf(why, sizeof(why), "%s: %s",
                 r->cgroup_error_source ? r->cgroup_error_source : "a file of the controller",
                 rf_cgroup_error_text(r->cgroup_error));
        json_object_set_new(hard, "read_error", json_string(why));
    } else {
        json_object_set_new(hard, "read_error", json_null());
    }
    json_object_set_new(
        hard, "limit_bytes",
        rf_json_u64(r->has_cgroup_limit && !r->cgroup_limit_unlimited, r->cgroup_limit_bytes));
    json_object_set_new(hard, "unlimited",
                        r->has_cgroup_limit ? json_boolean(r->cgroup_limit_unlimited)
                                            : json_null());
    return hard;
}

json_t *rf_report_policy_json(const struct rf_report *r)
{
    json_t *o = json_object();
    bool has_soft = r->has_target && r->target_bytes > r->reserve_bytes;
    if (!o)
        return NULL;
    json_object_set_new(o, "profile", rf_json_str(r->policy));
    json_object_set_new(o, "plans", json_boolean(r->policy_plans));
    json_object_set_new(o, "mutates", json_boolean(r->policy_mutates));
    json_object_set_new(o, "target_bytes", rf_json_u64(r->has_target, r->target_bytes));
    json_object_set_new(o, "reserve_bytes", rf_json_u64(true, r->reserve_bytes));
    json_object_set_new(o, "soft_target_bytes",
                        rf_json_u64(has_soft, has_soft ? r->target_bytes - r->reserve_bytes : 0));
    json_object_set_new(o, "release_mode", rf_json_str(r->release_mode));
    json_object_set_new(o, "release_dead_file_pages",
                        json_boolean(r->policy_mutates && r->release_dead_file_pages));
    return o;
}

/* {"bytes", ["unlimited",] "source", "error"} of one cgroup figure. */
static json_t *cgroup_figure_json(const struct rf_cgroup_figure *f, bool limit)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    json_object_set_new(o, "bytes", rf_json_u64(f->has && !f->unlimited, f->bytes));
    if (limit)
        json_object_set_new(o, "unlimited", f->has ? json_boolean(f->unlimited) : json_null());
    json_object_set_new(o, "source", rf_json_str(f->source));
    json_object_set_new(o, "error",
                        f->has ? json_null() : json_string(rf_cgroup_error_text(f->error)));
    return o;
}

/* A boolean that is only meaningful when has. */
static json_t *jbool_if(bool has, bool v)
{
    return has ? json_boolean(v) : json_null();
}

static json_t *admission_cgroup_json(const struct rf_admission_result *a, size_t i)
{
    const struct rf_admission_level_check *c = &a->cgroups[i];
    const struct rf_cgroup_level *l = &c->level;
    json_t *o = json_object();
    if (!o)
        return NULL;
    json_object_set_new(o, "dir", rf_json_str(l->dir));
    json_object_set_new(o, "binding", json_boolean(a->has_binding && a->binding == i));
    json_object_set_new(o, "enforced", json_boolean(c->enforced));
    json_object_set_new(o, "checked", json_boolean(c->checked));
    json_object_set_new(o, "limit", cgroup_figure_json(&l->limit, true));
    json_object_set_new(o, "high", cgroup_figure_json(&l->high, true));
    json_object_set_new(o, "usage", cgroup_figure_json(&l->usage, false));
    json_object_set_new(o, "inactive_file", cgroup_figure_json(&l->inactive_file, false));
    json_object_set_new(o, "reclaimable_file", cgroup_figure_json(&l->reclaimable_file, false));
    json_object_set_new(o, "mapped_file", cgroup_figure_json(&l->mapped_file, false));
    json_object_set_new(o, "reclaimable_bytes", rf_json_u64(c->checked, c->reclaimable_bytes));
    json_object_set_new(o, "mapping_reclaimable_bytes",
                        rf_json_u64(c->checked, c->mapping_reclaimable_bytes));
    json_object_set_new(o, "room_bytes", rf_json_u64(c->checked, c->room_bytes));
    json_object_set_new(o, "projected_bytes", rf_json_u64(c->checked, c->projected_bytes));
    json_object_set_new(o, "fits", jbool_if(c->checked, c->fits));
    json_object_set_new(o, "run_room_bytes", rf_json_u64(c->checked, c->run_room_bytes));
    json_object_set_new(o, "working_set_fits",
                        jbool_if(c->working_set_checked, c->working_set_fits));
    json_object_set_new(o, "high_fits", jbool_if(c->high_checked, c->high_fits));
    return o;
}

/* The host as admission saw it: null when it was not read. */
static json_t *admission_host_json(const struct rf_admission_result *a)
{
    const struct rf_host_memory *h = &a->host;
    json_t *o;

    if (!h->read)
        return json_null();
    o = json_object();
    if (!o)
        return NULL;
    json_object_set_new(o, "binding", json_boolean(a->host_binding));
    json_object_set_new(o, "mem_total", cgroup_figure_json(&h->total, false));
    json_object_set_new(o, "mem_available", cgroup_figure_json(&h->available, false));
    json_object_set_new(o, "swap_total", cgroup_figure_json(&h->swap_total, false));
    json_object_set_new(o, "swap_free", cgroup_figure_json(&h->swap_free, false));
    json_object_set_new(o, "room_bytes", rf_json_u64(a->host_binding, a->host_room_bytes));
    json_object_set_new(o, "projected_bytes",
                        rf_json_u64(a->host_binding, a->host_projected_bytes));
    json_object_set_new(o, "source", rf_json_str(a->host_source[0] ? a->host_source : NULL));
    return o;
}

static json_t *admission_inputs_json(const struct rf_admission_result *a)
{
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < a->n_records; i++) {
        const struct rf_admission_record *rec = &a->records[i];
        json_array_append_new(arr, json_pack("{s:s, s:o, s:s, s:o}", "name", rec->name, "bytes",
                                             rf_json_u64(rec->has, rec->bytes), "provenance",
                                             rf_provenance_name(rec->provenance), "source",
                                             rf_json_str(rec->source)));
    }
    return arr;
}

/* The kernel's verdict over the run: counter deltas per cgroup, or null with a reason. */
static json_t *verdict_json(const struct rf_report *r)
{
    static const char *keys[] = {"cgroups",   "hit_limit", "oom_killed",
                                 "throttled", "complete",  NULL};
    const struct rf_cgroup_verdict *v = r->cgroup_verdict;
    json_t *o, *arr;

    if (!v)
        return rf_report_absent_section(r->cgroup_verdict_reason
                                            ? r->cgroup_verdict_reason
                                            : "the cgroup counters were not read",
                                        keys);
    o = json_object();
    arr = json_array();
    if (!o || !arr) {
        json_decref(o);
        json_decref(arr);
        return NULL;
    }
    for (size_t i = 0; i < v->n; i++) {
        const struct rf_cgroup_counters *d = &v->levels[i].delta;
        json_array_append_new(
            arr, json_pack("{s:o, s:o, s:o, s:o, s:o, s:o}", "dir", rf_json_str(v->levels[i].dir),
                           "failcnt", rf_json_u64(d->has_failcnt, d->failcnt), "oom_kill",
                           rf_json_u64(d->has_oom_kill, d->oom_kill), "events_high",
                           rf_json_u64(d->has_events_high, d->events_high), "events_max",
                           rf_json_u64(d->has_events_max, d->events_max), "events_oom",
                           rf_json_u64(d->has_events_oom, d->events_oom)));
    }
    json_object_set_new(o, "cgroups", arr);
    json_object_set_new(o, "hit_limit", json_boolean(v->hit_limit));
    json_object_set_new(o, "oom_killed", json_boolean(v->oom_killed));
    json_object_set_new(o, "throttled", json_boolean(v->throttled));
    json_object_set_new(o, "complete", json_boolean(v->complete));
    json_object_set_new(o, "reason", json_null());
    return o;
}

/* A MoE model's verdict in experts (admission_experts.c); null for a dense model. */
static json_t *admission_experts_json(const struct rf_admission_result *a)
{
    if (!a->has_experts)
        return json_null();
    json_t *o = json_object();
    json_object_set_new(o, "n_expert", json_integer(a->n_expert));
    json_object_set_new(o, "n_expert_used", json_integer(a->n_expert_used));
    json_object_set_new(o, "dense_bytes", rf_json_u64(true, a->expert_dense_bytes));
    json_object_set_new(o, "routed_bytes", rf_json_u64(true, a->expert_routed_bytes));
    json_object_set_new(o, "cache_experts", json_integer(a->cache_experts));
    json_object_set_new(o, "cache_bytes", rf_json_u64(true, a->expert_cache_bytes));
    json_object_set_new(o, "cache_minimum_fits", json_boolean(a->expert_cache_min));
    json_object_set_new(o, "dense_streams", json_boolean(a->expert_dense_streams));
    json_object_set_new(o, "stream_bytes_per_token", rf_json_u64(true, a->expert_stream_bytes));
    json_object_set_new(o, "hit_rate", json_real(a->expert_hit_rate));
    json_object_set_new(o, "hit_rate_basis",
                        json_string(a->expert_hit_observed ? "observed" : "uniform"));
    return o;
}

json_t *rf_report_admission_json(const struct rf_report *r)
{
    static const char *keys[] = {"outcome", "soft_target_bytes", NULL};
    const struct rf_admission_result *a = r->admission;
    json_t *o;

    if (!a) {
        o = rf_report_absent_section(
            r->admission_reason ? r->admission_reason : "no admission decision", keys);
        if (o) {
            json_object_set_new(o, "hard_limit", hard_limit_json(r));
            json_object_set_new(o, "kernel_verdict", verdict_json(r));
        }
        return o;
    }
    o = json_object();
    if (!o)
        return NULL;
    json_object_set_new(o, "outcome", json_string(rf_admission_outcome_name(a->outcome)));
    json_object_set_new(o, "cause", rf_json_str(rf_admission_cause_name(a->cause)));
    json_object_set_new(o, "mode", rf_json_str(rf_admission_mode_name(a->mode)));
    json_object_set_new(o, "phase", rf_json_str(rf_admission_phase_name(a->phase)));
    /* The decision from the GGUF header before the load, when one was made (and is not this). */
    const struct rf_admission_result *b = r->admission_before_load;
    json_object_set_new(o, "before_load",
                        b && b != a
                            ? json_pack("{s:s, s:s?, s:b, s:o, s:o}", "outcome",
                                        rf_admission_outcome_name(b->outcome), "cause",
                                        rf_admission_cause_name(b->cause), "refused", b->refused,
                                        "working_set_bytes",
                                        rf_json_u64(b->has_working_set, b->working_set_bytes),
                                        "reason", rf_json_str(b->reason))
                            : json_null());
    json_object_set_new(o, "refused", json_boolean(a->refused));
    json_object_set_new(o, "request_bytes", rf_json_u64(a->has_request, a->request_bytes));
    json_object_set_new(o, "growth_bytes", rf_json_u64(a->has_growth, a->growth_bytes));
    json_object_set_new(o, "anonymous_bytes", rf_json_u64(a->has_anonymous, a->anonymous_bytes));
    json_object_set_new(o, "working_set_bytes",
                        rf_json_u64(a->has_working_set, a->working_set_bytes));
    json_object_set_new(o, "file_in_memory", rf_json_str(a->file_in_memory));
    json_object_set_new(o, "mlock_requested", json_boolean(a->mlock_requested));
    json_object_set_new(o, "soft_target_bytes",
                        rf_json_u64(a->has_soft_target, a->soft_target_bytes));
    json_object_set_new(o, "excess_bytes", rf_json_u64(a->has_excess, a->excess_bytes));
    json_object_set_new(o, "excess_over",
                        a->excess_over == RF_ADMIT_BOUND_NONE
                            ? json_null()
                            : rf_json_str(rf_admission_bound_name(a->excess_over)));
    json_object_set_new(o, "excess_likely_anonymous", json_boolean(a->excess_likely_anonymous));
    json_object_set_new(o, "reclaimable_bytes",
                        rf_json_u64(a->has_reclaimable, a->reclaimable_bytes));
    json_object_set_new(o, "hard_limit_checked", json_boolean(a->hard_limit_checked));
    json_object_set_new(o, "projected_charge_bytes",
                        rf_json_u64(a->has_projected_charge, a->projected_charge_bytes));
    json_object_set_new(o, "hard_excess_bytes",
                        rf_json_u64(a->has_hard_excess, a->hard_excess_bytes));
    json_object_set_new(o, "high_excess_bytes",
                        rf_json_u64(a->has_high_excess, a->high_excess_bytes));
    json_object_set_new(o, "thrash", json_boolean(a->thrash));
    json_object_set_new(o, "working_set_fit_bytes",
                        rf_json_u64(a->has_working_set_fit, a->working_set_fit_bytes));
    json_object_set_new(o, "experts", admission_experts_json(a));
    json_object_set_new(o, "binding_cgroup",
                        a->has_binding ? rf_json_str(a->cgroups[a->binding].level.dir)
                                       : json_null());
    json_t *cgs = json_array();
    for (size_t i = 0; cgs && i < a->n_cgroups; i++)
        json_array_append_new(cgs, admission_cgroup_json(a, i));
    json_object_set_new(o, "cgroups", cgs);
    json_object_set_new(o, "cgroups_truncated", json_boolean(a->cgroups_truncated));
    json_object_set_new(o, "binding_level",
                        a->has_binding    ? json_string("cgroup")
                        : a->host_binding ? json_string("host")
                                          : json_null());
    json_object_set_new(o, "host", admission_host_json(a));
    json_object_set_new(o, "inputs", admission_inputs_json(a));
    json_object_set_new(o, "lock_note", a->lock_note[0] ? rf_json_str(a->lock_note) : json_null());
    json_object_set_new(o, "hard_limit", hard_limit_json(r));
    json_object_set_new(o, "kernel_verdict", verdict_json(r));
    json_t *unk = json_array();
    for (size_t i = 0; unk && i < a->n_unknown; i++)
        json_array_append_new(unk, rf_json_str(a->unknown_components[i]));
    json_object_set_new(o, "unknown_components", unk);
    json_object_set_new(o, "reason", rf_json_str(a->reason));
    return o;
}
