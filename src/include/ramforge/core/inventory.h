/*
 * The resource inventory: one entry per model tensor, keyed by inventory
 * generation + native tensor index, with its file page range, the pages it
 * shares with other file-backed tensors of the same mapping, an estimate of
 * what releasing it could reclaim, and whether it is eligible at all.
 *
 * Plain C over plain structs: forge fills rf_tensor_meta / rf_mapping_meta
 * from llama.cpp and /proc/self/maps; nothing here includes llama.cpp.
 */
#ifndef RAMFORGE_INVENTORY_H
#define RAMFORGE_INVENTORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ramforge/core/intervals.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RF_NAME_MAX 64 /* GGML_MAX_NAME: tensor names, including the NUL */

/* What the inference graph reads for a weight (observed once at load). */
enum rf_weight_access {
    RF_ACCESS_UNKNOWN = 0,      /* not observed */
    RF_ACCESS_FILE_BACKED = 1,  /* the graph reads the file mapping */
    RF_ACCESS_ANONYMOUS = 2,    /* the graph reads an anonymous (repacked) copy */
    RF_ACCESS_UNREFERENCED = 3, /* observed graph never read it */
};

/*
 * How the weights' access was classified, and so what each access value
 * states:
 *
 *   GRAPH_PROBE  the sources of a one-token decode graph (cb_eval ask
 *                phase): FILE_BACKED / ANONYMOUS is where the graph read
 *                the weight, UNREFERENCED a weight the graph never named.
 *                Costs one decode (about one token's time).
 *   PLACEMENT    where llama.cpp placed each tensor the model holds (its
 *                data pointer inside the file mapping: FILE_BACKED;
 *                elsewhere: ANONYMOUS, a repacked copy), without decoding.
 *                Any graph of the model reads a weight from there, but
 *                whether one reads it at all is not observed: UNREFERENCED
 *                is only a file tensor the model holds no tensor for.
 *   NONE         not classified: every access is UNKNOWN.
 */
enum rf_access_basis {
    RF_ACCESS_BASIS_NONE = 0,
    RF_ACCESS_BASIS_GRAPH_PROBE = 1,
    RF_ACCESS_BASIS_PLACEMENT = 2,
};

/* A mapping of the model file, as forge found it in /proc/self/maps. */
struct rf_mapping_meta {
    uint32_t index;                /* mapping index (0 for a single-file model) */
    char path[4096];               /* model file path */
    uint64_t file_size_bytes;      /* st_size of the file */
    uint32_t dev_major, dev_minor; /* device of the file */
    uint64_t inode;
    bool validated;            /* an r--s mapping with this dev+inode was found in maps */
    uint64_t map_offset_bytes; /* file offset of the first mapped byte (page aligned) */
    uint64_t map_length_bytes; /* bytes mapped from map_offset_bytes */
};

/* One tensor, as forge read it from GGUF metadata and the graph probe. */
struct rf_tensor_meta {
    uint32_t index;               /* native tensor index (GGUF order) */
    char name[RF_NAME_MAX];       /* may repeat between tensors */
    char type_name[16];           /* ggml type name: "q8_0", "f32", ... */
    int32_t mapping_index;        /* -1: not file-backed / no mapping */
    uint64_t file_offset_bytes;   /* absolute file offset of the data */
    uint64_t logical_bytes;       /* ggml_nbytes: payload size */
    enum rf_weight_access access; /* what the graph reads */
};

enum rf_eligibility {
    RF_ELIGIBLE = 0,              /* file-backed, read from the file, release-eligible */
    RF_ELIGIBLE_DEAD_FILE_PAGES,  /* graph reads an anonymous copy: file pages unused */
    RF_INELIGIBLE_UNREFERENCED,   /* never read by the observed graph (not eligible: may be) */
    RF_INELIGIBLE_UNKNOWN_ACCESS, /* access not observed */
    RF_INELIGIBLE_EMPTY_RANGE,    /* zero logical bytes */
    RF_INELIGIBLE_NOT_MAPPED,     /* no validated mapping, or the range lies outside it */
};

enum rf_confidence {
    RF_CONFIDENCE_LOW = 0,    /* no validated mapping */
    RF_CONFIDENCE_MEDIUM = 1, /* validated mapping, access not observed */
    RF_CONFIDENCE_HIGH = 2,   /* validated mapping and observed access */
};

struct rf_resource_key {
    uint64_t generation;   /* inventory generation */
    uint32_t tensor_index; /* native tensor index */
};

struct rf_inventory_entry {
    struct rf_resource_key key;
    char name[RF_NAME_MAX];
    char type_name[16];
    bool file_backed;                  /* has a validated mapping range */
    int32_t mapping_index;             /* -1 when none */
    uint64_t mapping_size_bytes;       /* map_length_bytes of its mapping, 0 when none */
    uint64_t file_offset_bytes;        /* absolute file offset */
    uint64_t logical_bytes;            /* payload bytes */
    uint64_t page_bytes;               /* page size used for the ranges */
    struct rf_page_range pages;        /* outward page range in file pages */
    uint64_t shared_page_bytes;        /* pages shared with other file-backed tensors, bytes */
    uint64_t unique_reclaimable_bytes; /* (range pages - shared pages) * page_bytes, estimate */
    enum rf_weight_access access;
    enum rf_eligibility eligibility;
    enum rf_confidence confidence;
};

struct rf_inventory_totals {
    uint64_t n_tensors;
    uint64_t n_file_backed;
    uint64_t n_anonymous;               /* access == ANONYMOUS */
    uint64_t n_eligible;                /* ELIGIBLE or ELIGIBLE_DEAD_FILE_PAGES */
    uint64_t logical_bytes;             /* all tensors (checked sum: overflow fails the build) */
    uint64_t file_backed_logical_bytes; /* tensors with a validated mapping range */
    uint64_t anonymous_logical_bytes;   /* tensors the graph reads from an anonymous copy */
    uint64_t mapped_virtual_bytes;      /* union of file-backed page ranges, bytes */
    uint64_t shared_page_bytes;         /* union of pages shared by >=2 tensors, bytes */
    uint64_t unique_reclaimable_bytes;  /* sum over eligible entries */
};

struct rf_inventory {
    uint64_t generation;
    uint64_t page_bytes;
    struct rf_inventory_entry *entries; /* n entries in native index order, owned */
    size_t n;
    struct rf_mapping_meta *mappings; /* copies of the mapping metadata, owned */
    size_t n_mappings;
    struct rf_inventory_totals totals;
};

void rf_inventory_init(struct rf_inventory *inv);

/* Frees entries and mappings; leaves an empty inventory. NULL is a no-op. */
void rf_inventory_free(struct rf_inventory *inv);

/*
 * Builds an inventory of generation `generation` from n tensors and
 * n_mappings mappings into *out (initialised; old content freed).
 *
 * A tensor is file-backed when mapping_index names a validated mapping and
 * [file_offset, file_offset + logical_bytes) lies inside the mapped
 * fragment [map_offset, map_offset + map_length) and inside the file;
 * otherwise it is RF_INELIGIBLE_NOT_MAPPED with confidence LOW. Shared-page
 * bytes: the pages of its range that other file-backed tensors of the same
 * mapping also cover (rf_interval_multi_covered). Totals use checked
 * arithmetic. page_bytes must be a power of two.
 *
 * mapping_index is a position in `mappings`, and mappings[i].index must be
 * i. An empty tensor (logical_bytes 0) is inside when its offset lies in the
 * closed fragment and at or before the end of the file. A not-mapped entry
 * has mapping_index -1, an empty page range and zero shared/unique bytes;
 * its logical bytes still count in totals.logical_bytes (and in
 * anonymous_logical_bytes when its access is ANONYMOUS). Entries are sorted
 * by native tensor index, which must be unique.
 *
 * Errors: -EINVAL (bad page_bytes, mapping_index out of range, mappings[i].index
 * != i, duplicate tensor index, unknown access value), -EOVERFLOW (a sum or a
 * validated mapping's offset + length), -ENOMEM. On error *out is unchanged.
 */
int rf_inventory_build(const struct rf_tensor_meta *tensors, size_t n,
                       const struct rf_mapping_meta *mappings, size_t n_mappings,
                       uint64_t page_bytes, uint64_t generation, struct rf_inventory *out);

/*
 * Checks that key belongs to inv's current generation and names an entry;
 * returns it through *out (NULL on error). O(1) when indices are 0..n-1,
 * else O(log n). Errors: -RF_ESTALE (older generation, or any generation
 * other than inv's), -ENOENT, -EINVAL (NULL argument).
 */
int rf_inventory_lookup(const struct rf_inventory *inv, struct rf_resource_key key,
                        const struct rf_inventory_entry **out);

/*
 * Checks the shape a planner relies on: entries present when n > 0, a
 * page size, and every file-backed entry's mapping_index inside
 * [0, n_mappings). Returns 0 or -EINVAL (also for a NULL inv).
 */
int rf_inventory_check(const struct rf_inventory *inv);

/* Static names for reports; NULL for a value outside the enum. */
#define RF_INVENTORY_NO_RANK SIZE_MAX /* an entry the ordering does not name */

/*
 * Maps an ordering of tensor indices of inv's generation (order[0..n),
 * e.g. an access profile or a graph order) onto entry positions: on
 * success *rank_out (inv->n entries, the caller frees) holds each entry's
 * place in order, RF_INVENTORY_NO_RANK where order does not name it.
 * Returns 0 with *rank_out set when the ordering is valid; 0 with
 * *rank_out NULL when it names a tensor not in inv or one twice
 * (*bad_index is that tensor index and *named_twice says which case);
 * -ENOMEM.
 */
int rf_inventory_rank(const struct rf_inventory *inv, const uint32_t *order, size_t n,
                      size_t **rank_out, uint32_t *bad_index, bool *named_twice);

/*
 * The repeating-layer index of a tensor name "blk.<N>.<...>" (N decimal,
 * no sign, at most 9 digits), or -1 for any other name (token_embd,
 * output, norms) and for NULL. The one parser of a tensor's layer:
 * streaming, the read-ahead, the residency picture and watch use it.
 */
int32_t rf_tensor_layer_of(const char *name);

const char *rf_weight_access_name(enum rf_weight_access a); /* "file_backed", ... */
const char *rf_access_basis_name(enum rf_access_basis b);   /* "graph_probe", ... */
const char *rf_eligibility_name(enum rf_eligibility e);     /* "eligible", ... */
const char *rf_confidence_name(enum rf_confidence c);       /* "high", ... */

#ifdef __cplusplus
}
#endif

#endif
