/*
 * Before an operation: admission against the cgroup hard limit and the
 * soft target, and staging (a bounded MADV_WILLNEED prefetch of the
 * weights the graph reads, observed with mincore and smaps).
 */
#include "session_internal.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ramforge/admission.h"
#include "ramforge/error.h"
#include "ramforge/policy.h"

/* ------------------------------------------------------------------ admission */

/* llama.cpp pads the context size to a multiple of 256 cells. */
#define RF_KV_CELL_PAD 256u

/* KV cache bytes estimated from the hyperparameters: K and V, f16, n_ctx cells. */
bool ses_estimate_kv(const struct forge_model_info *info, uint64_t n_ctx, uint64_t *out)
{
    if (info->n_head <= 0 || info->n_head_kv <= 0 || info->n_layer <= 0 || info->n_embd <= 0)
        return false;
    uint64_t per_token = (uint64_t)info->n_embd / (uint64_t)info->n_head *
                         (uint64_t)info->n_head_kv * 2 /* K, V */ * 2 /* f16 */;
    return !__builtin_mul_overflow(per_token, (uint64_t)info->n_layer, out) &&
           !__builtin_mul_overflow(*out, n_ctx, out);
}

/* Context cells of a request: n_ctx, else prompt + n_predict; padded like llama.cpp. */
static uint64_t request_cells(const struct rf_operation_request *r)
{
    uint64_t n = r->n_ctx ? r->n_ctx : (uint64_t)(r->n_prompt ? r->n_prompt : 64) + r->n_predict;
    return (n + RF_KV_CELL_PAD - 1) / RF_KV_CELL_PAD * RF_KV_CELL_PAD;
}

int rf_session_admit(struct rf_session *s, const struct rf_operation_request *request,
                     struct rf_admission_result *out)
{
    if (!s || !request || s->p.policy == RF_POLICY_OFF)
        return -EINVAL;
    ses_op_open(s);
    const struct rf_residency_sample *now = ses_last_sample(s);
    struct rf_admission_input in;
    uint64_t kv = 0, req;
    bool has_kv = ses_estimate_kv(&s->model.info, request_cells(request), &kv);
    const char *why;

    memset(&in, 0, sizeof(in));
    in.has_request = now && now->has_process_rss && has_kv &&
                     !__builtin_add_overflow(now->process_rss_bytes, kv, &req);
    in.request_bytes = in.has_request ? req : 0;
    in.has_target = s->p.has_target;
    in.target_bytes = s->p.target_bytes;
    in.reserve_bytes = s->p.reserve_bytes;
    in.has_hard_limit = s->cg.has_limit;
    in.hard_unlimited = s->cg.limit_unlimited;
    in.hard_limit_bytes = s->cg.limit_bytes;
    in.hard_limit_source = s->cg.limit_source[0] ? s->cg.limit_source : NULL;
    if (now) {
        in.has_cgroup_current = now->has_cgroup_current;
        in.cgroup_current_bytes = now->cgroup_current_bytes;
        in.has_process_rss = now->has_process_rss;
        in.process_rss_bytes = now->process_rss_bytes;
    }
    /* Reclaimable only with a matching contract observed quiescent. */
    if (rf_policy_mutates(s->p.policy) && rf_binding_may_select(&s->binding, &why)) {
        in.has_reclaimable = true;
        in.reclaimable_bytes = s->inv.totals.unique_reclaimable_bytes;
    }
    if (now && now->has_process_rss && now->has_mapping &&
        now->process_rss_bytes >= now->mapping_rss_bytes) {
        in.has_non_file = true;
        in.non_file_bytes = now->process_rss_bytes - now->mapping_rss_bytes + kv;
    }
    in.unknown_components[in.n_unknown++] = "GraphScratch";
    in.unknown_components[in.n_unknown++] = "Runtime";
    int rc = rf_admission_decide(&in, &s->op.admission);
    if (rc < 0) {
        s->op.rep.admission_reason = "admission could not decide (invalid input)";
        return rc;
    }
    s->op.rep.admission = &s->op.admission;
    if (s->op.admission.outcome == RF_ADMIT_WARNING)
        ses_add_warning(s, "the run exceeds the soft target (see admission.reason)");
    if (out)
        *out = s->op.admission;
    return 0;
}

/* ------------------------------------------------------------------ staging */

/*
 * Pages of the staged tensors (the partial one included) in the page
 * cache (mincore), and how many pages of them were sampled.
 */
static void staged_cache(struct rf_session *s, struct rf_recon_value *cached,
                         struct rf_recon_value *sampled)
{
    const struct rf_staging_plan *sp = &s->op.staging;
    struct rf_residency_params rp = rf_residency_default_params();
    struct rf_residency_snapshot snap;
    struct forge_page_source src;
    uint32_t *targets = calloc(sp->n_staged + 1, sizeof(uint32_t));

    rf_residency_snapshot_init(&snap);
    if (!targets || s->native->page_source(s->ud, &src) < 0) {
        free(targets);
        return;
    }
    memcpy(targets, sp->staged, sp->n_staged * sizeof(uint32_t));
    size_t n_targets = sp->n_staged;
    if (sp->has_partial)
        targets[n_targets++] = sp->partial_tensor_index;
    /* The targeted population comes first: this budget covers it and little more. */
    uint64_t pages = 0;
    for (size_t k = 0; k < n_targets; k++) {
        const struct rf_inventory_entry *e = NULL;
        struct rf_resource_key key = {s->inv.generation, targets[k]};
        if (rf_inventory_lookup(&s->inv, key, &e) == 0)
            pages += rf_page_range_pages(e->pages);
    }
    rp.page_budget_pages = pages;
    rp.sample = s->native->page_sampler;
    rp.sample_ud = s->ud;
    rp.source = src.source;
    rp.targeted = targets;
    rp.n_targeted = n_targets;
    if (rf_residency_snapshot_take(&s->inv, &rp, &snap) == 0 &&
        snap.coverage.targeted.resident_pages <= INT64_MAX) {
        cached->has_value = sampled->has_value = true;
        cached->value = (int64_t)snap.coverage.targeted.resident_pages;
        sampled->value = (int64_t)(snap.coverage.targeted.resident_pages +
                                   snap.coverage.targeted.nonresident_pages);
    }
    rf_residency_snapshot_free(&snap);
    free(targets);
}

int rf_session_stage(struct rf_session *s, uint64_t budget_bytes)
{
    if (!s || s->p.policy == RF_POLICY_OFF || budget_bytes == 0)
        return -EINVAL;
    ses_op_open(s);
    struct rf_staging_params sp = rf_staging_default_params();
    struct forge_prefetch_result res;
    struct rf_report *r = &s->op.rep;
    uint64_t t0 = rf_now_ns();
    int rc;

    sp.budget_bytes = budget_bytes;
    rc = rf_staging_plan_build(&s->inv, &sp, &s->op.staging);
    if (rc < 0)
        return rc;
    r->staging = &s->op.staging;
    if (s->op.staging.n_ranges == 0) {
        r->staging_refused_reason = "the staging plan selected nothing";
        rf_timing_add(&s->op.timing, RF_TIMER_STAGING, rf_now_ns() - t0);
        return 0;
    }
    staged_cache(s, &r->staging_cached_before, &r->staging_sampled_pages);
    if (!s->n_samples && ses_take_sample(s, "before_staging") < 0)
        return -ENOMEM;
    size_t before_i = s->n_samples - 1;
    rc = s->native->prefetch(s->ud, s->op.staging.ranges, s->op.staging.n_ranges, &res);
    if (rc < 0) {
        r->staging_refused_reason = rc == -EBUSY ? "the execution gate was busy" : rf_strerror(rc);
    } else {
        r->staging_attempted = true;
        r->staging_accepted_bytes = res.accepted_bytes;
        r->staging_chunk_bytes = res.chunk_bytes;
        r->staging_calls = res.n_calls;
        r->staging_failed_calls = res.n_failed_calls;
        r->staging_error = res.first_error;
    }
    rf_timing_add(&s->op.timing, RF_TIMER_STAGING, rf_now_ns() - t0);
    staged_cache(s, &r->staging_cached_after, &r->staging_sampled_pages);
    long after_i = ses_take_sample(s, "after_staging");
    if (after_i < 0)
        return (int)after_i;
    const struct rf_residency_sample *before = &s->samples[before_i], *after = &s->samples[after_i];
    r->staging_mapping_delta = ses_delta(after->has_mapping, after->mapping_rss_bytes,
                                         before->has_mapping, before->mapping_rss_bytes);
    return 0;
}
