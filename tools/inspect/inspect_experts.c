/*
 * ramforge inspect on a mixture-of-experts model (inspect_experts.h): the
 * expert map of core's experts.h over the inventory, printed after the
 * inventory's totals or set as the JSON document's "experts".
 */
#include "inspect_experts.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#include "common/cli.h"
#include "ramforge/core/experts.h"
#include "ramforge/core/json_util.h"

/* What a token reads, when the access was classified: the probe or placement. */
struct token_read {
    bool has;
    uint64_t dense_bytes, routed_bytes, bytes;
    const char *source; /* how it was found, or why it is unknown */
};

static int token_read_of(const struct rf_inventory *inv, const struct forge_model_info *info,
                         const struct rf_expert_map *m, struct token_read *out)
{
    out->has = false;
    if (info->access_basis == RF_ACCESS_BASIS_NONE) {
        out->source = "unknown: the weights' access was not classified (--no-probe)";
        return 0;
    }
    int rc = rf_expert_token_read(inv, m, &out->dense_bytes, &out->routed_bytes, &out->bytes);
    if (rc < 0)
        return rc;
    out->has = true;
    out->source = "file pages of the weights the graph reads from the mapping: the dense ones "
                  "whole, the routed experts' k/n (a token selects k of the n experts of each "
                  "layer); token_embd only when the graph reads it from the mapping";
    return 0;
}

static uint64_t n_layers(const struct rf_expert_map *m)
{
    uint64_t n = 0;
    for (size_t i = 0; i < m->n; i++)
        n += i == 0 || m->tensors[i].layer != m->tensors[i - 1].layer;
    return n;
}

int inspect_experts_print(const struct rf_inventory *inv, const struct forge_model_info *info,
                          bool raw)
{
    struct rf_expert_map m;
    struct token_read tr;
    char b1[32], b2[32], b3[32], b4[32];
    int rc;

    if (!info->n_expert)
        return 0;
    rf_expert_map_init(&m);
    if ((rc = rf_expert_map_build(inv, info->n_expert, info->n_expert_used, &m)) < 0 ||
        (rc = token_read_of(inv, info, &m, &tr)) < 0)
        goto out;
    char skew[96] = "not recorded (no ramforge.route_skew: not a generated model)";
    if (info->has_route_skew)
        snprintf(skew, sizeof(skew), "%g (ramforge.route_skew%s)", info->route_skew,
                 info->route_skew > 0 ? "" : ": random router rows");
    printf("\nexperts: %" PRIu32 " per MoE layer in %" PRIu64 " layers, %" PRIu32
           " used per token (k/n %" PRIu32 "/%" PRIu32 "); routing skew %s\n",
           m.n_expert, n_layers(&m), m.n_expert_used, m.n_expert_used, m.n_expert, skew);
    printf("  %-16s %12s  %zu tensors (ffn_*_exps), %" PRIu32
           " slices each; pages two slices share: %s\n",
           "routed experts", cli_format_bytes(m.routed_bytes, raw, b1, sizeof(b1)), m.n, m.n_expert,
           cli_format_bytes(m.edge_shared_bytes, raw, b2, sizeof(b2)));
    printf("  %-16s %12s  every other tensor (attention, norms, routers, shared experts, "
           "embeddings)\n",
           "dense part", cli_format_bytes(m.dense_bytes, raw, b1, sizeof(b1)));
    if (tr.has)
        printf("  %-16s %12s  of file pages: dense %s + %" PRIu32 "/%" PRIu32
               " of the routed %s (file %s)\n",
               "a token reads", cli_format_bytes(tr.bytes, raw, b1, sizeof(b1)),
               cli_format_bytes(tr.dense_bytes, raw, b2, sizeof(b2)), m.n_expert_used, m.n_expert,
               cli_format_bytes(tr.routed_bytes, raw, b3, sizeof(b3)),
               cli_format_bytes(info->file_size_bytes, raw, b4, sizeof(b4)));
    else
        printf("  %-16s %12s  %s\n", "a token reads", "unknown", tr.source);
    printf("%5s  %-28s %5s %11s %17s %6s %s\n", "index", "name", "layer", "slice", "slice 0 pages",
           "shared", "read");
    for (size_t i = 0; i < m.n; i++) {
        const struct rf_expert_tensor *t = &m.tensors[i];
        struct rf_expert_slice s0;
        char pages[40] = "-";
        const struct rf_inventory_entry *e = NULL;
        struct rf_resource_key key = {inv->generation, t->tensor_index};

        if (rf_inventory_lookup(inv, key, &e) < 0 ||
            rf_expert_slice_of(t->file_offset_bytes, t->slice_bytes, 0, inv->page_bytes, &s0) < 0)
            continue;
        snprintf(pages, sizeof(pages), "[%" PRIu64 ",%" PRIu64 ")", s0.pages.first_page,
                 s0.pages.end_page);
        printf("%5u  %-28s %5d %11s %17s %6" PRIu64 " %s\n", t->tensor_index, e->name, t->layer,
               cli_format_bytes(t->slice_bytes, raw, b1, sizeof(b1)), pages, t->edge_shared_pages,
               t->file_read ? "file" : rf_weight_access_name(e->access));
    }
    printf("(slice: an expert's bytes, expert e at the tensor's offset + e x slice; shared: "
           "pages two of its slices share; read: file when the graph reads it from the "
           "mapping)\n");
out:
    rf_expert_map_free(&m);
    return rc;
}

static json_t *slices_json(const struct rf_expert_tensor *t, uint32_t n_expert, uint64_t page)
{
    json_t *a = json_array();
    for (uint32_t e = 0; a && e < n_expert; e++) {
        struct rf_expert_slice s;
        if (rf_expert_slice_of(t->file_offset_bytes, t->slice_bytes, e, page, &s) < 0) {
            json_decref(a);
            return NULL;
        }
        json_array_append_new(
            a, json_pack("{s:I, s:o, s:o, s:o, s:o, s:b, s:b, s:o}", "expert", (json_int_t)e,
                         "file_offset_bytes", rf_json_u64(true, s.file_offset_bytes), "bytes",
                         rf_json_u64(true, s.bytes), "first_page",
                         rf_json_u64(true, s.pages.first_page), "end_page",
                         rf_json_u64(true, s.pages.end_page), "shared_first", s.shared_first,
                         "shared_last", s.shared_last, "shared_page_bytes",
                         rf_json_u64(true, s.shared_page_bytes)));
    }
    return a;
}

int inspect_experts_json(const struct rf_inventory *inv, const struct forge_model_info *info,
                         json_t *doc)
{
    struct rf_expert_map m;
    struct token_read tr;
    json_t *o = NULL, *tensors = NULL;
    int rc;

    if (!info->n_expert)
        return json_object_set_new(doc, "experts", json_null()) == 0 ? 0 : -ENOMEM;
    rf_expert_map_init(&m);
    if ((rc = rf_expert_map_build(inv, info->n_expert, info->n_expert_used, &m)) < 0 ||
        (rc = token_read_of(inv, info, &m, &tr)) < 0)
        goto out;
    rc = -ENOMEM;
    if (!(tensors = json_array()))
        goto out;
    for (size_t i = 0; i < m.n; i++) {
        const struct rf_expert_tensor *t = &m.tensors[i];
        const struct rf_inventory_entry *e = NULL;
        struct rf_resource_key key = {inv->generation, t->tensor_index};
        json_t *slices = slices_json(t, m.n_expert, inv->page_bytes);

        if (!slices || rf_inventory_lookup(inv, key, &e) < 0) {
            json_decref(slices);
            goto out;
        }
        json_array_append_new(
            tensors,
            json_pack("{s:I, s:s, s:i, s:o, s:o, s:b, s:I, s:o}", "index",
                      (json_int_t)t->tensor_index, "name", e->name, "layer", t->layer,
                      "file_offset_bytes", rf_json_u64(true, t->file_offset_bytes), "slice_bytes",
                      rf_json_u64(true, t->slice_bytes), "file_read", t->file_read,
                      "edge_shared_pages", (json_int_t)t->edge_shared_pages, "slices", slices));
    }
    o = json_pack(
        "{s:I, s:I, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:s, s:o}", "n_expert",
        (json_int_t)m.n_expert, "n_expert_used", (json_int_t)m.n_expert_used, "route_skew",
        info->has_route_skew ? json_real(info->route_skew) : json_null(), "file_size_bytes",
        rf_json_u64(true, info->file_size_bytes), "routed_bytes", rf_json_u64(true, m.routed_bytes),
        "dense_bytes", rf_json_u64(true, m.dense_bytes), "edge_shared_bytes",
        rf_json_u64(true, m.edge_shared_bytes), "token_read_bytes", rf_json_u64(tr.has, tr.bytes),
        "token_read_dense_bytes", rf_json_u64(tr.has, tr.dense_bytes), "token_read_routed_bytes",
        rf_json_u64(tr.has, tr.routed_bytes), "token_routed_share_bytes",
        rf_json_u64(true, m.token_routed_bytes), "token_read_source", tr.source, "tensors",
        tensors);
    tensors = NULL; /* o holds it (or json_pack released it) */
    if (o && json_object_set_new(doc, "experts", o) == 0)
        rc = 0;
out:
    json_decref(tensors);
    rf_expert_map_free(&m);
    return rc;
}
