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
 */
#ifndef RAMFORGE_FORGE_AHEAD_H
#define RAMFORGE_FORGE_AHEAD_H

#include <stdbool.h>
#include <stdint.h>

#include "ramforge/forge/forge.h"

struct forge_ahead;

#define FORGE_AHEAD_MAX_DISTANCE 4

/* What the prefetcher did since create (read with forge_ahead_stats after the generation). */
struct forge_ahead_stats {
    uint64_t layers_posted;     /* layer changes the callback posted */
    uint64_t layers_prefetched; /* layers the thread issued readahead for */
    uint64_t requested_bytes;   /* bytes of those layers (file extents), summed */
    uint64_t calls;             /* posix_fadvise calls */
    uint64_t failed_calls;      /* of which failed */
    int first_error;            /* negative errno of the first failure; 0: none */
    uint32_t n_layers;          /* layers with a file extent */
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

/* Stops and joins the thread, closes the descriptor, frees; NULL is a no-op. */
void forge_ahead_free(struct forge_ahead *a);

/*
 * Installs the prefetcher as p's cb_eval. A callback already in p (the
 * dispatch observer) is kept and called for every node as before; its ask
 * answer is honoured and its data phase is called only for nodes it asked
 * for. Call after the other callback is set, before forge_context_create.
 */
void forge_ahead_context_params(struct forge_ahead *a, struct forge_context_params *p);

void forge_ahead_stats(const struct forge_ahead *a, struct forge_ahead_stats *out);

#endif
