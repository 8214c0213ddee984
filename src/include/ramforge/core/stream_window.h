/*
 * The read-ahead window of the streaming policy (issue 25): which file
 * bytes helper threads read, one streamed tensor (a unit) at a time, into
 * a ring of anonymous memory, and where the tensor's bytes land in its
 * place there (its slot), so that the decode computes the streamed tensors
 * from memory the window owns instead of faulting on the file mapping
 * (docs/STREAMING.md).
 *
 * The streamed tensors are the plan's: entries of a repeating layer
 * (blk.N.*) the graph reads from the file mapping (access FILE_BACKED,
 * a validated range) that the plan does not pin. A unit reads its tensor's
 * outward page range, so every read is page aligned (what O_DIRECT asks),
 * and the tensor's bytes land at slot + slot_offset_bytes, its offset
 * within a page: the data pointer keeps the alignment the mapping gave it.
 * The ring is `slots` times the largest streamed tensor (slot_bytes): N
 * largest tensors, far less than N layers; the reader packs the units into
 * it one after the other (forge_window.h), so it holds as many small ones
 * (a layer's norms are a page each) as its bytes allow.
 *
 * Plain C over plain structs, no OS calls.
 */
#ifndef RAMFORGE_STREAM_WINDOW_H
#define RAMFORGE_STREAM_WINDOW_H

#include <stddef.h>
#include <stdint.h>

#include "ramforge/core/inventory.h"
#include "ramforge/core/streaming.h"

#define RF_STREAM_READ_AHEAD_MIN_SLOTS                                                             \
    2 /* fewer would wait on itself: the tensor in use holds                                       \
         a slot while the next is read */
#define RF_STREAM_READ_AHEAD_MAX_SLOTS 8
/* run's default under streaming: a ring of 4 largest tensors (49 MB in tinyllama Q8_0), about
   the bytes of the page-cache window without it (one layer, 47 MB) */
#define RF_STREAM_READ_AHEAD_DEFAULT_SLOTS 4

/* One streamed tensor: the page-aligned file extent read into a slot. */
struct rf_stream_window_unit {
    size_t entry;               /* the tensor's inventory position */
    int32_t layer;              /* N of blk.N */
    uint64_t file_offset_bytes; /* first page of the tensor, page aligned */
    uint64_t bytes;             /* its outward pages, whole pages: what is read */
    uint64_t slot_offset_bytes; /* where the tensor's first byte lands in the slot (< a page) */
};

/* The window. The array is owned; free with rf_stream_window_free. */
struct rf_stream_window {
    uint32_t slots;                      /* the ring is slots x slot_bytes */
    uint64_t slot_bytes;                 /* the largest unit's bytes, whole pages */
    uint64_t page_bytes;                 /* the inventory's page size */
    struct rf_stream_window_unit *units; /* n_units, by (layer, file offset) */
    size_t n_units;
    uint64_t streamed_bytes;  /* the units' bytes, summed: what is read each token */
    uint32_t units_too_large; /* streamed tensors larger than a slot: left to the mapping */
};

/*
 * The ring's bytes for slots slots of the largest streamed tensor's pages
 * (largest_bytes, whole pages): what the read-ahead adds to the fixed part.
 * UINT64_MAX on overflow.
 */
uint64_t rf_stream_window_ring_bytes(uint32_t slots, uint64_t largest_bytes);

/*
 * Builds the window of plan (applied to inv: the same inventory) with
 * slots slots of slot_bytes each (whole pages of inv). A streamed tensor
 * larger than a slot is left out (units_too_large) and streams through
 * the mapping. Only a model of one mapping is read ahead (-ENOTSUP
 * otherwise). *out is emptied first. Errors: -EINVAL (NULL argument, slots
 * outside [RF_STREAM_READ_AHEAD_MIN_SLOTS, RF_STREAM_READ_AHEAD_MAX_SLOTS],
 * slot_bytes not whole pages or 0), -ENOTSUP, -EOVERFLOW, -ENOMEM; on
 * error *out is empty.
 */
int rf_stream_window_build(const struct rf_inventory *inv, const struct rf_stream_plan *plan,
                           uint32_t slots, uint64_t slot_bytes, struct rf_stream_window *out);

/* Frees the array; leaves an empty window. NULL is a no-op. */
void rf_stream_window_free(struct rf_stream_window *w);

#endif
