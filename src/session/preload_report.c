/*
 * The operation report of a run with no loaded model to report on: refused
 * by admission before the load, or ended (killed) before it wrote its own,
 * then written by the process that supervised it. Every section that
 * needs a loaded model is null with the reason.
 */
#include "session_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "ramforge/core/admission.h"
#include "ramforge/core/fs_profile.h"
#include "ramforge/core/policy.h"
#include "ramforge/core/report_json.h"
#include "ramforge/error.h"

/*
 * The report of a run with no loaded model to report on, written to
 * report_path, or as text in *out: refused before the load (why NULL), or
 * ended without writing its own (why says what ended it; adm the last
 * decision it recorded, NULL: none).
 */
static int preload_report(const char *model_path, struct rf_session_params params,
                          const struct rf_admission_result *adm, const char *why,
                          const char *report_path, char **out)
{
    struct rf_report r;
    struct rf_timing t;
    json_t *doc;
    struct stat st;
    char warning[RF_ADMISSION_REASON_MAX];

    if (!model_path || (!adm && !why) || (!report_path && !out))
        return -EINVAL;
    memset(&r, 0, sizeof(r));
    rf_timing_init(&t);
    r.scope = "operation";
    r.operation_index = 1;
    r.n_operations = 1;
    r.ramforge_version = RAMFORGE_VERSION;
    r.llama_cpp_version = forge_llama_version();
    r.model_path = model_path;
    r.model_file_size_bytes = stat(model_path, &st) == 0 ? (uint64_t)st.st_size : 0;
    if (rfsys_fs_magic_path(model_path, &r.model_fs_magic) < 0)
        r.model_fs_magic = 0;
    r.policy = rf_policy_name(params.policy);
    r.policy_plans = rf_policy_plans(params.policy);
    r.policy_mutates = rf_policy_mutates(params.policy);
    r.has_target = params.has_target;
    r.target_bytes = params.target_bytes;
    r.reserve_bytes = params.reserve_bytes;
    r.release_dead_file_pages = params.release_dead_file_pages;
    r.release_mode = !r.policy_mutates ? NULL : rf_release_mode_name(params.release_mode);
    r.admission = adm;
    r.admission_reason = "the run recorded no admission decision before it ended";
    r.not_built_reason = why ? why : "admission refused the run before the model was loaded";
    r.plan_reason = r.not_built_reason;
    r.page_snapshot_reason = r.not_built_reason;
    r.cgroup_verdict_reason = r.not_built_reason;
    r.timing = &t;
    const char *warnings[] = {
        "admission refused the run before the load: every admission figure is a GGUF-header "
        "estimate (see admission.inputs)"};
    if (why) {
        snprintf(warning, sizeof(warning),
                 "the run ended before it wrote its report (%s): this report is the one of the "
                 "process that supervised it, with the last admission decision the run recorded",
                 why);
        warnings[0] = warning;
    }
    r.warnings = warnings;
    r.n_warnings = 1;
    int rc = rf_report_to_json(&r, &doc);
    if (rc < 0)
        return rc;
    if (report_path) {
        rc = rf_json_write_file(doc, report_path);
    } else {
        *out = json_dumps(doc, JSON_INDENT(2) | JSON_SORT_KEYS);
        rc = *out ? 0 : -ENOMEM;
    }
    json_decref(doc);
    return rc;
}

int rf_session_preload_report_write(const char *model_path, struct rf_session_params params,
                                    const struct rf_admission_result *adm, const char *report_path)
{
    return report_path && adm ? preload_report(model_path, params, adm, NULL, report_path, NULL)
                              : -EINVAL;
}

int rf_session_preload_report_json(const char *model_path, struct rf_session_params params,
                                   const struct rf_admission_result *adm, char **out)
{
    return out && adm ? preload_report(model_path, params, adm, NULL, NULL, out) : -EINVAL;
}

int rf_session_ended_report(const char *model_path, struct rf_session_params params,
                            const struct rf_admission_result *adm, const char *why,
                            const char *report_path, char **out)
{
    return why && (report_path || out)
               ? preload_report(model_path, params, adm, why, report_path, report_path ? NULL : out)
               : -EINVAL;
}
