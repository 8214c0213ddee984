/*
 * forge contexts: llama_context wrapped with the execution gate. A decode
 * takes the shared lease; synchronize (or free) observes completion and
 * ends it. Every context, the access probe's included, counts as active
 * while it exists. A cb_eval callback is installed only when the caller
 * passes one; contexts opened with one are counted process-wide.
 */
#include "forge_internal.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "llama.h"

#include "ramforge/forge/forge_observer.h"

static _Atomic uint64_t next_context_id = 1;
static _Atomic uint64_t cb_eval_contexts; /* contexts opened with a cb_eval */

int forge_context_open(struct forge_model *m, const struct llama_context_params *cp,
                       struct forge_context **out, char err[FORGE_ERR_MAX])
{
    struct forge_context *fc = calloc(1, sizeof(*fc));

    *out = NULL;
    if (!fc)
        return -ENOMEM;
    fc->m = m;
    fc->ctx = llama_init_from_model(m->model, *cp);
    if (!fc->ctx) {
        snprintf(err, FORGE_ERR_MAX, "llama.cpp could not create a context of %u tokens",
                 cp->n_ctx);
        free(fc);
        return -EIO;
    }
    fc->id = atomic_fetch_add(&next_context_id, 1);
    fc->has_cb_eval = cp->cb_eval != NULL;
    if (fc->has_cb_eval)
        atomic_fetch_add(&cb_eval_contexts, 1);
    forge_gate_context_opened(&m->gate);
    *out = fc;
    return 0;
}

int forge_context_create(struct forge_model *m, const struct forge_context_params *p,
                         struct forge_context **out, char err[FORGE_ERR_MAX])
{
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = p->n_ctx;
    cp.n_batch = p->n_batch ? p->n_batch : p->n_ctx;
    cp.no_perf = true;
    if (p->n_threads > 0) {
        cp.n_threads = p->n_threads;
        cp.n_threads_batch = p->n_threads;
    }
    /* Only when asked: with cb_eval NULL the scheduler computes each split at once. */
    if (p->cb_eval) {
        cp.cb_eval = p->cb_eval;
        cp.cb_eval_user_data = p->cb_eval_user_data;
    }
    return forge_context_open(m, &cp, out, err);
}

uint64_t forge_context_id(const struct forge_context *fc)
{
    return fc->id;
}

bool forge_context_has_cb_eval(const struct forge_context *fc)
{
    return fc->has_cb_eval;
}

uint64_t forge_cb_eval_contexts_opened(void)
{
    return atomic_load(&cb_eval_contexts);
}

int forge_context_decode(struct forge_context *fc, int32_t *tokens, size_t n)
{
    forge_context_synchronize(fc);
    forge_gate_submit(&fc->m->gate);
    fc->in_flight = true;
    if (llama_decode(fc->ctx, llama_batch_get_one(tokens, (int32_t)n)) != 0) {
        forge_context_synchronize(fc);
        return -EIO;
    }
    return 0;
}

void forge_context_synchronize(struct forge_context *fc)
{
    if (!fc->in_flight)
        return;
    llama_synchronize(fc->ctx);
    fc->in_flight = false;
    fc->execution_generation++;
    forge_gate_complete(&fc->m->gate);
}

void forge_context_free(struct forge_context *fc)
{
    if (!fc)
        return;
    forge_context_synchronize(fc);
    llama_free(fc->ctx);
    forge_gate_context_closed(&fc->m->gate);
    free(fc->kv_tokens);
    free(fc);
}

void forge_context_lifetime_state(const struct forge_context *fc,
                                  struct forge_context_lifetime *out)
{
    out->in_flight = fc->in_flight;
    out->execution_generation = fc->execution_generation;
}

void forge_model_lifetime_state(struct forge_model *m, struct forge_model_lifetime *out)
{
    out->contract_version = RF_CONTRACT_VERSION;
    out->instance_id = m->instance_id;
    forge_gate_snapshot(&m->gate, &out->in_flight_contexts, &out->active_contexts,
                        &out->execution_generation);
    out->quiescent = out->in_flight_contexts == 0 && out->active_contexts == 0;
}
