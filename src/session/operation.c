/*
 * One operation of a session (see ramforge/session.h): opening it (its
 * report's identity and policy fields, the history cap, the cgroup
 * baseline of the kernel's verdict), the samples it takes, and its end:
 * the application's output recorded, the ledger filled from the last
 * sample, the page-level snapshot, the warnings and the kernel's verdict.
 */
#include "session_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ramforge/core/kv_types.h"
#include "ramforge/core/policy.h"
#include "ramforge/error.h"

#ifndef RAMFORGE_VERSION
#define RAMFORGE_VERSION "unknown"
#endif

/* ------------------------------------------------------------------ operations */

void ses_op_free(struct session_op *op)
{
    free(op->before_load);
    rf_staging_plan_free(&op->staging);
    rf_dispatch_summary_free(&op->dispatch);
    rf_routing_free(&op->routing);
    rf_residency_snapshot_free(&op->snapshot);
    free(op->prompt_tokens);
    free(op->tokens);
    free(op->verify_tokens);
    free(op->text);
    free(op->warnings);
    ses_stream_op_free(&op->stream);
}

/* The report fields every operation starts from: identity and policy. */
static void op_identity(struct rf_session *s, struct rf_report *r)
{
    const struct rf_session_params *p = &s->p;
    r->ramforge_version = RAMFORGE_VERSION;
    r->llama_cpp_version = s->m ? forge_llama_version() : "none (native layer under test)";
    r->model_path = s->model.info.path;
    r->model_desc = s->model.info.desc;
    r->model_file_size_bytes = s->model.info.file_size_bytes;
    r->model_fs_magic = s->model.info.fs_magic;
    r->model_native_size_bytes = s->model.info.size_bytes;
    r->model_n_params = s->model.info.n_params;
    r->instance_id = s->model.instance_id;
    r->access_probed = s->model.info.access_probed;
    r->access_basis = s->model.info.access_basis;
    r->load_release = s->model.info.load_release;
    r->policy = rf_policy_name(p->policy);
    r->policy_plans = rf_policy_plans(p->policy);
    r->policy_mutates = rf_policy_mutates(p->policy);
    r->has_target = p->has_target;
    r->target_bytes = p->target_bytes;
    r->reserve_bytes = p->reserve_bytes;
    r->release_dead_file_pages = p->release_dead_file_pages;
    r->release_mode = !r->policy_mutates ? NULL : rf_release_mode_name(p->release_mode);
    if (p->policy == RF_POLICY_OFF) {
        r->not_built_reason = "residency policy off: no inventory, ledger or sample was taken";
        r->plan_reason = "residency policy off";
        r->admission_reason = "residency policy off";
        r->page_snapshot_reason = "residency policy off";
        return;
    }
    r->inventory = &s->inv;
    r->lifetime = &s->lt;
}

/*
 * Moves the n - from elements of size bytes at base[from..n) to base[0..):
 * nothing when none is left (base may then be NULL, which memmove may not
 * be given even for 0 bytes).
 */
static void shift_down(void *base, size_t from, size_t n, size_t size)
{
    if (n > from)
        memmove(base, (char *)base + from * size, (n - from) * size);
}

/*
 * The history cap (params.history_operations): drops the samples,
 * applications and plans of the operations before the last cap ones,
 * counting them in operations_dropped (the session report says so).
 */
static void drop_history(struct rf_session *s)
{
    size_t keep = (size_t)s->p.history_operations;
    if (!keep || s->n_op_starts <= keep)
        return;
    size_t drop_ops = s->n_op_starts - keep;
    size_t ns = s->op_starts[drop_ops].first_sample, na = s->op_starts[drop_ops].first_app;
    rf_release_totals_add(&s->dropped_releases, s->apps, na);
    for (size_t i = 0; i < na; i++) {
        rf_plan_free(s->plans[i]);
        free(s->plans[i]);
    }
    shift_down(s->samples, ns, s->n_samples, sizeof(*s->samples));
    shift_down(s->apps, na, s->n_apps, sizeof(*s->apps));
    shift_down(s->plans, na, s->n_plans, sizeof(*s->plans));
    s->n_samples -= ns;
    s->n_apps -= na;
    s->n_plans -= na;
    memmove(s->op_starts, s->op_starts + drop_ops, keep * sizeof(*s->op_starts));
    s->n_op_starts = keep;
    for (size_t i = 0; i < keep; i++) {
        s->op_starts[i].first_sample -= ns;
        s->op_starts[i].first_app -= na;
    }
    s->operations_dropped += drop_ops;
}

/* Opens the next operation when the current one has ended. */
void ses_op_open(struct rf_session *s)
{
    struct session_op *op = &s->op;
    if (op->index && !op->ended)
        return;
    uint64_t index = op->index + 1;
    ses_op_free(op);
    memset(op, 0, sizeof(*op));
    /* The new operation's start; without room the history stays uncapped this once. */
    if (ses_grow((void **)&s->op_starts, &s->cap_op_starts, s->n_op_starts + 1,
                 sizeof(*s->op_starts)) == 0) {
        s->op_starts[s->n_op_starts++] =
            (struct session_op_start){.first_sample = s->n_samples, .first_app = s->n_apps};
        drop_history(s);
    }
    op->index = index;
    op->start_ns = rf_now_ns();
    op->first_sample = s->n_samples;
    op->first_app = s->n_apps;
    rf_timing_init(&op->timing);
    rf_staging_plan_init(&op->staging);
    rf_dispatch_summary_init(&op->dispatch);
    rf_routing_zero(&op->routing);
    rf_residency_snapshot_init(&op->snapshot);
    rf_ledger_init(&op->ledger);
    memset(&op->rep, 0, sizeof(op->rep));
    op_identity(s, &op->rep);
    op->rep.invalidated_resources = s->invalidated;
    op->rep.timing = &op->timing;
    ses_stream_op_open(s);
    /* The baseline of the kernel's verdict (failcnt, oom_kill, memory.events). */
    if (s->baseline) { /* read by the caller before the load */
        op->tree_before = *s->baseline;
        op->has_tree_before = true;
        s->baseline = NULL;
    } else {
        op->has_tree_before = s->p.policy != RF_POLICY_OFF && s->native->cgroup_tree &&
                              s->native->cgroup_tree(s->ud, &op->tree_before) == 0;
    }
    ses_profile_op_open(s);
}

/*
 * The kernel's verdict over the operation: the cgroup counters' deltas
 * from the operation's start (for the first, from before the load) to now.
 */
static void kernel_verdict(struct rf_session *s)
{
    struct session_op *op = &s->op;
    struct rfsys_cgroup_tree *after = calloc(1, sizeof(*after));
    op->rep.cgroup_verdict_reason = "the cgroup counters could not be read";
    if (op->has_tree_before && after && s->native->cgroup_tree(s->ud, after) == 0 &&
        rf_cgroup_verdict_build(op->tree_before.levels, op->tree_before.n, after->levels, after->n,
                                &op->verdict) == 0) {
        op->rep.cgroup_verdict = &op->verdict;
        op->rep.cgroup_verdict_reason = NULL;
        if (op->verdict.oom_killed)
            ses_add_warning(s, "the kernel OOM-killed a process of this cgroup during the "
                               "operation (see admission.kernel_verdict)");
        else if (op->verdict.hit_limit)
            ses_add_warning(s, "the cgroup reached its hard limit during the operation: the "
                               "kernel reclaimed (see admission.kernel_verdict)");
    }
    free(after);
}

/* ------------------------------------------------------------------ samples */

/* Takes the next sample; returns its index or -ENOMEM. */
/* Whether a sample of the current operation has this label. */
static bool label_taken(const struct rf_session *s, const char *label)
{
    for (size_t i = s->op.first_sample; i < s->n_samples; i++)
        if (s->samples[i].label && strcmp(s->samples[i].label, label) == 0)
            return true;
    return false;
}

/*
 * The label of a new sample of the operation: label itself, or, when a
 * sample of the operation already has it (a second release round, the
 * verify session's end_of_session), label_K with the first K (2, 3, ...)
 * not taken, interned in s->labels for the session's life (samples point
 * at their label). NULL on -ENOMEM.
 */
static const char *unique_label(struct rf_session *s, const char *label)
{
    char buf[64];
    const char *cand = label;
    for (unsigned k = 2; label_taken(s, cand); k++) {
        snprintf(buf, sizeof(buf), "%s_%u", label, k);
        cand = buf;
    }
    if (cand == label)
        return label;
    for (size_t i = 0; i < s->n_labels; i++)
        if (strcmp(s->labels[i], cand) == 0)
            return s->labels[i];
    char *own = strdup(cand);
    if (!own ||
        ses_grow((void **)&s->labels, &s->cap_labels, s->n_labels + 1, sizeof(*s->labels)) < 0) {
        free(own);
        return NULL;
    }
    return s->labels[s->n_labels++] = own;
}

long ses_take_sample(struct rf_session *s, const char *label, enum rf_measure_mapping what)
{
    label = unique_label(s, label);
    if (!label ||
        ses_grow((void **)&s->samples, &s->cap_samples, s->n_samples + 1, sizeof(*s->samples)) < 0)
        return -ENOMEM;
    struct rf_residency_sample *smp = &s->samples[s->n_samples];
    uint64_t t0 = rf_now_ns();
    memset(smp, 0, sizeof(*smp));
    s->native->sample(s->ud, label, s->p.sample_smaps ? RF_MEASURE_MAPPING_SMAPS : what, smp,
                      &s->cg);
    smp->label = label;
    smp->taken = true;
    rf_timing_add(&s->op.timing, RF_TIMER_OBSERVATION, rf_now_ns() - t0);
    return (long)s->n_samples++;
}

const struct rf_residency_sample *ses_last_sample(const struct rf_session *s)
{
    return s->n_samples ? &s->samples[s->n_samples - 1] : NULL;
}

struct rf_recon_value ses_delta(bool has_a, uint64_t after, bool has_b, uint64_t before)
{
    struct rf_recon_value v = {false, 0};
    if (has_a && has_b && after <= INT64_MAX && before <= INT64_MAX) {
        v.has_value = true;
        v.value = (int64_t)after - (int64_t)before;
    }
    return v;
}

/* ------------------------------------------------------------------ operation end */

/* Copies n int32 ids; *dst NULL for none. */
static int copy_ids(int32_t **dst, const int32_t *src, size_t n)
{
    *dst = NULL;
    if (!src || !n)
        return 0;
    *dst = malloc(n * sizeof(int32_t));
    if (!*dst)
        return -ENOMEM;
    memcpy(*dst, src, n * sizeof(int32_t));
    return 0;
}

static int record_output(struct rf_session *s, const struct rf_operation_output *o)
{
    struct session_op *op = &s->op;
    struct rf_report *r = &op->rep;
    if (copy_ids(&op->prompt_tokens, o->prompt_tokens, o->n_prompt) < 0 ||
        copy_ids(&op->tokens, o->tokens, o->n_tokens) < 0 ||
        copy_ids(&op->verify_tokens, o->verify_tokens, o->n_verify_tokens) < 0 ||
        (o->text && !(op->text = strdup(o->text))))
        return -ENOMEM;
    r->prompt_tokens = op->prompt_tokens;
    r->n_prompt = op->prompt_tokens ? o->n_prompt : 0;
    r->tokens = op->tokens;
    r->n_tokens = op->tokens ? o->n_tokens : 0;
    r->text = op->text;
    r->n_ctx = o->n_ctx;
    r->n_threads = o->n_threads;
    r->context_execution_generation = o->context_execution_generation;
    r->seed = o->seed;
    if (o->verify_tokens) {
        r->verified = true;
        r->verify_tokens = op->verify_tokens;
        r->n_verify_tokens = o->n_verify_tokens;
        r->verify_tokens_equal =
            o->n_verify_tokens == o->n_tokens && o->tokens &&
            memcmp(o->verify_tokens, o->tokens, o->n_tokens * sizeof(int32_t)) == 0;
    }
    /* 0 is "not measured" (the application did not time it): the timer stays null. */
    const struct {
        enum rf_timer k;
        uint64_t ns;
    } timers[] = {{RF_TIMER_CONTEXT_INIT, o->context_init_ns},
                  {RF_TIMER_INFERENCE, o->inference_ns},
                  {RF_TIMER_PROMPT, o->prompt_ns},
                  {RF_TIMER_TTFT, o->ttft_ns},
                  {RF_TIMER_DECODE, o->decode_ns},
                  {RF_TIMER_SYNCHRONIZATION, o->sync_ns}};
    for (size_t i = 0; i < sizeof(timers) / sizeof(timers[0]); i++)
        if (timers[i].ns)
            rf_timing_set(&op->timing, timers[i].k, timers[i].ns);
    op->has_memory_breakdown = o->has_memory_breakdown;
    op->kv_cache_bytes = o->kv_cache_bytes;
    op->compute_bytes = o->compute_bytes;
    op->kv_n_ctx = o->n_ctx;
    return 0;
}

/* The ledger's native categories: the session's memory breakdown, else an estimate. */
static void fill_native_ledger(struct rf_session *s)
{
    struct session_op *op = &s->op;
    uint64_t kv;
    if (op->has_memory_breakdown) {
        rf_ledger_set(&op->ledger, RF_LEDGER_KV_CACHE, op->kv_cache_bytes, RF_PROV_NATIVE_LOGICAL,
                      "llama_get_memory_breakdown (context buffers)",
                      "allocated by the session's context; freed when the session was dropped");
        rf_ledger_set(&op->ledger, RF_LEDGER_GRAPH_SCRATCH, op->compute_bytes,
                      RF_PROV_NATIVE_LOGICAL, "llama_get_memory_breakdown (compute buffers)",
                      "allocated by the session's context; freed when the session was dropped");
        return;
    }
    /* Another libllama than the build ramforge was compiled against: that is the reason. */
    const char *mismatch = s->m ? forge_llama_mismatch() : NULL;
    if (op->kv_n_ctx &&
        ses_estimate_kv(&s->model.info, op->kv_n_ctx, RF_KV_TYPE_F16, RF_KV_TYPE_F16, &kv))
        rf_ledger_set(&op->ledger, RF_LEDGER_KV_CACHE, kv, RF_PROV_ESTIMATED,
                      "model hyperparameters x context size (f16 K and V)",
                      mismatch ? mismatch
                               : "llama_get_memory_breakdown did not answer for this operation");
    else
        rf_ledger_set_unknown(&op->ledger, RF_LEDGER_KV_CACHE, "llama_get_memory_breakdown",
                              mismatch ? mismatch
                                       : "not reported for this operation, and the context size "
                                         "or the hyperparameters are unknown");
    rf_ledger_set_unknown(&op->ledger, RF_LEDGER_GRAPH_SCRATCH, "llama_get_memory_breakdown",
                          mismatch ? mismatch : "not reported for this operation");
}

/*
 * The page-level snapshot at the end of the operation: mincore over the
 * model mapping (or unknown where the kernel's fake-residency rule
 * applies), the plan's selection first, within the page budget; and the
 * file's page-cache figure from cachestat.
 */
static void take_page_snapshot(struct rf_session *s)
{
    struct rf_residency_params rp = rf_residency_default_params();
    struct forge_page_source *src = &s->op.page_source;
    struct rf_report *r = &s->op.rep;
    uint64_t t0 = rf_now_ns();

    if (s->native->page_source(s->ud, src) < 0) {
        r->page_snapshot_reason = "the model mapping's page source is unavailable";
        return;
    }
    void *pass = s->native->page_pass_begin(s->ud);
    rp.page_budget_pages = s->p.page_budget_pages;
    rp.sample = pass ? s->native->page_sampler : NULL; /* no pass: every page unknown */
    rp.sample_ud = pass;
    rp.source = src->source;
    if (r->plan) {
        rp.targeted = r->plan->selected;
        rp.n_targeted = r->plan->n_selected;
    }
    int taken = rf_residency_snapshot_take(&s->inv, &rp, &s->op.snapshot);
    s->native->page_pass_end(pass);
    if (taken == 0)
        r->page_snapshot = &s->op.snapshot;
    else
        r->page_snapshot_reason = "the page snapshot failed";
    r->has_file_cache = src->file_cache_error == 0;
    r->file_cached_pages = src->file_cached_pages;
    r->file_cache_page_bytes = src->page_bytes;
    r->file_cache_source = src->file_cache_source;
    rf_timing_add(&s->op.timing, RF_TIMER_OBSERVATION, rf_now_ns() - t0);
}

/* Whether this operation took an end_of_session sample (its context alive) before the last. */
static bool ledger_after_context(const struct rf_session *s)
{
    for (size_t i = s->op.first_sample; i + 1 < s->n_samples; i++)
        if (s->samples[i].label && strcmp(s->samples[i].label, "end_of_session") == 0)
            return true;
    return false;
}

static void end_warnings(struct rf_session *s)
{
    struct rf_report *r = &s->op.rep;
    if (s->p.policy == RF_POLICY_OFF)
        return;
    ses_add_warning(s, "FileBackedResident is this process's mapping RSS: it is neither the file's "
                       "page cache nor the cgroup charge");
    if (s->m && forge_llama_mismatch())
        ses_add_warning(s, forge_llama_mismatch());
    if (!s->op.has_memory_breakdown)
        ses_add_warning(s, "KvCache and GraphScratch were not reported for this operation "
                           "(llama_get_memory_breakdown did not answer, or the application did "
                           "not supply them)");
    if (ledger_after_context(s))
        ses_add_warning(s, "the ledger is sampled after the session was dropped: the session's "
                           "KV cache and scratch were freed with it and are in ProcessRssPeak, "
                           "not ProcessRss (residency.samples end_of_session has the RSS with "
                           "them)");
    ses_add_warning(s, "Runtime is unknown: allocator, loader and tokenizer memory are inside "
                       "ProcessRss");
    if (s->inv.totals.n_anonymous > 0)
        ses_add_warning(s, "some weights are read from anonymous repacked copies: their file pages "
                           "stay mapped and resident but are never read again");
    if (s->cg.version == RFSYS_CGROUP_NONE)
        ses_add_warning(s, "no cgroup memory controller was found: cgroup figures are unknown");
    else if (s->cg.error)
        ses_add_warning(s, "the cgroup memory controller exists but its usage could not be read: "
                           "cgroup figures are unknown (admission.hard_limit.read_error says why)");
    if (r->policy_mutates)
        ses_add_warning(s, "a release request is not reclamation: accepted bytes are what madvise "
                           "took; only the measured deltas show what changed");
    for (size_t i = s->op.first_app; i < s->n_apps; i++)
        if (s->apps[i].n_failed)
            ses_add_warning(s, "the kernel refused part of a release: those resources are "
                               "ReleaseFailed, not released");
    const struct rf_residency_sample *last = ses_last_sample(s);
    if (r->policy_mutates && r->plan && r->plan->has_soft_target && last && last->has_mapping &&
        last->mapping_rss_bytes > r->plan->soft_target_bytes)
        ses_add_warning(s, "the measured mapping RSS after release is above the soft target (see "
                           "plan.reason and residency.samples)");
}

int rf_session_set_preload_admission(struct rf_session *s, const struct rf_admission_result *adm)
{
    if (!s || !adm)
        return -EINVAL;
    ses_op_open(s);
    if (!s->op.before_load && !(s->op.before_load = malloc(sizeof(*adm))))
        return -ENOMEM;
    *s->op.before_load = *adm;
    s->op.rep.admission_before_load = s->op.before_load;
    return 0;
}

struct rf_operation_output rf_session_output_of(const struct forge_generate_result *gen,
                                                uint32_t seed)
{
    struct rf_operation_output out = {
        .prompt_tokens = gen->prompt_tokens,
        .n_prompt = gen->n_prompt,
        .tokens = gen->tokens,
        .n_tokens = gen->n_tokens,
        .text = gen->text,
        .n_ctx = gen->n_ctx,
        .n_threads = gen->n_threads,
        .context_execution_generation = gen->context_execution_generation,
        .seed = seed,
        .context_init_ns = gen->context_init_ns,
        .prompt_ns = gen->prompt_ns,
        .ttft_ns = gen->ttft_ns,
        .decode_ns = gen->decode_ns,
        .sync_ns = gen->sync_ns,
        .inference_ns = gen->inference_ns,
        .has_memory_breakdown = gen->has_memory_breakdown,
        .kv_cache_bytes = gen->kv_cache_bytes,
        .compute_bytes = gen->compute_bytes,
    };
    return out;
}

int rf_session_operation_end(struct rf_session *s, const struct rf_operation_output *out)
{
    if (!s)
        return -EINVAL;
    ses_op_open(s);
    struct session_op *op = &s->op;
    int rc = out ? record_output(s, out) : 0;
    if (rc < 0)
        return rc;
    ses_window_remove(s); /* its figures are the operation's */
    ses_stream_op_end(s, out);
    if ((rc = ses_routing_end(s)) < 0)
        return rc;
    if (s->p.policy != RF_POLICY_OFF) {
        rc = ses_operation_walk(s);
        if (rc < 0)
            return rc;
        struct rf_residency_sample *last = s->n_samples ? &s->samples[s->n_samples - 1] : NULL;
        /*
         * The ledger's sample: Rss and Pss from one smaps read. A sample that
         * did not read the mapping (end_of_session, its context alive) is not
         * completed later: a sample is one moment, so the ledger gets its own.
         */
        if (last && last->mapping_not_read) {
            long i = ses_take_sample(s, "end_of_operation", RF_MEASURE_MAPPING_SMAPS);
            if (i < 0)
                return (int)i;
            last = &s->samples[i];
        }
        if (last && (!last->mapping_source || strcmp(last->mapping_source, "smaps") != 0)) {
            uint64_t t0 = rf_now_ns();
            s->native->sample_mapping(s->ud, RF_MEASURE_MAPPING_SMAPS, last);
            rf_timing_add(&op->timing, RF_TIMER_OBSERVATION, rf_now_ns() - t0);
        }
        rf_measure_fill_ledger(&op->ledger, &s->inv, s->model.info.access_basis, last, &s->cg,
                               "self");
        fill_native_ledger(s);
        if (s->has_prompt_cache)
            op->ledger.entries[RF_LEDGER_PROMPT_CACHE] = s->prompt_cache;
        if (op->stream.rep.experts.on)
            rf_ledger_set(&op->ledger, RF_LEDGER_EXPERT_CACHE,
                          op->stream.rep.experts.resident_bytes, RF_PROV_EXACT_MEASURED,
                          "mincore of the expert cache's reservations when its window closed",
                          "anonymous pages charged to the cgroup (within ProcessRss and "
                          "CgroupCurrent): the routed expert slices the LRU cache held");
        if (op->rep.staging) {
            rf_ledger_set(&op->ledger, RF_LEDGER_STAGING_REQUESTED, op->staging.selected_bytes,
                          RF_PROV_REQUESTED, "ramforge staging plan (union of page ranges)",
                          "page bytes submitted to MADV_WILLNEED, within --staging-budget");
            if (op->rep.staging_attempted)
                rf_ledger_set(&op->ledger, RF_LEDGER_STAGING_ACCEPTED,
                              op->rep.staging_accepted_bytes, RF_PROV_NATIVE_ACCEPTED,
                              "madvise(MADV_WILLNEED) return values",
                              "bytes of the prefetch hints the kernel took: not residency");
            else
                rf_ledger_set_unknown(&op->ledger, RF_LEDGER_STAGING_ACCEPTED, "ramforge staging",
                                      op->rep.staging_refused_reason);
        }
        ses_file_changed(s);   /* the report says so, whatever the policy */
        take_page_snapshot(s); /* budget 0: every page unknown, never nonresident */
        rf_ledger_reconcile(&op->ledger, true, s->inv.totals.mapped_virtual_bytes, &op->recon);
        op->rep.ledger = &op->ledger;
        op->rep.reconciliation = &op->recon;
        end_warnings(s);
        kernel_verdict(s);
    }
    ses_prediction_finish(s);
    rf_timing_set(&op->timing, RF_TIMER_END_TO_END, rf_now_ns() - op->start_ns);
    op->ended = true;
    s->n_ended++;
    ses_metrics_hold(s);
    return 0;
}
