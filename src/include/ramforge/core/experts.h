/*
 * The experts of a mixture-of-experts model in the inventory: each routed
 * expert tensor (blk.<N>.ffn_*_exps.*, 3-D, the expert on the outer
 * dimension) split into its per-expert slices, which are byte ranges of
 * the file (expert e's slice starts at the tensor's offset + e x the
 * slice's bytes); the dense and routed bytes; and what one token reads:
 * the dense part and k of the n slices of each routed tensor.
 *
 * Plain C over the inventory (inventory.h): forge gives the expert count
 * (n) and the experts each token selects (k) from the model's metadata.
 */
#ifndef RAMFORGE_EXPERTS_H
#define RAMFORGE_EXPERTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ramforge/core/intervals.h"
#include "ramforge/core/inventory.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One expert's slice of a routed expert tensor. */
struct rf_expert_slice {
    uint32_t expert;            /* 0 .. n_expert - 1 */
    uint64_t file_offset_bytes; /* absolute file offset of the slice's first byte */
    uint64_t bytes;             /* the slice's payload bytes */
    struct rf_page_range pages; /* outward page range in file pages */
    bool shared_first;          /* its first page holds bytes outside the slice */
    bool shared_last;           /* its last page holds bytes outside the slice */
    uint64_t shared_page_bytes; /* distinct edge pages shared with other bytes: 0, 1 or 2
                                   pages (one when both edges fall in the same page) */
};

/* A routed expert tensor of the inventory. */
struct rf_expert_tensor {
    uint32_t tensor_index;      /* the inventory entry's native tensor index */
    int32_t layer;              /* blk.<N> */
    uint64_t file_offset_bytes; /* the tensor's absolute file offset */
    uint64_t slice_bytes;       /* logical bytes / n_expert */
    bool file_read;             /* the graph reads it from the file mapping (file-backed,
                                   access FILE_BACKED), not from a repacked copy */
    uint64_t edge_shared_pages; /* distinct pages two of its slices share (interior edges) */
};

/* The experts of a model: its routed expert tensors, the dense part, a token's read. */
struct rf_expert_map {
    uint32_t n_expert;                /* experts per MoE layer (n) */
    uint32_t n_expert_used;           /* experts each token selects per layer (k) */
    struct rf_expert_tensor *tensors; /* in inventory order, owned */
    size_t n;                         /* routed expert tensors */
    uint64_t routed_bytes;            /* logical bytes of the routed expert tensors */
    uint64_t dense_bytes;             /* logical bytes of every other tensor */
    uint64_t token_routed_bytes;      /* routed_bytes x k / n, rounded up: a token's experts */
    uint64_t edge_shared_bytes;       /* pages two slices of one tensor share, bytes */
};

/*
 * Whether name is a routed expert tensor: "blk.<N>.ffn_<...>_exps.<...>"
 * (ffn_gate_exps, ffn_up_exps, ffn_down_exps, ffn_gate_up_exps, their
 * biases). Shared experts (_shexp) and routers (ffn_gate_inp) are dense.
 * False for NULL.
 */
bool rf_expert_tensor_name(const char *name);

/*
 * Expert `expert`'s slice of a routed tensor at file offset
 * tensor_offset_bytes whose slices are slice_bytes each, with pages of
 * page_bytes (a power of two). Errors: -EINVAL (NULL out, bad page_bytes),
 * -EOVERFLOW (the slice's end past 2^64).
 */
int rf_expert_slice_of(uint64_t tensor_offset_bytes, uint64_t slice_bytes, uint32_t expert,
                       uint64_t page_bytes, struct rf_expert_slice *out);

void rf_expert_map_init(struct rf_expert_map *m);

/* Frees the tensors; leaves an empty map. NULL is a no-op. */
void rf_expert_map_free(struct rf_expert_map *m);

/*
 * Builds *out (initialised; old content freed) from inv for a model of
 * n_expert experts of which each token selects n_expert_used. A tensor
 * named as a routed one whose logical bytes are not a multiple of n_expert
 * cannot be sliced and counts as dense (a token may read all of it). With
 * n_expert 0 (a dense model) the map has no tensor and every byte is
 * dense. Errors: -EINVAL (NULL argument, n_expert_used > n_expert, an
 * inventory without a page size), -EOVERFLOW, -ENOMEM; *out unchanged.
 */
int rf_expert_map_build(const struct rf_inventory *inv, uint32_t n_expert, uint32_t n_expert_used,
                        struct rf_expert_map *out);

/*
 * What one token reads from the file mapping (the decode's working set of
 * file pages): the union of the page ranges of the dense weights the graph
 * reads from the file, *dense_bytes, plus k/n (rounded up) of the pages of
 * the routed tensors it reads from the file that no dense weight covers,
 * *routed_bytes; *out their sum. For a dense map, rf_admission_file_working_set.
 * Errors: those of rf_admission_read_bytes, -EOVERFLOW.
 */
int rf_expert_token_read(const struct rf_inventory *inv, const struct rf_expert_map *m,
                         uint64_t *dense_bytes, uint64_t *routed_bytes, uint64_t *out);

/* The distinct layers of m's tensors (a layer below 0 not counted); 0 for NULL. */
uint32_t rf_expert_map_layers(const struct rf_expert_map *m);

/* routed x k / n rounded up (0 for n 0) into *out; -EINVAL (k > n), -EOVERFLOW. */
int rf_expert_share(uint64_t routed, uint32_t k, uint32_t n, uint64_t *out);

struct rf_routing; /* routing.h */

/*
 * A mixture-of-experts model (admission_experts.c): a token reads the dense
 * part and k of the n experts of each layer, so under a limit the verdict
 * speaks in experts. The file working set is dense_bytes + routed_bytes x
 * k / n; what the budget leaves beyond the dense part and the anonymous
 * memory is an expert cache of c experts per layer (k <= c <= n), whose
 * LRU hit rate comes from the routing observed (rf_routing_lru_hits) or,
 * before any is observed, from uniform routing (c / n).
 */
struct rf_admission_experts {
    uint32_t n_expert;                /* 0: a dense model (no expert figures) */
    uint32_t n_expert_used;           /* k, <= n_expert */
    uint64_t dense_bytes;             /* file pages of the dense weights a token reads */
    uint64_t routed_bytes;            /* file pages of every routed expert slice (all n) */
    uint32_t n_layer;                 /* layers with routed experts; 0: taken as 1 */
    const struct rf_routing *routing; /* observed (borrowed; its n must match), NULL: none */
};

#ifdef __cplusplus
}
#endif

#endif
