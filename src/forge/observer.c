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
 *
 * With pre-dispatch sampling on (forge_observer_set_sampling), each weight
 * source of a recorded event is also looked up by exact name in an index
 * of the model's tensors built at enable time, checked to read that
 * tensor's bytes from the model's validated file mapping, and its first
 * max_pages file pages are sampled with forge_model_sample_pages into a
 * page-state buffer allocated (and touched) at enable time: an open, a
 * /proc/self/maps read and a mincore per weight source, no allocation.
 */
#include "forge_internal.h"

#include "ramforge/forge/forge_observer.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ggml-backend.h"
#include "ggml.h"

#include "ramforge/core/intervals.h"
#include "ramforge/forge/forge_pages.h"
#include "ramforge/sys/pages.h"

_Static_assert(RF_DISPATCH_MAX_SRC >= GGML_MAX_SRC, "every declared source fits an event");
_Static_assert(RF_DISPATCH_MAX_SRC <= 15, "source bits and RF_DISPATCH_TRUNC_NODE share 16 bits");
_Static_assert(RF_PAGE_WINDOW_PAGES <= UINT16_MAX, "page counts fit rf_dispatch_sample");

/* One model tensor in the sampling index, sorted by name. */
struct sample_slot {
    const char *name;    /* the tensor's name (borrowed from the model) */
    uint32_t index;      /* GGUF tensor index */
    bool duplicate;      /* another tensor carries the same name: no identity */
    uintptr_t addr;      /* where the tensor's bytes lie in the model's file mapping;
                            0: no validated file range */
    uint64_t first_page; /* its outward file page range */
    uint64_t n_pages;
};

/* Pre-dispatch sampling state, built by forge_observer_set_sampling. */
struct observer_sampling {
    struct forge_model *m;     /* borrowed; NULL: sampling off */
    uint16_t max_pages;        /* per weight source, 1..RF_PAGE_WINDOW_PAGES */
    uint8_t *states;           /* max_pages bytes, pre-touched, owned */
    struct sample_slot *slots; /* m's tensors by name, owned */
    size_t n_slots;
};

struct forge_observer {
    struct rf_dispatch_event *events; /* capacity slots, pre-touched, owned */
    size_t capacity;                  /* slots */
    size_t n;                         /* slots filled */
    uint64_t dropped;                 /* dispatches seen with every slot filled */
    uint64_t skipped;                 /* nodes asked about that run no kernel */
    uint64_t unbound;                 /* asks while bound to no context */
    const struct forge_context *fc;   /* bound context, borrowed; NULL: none */
    struct observer_sampling sampling;
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

static int cmp_slot(const void *a, const void *b)
{
    return strcmp(((const struct sample_slot *)a)->name, ((const struct sample_slot *)b)->name);
}

static int cmp_slot_key(const void *key, const void *slot)
{
    return strcmp((const char *)key, ((const struct sample_slot *)slot)->name);
}

/*
 * Samples weight source src (event name not truncated) into *out: the
 * first sampling.max_pages pages of its tensor's file page range, when
 * src is exactly one model tensor read from the model's file mapping.
 */
static void sample_source(struct forge_observer *obs, const struct ggml_tensor *src,
                          bool name_truncated, struct rf_dispatch_sample *out)
{
    struct observer_sampling *sp = &obs->sampling;
    const struct sample_slot *slot = NULL;

    if (!name_truncated && obs->fc->m == sp->m)
        slot = bsearch(src->name, sp->slots, sp->n_slots, sizeof(*sp->slots), cmp_slot_key);
    if (!slot || slot->duplicate || slot->addr == 0 || (uintptr_t)src->data != slot->addr) {
        out->status = RF_DISPATCH_SAMPLE_MISSING;
        return;
    }
    uint64_t n = slot->n_pages < sp->max_pages ? slot->n_pages : sp->max_pages;
    int rc = forge_model_sample_pages(sp->m, 0, slot->first_page, n, sp->states);
    struct rf_page_counts c = {0};
    rf_page_counts_add(&c, sp->states, n);
    out->inspected_pages = (uint16_t)n;
    out->resident_pages += (uint16_t)c.resident_pages;
    out->unknown_pages += (uint16_t)c.unknown_pages;
    if (rc < 0 || out->unknown_pages > 0)
        out->status = RF_DISPATCH_SAMPLE_FAILED;
    else if (n == slot->n_pages)
        out->status = RF_DISPATCH_SAMPLE_COMPLETE;
    else if (sp->max_pages < RF_PAGE_WINDOW_PAGES)
        out->status = RF_DISPATCH_SAMPLE_PARTIAL;
    else
        out->status = RF_DISPATCH_SAMPLE_TRUNCATED;
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
    ev->sample_max_pages = obs->sampling.m ? obs->sampling.max_pages : 0;
    memset(ev->samples, 0, sizeof(ev->samples));
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
        if (is_weight(src)) {
            ev->src_weight_mask |= (uint16_t)(1u << n_src);
            if (ev->sample_max_pages > 0)
                sample_source(obs, src, (ev->truncated_mask >> n_src) & 1u, &ev->samples[n_src]);
        }
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

/* Frees the sampling state and turns sampling off. */
static void sampling_clear(struct observer_sampling *sp)
{
    free(sp->states);
    free(sp->slots);
    memset(sp, 0, sizeof(*sp));
}

/* Fills *slot for tensor t of m: its file page range and mapped address, if validated. */
static void slot_fill(const struct forge_model *m, const struct rf_tensor_meta *t,
                      struct sample_slot *slot)
{
    const struct rf_mapping_meta *mm = &m->mapping;
    struct rf_page_range r;
    uint64_t t_end;

    slot->name = t->name;
    slot->index = t->index;
    if (t->mapping_index != 0 || !mm->validated || m->map_end <= m->map_start ||
        __builtin_add_overflow(t->file_offset_bytes, t->logical_bytes, &t_end) ||
        t->file_offset_bytes < mm->map_offset_bytes ||
        t_end > mm->map_offset_bytes + mm->map_length_bytes ||
        rf_page_range_outward(t->file_offset_bytes, t->logical_bytes, rfsys_page_bytes(), &r) < 0)
        return; /* addr 0: no validated file range */
    slot->addr = m->map_start + (uintptr_t)(t->file_offset_bytes - mm->map_offset_bytes);
    slot->first_page = r.first_page;
    slot->n_pages = rf_page_range_pages(r);
}

int forge_observer_set_sampling(struct forge_observer *obs, struct forge_model *m,
                                uint32_t max_pages_per_source)
{
    if (!obs || (max_pages_per_source > 0 && !m) || max_pages_per_source > RF_PAGE_WINDOW_PAGES)
        return -EINVAL;
    sampling_clear(&obs->sampling);
    if (max_pages_per_source == 0)
        return 0;
    if (m->n_tensors >= UINT32_MAX)
        return -EOVERFLOW;

    struct observer_sampling sp = {.m = m, .max_pages = (uint16_t)max_pages_per_source};
    sp.states = malloc(max_pages_per_source);
    sp.slots = calloc(m->n_tensors ? m->n_tensors : 1, sizeof(*sp.slots));
    if (!sp.states || !sp.slots) {
        sampling_clear(&sp);
        return -ENOMEM;
    }
    memset(sp.states, RF_PAGE_UNKNOWN, max_pages_per_source); /* touched now, not in the callback */
    for (size_t i = 0; i < m->n_tensors; i++) {
        const struct rf_tensor_meta *t = &m->tensors[i];
        if (strnlen(t->name, RF_NAME_MAX) == RF_NAME_MAX)
            continue; /* no NUL in the field: no exact name */
        slot_fill(m, t, &sp.slots[sp.n_slots++]);
    }
    qsort(sp.slots, sp.n_slots, sizeof(*sp.slots), cmp_slot);
    for (size_t i = 1; i < sp.n_slots; i++) {
        if (strcmp(sp.slots[i - 1].name, sp.slots[i].name) == 0) {
            sp.slots[i - 1].duplicate = true;
            sp.slots[i].duplicate = true;
        }
    }
    obs->sampling = sp;
    return 0;
}

void forge_observer_free(struct forge_observer *obs)
{
    if (!obs)
        return;
    sampling_clear(&obs->sampling);
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
