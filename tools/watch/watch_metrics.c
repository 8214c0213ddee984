/*
 * ramforge watch as Prometheus text (exposition format 0.0.4): the ledger
 * families run and serve write (ramforge_ledger_bytes{category,provenance}
 * with the same category names), each series labelled pid, model (the
 * file's name) and path as exec's, then the watch's own families.
 * --metrics-file writes it atomically (rf_metrics_write_file, for
 * node_exporter's textfile collector); --listen serves the latest
 * reading on /metrics (metrics_listen.c; the loop publishes a new text
 * after each reading). Then the reading's own: with --all the processes it
 * could not read, with --metrics-file its failed writes (a counter).
 */
#include "watch.h"
#include "watch_budget.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/cli.h"
#include "ramforge/core/ledger.h"
#include "ramforge/session/metrics.h"

/* A sample of name labelled pid="..",model="<file name>",path="<path>" (the caller adds more
   and its value): the labels of exec's series (pid) and of run's and serve's (model, path),
   one convention; a model file unlinked since it was mapped adds deleted="true". */
static void series(struct rf_prom *f, const char *name, const struct watch_proc *p)
{
    char pid[16];
    snprintf(pid, sizeof(pid), "%d", p->pid);
    rf_prom_sample(f, name);
    rf_prom_label(f, "pid", pid);
    rf_metrics_model_labels(f, watch_model_label(p));
    if (p->n_models && p->models[0].deleted)
        rf_prom_label(f, "deleted", "true"); /* the path names no file now: /proc's " (deleted)" */
}

static void figure(struct rf_prom *f, const char *name, const struct watch_proc *p,
                   const char *category, const char *provenance, bool has, uint64_t v)
{
    if (!has)
        return;
    series(f, name, p);
    rf_prom_label(f, "category", category);
    rf_prom_label(f, "provenance", provenance);
    rf_prom_u64(f, v);
}

static void ledger(struct rf_prom *f, struct watch_proc *const *procs, size_t n, bool unknown)
{
    for (size_t i = 0; i < n; i++) {
        const struct watch_proc *p = procs[i];
        const struct watch_model *m = p->n_models ? &p->models[0] : NULL;
        bool st = p->state == WATCH_RUNNING && p->status_rc == 0;
        bool cg =
            p->state == WATCH_RUNNING && p->cg_rc == 0 && p->cg.n && p->cg.levels[0].usage.has;
        const struct {
            enum rf_ledger_category c;
            enum rf_provenance prov;
            bool has;
            uint64_t v;
        } rows[] = {
            {RF_LEDGER_FILE_BACKED_LOGICAL, RF_PROV_NATIVE_LOGICAL, m && m->has_table,
             m ? m->logical_bytes : 0},
            {RF_LEDGER_FILE_BACKED_RESIDENT, RF_PROV_EXACT_MEASURED, m && m->has_sum,
             m ? m->sum.rss_bytes : 0},
            {RF_LEDGER_MAPPING_PSS, RF_PROV_EXACT_MEASURED, m && m->has_sum,
             m ? m->sum.pss_bytes : 0},
            {RF_LEDGER_PROCESS_RSS, RF_PROV_EXACT_MEASURED, st && p->status.has_vm_rss,
             p->status.vm_rss_bytes},
            {RF_LEDGER_PROCESS_RSS_PEAK, RF_PROV_EXACT_MEASURED, st && p->status.has_vm_hwm,
             p->status.vm_hwm_bytes},
            {RF_LEDGER_CGROUP_CURRENT, RF_PROV_EXACT_MEASURED, cg,
             cg ? p->cg.levels[0].usage.bytes : 0},
        };
        for (size_t r = 0; r < sizeof(rows) / sizeof(rows[0]); r++) {
            const char *cat = rf_ledger_category_name(rows[r].c);
            if (!unknown) {
                figure(f, "ramforge_ledger_bytes", p, cat, rf_provenance_name(rows[r].prov),
                       rows[r].has, rows[r].v);
            } else if (!rows[r].has) {
                series(f, "ramforge_ledger_unknown", p);
                rf_prom_label(f, "category", cat);
                rf_prom_u64(f, 1);
            }
        }
    }
}

static void watch_bytes(struct rf_prom *f, const struct watch_proc *p)
{
    const struct rfsys_status *s = &p->status;
    bool st = p->state == WATCH_RUNNING && p->status_rc == 0;
    const char *w = "ramforge_watch_bytes";
    figure(f, w, p, "Anonymous", "exact_measured", st && s->has_rss_anon,
           s->rss_anon_bytes + (s->has_vm_swap ? s->vm_swap_bytes : 0));
    figure(f, w, p, "RssFile", "exact_measured", st && s->has_rss_file, s->rss_file_bytes);
    figure(f, w, p, "RssShmem", "exact_measured", st && s->has_rss_shmem, s->rss_shmem_bytes);
    figure(f, w, p, "VmSwap", "exact_measured", st && s->has_vm_swap, s->vm_swap_bytes);
    for (size_t i = 0; i < p->n_models && i < 1; i++) {
        const struct watch_model *m = &p->models[i];
        figure(f, w, p, "MappingLocked", "exact_measured", m->has_sum, m->sum.locked_bytes);
        figure(f, w, p, "TensorPagesMapped", "exact_measured", m->mapped.has,
               m->mapped.resident_bytes);
        figure(f, w, p, "TensorPagesInPageCache", "exact_measured", m->cache.has,
               m->cache.resident_bytes);
        figure(f, w, p, "FilePagesInPageCache", "exact_measured", m->file_cache.has,
               m->file_cache.resident_bytes);
        figure(f, w, p, "DeadWeight", "estimated", m->mapped.has, m->dead.resident_bytes);
    }
}

static void per_proc(struct rf_prom *f, const struct watch_proc *p, int fam)
{
    struct rf_oom_room room;
    bool running = p->state == WATCH_RUNNING;
    switch (fam) {
    case 0:
        series(f, "ramforge_watch_up", p);
        rf_prom_u64(f, running ? 1 : 0);
        break;
    case 1:
        if (running)
            watch_bytes(f, p);
        break;
    case 2:
        if (running && p->status_rc == 0 && p->has_growth) {
            series(f, "ramforge_watch_anonymous_growth_bytes_per_minute", p);
            rf_prom_double(f, round(p->growth_bytes_per_min)); /* whole bytes */
        }
        break;
    case 3:
        if (running && watch_binding(p, &room)) {
            series(f, "ramforge_watch_room_before_oom_bytes", p);
            rf_prom_label(f, "level", room.level < 0 ? "host" : p->cg.levels[room.level].dir);
            rf_prom_u64(f, room.room_bytes);
        }
        break;
    case 4:
        for (size_t i = 0; running && p->n_models && i < p->models[0].n_layers; i++) {
            const struct watch_layer *l = &p->models[0].layers[i];
            char name[16];
            if (l->layer < 0)
                snprintf(name, sizeof(name), "other");
            else
                snprintf(name, sizeof(name), "%d", l->layer);
            for (int k = 0; k < 2; k++) {
                const struct watch_pages *w = k ? &l->cache : &l->mapped;
                if (!w->has)
                    continue;
                series(f, "ramforge_watch_layer_bytes", p);
                rf_prom_label(f, "layer", name);
                rf_prom_label(f, "measure", k ? "page_cache" : "mapped");
                rf_prom_u64(f, w->resident_bytes);
            }
        }
        break;
    case 5:
        if (running && p->n_models && p->models[0].has_sum) {
            series(f, "ramforge_watch_smaps_age_seconds", p);
            rf_prom_double(f, round(p->models[0].smaps_age_s * 1e3) / 1e3); /* milliseconds */
        }
        break;
    case 6:
    case 7:
        if (p->released) {
            series(f,
                   fam == 6 ? "ramforge_watch_release_requested_bytes"
                            : "ramforge_watch_release_accepted_bytes",
                   p);
            rf_prom_u64(f, fam == 6 ? p->rel_requested_bytes : p->rel_accepted_bytes);
        }
        break;
    }
}

/* The reading's own families: the processes --all could not read, the failed file writes. */
static void reading_families(struct rf_prom *f, const struct watch_reading *r)
{
    if (r->all) {
        rf_prom_family(f, "ramforge_watch_unreadable_processes", "gauge",
                       "Processes --all could not read, by reason: " WATCH_UNREADABLE_NOTE ".");
        for (size_t i = 0; i < r->unreadable.n_reasons; i++) {
            rf_prom_sample(f, "ramforge_watch_unreadable_processes");
            rf_prom_label(f, "reason", rf_strerror(r->unreadable.by[i].err));
            rf_prom_u64(f, r->unreadable.by[i].n);
        }
    }
    if (r->metrics_file) {
        rf_prom_family(
            f, "ramforge_watch_metrics_file_errors_total", "counter",
            "Failed --metrics-file writes since the watch began (each retried at the next "
            "reading).");
        rf_prom_sample(f, "ramforge_watch_metrics_file_errors_total");
        rf_prom_u64(f, r->metrics_file_errors);
    }
}

int watch_metrics_text(const struct watch_reading *r, struct watch_proc *const *procs, size_t n,
                       char **out)
{
    static const char *const fams[][3] = {
        {"ramforge_watch_up", "gauge", "1 while the watched process runs, 0 once it exited."},
        {"ramforge_watch_bytes", "gauge",
         "Figures of a watched process beyond the ledger, bytes; Anonymous is RssAnon + VmSwap: "
         "KV cache, prompt cache, scratch and heap together, not split from outside; "
         "MappingLocked is of the smaps read ramforge_watch_smaps_age_seconds old."},
        {"ramforge_watch_anonymous_growth_bytes_per_minute", "gauge",
         "Growth of RssAnon + VmSwap since the watch began, bytes per minute."},
        {"ramforge_watch_room_before_oom_bytes", "gauge",
         "Bytes before the binding cgroup level's OOM kill: limit - usage + reclaimable file "
         "cache (host: MemAvailable + SwapFree)."},
        {"ramforge_watch_layer_bytes", "gauge",
         "A layer's tensor pages mapped by the process (pagemap) or in the page cache, bytes."},
        {"ramforge_watch_smaps_age_seconds", "gauge",
         "Age of the smaps read behind MappingPss, MappingLocked (and FileBackedResident when the "
         "pagemap walk could not be read): smaps is read at most every 10 s, those figures are "
         "exact_measured at that point in time, not at this reading."},
        {"ramforge_watch_release_requested_bytes", "gauge",
         "Bytes the last --release-idle submitted to process_madvise."},
        {"ramforge_watch_release_accepted_bytes", "gauge",
         "Bytes process_madvise accepted at the last --release-idle."},
    };
    struct rf_prom prom, *f = &prom;
    rf_prom_init(f);
    rf_prom_family(f, "ramforge_ledger_bytes", "gauge",
                   "A watched process's memory ledger, bytes; provenance says what kind of figure "
                   "(MappingPss: at the time ramforge_watch_smaps_age_seconds says).");
    ledger(f, procs, n, false);
    rf_prom_family(
        f, "ramforge_ledger_unknown", "gauge",
        "1 for a ledger category whose value is unknown (absent from ramforge_ledger_bytes).");
    ledger(f, procs, n, true);
    for (int fam = 0; fam < (int)(sizeof(fams) / sizeof(fams[0])); fam++) {
        rf_prom_family(f, fams[fam][0], fams[fam][1], fams[fam][2]);
        for (size_t i = 0; i < n; i++)
            per_proc(f, procs[i], fam);
    }
    reading_families(f, r);
    watch_budget_metrics(f, r, procs, n);
    return rf_prom_take(f, out);
}
