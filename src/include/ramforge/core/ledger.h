/*
 * The memory ledger: the 13 categories of the specification, PromptCache and ExpertCache, each with
 * an optional byte value, its provenance, the source it came from and a note.
 *
 * The ledger never adds categories into one "total memory". A value that
 * could not be had stays absent (has_value false) with a reason in note;
 * it is never a zero. rf_ledger_checked_total sums only the categories a
 * caller names, with overflow checks.
 */
#ifndef RAMFORGE_LEDGER_H
#define RAMFORGE_LEDGER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ramforge/error.h"

#ifdef __cplusplus
extern "C" {
#endif

enum rf_ledger_category {
    RF_LEDGER_FILE_BACKED_LOGICAL = 0, /* native tensor metadata */
    RF_LEDGER_FILE_BACKED_RESIDENT,    /* smaps Rss of the model mappings */
    RF_LEDGER_ANONYMOUS_WEIGHTS,       /* repacked/anonymous tensor payloads */
    RF_LEDGER_MAPPING_PSS,             /* smaps Pss of the model mappings */
    RF_LEDGER_PROCESS_RSS,             /* status VmRSS */
    RF_LEDGER_PROCESS_RSS_PEAK,        /* status VmHWM */
    RF_LEDGER_CGROUP_CURRENT,          /* memory.current / memory.usage_in_bytes */
    RF_LEDGER_CGROUP_PEAK,             /* memory.peak / memory.max_usage_in_bytes */
    RF_LEDGER_STAGING_REQUESTED,       /* page bytes in a prefetch plan */
    RF_LEDGER_STAGING_ACCEPTED,        /* bytes the native prefetch accepted */
    RF_LEDGER_KV_CACHE,
    RF_LEDGER_GRAPH_SCRATCH,
    RF_LEDGER_RUNTIME,
    RF_LEDGER_PROMPT_CACHE, /* a program's host prompt cache (llama-server's --cache-ram): the
                               sequence states it saved through libllama (ramforge exec) */
    RF_LEDGER_EXPERT_CACHE, /* a MoE model's expert cache under streaming: its reservations'
                               resident anonymous pages (mincore) */
    RF_LEDGER_N_CATEGORIES
};

enum rf_provenance {
    RF_PROV_EXACT_MEASURED = 0, /* read from a kernel or native counter */
    RF_PROV_NATIVE_LOGICAL,     /* a native logical size, not residency */
    RF_PROV_ESTIMATED,          /* derived conservatively */
    RF_PROV_UNKNOWN,            /* no reliable value */
    RF_PROV_REQUESTED,          /* bytes submitted to a hint or release */
    RF_PROV_NATIVE_ACCEPTED,    /* bytes the native layer accepted */
};

/* ExpertCache's note where no expert cache ran. */
#define RF_LEDGER_EXPERT_CACHE_NOT_RUN                                                             \
    "no expert cache ran (a MoE model under --residency-policy streaming, the plan applied)"

/* PromptCache's note where no program's sequence-state saves were observed. */
#define RF_LEDGER_PROMPT_CACHE_NOT_OBSERVED                                                        \
    "no sequence state saved through libllama was observed (llama-server's host prompt cache "     \
    "is measured under ramforge exec)"

#define RF_LEDGER_SOURCE_MAX 640
#define RF_LEDGER_NOTE_MAX RF_ERR_MAX /* one line (error.h) */

struct rf_ledger_entry {
    enum rf_ledger_category category;
    bool has_value;
    uint64_t value_bytes; /* meaningful only when has_value */
    enum rf_provenance provenance;
    char source[RF_LEDGER_SOURCE_MAX]; /* where the figure came from */
    char note[RF_LEDGER_NOTE_MAX];     /* what it means, or why it is unknown */
};

struct rf_ledger {
    struct rf_ledger_entry entries[RF_LEDGER_N_CATEGORIES]; /* indexed by category */
};

/*
 * Sets every category to unknown with a default reason (KV cache, graph
 * scratch and runtime get the spec's "not available from the C API"
 * reasons; the rest "not measured").
 */
void rf_ledger_init(struct rf_ledger *l);

/*
 * Records a value. provenance must not be RF_PROV_UNKNOWN (use
 * rf_ledger_set_unknown). source and note are copied (truncated to fit);
 * note may be NULL. Errors: -EINVAL for a bad category or provenance.
 */
int rf_ledger_set(struct rf_ledger *l, enum rf_ledger_category c, uint64_t value_bytes,
                  enum rf_provenance provenance, const char *source, const char *note);

/* Records that c is unknown, with the reason. Errors: -EINVAL. */
int rf_ledger_set_unknown(struct rf_ledger *l, enum rf_ledger_category c, const char *source,
                          const char *reason);

/*
 * Sums the n named categories, each as often as it is named. Errors: -EOVERFLOW when the sum
 * overflows uint64_t (no saturation), -ENODATA when a named category has no
 * value, -EINVAL for a bad category.
 */
int rf_ledger_checked_total(const struct rf_ledger *l, const enum rf_ledger_category *cats,
                            size_t n, uint64_t *out);

/* Spec names: "FileBackedLogical", ..., "Runtime". NULL for a bad value. */
const char *rf_ledger_category_name(enum rf_ledger_category c);

/* "exact_measured", "native_logical", "estimated", "unknown", "requested", "native_accepted". */
const char *rf_provenance_name(enum rf_provenance p);

/* An optional signed or unsigned figure of the reconciliation. */
struct rf_recon_value {
    bool has_value;
    int64_t value; /* bytes; differences may be negative */
};

/*
 * The spec's reconciliation. Differences are signed and present only when
 * both operands are; a value that does not fit int64_t is absent.
 */
struct rf_reconciliation {
    struct rf_recon_value mapped_virtual_bytes;  /* inventory page ranges */
    struct rf_recon_value mapped_resident_bytes; /* FileBackedResident */
    struct rf_recon_value process_rss_bytes;     /* ProcessRss */
    struct rf_recon_value cgroup_current_bytes;  /* CgroupCurrent */
    struct rf_recon_value cgroup_peak_bytes;     /* CgroupPeak */
    struct rf_recon_value rss_minus_mapping_resident_bytes;
    struct rf_recon_value cgroup_current_minus_rss_bytes;
};

/*
 * Builds the reconciliation from the ledger and the inventory's mapped
 * virtual bytes (has_mapped_virtual false when there is no inventory).
 */
void rf_ledger_reconcile(const struct rf_ledger *l, bool has_mapped_virtual,
                         uint64_t mapped_virtual_bytes, struct rf_reconciliation *out);

#ifdef __cplusplus
}
#endif

#endif
