/*
 * The read-ahead window's layout (ramforge/core/stream_window.h): the streamed
 * tensors of a streaming plan, each a unit the helper thread reads into a
 * slot (its outward page range) with the tensor's place in the slot.
 *
 * Workload: once per operation, over the inventory (a few hundred
 * entries); one qsort, one pass.
 */
#include "ramforge/core/stream_window.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* A streamed entry, sorted by (layer, file offset). */
struct cand {
    int32_t layer;
    uint64_t off, len;
    size_t entry;
};

static int cand_cmp(const void *a, const void *b)
{
    const struct cand *x = a, *y = b;
    if (x->layer != y->layer)
        return x->layer < y->layer ? -1 : 1;
    if (x->off != y->off)
        return x->off < y->off ? -1 : 1;
    return x->entry < y->entry ? -1 : x->entry > y->entry;
}

uint64_t rf_stream_window_ring_bytes(uint32_t slots, uint64_t largest_bytes)
{
    uint64_t r;
    if (__builtin_mul_overflow(largest_bytes, (uint64_t)slots, &r))
        return UINT64_MAX;
    return r;
}

void rf_stream_window_free(struct rf_stream_window *w)
{
    if (!w)
        return;
    free(w->units);
    memset(w, 0, sizeof(*w));
}

/* The streamed entries of plan over inv: *out (caller frees), *n. */
static int candidates(const struct rf_inventory *inv, const struct rf_stream_plan *plan,
                      struct cand **out, size_t *n)
{
    bool *pinned = calloc(inv->n ? inv->n : 1, sizeof(*pinned));
    struct cand *c = calloc(inv->n ? inv->n : 1, sizeof(*c));
    int rc = 0;

    *n = 0;
    if (!pinned || !c) {
        rc = -ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < plan->n_pinned; i++)
        if (plan->pinned[i] < inv->n)
            pinned[plan->pinned[i]] = true;
    for (size_t i = 0; i < inv->n; i++) {
        const struct rf_inventory_entry *e = &inv->entries[i];
        int32_t l = rf_tensor_layer_of(e->name);
        uint64_t end;
        if (l < 0 || pinned[i] || !e->file_backed || e->access != RF_ACCESS_FILE_BACKED ||
            e->mapping_index != 0 || e->logical_bytes == 0 ||
            (plan->n_expert && rf_expert_tensor_name(e->name))) /* the expert cache's */
            continue;
        if (__builtin_add_overflow(e->file_offset_bytes, e->logical_bytes, &end) ||
            end > UINT64_MAX - inv->page_bytes) {
            rc = -EOVERFLOW;
            goto out;
        }
        c[(*n)++] = (struct cand){
            .layer = l, .off = e->file_offset_bytes, .len = e->logical_bytes, .entry = i};
    }
    qsort(c, *n, sizeof(*c), cand_cmp);
out:
    free(pinned);
    if (rc < 0) {
        free(c);
        c = NULL;
        *n = 0;
    }
    *out = c;
    return rc;
}

int rf_stream_window_build(const struct rf_inventory *inv, const struct rf_stream_plan *plan,
                           uint32_t slots, uint64_t slot_bytes, struct rf_stream_window *out)
{
    struct cand *c = NULL;
    size_t n = 0;
    int rc;

    if (!out)
        return -EINVAL;
    memset(out, 0, sizeof(*out));
    if (!inv || !plan || inv->page_bytes == 0 || slots < RF_STREAM_READ_AHEAD_MIN_SLOTS ||
        slots > RF_STREAM_READ_AHEAD_MAX_SLOTS || slot_bytes == 0 ||
        slot_bytes % inv->page_bytes != 0)
        return -EINVAL;
    if (inv->n_mappings > 1)
        return -ENOTSUP;
    rc = candidates(inv, plan, &c, &n);
    if (rc < 0)
        return rc;
    out->slots = slots;
    out->slot_bytes = slot_bytes;
    out->page_bytes = inv->page_bytes;
    out->units = calloc(n ? n : 1, sizeof(*out->units));
    if (!out->units) {
        rc = -ENOMEM;
        goto out;
    }
    const uint64_t pg = inv->page_bytes;
    for (size_t i = 0; i < n; i++) {
        uint64_t first = c[i].off - c[i].off % pg, end = c[i].off + c[i].len;
        end += (pg - end % pg) % pg; /* no overflow: candidates() checked end + a page */
        if (end - first > slot_bytes) {
            out->units_too_large++;
            continue;
        }
        out->units[out->n_units++] =
            (struct rf_stream_window_unit){.entry = c[i].entry,
                                           .layer = c[i].layer,
                                           .file_offset_bytes = first,
                                           .bytes = end - first,
                                           .slot_offset_bytes = c[i].off - first};
        out->streamed_bytes += end - first;
    }
out:
    free(c);
    if (rc < 0)
        rf_stream_window_free(out);
    return rc;
}
