/*
 * What the engine hands its session of the program's contexts (docs/EXEC.md,
 * "The context"): the compute buffers of the contexts that have not decoded
 * yet, for the admission of the operation their first decodes run in
 * (allocated at their creation, untouched until then: llama.cpp's memory
 * breakdown of each, not the batch estimate), and at
 * an operation's end the KV cache and compute buffers of the contexts it ran
 * in (alive, or freed since it opened) for the ledger: the memory breakdown
 * when the running libllama answers, else their sizes and cache types
 * (-ctk/-ctv), which the session estimates from.
 */
#include "preload_internal.h"

#include <string.h>

#include "ramforge/forge/forge.h"

bool exec_ctx_submit_cold(struct exec_model *m, struct exec_ctx *e, bool book, uint64_t *cold_bytes)
{
    uint64_t kv, compute;
    bool cold = false;

    *cold_bytes = 0;
    for (size_t i = 0; book && i < exec_engine.n_ctxs; i++) {
        const struct exec_ctx *c = &exec_engine.ctxs[i];
        if (c->m != m || c->decoded)
            continue;
        cold = true;
        if (forge_memory_breakdown(c->ctx, &kv, &compute) == 0)
            *cold_bytes += compute;
    }
    if (e)
        e->decoded = true;
    return cold;
}

void exec_ctx_account(struct exec_ctx_figures *f, const struct exec_ctx *e)
{
    uint64_t kv, compute;
    if (f->n_contexts && (e->type_k != f->type_k || e->type_v != f->type_v))
        f->mixed_types = true;
    f->n_contexts++;
    f->type_k = e->type_k;
    f->type_v = e->type_v;
    f->n_ctx += e->n_ctx;
    if (!f->no_breakdown && forge_memory_breakdown(e->ctx, &kv, &compute) == 0) {
        f->kv_cache_bytes += kv;
        f->compute_bytes += compute;
    } else {
        f->no_breakdown = true;
    }
}

bool exec_op_output(struct exec_model *m, struct rf_operation_output *out)
{
    pthread_mutex_lock(&exec_engine.table_mu); /* the contexts stay alive while read */
    struct exec_ctx_figures f = m->ctxs_gone;
    memset(&m->ctxs_gone, 0, sizeof(m->ctxs_gone));
    for (size_t i = 0; i < exec_engine.n_ctxs; i++)
        if (exec_engine.ctxs[i].m == m)
            exec_ctx_account(&f, &exec_engine.ctxs[i]);
    pthread_mutex_unlock(&exec_engine.table_mu);
    memset(out, 0, sizeof(*out));
    if (!f.n_contexts)
        return false;
    out->has_memory_breakdown = !f.no_breakdown;
    out->kv_cache_bytes = f.kv_cache_bytes;
    out->compute_bytes = f.compute_bytes;
    /* contexts of different cache types: one size and one type cannot say their KV cache */
    out->n_ctx = !f.mixed_types && f.n_ctx <= UINT32_MAX ? (uint32_t)f.n_ctx : 0;
    out->has_cache_types = !f.mixed_types;
    out->type_k = f.type_k;
    out->type_v = f.type_v;
    return true;
}
