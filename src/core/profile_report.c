/*
 * The report's view of the persisted profile (profile.persisted) and of
 * the operation's prediction accounting (prediction): JSON objects built
 * from the plain rf_report fields. Kept apart from report.c so the
 * operation report's writer only calls two functions.
 */
#include <jansson.h>

#include "ramforge/core/json_util.h"
#include "ramforge/core/profile.h"
#include "ramforge/core/report.h"
#include "ramforge/core/report_json.h"

json_t *rf_profile_persisted_json(const struct rf_report *r)
{
    if (!r->profile_path)
        return json_null();
    return json_pack(
        "{s:o, s:o, s:b, s:o, s:I, s:b, s:o, s:I, s:I, s:i}", "path", rf_json_str(r->profile_path),
        "identity", rf_json_str(r->profile_identity), "used", r->profile_loaded, "reason",
        rf_json_str(r->profile_file_reason), "operations",
        (json_int_t)(r->profile_operations > INT64_MAX ? INT64_MAX : r->profile_operations),
        "saved", r->profile_saved, "save_reason", rf_json_str(r->profile_save_reason),
        "history_entries", (json_int_t)r->history_entries, "history_max",
        (json_int_t)r->history_max, "format_version", RF_PROFILE_FORMAT_VERSION);
}

/* One counter: its value (null: not measured) and where it came from. */
static json_t *counter(bool has, uint64_t v, const char *provenance)
{
    return json_pack("{s:o, s:s}", "value", rf_json_u64(has, v), "provenance", provenance);
}

json_t *rf_prediction_json(const struct rf_report *r)
{
    const struct rf_prediction *e = r->prediction;
    json_t *o = json_object();
    if (!o)
        return NULL;
    json_object_set_new(o, "release_authorized", json_false());
    json_object_set_new(o, "note",
                        json_string("prediction never authorizes release; none of these figures "
                                    "is physical reclamation or a residency guarantee "
                                    "(docs/PREDICTION.md)"));
    if (!e) {
        json_object_set_new(o, "reason",
                            rf_json_str(r->prediction_reason ? r->prediction_reason
                                                             : "no prediction was recorded"));
        return o;
    }
    bool pages = e->has_pages;
    uint64_t pb = pages ? e->page_bytes : 0;
    json_object_set_new(o, "reason", json_null());
    json_object_set_new(o, "evidence", rf_json_str(r->prediction_evidence));
    json_object_set_new(o, "page_bytes", rf_json_u64(pages, pb));
    json_object_set_new(o, "selected_bytes",
                        counter(true, e->selected_bytes,
                                "ramforge staging planner: page bytes selected (requested)"));
    json_object_set_new(o, "accepted_bytes",
                        counter(e->has_accepted, e->accepted_bytes,
                                "native prefetch: bytes madvise(MADV_WILLNEED) returned 0 for"));
    json_object_set_new(
        o, "mapping_delta_bytes",
        json_pack("{s:o, s:s}", "value",
                  e->has_mapping_delta ? json_integer(e->mapping_delta_bytes) : json_null(),
                  "provenance", "observed: mapping RSS after staging - before (proc)"));
    const char *trace = "dispatch trace (tensors named) x staging plan ranges";
    const char *mc = "dispatch trace x staging plan x mincore before staging";
    json_object_set_new(o, "hit_bytes", counter(pages, e->hit_pages * pb, trace));
    json_object_set_new(o, "miss_bytes", counter(pages, e->miss_pages * pb, mc));
    json_object_set_new(o, "wasted_bytes", counter(pages, e->wasted_pages * pb, trace));
    json_object_set_new(o, "unknown_bytes", counter(pages, e->unknown_pages * pb, mc));
    json_object_set_new(o, "resident_staged_bytes",
                        counter(pages, e->resident_staged_pages * pb,
                                "staging plan x mincore before staging: staged pages that "
                                "were already resident"));
    json_object_set_new(o, "used_bytes",
                        counter(pages, e->used_pages * pb,
                                "dispatch trace: file pages of the tensors it "
                                "named (union)"));
    return o;
}
