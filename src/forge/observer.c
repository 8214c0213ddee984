/*
 * forge observer: records CPU node dispatches from llama.cpp's cb_eval ask
 * phase into a fixed array of rf_dispatch_event (see forge_observer.h for
 * the rule and the contract).
 *
 * Workload: every node of every decode of the bound context, about 30 per
 * layer per token, on the decoding thread between graph splits. The
 * callback does a few compares, bounded string copies into the next slot
 * and one buffer-usage query per source; it never allocates, locks, logs or
 * touches a page for the first time (the buffer is pre-touched at create).
 */
#include "forge_internal.h"

#include "ramforge/forge_observer.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ggml-backend.h"
#include "ggml.h"

_Static_assert(RF_DISPATCH_MAX_SRC >= GGML_MAX_SRC, "every declared source fits an event");
_Static_assert(RF_DISPATCH_MAX_SRC <= 15, "source bits and RF_DISPATCH_TRUNC_NODE share 16 bits");

struct forge_observer {
    struct rf_dispatch_event *events; /* capacity slots, pre-touched, owned */
    size_t capacity;                  /* slots */
    size_t n;                         /* slots filled */
    uint64_t dropped;                 /* dispatches seen with every slot filled */
    uint64_t skipped;                 /* nodes asked about that run no kernel */
    uint64_t unbound;                 /* asks while bound to no context */
    const struct forge_context *fc;   /* bound context, borrowed; NULL: none */
};

/*
 * ggml-cpu runs a kernel for node t: an op with a kernel (not
 * ggml_op_is_empty), flagged for computation, with at least one element.
 */
static bool runs_kernel(const struct ggml_tensor *t)
{
    switch (t->op) {
    case GGML_OP_NONE:
    case GGML_OP_RESHAPE:
    case GGML_OP_VIEW:
    case GGML_OP_PERMUTE:
    case GGML_OP_TRANSPOSE:
        return false;
    default:
        break;
    }
    if ((t->flags & GGML_TENSOR_FLAG_COMPUTE) == 0)
        return false;
    return ggml_nelements(t) > 0;
}

/* Copies a ggml name (char[GGML_MAX_NAME]) into dst[size]; true when it was cut short. */
static bool copy_name(char *dst, size_t size, const char *src)
{
    size_t len = strnlen(src, GGML_MAX_NAME);
    bool cut = len >= size || len == GGML_MAX_NAME; /* too long, or no NUL in the field */
    if (len >= size)
        len = size - 1;
    memcpy(dst, src, len);
    dst[len] = '\0';
    return cut;
}

/* A source lives in a model weights buffer (following views to their base). */
static bool is_weight(const struct ggml_tensor *src)
{
    while (src->view_src)
        src = src->view_src;
    return src->buffer &&
           ggml_backend_buffer_get_usage(src->buffer) == GGML_BACKEND_BUFFER_USAGE_WEIGHTS;
}

static bool observer_eval_cb(struct ggml_tensor *t, bool ask, void *user_data)
{
    struct forge_observer *obs = user_data;

    if (!ask)
        return true; /* never reached: the ask phase always answers false */
    if (!obs->fc) {
        obs->unbound++;
        return false;
    }
    if (!runs_kernel(t)) {
        obs->skipped++;
        return false;
    }
    if (obs->n == obs->capacity) {
        obs->dropped++;
        return false;
    }
    struct rf_dispatch_event *ev = &obs->events[obs->n];
    ev->model_instance_id = obs->fc->m->instance_id;
    ev->context_id = obs->fc->id;
    ev->execution_generation = obs->fc->execution_generation;
    ev->sequence = obs->n;
    ev->truncated_mask = 0;
    ev->src_weight_mask = 0;
    if (copy_name(ev->node_name, sizeof(ev->node_name), t->name))
        ev->truncated_mask |= RF_DISPATCH_TRUNC_NODE;
    const char *op = ggml_op_desc(t);
    size_t op_len = strnlen(op, sizeof(ev->op_name) - 1);
    memcpy(ev->op_name, op, op_len);
    ev->op_name[op_len] = '\0';
    unsigned n_src = 0;
    for (int i = 0; i < GGML_MAX_SRC; i++) {
        const struct ggml_tensor *src = t->src[i];
        if (!src)
            continue;
        if (copy_name(ev->src_names[n_src], sizeof(ev->src_names[n_src]), src->name))
            ev->truncated_mask |= (uint16_t)(1u << n_src);
        if (is_weight(src))
            ev->src_weight_mask |= (uint16_t)(1u << n_src);
        n_src++;
    }
    ev->n_src = (uint8_t)n_src;
    obs->n++;
    return false; /* no data requested: no barrier */
}

int forge_observer_create(size_t capacity_events, struct forge_observer **out)
{
    size_t bytes;

    *out = NULL;
    if (capacity_events == 0)
        return -EINVAL;
    if (__builtin_mul_overflow(capacity_events, sizeof(struct rf_dispatch_event), &bytes))
        return -EOVERFLOW;
    struct forge_observer *obs = calloc(1, sizeof(*obs));
    if (!obs)
        return -ENOMEM;
    obs->events = malloc(bytes);
    if (!obs->events) {
        free(obs);
        return -ENOMEM;
    }
    memset(obs->events, 0, bytes); /* fault every page in now, not in the callback */
    obs->capacity = capacity_events;
    *out = obs;
    return 0;
}

void forge_observer_free(struct forge_observer *obs)
{
    if (!obs)
        return;
    free(obs->events);
    free(obs);
}

void forge_observer_reset(struct forge_observer *obs)
{
    obs->n = 0;
    obs->dropped = 0;
    obs->skipped = 0;
    obs->unbound = 0;
}

void forge_observer_context_params(struct forge_observer *obs, struct forge_context_params *p)
{
    p->cb_eval = observer_eval_cb;
    p->cb_eval_user_data = obs;
}

void forge_observer_bind(struct forge_observer *obs, const struct forge_context *fc)
{
    obs->fc = fc;
}

void forge_observer_stats(const struct forge_observer *obs, struct forge_observer_stats *out)
{
    out->capacity_events = obs->capacity;
    out->events = obs->n;
    out->dropped_events = obs->dropped;
    out->skipped_nodes = obs->skipped;
    out->unbound_asks = obs->unbound;
}

const struct rf_dispatch_event *forge_observer_events(const struct forge_observer *obs,
                                                      size_t *n_out)
{
    *n_out = obs->n;
    return obs->events;
}
