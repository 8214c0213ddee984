/*
 * The read-ahead window of the streaming policy (issue 25): which file
 * bytes a helper thread reads, layer by layer, into a ring of anonymous
 * slot buffers, and where each streamed tensor lands in its layer's slot,
 * so that the decode computes the streamed layers from memory the window
 * owns instead of faulting on the file mapping (docs/STREAMING.md).
 *
 * The streamed tensors are the plan's: entries of a repeating layer
 * (blk.N.*) the graph reads from the file mapping (access FILE_BACKED,
 * a validated range) that the plan does not pin. A layer's pieces are its
 * streamed tensors' outward page ranges, merged, in file order, laid end
 * to end in the slot; a tensor's bytes land at
 *   slot + piece.slot_offset + (tensor offset - piece file offset),
 * so the data pointer keeps its offset within a page (the alignment the
 * mapping gave it), and every read is page aligned (what O_DIRECT asks).
 *
 * Plain C over plain structs, no OS calls.
 */
#ifndef RAMFORGE_STREAM_WINDOW_H
#define RAMFORGE_STREAM_WINDOW_H

#include <stddef.h>
#include <stdint.h>

#include "ramforge/inventory.h"
#include "ramforge/streaming.h"

#define RF_STREAM_READ_AHEAD_MIN_SLOTS                                                             \
    2 /* fewer would wait on itself: the layer in use holds                                        \
         a slot while the next is read */
#define RF_STREAM_READ_AHEAD_MAX_SLOTS 8

/* One page-aligned file extent read into a slot. */
struct rf_stream_window_piece {
    uint64_t file_offset_bytes; /* page aligned */
    uint64_t bytes;             /* whole pages */
    uint64_t slot_offset_bytes; /* where it lands in the slot, page aligned */
};

/* One streamed tensor. */
struct rf_stream_window_tensor {
    size_t entry;               /* its inventory position */
    uint64_t file_offset_bytes; /* its first byte in the file */
    uint64_t logical_bytes;     /* its payload */
    uint64_t slot_offset_bytes; /* where its first byte lands in its layer's slot */
};

/* One streamed layer: its pieces and tensors are contiguous runs of the arrays below. */
struct rf_stream_window_layer {
    int32_t layer;                  /* N of blk.N */
    size_t first_piece, n_pieces;   /* into pieces */
    size_t first_tensor, n_tensors; /* into tensors */
    uint64_t bytes;                 /* its pieces' bytes: what is read each token */
};

/* The window. Arrays are owned; free with rf_stream_window_free. */
struct rf_stream_window {
    uint32_t slots;                        /* ring slots */
    uint64_t slot_bytes;                   /* bytes of one slot, whole pages */
    uint64_t page_bytes;                   /* the inventory's page size */
    struct rf_stream_window_layer *layers; /* n_layers, in increasing layer order */
    size_t n_layers;
    struct rf_stream_window_piece *pieces;
    size_t n_pieces;
    struct rf_stream_window_tensor *tensors;
    size_t n_tensors;
    uint64_t streamed_bytes;   /* the layers' bytes, summed: what is read each token */
    uint32_t layers_too_large; /* streamed layers larger than a slot: left to the mapping */
};

/*
 * The ring's bytes for slots slots of the plan's largest layer (whole
 * pages): what the read-ahead adds to the fixed part. 0 when slots is 0;
 * UINT64_MAX on overflow.
 */
uint64_t rf_stream_window_ring_bytes(uint32_t slots, uint64_t largest_layer_bytes);

/*
 * Builds the window of plan (applied to inv: the same inventory) with
 * slots slots of slot_bytes each (whole pages of inv). A streamed layer
 * larger than a slot is left out (layers_too_large) and streams through
 * the mapping. Only a model of one mapping is read ahead (-ENOTSUP
 * otherwise). *out is emptied first. Errors: -EINVAL (NULL argument, slots
 * outside [RF_STREAM_READ_AHEAD_MIN_SLOTS, RF_STREAM_READ_AHEAD_MAX_SLOTS],
 * slot_bytes not whole pages or 0), -ENOTSUP, -EOVERFLOW, -ENOMEM; on
 * error *out is empty.
 */
int rf_stream_window_build(const struct rf_inventory *inv, const struct rf_stream_plan *plan,
                           uint32_t slots, uint64_t slot_bytes, struct rf_stream_window *out);

/* Frees the arrays; leaves an empty window. NULL is a no-op. */
void rf_stream_window_free(struct rf_stream_window *w);

#endif
