/*
 * The memory ledger: 15 categories, each an optional byte value with its
 * provenance, source and note, and the reconciliation built from them.
 *
 * A ledger is a fixed-size struct filled once per report (a handful of
 * sets), so everything here is O(categories). The ledger never invents a
 * value: unknown stays absent with a reason, sums are only of categories a
 * caller names and fail on overflow or on an absent value, and
 * reconciliation differences exist only when both operands do.
 */
#include "ramforge/core/ledger.h"

#include <errno.h>
#include <string.h>

#define RF_NOTE_NOT_MEASURED "not measured"

static const char *const category_names[RF_LEDGER_N_CATEGORIES] = {
    [RF_LEDGER_FILE_BACKED_LOGICAL] = "FileBackedLogical",
    [RF_LEDGER_FILE_BACKED_RESIDENT] = "FileBackedResident",
    [RF_LEDGER_ANONYMOUS_WEIGHTS] = "AnonymousWeights",
    [RF_LEDGER_MAPPING_PSS] = "MappingPss",
    [RF_LEDGER_PROCESS_RSS] = "ProcessRss",
    [RF_LEDGER_PROCESS_RSS_PEAK] = "ProcessRssPeak",
    [RF_LEDGER_CGROUP_CURRENT] = "CgroupCurrent",
    [RF_LEDGER_CGROUP_PEAK] = "CgroupPeak",
    [RF_LEDGER_STAGING_REQUESTED] = "StagingRequested",
    [RF_LEDGER_STAGING_ACCEPTED] = "StagingAccepted",
    [RF_LEDGER_KV_CACHE] = "KvCache",
    [RF_LEDGER_GRAPH_SCRATCH] = "GraphScratch",
    [RF_LEDGER_RUNTIME] = "Runtime",
    [RF_LEDGER_PROMPT_CACHE] = "PromptCache",
    [RF_LEDGER_EXPERT_CACHE] = "ExpertCache",
};

/* Default reasons for the categories the pinned C API cannot measure. */
static const char *const unavailable_notes[RF_LEDGER_N_CATEGORIES] = {
    [RF_LEDGER_KV_CACHE] = "KV-cache size is not available from the pinned llama.cpp C API",
    [RF_LEDGER_GRAPH_SCRATCH] =
        "graph/backend scratch size is not available from the pinned llama.cpp C API",
    [RF_LEDGER_RUNTIME] =
        "allocator/runtime/loader overhead is not available from the pinned llama.cpp C API",
    [RF_LEDGER_PROMPT_CACHE] = RF_LEDGER_PROMPT_CACHE_NOT_OBSERVED,
    [RF_LEDGER_EXPERT_CACHE] = RF_LEDGER_EXPERT_CACHE_NOT_RUN,
};

static bool category_valid(enum rf_ledger_category c)
{
    return (unsigned)c < (unsigned)RF_LEDGER_N_CATEGORIES;
}

static bool provenance_valid(enum rf_provenance p)
{
    return (unsigned)p <= (unsigned)RF_PROV_NATIVE_ACCEPTED;
}

/* Copies src (NULL: "") into dst of size bytes, truncating, NUL-terminated. */
static void copy_str(char *dst, size_t size, const char *src)
{
    size_t len = src ? strnlen(src, size - 1) : 0;

    if (len)
        memcpy(dst, src, len);
    dst[len] = '\0';
}

void rf_ledger_init(struct rf_ledger *l)
{
    int c;

    memset(l, 0, sizeof(*l));
    for (c = 0; c < RF_LEDGER_N_CATEGORIES; c++) {
        struct rf_ledger_entry *e = &l->entries[c];

        e->category = (enum rf_ledger_category)c;
        e->has_value = false;
        e->provenance = RF_PROV_UNKNOWN;
        copy_str(e->note, sizeof(e->note),
                 unavailable_notes[c] ? unavailable_notes[c] : RF_NOTE_NOT_MEASURED);
    }
}

int rf_ledger_set(struct rf_ledger *l, enum rf_ledger_category c, uint64_t value_bytes,
                  enum rf_provenance provenance, const char *source, const char *note)
{
    struct rf_ledger_entry *e;

    if (!l || !category_valid(c) || !provenance_valid(provenance) || provenance == RF_PROV_UNKNOWN)
        return -EINVAL;
    e = &l->entries[c];
    e->category = c;
    e->has_value = true;
    e->value_bytes = value_bytes;
    e->provenance = provenance;
    copy_str(e->source, sizeof(e->source), source);
    copy_str(e->note, sizeof(e->note), note);
    return 0;
}

int rf_ledger_set_unknown(struct rf_ledger *l, enum rf_ledger_category c, const char *source,
                          const char *reason)
{
    struct rf_ledger_entry *e;

    if (!l || !category_valid(c))
        return -EINVAL;
    e = &l->entries[c];
    e->category = c;
    e->has_value = false;
    e->value_bytes = 0;
    e->provenance = RF_PROV_UNKNOWN;
    copy_str(e->source, sizeof(e->source), source);
    copy_str(e->note, sizeof(e->note), reason ? reason : RF_NOTE_NOT_MEASURED);
    return 0;
}

/*
 * Validates every named category first, so the error does not depend on
 * the order: -EINVAL before -ENODATA before -EOVERFLOW. *out is written
 * only on success; n == 0 sums to 0.
 */
int rf_ledger_checked_total(const struct rf_ledger *l, const enum rf_ledger_category *cats,
                            size_t n, uint64_t *out)
{
    uint64_t sum = 0;
    size_t i;

    if (!l || !out || (n > 0 && !cats))
        return -EINVAL;
    for (i = 0; i < n; i++) {
        if (!category_valid(cats[i]))
            return -EINVAL;
    }
    for (i = 0; i < n; i++) {
        if (!l->entries[cats[i]].has_value)
            return -ENODATA;
    }
    for (i = 0; i < n; i++) {
        if (__builtin_add_overflow(sum, l->entries[cats[i]].value_bytes, &sum))
            return -EOVERFLOW;
    }
    *out = sum;
    return 0;
}

const char *rf_ledger_category_name(enum rf_ledger_category c)
{
    return category_valid(c) ? category_names[c] : NULL;
}

const char *rf_provenance_name(enum rf_provenance p)
{
    switch (p) {
    case RF_PROV_EXACT_MEASURED:
        return "exact_measured";
    case RF_PROV_NATIVE_LOGICAL:
        return "native_logical";
    case RF_PROV_ESTIMATED:
        return "estimated";
    case RF_PROV_UNKNOWN:
        return "unknown";
    case RF_PROV_REQUESTED:
        return "requested";
    case RF_PROV_NATIVE_ACCEPTED:
        return "native_accepted";
    }
    return NULL;
}

/* A present value when has and v fits int64_t; absent otherwise. */
static struct rf_recon_value recon_from_u64(bool has, uint64_t v)
{
    struct rf_recon_value r = {false, 0};

    if (has && v <= (uint64_t)INT64_MAX) {
        r.has_value = true;
        r.value = (int64_t)v;
    }
    return r;
}

static struct rf_recon_value recon_from_entry(const struct rf_ledger *l, enum rf_ledger_category c)
{
    if (!l)
        return recon_from_u64(false, 0);
    return recon_from_u64(l->entries[c].has_value, l->entries[c].value_bytes);
}

/* a - b when both are present and the difference fits int64_t. */
static struct rf_recon_value recon_sub(struct rf_recon_value a, struct rf_recon_value b)
{
    struct rf_recon_value r = {false, 0};

    if (a.has_value && b.has_value && !__builtin_sub_overflow(a.value, b.value, &r.value))
        r.has_value = true;
    else
        r.value = 0;
    return r;
}

void rf_ledger_reconcile(const struct rf_ledger *l, bool has_mapped_virtual,
                         uint64_t mapped_virtual_bytes, struct rf_reconciliation *out)
{
    if (!out)
        return;
    out->mapped_virtual_bytes = recon_from_u64(has_mapped_virtual, mapped_virtual_bytes);
    out->mapped_resident_bytes = recon_from_entry(l, RF_LEDGER_FILE_BACKED_RESIDENT);
    out->process_rss_bytes = recon_from_entry(l, RF_LEDGER_PROCESS_RSS);
    out->cgroup_current_bytes = recon_from_entry(l, RF_LEDGER_CGROUP_CURRENT);
    out->cgroup_peak_bytes = recon_from_entry(l, RF_LEDGER_CGROUP_PEAK);
    out->rss_minus_mapping_resident_bytes =
        recon_sub(out->process_rss_bytes, out->mapped_resident_bytes);
    out->cgroup_current_minus_rss_bytes =
        recon_sub(out->cgroup_current_bytes, out->process_rss_bytes);
}
