/*
 * A release the session's policy did not plan (rf_session_release_ranges,
 * ramforge/session/session_ext.h): exec's control channel takes watch
 * --budget's request at the model's idle moment and advises page ranges
 * through the session, so the operation's report lists it as an
 * application of its own (boundary "budget"), with what was asked, what
 * the kernel accepted, the mapping's Rss measured around it, and who asked
 * and why (requested_by).
 */
#include "session_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

int rf_session_release_ranges(struct rf_session *s, const char *label, const char *after_label,
                              const char *requested_by, const struct rf_file_range *ranges,
                              size_t n, enum forge_release_mode mode,
                              struct rf_report_application *out)
{
    struct forge_release_result res;
    int rc;

    if (!s || !label || !after_label || !requested_by || (!ranges && n))
        return -EINVAL;
    ses_op_open(s);
    long before = ses_take_sample(s, label, RF_MEASURE_MAPPING_RSS);
    if (before < 0)
        return (int)before;
    struct rf_report_application *app = ses_new_application(s, label);
    int *errs = calloc(n ? n : 1, sizeof(int));
    if (!app || !errs) {
        free(errs);
        return -ENOMEM;
    }
    struct rf_plan *plan = (struct rf_plan *)app->plan;
    snprintf(plan->reason, sizeof(plan->reason), "%s", requested_by);
    app->requested_by = plan->reason;
    rc = s->native->release(s->ud, ranges, n, mode, &res, errs);
    free(errs);
    if (rc < 0) {
        app->refused_reason = rc == -EBUSY ? "the execution gate was busy" : rf_strerror(rc);
    } else {
        app->attempted = true;
        app->requested_bytes = res.requested_bytes;
        app->accepted_bytes = res.accepted_bytes;
        app->n_failed = res.n_failed;
        app->protected_bytes = res.protected_bytes;
        app->first_error = res.first_error;
        long after_i = ses_take_sample(s, after_label, RF_MEASURE_MAPPING_RSS);
        if (after_i < 0)
            return (int)after_i;
        const struct rf_residency_sample *b = &s->samples[before], *a = &s->samples[after_i];
        app->after_label = a->label;
        app->mapping_delta =
            ses_delta(a->has_mapping, a->mapping_rss_bytes, b->has_mapping, b->mapping_rss_bytes);
        app->rss_delta = ses_delta(a->has_process_rss, a->process_rss_bytes, b->has_process_rss,
                                   b->process_rss_bytes);
        app->cgroup_delta = ses_delta(a->has_cgroup_current, a->cgroup_current_bytes,
                                      b->has_cgroup_current, b->cgroup_current_bytes);
    }
    if (out)
        *out = *app;
    return rc < 0 ? rc : 0;
}
