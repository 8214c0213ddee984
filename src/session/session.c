/*
 * The session: one residency manager bound to one loaded model instance,
 * running the specification's boundary sequence for any number of
 * operations (see ramforge/session.h). This file: creation (load, wrap,
 * fake native layers), parameters, freeing, the leases and the version.
 * The per-operation state, samples and the end of an operation are in
 * operation.c; the reports in report_view.c; boundaries and release in
 * boundary.c; admission and staging in prepare.c; the dispatch trace and
 * the persisted profile in profile.c.
 *
 * Storage: samples, applications and plans of every operation live in
 * arrays that grow (an operation's report is the slice it appended); the
 * per-operation state (admission, staging, dispatch, output, ledger, page
 * snapshot, warnings, timing) lives in `op` and is reset when the next
 * operation opens. Nothing is silently overwritten: a full array grows or
 * the call fails with -ENOMEM.
 */
#include "session_internal.h"

#include "ramforge/forge/forge_routing.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ramforge/core/policy.h"
#include "ramforge/core/report_json.h"
#include "ramforge/error.h"
#include "ramforge/forge/forge_window.h"

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
        .release_mode = RF_RELEASE_DONTNEED,
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

static struct rf_version_info version_info = {.ramforge = RAMFORGE_VERSION};
static pthread_once_t version_once = PTHREAD_ONCE_INIT;

static void version_fill(void)
{
    const struct forge_llama_build *b = forge_llama_built();
    version_info.llama_cpp = b->version;
    version_info.llama_soname = b->soname;
    version_info.llama_build_id = b->build_id;
}

const struct rf_version_info *rf_version(void)
{
    pthread_once(&version_once, version_fill);
    return &version_info;
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
    for (size_t i = 0; i < s->n_labels; i++)
        free(s->labels[i]);
    free(s->labels);
    free(s->op_starts);
}

void rf_session_free(struct rf_session *s)
{
    if (!s)
        return;
    ses_window_remove(s);
    forge_window_hook_free(s->window_hook);
    forge_routing_free(s->ctx_routing);
    ses_stream_unpin(s, "session_free");
    ses_op_free(&s->op);
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
    return p->release_mode == RF_RELEASE_DONTNEED || p->release_mode == RF_RELEASE_PAGEOUT;
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
    /* the window of the application's own contexts (host.c), under streaming with a ring */
    if (rc == 0 && params.policy == RF_POLICY_STREAMING && params.stream_read_ahead_slots &&
        (rc = forge_window_hook_create(&(*out)->window_hook)) < 0) {
        rf_session_free(*out);
        *out = NULL;
    }
    /* a MoE model's routing in the application's own contexts (host.c) */
    if (rc == 0 && params.policy != RF_POLICY_OFF && model.info.n_expert &&
        (rc = forge_routing_create(m, &(*out)->ctx_routing)) < 0) {
        rf_session_free(*out);
        *out = NULL;
    }
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

bool rf_session_releases_during_load(const struct rf_session_params *p)
{
    return rf_policy_mutates(p->policy) && p->release_dead_file_pages && !p->mlock_requested;
}

void rf_session_set_load_release(struct rf_session *s, const struct rf_load_release *r)
{
    if (s && r)
        s->model.info.load_release = *r;
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
    fp.release_during_load = rf_session_releases_during_load(&params);
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

int rf_session_context_alive(struct rf_session *s, bool opened)
{
    if (!s)
        return -EINVAL;
    void (*fn)(void *) = opened ? s->native->context_opened : s->native->context_closed;
    if (!fn)
        return -ENOSYS;
    fn(s->ud);
    return 0;
}
