/*
 * The report's model section and the inventory as JSON (ramforge inspect
 * --json and the report's model.inventory): mappings, totals and, on
 * request, one object per tensor. Part of the report writer (report.c).
 */
#include "report_sections.h"

#include <errno.h>
#include <stdio.h>

static json_t *mapping_json(const struct rf_mapping_meta *m)
{
    char dev[32];
    snprintf(dev, sizeof(dev), "%02x:%02x", m->dev_major, m->dev_minor); /* as in maps */
    return json_pack("{s:I, s:o, s:o, s:s, s:o, s:b, s:o, s:o}", "index", (json_int_t)m->index,
                     "path", rf_json_str(m->path), "file_size_bytes",
                     rf_json_u64(true, m->file_size_bytes), "device", dev, "inode",
                     rf_json_u64(true, m->inode), "validated", m->validated, "map_offset_bytes",
                     rf_json_u64(m->validated, m->map_offset_bytes), "map_length_bytes",
                     rf_json_u64(m->validated, m->map_length_bytes));
}

static json_t *entry_json(const struct rf_inventory_entry *e)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    json_object_set_new(o, "generation", rf_json_u64(true, e->key.generation));
    json_object_set_new(o, "index", json_integer(e->key.tensor_index));
    json_object_set_new(o, "name", rf_json_str(e->name));
    json_object_set_new(o, "type", rf_json_str(e->type_name));
    json_object_set_new(o, "file_backed", json_boolean(e->file_backed));
    json_object_set_new(o, "mapping_index",
                        e->mapping_index >= 0 ? json_integer(e->mapping_index) : json_null());
    json_object_set_new(o, "file_offset_bytes", rf_json_u64(true, e->file_offset_bytes));
    json_object_set_new(o, "logical_bytes", rf_json_u64(true, e->logical_bytes));
    json_object_set_new(o, "first_page", rf_json_u64(e->file_backed, e->pages.first_page));
    json_object_set_new(o, "end_page", rf_json_u64(e->file_backed, e->pages.end_page));
    json_object_set_new(o, "shared_page_bytes", rf_json_u64(e->file_backed, e->shared_page_bytes));
    json_object_set_new(o, "unique_reclaimable_bytes",
                        rf_json_u64(e->file_backed, e->unique_reclaimable_bytes));
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
    json_object_set_new(o, "generation", rf_json_u64(true, inv->generation));
    json_object_set_new(o, "page_bytes", rf_json_u64(true, inv->page_bytes));
    for (size_t i = 0; i < inv->n_mappings; i++) {
        json_t *m = mapping_json(&inv->mappings[i]);
        if (!m)
            goto nomem;
        json_array_append_new(maps, m);
    }
    json_object_set_new(o, "mappings", maps);
    maps = NULL;
    json_object_set_new(tot, "n_tensors", rf_json_u64(true, t->n_tensors));
    json_object_set_new(tot, "n_file_backed", rf_json_u64(true, t->n_file_backed));
    /* Which weights are repacked is known only where the access probe ran. */
    bool probed = false;
    for (size_t i = 0; i < inv->n && !probed; i++)
        probed = inv->entries[i].access != RF_ACCESS_UNKNOWN;
    json_object_set_new(tot, "n_anonymous", rf_json_u64(probed, t->n_anonymous));
    json_object_set_new(tot, "n_eligible", rf_json_u64(true, t->n_eligible));
    json_object_set_new(tot, "logical_bytes", rf_json_u64(true, t->logical_bytes));
    json_object_set_new(tot, "file_backed_logical_bytes",
                        rf_json_u64(true, t->file_backed_logical_bytes));
    json_object_set_new(tot, "anonymous_logical_bytes",
                        rf_json_u64(probed, t->anonymous_logical_bytes));
    json_object_set_new(tot, "mapped_virtual_bytes", rf_json_u64(true, t->mapped_virtual_bytes));
    json_object_set_new(tot, "shared_page_bytes", rf_json_u64(true, t->shared_page_bytes));
    json_object_set_new(tot, "unique_reclaimable_bytes",
                        rf_json_u64(true, t->unique_reclaimable_bytes));
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

/* model.load_release: what the release during the load did; null when not asked. */
static json_t *load_release_json(const struct rf_load_release *lr)
{
    if (!lr->armed && !lr->stopped && !lr->prepare_ns)
        return json_null();
    json_t *o = json_object();
    if (!o)
        return NULL;
    json_object_set_new(o, "armed", json_boolean(lr->armed));
    json_object_set_new(o, "stopped", rf_json_str(lr->stopped));
    json_object_set_new(o, "n_tensors", rf_json_u64(true, lr->n_tensors));
    json_object_set_new(o, "n_kept", rf_json_u64(true, lr->n_kept));
    json_object_set_new(o, "requested_bytes", rf_json_u64(true, lr->requested_bytes));
    json_object_set_new(o, "released_bytes", rf_json_u64(true, lr->released_bytes));
    json_object_set_new(o, "n_calls", rf_json_u64(true, lr->n_calls));
    json_object_set_new(o, "error",
                        lr->first_error ? json_string(rf_strerror(lr->first_error)) : json_null());
    json_object_set_new(o, "prepare_ns", rf_json_u64(true, lr->prepare_ns));
    return o;
}

json_t *rf_report_model_json(const struct rf_report *r)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    json_object_set_new(o, "path", rf_json_str(r->model_path));
    json_object_set_new(o, "desc", rf_json_str(r->model_desc));
    json_object_set_new(o, "file_size_bytes", rf_json_u64(true, r->model_file_size_bytes));
    json_object_set_new(o, "filesystem", rf_fs_to_json(r->model_fs_magic));
    /* No instance: the model was not loaded (a refusal before the load); no native figures. */
    bool loaded = r->instance_id != 0;
    json_object_set_new(o, "native_size_bytes", rf_json_u64(loaded, r->model_native_size_bytes));
    json_object_set_new(o, "n_params", rf_json_u64(loaded, r->model_n_params));
    json_object_set_new(o, "instance_id", rf_json_u64(loaded, r->instance_id));
    json_object_set_new(o, "access_probed", json_boolean(r->access_probed));
    json_object_set_new(o, "access_basis", rf_json_str(rf_access_basis_name(r->access_basis)));
    json_object_set_new(o, "access_note", json_string(access_note(r->access_basis)));
    json_object_set_new(o, "load_release", load_release_json(&r->load_release));
    if (r->inventory) {
        json_t *inv;
        if (rf_inventory_to_json(r->inventory, false, &inv) < 0) {
            json_decref(o);
            return NULL;
        }
        json_object_set_new(o, "inventory_generation", rf_json_u64(true, r->inventory->generation));
        json_object_set_new(o, "inventory", inv);
    } else {
        json_object_set_new(o, "inventory_generation", json_null());
        json_object_set_new(o, "inventory", json_null());
        json_object_set_new(o, "reason",
                            rf_json_str(r->not_built_reason ? r->not_built_reason : "not built"));
    }
    return o;
}
