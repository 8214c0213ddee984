/*
 * Plain-value helpers over a cgroup hierarchy (see cgroup_levels.h): whether
 * a level's limit is enforced, error texts for figures that could not be
 * read, the room before the OOM kill (admission's and watch's) and the
 * kernel's verdict as counter deltas over a run.
 */
#include "ramforge/core/cgroup_levels.h"
#include "ramforge/error.h"

#include <errno.h>
#include <string.h>

bool rf_cgroup_level_enforced(const struct rf_cgroup_level *l)
{
    return l && l->limit.has && !l->limit.unlimited;
}

const char *rf_cgroup_error_text(int err)
{
    if (err == 0)
        return "";
    if (err == -ENOENT)
        return "absent";
    if (err == -EBADMSG)
        return "malformed";
    return rf_strerror(err < 0 ? err : -err);
}

/* a - b floored at 0. */
static uint64_t sat_sub(uint64_t a, uint64_t b)
{
    return a > b ? a - b : 0;
}

void rf_oom_room_of_level(const struct rf_cgroup_level *l, const struct rf_oom_room_own *own,
                          struct rf_oom_room_level *out)
{
    uint64_t usage = l->usage.bytes, cache, mapped = 0;

    memset(out, 0, sizeof(*out));
    if (!l->usage.has)
        return;
    out->has_reclaimable = true;
    if (l->reclaimable_file.has)
        out->cache_bytes = l->reclaimable_file.bytes < usage ? l->reclaimable_file.bytes : usage;
    cache = sat_sub(out->cache_bytes, own ? own->cache_to_lock_bytes : 0);
    if (own && own->loaded) {
        if (own->has_mapping_rss && own->has_locked)
            mapped = sat_sub(l->mapped_file.has ? l->mapped_file.bytes : own->mapping_rss_bytes,
                             own->locked_bytes);
    } else if (l->mapped_file.has) {
        mapped = l->mapped_file.bytes;
    }
    out->mapped_bytes = mapped < usage - cache ? mapped : usage - cache;
    out->reclaimable_bytes = cache + out->mapped_bytes;
    if (rf_cgroup_level_enforced(l)) {
        out->has_room = true;
        out->room_bytes = sat_sub(l->limit.bytes, usage - out->reclaimable_bytes);
    }
}

void rf_oom_room_find(const struct rf_cgroup_level *levels, size_t n, bool truncated,
                      const struct rf_host_memory *host, const struct rf_oom_room_own *own,
                      struct rf_oom_room *out)
{
    bool enforced = false;

    memset(out, 0, sizeof(*out));
    out->level = -1;
    for (size_t i = 0; i < n; i++) {
        struct rf_oom_room_level r;

        if (!rf_cgroup_level_enforced(&levels[i]))
            continue;
        enforced = true;
        rf_oom_room_of_level(&levels[i], own, &r);
        if (!r.has_room) {
            memset(out, 0, sizeof(*out));
            out->level = -1;
            out->why = "an enforced limit's usage is unknown";
            return;
        }
        if (!out->has || r.room_bytes < out->room_bytes) {
            out->has = true;
            out->level = (int)i;
            out->room_bytes = r.room_bytes;
        }
    }
    if (truncated) {
        memset(out, 0, sizeof(*out));
        out->level = -1;
        out->why = "the cgroup hierarchy is deeper than the levels read";
    } else if (!enforced && (!host || !host->read || !host->available.has)) {
        out->why = "no cgroup enforces a hard limit and the host's MemAvailable is unknown";
    } else if (!enforced) {
        out->has = true;
        if (__builtin_add_overflow(host->available.bytes,
                                   host->swap_free.has ? host->swap_free.bytes : 0,
                                   &out->room_bytes))
            out->room_bytes = UINT64_MAX;
    }
}

/*
 * One counter's delta: present when both sides have it and it did not go
 * backwards. Clears *complete when only one side has it or it went back.
 */
static void counter_delta(bool has_b, uint64_t b, bool has_a, uint64_t a, bool *has_d, uint64_t *d,
                          bool *complete)
{
    *has_d = has_b && has_a && a >= b;
    *d = *has_d ? a - b : 0;
    if ((has_b || has_a) && !*has_d)
        *complete = false;
}

int rf_cgroup_verdict_build(const struct rf_cgroup_level *before, size_t n_before,
                            const struct rf_cgroup_level *after, size_t n_after,
                            struct rf_cgroup_verdict *out)
{
    if (!out)
        return -EINVAL;
    memset(out, 0, sizeof(*out));
    if ((!before && n_before) || (!after && n_after) || n_before > RF_CGROUP_MAX_LEVELS ||
        n_after > RF_CGROUP_MAX_LEVELS)
        return -EINVAL;
    out->complete = true;
    for (size_t i = 0; i < n_after; i++) {
        const struct rf_cgroup_counters *a = &after[i].counters, *b = NULL;
        struct rf_cgroup_verdict_level *v;
        struct rf_cgroup_counters *d;

        for (size_t j = 0; j < n_before && !b; j++)
            if (strcmp(before[j].dir, after[i].dir) == 0)
                b = &before[j].counters;
        if (!b)
            continue;
        v = &out->levels[out->n++];
        memcpy(v->dir, after[i].dir, sizeof(v->dir));
        v->dir[sizeof(v->dir) - 1] = '\0';
        d = &v->delta;
        counter_delta(b->has_failcnt, b->failcnt, a->has_failcnt, a->failcnt, &d->has_failcnt,
                      &d->failcnt, &out->complete);
        counter_delta(b->has_oom_kill, b->oom_kill, a->has_oom_kill, a->oom_kill, &d->has_oom_kill,
                      &d->oom_kill, &out->complete);
        counter_delta(b->has_events_high, b->events_high, a->has_events_high, a->events_high,
                      &d->has_events_high, &d->events_high, &out->complete);
        counter_delta(b->has_events_max, b->events_max, a->has_events_max, a->events_max,
                      &d->has_events_max, &d->events_max, &out->complete);
        counter_delta(b->has_events_oom, b->events_oom, a->has_events_oom, a->events_oom,
                      &d->has_events_oom, &d->events_oom, &out->complete);
        if (d->failcnt || d->events_max || d->events_oom)
            out->hit_limit = true;
        if (d->oom_kill)
            out->oom_killed = true;
        if (d->events_high)
            out->throttled = true;
    }
    return 0;
}
