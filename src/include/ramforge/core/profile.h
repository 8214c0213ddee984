/*
 * Persisted access profiles and prediction history (spec: "Policy
 * profiles", "Prediction accounting"; docs/PREDICTION.md).
 *
 * An access profile is what one complete, bounded dispatch trace
 * (dispatch.h) said about a model: per tensor name, its rank in graph
 * order of first use and how many attributed source references the
 * traced operation made to it. It holds stable tensor names only, never
 * transient node ids, and it is bound to a model identity: the SHA-256 of
 * the GGUF header (magic, version, metadata and tensor table: names,
 * types, shapes, offsets) followed by the file size, so a copy of the file
 * keeps its identity and any change of the model does not.
 *
 * The prediction history is a bounded list of per-operation prediction
 * records (rf_prediction) kept in the same document; its entries carry the
 * identity they were measured under and are dropped when it differs.
 *
 * The document is versioned JSON (schema/access_profile.schema.json):
 * rf_profile_parse reads one from a buffer (the fuzzing target: it never
 * trusts the text), rf_profile_to_text writes one. This module is plain C
 * over jansson; reading and writing files is the caller's.
 */
#ifndef RAMFORGE_PROFILE_H
#define RAMFORGE_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ramforge/core/dispatch.h"
#include "ramforge/core/intervals.h"
#include "ramforge/core/inventory.h"
#include "ramforge/core/routing.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RF_PROFILE_KIND "ramforge.access_profile"
#define RF_PROFILE_FORMAT_VERSION 1
#define RF_PROFILE_MAX_FILE_BYTES (16u << 20) /* 16 MiB: a larger file is refused unparsed */
#define RF_PROFILE_MAX_TENSORS 65536u         /* tensor entries a profile may hold */
#define RF_PROFILE_MAX_HISTORY 4096u          /* largest history bound (entries) */
#define RF_PROFILE_DEFAULT_HISTORY 32u        /* default history bound (entries) */
#define RF_PROFILE_IDENTITY_MAX 72            /* "sha256:" + 64 hex digits + NUL */
#define RF_PROFILE_NEVER UINT32_MAX           /* first_rank of a tensor never named */

/* What one tensor did in the traced operation. */
struct rf_profile_tensor {
    char name[RF_NAME_MAX]; /* stable GGUF tensor name, NUL-terminated */
    uint32_t first_rank;    /* rank in graph order of first use (0 = first); RF_PROFILE_NEVER */
    uint64_t accesses;      /* attributed source references in the traced operation */
};

/* One operation's prediction accounting; every figure says where it came from. */
struct rf_prediction {
    uint64_t operation; /* the profile's operation counter when it was recorded */
    char identity[RF_PROFILE_IDENTITY_MAX]; /* the model identity it was measured under */
    uint64_t selected_bytes;        /* staging planner: page bytes selected (not accepted) */
    bool has_accepted;              /* the native prefetch ran */
    uint64_t accepted_bytes;        /* native prefetch: bytes the kernel accepted (madvise 0) */
    bool has_mapping_delta;         /* both samples had the mapping RSS */
    int64_t mapping_delta_bytes;    /* smaps/status: mapping RSS after - before staging */
    bool has_pages;                 /* the per-page counts below were computed */
    uint64_t hit_pages;             /* staged and used (dispatch trace) */
    uint64_t miss_pages;            /* used, not staged, not resident before staging (mincore) */
    uint64_t wasted_pages;          /* staged, not used */
    uint64_t resident_staged_pages; /* staged, already resident before staging (mincore):
                                       the prefetch could not help them */
    uint64_t unknown_pages;         /* used, not staged, page-cache state before unknown */
    uint64_t used_pages;            /* pages of the tensors the trace named */
    uint64_t page_bytes;            /* page size of the counts */
};

struct rf_profile {
    uint32_t format_version;                /* RF_PROFILE_FORMAT_VERSION */
    char identity[RF_PROFILE_IDENTITY_MAX]; /* "sha256:<hex>" */
    uint64_t file_size_bytes;               /* size of the model file */
    uint64_t operations;                    /* complete traces merged so far */
    struct rf_profile_tensor *tensors;      /* n_tensors, sorted by name; owned */
    size_t n_tensors;
    struct rf_prediction *history; /* n_history, oldest first; owned */
    size_t n_history;
    size_t max_history;        /* bound; rf_profile_history_push drops the oldest past it */
    struct rf_routing routing; /* a MoE model's routing last observed (docs/MOE.md);
                                  n_layer 0: none; owned */
};

/* An empty profile (no identity, no tensors, default history bound). */
void rf_profile_init(struct rf_profile *p);

/* Frees the arrays; leaves an empty profile. NULL is a no-op. */
void rf_profile_free(struct rf_profile *p);

/*
 * The model identity of a GGUF file from its header bytes (the file's
 * first header_len bytes: everything before the data section) and its
 * size: "sha256:" and the hex SHA-256 of the header bytes followed by the
 * size as 8 little-endian bytes. out holds RF_PROFILE_IDENTITY_MAX.
 * Errors: -EINVAL (NULL out, header NULL with header_len > 0).
 */
int rf_profile_identity(const void *header, size_t header_len, uint64_t file_size_bytes,
                        char out[RF_PROFILE_IDENTITY_MAX]);

/*
 * Replaces p's tensors by what the trace d says about inv (d parallel to
 * inv's entries, as rf_dispatch_summarize fills it) and counts one more
 * operation; identity and file size are set. Only a complete trace (no
 * dropped events) whose weight references were all attributed makes a
 * profile: otherwise -ENODATA, p unchanged and why says the reason.
 * Names shared by two inventory entries are left out (not stable).
 * Errors: -EINVAL, -ENODATA, -E2BIG (more than RF_PROFILE_MAX_TENSORS
 * names), -ENOMEM.
 */
int rf_profile_update(struct rf_profile *p, const struct rf_inventory *inv,
                      const struct rf_dispatch_summary *d, const char *identity,
                      uint64_t file_size_bytes, char *why, size_t why_size);

/*
 * Whether p belongs to the model of identity and file size (false: why
 * says which differs). A predicate: it cannot fail.
 */
bool rf_profile_matches(const struct rf_profile *p, const char *identity, uint64_t file_size_bytes,
                        char *why, size_t why_size);

/*
 * The two orders of p over inv's current generation, as tensor indices
 * (the caller frees both): *cold (release, coldest first: tensors p never
 * saw used first in inventory order, then by latest first use) and *hot
 * (staging: first-use order). Names p holds that inv does not carry
 * exactly once are passed over; *unmatched counts them. Either output
 * pointer may be NULL. Errors: -EINVAL, -ENOMEM.
 */
int rf_profile_orders(const struct rf_profile *p, const struct rf_inventory *inv, uint32_t **cold,
                      size_t *n_cold, uint32_t **hot, size_t *n_hot, size_t *unmatched);

/* Appends e, dropping the oldest entries past p->max_history. Errors: -EINVAL, -ENOMEM. */
int rf_profile_history_push(struct rf_profile *p, const struct rf_prediction *e);
/*
 * Merges into disk (the profile file as it is now, parsed; same identity)
 * what one process added to ours since it read the file, where ours had
 * base_operations operations (0: no file then): the operations it added
 * are counted on top of disk's; its tensors replace disk's when traced (a
 * complete trace of its own updated them: the latest trace is the
 * profile); its newest n_new_history history entries are appended to
 * disk's, the oldest past ours' bound dropped. Errors: -EINVAL (NULL, or
 * base_operations above ours'), -EOVERFLOW, -ENOMEM (disk then holds a
 * part of the merge: not to be written).
 */
int rf_profile_merge(struct rf_profile *disk, const struct rf_profile *ours,
                     uint64_t base_operations, bool traced, size_t n_new_history);

/*
 * Parses a profile document of len bytes (need not be NUL-terminated)
 * into *out (initialised here; free with rf_profile_free). Every field is
 * checked: kind, format_version (another version is -EPROTO), identity
 * syntax, counts, name lengths, bounds (RF_PROFILE_MAX_TENSORS tensors,
 * RF_PROFILE_MAX_HISTORY history entries), duplicate names. History
 * entries of another identity are dropped, and the oldest past
 * max_history (0: RF_PROFILE_DEFAULT_HISTORY). why receives one line on
 * error. Errors: -EINVAL (NULL arguments), -EFBIG (len over
 * RF_PROFILE_MAX_FILE_BYTES, checked before parsing), -EBADMSG (not JSON,
 * truncated or malformed), -EPROTO (another format version), -E2BIG (over
 * a bound), -ENOMEM. On error *out is empty.
 */
int rf_profile_parse(const char *text, size_t len, size_t max_history, struct rf_profile *out,
                     char *why, size_t why_size);

/*
 * The document of p, NUL-terminated, in *out (the caller frees). Errors:
 * -EINVAL, -ENOMEM, -RF_EJSON (a tensor name that is not UTF-8: the key a
 * later run matches is refused, not replaced).
 */
int rf_profile_to_text(const struct rf_profile *p, char **out);

/*
 * Per-page prediction counts of one operation (the per-page model of
 * docs/PREDICTION.md), over file pages of the mappings:
 *   staged   S: pages in staged[0..n_staged) (the staging plan's ranges);
 *   used     U: pages in used[0..n_used) (page ranges of the tensors the
 *              dispatch trace named; overlapping ranges count once);
 *   before   R: page-cache state before staging, before[m][page] for
 *              mapping m (enum rf_page_state values), n_before_pages[m]
 *              pages long; a page past the end, or of a mapping >=
 *              n_mappings, is unknown.
 * hit = |S ∩ U|, wasted = |S \ U|, miss = |{p in U \ S: R(p) nonresident}|,
 * unknown = |{p in U \ S: R(p) unknown}|, used = |U|,
 * resident_staged = |{p in S: R(p) resident}|. The other fields of
 * *out are left alone; has_pages is set. Errors: -EINVAL, -ENOMEM.
 */
int rf_prediction_count(const struct rf_file_range *staged, size_t n_staged,
                        const struct rf_file_range *used, size_t n_used,
                        const uint8_t *const *before, const uint64_t *n_before_pages,
                        size_t n_mappings, struct rf_prediction *out);

#ifdef __cplusplus
}
#endif

#endif
