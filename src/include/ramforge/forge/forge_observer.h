/*
 * forge observer: the opt-in CPU node-dispatch observer.
 *
 * Installed as a context's llama.cpp cb_eval, and only when asked for: a
 * context created without one has no callback at all (the scheduler then
 * computes each split in one call, as without ramforge). In the ask phase
 * ggml's scheduler asks the callback about every node of a split, in graph
 * order, before it computes that split; the observer records one
 * rf_dispatch_event (dispatch.h) per node the CPU backend will run a kernel
 * for, and always answers false: it requests no data, so the scheduler
 * adds no synchronisation point and the graph is computed as without it.
 *
 * The rule for "a node the CPU backend runs" is ggml-cpu's own
 * (ggml_graph_compute_thread and ggml_compute_forward, llama.cpp v0.4.0 and v0.5.0),
 * the same test ggml's other backends use: a node is recorded unless
 *   - its op has no kernel (ggml_op_is_empty): GGML_OP_NONE, GGML_OP_RESHAPE,
 *     GGML_OP_VIEW, GGML_OP_PERMUTE, GGML_OP_TRANSPOSE; or
 *   - it lacks GGML_TENSOR_FLAG_COMPUTE (not needed by the graph's outputs); or
 *   - it is empty (ggml_nelements == 0, ggml_is_empty).
 * Nodes ggml-cpu fuses into the kernel of the node before them (RMS_NORM +
 * MUL) are still recorded, each as its own event: they are dispatched as
 * part of that kernel.
 *
 * Events are written into an array the caller sizes once at creation; the
 * callback never allocates, locks or prints. The first `capacity` events
 * are kept (graph order of first use is what a capture is for); later ones
 * are counted in dropped_events. An event is dispatch-start evidence only
 * (RF_DISPATCH_CAVEAT).
 *
 * Optional pre-dispatch sampling (forge_observer_set_sampling): before
 * recording an event, the observer samples each of its weight sources
 * (src_weight_mask) with mincore, at most max_pages_per_source pages of
 * the tensor's validated file page range, into a buffer allocated at
 * enable time, and stores the counts and a status in the event
 * (rf_dispatch_sample). A source is sampled only when its untruncated
 * name is exactly one tensor of the sampling model and its data pointer is
 * that tensor's bytes in the model's validated file mapping; otherwise
 * its status is missing (a repacked anonymous copy, another model's
 * context). A failed check or mincore leaves the pages unknown (failed).
 * Dropped events are not sampled. A sample is a point-in-time page-cache
 * observation before dispatch: not a read, not residency during the
 * kernel, never a reason to release. It costs an open, a read of
 * /proc/self/maps and a mincore per weight source: a measurable share of
 * decode time (bench/observer_bench.sh -s N).
 *
 * Threading: the callback runs on the thread that calls llama_decode. One
 * observer serves one context at a time; read it only while no decode of
 * its bound context is running.
 */
#ifndef RAMFORGE_FORGE_OBSERVER_H
#define RAMFORGE_FORGE_OBSERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ramforge/core/dispatch.h"
#include "ramforge/forge/forge.h"

#ifdef __cplusplus
extern "C" {
#endif

struct forge_observer;

struct forge_observer_stats {
    uint64_t capacity_events; /* events the buffer holds */
    uint64_t events;          /* events recorded, <= capacity_events */
    uint64_t dropped_events;  /* dispatches seen with the buffer full */
    uint64_t skipped_nodes;   /* nodes asked about and not recorded by the rule above */
    uint64_t unbound_asks;    /* nodes asked about while bound to no context (ignored) */
};

/*
 * Allocates an observer holding capacity_events events (sizeof(struct
 * rf_dispatch_event) bytes each, about 0.85 KiB) and touches every page of
 * the buffer now, so recording faults no page in. Free with
 * forge_observer_free. Errors: -EINVAL (capacity_events 0), -EOVERFLOW
 * (the byte size), -ENOMEM.
 */
int forge_observer_create(size_t capacity_events, struct forge_observer **out);

/* Frees the observer and its events. NULL is a no-op. Unbind it first. */
void forge_observer_free(struct forge_observer *obs);

/* Forgets every event and count (the buffer is kept). */
void forge_observer_reset(struct forge_observer *obs);

/*
 * Sets p->cb_eval and p->cb_eval_user_data so that a context created with
 * *p reports to obs. The observer records nothing until bound.
 */
void forge_observer_context_params(struct forge_observer *obs, struct forge_context_params *p);

/*
 * Binds obs to fc (created with forge_observer_context_params), whose
 * model instance id, context id and execution generation label the events
 * from now on; NULL unbinds. Unbind before forge_context_free.
 */
void forge_observer_bind(struct forge_observer *obs, const struct forge_context *fc);

/*
 * Turns pre-dispatch sampling of model m's weights on, at most
 * max_pages_per_source (1..RF_PAGE_WINDOW_PAGES) pages per weight
 * source, or off with 0 (m may then be NULL). Allocates here, never in the
 * callback: the page-state buffer (max_pages_per_source bytes, touched
 * now) and an index of m's tensor names. m must outlive the observer or
 * sampling must be turned off before forge_model_free. Call while no
 * decode of the bound context runs; events recorded earlier keep their
 * samples. Errors: -EINVAL (NULL obs, NULL m with a budget, a budget
 * over RF_PAGE_WINDOW_PAGES), -EOVERFLOW (UINT32_MAX tensors or more),
 * -ENOMEM; after -EINVAL nothing changed, after the others sampling is off.
 */
int forge_observer_set_sampling(struct forge_observer *obs, struct forge_model *m,
                                uint32_t max_pages_per_source);

/* Counts so far. */
void forge_observer_stats(const struct forge_observer *obs, struct forge_observer_stats *out);

/*
 * The recorded events, in recording order (graph order within a decode);
 * *n_out of them. Owned by obs, valid until the next decode of its bound
 * context, forge_observer_reset or forge_observer_free.
 */
const struct rf_dispatch_event *forge_observer_events(const struct forge_observer *obs,
                                                      size_t *n_out);

/*
 * Process-unique id of a forge context (1, 2, ...), as events carry it.
 */
uint64_t forge_context_id(const struct forge_context *fc);

/* True when fc was created with a cb_eval callback installed. */
bool forge_context_has_cb_eval(const struct forge_context *fc);

/*
 * Contexts opened so far in this process with a cb_eval callback installed
 * (forge_context_create with one, the load-time access probe, an observed
 * forge_generate). Thread-safe. A run without an observer leaves it as it
 * was: the test of "no callback at all when disabled".
 */
uint64_t forge_cb_eval_contexts_opened(void);

#ifdef __cplusplus
}
#endif

#endif
