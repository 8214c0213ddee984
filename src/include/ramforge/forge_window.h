/*
 * The read-ahead window of the streaming policy (issue 25,
 * docs/STREAMING.md): a helper thread pread()s the streamed layers'
 * tensors (ramforge/stream_window.h), in the decode's order and across the
 * end of a token into the next, into a ring of anonymous slot buffers,
 * with O_DIRECT where the filesystem allows it (else through the page
 * cache); the decode computes each streamed layer from its slot.
 *
 * llama.cpp's cb_eval drives it, on the decoding thread. Each node that
 * reads a window layer's weight is asked for (the scheduler computes the
 * graph up to it, then asks further), so when the ask phase reaches the
 * first node of the next layer, every node that read the layer before is
 * computed: that layer's weights are pointed back at the mapping, its slot
 * goes back to the thread, and the new layer's slot is waited for (the
 * read time the compute did not hide). A node's weights are pointed at the
 * slot as the node is asked, which is before it is computed, and only when
 * the weight's data pointer is the file mapping's address of its bytes (a
 * repacked copy is never touched). forge_window_decode_end,
 * which forge_generate calls after each llama_decode's synchronisation
 * (the lease ended), points every weight back at the mapping: between two
 * decodes, at any boundary, every data pointer is the mapping's again.
 * The window never touches the mapping's pages: no release, no advice.
 */
#ifndef RAMFORGE_FORGE_WINDOW_H
#define RAMFORGE_FORGE_WINDOW_H

#include <stdbool.h>
#include <stdint.h>

#include "ramforge/forge.h"
#include "ramforge/stream_window.h"

struct forge_window;

/*
 * Allocates the ring (w->slots * w->slot_bytes of anonymous memory, touched
 * now so that it is charged before the decode), opens m's model file (the
 * window's mapping 0) with O_DIRECT, or without it where the filesystem
 * refuses (EINVAL), and starts the thread, which begins reading the first
 * layers at once. inv is the inventory w was built over (names). Errors:
 * -EINVAL (NULL argument, an empty window, a tensor outside inv),
 * -ENOMEM, an open, mmap or pthread_create error as negative errno.
 */
int forge_window_create(struct forge_model *m, const struct rf_inventory *inv,
                        const struct rf_stream_window *w, struct forge_window **out);

/* Stops and joins the thread, restores any data pointer, frees; NULL is a no-op. */
void forge_window_free(struct forge_window *w);

/*
 * Installs the window as p's cb_eval; a callback already in p (the
 * dispatch observer, the layer-ahead prefetch) is kept and called as
 * before. Call after the other callbacks are set, before
 * forge_context_create.
 */
void forge_window_context_params(struct forge_window *w, struct forge_context_params *p);

/*
 * After a llama_decode has completed (llama_synchronize returned): every
 * weight's data pointer back to the mapping, every slot the decode held
 * freed for the thread. NULL is a no-op.
 */
void forge_window_decode_end(struct forge_window *w);

/*
 * What the window did since create, into out (on set). NULL w: out
 * zeroed (on false).
 */
void forge_window_stats(struct forge_window *w, struct rf_stream_read_ahead *out);

#endif
