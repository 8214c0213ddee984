/*
 * The operation report (schema_version 1) and the inventory as JSON, built
 * with jansson. Byte counts are JSON integers; a figure that could not be
 * had is null with a reason beside it. Sections for features this version
 * does not run keep their keys, null, with a reason.
 */
#include "ramforge/report.h"
#include "core/report_json.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* jansson integers are signed 64-bit: larger values become null. */
static json_t *jbytes(bool has, uint64_t v)
{
    return has && v <= (uint64_t)INT64_MAX ? json_integer((json_int_t)v) : json_null();
}

static json_t *jstr(const char *s)
{
    return s ? json_string(s) : json_null();
}

void rf_token_fingerprint(const int32_t *tokens, size_t n, char out[32])
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        uint32_t v = (uint32_t)tokens[i];
        for (int b = 0; b < 4; b++)
            h = (h ^ ((v >> (8 * b)) & 0xff)) * 0x100000001b3ull;
    }
    snprintf(out, 32, "fnv1a64:%016llx", (unsigned long long)h);
}

static json_t *token_array(const int32_t *tokens, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++)
        json_array_append_new(a, json_integer(tokens[i]));
    return a;
}

static json_t *mapping_json(const struct rf_mapping_meta *m)
{
    char dev[32];
    snprintf(dev, sizeof(dev), "%02x:%02x", m->dev_major, m->dev_minor); /* as in maps */
    return json_pack("{s:I, s:s, s:o, s:s, s:o, s:b, s:o, s:o}", "index", (json_int_t)m->index,
                     "path", m->path, "file_size_bytes", jbytes(true, m->file_size_bytes), "device",
                     dev, "inode", jbytes(true, m->inode), "validated", m->validated,
                     "map_offset_bytes", jbytes(m->validated, m->map_offset_bytes),
                     "map_length_bytes", jbytes(m->validated, m->map_length_bytes));
}

static json_t *entry_json(const struct rf_inventory_entry *e)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    json_object_set_new(o, "generation", jbytes(true, e->key.generation));
    json_object_set_new(o, "index", json_integer(e->key.tensor_index));
    json_object_set_new(o, "name", json_string(e->name));
    json_object_set_new(o, "type", json_string(e->type_name));
    json_object_set_new(o, "file_backed", json_boolean(e->file_backed));
    json_object_set_new(o, "mapping_index",
                        e->mapping_index >= 0 ? json_integer(e->mapping_index) : json_null());
    json_object_set_new(o, "file_offset_bytes", jbytes(true, e->file_offset_bytes));
    json_object_set_new(o, "logical_bytes", jbytes(true, e->logical_bytes));
    json_object_set_new(o, "first_page", jbytes(e->file_backed, e->pages.first_page));
    json_object_set_new(o, "end_page", jbytes(e->file_backed, e->pages.end_page));
    json_object_set_new(o, "shared_page_bytes", jbytes(e->file_backed, e->shared_page_bytes));
    json_object_set_new(o, "unique_reclaimable_bytes",
                        jbytes(e->file_backed, e->unique_reclaimable_bytes));
    json_object_set_new(o, "access", json_string(rf_weight_access_name(e->access)));
    json_object_set_new(o, "eligibility", json_string(rf_eligibility_name(e->eligibility)));
    json_object_set_new(o, "confidence", json_string(rf_confidence_name(e->confidence)));
    return o;
}

int rf_inventory_to_json(const struct rf_inventory *inv, bool with_entries, json_t **out)
{
    const struct rf_inventory_totals *t = &inv->totals;
    json_t *o = json_object(), *maps = json_array(), *tot = json_object();

    if (!o || !maps || !tot)
        goto nomem;
    json_object_set_new(o, "generation", jbytes(true, inv->generation));
    json_object_set_new(o, "page_bytes", jbytes(true, inv->page_bytes));
    for (size_t i = 0; i < inv->n_mappings; i++) {
        json_t *m = mapping_json(&inv->mappings[i]);
        if (!m)
            goto nomem;
        json_array_append_new(maps, m);
    }
    json_object_set_new(o, "mappings", maps);
    maps = NULL;
    json_object_set_new(tot, "n_tensors", jbytes(true, t->n_tensors));
    json_object_set_new(tot, "n_file_backed", jbytes(true, t->n_file_backed));
    /* Which weights are repacked is known only where the access probe ran. */
    bool probed = false;
    for (size_t i = 0; i < inv->n && !probed; i++)
        probed = inv->entries[i].access != RF_ACCESS_UNKNOWN;
    json_object_set_new(tot, "n_anonymous", jbytes(probed, t->n_anonymous));
    json_object_set_new(tot, "n_eligible", jbytes(true, t->n_eligible));
    json_object_set_new(tot, "logical_bytes", jbytes(true, t->logical_bytes));
    json_object_set_new(tot, "file_backed_logical_bytes",
                        jbytes(true, t->file_backed_logical_bytes));
    json_object_set_new(tot, "anonymous_logical_bytes", jbytes(probed, t->anonymous_logical_bytes));
    json_object_set_new(tot, "mapped_virtual_bytes", jbytes(true, t->mapped_virtual_bytes));
    json_object_set_new(tot, "shared_page_bytes", jbytes(true, t->shared_page_bytes));
    json_object_set_new(tot, "unique_reclaimable_bytes", jbytes(true, t->unique_reclaimable_bytes));
    json_object_set_new(tot, "note",
                        json_string("logical and page-range figures from the GGUF tensor table, "
                                    "not residency; unique_reclaimable_bytes sums eligible "
                                    "entries and is an estimate; a tensor's shared_page_bytes "
                                    "counts each shared page for every tensor covering it, "
                                    "shared_page_bytes here counts distinct pages"));
    json_object_set_new(o, "totals", tot);
    tot = NULL;
    if (with_entries) {
        json_t *a = json_array();
        if (!a)
            goto nomem;
        json_object_set_new(o, "tensors", a);
        for (size_t i = 0; i < inv->n; i++) {
            json_t *e = entry_json(&inv->entries[i]);
            if (!e)
                goto nomem;
            json_array_append_new(a, e);
        }
    }
    *out = o;
    return 0;
nomem:
    json_decref(o);
    json_decref(maps);
    json_decref(tot);
    return -ENOMEM;
}

static json_t *ledger_json(const struct rf_ledger *l, const struct rf_reconciliation *rc)
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
            entries,
            json_pack("{s:s, s:o, s:s, s:s, s:s}", RF_REPORT_KEY_ENTRY_CATEGORY,
                      rf_ledger_category_name((enum rf_ledger_category)c),
                      RF_REPORT_KEY_ENTRY_VALUE, jbytes(e->has_value, e->value_bytes), "provenance",
                      rf_provenance_name(e->provenance), "source", e->source, "note", e->note));
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

static json_t *sample_json(const struct rf_residency_sample *s)
{
    json_t *o = json_pack(
        "{s:s, s:b, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "label",
        s->label ? s->label : "", "taken", s->taken, "process_rss_bytes",
        jbytes(s->has_process_rss, s->process_rss_bytes), "process_rss_peak_bytes",
        jbytes(s->has_process_rss_peak, s->process_rss_peak_bytes), "mapping_rss_bytes",
        jbytes(s->has_mapping, s->mapping_rss_bytes), "mapping_pss_bytes",
        jbytes(s->has_mapping_pss, s->mapping_pss_bytes), "mapping_source",
        s->mapping_source ? json_string(s->mapping_source) : json_null(), "cgroup_current_bytes",
        jbytes(s->has_cgroup_current, s->cgroup_current_bytes), "cgroup_peak_bytes",
        jbytes(s->has_cgroup_peak, s->cgroup_peak_bytes), "cgroup_events_high",
        jbytes(s->has_cgroup_events, s->cgroup_events_high), "cgroup_events_max",
        jbytes(s->has_cgroup_events, s->cgroup_events_max), "cgroup_events_oom",
        jbytes(s->has_cgroup_events, s->cgroup_events_oom), "cgroup_events_oom_kill",
        jbytes(s->has_cgroup_events, s->cgroup_events_oom_kill));
    if (o && s->has_mapping && !s->has_mapping_pss)
        json_object_set_new(o, "mapping_reason", json_string(RF_REPORT_PSS_SKIPPED));
    else if (o && s->mapping_not_read)
        json_object_set_new(o, "mapping_reason", json_string(RF_REPORT_MAPPING_SKIPPED));
    return o;
}

/* {"<key>": null, ..., "reason": reason} for a section this run does not fill. */
static json_t *absent_section(const char *reason, const char *const *keys)
{
    json_t *o = json_object();
    for (; o && *keys; keys++)
        json_object_set_new(o, *keys, json_null());
    if (o)
        json_object_set_new(o, "reason", json_string(reason));
    return o;
}

/* What the inventory's access values state under basis b, and what was not observed. */
static const char *access_note(enum rf_access_basis b)
{
    switch (b) {
    case RF_ACCESS_BASIS_GRAPH_PROBE:
        return "classified by the sources of a one-token decode graph (cb_eval ask phase): "
               "file_backed and anonymous are where the graph read each weight, unreferenced "
               "the weights it never named";
    case RF_ACCESS_BASIS_PLACEMENT:
        return "classified by where llama.cpp placed each tensor the model holds (data pointer "
               "inside the file mapping: file_backed; elsewhere: anonymous, a repacked copy "
               "every graph reads instead of the file), without decoding. Whether a graph reads "
               "a held weight at all was not observed: unreferenced is only a file tensor the "
               "model holds none of (run --access-probe for the graph probe, one decode)";
    case RF_ACCESS_BASIS_NONE:
        break;
    }
    return "the weights were not classified: every access is unknown";
}

static json_t *model_json(const struct rf_report *r)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    json_object_set_new(o, "path", jstr(r->model_path));
    json_object_set_new(o, "desc", jstr(r->model_desc));
    json_object_set_new(o, "file_size_bytes", jbytes(true, r->model_file_size_bytes));
    json_object_set_new(o, "filesystem", rf_fs_to_json(r->model_fs_magic));
    /* No instance: the model was not loaded (a refusal before the load); no native figures. */
    bool loaded = r->instance_id != 0;
    json_object_set_new(o, "native_size_bytes", jbytes(loaded, r->model_native_size_bytes));
    json_object_set_new(o, "n_params", jbytes(loaded, r->model_n_params));
    json_object_set_new(o, "instance_id", jbytes(loaded, r->instance_id));
    json_object_set_new(o, "access_probed", json_boolean(r->access_probed));
    json_object_set_new(o, "access_basis", jstr(rf_access_basis_name(r->access_basis)));
    json_object_set_new(o, "access_note", json_string(access_note(r->access_basis)));
    if (r->inventory) {
        json_t *inv;
        if (rf_inventory_to_json(r->inventory, false, &inv) < 0) {
            json_decref(o);
            return NULL;
        }
        json_object_set_new(o, "inventory_generation", jbytes(true, r->inventory->generation));
        json_object_set_new(o, "inventory", inv);
    } else {
        json_object_set_new(o, "inventory_generation", json_null());
        json_object_set_new(o, "inventory", json_null());
        json_object_set_new(o, "reason",
                            json_string(r->not_built_reason ? r->not_built_reason : "not built"));
    }
    return o;
}

static json_t *timing_json(const struct rf_timing *t)
{
    json_t *o = json_object();
    for (int k = 0; o && k < RF_TIMER_N; k++)
        json_object_set_new(o, rf_timer_name((enum rf_timer)k),
                            t ? jbytes(t->has[k], t->ns[k]) : json_null());
    if (o)
        json_object_set_new(o, "note",
                            json_string("nanoseconds; nested timers are not summed; end_to_end "
                                        "runs from command entry to the end of the work and "
                                        "excludes report serialization; null: stage not run"));
    return o;
}

static json_t *jrecon(struct rf_recon_value v)
{
    return v.has_value ? json_integer(v.value) : json_null();
}

static json_t *hard_limit_json(const struct rf_report *r)
{
    json_t *hard = json_object();
    if (!hard)
        return NULL;
    json_object_set_new(hard, "cgroup_version", jstr(r->cgroup_version));
    json_object_set_new(hard, "cgroup_dir", jstr(r->cgroup_dir));
    json_object_set_new(
        hard, "limit_bytes",
        jbytes(r->has_cgroup_limit && !r->cgroup_limit_unlimited, r->cgroup_limit_bytes));
    json_object_set_new(hard, "unlimited",
                        r->has_cgroup_limit ? json_boolean(r->cgroup_limit_unlimited)
                                            : json_null());
    return hard;
}

static json_t *policy_json(const struct rf_report *r)
{
    json_t *o = json_object();
    bool has_soft = r->has_target && r->target_bytes > r->reserve_bytes;
    if (!o)
        return NULL;
    json_object_set_new(o, "profile", jstr(r->policy));
    json_object_set_new(o, "plans", json_boolean(r->policy_plans));
    json_object_set_new(o, "mutates", json_boolean(r->policy_mutates));
    json_object_set_new(o, "target_bytes", jbytes(r->has_target, r->target_bytes));
    json_object_set_new(o, "reserve_bytes", jbytes(true, r->reserve_bytes));
    json_object_set_new(o, "soft_target_bytes",
                        jbytes(has_soft, has_soft ? r->target_bytes - r->reserve_bytes : 0));
    json_object_set_new(o, "release_mode", jstr(r->release_mode));
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
    json_object_set_new(o, "bytes", jbytes(f->has && !f->unlimited, f->bytes));
    if (limit)
        json_object_set_new(o, "unlimited", f->has ? json_boolean(f->unlimited) : json_null());
    json_object_set_new(o, "source", json_string(f->source));
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
    json_object_set_new(o, "dir", json_string(l->dir));
    json_object_set_new(o, "binding", json_boolean(a->has_binding && a->binding == i));
    json_object_set_new(o, "enforced", json_boolean(c->enforced));
    json_object_set_new(o, "checked", json_boolean(c->checked));
    json_object_set_new(o, "limit", cgroup_figure_json(&l->limit, true));
    json_object_set_new(o, "high", cgroup_figure_json(&l->high, true));
    json_object_set_new(o, "usage", cgroup_figure_json(&l->usage, false));
    json_object_set_new(o, "inactive_file", cgroup_figure_json(&l->inactive_file, false));
    json_object_set_new(o, "reclaimable_bytes", jbytes(c->checked, c->reclaimable_bytes));
    json_object_set_new(o, "room_bytes", jbytes(c->checked, c->room_bytes));
    json_object_set_new(o, "projected_bytes", jbytes(c->checked, c->projected_bytes));
    json_object_set_new(o, "fits", jbool_if(c->checked, c->fits));
    json_object_set_new(o, "run_room_bytes", jbytes(c->checked, c->run_room_bytes));
    json_object_set_new(o, "working_set_fits",
                        jbool_if(c->working_set_checked, c->working_set_fits));
    json_object_set_new(o, "high_fits", jbool_if(c->high_checked, c->high_fits));
    return o;
}

static json_t *admission_inputs_json(const struct rf_admission_result *a)
{
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < a->n_records; i++) {
        const struct rf_admission_record *rec = &a->records[i];
        json_array_append_new(arr, json_pack("{s:s, s:o, s:s, s:s}", "name", rec->name, "bytes",
                                             jbytes(rec->has, rec->bytes), "provenance",
                                             rf_provenance_name(rec->provenance), "source",
                                             rec->source));
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
        return absent_section(r->cgroup_verdict_reason ? r->cgroup_verdict_reason
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
        json_array_append_new(arr,
                              json_pack("{s:s, s:o, s:o, s:o, s:o, s:o}", "dir", v->levels[i].dir,
                                        "failcnt", jbytes(d->has_failcnt, d->failcnt), "oom_kill",
                                        jbytes(d->has_oom_kill, d->oom_kill), "events_high",
                                        jbytes(d->has_events_high, d->events_high), "events_max",
                                        jbytes(d->has_events_max, d->events_max), "events_oom",
                                        jbytes(d->has_events_oom, d->events_oom)));
    }
    json_object_set_new(o, "cgroups", arr);
    json_object_set_new(o, "hit_limit", json_boolean(v->hit_limit));
    json_object_set_new(o, "oom_killed", json_boolean(v->oom_killed));
    json_object_set_new(o, "throttled", json_boolean(v->throttled));
    json_object_set_new(o, "complete", json_boolean(v->complete));
    json_object_set_new(o, "reason", json_null());
    return o;
}

static json_t *admission_json(const struct rf_report *r)
{
    static const char *keys[] = {"outcome", "soft_target_bytes", NULL};
    const struct rf_admission_result *a = r->admission;
    json_t *o;

    if (!a) {
        o = absent_section(r->admission_reason ? r->admission_reason : "no admission decision",
                           keys);
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
    json_object_set_new(o, "cause", jstr(rf_admission_cause_name(a->cause)));
    json_object_set_new(o, "mode", jstr(rf_admission_mode_name(a->mode)));
    json_object_set_new(o, "phase", jstr(rf_admission_phase_name(a->phase)));
    /* The decision from the GGUF header before the load, when one was made (and is not this). */
    const struct rf_admission_result *b = r->admission_before_load;
    json_object_set_new(o, "before_load",
                        b && b != a ? json_pack("{s:s, s:s?, s:b, s:o, s:s}", "outcome",
                                                rf_admission_outcome_name(b->outcome), "cause",
                                                rf_admission_cause_name(b->cause), "refused",
                                                b->refused, "working_set_bytes",
                                                jbytes(b->has_working_set, b->working_set_bytes),
                                                "reason", b->reason)
                                    : json_null());
    json_object_set_new(o, "refused", json_boolean(a->refused));
    json_object_set_new(o, "request_bytes", jbytes(a->has_request, a->request_bytes));
    json_object_set_new(o, "growth_bytes", jbytes(a->has_growth, a->growth_bytes));
    json_object_set_new(o, "anonymous_bytes", jbytes(a->has_anonymous, a->anonymous_bytes));
    json_object_set_new(o, "working_set_bytes", jbytes(a->has_working_set, a->working_set_bytes));
    json_object_set_new(o, "soft_target_bytes", jbytes(a->has_soft_target, a->soft_target_bytes));
    json_object_set_new(o, "excess_bytes", jbytes(a->has_excess, a->excess_bytes));
    json_object_set_new(o, "excess_over",
                        a->excess_over == RF_ADMIT_BOUND_NONE
                            ? json_null()
                            : jstr(rf_admission_bound_name(a->excess_over)));
    json_object_set_new(o, "excess_likely_anonymous", json_boolean(a->excess_likely_anonymous));
    json_object_set_new(o, "reclaimable_bytes", jbytes(a->has_reclaimable, a->reclaimable_bytes));
    json_object_set_new(o, "hard_limit_checked", json_boolean(a->hard_limit_checked));
    json_object_set_new(o, "projected_charge_bytes",
                        jbytes(a->has_projected_charge, a->projected_charge_bytes));
    json_object_set_new(o, "hard_excess_bytes", jbytes(a->has_hard_excess, a->hard_excess_bytes));
    json_object_set_new(o, "high_excess_bytes", jbytes(a->has_high_excess, a->high_excess_bytes));
    json_object_set_new(o, "thrash", json_boolean(a->thrash));
    json_object_set_new(o, "working_set_fit_bytes",
                        jbytes(a->has_working_set_fit, a->working_set_fit_bytes));
    json_object_set_new(o, "binding_cgroup",
                        a->has_binding ? json_string(a->cgroups[a->binding].level.dir)
                                       : json_null());
    json_t *cgs = json_array();
    for (size_t i = 0; cgs && i < a->n_cgroups; i++)
        json_array_append_new(cgs, admission_cgroup_json(a, i));
    json_object_set_new(o, "cgroups", cgs);
    json_object_set_new(o, "cgroups_truncated", json_boolean(a->cgroups_truncated));
    json_object_set_new(o, "inputs", admission_inputs_json(a));
    json_object_set_new(o, "lock_note", a->lock_note[0] ? json_string(a->lock_note) : json_null());
    json_object_set_new(o, "hard_limit", hard_limit_json(r));
    json_object_set_new(o, "kernel_verdict", verdict_json(r));
    json_t *unk = json_array();
    for (size_t i = 0; unk && i < a->n_unknown; i++)
        json_array_append_new(unk, json_string(a->unknown_components[i]));
    json_object_set_new(o, "unknown_components", unk);
    json_object_set_new(o, "reason", json_string(a->reason));
    return o;
}

#define RF_REPORT_MAX_SELECTED_NAMES 64

static json_t *plan_json(const struct rf_report *r)
{
    static const char *keys[] = {"profile_used", "selected_count", "selected_bytes", NULL};
    const struct rf_plan *p = r->plan;
    json_t *o, *names;

    if (!p)
        return absent_section(r->plan_reason ? r->plan_reason : "no plan", keys);
    o = json_object();
    names = json_array();
    if (!o || !names) {
        json_decref(o);
        json_decref(names);
        return NULL;
    }
    json_object_set_new(o, "profile_used", json_boolean(p->profile_used));
    json_object_set_new(o, "selected_count", jbytes(true, p->n_selected));
    json_object_set_new(o, "selected_bytes", jbytes(true, p->selected_logical_bytes));
    json_object_set_new(o, "boundary", jstr(r->plan_boundary));
    json_object_set_new(o, "applied", json_boolean(p->applied_profile));
    json_object_set_new(o, "generation", jbytes(true, p->generation));
    json_object_set_new(o, "candidate_count", jbytes(true, p->n_candidates));
    json_object_set_new(o, "soft_target_bytes", jbytes(p->has_soft_target, p->soft_target_bytes));
    json_object_set_new(o, "release_bytes", jbytes(true, p->release_bytes));
    json_object_set_new(o, "shared_bytes_protected", jbytes(true, p->shared_bytes_protected));
    json_object_set_new(o, "estimated_resident_after_bytes",
                        jbytes(p->has_estimated_resident_after, p->estimated_resident_after_bytes));
    json_object_set_new(o, "target_met", json_boolean(p->target_met));
    for (size_t i = 0; i < p->n_selected && i < RF_REPORT_MAX_SELECTED_NAMES; i++) {
        const struct rf_inventory_entry *e = NULL;
        struct rf_resource_key key = {p->generation, p->selected[i]};
        if (r->inventory && rf_inventory_lookup(r->inventory, key, &e) == 0)
            json_array_append_new(names, json_string(e->name));
    }
    json_object_set_new(o, "selected", names);
    json_object_set_new(o, "selected_truncated",
                        json_boolean(p->n_selected > RF_REPORT_MAX_SELECTED_NAMES));
    json_object_set_new(o, "reason", json_string(p->reason));
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
            json_pack("{s:s?, s:o, s:o, s:o, s:o, s:b, s:b, s:s}", "boundary",
                      r->applications[i].boundary, "selected_count", jbytes(true, q->n_selected),
                      "selected_bytes", jbytes(true, q->selected_logical_bytes), "release_bytes",
                      jbytes(true, q->release_bytes), "shared_bytes_protected",
                      jbytes(true, q->shared_bytes_protected), "profile_used", q->profile_used,
                      "target_met", q->target_met, "reason", q->reason));
    }
    json_object_set_new(o, "plans", all);
    json_object_set_new(o, "selected_count_all_plans", jbytes(true, total));
    return o;
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
    json_object_set_new(b, "boundary", jstr(a->boundary));
    json_object_set_new(b, "attempted", json_boolean(a->attempted));
    /* A boundary not attempted has no figures, only its reason (never null). */
    json_object_set_new(b, "refused_reason",
                        a->attempted
                            ? json_null()
                            : json_string(a->refused_reason ? a->refused_reason : "not attempted"));
    json_object_set_new(b, "requested_bytes", jbytes(a->attempted, a->requested_bytes));
    json_object_set_new(b, "accepted_bytes", jbytes(a->attempted, a->accepted_bytes));
    json_object_set_new(b, "failed_ranges", jbytes(a->attempted, a->n_failed));
    json_object_set_new(b, "protected_bytes", jbytes(a->attempted, a->protected_bytes));
    json_object_set_new(b, "error",
                        a->attempted && a->first_error ? json_string(strerror(-a->first_error))
                                                       : json_null());
    json_object_set_new(b, "observed_mapping_delta_bytes",
                        jrecon(attempted_or_null(a, a->mapping_delta)));
    json_object_set_new(b, "observed_rss_delta_bytes", jrecon(attempted_or_null(a, a->rss_delta)));
    json_object_set_new(b, "observed_cgroup_delta_bytes",
                        jrecon(attempted_or_null(a, a->cgroup_delta)));
}

static json_t *application_json(const struct rf_report *r)
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
        char why[512] = "";
        size_t at = 0;
        for (size_t i = 0; i < r->n_applications && at < sizeof(why); i++) {
            const struct rf_report_application *a = &r->applications[i];
            int len = snprintf(why + at, sizeof(why) - at, "%s%s%s%s", at ? "; " : "",
                               a->boundary ? a->boundary : "", a->boundary ? ": " : "",
                               a->refused_reason ? a->refused_reason : "not attempted");
            at += len > 0 ? (size_t)len : 0;
        }
        return absent_section(
            r->n_applications ? why : "no release was requested (the policy does not mutate)",
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
    json_object_set_new(o, "requested_bytes", jbytes(req != UINT64_MAX, req));
    json_object_set_new(o, "accepted_bytes", jbytes(acc != UINT64_MAX, acc));
    json_object_set_new(o, "observed_mapping_delta_bytes", jrecon(md));
    json_object_set_new(o, "observed_cgroup_delta_bytes", jrecon(cd));
    json_object_set_new(o, "release_mode", jstr(r->release_mode));
    json_object_set_new(o, "boundaries", list);
    json_object_set_new(o, "boundaries_dropped", json_integer((json_int_t)skip));
    json_object_set_new(o, "note",
                        json_string("requested and accepted bytes are page bytes submitted to "
                                    "and accepted by madvise, not reclamation; deltas are "
                                    "measured after - before each release (negative = dropped); "
                                    "the cgroup charge may not move when mapping RSS falls"));
    return o;
}

static json_t *native_json(const struct rf_report *r)
{
    const struct rf_native_lifetime *n = &r->native;
    if (!r->has_native)
        return json_pack("{s:n, s:o, s:n, s:n, s:n, s:n, s:n, s:n, s:s}", "contract_version",
                         "instance_id", jbytes(r->instance_id != 0, r->instance_id), "quiescent",
                         "in_flight_contexts", "active_contexts", "execution_generation",
                         "context_execution_generation", "observed_at", "reason",
                         "no lifetime observation was taken");
    return json_pack("{s:o, s:o, s:b, s:I, s:I, s:o, s:o, s:o, s:o}", "contract_version",
                     n->has_contract ? json_integer(n->contract_version) : json_null(),
                     "instance_id", jbytes(true, n->instance_id), "quiescent", n->quiescent,
                     "in_flight_contexts", (json_int_t)n->in_flight_contexts, "active_contexts",
                     (json_int_t)n->active_contexts, "execution_generation",
                     jbytes(true, n->execution_generation), "context_execution_generation",
                     jbytes(r->context_execution_generation > 0, r->context_execution_generation),
                     "observed_at", jstr(r->native_boundary), "reason",
                     n->has_contract
                         ? json_null()
                         : json_string("the native layer exposes no lifetime contract"));
}

static json_t *lifetime_json(const struct rf_report *r)
{
    static const char *keys[] = {"state_counts", NULL};
    uint64_t counts[RF_LT_N];
    json_t *o, *c, *failed;

    if (!r->lifetime)
        return absent_section("resource lifetimes were not tracked (policy off)", keys);
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
                            jbytes(true, counts[s]));
    for (size_t i = 0; i < r->lifetime->n && json_array_size(failed) < 32; i++) {
        if (r->lifetime->states[i] != RF_LT_RELEASE_FAILED || !r->inventory || i >= r->inventory->n)
            continue;
        int err = rf_lifetime_error(r->lifetime, i);
        json_array_append_new(failed,
                              json_pack("{s:s, s:o}", "name", r->inventory->entries[i].name,
                                        "error", err ? json_string(strerror(-err)) : json_null()));
    }
    uint64_t past = 0;
    for (size_t i = 0; i < r->lifetime->n; i++)
        past += r->lifetime->past_errors[i] != 0;
    json_object_set_new(o, "state_counts", c);
    json_object_set_new(o, "release_failed", failed);
    json_object_set_new(o, "resources_failed_before", jbytes(true, past));
    json_object_set_new(o, "invalidated_resources", jbytes(true, r->invalidated_resources));
    json_object_set_new(o, "resources", jbytes(true, r->lifetime->n));
    return o;
}

static json_t *staging_json(const struct rf_report *r, const char **keys)
{
    const struct rf_staging_plan *p = r->staging;
    if (!p)
        return absent_section(
            r->staging_reason ? r->staging_reason : "no staging was planned or requested", keys);
    json_t *o = json_object();
    if (!o)
        return NULL;
    json_object_set_new(o, "budget_bytes", jbytes(true, p->budget_bytes));
    json_object_set_new(o, "selected_bytes", jbytes(true, p->selected_bytes));
    json_object_set_new(o, "accepted_bytes",
                        jbytes(r->staging_attempted, r->staging_accepted_bytes));
    json_object_set_new(o, "observed_mapping_delta_bytes", jrecon(r->staging_mapping_delta));
    json_object_set_new(o, "candidate_count", jbytes(true, p->n_candidates));
    json_object_set_new(o, "staged_count", jbytes(true, p->n_staged));
    json_object_set_new(o, "partial_count", jbytes(true, p->n_partial));
    json_object_set_new(o, "skipped_count", jbytes(true, p->n_skipped));
    json_object_set_new(o, "candidate_bytes", jbytes(true, p->candidate_bytes));
    json_object_set_new(o, "overlap_bytes_avoided", jbytes(true, p->overlap_bytes_avoided));
    json_object_set_new(o, "skipped_bytes", jbytes(true, p->skipped_bytes));
    json_object_set_new(o, "order_used", json_boolean(p->order_used));
    json_object_set_new(o, "attempted", json_boolean(r->staging_attempted));
    json_object_set_new(o, "refused_reason",
                        r->staging_attempted ? json_null() : jstr(r->staging_refused_reason));
    json_object_set_new(o, "chunk_bytes", jbytes(r->staging_attempted, r->staging_chunk_bytes));
    json_object_set_new(o, "calls", jbytes(r->staging_attempted, r->staging_calls));
    json_object_set_new(o, "failed_calls", jbytes(r->staging_attempted, r->staging_failed_calls));
    json_object_set_new(o, "error",
                        r->staging_error ? json_string(strerror(-r->staging_error)) : json_null());
    json_object_set_new(o, "staged_tensor_pages_in_page_cache_before",
                        jrecon(r->staging_cached_before));
    json_object_set_new(o, "staged_tensor_pages_in_page_cache_after",
                        jrecon(r->staging_cached_after));
    json_object_set_new(o, "staged_tensor_pages_sampled", jrecon(r->staging_sampled_pages));
    json_object_set_new(o, "reason", json_string(p->reason));
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
            json_array_append_new(a, json_string(e->name));
    }
    return a;
}

static json_t *profile_json(const struct rf_report *r, const char **keys)
{
    if (!r->profile_source)
        return absent_section(
            r->profile_reason ? r->profile_reason : "no access profile was available", keys);
    json_t *o = json_object();
    if (!o)
        return NULL;
    json_object_set_new(o, "source", json_string(r->profile_source));
    json_object_set_new(o, "profile_used",
                        r->plan ? json_boolean(r->plan->profile_used) : json_false());
    json_object_set_new(o, "complete", json_boolean(r->dispatch && r->dispatch->complete));
    json_object_set_new(o, "generation",
                        r->inventory ? jbytes(true, r->inventory->generation) : json_null());
    json_object_set_new(o, "resources", jbytes(true, r->n_profile_order));
    json_object_set_new(o, "order",
                        json_string("coldest first: never dispatched, then by "
                                    "latest first use in graph order"));
    json_object_set_new(o, "access_names",
                        index_names(r->inventory, r->profile_order, r->n_profile_order));
    json_object_set_new(o, "access_names_truncated",
                        json_boolean(r->n_profile_order > RF_REPORT_MAX_ACCESS_NAMES));
    return o;
}

static json_t *dispatch_json(const struct rf_report *r)
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
    json_object_set_new(o, "events", jbytes(true, d->events));
    json_object_set_new(o, "dropped_events", jbytes(true, d->dropped_events));
    json_object_set_new(o, "complete", json_boolean(d->complete));
    json_object_set_new(o, "source_refs", jbytes(true, d->source_refs));
    json_object_set_new(o, "attributed_refs", jbytes(true, d->attributed_refs));
    json_object_set_new(o, "unattributed_refs", jbytes(true, d->unattributed_refs));
    json_object_set_new(o, "weight_refs", jbytes(true, d->weight_refs));
    json_object_set_new(o, "unattributed_weight_refs", jbytes(true, d->unattributed_weight_refs));
    json_object_set_new(o, "tensors_named", jbytes(true, d->tensors_named));
    json_object_set_new(o, "first_use", first ? first : json_array());
    json_object_set_new(o, "first_use_truncated",
                        json_boolean(n_named > RF_REPORT_MAX_ACCESS_NAMES));
    json_object_set_new(o, "caveat", json_string(d->caveat));
    const struct rf_dispatch_sampling *sp = &d->sampling;
    json_object_set_new(
        o, "pre_dispatch_sampling",
        json_pack("{s:b, s:b, s:o, s:o, s:o, s:o, s:o, s:o, s:{s:o, s:o, s:o, s:o, s:o, s:o}, s:s}",
                  "enabled", sp->enabled, "sampling_complete", sp->sampling_complete,
                  "max_pages_per_source", jbytes(true, sp->max_pages_per_source), "samples",
                  jbytes(true, sp->samples), "pages_inspected", jbytes(true, sp->pages_inspected),
                  "pages_resident", jbytes(true, sp->pages_resident), "pages_nonresident",
                  jbytes(true, sp->pages_nonresident), "pages_unknown",
                  jbytes(true, sp->pages_unknown), "by_status", "complete",
                  jbytes(true, sp->complete), "partial", jbytes(true, sp->partial), "truncated",
                  jbytes(true, sp->truncated), "missing", jbytes(true, sp->missing), "failed",
                  jbytes(true, sp->failed), "disabled", jbytes(true, sp->disabled), "note",
                  sp->note ? sp->note : RF_DISPATCH_SAMPLING_NOTE));
    return o;
}

int rf_report_to_json(const struct rf_report *r, json_t **out)
{
    static const char *staging_keys[] = {"budget_bytes", "selected_bytes", "accepted_bytes",
                                         "observed_mapping_delta_bytes", NULL};
    static const char *profile_keys[] = {"source", "profile_used", NULL};
    struct rf_reconciliation own_rc;
    const struct rf_reconciliation *rc = r->reconciliation;
    char fp[32];
    json_t *doc = json_object();

    if (!doc)
        return -ENOMEM;
    json_object_set_new(doc, "schema_version", json_integer(RF_REPORT_SCHEMA_VERSION));
    json_object_set_new(
        doc, "operation",
        json_pack("{s:s, s:o, s:o, s:o}", "scope", r->scope ? r->scope : "operation", "index",
                  jbytes(r->operation_index > 0, r->operation_index), "operations",
                  jbytes(true, r->n_operations), "dropped", jbytes(true, r->operations_dropped)));
    json_object_set_new(doc, "kind", json_string(RF_REPORT_KIND));
    json_object_set_new(doc, "ramforge_version", jstr(r->ramforge_version));
    json_object_set_new(doc, "llama_cpp_version", jstr(r->llama_cpp_version));
    json_object_set_new(doc, "model", model_json(r));
    json_object_set_new(doc, "policy", policy_json(r));
    json_object_set_new(doc, "admission", admission_json(r));
    json_object_set_new(doc, "plan", plan_json(r));
    if (r->ledger && !rc) {
        /* A ledger without its reconciliation: derive it, as the caller would have. */
        rf_ledger_reconcile(r->ledger, r->inventory != NULL,
                            r->inventory ? r->inventory->totals.mapped_virtual_bytes : 0, &own_rc);
        rc = &own_rc;
    }
    json_object_set_new(
        doc, RF_REPORT_KEY_LEDGER,
        r->ledger ? ledger_json(r->ledger, rc)
                  : absent_section(
                        r->not_built_reason ? r->not_built_reason : "not built",
                        (const char *[]){RF_REPORT_KEY_LEDGER_ENTRIES, "reconciliation", NULL}));
    json_object_set_new(doc, "staging", staging_json(r, staging_keys));
    json_object_set_new(doc, "application", application_json(r));
    json_object_set_new(doc, "native", native_json(r));
    json_object_set_new(doc, "lifetime", lifetime_json(r));
    json_t *prof = profile_json(r, profile_keys);
    if (prof)
        json_object_set_new(prof, "persisted", rf_profile_persisted_json(r));
    json_object_set_new(doc, "profile", prof);
    json_object_set_new(doc, "prediction", rf_prediction_json(r));
    json_object_set_new(doc, "streaming", rf_stream_report_json(r->streaming));

    /* The newest RF_REPORT_MAX_SAMPLES taken samples, in order; the older ones counted. */
    json_t *res = json_object(), *samples = json_array();
    size_t n_taken = 0, skip;
    for (size_t i = 0; i < r->n_samples; i++)
        n_taken += r->samples[i].taken;
    skip = n_taken > RF_REPORT_MAX_SAMPLES ? n_taken - RF_REPORT_MAX_SAMPLES : 0;
    for (size_t i = 0, seen = 0; res && samples && i < r->n_samples; i++)
        if (r->samples[i].taken && seen++ >= skip)
            json_array_append_new(samples, sample_json(&r->samples[i]));
    json_object_set_new(res, "samples", samples);
    json_object_set_new(res, "samples_dropped", json_integer((json_int_t)skip));
    json_t *snap = NULL;
    if (r->page_snapshot && rf_residency_snapshot_to_json(r->page_snapshot, true, &snap) < 0) {
        json_decref(doc);
        return -ENOMEM;
    }
    if (snap)
        json_object_set_new(snap, "note",
                            json_string("resident_pages are pages in the page cache (mincore), "
                                        "whether or not this process maps them: a page released "
                                        "with MADV_DONTNEED stays in the page cache; pages mapped "
                                        "in this process are FileBackedResident (smaps Rss)"));
    json_object_set_new(res, "page_snapshot", snap ? snap : json_null());
    json_t *fc = json_object();
    if (fc) {
        json_object_set_new(fc, "cached_pages", jbytes(r->has_file_cache, r->file_cached_pages));
        json_object_set_new(fc, "page_bytes", jbytes(r->has_file_cache, r->file_cache_page_bytes));
        json_object_set_new(fc, "source", jstr(r->file_cache_source));
        json_object_set_new(fc, "note",
                            json_string("pages of the whole model file in the page cache "
                                        "(source: how they were counted), whether or not this "
                                        "process maps them; not mapping RSS"));
    }
    json_object_set_new(res, "file_page_cache", fc);
    json_object_set_new(res, "dispatch", dispatch_json(r));
    json_object_set_new(res, "reason",
                        snap ? json_null()
                             : json_string(r->page_snapshot_reason ? r->page_snapshot_reason
                                                                   : "no page snapshot was taken"));
    json_object_set_new(doc, "residency", res);
    json_object_set_new(doc, RF_REPORT_KEY_TIMING, timing_json(r->timing));

    rf_token_fingerprint(r->tokens, r->n_tokens, fp);
    json_object_set_new(
        doc, RF_REPORT_KEY_OUTPUT,
        json_pack("{s:I, s:I, s:s, s:o, s:o, s:s, s:I, s:I, s:I}", "n_prompt_tokens",
                  (json_int_t)r->n_prompt, RF_REPORT_KEY_N_GENERATED, (json_int_t)r->n_tokens,
                  RF_REPORT_KEY_FINGERPRINT, fp, "prompt_token_ids",
                  token_array(r->prompt_tokens, r->n_prompt), "token_ids",
                  token_array(r->tokens, r->n_tokens), "text", r->text ? r->text : "", "n_ctx",
                  (json_int_t)r->n_ctx, "n_threads", (json_int_t)r->n_threads, "seed",
                  (json_int_t)r->seed));
    /* verify_session sits inside output: a failure to add it is not caught below. */
    json_t *verify = json_object();
    char vfp[32];
    if (!verify) {
        json_decref(doc);
        return -ENOMEM;
    }
    rf_token_fingerprint(r->verify_tokens, r->n_verify_tokens, vfp);
    json_object_set_new(verify, "run", json_boolean(r->verified));
    json_object_set_new(verify, "token_ids",
                        r->verified ? token_array(r->verify_tokens, r->n_verify_tokens)
                                    : json_null());
    json_object_set_new(verify, RF_REPORT_KEY_FINGERPRINT,
                        r->verified ? json_string(vfp) : json_null());
    json_object_set_new(verify, "tokens_identical",
                        r->verified ? json_boolean(r->verify_tokens_equal) : json_null());
    if (json_object_size(verify) != 4) {
        json_decref(verify);
        json_decref(doc);
        return -ENOMEM;
    }
    /* set_new takes verify even when it fails (output NULL included) */
    if (json_object_set_new(json_object_get(doc, RF_REPORT_KEY_OUTPUT), "verify_session", verify) <
        0) {
        json_decref(doc);
        return -ENOMEM;
    }

    json_t *w = json_array();
    for (size_t i = 0; w && i < r->n_warnings; i++)
        json_array_append_new(w, json_string(r->warnings[i]));
    json_object_set_new(doc, "warnings", w);

    /* Any NULL above (allocation failure) left a key unset. */
    static const char *required[] = {"schema_version",
                                     "kind",
                                     "operation",
                                     "ramforge_version",
                                     "llama_cpp_version",
                                     "model",
                                     "policy",
                                     "admission",
                                     "plan",
                                     RF_REPORT_KEY_LEDGER,
                                     "staging",
                                     "application",
                                     "native",
                                     "lifetime",
                                     "profile",
                                     "residency",
                                     RF_REPORT_KEY_TIMING,
                                     RF_REPORT_KEY_OUTPUT,
                                     "warnings"};
    for (size_t i = 0; i < sizeof(required) / sizeof(required[0]); i++) {
        if (!json_object_get(doc, required[i])) {
            json_decref(doc);
            return -ENOMEM;
        }
    }
    *out = doc;
    return 0;
}

static int emit_text(int fd, void *text)
{
    return rf_write_all(fd, text, strlen(text));
}

int rf_file_write_text(const char *path, const char *text)
{
    if (!path || !text)
        return -EINVAL;
    return rf_file_write_atomic(path, emit_text, (void *)text);
}

/* The document as text, then written whole: a short write's reason (ENOSPC) is kept. */
static int emit_json(int fd, void *doc)
{
    char *text = json_dumps(doc, JSON_INDENT(2) | JSON_SORT_KEYS);
    int rc;

    if (!text)
        return -ENOMEM;
    rc = rf_write_all(fd, text, strlen(text));
    if (rc == 0)
        rc = rf_write_all(fd, "\n", 1);
    free(text);
    return rc;
}

int rf_json_write_file(json_t *doc, const char *path)
{
    return rf_file_write_atomic(path, emit_json, doc);
}
