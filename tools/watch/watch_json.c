/*
 * ramforge watch --json: one JSON line per process and reading (kind
 * "watch_process", schema/watch.schema.json), and with --all one line per
 * reading (kind "watch_all": how many processes were listed, how many
 * could not be read and why). A figure that could not be read is null
 * with its reason beside it, never 0.
 */
#include "watch.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include "ramforge/core/json_util.h"

static json_t *pages_json(const struct watch_pages *w, const char *source, const char *reason)
{
    return json_pack("{s:o,s:o,s:o,s:o,s:o}", "resident_bytes",
                     rf_json_u64(w->has, w->resident_bytes), "nonresident_bytes",
                     rf_json_u64(w->has, w->nonresident_bytes), "unknown_bytes",
                     json_integer((json_int_t)w->unknown_bytes), "provenance", rf_json_str(source),
                     "reason", rf_json_str(reason && reason[0] ? reason : NULL));
}

static const char *nonempty(const char *s)
{
    return s && s[0] ? s : NULL;
}

static json_t *model_json(const struct watch_model *m)
{
    json_t *layers = json_array(), *tensors = json_array();
    for (size_t i = 0; m->has_table && i < m->n_layers; i++) {
        const struct watch_layer *l = &m->layers[i];
        json_array_append_new(
            layers,
            json_pack("{s:o,s:I,s:o,s:o}", "layer",
                      l->layer < 0 ? json_string("other") : json_integer(l->layer), "logical_bytes",
                      (json_int_t)l->logical_bytes, "mapped_bytes",
                      rf_json_u64(l->mapped.has, l->mapped.resident_bytes), "page_cache_bytes",
                      rf_json_u64(l->cache.has, l->cache.resident_bytes)));
    }
    for (size_t i = 0; m->has_table && i < m->inv.n; i++) {
        const struct rf_inventory_entry *e = &m->inv.entries[i];
        struct rf_page_counts mc = {0, 0, 0}, cc = {0, 0, 0};
        uint64_t n = e->pages.end_page - e->pages.first_page;
        if (e->file_backed && n) {
            rf_page_counts_add(&mc, m->mapped_states + e->pages.first_page, n);
            rf_page_counts_add(&cc, m->cache_states + e->pages.first_page, n);
        }
        json_array_append_new(
            tensors,
            json_pack("{s:o,s:I,s:I,s:o,s:o}", "name", rf_json_str(e->name), "logical_bytes",
                      (json_int_t)e->logical_bytes, "pages", (json_int_t)n, "mapped_pages",
                      rf_json_u64(mc.resident_pages || mc.nonresident_pages, mc.resident_pages),
                      "page_cache_pages",
                      rf_json_u64(cc.resident_pages || cc.nonresident_pages, cc.resident_pages)));
    }
    const char *tr = nonempty(m->table_reason);
    return json_pack(
        "{s:o,s:I,s:b,s:b,s:o,s:o,s:{s:I,s:o,s:o,s:o,s:o,s:o,s:o,s:o},s:o,s:o,s:o,s:{s:o,s:o,s:s,s:"
        "s,"
        "s:s},s:o,s:o,s:o}",
        "path", rf_json_str(m->path), "inode", (json_int_t)m->inode, "deleted", m->deleted,
        "replaced_on_disk", m->replaced, "file_bytes", rf_json_u64(m->has_table, m->file_bytes),
        "logical_bytes", rf_json_u64(m->has_table, m->logical_bytes), "mapping", "vmas",
        (json_int_t)m->n_vmas, "virtual_bytes", rf_json_u64(m->has_sum, m->sum.virtual_bytes),
        "rss_bytes", rf_json_u64(m->has_sum, m->sum.rss_bytes), "pss_bytes",
        rf_json_u64(m->has_sum, m->sum.pss_bytes), "locked_bytes",
        rf_json_u64(m->has_sum, m->sum.locked_bytes), "provenance", rf_json_str(m->rss_source),
        "smaps_age_seconds", m->has_sum ? json_real(m->smaps_age_s) : json_null(), "reason",
        rf_json_str(nonempty(m->sum_reason)), "mapped",
        pages_json(&m->mapped, m->mapped_source, tr ? tr : m->mapped_reason), "page_cache",
        pages_json(&m->cache, m->cache_source, tr ? tr : m->cache_reason), "file_page_cache",
        pages_json(&m->file_cache, m->cache_source, tr ? tr : m->cache_reason), "dead_weight",
        "mapped_bytes", rf_json_u64(m->mapped.has, m->dead.resident_bytes), "logical_bytes",
        rf_json_u64(m->has_table, m->dead_logical_bytes), "provenance", "estimated", "basis",
        "tensors llama.cpp's CPU backend copies into anonymous repacked buffers on this host "
        "(header rule); their file pages are read once at load",
        "caveat", "a process started with --no-repack reads them from the file", "layers", layers,
        "tensors", tensors, "reason", rf_json_str(tr));
}

static json_t *fig(const struct rf_cgroup_figure *f)
{
    return rf_json_u64(f->has && !f->unlimited, f->bytes);
}

static json_t *cgroup_json(const struct watch_proc *p)
{
    json_t *levels = json_array();
    struct rf_oom_room room;
    bool has_room = watch_binding(p, &room);
    for (size_t i = 0; p->cg_rc == 0 && i < p->cg.n; i++) {
        const struct rf_cgroup_level *l = &p->cg.levels[i];
        json_array_append_new(
            levels,
            json_pack("{s:o,s:b,s:o,s:o,s:o,s:o}", "dir", rf_json_str(l->dir), "unlimited",
                      l->limit.has && l->limit.unlimited, "limit_bytes", fig(&l->limit),
                      "usage_bytes", fig(&l->usage), "reclaimable_bytes", fig(&l->reclaimable_file),
                      "oom_kill", rf_json_u64(l->counters.has_oom_kill, l->counters.oom_kill)));
    }
    return json_pack("{s:o,s:o,s:o,s:o,s:o}", "levels", levels, "binding",
                     !has_room        ? json_null()
                     : room.level < 0 ? json_string("host")
                                      : rf_json_str(p->cg.levels[room.level].dir),
                     "room_before_oom_bytes", rf_json_u64(has_room, room.room_bytes), "basis",
                     json_string(WATCH_ROOM_BASIS), "reason",
                     has_room ? json_null() : rf_json_str(room.why));
}

static json_t *release_json(const struct watch_proc *p)
{
    if (!p->released)
        return json_null();
    return json_pack(
        "{s:I,s:I,s:o,s:o,s:o,s:b,s:o,s:s}", "requested_bytes", (json_int_t)p->rel_requested_bytes,
        "accepted_bytes", (json_int_t)p->rel_accepted_bytes, "observed_delta_bytes",
        p->rel_has_observed ? json_integer(p->rel_observed_bytes) : json_null(), "rss_before_bytes",
        json_integer((json_int_t)p->rel_before_bytes), "rss_after_bytes",
        rf_json_u64(p->rel_has_observed, p->rel_after_bytes), "met_target", p->rel_met_target,
        "error", p->rel_error ? json_string(rf_strerror(p->rel_error)) : json_null(), "guarantee",
        p->release_json_note);
}

/* doc (NULL: out of memory) as one compact line to f, then freed. */
static int emit_line(FILE *f, json_t *doc)
{
    if (!doc)
        return -ENOMEM;
    int rc = json_dumpf(doc, f, JSON_COMPACT | JSON_SORT_KEYS);
    fputc('\n', f);
    json_decref(doc);
    return rc < 0 ? -EIO : 0;
}

int watch_json_line(FILE *f, const struct watch_reading *r, const struct watch_proc *p)
{
    static const char *const states[] = {"running", "exited", "pid_reused"};
    const struct rfsys_status *s = &p->status;
    bool st = p->state == WATCH_RUNNING && p->status_rc == 0;
    json_t *models = json_array();
    for (size_t i = 0; st && i < p->n_models; i++)
        json_array_append_new(models, model_json(&p->models[i]));
    const char *reason = p->state == WATCH_EXITED       ? "the process exited"
                         : p->state == WATCH_PID_REUSED ? "the pid now names another process "
                                                          "(its start time changed)"
                         : p->status_rc < 0             ? rf_strerror(p->status_rc)
                                                        : NULL;
    bool anon = st && s->has_rss_anon;
    double idle_s;
    bool idle = watch_idle_seconds(p, r->now_s, &idle_s);
    char idle_reason[RF_ERR_MAX + 64];
    snprintf(idle_reason, sizeof(idle_reason),
             "/proc/%d/stat: %s: idle unknown, never idle (no --release-idle advice)", p->pid,
             rf_strerror(p->stat_rc));
    json_t *doc = json_pack(
        "{s:i,s:s,s:f,s:I,s:i,s:I,s:o,s:s,s:o,s:{s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:s,s:o},"
        "s:{s:o,s:o,s:s,s:o,s:o},s:o,s:I,s:o,s:o,s:o,s:o,s:o}",
        "schema_version", WATCH_SCHEMA_VERSION, "kind", "watch_process", "time", r->time_s,
        "reading", (json_int_t)r->index, "pid", p->pid, "start_ticks", (json_int_t)p->start_ticks,
        "comm", rf_json_str(p->comm), "state", states[p->state], "reason", rf_json_str(reason),
        "status", "vm_rss_bytes", rf_json_u64(st && s->has_vm_rss, s->vm_rss_bytes), "vm_hwm_bytes",
        rf_json_u64(st && s->has_vm_hwm, s->vm_hwm_bytes), "rss_anon_bytes",
        rf_json_u64(anon, s->rss_anon_bytes), "rss_file_bytes",
        rf_json_u64(st && s->has_rss_file, s->rss_file_bytes), "rss_shmem_bytes",
        rf_json_u64(st && s->has_rss_shmem, s->rss_shmem_bytes), "vm_swap_bytes",
        rf_json_u64(st && s->has_vm_swap, s->vm_swap_bytes), "vm_lck_bytes",
        rf_json_u64(st && s->has_vm_lck, s->vm_lck_bytes), "provenance", "status", "reason",
        rf_json_str(reason), "anonymous", "bytes",
        rf_json_u64(anon, s->rss_anon_bytes + (s->has_vm_swap ? s->vm_swap_bytes : 0)),
        "growth_bytes_per_minute",
        st && p->has_growth ? json_real(p->growth_bytes_per_min) : json_null(), "label",
        WATCH_ANON_LABEL, "basis", json_string("RssAnon + VmSwap"), "growth_reason",
        st && p->has_growth ? json_null() : json_string("one reading: no growth yet"), "models",
        models, "models_left_out", (json_int_t)p->models_left_out, "maps_reason",
        st && p->maps_rc < 0 ? json_string(rf_strerror(p->maps_rc)) : json_null(), "cgroup",
        st ? cgroup_json(p) : json_null(), "release", release_json(p), "idle_seconds",
        idle ? json_real(idle_s) : json_null(), "idle_reason",
        idle || p->state != WATCH_RUNNING ? json_null() : json_string(idle_reason));
    return emit_line(f, doc);
}

int watch_json_all(FILE *f, const struct watch_reading *r, size_t n)
{
    const struct watch_unreadable *u = &r->unreadable;
    json_t *by = json_array();
    for (size_t i = 0; i < u->n_reasons; i++)
        json_array_append_new(by, json_pack("{s:s,s:I}", "reason", rf_strerror(u->by[i].err),
                                            "processes", (json_int_t)u->by[i].n));
    json_t *doc = json_pack("{s:i,s:s,s:f,s:I,s:I,s:I,s:o,s:o}", "schema_version",
                            WATCH_SCHEMA_VERSION, "kind", "watch_all", "time", r->time_s, "reading",
                            (json_int_t)r->index, "processes", (json_int_t)n,
                            "unreadable_processes", (json_int_t)u->n, "unreadable", by, "note",
                            u->n ? json_string(WATCH_UNREADABLE_NOTE) : json_null());
    return emit_line(f, doc);
}
