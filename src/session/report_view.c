/*
 * The session's reports (see ramforge/session.h): the report structs of an
 * operation or of the whole session assembled from the retained slices,
 * the JSON text and file of the versioned report, and the figures a
 * program reads without the report: the warnings and the bytes released.
 */
#include "session_internal.h"

#include <errno.h>
#include <stdlib.h>

#include "ramforge/core/policy.h"
#include "ramforge/core/report_json.h"

static void fill_cgroup(const struct rf_session *s, struct rf_report *r)
{
    if (s->p.policy == RF_POLICY_OFF)
        return;
    r->cgroup_version = s->cg.version == RFSYS_CGROUP_V1   ? "v1"
                        : s->cg.version == RFSYS_CGROUP_V2 ? "v2"
                                                           : "none";
    r->cgroup_dir = s->cg.version != RFSYS_CGROUP_NONE ? s->cg.dir : NULL;
    r->cgroup_error = s->cg.error;
    r->cgroup_error_source = s->cg.error ? s->cg.error_source : NULL;
    r->has_cgroup_limit = s->cg.has_limit;
    r->cgroup_limit_unlimited = s->cg.limit_unlimited;
    r->cgroup_limit_bytes = s->cg.limit_bytes;
}

const struct rf_report *rf_session_report(struct rf_session *s, enum rf_report_scope scope)
{
    if (!s)
        return NULL;
    bool all = scope == RF_REPORT_SESSION;
    struct rf_report *r = &s->view[all];
    size_t fs = all ? 0 : s->op.first_sample, fa = all ? 0 : s->op.first_app;

    *r = s->op.rep;
    r->scope = all ? "session" : "operation";
    r->operation_index = s->op.index;
    r->n_operations = s->op.index;
    r->operations_dropped = all ? s->operations_dropped : 0;
    r->samples = s->samples + fs;
    r->n_samples = s->n_samples - fs;
    r->applications = s->apps + fa;
    r->n_applications = s->n_apps - fa;
    r->warnings = s->op.warnings;
    r->n_warnings = s->op.n_warnings;
    fill_cgroup(s, r);
    return r;
}

int rf_session_report_json(struct rf_session *s, enum rf_report_scope scope, char **out)
{
    json_t *doc;
    if (!s || !out)
        return -EINVAL;
    int rc = rf_report_to_json(rf_session_report(s, scope), &doc);
    if (rc < 0)
        return rc;
    *out = json_dumps(doc, JSON_INDENT(2) | JSON_SORT_KEYS);
    json_decref(doc);
    return *out ? 0 : -ENOMEM;
}

int rf_session_report_write(struct rf_session *s, enum rf_report_scope scope, const char *path)
{
    json_t *doc;
    if (!s || !path)
        return -EINVAL;
    int rc = rf_report_to_json(rf_session_report(s, scope), &doc);
    if (rc < 0)
        return rc;
    rc = rf_json_write_file(doc, path);
    json_decref(doc);
    return rc;
}

void rf_session_foreach_warning(const struct rf_session *s,
                                void (*fn)(const char *warning, void *ud), void *ud)
{
    if (!s || !fn)
        return;
    for (size_t i = 0; i < s->op.n_warnings; i++)
        fn(s->op.warnings[i], ud);
}

uint64_t rf_session_released_bytes(const struct rf_session *s)
{
    uint64_t sum = 0;
    if (!s)
        return 0;
    for (size_t i = s->op.first_app; i < s->n_apps; i++)
        if (__builtin_add_overflow(sum, s->apps[i].accepted_bytes, &sum))
            return UINT64_MAX;
    return sum;
}
