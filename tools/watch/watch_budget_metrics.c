/*
 * ramforge watch --budget's Prometheus families, after watch's own: the
 * budget, the bytes the models hold (each file once), the headroom (budget
 * - held: negative over it) and the bytes gated requests still wait on;
 * per process and model (the labels of watch's and exec's series: pid,
 * model, path) the bytes held and releasable, the bytes released
 * (measured drops) and the releases asked, by route (gate: exec's control
 * channel; advice: process_madvise).
 */
#include "watch_budget.h"

#include <stdio.h>

#include "ramforge/session/metrics.h"

static void model_series(struct rf_prom *f, const char *name, const struct watch_proc *p,
                         const struct watch_budget_model *bm)
{
    char pid[16];
    snprintf(pid, sizeof(pid), "%d", p->pid);
    rf_prom_sample(f, name);
    rf_prom_label(f, "pid", pid);
    rf_metrics_model_labels(f, bm->path);
}

void watch_budget_metrics(struct rf_prom *f, const struct watch_reading *r,
                          struct watch_proc *const *procs, size_t n)
{
    static const char *const totals[][2] = {
        {"ramforge_watch_budget_bytes", "The byte budget over the watched models (--budget)."},
        {"ramforge_watch_budget_held_bytes",
         "The watched models' resident pages, bytes, each model file once (the union of the "
         "processes' pagemap present bits)."},
        {"ramforge_watch_budget_headroom_bytes",
         "Budget - held, bytes: negative while the models hold more than the budget."},
        {"ramforge_watch_budget_pending_bytes",
         "Bytes asked through exec's gate and still waiting for the process's idle moment."},
    };
    const struct watch_budget_total *t = &r->budget;
    if (!t->has)
        return;
    int64_t v[] = {(int64_t)t->budget_bytes, (int64_t)t->held_bytes, t->headroom_bytes,
                   (int64_t)t->pending_bytes};
    for (size_t i = 0; i < sizeof(totals) / sizeof(totals[0]); i++) {
        rf_prom_family(f, totals[i][0], "gauge", totals[i][1]);
        rf_prom_sample(f, totals[i][0]);
        rf_prom_i64(f, v[i]);
    }
    static const char *const fams[][3] = {
        {"ramforge_watch_budget_model_held_bytes", "gauge",
         "A model's pages present in the process (pagemap), bytes; route: how a release "
         "reaches it now (gate: exec's control channel, advice: process_madvise)."},
        {"ramforge_watch_budget_model_releasable_bytes", "gauge",
         "Of those, the pages no other watched process maps and not locked, bytes."},
        {"ramforge_watch_budget_released_bytes_total", "counter",
         "The drops of the model's present pages measured after each budget release, bytes."},
        {"ramforge_watch_budget_releases_total", "counter",
         "Budget releases asked of the model, by route."},
    };
    for (int fam = 0; fam < (int)(sizeof(fams) / sizeof(fams[0])); fam++) {
        rf_prom_family(f, fams[fam][0], fams[fam][1], fams[fam][2]);
        for (size_t i = 0; i < n; i++) {
            const struct watch_proc *p = procs[i];
            const struct watch_budget *b = p->budget;
            for (size_t k = 0; b && p->state == WATCH_RUNNING && k < b->n; k++) {
                const struct watch_budget_model *bm = &b->m[k];
                if (!bm->seen)
                    continue;
                if (fam == 3) {
                    for (int route = 0; route < 2; route++) {
                        model_series(f, fams[fam][0], p, bm);
                        rf_prom_label(f, "route", route ? "advice" : "gate");
                        rf_prom_u64(f, route ? bm->advice_requests : bm->gate_requests);
                    }
                    continue;
                }
                model_series(f, fams[fam][0], p, bm);
                if (fam == 0)
                    rf_prom_label(f, "route", b->gated ? "gate" : "advice");
                rf_prom_u64(f, fam == 0   ? bm->held_bytes
                               : fam == 1 ? bm->releasable_bytes
                                          : bm->mem.released_bytes);
            }
        }
    }
}
