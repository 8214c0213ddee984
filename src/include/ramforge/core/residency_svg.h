/*
 * The residency picture: page snapshots drawn as the model a user thinks
 * of. One row per layer (blk.N) plus the embeddings and the output, one
 * column per tensor kind (attn_q, attn_k, attn_v, attn_output, ffn_gate,
 * ffn_up, ffn_down, norms, other), each cell filled by the fraction of
 * its tensors' file pages the snapshot saw resident; one panel per
 * boundary (after load, end of session, after release...) side by side,
 * with a legend and each panel's source ("mincore at after_load").
 *
 * Plain SVG 1.1 text from our own small writer: every cell is a <rect>
 * whose data-* attributes carry its figures (data-pages, data-resident-pages,
 * data-nonresident-pages, data-unknown-pages, data-tensors) and whose
 * <title> says them in words, so a test or a script can read the numbers
 * back and compare them with the report's per-resource figures.
 *
 * Plain C over plain structs (the inventory and snapshots of
 * ramforge/core/residency.h): nothing here samples pages, reads /proc or
 * includes llama.cpp. Errors are negative errno values; nothing prints.
 */
#ifndef RAMFORGE_RESIDENCY_SVG_H
#define RAMFORGE_RESIDENCY_SVG_H

#include <stddef.h>
#include <stdint.h>

#include "ramforge/core/inventory.h"
#include "ramforge/core/residency.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The picture's columns, in drawing order. */
enum rf_svg_kind {
    RF_SVG_ATTN_Q = 0,
    RF_SVG_ATTN_K,
    RF_SVG_ATTN_V,
    RF_SVG_ATTN_OUTPUT,
    RF_SVG_FFN_GATE,
    RF_SVG_FFN_UP,
    RF_SVG_FFN_DOWN,
    RF_SVG_NORMS, /* every tensor whose kind contains "norm" */
    RF_SVG_OTHER, /* the rest: token_embd, output.weight, fused qkv, biases of other kinds */
    RF_SVG_N_KINDS
};

/* The picture's row groups, in drawing order (layers sorted by N). */
enum rf_svg_row_group {
    RF_SVG_ROW_EMBEDDINGS = 0, /* token_embd.*, position_embd.*, token_types.* */
    RF_SVG_ROW_LAYER = 1,      /* blk.N.* with N <= RF_SVG_MAX_LAYER */
    RF_SVG_ROW_OUTPUT = 2,     /* output.*, output_norm.* */
    RF_SVG_ROW_OTHER = 3,      /* any other name */
};

#define RF_SVG_MAX_LAYER 65535u  /* a larger N is not a layer row: the tensor goes to "other" */
#define RF_SVG_MAX_BOUNDARIES 8u /* panels of one picture */

/* Where a tensor is drawn. */
struct rf_svg_place {
    enum rf_svg_row_group group;
    uint32_t layer; /* N of blk.N (group RF_SVG_ROW_LAYER), else 0 */
    enum rf_svg_kind kind;
};

/*
 * Places a tensor by its GGUF name: "blk.N.<kind>[.weight|.bias]" goes to
 * layer N, column <kind> (a kind containing "norm" to RF_SVG_NORMS, one not
 * in the enum to RF_SVG_OTHER); token_embd / position_embd / token_types
 * to the embeddings row and output / output_norm to the output row
 * (norms in RF_SVG_NORMS, the rest in RF_SVG_OTHER); anything else to the
 * other row. NULL name: the other row.
 */
struct rf_svg_place rf_residency_svg_place(const char *name);

/* Static column names ("attn_q", ..., "norms", "other"); NULL outside the enum. */
const char *rf_svg_kind_name(enum rf_svg_kind k);

/* One panel: a snapshot taken at a boundary. */
struct rf_residency_svg_boundary {
    const char *label;                            /* "after_load", "end_of_session", ...;
                                                     borrowed */
    const struct rf_residency_snapshot *snapshot; /* over the picture's inventory (same count
                                                     and tensor indices, in order); its
                                                     source names where the figures came
                                                     from; borrowed */
};

struct rf_residency_svg_params {
    const char *title;                    /* first line, e.g. the model path; NULL: none */
    const struct rf_inventory *inventory; /* names the resources; borrowed */
    const struct rf_residency_svg_boundary *boundaries; /* n_boundaries panels, left to right */
    size_t n_boundaries;                                /* 1..RF_SVG_MAX_BOUNDARIES */
};

/*
 * Renders the picture into *out, a NUL-terminated string the caller frees
 * with free() (*len: its length without the NUL; len may be NULL). A cell
 * sums its tensors' page ranges (pages two tensors share count in both,
 * as in the per-resource figures): data-pages is the range pages,
 * data-resident-pages what the snapshot saw resident, and so on. The fill
 * is the resident fraction of data-pages; a cell whose pages are all
 * unknown is grey, one whose tensors have no file pages (outside the
 * mapping: llama.cpp unmaps file ranges that only its repacked copies
 * used) is outlined only;
 * a row/kind without tensors has no <rect>. Errors: -EINVAL (NULL
 * argument, no panel or more than RF_SVG_MAX_BOUNDARIES, a snapshot whose
 * resources do not match the inventory's entries), -EOVERFLOW (a page
 * sum), -ENOMEM.
 */
int rf_residency_svg_render(const struct rf_residency_svg_params *p, char **out, size_t *len);

/*
 * rf_residency_svg_render written to path atomically (a temporary file in
 * the same directory, renamed): never partial. Errors: as the render, and
 * -errno of the write.
 */
int rf_residency_svg_write(const struct rf_residency_svg_params *p, const char *path);

#ifdef __cplusplus
}
#endif

#endif
