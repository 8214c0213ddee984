/*
 * Admission of a mixture-of-experts model in experts (issue 33, item 4): a
 * token reads the dense part and k of the n experts of each layer, so what
 * a limit leaves beyond the dense part and the anonymous memory is an
 * expert cache, and the verdict says what streams: the routed bytes a
 * token misses in that cache and the hit rate expected at this budget.
 * Only what cannot fit is refused: the dense part, the anonymous memory
 * (the KV cache among it) and the cache's minimum, n experts (what a
 * prompt batch may select in one layer). The cache is the plan's
 * (streaming_experts.c): T experts held at once, c a layer, from the same
 * rf_expert_lru_fit. Under streaming the dense part need not fit: what
 * does not is read through the read-ahead window each token (the plan
 * reserves the cache's minimum before the pins), so the minimum is n
 * experts beside a minimum window.
 */
#include "admission_internal.h"
#include "ramforge/core/expert_cache.h"
#include "ramforge/core/routing.h"

#include <inttypes.h>
#include <stdarg.h>

void rf_admission_experts_figures(const struct rf_admission_input *in,
                                  struct rf_admission_result *out,
                                  const struct rf_admission_level_check *c)
{
    const struct rf_admission_experts *x = &in->experts;
    uint64_t hits = 0, selections = 0, token_routed;

    if (!x->n_expert || !x->n_expert_used || x->n_expert_used > x->n_expert || !c ||
        !c->working_set_checked)
        return;
    const uint32_t layers = x->n_layer ? x->n_layer : 1;
    uint64_t per_expert = x->routed_bytes / x->n_expert; /* one expert of every layer */
    uint64_t slot = per_expert / layers;                 /* one expert of one layer */
    if (!slot)
        return;
    uint64_t fit = rf_admission_sat_sub(c->run_room_bytes, out->anonymous_bytes);
    uint64_t slots = rf_admission_sat_sub(fit, x->dense_bytes) / slot;
    out->expert_dense_streams = false;
    if (in->streaming && slots < x->n_expert &&
        fit / slot >= x->n_expert + RF_ADMIT_MIN_WINDOW_BYTES / slot) {
        slots = x->n_expert; /* the plan's minimum: the dense part streams */
        out->expert_dense_streams = true;
    }
    uint32_t cache = 0;
    out->expert_cache_min =
        rf_expert_lru_fit(layers, x->n_expert, x->n_expert_used, slots, &cache) == 0;

    out->has_experts = true;
    out->n_expert = x->n_expert;
    out->n_expert_used = x->n_expert_used;
    out->cache_experts = cache;
    out->expert_cache_bytes =
        out->expert_cache_min
            ? rf_expert_lru_slots(layers, x->n_expert, x->n_expert_used, cache) * slot
            : 0;
    out->expert_dense_bytes = x->dense_bytes;
    out->expert_routed_bytes = x->routed_bytes;
    if (x->routing && x->routing->n_expert == x->n_expert &&
        rf_routing_lru_hits(x->routing, -1, out->cache_experts, &hits, &selections) == 0 &&
        selections) {
        out->expert_hit_rate = (double)hits / (double)selections;
        out->expert_hit_observed = true;
    } else {
        out->expert_hit_rate = (double)out->cache_experts / (double)x->n_expert;
    }
    token_routed = per_expert * x->n_expert_used; /* no overflow: at most routed_bytes */
    out->expert_stream_bytes = (uint64_t)((1.0 - out->expert_hit_rate) * (double)token_routed);
}

/* Adds a part to the reason (rf_admission_reason_add). */
__attribute__((format(printf, 3, 4))) static void add(struct rf_admission_result *out,
                                                      bool sentence, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    rf_admission_reason_add(out, sentence, fmt, ap);
    va_end(ap);
}

void rf_admission_experts_note(struct rf_admission_result *out)
{
    add(out, false,
        "; streams experts: %" PRIu64 " bytes per token, expected hit rate %.2f at this budget (an "
        "LRU cache of %" PRIu32 " of the %" PRIu32 " experts of each layer, %" PRIu64
        " bytes with the room of the layer being decoded, beside the dense part of %" PRIu64
        " bytes%s; the rate %s)",
        out->expert_stream_bytes, out->expert_hit_rate, out->cache_experts, out->n_expert,
        out->expert_cache_bytes, out->expert_dense_bytes,
        out->expert_dense_streams ? ", which does not fit and streams through the read-ahead "
                                    "window"
                                  : "",
        out->expert_hit_observed ? "of the routing observed"
                                 : "of uniform routing, c/n: no routing observed yet");
}

void rf_admission_experts_refuse(const struct rf_admission_input *in,
                                 struct rf_admission_result *out, enum rf_admission_outcome o,
                                 const struct rf_admission_level_check *c)
{
    out->has_working_set_fit = true;
    out->working_set_fit_bytes = rf_admission_sat_sub(c->run_room_bytes, out->anonymous_bytes);
    out->outcome = o;
    out->cause = RF_ADMIT_CAUSE_THRASH;
    out->reason[0] = '\0';
    out->reason_cut = false;
    if (out->phase == RF_ADMISSION_PRE_LOAD)
        add(out, false, "before the load, from GGUF-header estimates: ");
    add(out, false,
        "cannot fit the experts' minimum: a token reads the dense part (%" PRIu64
        " bytes) and %" PRIu32 " of the %" PRIu32 " experts of each layer (%" PRIu64
        " bytes; the expert cache holds at least the %" PRIu32 " of one layer a prompt "
        "batch may select), and only %" PRIu64 " bytes fit under the hard limit of %" PRIu64
        " bytes of cgroup %s beside %" PRIu64 " bytes of anonymous memory (the KV cache among "
        "it); ways out: a larger limit, a smaller context, or a smaller model",
        in->experts.dense_bytes, in->experts.n_expert_used, in->experts.n_expert,
        in->file_working_set.bytes - in->experts.dense_bytes, in->experts.n_expert,
        out->working_set_fit_bytes, c->level.limit.bytes, c->level.dir, out->anonymous_bytes);
}
