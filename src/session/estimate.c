/*
 * What an operation will add before its context exists, from the model's
 * hyperparameters and the request: the KV cache, llama.cpp's compute
 * buffer (graph scratch) and the runtime beside them, each an estimate
 * that admission records with its provenance; and the file pages a token
 * reads (a MoE model's token reads k of its n experts).
 */
#include "session_internal.h"

#include "ramforge/core/admission.h"
#include "ramforge/core/experts.h"
#include "ramforge/core/kv_types.h"

int ses_token_read(const struct rf_inventory *inv, const struct forge_model_info *info,
                   uint64_t *out, struct rf_admission_experts *x)
{
    struct rf_expert_map m;
    uint64_t dense, routed, all;

    if (!info->n_expert)
        return rf_admission_file_working_set(inv, out);
    rf_expert_map_init(&m);
    int rc = rf_expert_map_build(inv, info->n_expert, info->n_expert_used, &m);
    if (rc == 0)
        rc = rf_expert_token_read(inv, &m, &dense, &routed, out);
    if (rc == 0 && x && rf_admission_file_working_set(inv, &all) == 0 && all >= dense) {
        x->n_expert = info->n_expert;
        x->n_expert_used = info->n_expert_used;
        x->dense_bytes = dense;
        x->routed_bytes = all - dense; /* every slice's pages no dense weight covers */
        x->n_layer = rf_expert_map_layers(&m);
    }
    rf_expert_map_free(&m);
    return rc;
}

/* KV cache bytes estimated from the hyperparameters: K and V in type_k/type_v, n_ctx cells. */
bool ses_estimate_kv(const struct forge_model_info *info, uint64_t n_ctx, uint32_t type_k,
                     uint32_t type_v, uint64_t *out)
{
    if (info->n_head <= 0 || info->n_head_kv <= 0 || info->n_layer <= 0 || info->n_embd <= 0)
        return false;
    uint64_t n_embd_kv =
        (uint64_t)info->n_embd / (uint64_t)info->n_head * (uint64_t)info->n_head_kv;
    return rf_kv_cache_bytes((uint64_t)info->n_layer, n_ctx, n_embd_kv, n_embd_kv, type_k, type_v,
                             out) == 0;
}

/*
 * The graph scratch and runtime figures of in before the context exists
 * (estimated; see rf_admission_scratch_bytes, rf_admission_runtime_bytes):
 * a batch of the request's n_batch tokens, else its prompt's.
 */
void ses_estimate_runtime(uint64_t n_vocab, uint64_t n_embd,
                          const struct rf_operation_request *request, int32_t n_threads,
                          struct rf_admission_input *in)
{
    uint64_t scratch, runtime;
    uint64_t ub = request->n_batch ? request->n_batch : request->n_prompt;

    in->graph_scratch.source = "not known before the operation's context exists (the model's "
                               "vocabulary and width unknown)";
    in->runtime.source = "the model's vocabulary is unknown";
    if (!n_vocab)
        return;
    if (n_embd && rf_admission_scratch_bytes(ub, n_vocab, n_embd, &scratch) == 0)
        in->graph_scratch = rf_admission_figure_of(
            scratch, RF_PROV_ESTIMATED,
            "before the context exists: batch tokens (at most 512) x (n_vocab + 2 n_embd + 4) "
            "floats, llama.cpp's CPU compute buffer as measured on the pinned build");
    if (rf_admission_runtime_bytes(n_vocab, n_threads > 0 ? (uint64_t)n_threads : 0, &runtime) == 0)
        in->runtime = rf_admission_figure_of(
            runtime, RF_PROV_ESTIMATED,
            "the logits of one output (n_vocab floats) + 256 KiB per compute thread (stack, "
            "malloc arena, kernel stack)");
}

void ses_in_context(const struct rf_operation_request *request, struct rf_admission_input *in)
{
    if (!request->in_context)
        return;
    in->kv_cache = rf_admission_figure_of(0, RF_PROV_EXACT_MEASURED,
                                          "the context's, allocated and cleared at its creation "
                                          "(admitted then): inside the measured RSS, no growth");
    if (!request->context_warm && request->compute_bytes)
        in->graph_scratch = rf_admission_figure_of(
            request->compute_bytes, RF_PROV_NATIVE_LOGICAL,
            "the context's compute buffers (llama_get_memory_breakdown): allocated at its "
            "creation, its first decode touches up to this");
    if (!request->context_warm)
        return;
    in->graph_scratch = rf_admission_figure_of(
        0, RF_PROV_EXACT_MEASURED,
        "the context's compute buffers, touched by its earlier operations: inside the "
        "measured RSS, no growth");
    in->runtime = rf_admission_figure_of(
        0, RF_PROV_EXACT_MEASURED,
        "the context's logits and compute threads, there since its earlier operations: "
        "inside the measured RSS, no growth");
}
