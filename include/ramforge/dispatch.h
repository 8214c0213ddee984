/*
 * CPU node-dispatch events and their attribution to the inventory.
 *
 * forge's opt-in observer (forge_observer.h) fills one rf_dispatch_event
 * per non-empty, compute-enabled graph node, in graph order, before the
 * CPU backend runs that node's kernel. This module, plain C over those
 * plain structs, attributes each event's declared source names to
 * inventory entries and summarises the capture.
 *
 * Attribution is by exact name only: a source name is attributed when
 * exactly one inventory entry carries that name. A name two or more
 * entries share, a name no entry carries, a name that was truncated when
 * it was copied, and every source of an event from another model instance
 * stay unattributed. Nothing is guessed from prefixes or shapes.
 *
 * An event is dispatch-start evidence only: the node was handed to the
 * CPU backend. It is not a physical read, a page fault, I/O, completion or
 * proof of residency; RF_DISPATCH_CAVEAT says so and every summary carries
 * it. dropped_events > 0 marks the capture incomplete.
 */
#ifndef RAMFORGE_DISPATCH_H
#define RAMFORGE_DISPATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ramforge/inventory.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RF_DISPATCH_MAX_SRC 10           /* GGML_MAX_SRC: declared sources per node */
#define RF_DISPATCH_NAME_MAX RF_NAME_MAX /* node and source names, including the NUL */
#define RF_DISPATCH_OP_MAX 32            /* op names (ggml_op_desc), including the NUL */
#define RF_DISPATCH_NEVER UINT64_MAX     /* first_sequence of a tensor no event named */

#define RF_DISPATCH_CAVEAT                                                                         \
    "dispatch-start evidence only: a node was handed to the CPU backend; not a "                   \
    "physical read, page fault, I/O, completion or residency proof"

/* truncated_mask bit for the node name; bits 0..RF_DISPATCH_MAX_SRC-1 are sources. */
#define RF_DISPATCH_TRUNC_NODE (1u << 15)

/* One node dispatch, as the observer recorded it (fixed size, no pointers). */
struct rf_dispatch_event {
    uint64_t model_instance_id;    /* forge_model_instance_id of the model */
    uint64_t context_id;           /* process-unique id of the forge context (1, 2, ...) */
    uint64_t execution_generation; /* the context's completed executions when the decode
                                      was submitted: 0 for its first decode */
    uint64_t sequence;             /* the observer's ordinal of this node, 0-based; strictly
                                      increasing, < the observer's capacity */
    char node_name[RF_DISPATCH_NAME_MAX];
    char op_name[RF_DISPATCH_OP_MAX]; /* ggml_op_desc: "MUL_MAT", "SILU", ... */
    uint8_t n_src;                    /* declared sources recorded, <= RF_DISPATCH_MAX_SRC */
    uint16_t src_weight_mask;         /* bit i: source i lives in a model weights buffer */
    uint16_t truncated_mask;          /* bit i: source i's name was truncated;
                                         RF_DISPATCH_TRUNC_NODE: the node name was */
    char src_names[RF_DISPATCH_MAX_SRC][RF_DISPATCH_NAME_MAX]; /* declared names, in src order */
};

/* Per inventory entry: when the graph first named it as a source. */
struct rf_dispatch_tensor {
    uint64_t first_sequence; /* sequence of the first event naming it; RF_DISPATCH_NEVER */
    uint32_t first_order;    /* rank by first_sequence among named tensors (0 = first
                                used in graph order); UINT32_MAX when never named */
    uint64_t references;     /* attributed source references to it */
};

struct rf_dispatch_summary {
    uint64_t events;                    /* events given (recorded by the observer) */
    uint64_t dropped_events;            /* events the observer could not record */
    bool complete;                      /* dropped_events == 0 */
    uint64_t foreign_events;            /* events of another model instance: never attributed */
    uint64_t source_refs;               /* declared source references in all events */
    uint64_t attributed_refs;           /* references to a unique inventory name */
    uint64_t unattributed_refs;         /* source_refs - attributed_refs */
    uint64_t duplicate_name_refs;       /* name carried by two or more inventory entries */
    uint64_t truncated_refs;            /* name truncated when copied */
    uint64_t weight_refs;               /* references to a model weights buffer (src_weight_mask) */
    uint64_t unattributed_weight_refs;  /* weight references left unattributed */
    uint64_t tensors_named;             /* inventory entries with first_sequence != NEVER */
    struct rf_dispatch_tensor *tensors; /* n_tensors, parallel to inventory entries; owned */
    size_t n_tensors;
    const char *caveat; /* RF_DISPATCH_CAVEAT (static) */
};

/* An empty summary (no allocation); the caveat is set. */
void rf_dispatch_summary_init(struct rf_dispatch_summary *s);

/* Frees tensors and leaves an empty summary. NULL is a no-op. */
void rf_dispatch_summary_free(struct rf_dispatch_summary *s);

/*
 * Attributes the n events (graph order, as recorded) to inv's entries and
 * fills *out (initialised here; free with rf_dispatch_summary_free).
 * model_instance_id is the instance inv was built from: events of another
 * instance are counted in foreign_events and none of their sources is
 * attributed. Names compare with strcmp over the NUL-terminated fields; an
 * event with n_src > RF_DISPATCH_MAX_SRC is -EINVAL. O((n_inv + refs) log
 * n_inv). events may be NULL when n is 0.
 * Errors: -EINVAL (NULL inv/out, events NULL with n > 0, bad n_src),
 * -EOVERFLOW (an inventory of UINT32_MAX entries or more), -ENOMEM.
 * On error *out is empty.
 */
int rf_dispatch_summarize(const struct rf_inventory *inv, uint64_t model_instance_id,
                          const struct rf_dispatch_event *events, size_t n, uint64_t dropped_events,
                          struct rf_dispatch_summary *out);

#ifdef __cplusplus
}
#endif

#endif
