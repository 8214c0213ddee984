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
 *
 * Optional pre-dispatch sampling (forge_observer_set_sampling): with it on,
 * the observer samples, right before recording an event, the page-cache
 * state (mincore) of the file pages of each weight source, at most
 * sample_max_pages pages per source, and stores the counts in the event.
 * A sample is a point-in-time observation before dispatch, not a read and
 * not residency during the kernel; it never authorizes release or
 * eviction. The summary aggregates the samples and says
 * sampling_complete=false unless every weight source of every event was
 * sampled completely (RF_DISPATCH_SAMPLING_NOTE).
 */
#ifndef RAMFORGE_DISPATCH_H
#define RAMFORGE_DISPATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ramforge/core/intervals.h"
#include "ramforge/core/inventory.h"

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

#define RF_DISPATCH_SAMPLING_NOTE                                                                  \
    "point-in-time page-cache observation before dispatch (mincore); not a read, not "             \
    "residency during the kernel"

/* What became of the pre-dispatch sample of one weight source. */
enum rf_dispatch_sample_status {
    RF_DISPATCH_SAMPLE_NONE = 0,  /* no sample: not a weight source, or sampling was off */
    RF_DISPATCH_SAMPLE_COMPLETE,  /* every page of the tensor's file page range inspected,
                                     every state known */
    RF_DISPATCH_SAMPLE_PARTIAL,   /* the range has more pages than the per-source budget
                                     (below RF_PAGE_WINDOW_PAGES): the first only */
    RF_DISPATCH_SAMPLE_TRUNCATED, /* the range has more than RF_PAGE_WINDOW_PAGES
                                     pages, the per-call limit: the first only */
    RF_DISPATCH_SAMPLE_MISSING,   /* no validated mapping identity: the name is not exactly
                                     one model tensor (or was truncated), the tensor has no
                                     validated file range, the source does not read it from
                                     the model's file mapping (e.g. a repacked anonymous
                                     copy), or the context is another model's. Nothing
                                     inspected */
    RF_DISPATCH_SAMPLE_FAILED,    /* the mapping check or mincore failed: the inspected
                                     pages are unknown */
    RF_DISPATCH_SAMPLE_STATUS_COUNT
};

/* Static name of a status ("none", "complete", ...); "invalid" out of range. */
const char *rf_dispatch_sample_status_name(enum rf_dispatch_sample_status st);

/* The pre-dispatch sample of one source (zero: no sample). */
struct rf_dispatch_sample {
    uint8_t status;           /* enum rf_dispatch_sample_status */
    uint16_t inspected_pages; /* pages whose state was asked, <= RF_PAGE_WINDOW_PAGES */
    uint16_t resident_pages;  /* of those, in the page cache */
    uint16_t unknown_pages;   /* of those, unknown (failure); the rest were not cached */
};

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
    uint16_t sample_max_pages; /* pre-dispatch sampling budget per weight source when this
                                  event was recorded; 0: sampling was off */
    struct rf_dispatch_sample samples[RF_DISPATCH_MAX_SRC]; /* per source, in src order; set
                                  for weight sources when sample_max_pages > 0 */
};

/* Per inventory entry: when the graph first named it as a source. */
struct rf_dispatch_tensor {
    uint64_t first_sequence; /* sequence of the first event naming it; RF_DISPATCH_NEVER */
    uint32_t first_order;    /* rank by first_sequence among named tensors (0 = first
                                used in graph order); UINT32_MAX when never named */
    uint64_t references;     /* attributed source references to it */
};

/*
 * The pre-dispatch samples of a capture, over its weight references
 * (src_weight_mask). Each weight reference counts once under one status:
 * disabled when its event was recorded with sampling off, else its
 * sample's status (a weight source of a sampled event without one counts
 * as missing).
 */
struct rf_dispatch_sampling {
    bool enabled;                  /* some event was recorded with sampling on */
    bool sampling_complete;        /* enabled, samples > 0, no dropped event and every
                                      weight reference sampled complete: false for disabled,
                                      partial, truncated, missing or failed samples */
    uint32_t max_pages_per_source; /* largest sample_max_pages of the events; 0: off */
    uint64_t samples;              /* weight references sampling was on for (all statuses
                                      but disabled) */
    uint64_t pages_inspected;      /* sum over samples */
    uint64_t pages_resident;       /* of those, in the page cache */
    uint64_t pages_nonresident;    /* of those, not in the page cache */
    uint64_t pages_unknown;        /* of those, unknown */
    uint64_t complete, partial, truncated, missing, failed; /* samples per status */
    uint64_t disabled; /* weight references of events recorded with sampling off */
    const char *note;  /* RF_DISPATCH_SAMPLING_NOTE (static) */
};

struct rf_dispatch_summary {
    uint64_t events;                   /* events given (recorded by the observer) */
    uint64_t dropped_events;           /* events the observer could not record */
    bool complete;                     /* dropped_events == 0 */
    uint64_t foreign_events;           /* events of another model instance: never attributed */
    uint64_t source_refs;              /* declared source references in all events */
    uint64_t attributed_refs;          /* references to a unique inventory name */
    uint64_t unattributed_refs;        /* source_refs - attributed_refs */
    uint64_t duplicate_name_refs;      /* name carried by two or more inventory entries */
    uint64_t truncated_refs;           /* name truncated when copied */
    uint64_t weight_refs;              /* references to a model weights buffer (src_weight_mask) */
    uint64_t unattributed_weight_refs; /* weight references left unattributed */
    uint64_t tensors_named;            /* inventory entries with first_sequence != NEVER */
    struct rf_dispatch_sampling sampling; /* pre-dispatch samples of the weight references */
    struct rf_dispatch_tensor *tensors;   /* n_tensors, parallel to inventory entries; owned */
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
 * event with n_src > RF_DISPATCH_MAX_SRC is -EINVAL. The pre-dispatch
 * samples of the weight references are aggregated into out->sampling (an
 * event with a sample status out of range, or counts over its budget, is
 * -EINVAL). O((n_inv + refs) log n_inv). events may be NULL when n is 0.
 * Errors: -EINVAL (NULL inv/out, events NULL with n > 0, bad n_src or
 * sample),
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
