/*
 * Layer-ahead prefetch for the streaming policy (docs/STREAMING.md): a
 * helper thread that, while the decode computes layer N-1, asks the kernel
 * to read layer N's file bytes into the page cache with large sequential
 * readahead (posix_fadvise(POSIX_FADV_WILLNEED) on its own read-only
 * descriptor of the model file). It touches the page cache only, never the
 * model mapping: not a release, not a mapping mutation, no gate.
 *
 * Progress comes from llama.cpp's cb_eval ask phase: the first node that
 * reads a weight named blk.N.* posts N to the thread (an atomic store and a
 * sem_post, no I/O in the callback) and asks for a split there, so the
 * scheduler computes the graph up to that node before asking further (one
 * split per layer). One layer of lookahead: the latest posted layer wins,
 * a layer the thread has not reached when a newer one is posted is skipped.
 *
 * The locking mode (forge_ahead_create_locking) reads ahead into the
 * mapping instead and keeps what it read until it is used: the thread
 * mlocks (which reads the pages in and pins them) the streamed pieces of
 * the next layers, in the decode's order and across the end of a pass
 * into the next token's, keeping at most `window` layers locked, the one
 * being computed included; once the decode has computed a layer the thread
 * munlocks it (reclaim may take it again). The callback posts the
 * layer at the data phase of its first node (the previous layer is then
 * computed) and, when the layer streams and the thread has not locked it
 * yet, waits for it: that wait is the read time the compute did not hide.
 * mlock and munlock are not releases; the ranges are validated against
 * /proc/self/maps under the gate at create, and forge_generate settles the
 * prefetcher (joins the thread, every lock of its own undone) before it
 * returns, so no lock of the thread survives into a boundary.
 */
#ifndef RAMFORGE_FORGE_AHEAD_H
#define RAMFORGE_FORGE_AHEAD_H

#include <stdbool.h>
#include <stdint.h>

#include "ramforge/forge.h"

struct forge_ahead;

#define FORGE_AHEAD_MAX_DISTANCE 4
#define FORGE_AHEAD_MAX_WINDOW 4 /* locking mode: most layers locked at once */

/* What the prefetcher did since create (read with forge_ahead_stats after the generation). */
struct forge_ahead_stats {
    uint64_t layers_posted;     /* layer changes the callback posted */
    uint64_t layers_prefetched; /* layers the thread issued readahead for */
    uint64_t requested_bytes;   /* bytes of those layers (file extents), summed */
    uint64_t calls;             /* posix_fadvise calls */
    uint64_t failed_calls;      /* of which failed */
    int first_error;            /* negative errno of the first failure; 0: none */
    uint32_t n_layers;          /* layers with a file extent */
    bool locking;               /* the locking mode: layers_prefetched counts layers locked,
                                   requested_bytes the bytes mlock accepted, calls the mlock
                                   and munlock calls */
    uint32_t window_layers;     /* locking: layers locked at once, the computed one included */
    uint64_t read_ns;           /* locking: time in mlock (reading the layers), summed */
    uint64_t wait_ns;           /* locking: time the decode waited for a layer, summed */
    uint64_t waits;             /* locking: layers the decode waited for */
    uint64_t layers_unlocked;   /* locking: layers munlocked after use (or at settle) */
};

/*
 * Opens m's model file read-only, computes each layer's file extent (the
 * smallest and largest byte of the blk.N.* tensors with a file range) and
 * starts the thread. distance (1..FORGE_AHEAD_MAX_DISTANCE): when the
 * decode reaches layer L (its first node is asked for), layer
 * L + distance - 1 is read ahead; 1 reads layer L while L - 1 still computes.
 * Errors: -EINVAL (no model, no layers with a file
 * range), -ENOMEM, an open or pthread_create error as negative errno.
 */
int forge_ahead_create(struct forge_model *m, uint32_t distance, struct forge_ahead **out);

/*
 * The locking mode over ranges (n file page ranges of m's mapping, the
 * streaming plan's stream_ranges: the pages W reads that are not pinned),
 * with window layers (1..FORGE_AHEAD_MAX_WINDOW) locked at once. Each
 * range is validated (forge_ranges_addresses: takes the gate, so call it
 * with no context in flight) and cut by the layers' page extents; a page
 * two layers share is unlocked with the first. The thread starts reading
 * at once. Errors: -EINVAL, -ENOMEM, -EBUSY, -EFAULT (a range outside the
 * validated mapping), a pthread_create error as negative errno.
 */
int forge_ahead_create_locking(struct forge_model *m, const struct rf_file_range *ranges, size_t n,
                               uint32_t window, struct forge_ahead **out);

/*
 * Locking mode: stops and joins the thread, which munlocks every layer it
 * holds; the callback then neither posts nor waits. forge_generate calls it
 * before it returns. A no-op for NULL, the fadvise mode, or a second call.
 */
void forge_ahead_settle(struct forge_ahead *a);

/* Stops and joins the thread (settles), closes the descriptor, frees; NULL is a no-op. */
void forge_ahead_free(struct forge_ahead *a);

/*
 * Installs the prefetcher as p's cb_eval. A callback already in p (the
 * dispatch observer) is kept and called for every node as before; its ask
 * answer is honoured and its data phase is called only for nodes it asked
 * for. Call after the other callback is set, before forge_context_create.
 */
void forge_ahead_context_params(struct forge_ahead *a, struct forge_context_params *p);

/* Thread-safe (the locking mode reads its times under its mutex). */
void forge_ahead_stats(struct forge_ahead *a, struct forge_ahead_stats *out);

#endif
