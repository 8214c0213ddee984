/*
 * The resource inventory: turns forge's tensor and mapping metadata into one
 * entry per tensor (file page range, shared-page cost, reclaimable estimate,
 * eligibility, confidence) plus totals, and answers key lookups that reject
 * keys of an older generation.
 *
 * Expected workload: one build per model load (hundreds to tens of
 * thousands of tensors, one mapping per split file), then many lookups.
 * The build is O(n log n): tensors are grouped by mapping and each group is
 * swept once (rf_interval_multi_covered) and sorted once (union).
 *
 * Eligibility, in the order it is decided:
 *
 *   no validated mapping, or range outside the
 *   mapped fragment or the file                 -> INELIGIBLE_NOT_MAPPED (LOW)
 *   logical_bytes == 0                          -> INELIGIBLE_EMPTY_RANGE
 *   access FILE_BACKED                          -> ELIGIBLE
 *   access ANONYMOUS (file pages never read)    -> ELIGIBLE_DEAD_FILE_PAGES
 *   access UNREFERENCED                         -> INELIGIBLE_UNREFERENCED
 *   access UNKNOWN                              -> INELIGIBLE_UNKNOWN_ACCESS
 *
 * Confidence for a mapped entry is HIGH when access was observed and MEDIUM
 * when it is UNKNOWN.
 */
#include "ramforge/core/inventory.h"
#include "ramforge/core/search.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ramforge/error.h"

void rf_inventory_init(struct rf_inventory *inv)
{
    memset(inv, 0, sizeof(*inv));
}

void rf_inventory_free(struct rf_inventory *inv)
{
    if (!inv)
        return;
    free(inv->entries);
    free(inv->mappings);
    rf_inventory_init(inv);
}

static bool is_pow2(uint64_t x)
{
    return x != 0 && (x & (x - 1)) == 0;
}

/* Copies a possibly unterminated name of at most size - 1 bytes, NUL-terminated. */
static void copy_name(char *dst, size_t size, const char *src)
{
    size_t len = strnlen(src, size - 1);

    memcpy(dst, src, len);
    dst[len] = '\0';
}

static bool access_valid(enum rf_weight_access a)
{
    switch (a) {
    case RF_ACCESS_UNKNOWN:
    case RF_ACCESS_FILE_BACKED:
    case RF_ACCESS_ANONYMOUS:
    case RF_ACCESS_UNREFERENCED:
        return true;
    }
    return false;
}

/*
 * Whether [off, off + len) lies inside mapping m's fragment and inside the
 * file. An empty range counts as inside when its offset lies in the closed
 * fragment [map_offset, map_end] and at or before the end of the file.
 * map_end was checked for overflow by the caller.
 */
static bool range_inside(const struct rf_mapping_meta *m, uint64_t map_end, uint64_t off,
                         uint64_t len)
{
    uint64_t end;

    if (__builtin_add_overflow(off, len, &end))
        return false;
    return off >= m->map_offset_bytes && end <= map_end && end <= m->file_size_bytes;
}

static int entry_index_cmp(const void *pa, const void *pb)
{
    const struct rf_inventory_entry *a = pa, *b = pb;

    if (a->key.tensor_index != b->key.tensor_index)
        return a->key.tensor_index < b->key.tensor_index ? -1 : 1;
    return 0;
}

static int range_first_cmp(const void *pa, const void *pb)
{
    const struct rf_page_range *a = pa, *b = pb;

    if (a->first_page != b->first_page)
        return a->first_page < b->first_page ? -1 : 1;
    return 0;
}

/* Pages in the union of n ranges sorted by first_page (non-empty ranges only). */
static uint64_t sorted_union_pages(const struct rf_page_range *r, size_t n)
{
    uint64_t pages = 0, cur_first = 0, cur_end = 0;
    bool open = false;
    size_t i;

    for (i = 0; i < n; i++) {
        if (open && r[i].first_page <= cur_end) {
            if (r[i].end_page > cur_end)
                cur_end = r[i].end_page;
            continue;
        }
        if (open)
            pages += cur_end - cur_first;
        cur_first = r[i].first_page;
        cur_end = r[i].end_page;
        open = true;
    }
    if (open)
        pages += cur_end - cur_first;
    return pages;
}

/* Fills e from t, deciding mapping, pages, eligibility and confidence. */
static int classify(const struct rf_tensor_meta *t, const struct rf_mapping_meta *mappings,
                    const uint64_t *map_ends, uint64_t page_bytes, uint64_t generation,
                    struct rf_inventory_entry *e)
{
    const struct rf_mapping_meta *m = NULL;
    int rc;

    memset(e, 0, sizeof(*e));
    e->key.generation = generation;
    e->key.tensor_index = t->index;
    copy_name(e->name, sizeof(e->name), t->name);
    copy_name(e->type_name, sizeof(e->type_name), t->type_name);
    e->file_offset_bytes = t->file_offset_bytes;
    e->logical_bytes = t->logical_bytes;
    e->page_bytes = page_bytes;
    e->access = t->access;
    e->mapping_index = -1;

    if (t->mapping_index >= 0 && mappings[t->mapping_index].validated &&
        range_inside(&mappings[t->mapping_index], map_ends[t->mapping_index], t->file_offset_bytes,
                     t->logical_bytes))
        m = &mappings[t->mapping_index];

    if (!m) {
        e->file_backed = false;
        e->eligibility = RF_INELIGIBLE_NOT_MAPPED;
        e->confidence = RF_CONFIDENCE_LOW;
        e->pages.first_page = e->pages.end_page = 0;
        return 0;
    }

    e->file_backed = true;
    e->mapping_index = t->mapping_index;
    e->mapping_size_bytes = m->map_length_bytes;
    rc = rf_page_range_outward(t->file_offset_bytes, t->logical_bytes, page_bytes, &e->pages);
    if (rc < 0)
        return rc;
    e->confidence = t->access == RF_ACCESS_UNKNOWN ? RF_CONFIDENCE_MEDIUM : RF_CONFIDENCE_HIGH;
    if (t->logical_bytes == 0) {
        e->eligibility = RF_INELIGIBLE_EMPTY_RANGE;
        return 0;
    }
    switch (t->access) {
    case RF_ACCESS_FILE_BACKED:
        e->eligibility = RF_ELIGIBLE;
        break;
    case RF_ACCESS_ANONYMOUS:
        e->eligibility = RF_ELIGIBLE_DEAD_FILE_PAGES;
        break;
    case RF_ACCESS_UNREFERENCED:
        e->eligibility = RF_INELIGIBLE_UNREFERENCED;
        break;
    case RF_ACCESS_UNKNOWN:
    default:
        e->eligibility = RF_INELIGIBLE_UNKNOWN_ACCESS;
        break;
    }
    return 0;
}

static bool is_eligible(enum rf_eligibility e)
{
    return e == RF_ELIGIBLE || e == RF_ELIGIBLE_DEAD_FILE_PAGES;
}

/*
 * Sets e's shared and unique bytes from its mapping's multiply covered set
 * (shared[e->mapping_index]) and adds e into tot. Errors: -EOVERFLOW.
 */
static int add_entry(struct rf_inventory_entry *e, const struct rf_interval_set *shared,
                     struct rf_inventory_totals *tot)
{
    uint64_t pages, sp;

    if (__builtin_add_overflow(tot->logical_bytes, e->logical_bytes, &tot->logical_bytes))
        return -EOVERFLOW;
    if (e->access == RF_ACCESS_ANONYMOUS) {
        tot->n_anonymous++;
        if (__builtin_add_overflow(tot->anonymous_logical_bytes, e->logical_bytes,
                                   &tot->anonymous_logical_bytes))
            return -EOVERFLOW;
    }
    if (is_eligible(e->eligibility))
        tot->n_eligible++;
    if (!e->file_backed)
        return 0;

    tot->n_file_backed++;
    if (__builtin_add_overflow(tot->file_backed_logical_bytes, e->logical_bytes,
                               &tot->file_backed_logical_bytes))
        return -EOVERFLOW;
    sp = rf_interval_set_overlap_pages(&shared[e->mapping_index], e->pages);
    pages = rf_page_range_pages(e->pages); /* sp <= pages: sp counts pages of the range */
    if (__builtin_mul_overflow(sp, e->page_bytes, &e->shared_page_bytes) ||
        __builtin_mul_overflow(pages - sp, e->page_bytes, &e->unique_reclaimable_bytes))
        return -EOVERFLOW;
    if (is_eligible(e->eligibility) &&
        __builtin_add_overflow(tot->unique_reclaimable_bytes, e->unique_reclaimable_bytes,
                               &tot->unique_reclaimable_bytes))
        return -EOVERFLOW;
    return 0;
}

/*
 * Work arrays, all owned by the build:
 *   map_ends[m]   end byte of mapping m's fragment
 *   group_at[m]   start of mapping m's slice in ranges (group_at[m + 1]: its end)
 *   fill[m]       next free slot of mapping m's slice while grouping
 *   ranges        page ranges of file-backed entries, grouped by mapping
 *   shared[m]     pages of mapping m covered by >= 2 file-backed entries
 * On error *out is left as it was.
 */
int rf_inventory_build(const struct rf_tensor_meta *tensors, size_t n,
                       const struct rf_mapping_meta *mappings, size_t n_mappings,
                       uint64_t page_bytes, uint64_t generation, struct rf_inventory *out)
{
    struct rf_inventory inv;
    struct rf_inventory_totals *tot = &inv.totals;
    uint64_t *map_ends = NULL;
    size_t *group_at = NULL, *fill = NULL;
    struct rf_page_range *ranges = NULL;
    struct rf_interval_set *shared = NULL;
    size_t i, m;
    uint64_t mapped_pages = 0, shared_pages = 0;
    int rc = 0;

    rf_inventory_init(&inv);
    if (!out || (n > 0 && !tensors) || (n_mappings > 0 && !mappings) || !is_pow2(page_bytes)) {
        rc = -EINVAL;
        goto out;
    }
    inv.generation = generation;
    inv.page_bytes = page_bytes;

    /* Mappings: mapping_index is a position in `mappings`, whose .index must agree. */
    if (n_mappings > 0) {
        inv.mappings = calloc(n_mappings, sizeof(*inv.mappings));
        map_ends = calloc(n_mappings, sizeof(*map_ends));
        shared = calloc(n_mappings, sizeof(*shared));
        if (!inv.mappings || !map_ends || !shared) {
            rc = -ENOMEM;
            goto out;
        }
    }
    inv.n_mappings = n_mappings;
    for (m = 0; m < n_mappings; m++) {
        if (mappings[m].index != m) {
            rc = -EINVAL;
            goto out;
        }
        inv.mappings[m] = mappings[m];
        inv.mappings[m].path[sizeof(inv.mappings[m].path) - 1] = '\0';
        if (__builtin_add_overflow(mappings[m].map_offset_bytes, mappings[m].map_length_bytes,
                                   &map_ends[m]) &&
            mappings[m].validated) { /* an unvalidated mapping's bounds are never used */
            rc = -EOVERFLOW;
            goto out;
        }
    }

    /* Entries, in native index order. */
    if (n > 0) {
        inv.entries = calloc(n, sizeof(*inv.entries));
        if (!inv.entries) {
            rc = -ENOMEM;
            goto out;
        }
    }
    inv.n = n;
    for (i = 0; i < n; i++) {
        if (tensors[i].mapping_index < -1 ||
            (tensors[i].mapping_index >= 0 && (size_t)tensors[i].mapping_index >= n_mappings) ||
            !access_valid(tensors[i].access)) {
            rc = -EINVAL;
            goto out;
        }
        rc = classify(&tensors[i], inv.mappings, map_ends, page_bytes, generation, &inv.entries[i]);
        if (rc < 0)
            goto out;
    }
    if (n > 1)
        qsort(inv.entries, n, sizeof(*inv.entries), entry_index_cmp);
    for (i = 1; i < n; i++) {
        if (inv.entries[i].key.tensor_index == inv.entries[i - 1].key.tensor_index) {
            rc = -EINVAL; /* the key would not name one entry */
            goto out;
        }
    }

    /* Group the file-backed ranges by mapping (counting sort). */
    group_at = calloc(n_mappings + 1, sizeof(*group_at));
    fill = calloc(n_mappings + 1, sizeof(*fill));
    if (n > 0)
        ranges = calloc(n, sizeof(*ranges));
    if (!group_at || !fill || (n > 0 && !ranges)) {
        rc = -ENOMEM;
        goto out;
    }
    for (i = 0; i < n; i++) {
        if (inv.entries[i].file_backed)
            group_at[inv.entries[i].mapping_index + 1]++;
    }
    for (m = 0; m < n_mappings; m++)
        group_at[m + 1] += group_at[m];
    memcpy(fill, group_at, (n_mappings + 1) * sizeof(*fill));
    for (i = 0; i < n; i++) {
        if (!inv.entries[i].file_backed)
            continue;
        m = (size_t)inv.entries[i].mapping_index;
        ranges[fill[m]++] = inv.entries[i].pages;
    }

    /* Per mapping: the multiply covered pages, then the union. */
    for (m = 0; m < n_mappings && n > 0; m++) {
        struct rf_page_range *r = ranges + group_at[m];
        size_t k = group_at[m + 1] - group_at[m];

        rc = rf_interval_multi_covered(r, k, &shared[m]);
        if (rc < 0)
            goto out;
        if (k > 1)
            qsort(r, k, sizeof(*r), range_first_cmp);
        if (__builtin_add_overflow(mapped_pages, sorted_union_pages(r, k), &mapped_pages) ||
            __builtin_add_overflow(shared_pages, rf_interval_set_pages(&shared[m]),
                                   &shared_pages)) {
            rc = -EOVERFLOW;
            goto out;
        }
    }

    /* Per entry: shared and unique pages, then the totals. */
    tot->n_tensors = n;
    for (i = 0; i < n; i++) {
        rc = add_entry(&inv.entries[i], shared, tot);
        if (rc < 0)
            goto out;
    }
    if (__builtin_mul_overflow(mapped_pages, page_bytes, &tot->mapped_virtual_bytes) ||
        __builtin_mul_overflow(shared_pages, page_bytes, &tot->shared_page_bytes)) {
        rc = -EOVERFLOW;
        goto out;
    }

    rf_inventory_free(out);
    *out = inv;
    rf_inventory_init(&inv);
out:
    if (shared) {
        for (m = 0; m < n_mappings; m++)
            rf_interval_set_free(&shared[m]);
    }
    free(shared);
    free(ranges);
    free(fill);
    free(group_at);
    free(map_ends);
    rf_inventory_free(&inv);
    return rc;
}

/* A tensor index to search inv's entries (sorted by it) for. */
struct index_key {
    const struct rf_inventory *inv;
    uint32_t tensor_index;
};

static bool index_at_least(const void *ctx, size_t i)
{
    const struct index_key *k = ctx;
    return k->inv->entries[i].key.tensor_index >= k->tensor_index;
}

int rf_inventory_check(const struct rf_inventory *inv)
{
    if (!inv || (inv->n > 0 && (!inv->entries || inv->page_bytes == 0)))
        return -EINVAL;
    for (size_t i = 0; i < inv->n; i++) {
        const struct rf_inventory_entry *e = &inv->entries[i];

        if (e->file_backed && (e->mapping_index < 0 || (size_t)e->mapping_index >= inv->n_mappings))
            return -EINVAL;
    }
    return 0;
}

int rf_inventory_lookup(const struct rf_inventory *inv, struct rf_resource_key key,
                        const struct rf_inventory_entry **out)
{
    if (out)
        *out = NULL;
    if (!inv || !out)
        return -EINVAL;
    if (key.generation != inv->generation)
        return -RF_ESTALE;
    /* Fast path: indices 0..n-1 in order put entry i at position i. */
    if (key.tensor_index < inv->n &&
        inv->entries[key.tensor_index].key.tensor_index == key.tensor_index) {
        *out = &inv->entries[key.tensor_index];
        return 0;
    }
    struct index_key k = {inv, key.tensor_index};
    size_t at = rf_partition_point(inv->n, index_at_least, &k);
    if (at == inv->n || inv->entries[at].key.tensor_index != key.tensor_index)
        return -ENOENT;
    *out = &inv->entries[at];
    return 0;
}

const char *rf_access_basis_name(enum rf_access_basis b)
{
    switch (b) {
    case RF_ACCESS_BASIS_NONE:
        return "none";
    case RF_ACCESS_BASIS_GRAPH_PROBE:
        return "graph_probe";
    case RF_ACCESS_BASIS_PLACEMENT:
        return "placement";
    }
    return NULL;
}

const char *rf_weight_access_name(enum rf_weight_access a)
{
    switch (a) {
    case RF_ACCESS_UNKNOWN:
        return "unknown";
    case RF_ACCESS_FILE_BACKED:
        return "file_backed";
    case RF_ACCESS_ANONYMOUS:
        return "anonymous";
    case RF_ACCESS_UNREFERENCED:
        return "unreferenced";
    }
    return NULL;
}

const char *rf_eligibility_name(enum rf_eligibility e)
{
    switch (e) {
    case RF_ELIGIBLE:
        return "eligible";
    case RF_ELIGIBLE_DEAD_FILE_PAGES:
        return "eligible_dead_file_pages";
    case RF_INELIGIBLE_UNREFERENCED:
        return "ineligible_unreferenced";
    case RF_INELIGIBLE_UNKNOWN_ACCESS:
        return "ineligible_unknown_access";
    case RF_INELIGIBLE_EMPTY_RANGE:
        return "ineligible_empty_range";
    case RF_INELIGIBLE_NOT_MAPPED:
        return "ineligible_not_mapped";
    }
    return NULL;
}

const char *rf_confidence_name(enum rf_confidence c)
{
    switch (c) {
    case RF_CONFIDENCE_LOW:
        return "low";
    case RF_CONFIDENCE_MEDIUM:
        return "medium";
    case RF_CONFIDENCE_HIGH:
        return "high";
    }
    return NULL;
}

int rf_inventory_rank(const struct rf_inventory *inv, const uint32_t *order, size_t n,
                      size_t **rank_out, uint32_t *bad_index, bool *named_twice)
{
    size_t *rank, bytes;

    *rank_out = NULL;
    if (__builtin_mul_overflow(inv->n ? inv->n : 1, sizeof(*rank), &bytes))
        return -ENOMEM;
    rank = malloc(bytes);
    if (!rank)
        return -ENOMEM;
    for (size_t i = 0; i < inv->n; i++)
        rank[i] = RF_INVENTORY_NO_RANK;
    for (size_t i = 0; i < n; i++) {
        struct rf_resource_key key = {inv->generation, order[i]};
        const struct rf_inventory_entry *e;

        if (rf_inventory_lookup(inv, key, &e) < 0 ||
            rank[e - inv->entries] != RF_INVENTORY_NO_RANK) {
            *bad_index = order[i];
            *named_twice = rf_inventory_lookup(inv, key, &e) == 0;
            free(rank);
            return 0;
        }
        rank[e - inv->entries] = i;
    }
    *rank_out = rank;
    return 0;
}

int32_t rf_tensor_layer_of(const char *name)
{
    int32_t n = 0;
    size_t i = 4, digits = 0;

    if (!name || strncmp(name, "blk.", 4) != 0)
        return -1;
    for (; name[i] >= '0' && name[i] <= '9'; i++) {
        if (++digits > 9)
            return -1;
        n = n * 10 + (name[i] - '0');
    }
    return digits > 0 && name[i] == '.' ? n : -1;
}
