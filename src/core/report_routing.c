/*
 * The run report's residency.experts: a MoE model's routing as observed
 * (routing.h): per layer the tokens routed and each expert's selections,
 * the reuse distances over all layers, and the hit rate per-layer LRU
 * caches of a few sizes would have had. Part of the report's JSON writer.
 */
#include "report_sections.h"

#include "ramforge/core/routing.h"

/* The LRU hit rates at the reported cache sizes (rf_routing_report_sizes). */
static json_t *hit_rates(const struct rf_routing *g)
{
    uint32_t sizes[RF_ROUTING_REPORT_SIZES];
    size_t n = rf_routing_report_sizes(g, sizes);
    json_t *a = json_array();

    for (size_t i = 0; a && i < n; i++) {
        uint64_t hits, sel;
        if (rf_routing_lru_hits(g, -1, sizes[i], &hits, &sel) < 0)
            continue;
        json_array_append_new(
            a, json_pack("{s:I, s:o, s:o, s:o}", "cache_experts_per_layer", (json_int_t)sizes[i],
                         "hits", rf_json_u64(true, hits), "selections", rf_json_u64(true, sel),
                         "hit_rate", sel ? json_real((double)hits / (double)sel) : json_null()));
    }
    return a;
}

json_t *rf_report_routing_json(const struct rf_report *r)
{
    const struct rf_routing *g = r->routing;
    if (!g)
        return json_pack("{s:n, s:s}", "tokens", "reason",
                         r->routing_reason ? r->routing_reason
                                           : "not observed: a dense model, or the run did not "
                                             "observe the routing (--residency-policy off)");
    json_t *layers = json_array(), *dist = json_array();
    uint64_t tokens = 0;
    for (uint32_t l = 0; layers && l < g->n_layer; l++) {
        json_t *counts = json_array();
        uint32_t distinct = 0;
        for (uint32_t e = 0; counts && e < g->n_expert; e++) {
            uint64_t c = g->counts[(size_t)l * g->n_expert + e];
            distinct += c > 0;
            json_array_append_new(counts, rf_json_u64(true, c));
        }
        tokens = g->tokens[l] > tokens ? g->tokens[l] : tokens;
        json_array_append_new(layers,
                              json_pack("{s:I, s:o, s:I, s:o}", "layer", (json_int_t)l, "tokens",
                                        rf_json_u64(true, g->tokens[l]), "distinct_experts",
                                        (json_int_t)distinct, "counts", counts));
    }
    for (uint32_t d = 0; dist && d <= g->n_expert; d++) {
        uint64_t sum = 0;
        for (uint32_t l = 0; l < g->n_layer; l++)
            sum += g->distance[(size_t)l * (g->n_expert + 1) + d];
        json_array_append_new(dist, rf_json_u64(true, sum));
    }
    return json_pack(
        "{s:n, s:s, s:I, s:I, s:o, s:o, s:o, s:o, s:o}", "reason", "source",
        "cb_eval on the graph nodes ffn_moe_topk-<layer> (the router's top-k expert ids), "
        "prompt and generated tokens",
        "n_expert", (json_int_t)g->n_expert, "n_expert_used", (json_int_t)g->n_expert_used,
        "tokens", rf_json_u64(true, tokens), "bad_ids", rf_json_u64(true, g->bad_ids), "layers",
        layers, "reuse_distance", dist, "lru_hit_rate", hit_rates(g));
}
