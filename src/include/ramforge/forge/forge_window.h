/*
 * The read-ahead window of the streaming policy (issue 25,
 * docs/STREAMING.md): helper threads pread() the streamed tensors
 * (ramforge/core/stream_window.h) in the order the decode reads them and
 * across the end of a token into the next, packed one after the other
 * into a ring of anonymous memory (each tensor's place there is its
 * slot), with O_DIRECT where the filesystem allows it (else through the
 * page cache); the decode computes from the ring.
 *
 * llama.cpp's cb_eval drives it, on the decoding thread. The first decode
 * (the prompt) runs from the mapping and records the order in which its
 * nodes first read each window weight; at its end the ring is allocated
 * and the thread starts. From then on each node that reads a window weight
 * is asked for (the scheduler computes the graph up to it, then asks
 * further), so when the ask phase reaches a node reading another window
 * weight, every node that read the one before is computed: that weight's
 * data goes back to the mapping's address, its slot back to the thread,
 * and the new weight's slot is waited for (the read time the compute did
 * not hide). A weight is pointed at its slot as the node is asked, which is
 * before it is computed, and only when its data pointer is the file
 * mapping's address of its bytes (a repacked copy is never touched).
 * forge_window_decode_end, which forge_generate calls after each
 * llama_decode's synchronisation (the lease ended), points every weight
 * back at the mapping: between two decodes, at any boundary, every data
 * pointer is the mapping's again. The window never touches the mapping's
 * pages: no release, no advice.
 */
#ifndef RAMFORGE_FORGE_WINDOW_H
#define RAMFORGE_FORGE_WINDOW_H

#include <stdbool.h>
#include <stdint.h>

#include "ramforge/core/stream_window.h"
#include "ramforge/forge/forge.h"

struct forge_window;
struct llama_context_params; /* llama.h */

/*
 * Opens m's model file (the window's mapping 0) with O_DIRECT, or without
 * it where the filesystem refuses (EINVAL), and starts the threads, which
 * wait for the first decode's end: then the ring (w->slots * w->slot_bytes
 * of anonymous memory) is allocated and touched, between two decodes, and
 * reading begins (an allocation failure leaves everything to the mapping,
 * read_ahead.first_error -ENOMEM). inv is the inventory w was built over
 * (names). A window of no unit starts no thread: it carries an expert cache
 * (forge_experts.h). Errors: -EINVAL (NULL argument, a unit outside
 * inv or larger than a slot), -ENOMEM, an open or pthread_create error as
 * negative errno.
 */
int forge_window_create(struct forge_model *m, const struct rf_inventory *inv,
                        const struct rf_stream_window *w, struct forge_window **out);

/* Stops and joins the threads, restores any data pointer, frees; NULL is a no-op. */
void forge_window_free(struct forge_window *w);

/*
 * Installs the window as p's cb_eval; a callback already in p (the
 * dispatch observer, the layer-ahead prefetch) is kept and called as
 * before. Call after the other callbacks are set, before
 * forge_context_create.
 */
void forge_window_context_params(struct forge_window *w, struct forge_context_params *p);

/*
 * llama.h's form of forge_window_context_params, for a program that creates
 * its own llama_context (an embedder through rf_read_ahead_context_params,
 * exec's llama_init_from_model interposer): installs the window's eval
 * callback in *p, chaining the cb_eval *p had (called for every node, as
 * before). By pointer, so the layers above forge need no llama.h. NULL w or
 * p: nothing. One context per window: a second decoration replaces the
 * first chain.
 */
void forge_window_llama_context_params(struct forge_window *w, struct llama_context_params *p);

/*
 * After a llama_decode has completed (llama_synchronize returned): every
 * weight's data pointer back to the mapping, the bytes the decode held
 * freed for the threads; after the first, the ring is allocated and the
 * threads start reading. NULL is a no-op.
 */
void forge_window_decode_end(struct forge_window *w);

/*
 * What the window did since create, into out (on set). NULL w: out
 * zeroed (on false).
 */
void forge_window_stats(struct forge_window *w, struct rf_stream_read_ahead *out);

/*
 * The window for contexts an application creates itself (window_hook.c):
 * a hook per model holds the window installed now, or none; a context's
 * params are decorated once, at its creation, with an eval callback that
 * reaches the window of the decode in progress through the hook, so a
 * context may outlive many windows (one an operation). llama.h's style:
 *
 *   forge_window_decorate(h, &cparams, &d);     before llama_init_from_model
 *   forge_window_hook_decode_begin(d);          before each llama_decode/_encode
 *   llama_decode(ctx, batch);
 *   forge_window_hook_decode_end(d);            after it returned
 *   forge_window_decoration_free(d);            after llama_free(ctx)
 *
 * One window serves one decode at a time (its pointer swap changes the
 * model's shared weights, its slots are refilled behind the decode): while
 * a window is installed, the decodes of the hook's contexts run one at a
 * time (begin waits for the one in progress); without one they run
 * concurrently. forge_window_hook_set waits for the decode in progress.
 * With an eval callback the scheduler synchronizes every range it computes
 * (ggml_backend_sched's compute_splits), so when llama_decode returns no
 * weight is read any more: decode_end points them back at the mapping.
 */
struct forge_window_hook;
struct forge_window_decoration;
struct llama_context_params;

/* A hook with no window installed. Errors: -EINVAL (NULL out), -ENOMEM. */
int forge_window_hook_create(struct forge_window_hook **out);

/* Frees h (its window, if any, is the caller's); every decoration of h is freed before.
   NULL is a no-op. */
void forge_window_hook_free(struct forge_window_hook *h);

/*
 * Installs w (NULL: none) as h's window, once no decode of h's contexts is
 * in progress; returns the window installed before (the caller's to free).
 * w must have been created over the hook's model.
 */
struct forge_window *forge_window_hook_set(struct forge_window_hook *h, struct forge_window *w);

/*
 * Decorates an application's context params p: cb_eval becomes the hook's,
 * which calls the callback p had (with its user data) on every node and
 * honours its answers, with or without a window installed. *out is the
 * context's decoration, the new cb_eval_user_data: freed after the
 * context. Errors: -EINVAL (a NULL argument), -ENOMEM (p untouched).
 */
int forge_window_decorate(struct forge_window_hook *h, struct llama_context_params *p,
                          struct forge_window_decoration **out);

struct forge_routing; /* forge_routing.h */

/*
 * forge_window_decorate, and a MoE model's routing recorder (NULL: none)
 * linked inside, between the hook's callback and the application's (the
 * routing observed in every context of the model: forge_routing_link). h
 * may be NULL when routing is not: the decoration then only observes the
 * routing (decode_begin and _end do nothing). Errors: -EINVAL (both NULL,
 * p or out NULL), -ENOMEM (p untouched).
 */
int forge_window_decorate_routed(struct forge_window_hook *h, struct forge_routing *routing,
                                 struct llama_context_params *p,
                                 struct forge_window_decoration **out);

/* NULL is a no-op. */
void forge_window_decoration_free(struct forge_window_decoration *d);

/* Before a decode of d's context, on the decoding thread: with a window installed, waits for
   the hook's other decodes and holds the window until decode_end. NULL d: nothing. */
void forge_window_hook_decode_begin(struct forge_window_decoration *d);

/* After that llama_decode (or llama_encode) returned, on the same thread:
   forge_window_decode_end of the window held, and the next decode may start. */
void forge_window_hook_decode_end(struct forge_window_decoration *d);

#endif
