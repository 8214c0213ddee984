/*
 * The MoE routing recorder (forge_routing.h): a cb_eval that asks for the
 * graph nodes ffn_moe_topk-<layer> and reads their expert ids. One
 * recorder may serve several contexts at once (an exec'd program's, each
 * through a link of its own): the selections are added under its mutex.
 */
#include "forge_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ramforge/forge/forge_routing.h"

#include "ggml-backend.h"
#include "ggml.h"
#include "llama.h"

/* One context's link to the recorder: the callback it wraps (per context: the ask state). */
struct forge_routing_link {
    struct forge_routing *r;
    bool (*inner)(struct ggml_tensor *t, bool ask, void *ud); /* the callback found */
    void *inner_ud;
    bool inner_asked; /* the inner callback asked for the node being computed */
};

struct forge_routing {
    pthread_mutex_t mu;            /* guards stats: contexts decode concurrently */
    struct rf_routing stats;       /* under mu */
    struct forge_routing_link own; /* forge_routing_context_params' (one context) */
};

int forge_topk_layer(const struct ggml_tensor *t)
{
    int layer = -1, end = 0;
    if (sscanf(t->name, "ffn_moe_topk-%d%n", &layer, &end) != 1 || t->name[end] != '\0')
        return -1;
    return layer;
}

bool forge_topk_row(const struct ggml_tensor *t, int64_t j, int32_t *ids)
{
    int64_t k = t->ne[0];
    if (t->type != GGML_TYPE_I32 || k <= 0 || k > FORGE_TOPK_MAX_USED ||
        t->nb[0] != sizeof(int32_t) || j < 0 || j >= t->ne[1])
        return false;
    size_t off = (size_t)j * t->nb[1];
    if (t->buffer && ggml_backend_buffer_is_host(t->buffer))
        memcpy(ids, (const char *)t->data + off, (size_t)k * sizeof(int32_t));
    else
        ggml_backend_tensor_get((struct ggml_tensor *)t, ids, off, (size_t)k * sizeof(int32_t));
    return true;
}

/* Adds the ids of t (i32, ne[0] per token, ne[1] tokens) as layer's selections. */
static void record(struct forge_routing *r, const struct ggml_tensor *t, int layer)
{
    int32_t ids[FORGE_TOPK_MAX_USED];
    uint32_t k = (uint32_t)t->ne[0];

    for (int64_t j = 0; j < t->ne[1]; j++) {
        if (!forge_topk_row(t, j, ids))
            return;
        pthread_mutex_lock(&r->mu);
        rf_routing_add(&r->stats, (uint32_t)layer, ids, k);
        pthread_mutex_unlock(&r->mu);
    }
}

static bool routing_eval_cb(struct ggml_tensor *t, bool ask, void *ud)
{
    struct forge_routing_link *l = ud;
    int layer = forge_topk_layer(t);
    bool mine = layer >= 0 && (uint32_t)layer < l->r->stats.n_layer; /* n_layer: constant */

    if (ask) {
        l->inner_asked = l->inner ? l->inner(t, true, l->inner_ud) : false;
        return mine || l->inner_asked;
    }
    if (mine)
        record(l->r, t, layer);
    return l->inner_asked ? l->inner(t, false, l->inner_ud) : true;
}

int forge_routing_create(const struct forge_model *m, struct forge_routing **out)
{
    struct forge_model_info info;

    if (!m || !out)
        return -EINVAL;
    *out = NULL;
    forge_model_get_info(m, &info);
    if (!info.n_expert || info.n_layer <= 0)
        return -EINVAL;
    struct forge_routing *r = calloc(1, sizeof(*r));
    if (!r)
        return -ENOMEM;
    int rc = rf_routing_init(&r->stats, (uint32_t)info.n_layer, info.n_expert, info.n_expert_used);
    if (rc == 0 && (rc = -pthread_mutex_init(&r->mu, NULL)) < 0)
        rf_routing_free(&r->stats);
    if (rc < 0) {
        free(r);
        return rc;
    }
    r->own.r = r;
    *out = r;
    return 0;
}

void forge_routing_free(struct forge_routing *r)
{
    if (!r)
        return;
    rf_routing_free(&r->stats);
    pthread_mutex_destroy(&r->mu);
    free(r);
}

void forge_routing_context_params(struct forge_routing *r, struct forge_context_params *p)
{
    r->own.inner = p->cb_eval;
    r->own.inner_ud = p->cb_eval_user_data;
    r->own.inner_asked = false;
    p->cb_eval = routing_eval_cb;
    p->cb_eval_user_data = &r->own;
}

int forge_routing_link(struct forge_routing *r, struct llama_context_params *p,
                       struct forge_routing_link **out)
{
    if (!out)
        return -EINVAL;
    *out = NULL;
    if (!r || !p)
        return -EINVAL;
    struct forge_routing_link *l = calloc(1, sizeof(*l));
    if (!l)
        return -ENOMEM;
    *l = (struct forge_routing_link){.r = r, .inner = p->cb_eval, .inner_ud = p->cb_eval_user_data};
    p->cb_eval = routing_eval_cb;
    p->cb_eval_user_data = l;
    *out = l;
    return 0;
}

void forge_routing_link_free(struct forge_routing_link *l)
{
    free(l);
}

const struct rf_routing *forge_routing_stats(const struct forge_routing *r)
{
    return r ? &r->stats : NULL;
}

int forge_routing_copy(struct forge_routing *r, struct rf_routing *dst)
{
    if (!r || !dst)
        return -EINVAL;
    pthread_mutex_lock(&r->mu);
    int rc = rf_routing_copy(&r->stats, dst);
    pthread_mutex_unlock(&r->mu);
    return rc;
}
