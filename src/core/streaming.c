/*
 * The streaming policy's resident-set planner (streaming.h): which file
 * pages to pin so that pinned + anonymous + KV + scratch + runtime + a
 * streaming window stay under the binding limit with a margin.
 *
 * Expected workload: one plan per operation over an inventory of a few
 * hundred to a few thousand tensors in one mapping, grouped by repeating
 * layer (tens to a few hundred layers). Page unions are kept as one
 * interval set per mapping; a group is tried by building its own union and
 * counting the pages the pinned set does not hold yet, so each group costs
 * O(its ranges * log(pinned ranges)).
 */
#include "ramforge/core/streaming.h"
#include "ramforge/core/stream_window.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GROUP_NONE (-3)   /* not read from the file, or not a validated range */
#define GROUP_ROWS (-2)   /* token_embd: read by rows, never pinned */
#define GROUP_HEAD (-1)   /* read in full every token outside the layers */
#define GROUP_EXPERT (-4) /* a routed expert tensor: the expert cache reads it */

void rf_stream_plan_init(struct rf_stream_plan *plan)
{
    memset(plan, 0, sizeof(*plan));
    plan->partial_layer = -1;
}

void rf_stream_plan_free(struct rf_stream_plan *plan)
{
    if (!plan)
        return;
    free(plan->pinned);
    free(plan->ranges);
    free(plan->stream_ranges);
    free(plan->rows_ranges);
    rf_stream_plan_init(plan);
}

uint64_t rf_stream_default_window(uint64_t largest_layer_bytes)
{
    uint64_t w;

    if (__builtin_mul_overflow(largest_layer_bytes, (uint64_t)RF_STREAM_WINDOW_LAYERS, &w))
        return UINT64_MAX;
    return w < RF_STREAM_MIN_WINDOW_BYTES ? RF_STREAM_MIN_WINDOW_BYTES : w;
}

uint64_t rf_stream_default_margin(uint64_t limit_bytes)
{
    uint64_t m = limit_bytes / RF_STREAM_MARGIN_DIVISOR;

    return m < RF_STREAM_MIN_MARGIN_BYTES ? RF_STREAM_MIN_MARGIN_BYTES : m;
}

/* The group of entry e (a layer index >= 0, or one of the GROUP_ values). */
static int32_t group_of(const struct rf_inventory_entry *e, bool has_output, bool routed)
{
    if (routed)
        return GROUP_EXPERT;
    if (!e->file_backed || e->access != RF_ACCESS_FILE_BACKED || e->eligibility != RF_ELIGIBLE ||
        e->mapping_index < 0 || rf_page_range_pages(e->pages) == 0)
        return GROUP_NONE;
    int32_t layer = rf_tensor_layer_of(e->name);
    if (layer >= 0)
        return layer;
    if (has_output && strncmp(e->name, "token_embd.", 11) == 0)
        return GROUP_ROWS;
    return GROUP_HEAD;
}

/* Per-mapping interval sets. */
struct sets {
    struct rf_interval_set *v;
    size_t n;
};

static int sets_init(struct sets *s, size_t n)
{
    s->n = n;
    s->v = calloc(n ? n : 1, sizeof(*s->v));
    if (!s->v)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++)
        rf_interval_set_init(&s->v[i]);
    return 0;
}

static void sets_free(struct sets *s)
{
    for (size_t i = 0; s->v && i < s->n; i++)
        rf_interval_set_free(&s->v[i]);
    free(s->v);
    s->v = NULL;
}

static void sets_clear(struct sets *s)
{
    for (size_t i = 0; i < s->n; i++) {
        rf_interval_set_free(&s->v[i]);
        rf_interval_set_init(&s->v[i]);
    }
}

/* Pages of every set; -EOVERFLOW when the sum does not fit. */
static int sets_pages(const struct sets *s, uint64_t *out)
{
    uint64_t sum = 0;

    for (size_t i = 0; i < s->n; i++)
        if (__builtin_add_overflow(sum, rf_interval_set_pages(&s->v[i]), &sum))
            return -EOVERFLOW;
    *out = sum;
    return 0;
}

/* Pages of g that pinned does not hold. */
static uint64_t sets_new_pages(const struct sets *pinned, const struct sets *g)
{
    uint64_t n = 0;

    for (size_t m = 0; m < g->n; m++)
        for (size_t j = 0; j < g->v[m].n; j++)
            n += rf_page_range_pages(g->v[m].v[j]) -
                 rf_interval_set_overlap_pages(&pinned->v[m], g->v[m].v[j]);
    return n;
}

static int sets_add_all(struct sets *dst, const struct sets *src)
{
    for (size_t m = 0; m < src->n; m++)
        for (size_t j = 0; j < src->v[m].n; j++) {
            int rc = rf_interval_set_add(&dst->v[m], src->v[m].v[j]);
            if (rc < 0)
                return rc;
        }
    return 0;
}

/* The union of the entries of group g into *out (cleared first). */
static int group_union(const struct rf_inventory *inv, const int32_t *group, int32_t g,
                       struct sets *out)
{
    sets_clear(out);
    for (size_t i = 0; i < inv->n; i++) {
        if (group[i] != g)
            continue;
        int rc = rf_interval_set_add(&out->v[inv->entries[i].mapping_index], inv->entries[i].pages);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* a - b floored at 0. */
static uint64_t sub0(uint64_t a, uint64_t b)
{
    return a > b ? a - b : 0;
}

/*
 * Adds the pages of cand to pinned when the union stays within
 * budget_pages. *added: true when added (also when cand has no page pinned
 * does not hold: it costs nothing). 0, -EOVERFLOW or -ENOMEM.
 */
static int pin_if_fits(struct sets *pinned, const struct sets *cand, uint64_t *pinned_pages,
                       uint64_t budget_pages, bool *added)
{
    uint64_t add = sets_new_pages(pinned, cand), total;
    *added = add == 0;
    if (add == 0)
        return 0;
    if (__builtin_add_overflow(*pinned_pages, add, &total))
        return -EOVERFLOW;
    if (total > budget_pages)
        return 0;
    int rc = sets_add_all(pinned, cand);
    if (rc < 0)
        return rc;
    *pinned_pages = total;
    *added = true;
    return 0;
}

/*
 * Tries group g: pins it when the union stays within budget_pages. *fit:
 * true when pinned (also a group with no page of its own to pin: repacked,
 * or empty). 0 or -errno.
 */
static int try_group(const struct rf_inventory *inv, const int32_t *group, int32_t g,
                     struct sets *pinned, struct sets *tmp, uint64_t *pinned_pages,
                     uint64_t budget_pages, bool *fit)
{
    int rc = group_union(inv, group, g, tmp);
    *fit = false;
    return rc < 0 ? rc : pin_if_fits(pinned, tmp, pinned_pages, budget_pages, fit);
}

/*
 * The first layer that did not fit whole (out->partial_layer): its entries
 * one by one in inventory (file) order, each pinned when its pages not yet
 * pinned stay within budget_pages; an entry that does not fit is skipped
 * and smaller ones after it are still tried. Marks them in partial[].
 */
static int try_partial_layer(const struct rf_inventory *inv, const int32_t *group,
                             struct sets *pinned, struct sets *tmp, uint64_t *pinned_pages,
                             uint64_t budget_pages, bool *partial, struct rf_stream_plan *out)
{
    for (size_t i = 0; i < inv->n; i++) {
        if (group[i] != out->partial_layer)
            continue;
        const struct rf_inventory_entry *e = &inv->entries[i];
        sets_clear(tmp);
        int rc = rf_interval_set_add(&tmp->v[e->mapping_index], e->pages);
        if (rc < 0)
            return rc;
        if (sets_new_pages(pinned, tmp) == 0)
            continue; /* its pages are pinned already: not a tensor pinned alone */
        bool added;
        rc = pin_if_fits(pinned, tmp, pinned_pages, budget_pages, &added);
        if (rc < 0)
            return rc;
        if (added) {
            partial[i] = true;
            out->partial_layer_tensors++;
        }
    }
    return 0;
}

/* The ranges of s as file ranges, per mapping in order: *out (owned, never NULL), *n. */
static int sets_to_ranges(const struct sets *s, struct rf_file_range **out, size_t *n)
{
    size_t total = 0;
    for (size_t m = 0; m < s->n; m++)
        total += s->v[m].n;
    *n = 0;
    if (!(*out = calloc(total ? total : 1, sizeof(**out))))
        return -ENOMEM;
    for (size_t m = 0; m < s->n; m++)
        for (size_t j = 0; j < s->v[m].n; j++)
            (*out)[(*n)++] =
                (struct rf_file_range){.mapping_index = (int32_t)m, .pages = s->v[m].v[j]};
    return 0;
}

/* Fills out->pinned and out->ranges from the groups pinned and the partial entries. */
static int collect(const struct rf_inventory *inv, const int32_t *group, const bool *partial,
                   const bool *layer_pinned, const struct sets *pinned, struct rf_stream_plan *out)
{
    size_t n = 0;

    for (size_t i = 0; i < inv->n; i++)
        if ((group[i] == GROUP_HEAD && out->head_pinned) ||
            (group[i] >= 0 && layer_pinned[group[i]]) || partial[i])
            n++;
    out->pinned = calloc(n ? n : 1, sizeof(*out->pinned));
    if (!out->pinned)
        return -ENOMEM;
    for (size_t i = 0; i < inv->n; i++)
        if ((group[i] == GROUP_HEAD && out->head_pinned) ||
            (group[i] >= 0 && layer_pinned[group[i]]) || partial[i])
            out->pinned[out->n_pinned++] = i;
    return sets_to_ranges(pinned, &out->ranges, &out->n_ranges);
}

/* out->stream_ranges: ws minus pinned, per mapping (both sorted, disjoint). */
static int streamed_ranges(const struct sets *ws, const struct sets *pinned,
                           struct rf_stream_plan *out)
{
    size_t cap = 0;

    for (size_t m = 0; m < ws->n; m++)
        cap += ws->v[m].n + pinned->v[m].n;
    out->stream_ranges = calloc(cap ? cap : 1, sizeof(*out->stream_ranges));
    if (!out->stream_ranges)
        return -ENOMEM;
    for (size_t m = 0; m < ws->n; m++) {
        const struct rf_interval_set *p = &pinned->v[m];
        for (size_t i = 0; i < ws->v[m].n; i++) {
            uint64_t cur = ws->v[m].v[i].first_page, end = ws->v[m].v[i].end_page;
            for (size_t j = rf_interval_set_first_end_above(p, cur);
                 cur < end && j < p->n && p->v[j].first_page < end; j++) {
                if (p->v[j].first_page > cur)
                    out->stream_ranges[out->n_stream_ranges++] = (struct rf_file_range){
                        .mapping_index = (int32_t)m,
                        .pages = {.first_page = cur, .end_page = p->v[j].first_page}};
                if (p->v[j].end_page > cur)
                    cur = p->v[j].end_page;
            }
            if (cur < end)
                out->stream_ranges[out->n_stream_ranges++] = (struct rf_file_range){
                    .mapping_index = (int32_t)m, .pages = {.first_page = cur, .end_page = end}};
        }
    }
    return 0;
}

/*
 * The order in which the n layers are tried for pinning. In order (0, 1,
 * ...) unless spread; spread: the reverse of the van der Corput order
 * (bit-reversed j over the smallest power of two >= n, scaled to n, first
 * occurrences), so that whichever number of layers does not fit, the
 * streamed ones (the order's tail) are evenly spaced over the cycle of a
 * token: the pinned layers' compute between two streamed ones is what the
 * read-ahead reads behind.
 */
void rf_stream_layer_order(int32_t n, bool spread, int32_t *order)
{
    uint32_t bits = 0, k = 0;
    if (n <= 0)
        return;
    if (!spread) {
        for (int32_t l = 0; l < n; l++)
            order[l] = l;
        return;
    }
    while (bits < 31 && (1u << bits) < (uint32_t)n)
        bits++;
    bool *seen = calloc((size_t)n, sizeof(*seen));
    for (uint32_t j = 0; seen && j < (1u << bits); j++) {
        uint32_t r = 0;
        for (uint32_t b = 0; b < bits; b++)
            r |= ((j >> b) & 1u) << (bits - 1 - b);
        int32_t l = (int32_t)(((uint64_t)r * (uint32_t)n) >> bits);
        if (!seen[l]) {
            seen[l] = true;
            order[n - 1 - (int32_t)k++] = l;
        }
    }
    if (!seen) /* no memory for the marks: in order, still a valid plan */
        for (int32_t l = 0; l < n; l++)
            order[l] = l;
    free(seen);
}

/* out->rows_ranges: the union of the GROUP_ROWS entries' pages (tmp is scratch). */
static int rows_ranges(const struct rf_inventory *inv, const int32_t *group, struct sets *tmp,
                       struct rf_stream_plan *out)
{
    int rc = group_union(inv, group, GROUP_ROWS, tmp);
    return rc < 0 ? rc : sets_to_ranges(tmp, &out->rows_ranges, &out->n_rows_ranges);
}

/* Fixed part, window, margin, R and the pin budget from p and the layer sizes. */
static int budget(const struct rf_stream_params *p, struct rf_stream_plan *out)
{
    uint64_t fixed = p->anonymous_bytes, need;

    if (__builtin_add_overflow(fixed, p->kv_bytes, &fixed) ||
        __builtin_add_overflow(fixed, p->scratch_bytes, &fixed) ||
        __builtin_add_overflow(fixed, p->runtime_bytes, &fixed))
        return -EOVERFLOW;
    out->limit_bytes = p->limit_bytes;
    out->fixed_bytes = fixed;
    out->margin_bytes =
        p->margin_bytes ? p->margin_bytes : rf_stream_default_margin(p->limit_bytes);
    out->window_bytes =
        p->window_bytes ? p->window_bytes : rf_stream_default_window(out->largest_layer_bytes);
    out->min_window_bytes = out->largest_layer_bytes > RF_STREAM_MIN_WINDOW_BYTES / 2
                                ? out->largest_layer_bytes
                                : RF_STREAM_MIN_WINDOW_BYTES / 2;
    if (p->read_ahead_slots) { /* the ring is the window, anonymous and allocated whole */
        out->read_ahead_slots = p->read_ahead_slots;
        out->read_ahead_bytes =
            rf_stream_window_ring_bytes(p->read_ahead_slots, out->largest_tensor_bytes);
        if (out->read_ahead_bytes == UINT64_MAX)
            return -EOVERFLOW;
        out->window_bytes = out->min_window_bytes = out->read_ahead_bytes;
    }
    if (__builtin_add_overflow(fixed, out->min_window_bytes, &need) ||
        __builtin_add_overflow(need, out->margin_bytes, &need) ||
        __builtin_add_overflow(need, out->expert_min_bytes, &need))
        return -EOVERFLOW;
    out->fits = need <= p->limit_bytes;
    out->resident_bytes = sub0(sub0(p->limit_bytes, out->margin_bytes), fixed);
    out->pin_budget_bytes =
        sub0(sub0(out->resident_bytes, out->window_bytes), out->expert_min_bytes);
    return 0;
}

/* W and the largest layer's pages (sum of its ranges: an upper bound of its union). */
static int working_set(const struct rf_inventory *inv, const int32_t *group, struct sets *ws,
                       struct rf_stream_plan *out)
{
    uint64_t *layer_pages = NULL, pages;
    int rc = 0;

    if (out->n_layers > 0) {
        layer_pages = calloc((size_t)out->n_layers, sizeof(*layer_pages));
        if (!layer_pages)
            return -ENOMEM;
    }
    for (size_t i = 0; rc == 0 && i < inv->n; i++) {
        const struct rf_inventory_entry *e = &inv->entries[i];
        if (!e->file_backed || e->access != RF_ACCESS_FILE_BACKED || group[i] == GROUP_ROWS ||
            group[i] == GROUP_EXPERT || e->mapping_index < 0)
            continue;
        rc = rf_interval_set_add(&ws->v[e->mapping_index], e->pages);
        if (rc == 0 && group[i] >= 0 &&
            __builtin_add_overflow(layer_pages[group[i]], rf_page_range_pages(e->pages),
                                   &layer_pages[group[i]]))
            rc = -EOVERFLOW;
        if (group[i] >= 0 && rf_page_range_pages(e->pages) > out->largest_tensor_bytes)
            out->largest_tensor_bytes = rf_page_range_pages(e->pages); /* pages until below */
    }
    for (int32_t l = 0; rc == 0 && l < out->n_layers; l++)
        if (layer_pages[l] > out->largest_layer_bytes)
            out->largest_layer_bytes = layer_pages[l];
    if (rc == 0 && (__builtin_mul_overflow(out->largest_layer_bytes, inv->page_bytes,
                                           &out->largest_layer_bytes) ||
                    __builtin_mul_overflow(out->largest_tensor_bytes, inv->page_bytes,
                                           &out->largest_tensor_bytes) ||
                    sets_pages(ws, &pages) < 0 ||
                    __builtin_mul_overflow(pages, inv->page_bytes, &out->working_set_bytes)))
        rc = -EOVERFLOW;
    free(layer_pages);
    return rc;
}

static void describe(struct rf_stream_plan *out)
{
    char partial[64] = "";
    if (!out->fits) {
        snprintf(out->reason, sizeof(out->reason),
                 "the fixed part (%" PRIu64 " bytes) with a minimum window of %" PRIu64
                 " bytes and a margin of %" PRIu64 " bytes exceeds the limit of %" PRIu64
                 " bytes: nothing is pinned",
                 out->fixed_bytes, out->min_window_bytes, out->margin_bytes, out->limit_bytes);
        return;
    }
    if (out->n_pinned == 0) {
        snprintf(out->reason, sizeof(out->reason),
                 "no group fits the pin budget of %" PRIu64 " bytes: every weight streams",
                 out->pin_budget_bytes);
        return;
    }
    if (out->partial_layer >= 0)
        snprintf(partial, sizeof(partial), " and %" PRIu32 " tensor(s) of blk.%" PRId32,
                 out->partial_layer_tensors, out->partial_layer);
    snprintf(out->reason, sizeof(out->reason),
             "the plan pins %s%s%" PRId32 " of %" PRId32 " layers (%s)%s (%" PRIu64
             " bytes of a budget of %" PRIu64 " bytes); %" PRIu64 " bytes stream each token",
             out->head_pinned ? "the output tensors" : "", out->head_pinned ? " and " : "",
             out->layers_pinned, out->n_layers,
             out->layers_spread ? "spread: the streamed ones evenly spaced" : "the first", partial,
             out->pinned_bytes, out->pin_budget_bytes, out->streamed_bytes);
}

int rf_stream_plan_build(const struct rf_inventory *inv, const struct rf_stream_params *p,
                         struct rf_stream_plan *out)
{
    struct sets ws = {0}, pinned = {0}, tmp = {0};
    int32_t *group = NULL;
    bool *partial = NULL, *layer_pinned = NULL, *routed = NULL;
    int32_t *order = NULL;
    bool has_output = false;
    uint64_t pinned_pages = 0, budget_pages;
    int rc;

    if (!out)
        return -EINVAL;
    rf_stream_plan_free(out);
    if (!inv || !p || p->limit_bytes == 0 || inv->page_bytes == 0 ||
        (p->read_ahead_slots && p->window_bytes))
        return -EINVAL;
    out->page_bytes = inv->page_bytes;
    group = calloc(inv->n ? inv->n : 1, sizeof(*group));
    partial = calloc(inv->n ? inv->n : 1, sizeof(*partial));
    routed = calloc(inv->n ? inv->n : 1, sizeof(*routed));
    if (!group || !partial || !routed) {
        rc = -ENOMEM;
        goto out;
    }
    if ((rc = rf_stream_plan_experts_size(inv, p, routed, out)) < 0)
        goto out;
    for (size_t i = 0; i < inv->n; i++)
        if (strcmp(inv->entries[i].name, "output.weight") == 0)
            has_output = true;
    for (size_t i = 0; i < inv->n; i++) {
        group[i] = group_of(&inv->entries[i], has_output, routed[i]);
        int32_t l = rf_tensor_layer_of(inv->entries[i].name);
        if (l >= 0 && l >= out->n_layers)
            out->n_layers = l + 1;
        if (inv->entries[i].mapping_index >= (int32_t)inv->n_mappings) {
            rc = -EINVAL;
            goto out;
        }
    }
    order = calloc(out->n_layers ? (size_t)out->n_layers : 1, sizeof(*order));
    layer_pinned = calloc(out->n_layers ? (size_t)out->n_layers : 1, sizeof(*layer_pinned));
    if (!order || !layer_pinned) {
        rc = -ENOMEM;
        goto out;
    }
    if ((rc = sets_init(&ws, inv->n_mappings)) < 0 ||
        (rc = sets_init(&pinned, inv->n_mappings)) < 0 ||
        (rc = sets_init(&tmp, inv->n_mappings)) < 0)
        goto out;
    if ((rc = working_set(inv, group, &ws, out)) < 0 || (rc = budget(p, out)) < 0)
        goto out;

    budget_pages = out->fits ? out->pin_budget_bytes / inv->page_bytes : 0;
    bool fit;
    rc = try_group(inv, group, GROUP_HEAD, &pinned, &tmp, &pinned_pages, budget_pages, &fit);
    if (rc < 0)
        goto out;
    uint64_t head_pages = 0;
    if ((rc = sets_pages(&tmp, &head_pages)) < 0)
        goto out;
    out->head_pinned = head_pages > 0 && pinned_pages > 0;
    out->layers_spread = p->read_ahead_slots > 0; /* (partial_layer is -1: plan_free) */
    rf_stream_layer_order(out->n_layers, out->layers_spread, order);
    for (int32_t k = 0; out->fits && k < out->n_layers; k++) {
        rc = try_group(inv, group, order[k], &pinned, &tmp, &pinned_pages, budget_pages, &fit);
        if (rc < 0)
            goto out;
        if (!fit) {
            out->partial_layer = order[k];
            break;
        }
        layer_pinned[order[k]] = true;
        out->layers_pinned = k + 1;
    }
    if (out->partial_layer >= 0 && (rc = try_partial_layer(inv, group, &pinned, &tmp, &pinned_pages,
                                                           budget_pages, partial, out)) < 0)
        goto out;
    out->pinned_bytes = pinned_pages * inv->page_bytes; /* <= pin budget: fits */
    out->streamed_bytes = sub0(out->working_set_bytes, out->pinned_bytes);
    out->nothing_streams = out->streamed_bytes == 0;
    rc = collect(inv, group, partial, layer_pinned, &pinned, out);
    if (rc == 0)
        rc = streamed_ranges(&ws, &pinned, out);
    if (rc == 0)
        rc = rows_ranges(inv, group, &tmp, out);
    if (rc == 0) {
        describe(out);
        rf_stream_plan_experts_cache(out);
    }
out:
    sets_free(&tmp);
    sets_free(&pinned);
    sets_free(&ws);
    free(group);
    free(partial);
    free(routed);
    free(order);
    free(layer_pinned);
    if (rc < 0)
        rf_stream_plan_free(out);
    return rc;
}
