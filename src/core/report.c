/*
 * The operation report (schema_version 1) as JSON, built with jansson: the
 * writer that assembles the document from its sections (report_model.c,
 * report_memory.c, report_release.c, report_streaming.c,
 * profile_report.c), and the report written to a file. Byte counts are
 * JSON integers; a figure that could not be had is null with a reason
 * beside it. Sections for features this version does not run keep their
 * keys, null, with a reason.
 */
#include "report_sections.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ramforge/error.h"

bool rf_report_decode_tokens_per_s(const struct rf_report *r, double *out)
{
    *out = 0;
    if (!r || !r->timing || !r->timing->has[RF_TIMER_DECODE] || !r->timing->ns[RF_TIMER_DECODE] ||
        r->n_tokens < 2)
        return false;
    *out = (double)(r->n_tokens - 1) * 1e9 / (double)r->timing->ns[RF_TIMER_DECODE];
    return true;
}

void rf_token_fingerprint(const int32_t *tokens, size_t n, char out[32])
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        uint32_t v = (uint32_t)tokens[i];
        for (int b = 0; b < 4; b++)
            h = (h ^ ((v >> (8 * b)) & 0xff)) * 0x100000001b3ull;
    }
    snprintf(out, 32, "fnv1a64:%016llx", (unsigned long long)h);
}

static json_t *token_array(const int32_t *tokens, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++)
        json_array_append_new(a, json_integer(tokens[i]));
    return a;
}

/* {"<key>": null, ..., "reason": reason} for a section this run does not fill. */
json_t *rf_report_absent_section(const char *reason, const char *const *keys)
{
    json_t *o = json_object();
    for (; o && *keys; keys++)
        json_object_set_new(o, *keys, json_null());
    if (o)
        json_object_set_new(o, "reason", rf_json_str(reason));
    return o;
}

static json_t *timing_json(const struct rf_timing *t)
{
    json_t *o = json_object();
    for (int k = 0; o && k < RF_TIMER_N; k++)
        json_object_set_new(o, rf_timer_name((enum rf_timer)k),
                            t ? rf_json_u64(t->has[k], t->ns[k]) : json_null());
    if (o)
        json_object_set_new(o, "note",
                            json_string("nanoseconds; nested timers are not summed; end_to_end "
                                        "runs from command entry to the end of the work and "
                                        "excludes report serialization; null: stage not run"));
    return o;
}

int rf_report_to_json(const struct rf_report *r, json_t **out)
{
    static const char *staging_keys[] = {"budget_bytes", "selected_bytes", "accepted_bytes",
                                         "observed_mapping_delta_bytes", NULL};
    static const char *profile_keys[] = {"source", "profile_used", NULL};
    struct rf_reconciliation own_rc;
    const struct rf_reconciliation *rc = r->reconciliation;
    char fp[32];
    json_t *doc = json_object();

    if (!doc)
        return -ENOMEM;
    json_object_set_new(doc, "schema_version", json_integer(RF_REPORT_SCHEMA_VERSION));
    json_object_set_new(doc, "operation",
                        json_pack("{s:s, s:o, s:o, s:o}", "scope",
                                  r->scope ? r->scope : "operation", "index",
                                  rf_json_u64(r->operation_index > 0, r->operation_index),
                                  "operations", rf_json_u64(true, r->n_operations), "dropped",
                                  rf_json_u64(true, r->operations_dropped)));
    json_object_set_new(doc, "kind", json_string(RF_REPORT_KIND));
    json_object_set_new(doc, "ramforge_version", rf_json_str(r->ramforge_version));
    json_object_set_new(doc, "llama_cpp_version", rf_json_str(r->llama_cpp_version));
    json_object_set_new(doc, "model", rf_report_model_json(r));
    json_object_set_new(doc, "policy", rf_report_policy_json(r));
    json_object_set_new(doc, "admission", rf_report_admission_json(r));
    json_object_set_new(doc, "plan", rf_report_plan_json(r));
    if (r->ledger && !rc) {
        /* A ledger without its reconciliation: derive it, as the caller would have. */
        rf_ledger_reconcile(r->ledger, r->inventory != NULL,
                            r->inventory ? r->inventory->totals.mapped_virtual_bytes : 0, &own_rc);
        rc = &own_rc;
    }
    json_object_set_new(
        doc, RF_REPORT_KEY_LEDGER,
        r->ledger ? rf_report_ledger_json(r->ledger, rc)
                  : rf_report_absent_section(
                        r->not_built_reason ? r->not_built_reason : "not built",
                        (const char *[]){RF_REPORT_KEY_LEDGER_ENTRIES, "reconciliation", NULL}));
    json_object_set_new(doc, "staging", rf_report_staging_json(r, staging_keys));
    json_object_set_new(doc, "application", rf_report_application_json(r));
    json_object_set_new(doc, "native", rf_report_native_json(r));
    json_object_set_new(doc, "lifetime", rf_report_lifetime_json(r));
    json_t *prof = rf_report_profile_json(r, profile_keys);
    if (prof)
        json_object_set_new(prof, "persisted", rf_profile_persisted_json(r));
    json_object_set_new(doc, "profile", prof);
    json_object_set_new(doc, "prediction", rf_prediction_json(r));
    json_object_set_new(doc, "streaming", rf_stream_report_json(r->streaming));

    /* The newest RF_REPORT_MAX_SAMPLES taken samples, in order; the older ones counted. */
    json_t *res = json_object(), *samples = json_array();
    size_t n_taken = 0, skip;
    for (size_t i = 0; i < r->n_samples; i++)
        n_taken += r->samples[i].taken;
    skip = n_taken > RF_REPORT_MAX_SAMPLES ? n_taken - RF_REPORT_MAX_SAMPLES : 0;
    for (size_t i = 0, seen = 0; res && samples && i < r->n_samples; i++)
        if (r->samples[i].taken && seen++ >= skip)
            json_array_append_new(samples, rf_report_sample_json(&r->samples[i]));
    json_object_set_new(res, "samples", samples);
    json_object_set_new(res, "samples_dropped", json_integer((json_int_t)skip));
    json_t *snap = NULL;
    if (r->page_snapshot && rf_residency_snapshot_to_json(r->page_snapshot, true, &snap) < 0) {
        json_decref(doc);
        return -ENOMEM;
    }
    if (snap)
        json_object_set_new(snap, "note",
                            json_string("resident_pages are pages in the page cache (mincore), "
                                        "whether or not this process maps them: a page released "
                                        "with MADV_DONTNEED stays in the page cache; pages mapped "
                                        "in this process are FileBackedResident (smaps Rss)"));
    json_object_set_new(res, "page_snapshot", snap ? snap : json_null());
    json_t *fc = json_object();
    if (fc) {
        json_object_set_new(fc, "cached_pages",
                            rf_json_u64(r->has_file_cache, r->file_cached_pages));
        json_object_set_new(fc, "page_bytes",
                            rf_json_u64(r->has_file_cache, r->file_cache_page_bytes));
        json_object_set_new(fc, "source", rf_json_str(r->file_cache_source));
        json_object_set_new(fc, "note",
                            json_string("pages of the whole model file in the page cache "
                                        "(source: how they were counted), whether or not this "
                                        "process maps them; not mapping RSS"));
    }
    json_object_set_new(res, "file_page_cache", fc);
    json_object_set_new(res, "dispatch", rf_report_dispatch_json(r));
    json_object_set_new(res, "experts", rf_report_routing_json(r));
    json_object_set_new(res, "reason",
                        snap ? json_null()
                             : rf_json_str(r->page_snapshot_reason ? r->page_snapshot_reason
                                                                   : "no page snapshot was taken"));
    json_object_set_new(doc, "residency", res);
    json_object_set_new(doc, RF_REPORT_KEY_TIMING, timing_json(r->timing));

    rf_token_fingerprint(r->tokens, r->n_tokens, fp);
    /* The text as valid UTF-8 (bad bytes replaced), and whether it was; token_ids stay exact. */
    const char *txt = r->text ? r->text : "";
    bool text_valid = false;
    json_t *text = rf_json_text(txt, strlen(txt), &text_valid);
    json_object_set_new(
        doc, RF_REPORT_KEY_OUTPUT,
        json_pack("{s:I, s:I, s:s, s:o, s:o, s:o, s:b, s:I, s:I, s:I}", "n_prompt_tokens",
                  (json_int_t)r->n_prompt, RF_REPORT_KEY_N_GENERATED, (json_int_t)r->n_tokens,
                  RF_REPORT_KEY_FINGERPRINT, fp, "prompt_token_ids",
                  token_array(r->prompt_tokens, r->n_prompt), "token_ids",
                  token_array(r->tokens, r->n_tokens), "text", text, "text_valid_utf8", text_valid,
                  "n_ctx", (json_int_t)r->n_ctx, "n_threads", (json_int_t)r->n_threads, "seed",
                  (json_int_t)r->seed));
    /* verify_session sits inside output: a failure to add it is not caught below. */
    json_t *verify = json_object();
    char vfp[32];
    if (!verify) {
        json_decref(doc);
        return -ENOMEM;
    }
    rf_token_fingerprint(r->verify_tokens, r->n_verify_tokens, vfp);
    json_object_set_new(verify, "run", json_boolean(r->verified));
    json_object_set_new(verify, "token_ids",
                        r->verified ? token_array(r->verify_tokens, r->n_verify_tokens)
                                    : json_null());
    json_object_set_new(verify, RF_REPORT_KEY_FINGERPRINT,
                        r->verified ? json_string(vfp) : json_null());
    json_object_set_new(verify, "tokens_identical",
                        r->verified ? json_boolean(r->verify_tokens_equal) : json_null());
    if (json_object_size(verify) != 4) {
        json_decref(verify);
        json_decref(doc);
        return -ENOMEM;
    }
    /* set_new takes verify even when it fails (output NULL included) */
    if (json_object_set_new(json_object_get(doc, RF_REPORT_KEY_OUTPUT), "verify_session", verify) <
        0) {
        json_decref(doc);
        return -ENOMEM;
    }

    json_t *w = json_array();
    for (size_t i = 0; w && i < r->n_warnings; i++)
        json_array_append_new(w, rf_json_str(r->warnings[i]));
    json_object_set_new(doc, "warnings", w);

    /* Any NULL above left a key unset: a JSON build failure, named as such (not -ENOMEM). */
    static const char *required[] = {"schema_version",
                                     "kind",
                                     "operation",
                                     "ramforge_version",
                                     "llama_cpp_version",
                                     "model",
                                     "policy",
                                     "admission",
                                     "plan",
                                     RF_REPORT_KEY_LEDGER,
                                     "staging",
                                     "application",
                                     "native",
                                     "lifetime",
                                     "profile",
                                     "residency",
                                     RF_REPORT_KEY_TIMING,
                                     RF_REPORT_KEY_OUTPUT,
                                     "warnings"};
    for (size_t i = 0; i < sizeof(required) / sizeof(required[0]); i++) {
        if (!json_object_get(doc, required[i])) {
            rf_log(RF_LOG_ERROR, "report: the %s section could not be built as JSON", required[i]);
            json_decref(doc);
            return -RF_EJSON;
        }
    }
    *out = doc;
    return 0;
}

static int emit_text(int fd, void *text)
{
    return rf_write_all(fd, text, strlen(text));
}

int rf_file_write_text(const char *path, const char *text)
{
    if (!path || !text)
        return -EINVAL;
    return rf_file_write_atomic(path, emit_text, (void *)text);
}

/* The document as text, then written whole: a short write's reason (ENOSPC) is kept. */
static int emit_json(int fd, void *doc)
{
    char *text = json_dumps(doc, JSON_INDENT(2) | JSON_SORT_KEYS);
    int rc;

    if (!text)
        return -ENOMEM;
    rc = rf_write_all(fd, text, strlen(text));
    if (rc == 0)
        rc = rf_write_all(fd, "\n", 1);
    free(text);
    return rc;
}

int rf_json_write_file(json_t *doc, const char *path)
{
    return rf_file_write_atomic(path, emit_json, doc);
}
