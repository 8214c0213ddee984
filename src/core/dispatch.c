/*
 * Attribution of CPU node-dispatch events to the inventory.
 *
 * Workload: one capture of a few thousand to a few hundred thousand events
 * (about 30 nodes per layer per decode) against an inventory of a few
 * hundred tensors. The inventory's names are sorted once into an index
 * whose entries say whether the name is unique; each declared source name
 * is then looked up with bsearch. Only a unique, untruncated, exact name of
 * an event of the bound model instance is attributed; everything else
 * stays unattributed and is counted by reason. The pre-dispatch samples
 * the observer stored in the events are summed per status in the same
 * pass.
 */
#include "ramforge/core/dispatch.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* One inventory name in the sorted index. */
struct name_slot {
    const char *name; /* the entry's name (borrowed from the inventory) */
    size_t entry;     /* position in inv->entries */
    bool duplicate;   /* another entry carries the same name */
};

static int cmp_slot(const void *a, const void *b)
{
    return strcmp(((const struct name_slot *)a)->name, ((const struct name_slot *)b)->name);
}

static int cmp_key(const void *key, const void *slot)
{
    return strcmp((const char *)key, ((const struct name_slot *)slot)->name);
}

/* Sorted (name, entry) index of inv; names without a NUL in their field are left out. */
static struct name_slot *index_names(const struct rf_inventory *inv, size_t *n_out)
{
    struct name_slot *slots = calloc(inv->n ? inv->n : 1, sizeof(*slots));
    size_t n = 0;

    if (!slots)
        return NULL;
    for (size_t i = 0; i < inv->n; i++) {
        const char *name = inv->entries[i].name;
        if (strnlen(name, RF_NAME_MAX) == RF_NAME_MAX)
            continue;
        slots[n].name = name;
        slots[n].entry = i;
        n++;
    }
    qsort(slots, n, sizeof(*slots), cmp_slot);
    for (size_t i = 1; i < n; i++) {
        if (strcmp(slots[i - 1].name, slots[i].name) == 0) {
            slots[i - 1].duplicate = true;
            slots[i].duplicate = true;
        }
    }
    *n_out = n;
    return slots;
}

const char *rf_dispatch_sample_status_name(enum rf_dispatch_sample_status st)
{
    switch (st) {
    case RF_DISPATCH_SAMPLE_NONE:
        return "none";
    case RF_DISPATCH_SAMPLE_COMPLETE:
        return "complete";
    case RF_DISPATCH_SAMPLE_PARTIAL:
        return "partial";
    case RF_DISPATCH_SAMPLE_TRUNCATED:
        return "truncated";
    case RF_DISPATCH_SAMPLE_MISSING:
        return "missing";
    case RF_DISPATCH_SAMPLE_FAILED:
        return "failed";
    case RF_DISPATCH_SAMPLE_STATUS_COUNT:
        break;
    }
    return "invalid";
}

void rf_dispatch_summary_init(struct rf_dispatch_summary *s)
{
    memset(s, 0, sizeof(*s));
    s->complete = true;
    s->caveat = RF_DISPATCH_CAVEAT;
    s->sampling.note = RF_DISPATCH_SAMPLING_NOTE;
}

/* An event's samples are in range: known statuses, counts within the budget. */
static bool samples_valid(const struct rf_dispatch_event *ev)
{
    if (ev->sample_max_pages > RF_PAGE_WINDOW_PAGES)
        return false;
    for (unsigned i = 0; i < RF_DISPATCH_MAX_SRC; i++) {
        const struct rf_dispatch_sample *x = &ev->samples[i];
        if (x->status >= RF_DISPATCH_SAMPLE_STATUS_COUNT ||
            x->inspected_pages > ev->sample_max_pages ||
            (uint32_t)x->resident_pages + x->unknown_pages > x->inspected_pages)
            return false;
    }
    return true;
}

/* Counts the sample of weight source i of ev into *sp. */
static void count_sample(struct rf_dispatch_sampling *sp, const struct rf_dispatch_event *ev,
                         unsigned i)
{
    const struct rf_dispatch_sample *x = &ev->samples[i];

    if (ev->sample_max_pages == 0) {
        sp->disabled++;
        return;
    }
    sp->samples++;
    sp->pages_inspected += x->inspected_pages;
    sp->pages_resident += x->resident_pages;
    sp->pages_unknown += x->unknown_pages;
    sp->pages_nonresident += (uint64_t)x->inspected_pages - x->resident_pages - x->unknown_pages;
    switch ((enum rf_dispatch_sample_status)x->status) {
    case RF_DISPATCH_SAMPLE_COMPLETE:
        sp->complete++;
        break;
    case RF_DISPATCH_SAMPLE_PARTIAL:
        sp->partial++;
        break;
    case RF_DISPATCH_SAMPLE_TRUNCATED:
        sp->truncated++;
        break;
    case RF_DISPATCH_SAMPLE_FAILED:
        sp->failed++;
        break;
    default: /* MISSING, or no sample recorded for a weight source */
        sp->missing++;
        break;
    }
}

void rf_dispatch_summary_free(struct rf_dispatch_summary *s)
{
    if (!s)
        return;
    free(s->tensors);
    rf_dispatch_summary_init(s);
}

/* A named tensor by its first sequence, for ranking. */
struct first_use {
    uint64_t sequence;
    size_t entry;
};

static int cmp_first_use(const void *a, const void *b)
{
    const struct first_use *x = a, *y = b;
    if (x->sequence != y->sequence)
        return x->sequence < y->sequence ? -1 : 1;
    return x->entry < y->entry ? -1 : x->entry > y->entry;
}

/*
 * Ranks named tensors by first_sequence (graph order of first use); two
 * weights first named by the same event keep inventory order.
 */
static int assign_first_order(struct rf_dispatch_summary *s)
{
    struct first_use *order = calloc(s->n_tensors ? s->n_tensors : 1, sizeof(*order));
    size_t n = 0;

    if (!order)
        return -ENOMEM;
    for (size_t i = 0; i < s->n_tensors; i++) {
        s->tensors[i].first_order = UINT32_MAX;
        if (s->tensors[i].first_sequence != RF_DISPATCH_NEVER) {
            order[n].sequence = s->tensors[i].first_sequence;
            order[n].entry = i;
            n++;
        }
    }
    qsort(order, n, sizeof(*order), cmp_first_use);
    for (size_t r = 0; r < n; r++)
        s->tensors[order[r].entry].first_order = (uint32_t)r;
    s->tensors_named = n;
    free(order);
    return 0;
}

int rf_dispatch_summarize(const struct rf_inventory *inv, uint64_t model_instance_id,
                          const struct rf_dispatch_event *events, size_t n, uint64_t dropped_events,
                          struct rf_dispatch_summary *out)
{
    struct name_slot *slots = NULL;
    size_t n_slots = 0;
    int rc = 0;

    if (!out)
        return -EINVAL;
    rf_dispatch_summary_init(out);
    if (!inv || (n > 0 && !events))
        return -EINVAL;
    if (inv->n >= UINT32_MAX)
        return -EOVERFLOW;
    for (size_t e = 0; e < n; e++)
        if (events[e].n_src > RF_DISPATCH_MAX_SRC || !samples_valid(&events[e]))
            return -EINVAL;

    out->tensors = calloc(inv->n ? inv->n : 1, sizeof(*out->tensors));
    slots = index_names(inv, &n_slots);
    if (!out->tensors || !slots) {
        rc = -ENOMEM;
        goto out;
    }
    out->n_tensors = inv->n;
    for (size_t i = 0; i < inv->n; i++)
        out->tensors[i].first_sequence = RF_DISPATCH_NEVER;
    out->events = n;
    out->dropped_events = dropped_events;
    out->complete = dropped_events == 0;

    for (size_t e = 0; e < n; e++) {
        const struct rf_dispatch_event *ev = &events[e];
        bool foreign = ev->model_instance_id != model_instance_id;

        if (foreign)
            out->foreign_events++;
        if (ev->sample_max_pages > 0) {
            out->sampling.enabled = true; /* also for an event without weight sources */
            if (ev->sample_max_pages > out->sampling.max_pages_per_source)
                out->sampling.max_pages_per_source = ev->sample_max_pages;
        }
        for (unsigned i = 0; i < ev->n_src; i++) {
            const char *name = ev->src_names[i];
            bool weight = (ev->src_weight_mask >> i) & 1u;
            bool truncated = ((ev->truncated_mask >> i) & 1u) ||
                             strnlen(name, RF_DISPATCH_NAME_MAX) == RF_DISPATCH_NAME_MAX;
            const struct name_slot *hit = NULL;

            out->source_refs++;
            if (weight) {
                out->weight_refs++;
                count_sample(&out->sampling, ev, i);
            }
            if (truncated)
                out->truncated_refs++;
            else if (!foreign && n_slots > 0)
                hit = bsearch(name, slots, n_slots, sizeof(*slots), cmp_key);
            if (hit && hit->duplicate) {
                out->duplicate_name_refs++;
                hit = NULL;
            }
            if (!hit) {
                out->unattributed_refs++;
                if (weight)
                    out->unattributed_weight_refs++;
                continue;
            }
            struct rf_dispatch_tensor *t = &out->tensors[hit->entry];
            out->attributed_refs++;
            t->references++;
            if (t->first_sequence == RF_DISPATCH_NEVER || ev->sequence < t->first_sequence)
                t->first_sequence = ev->sequence;
        }
    }
    const struct rf_dispatch_sampling *sp = &out->sampling;
    out->sampling.sampling_complete = sp->enabled && sp->samples > 0 && out->complete &&
                                      sp->complete == sp->samples && sp->disabled == 0;
    rc = assign_first_order(out);
out:
    free(slots);
    if (rc < 0)
        rf_dispatch_summary_free(out);
    return rc;
}
