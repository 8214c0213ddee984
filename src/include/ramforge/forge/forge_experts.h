/*
 * The expert cache of the streaming policy on a mixture-of-experts model
 * (issue 33 item 5, docs/MOE.md): the routed expert tensors are read from
 * the file only in the slices the router chooses, into an LRU cache of c
 * experts a layer (ramforge/core/expert_cache.h), never through the file
 * mapping, so their pages never enter the page cache.
 *
 * Each routed tensor has an anonymous reservation as large as its outward
 * page range, placed so that the tensor's byte 0 sits at base + (file
 * offset % page): a slice's outward file pages are then the reservation's
 * pages, read in place with one pread per slice (O_DIRECT where the
 * filesystem allows it). At the router's node ffn_moe_topk-<L> (asked, so
 * computed before the expert matmuls) the ids of every row are read, the
 * missing experts' slices are read by reader threads and waited for, the
 * least recently used experts leave (MADV_DONTNEED of their own pages; an
 * edge page a cached neighbour shares stays). The matmul nodes' routed
 * weights are pointed at their reservations when asked, only in layers
 * whose router this decode went through (so the cache is lossless or not
 * used), and pointed back at the mapping at the decode's end.
 *
 * The read-ahead window owns it (forge_window_set_experts) and calls it
 * from its eval callback: run, serve and exec's contexts get it where they
 * get the window.
 */
#ifndef RAMFORGE_FORGE_EXPERTS_H
#define RAMFORGE_FORGE_EXPERTS_H

#include <stdbool.h>
#include <stdint.h>

#include "ramforge/core/experts.h"
#include "ramforge/core/streaming.h"
#include "ramforge/forge/forge.h"

struct forge_experts;
struct forge_window;

/*
 * A cache of capacity experts a layer (c, 0 .. n) within slots experts
 * held at once over every layer (T, rf_expert_lru_slots: >= n) over the
 * routed tensors of map (built over inv; those the graph reads from the
 * mapping), reading m's file. Errors: -EINVAL (NULL, capacity above n,
 * slots below n, no model mapping),
 * -ENODATA (no routed tensor is read from the mapping: repacked into
 * anonymous copies, which cannot stream), -ENOMEM, an open, mmap or
 * pthread_create error.
 */
int forge_experts_create(struct forge_model *m, const struct rf_inventory *inv,
                         const struct rf_expert_map *map, uint32_t capacity, uint32_t slots,
                         struct forge_experts **out);

/* Joins the readers, points every weight back, unmaps; NULL is a no-op. */
void forge_experts_free(struct forge_experts *x);

/* What the cache did since create (on true); NULL x: zeroed. */
void forge_experts_stats(struct forge_experts *x, struct rf_stream_experts *out);

/* Gives x to window w (w frees it); w's eval callback then drives it. */
void forge_window_set_experts(struct forge_window *w, struct forge_experts *x);

/* The stats of w's expert cache (on false: none). NULL w: zeroed. */
void forge_window_experts_stats(struct forge_window *w, struct rf_stream_experts *out);

#endif
