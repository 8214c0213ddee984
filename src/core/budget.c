/*
 * One byte budget over several processes' model mappings
 * (ramforge/core/budget.h): the plan that asks the excess of the least
 * recently active entries first, and the memory that keeps an entry whose
 * release moved nothing from being asked again. A watcher's workload: a
 * few processes, a few models each, once a reading.
 */
#include "ramforge/core/budget.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Whether entry a comes before entry b: the longer idle, then more releasable, then index. */
static bool before(const struct rf_budget_entry *v, size_t a, size_t b)
{
    if (v[a].idle_s != v[b].idle_s)
        return v[a].idle_s > v[b].idle_s;
    if (v[a].releasable_bytes != v[b].releasable_bytes)
        return v[a].releasable_bytes > v[b].releasable_bytes;
    return a < b;
}

/* Why e may not be asked now, or RF_BUDGET_SKIP_COUNT when it may. */
static enum rf_budget_skip skip_of(const struct rf_budget_entry *e, double min_idle_s)
{
    if (e->keep)
        return RF_BUDGET_SKIP_KEEP;
    if (e->activity == RF_BUDGET_ACTIVITY_UNKNOWN)
        return RF_BUDGET_SKIP_UNKNOWN;
    if (e->activity == RF_BUDGET_ACTIVITY_CPU && e->idle_s < min_idle_s)
        return RF_BUDGET_SKIP_BUSY;
    if (e->pending)
        return RF_BUDGET_SKIP_PENDING;
    if (e->memory && e->memory->stuck && e->held_bytes <= e->memory->stuck_bytes)
        return RF_BUDGET_SKIP_STUCK;
    if (e->releasable_bytes == 0)
        return RF_BUDGET_SKIP_NOTHING;
    return RF_BUDGET_SKIP_COUNT;
}

int rf_budget_plan(const struct rf_budget_entry *entries, size_t n, const uint64_t *file_held_bytes,
                   size_t n_files, uint64_t budget_bytes, double min_idle_s,
                   struct rf_budget_plan *out)
{
    size_t *order = NULL, n_order = 0;

    if (!out)
        return -EINVAL;
    memset(out, 0, sizeof(*out));
    if ((n && !entries) || (n_files && !file_held_bytes))
        return -EINVAL;
    out->budget_bytes = budget_bytes;
    for (size_t f = 0; f < n_files; f++)
        if (__builtin_add_overflow(out->held_bytes, file_held_bytes[f], &out->held_bytes))
            return -EOVERFLOW;
    for (size_t i = 0; i < n; i++) {
        if (entries[i].file >= n_files)
            return -EINVAL;
        if (entries[i].pending &&
            __builtin_add_overflow(out->pending_bytes, entries[i].pending_bytes,
                                   &out->pending_bytes))
            return -EOVERFLOW;
    }
    if (out->held_bytes > INT64_MAX || budget_bytes > INT64_MAX)
        return -EOVERFLOW;
    out->headroom_bytes = (int64_t)budget_bytes - (int64_t)out->held_bytes;
    if (out->held_bytes <= budget_bytes)
        return 0;
    for (size_t i = 0; i < n; i++) {
        enum rf_budget_skip s = skip_of(&entries[i], min_idle_s);
        if (s != RF_BUDGET_SKIP_COUNT)
            out->skipped[s]++;
    }
    uint64_t over = out->held_bytes - budget_bytes;
    if (over <= out->pending_bytes)
        return 0;
    out->excess_bytes = over - out->pending_bytes;
    order = malloc((n ? n : 1) * sizeof(*order));
    out->steps = malloc((n ? n : 1) * sizeof(*out->steps));
    if (!order || !out->steps) {
        free(order);
        rf_budget_plan_free(out);
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++) { /* insertion sort: a handful of entries */
        if (skip_of(&entries[i], min_idle_s) != RF_BUDGET_SKIP_COUNT)
            continue;
        size_t k = n_order++;
        for (; k > 0 && before(entries, i, order[k - 1]); k--)
            order[k] = order[k - 1];
        order[k] = i;
    }
    uint64_t left = out->excess_bytes;
    for (size_t k = 0; k < n_order && left; k++) {
        const struct rf_budget_entry *e = &entries[order[k]];
        uint64_t take = e->releasable_bytes < left ? e->releasable_bytes : left;
        out->steps[out->n_steps++] =
            (struct rf_budget_step){order[k], take, k + 1 < n_order ? order[k + 1] : n};
        left -= take;
    }
    out->short_bytes = left;
    free(order);
    return 0;
}

void rf_budget_plan_free(struct rf_budget_plan *p)
{
    if (!p)
        return;
    free(p->steps);
    p->steps = NULL;
    p->n_steps = 0;
}

void rf_budget_asked(struct rf_budget_memory *m, uint64_t held_bytes, uint64_t asked_bytes)
{
    m->asked = true;
    m->before_bytes = held_bytes;
    m->asked_bytes = asked_bytes;
    m->releases++;
}

bool rf_budget_observe(struct rf_budget_memory *m, uint64_t held_bytes)
{
    if (m->stuck && held_bytes > m->stuck_bytes)
        m->stuck = false; /* pages came back: a release may move them again */
    if (!m->asked)
        return false;
    m->asked = false;
    uint64_t drop = m->before_bytes > held_bytes ? m->before_bytes - held_bytes : 0;
    m->released_bytes += drop;
    if (drop >= m->asked_bytes / 2 + (m->asked_bytes % 2))
        return false;
    m->stuck = true;
    m->stuck_bytes = held_bytes;
    return true;
}

const char *rf_budget_activity_name(enum rf_budget_activity a)
{
    switch (a) {
    case RF_BUDGET_ACTIVITY_EXEC:
        return "exec";
    case RF_BUDGET_ACTIVITY_CPU:
        return "cpu";
    case RF_BUDGET_ACTIVITY_UNKNOWN:
        break;
    }
    return "unknown";
}

const char *rf_budget_skip_name(enum rf_budget_skip s)
{
    static const char *const names[RF_BUDGET_SKIP_COUNT] = {
        "keep", "unknown_activity", "busy", "pending", "stuck", "nothing_releasable"};
    return s < RF_BUDGET_SKIP_COUNT ? names[s] : "unknown";
}
