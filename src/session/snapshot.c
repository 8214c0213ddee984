/*
 * A page-level snapshot on demand (rf_session_page_snapshot): the same
 * mincore pass as the end-of-operation snapshot, at any point the caller
 * chooses (after the load, at the end of a session with the context
 * alive), for pictures of residency over time (ramforge/core/residency_svg.h).
 */
#include <errno.h>

#include "session_internal.h"

int rf_session_page_snapshot(struct rf_session *s, struct rf_residency_snapshot *out)
{
    struct rf_residency_params rp = rf_residency_default_params();
    struct forge_page_source src;
    uint64_t t0 = rf_now_ns();

    if (!s || !out || s->p.policy == RF_POLICY_OFF)
        return -EINVAL;
    void *pass = NULL;
    rp.page_budget_pages = s->p.page_budget_pages;
    if (s->native->page_source(s->ud, &src) < 0) {
        rp.source = "unknown: the model mapping's page source is unavailable";
    } else {
        pass = s->native->page_pass_begin(s->ud);
        rp.sample = pass ? s->native->page_sampler : NULL; /* no pass: every page unknown */
        rp.sample_ud = pass;
        rp.source = src.source;
    }
    int rc = rf_residency_snapshot_take(&s->inv, &rp, out);
    if (pass)
        s->native->page_pass_end(pass);
    rf_timing_add(&s->op.timing, RF_TIMER_OBSERVATION, rf_now_ns() - t0);
    return rc;
}
