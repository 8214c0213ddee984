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
        ses_app_attempted(app, &res);
        int mrc = ses_app_measure_after(s, app, (size_t)before, after_label);
        if (mrc < 0)
            return mrc;
    }
    if (out)
        *out = *app;
    return rc < 0 ? rc : 0;
}
