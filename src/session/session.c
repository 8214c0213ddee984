/*
 * The session: one residency manager bound to one loaded model instance,
 * running the specification's boundary sequence for any number of
 * operations (see ramforge/session.h). This file: creation (load, wrap,
 * fake native layers), the per-operation state, samples, leases, the
 * dispatch profile, the end of an operation (ledger, page snapshot,
 * warnings) and the reports. Boundaries and release are in boundary.c;
 * admission and staging in prepare.c.
 *
 * Storage: samples, applications and plans of every operation live in
 * arrays that grow (an operation's report is the slice it appended); the
 * per-operation state (admission, staging, dispatch, output, ledger, page
 * snapshot, warnings, timing) lives in `op` and is reset when the next
 * operation opens. Nothing is silently overwritten: a full array grows or
 * the call fails with -ENOMEM.
 */
#include "session_internal.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ramforge/error.h"
#include "ramforge/forge_observer.h"
#include "ramforge/policy.h"
#include "ramforge/report_json.h"

#ifndef RAMFORGE_VERSION
#define RAMFORGE_VERSION "unknown"
#endif

/* Grows *arr (elements of size elem) to hold need; 0 or -ENOMEM. */
int ses_grow(void **arr, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap * 2 : 8;
    while (n < need)
        n *= 2;
    size_t bytes;
    if (__builtin_mul_overflow(n, elem, &bytes))
        return -ENOMEM;
    void *p = realloc(*arr, bytes);
    if (!p)
        return -ENOMEM;
    *arr = p;
    *cap = n;
    return 0;
}

struct rf_session_params rf_session_default_params(void)
{
    struct rf_session_params p = {
        .policy = RF_POLICY_OBSERVE,
        .release_mode = FORGE_RELEASE_DONTNEED,
        .release_dead_file_pages = true,
        .page_budget_pages = RF_RESIDENCY_DEFAULT_BUDGET_PAGES,
        .probe_access = false,
        .stream_sequential = true, /* docs/STREAMING.md: fewer bytes reread per token */
        .stream_hugepage = true,   /* docs/STREAMING.md: reclaim unmaps whole folios */
    };
    return p;
}

void ses_add_warning(struct rf_session *s, const char *w)
{
    struct session_op *op = &s->op;
    for (size_t i = 0; i < op->n_warnings; i++)
        if (op->warnings[i] == w || strcmp(op->warnings[i], w) == 0)
            return; /* by text: the same warning from two call sites is one warning */
    if (ses_grow((void **)&op->warnings, &op->cap_warnings, op->n_warnings + 1,
                 sizeof(*op->warnings)) == 0)
        op->warnings[op->n_warnings++] = w;
}

/* ------------------------------------------------------------------ operations */

static void op_free(struct session_op *op)
{
    free(op->before_load);
    rf_staging_plan_free(&op->staging);
    rf_dispatch_summary_free(&op->dispatch);
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
    r->policy = rf_policy_name(p->policy);
    r->policy_plans = rf_policy_plans(p->policy);
    r->policy_mutates = rf_policy_mutates(p->policy);
    r->has_target = p->has_target;
    r->target_bytes = p->target_bytes;
    r->reserve_bytes = p->reserve_bytes;
    r->release_dead_file_pages = p->release_dead_file_pages;
    r->release_mode = !r->policy_mutates                         ? NULL
                      : p->release_mode == FORGE_RELEASE_PAGEOUT ? "pageout"
                                                                 : "dontneed";
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
    op_free(op);
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
long ses_take_sample(struct rf_session *s, const char *label, enum rf_measure_mapping what)
{
    if (ses_grow((void **)&s->samples, &s->cap_samples, s->n_samples + 1, sizeof(*s->samples)) < 0)
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

/* ------------------------------------------------------------------ create */

static void session_free_arrays(struct rf_session *s)
{
    for (size_t i = 0; i < s->n_plans; i++) {
        rf_plan_free(s->plans[i]);
        free(s->plans[i]);
    }
    free(s->plans);
    free(s->apps);
    free(s->samples);
    free(s->op_starts);
}

void rf_session_free(struct rf_session *s)
{
    if (!s)
        return;
    ses_stream_unpin(s, "session_free");
    op_free(&s->op);
    session_free_arrays(s);
    free(s->exclude);
    free(s->profile_order);
    ses_profile_free(s);
    rf_lifetime_free(&s->lt);
    rf_inventory_free(&s->inv);
    if (s->owns_model)
        forge_model_free(s->m);
    free(s);
}

static bool params_valid(const struct rf_session_params *p)
{
    if (!rf_policy_name(p->policy))
        return false;
    if (rf_policy_requires_target(p->policy) && !p->has_target)
        return false;
    if (p->has_target && p->reserve_bytes >= p->target_bytes)
        return false;
    /* Reports carry byte counts as JSON integers. */
    if (p->target_bytes > (uint64_t)INT64_MAX || p->reserve_bytes > (uint64_t)INT64_MAX)
        return false;
    return p->release_mode == FORGE_RELEASE_DONTNEED || p->release_mode == FORGE_RELEASE_PAGEOUT;
}

/* Creates the session; m (may be NULL) is owned when owns, also on error. */
static int session_create(const struct rf_session_model *model,
                          const struct rf_session_native *native, void *ud,
                          struct rf_session_params params, struct forge_model *m, bool owns,
                          const struct rfsys_cgroup_tree *baseline, struct rf_session **out)
{
    if (!out)
        return -EINVAL;
    *out = NULL;
    bool ok = model && native && params_valid(&params);
    struct rf_session *s = ok ? calloc(1, sizeof(*s)) : NULL;
    if (!s) {
        if (owns)
            forge_model_free(m);
        return ok ? -ENOMEM : -EINVAL;
    }
    s->m = m;
    s->owns_model = owns;
    s->p = params;
    if (!s->p.entry_ns)
        s->p.entry_ns = rf_now_ns();
    s->native = native;
    s->ud = ud;
    s->model = *model;
    s->baseline = baseline;
    rf_inventory_init(&s->inv);
    ses_op_open(s);
    s->op.start_ns = s->p.entry_ns;
    if (model->load_ns)
        rf_timing_set(&s->op.timing, RF_TIMER_MODEL_LOAD, model->load_ns);
    if (params.policy != RF_POLICY_OFF) {
        rf_timing_add(&s->op.timing, RF_TIMER_OBSERVATION, model->info.probe_ns);
        int rc = ses_after_load(s);
        if (rc < 0) {
            rf_session_free(s);
            return rc;
        }
    }
    *out = s;
    return 0;
}

int rf_session_create_native(const struct rf_session_model *model,
                             const struct rf_session_native *native, void *ud,
                             struct rf_session_params params, struct rf_session **out)
{
    return session_create(model, native, ud, params, NULL, false, NULL, out);
}

/* Session over a forge model; takes ownership of m when owns. */
static int create_forge(struct forge_model *m, bool owns, uint64_t load_ns,
                        struct rf_session_params params, const struct rfsys_cgroup_tree *baseline,
                        struct rf_session **out, char err[FORGE_ERR_MAX])
{
    struct rf_session_model model = {0};
    model.tensors = forge_model_tensors(m, &model.n_tensors);
    model.mappings = forge_model_mappings(m, &model.n_mappings);
    forge_model_get_info(m, &model.info);
    model.instance_id = forge_model_instance_id(m);
    model.page_bytes = (uint64_t)sysconf(_SC_PAGESIZE);
    model.load_ns = load_ns;
    int rc = session_create(&model, &rf_session_forge_native, m, params, m, owns, baseline, out);
    if (rc < 0)
        snprintf(err, FORGE_ERR_MAX, "%s: cannot start the session: %s", model.info.path,
                 rf_strerror(rc));
    return rc;
}

/*
 * The weights' classification a session's params ask of forge: by
 * placement when observing; the probe when asked or when the policy
 * releases (its after-load release needs the probe's execution and
 * graph-observed eligibility).
 */
static void model_params_of(const struct rf_session_params *p, struct forge_model_params *fp)
{
    bool observing = p->policy != RF_POLICY_OFF;
    fp->placement_access = observing;
    fp->probe_access = observing && (p->probe_access || rf_policy_mutates(p->policy));
    fp->n_threads = p->n_threads;
}

int rf_session_load(const char *path, const struct forge_model_params *mp,
                    struct rf_session_params params, struct rf_session **out,
                    char err[FORGE_ERR_MAX])
{
    struct forge_model_params fp = mp ? *mp : forge_model_default_params();
    struct forge_model *m;

    if (!out || !path || !params_valid(&params)) {
        snprintf(err, FORGE_ERR_MAX, "invalid session parameters");
        return -EINVAL;
    }
    if (!mp)
        model_params_of(&params, &fp);
    /* The kernel's verdict of the first operation counts from before the load. */
    struct rfsys_cgroup_tree *pre = calloc(1, sizeof(*pre));
    bool has_pre =
        pre && params.policy != RF_POLICY_OFF && rfsys_read_cgroup_tree(NULL, "self", pre) == 0;
    uint64_t t0 = rf_now_ns();
    int rc = forge_model_load(path, &fp, &m, err);
    if (rc == 0) {
        struct forge_model_info info;
        forge_model_get_info(m, &info);
        rc = create_forge(m, true, rf_now_ns() - t0 - info.probe_ns, params, has_pre ? pre : NULL,
                          out, err);
    }
    free(pre);
    return rc;
}

int rf_session_wrap(struct llama_model *model, const char *path, struct rf_session_params params,
                    struct rf_session **out, char err[FORGE_ERR_MAX])
{
    struct forge_model_params fp = forge_model_default_params();
    struct forge_model *m;

    if (!out || !path || !model || !params_valid(&params)) {
        snprintf(err, FORGE_ERR_MAX, "invalid session parameters");
        return -EINVAL;
    }
    model_params_of(&params, &fp);
    int rc = forge_model_wrap(model, path, &fp, &m, err);
    if (rc < 0)
        return rc;
    return create_forge(m, true, 0, params, NULL, out, err);
}

struct forge_model *rf_session_forge_model(struct rf_session *s)
{
    return s ? s->m : NULL;
}

uint64_t rf_session_operations(const struct rf_session *s)
{
    return s ? s->n_ended : 0;
}

/* ------------------------------------------------------------------ leases */

int rf_session_lease_begin(struct rf_session *s)
{
    if (!s)
        return -EINVAL;
    s->native->lease_begin(s->ud);
    __atomic_add_fetch(&s->leases, 1, __ATOMIC_ACQ_REL);
    return 0;
}

void rf_session_lease_end(struct rf_session *s)
{
    if (!s)
        return;
    uint32_t held = __atomic_load_n(&s->leases, __ATOMIC_ACQUIRE);
    /* An end without a begin is ignored: the gate's counters stay consistent. */
    while (held > 0 && !__atomic_compare_exchange_n(&s->leases, &held, held - 1, false,
                                                    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        ;
    if (held > 0)
        s->native->lease_end(s->ud);
}

/* ------------------------------------------------------------------ dispatch */

int rf_session_dispatch_trace(struct rf_session *s, const struct forge_observer *obs)
{
    struct forge_observer_stats st;
    size_t n_events;

    if (!s || !obs)
        return -EINVAL;
    ses_op_open(s);
    struct rf_report *r = &s->op.rep;
    if (s->p.policy == RF_POLICY_OFF) {
        r->dispatch_reason = "residency policy off: no inventory to attribute events to";
        return 0;
    }
    const struct rf_dispatch_event *ev = forge_observer_events(obs, &n_events);
    forge_observer_stats(obs, &st);
    rf_dispatch_summary_free(&s->op.dispatch);
    if (rf_dispatch_summarize(&s->inv, s->model.instance_id, ev, n_events, st.dropped_events,
                              &s->op.dispatch) < 0) {
        r->dispatch_reason = "the dispatch events could not be attributed";
        return 0;
    }
    r->dispatch = &s->op.dispatch;
    if (!s->op.dispatch.complete) {
        r->profile_reason = "the dispatch trace is incomplete (events were dropped): no "
                            "profile; raise --dispatch-events";
        ses_add_warning(s, "the dispatch observer dropped events: the trace is incomplete and "
                           "gives no access profile (raise --dispatch-events)");
        ses_profile_trace(s);
        return 0;
    }
    size_t n = s->op.dispatch.n_tensors;
    uint32_t *by_rank = malloc((n ? n : 1) * sizeof(uint32_t)); /* rank -> tensor index */
    uint32_t *order = calloc(n ? n : 1, sizeof(uint32_t));
    size_t n_order = 0;
    if (!order || !by_rank) {
        free(by_rank);
        free(order);
        return -ENOMEM;
    }
    memset(by_rank, 0xff, (n ? n : 1) * sizeof(uint32_t));
    for (size_t i = 0; i < n; i++) {
        uint32_t rank = s->op.dispatch.tensors[i].first_order;
        if (rank == UINT32_MAX || rank >= n)
            order[n_order++] = s->inv.entries[i].key.tensor_index;
        else
            by_rank[rank] = s->inv.entries[i].key.tensor_index;
    }
    for (size_t rank = n; rank-- > 0;)
        if (by_rank[rank] != UINT32_MAX)
            order[n_order++] = by_rank[rank];
    free(by_rank);
    ses_profile_trace(s);
    if (s->persist.loaded) { /* the persisted profile orders this operation */
        free(order);
        return 0;
    }
    free(s->profile_order);
    s->profile_order = order;
    s->n_profile_order = n_order;
    r->profile_order = order;
    r->n_profile_order = n_order;
    r->profile_source = "dispatch trace of this run's session (--observe-dispatch)";
    return 0;
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
    if (op->kv_n_ctx && ses_estimate_kv(&s->model.info, op->kv_n_ctx, &kv))
        rf_ledger_set(&op->ledger, RF_LEDGER_KV_CACHE, kv, RF_PROV_ESTIMATED,
                      "model hyperparameters x context size (f16 K and V)",
                      "llama_get_memory_breakdown did not answer for this operation");
    else
        rf_ledger_set_unknown(&op->ledger, RF_LEDGER_KV_CACHE, "llama_get_memory_breakdown",
                              "not reported for this operation, and the context size or the "
                              "hyperparameters are unknown");
    rf_ledger_set_unknown(&op->ledger, RF_LEDGER_GRAPH_SCRATCH, "llama_get_memory_breakdown",
                          "not reported for this operation");
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

static void end_warnings(struct rf_session *s)
{
    struct rf_report *r = &s->op.rep;
    if (s->p.policy == RF_POLICY_OFF)
        return;
    ses_add_warning(s, "FileBackedResident is this process's mapping RSS: it is neither the file's "
                       "page cache nor the cgroup charge");
    if (!s->op.has_memory_breakdown)
        ses_add_warning(s, "KvCache and GraphScratch were not reported for this operation "
                           "(llama_get_memory_breakdown did not answer, or the application did "
                           "not supply them)");
    ses_add_warning(s,
                    "the ledger is sampled after the session was dropped: the session's KV cache "
                    "and scratch were freed with it and are in ProcessRssPeak, not ProcessRss "
                    "(residency.samples end_of_session has the RSS with them)");
    ses_add_warning(s, "Runtime is unknown: allocator, loader and tokenizer memory are inside "
                       "ProcessRss");
    if (s->inv.totals.n_anonymous > 0)
        ses_add_warning(s, "some weights are read from anonymous repacked copies: their file pages "
                           "stay mapped and resident but are never read again");
    if (s->cg.version == RFSYS_CGROUP_NONE)
        ses_add_warning(s, "no cgroup memory controller was found: cgroup figures are unknown");
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
    ses_stream_op_end(s, out);
    if (s->p.policy != RF_POLICY_OFF) {
        struct rf_residency_sample *last = s->n_samples ? &s->samples[s->n_samples - 1] : NULL;
        /* The ledger's sample: Rss and Pss from one smaps read. */
        if (last && (!last->mapping_source || strcmp(last->mapping_source, "smaps") != 0)) {
            uint64_t t0 = rf_now_ns();
            s->native->sample_mapping(s->ud, RF_MEASURE_MAPPING_SMAPS, last);
            rf_timing_add(&op->timing, RF_TIMER_OBSERVATION, rf_now_ns() - t0);
        }
        rf_measure_fill_ledger(&op->ledger, &s->inv, s->model.info.access_basis, last, &s->cg,
                               "self");
        fill_native_ledger(s);
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
    return 0;
}

/* ------------------------------------------------------------------ reports */

static void fill_cgroup(const struct rf_session *s, struct rf_report *r)
{
    if (s->p.policy == RF_POLICY_OFF)
        return;
    r->cgroup_version = s->cg.version == RFSYS_CGROUP_V1   ? "v1"
                        : s->cg.version == RFSYS_CGROUP_V2 ? "v2"
                                                           : "none";
    r->cgroup_dir = s->cg.version != RFSYS_CGROUP_NONE ? s->cg.dir : NULL;
    r->has_cgroup_limit = s->cg.has_limit;
    r->cgroup_limit_unlimited = s->cg.limit_unlimited;
    r->cgroup_limit_bytes = s->cg.limit_bytes;
}

const struct rf_report *rf_session_report(struct rf_session *s, enum rf_report_scope scope)
{
    struct rf_report *r = &s->view;
    bool all = scope == RF_REPORT_SESSION;
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
