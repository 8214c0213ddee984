/*
 * ramforge run --residency-svg: page snapshots at the run's boundaries
 * (after load, end of session with the context alive) and the report's
 * end-of-operation snapshot, drawn side by side (ramforge/core/residency_svg.h).
 */
#include <stdio.h>

#include "common/cli.h"
#include "ramforge/core/residency_svg.h"
#include "ramforge/error.h"
#include "ramforge/session/session_ext.h"
#include "run.h"

void run_svg_init(struct run_svg *v)
{
    v->n = 0;
    for (size_t i = 0; i < RUN_SVG_SNAPSHOTS; i++)
        rf_residency_snapshot_init(&v->snaps[i]);
}

void run_svg_free(struct run_svg *v)
{
    for (size_t i = 0; i < RUN_SVG_SNAPSHOTS; i++)
        rf_residency_snapshot_free(&v->snaps[i]);
    v->n = 0;
}

void run_svg_take(struct run_svg *v, struct rf_session *s, const char *label)
{
    if (v->n >= RUN_SVG_SNAPSHOTS)
        return;
    int rc = rf_session_page_snapshot(s, &v->snaps[v->n]);
    if (rc < 0) {
        cli_error("warning: no page snapshot at %s for --residency-svg: %s", label,
                  rf_strerror(rc));
        return;
    }
    v->labels[v->n++] = label;
}

void run_svg_take_after_load(struct run_svg *v, struct rf_session *s)
{
    const struct rf_report *r = rf_session_report(s, RF_REPORT_OPERATION);
    bool released = false;
    for (size_t i = 0; i < r->n_applications; i++)
        released |= r->applications[i].attempted && r->applications[i].accepted_bytes > 0;
    /* the after_load boundary may have released the repacked weights' file pages already */
    run_svg_take(v, s, released ? "after_load_release" : "after_load");
}

int run_svg_write(struct run_svg *v, struct rf_session *s, const char *path)
{
    const struct rf_report *r = rf_session_report(s, RF_REPORT_OPERATION);
    struct rf_residency_svg_boundary b[RUN_SVG_SNAPSHOTS + 1];
    size_t n = 0;
    char title[512];

    for (size_t i = 0; i < v->n; i++)
        b[n++] = (struct rf_residency_svg_boundary){v->labels[i], &v->snaps[i]};
    if (r->page_snapshot)
        b[n++] = (struct rf_residency_svg_boundary){
            r->n_samples ? r->samples[r->n_samples - 1].label : "end of the run", r->page_snapshot};
    else
        cli_error("warning: --residency-svg: no end-of-run page snapshot (%s)",
                  r->page_snapshot_reason ? r->page_snapshot_reason : "no reason recorded");
    if (n == 0 || !r->inventory) {
        cli_error("cannot write %s: no page snapshot was taken", path);
        return -1;
    }
    snprintf(title, sizeof(title), "%s (policy %s%s%s)", r->model_path ? r->model_path : "model",
             r->policy ? r->policy : "unknown", r->release_mode ? ", release " : "",
             r->release_mode ? r->release_mode : "");
    struct rf_residency_svg_params p = {
        .title = title, .inventory = r->inventory, .boundaries = b, .n_boundaries = n};
    int rc = rf_residency_svg_write(&p, path);
    if (rc < 0) {
        cli_error("cannot write %s: %s", path, rf_strerror(rc));
        return -1;
    }
    return 0;
}
