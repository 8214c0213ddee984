/*
 * Before an operation: admission against the cgroup hard limit and the
 * soft target, and staging (a bounded MADV_WILLNEED prefetch of the
 * weights the graph reads, observed with mincore and smaps).
 */
#include "session_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ramforge/core/admission.h"
#include "ramforge/core/fs_profile.h"
#include "ramforge/core/kv_types.h"
#include "ramforge/core/policy.h"
#include "ramforge/core/streaming.h"
#include "ramforge/error.h"
#include "ramforge/forge/forge_pages.h"
#include "ramforge/sys/pages.h"

/* ------------------------------------------------------------------ admission */

/* llama.cpp pads the context size to a multiple of 256 cells. */
#define RF_KV_CELL_PAD 256u

static struct rf_admission_figure measured(bool has, uint64_t bytes, const char *source)
{
    struct rf_admission_figure f = {0};
    if (has)
        f = rf_admission_figure_of(bytes, RF_PROV_EXACT_MEASURED, source);
    return f;
}

/*
 * The model mappings' locked bytes for admission (reclaimable leaves a
 * locked mapping out): smaps Locked of the latest sample when it read
 * smaps; else exactly 0 when its VmLck says nothing of the process is
 * locked; else smaps read now. A figure none of those gave is unknown with
 * the reason, never an exact 0 (a sample read through PAGEMAP_SCAN has no
 * Locked).
 */
static struct rf_admission_figure admission_locked(struct rf_session *s,
                                                   const struct rf_residency_sample *now)
{
    struct rf_admission_figure f = {0};
    uint64_t bytes;

    if (now && now->has_mapping_locked)
        return rf_admission_figure_of(now->mapping_locked_bytes, RF_PROV_EXACT_MEASURED,
                                      "/proc/self/smaps Locked of the model mappings");
    if (now && now->has_locked && now->locked_bytes == 0)
        return rf_admission_figure_of(0, RF_PROV_EXACT_MEASURED,
                                      "/proc/self/status VmLck: no page of the process is locked");
    if (ses_mapping_locked(s, &bytes))
        return rf_admission_figure_of(bytes, RF_PROV_EXACT_MEASURED,
                                      "/proc/self/smaps Locked of the model mappings (read for "
                                      "admission)");
    f.source = "smaps Locked of the model mappings could not be read";
    return f;
}

/*
 * The sample admission reads the process from: the latest one, or for an operation in a
 * context that exists (request->in_context) one taken now into *fresh and not kept. Such a
 * context's KV cache and buffers count as inside the measured RSS, so the RSS must be read
 * after its creation: the latest sample may be after_load's, before any context (exec's two
 * contexts' 11 MiB of KV cache were left out of the streaming plan's fixed part, which pinned
 * that much more and got the program OOM-killed under 0.75x the file).
 */
static const struct rf_residency_sample *admission_sample(struct rf_session *s,
                                                          const struct rf_operation_request *r,
                                                          struct rf_residency_sample *fresh)
{
    struct rfsys_cgroup_memory cg;

    if (!r->in_context)
        return ses_last_sample(s);
    memset(fresh, 0, sizeof(*fresh));
    s->native->sample(s->ud, "admission", RF_MEASURE_MAPPING_RSS, fresh, &cg);
    return fresh;
}

int rf_session_admit_result(struct rf_session *s, const struct rf_operation_request *request,
                            struct rf_admission_result *out)
{
    if (!s || !request || s->p.policy == RF_POLICY_OFF)
        return -EINVAL;
    ses_op_open(s);
    struct rf_residency_sample fresh;
    const struct rf_residency_sample *now = admission_sample(s, request, &fresh);
    struct rf_admission_input in;
    struct rfsys_cgroup_tree *tree = calloc(1, sizeof(*tree));
    uint64_t cells, kv, fws;

    if (!tree)
        return -ENOMEM;
    memset(&in, 0, sizeof(in));
    in.mode = s->p.admission_mode;
    in.phase = RF_ADMISSION_AFTER_LOAD;
    if (now) {
        in.process_rss =
            measured(now->has_process_rss, now->process_rss_bytes, "/proc/self/status VmRSS");
        in.anonymous = measured(now->has_anon, now->anon_bytes, "/proc/self/status RssAnon");
        in.mapping_rss =
            measured(now->has_mapping, now->mapping_rss_bytes,
                     now->mapping_source && strcmp(now->mapping_source, "pagemap_scan") == 0
                         ? "PAGEMAP_SCAN of the model mappings (resident pages)"
                         : "/proc/self/smaps Rss of the model mappings");
    }
    in.locked = admission_locked(s, now);
    in.mlock_requested = s->p.mlock_requested;
    in.streaming = s->p.policy == RF_POLICY_STREAMING;
    in.file_in_memory = rf_fs_in_memory_reason(s->model.info.fs_magic);
    if (rf_admission_ctx_cells(request->n_ctx, request->n_prompt, request->n_predict,
                               RF_KV_CELL_PAD, &cells) == 0 &&
        ses_estimate_kv(&s->model.info, cells,
                        request->has_cache_types ? request->type_k : RF_KV_TYPE_F16,
                        request->has_cache_types ? request->type_v : RF_KV_TYPE_F16, &kv))
        in.kv_cache = rf_admission_figure_of(
            kv, RF_PROV_ESTIMATED,
            request->has_cache_types
                ? "hyperparameters x padded context cells (K, V in the context's cache types)"
                : "hyperparameters x padded context cells (f16 K, V)");
    /*
     * The probe saw what the graph reads (native logical); placement knows
     * only which weights the model reads from the mapping rather than a
     * repacked copy (token_embd counted whole: an upper bound, estimated).
     */
    bool moe = s->model.info.n_expert > 0;
    if (s->model.info.access_basis != RF_ACCESS_BASIS_NONE &&
        ses_token_read(&s->inv, &s->model.info, &fws, &in.experts) == 0)
        in.file_working_set =
            s->model.info.access_basis == RF_ACCESS_BASIS_GRAPH_PROBE
                ? rf_admission_figure_of(fws, RF_PROV_NATIVE_LOGICAL,
                                         moe ? "inventory: weights the probe's graph read from "
                                               "the mapping, of the routed experts k/n (MoE)"
                                             : "inventory: weights the probe's graph read from "
                                               "the mapping")
                : rf_admission_figure_of(fws, RF_PROV_ESTIMATED,
                                         moe ? "inventory: file-backed weights the model holds, "
                                               "of the routed experts k/n (placement; MoE)"
                                             : "inventory: file-backed weights the model holds "
                                               "(placement; an upper bound)");
    else
        in.file_working_set.source = "the weights were not classified (residency policy off)";
    if (s->persist.prof.routing.n_layer) /* the routing the persisted profile kept */
        in.experts.routing = &s->persist.prof.routing;
    ses_estimate_runtime((uint64_t)s->model.info.n_vocab, (uint64_t)s->model.info.n_embd, request,
                         s->p.n_threads, &in);
    ses_in_context(request, &in);
    in.reclaimable.source = "the residency policy does not release";
    if (rf_policy_mutates(s->p.policy) && !in.locked.has) {
        in.reclaimable.source = "whether the model mapping is locked is not known (smaps Locked "
                                "could not be read)";
    } else if (rf_policy_mutates(s->p.policy)) {
        bool locked = in.locked.bytes > 0;
        bool *mapping_locked = calloc(s->inv.n_mappings ? s->inv.n_mappings : 1, sizeof(bool));
        struct rf_reclaimable_now rn;
        for (size_t i = 0; mapping_locked && i < s->inv.n_mappings; i++)
            mapping_locked[i] = locked;
        if (mapping_locked &&
            rf_admission_reclaimable_now(&s->inv, &s->lt, mapping_locked, &s->binding, &rn) == 0) {
            if (rn.has_value)
                in.reclaimable = rf_admission_figure_of(
                    rn.bytes, RF_PROV_ESTIMATED,
                    "ReleaseEligible resources on unlocked mappings (lifetime state)");
            else
                in.reclaimable.source = rn.reason;
        }
        free(mapping_locked);
    }
    in.has_target = s->p.has_target;
    in.target_bytes = s->p.target_bytes;
    in.reserve_bytes = s->p.reserve_bytes;
    if (s->native->cgroup_tree && s->native->cgroup_tree(s->ud, tree) == 0) {
        in.cgroups = tree->levels;
        in.n_cgroups = tree->n;
        in.cgroups_truncated = tree->truncated;
        in.host = &tree->host;
    }
    int rc = rf_admission_decide(&in, &s->op.admission);
    if (rc == 0)
        rc = ses_stream_admit(s, &in);
    free(tree);
    if (rc < 0) {
        s->op.rep.admission_reason = "admission could not decide (invalid input)";
        return rc;
    }
    const struct rf_admission_result *a = &s->op.admission;
    s->op.rep.admission = a;
    /* A releasing policy's soft target is judged after the release (operation.c). */
    if (a->outcome == RF_ADMIT_WARNING &&
        !(a->cause == RF_ADMIT_CAUSE_SOFT_TARGET && rf_policy_mutates(s->p.policy)))
        ses_add_warning(s, a->thrash ? "admission: the run will thrash (see admission.reason)"
                           : a->cause == RF_ADMIT_CAUSE_NOT_BOUND
                               ? "admission: the limit cannot bind the model's pages, charged to "
                                 "another cgroup (see admission.reason)"
                           : a->cause == RF_ADMIT_CAUSE_SOFT_TARGET
                               ? "admission: the process's projected memory (RSS + KV cache) "
                                 "exceeds the soft target; the release plan aims only the "
                                 "model mapping at it (see admission.reason)"
                               : "admission: the run's projected charge exceeds a cgroup's "
                                 "memory.high (see admission.reason)");
    if (a->outcome == RF_ADMIT_UNKNOWN)
        ses_add_warning(s, "admission could not measure the request: the outcome is unknown "
                           "(see admission.reason)");
    if (a->lock_note[0])
        ses_add_warning(s, "a requested mlock did not take (see admission.lock_note)");
    if (out)
        *out = *a;
    return 0;
}

int rf_session_admit(struct rf_session *s, const struct rf_operation_request *request)
{
    return rf_session_admit_result(s, request, NULL);
}

int rf_session_admission(const struct rf_session *s, enum rf_admission_outcome *outcome,
                         bool *refused, const char **reason)
{
    if (!s)
        return -EINVAL;
    const struct rf_admission_result *a = s->op.rep.admission;
    if (!a)
        return -ENODATA;
    if (outcome)
        *outcome = a->outcome;
    if (refused)
        *refused = a->refused;
    if (reason)
        *reason = a->reason;
    return 0;
}

/*
 * Bytes of the file at path in the page cache (cachestat), or absent; absent
 * too where cachestat does not count the file's pages (overlayfs).
 */
static struct rf_admission_figure cached_bytes(const char *path)
{
    struct rf_admission_figure f = {0};
    struct rfsys_cachestat cs;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    long page = sysconf(_SC_PAGESIZE);
    uint64_t bytes, magic;
    if (fd >= 0 && rfsys_fs_magic(fd, &magic) == 0 && rf_fs_profile_of(magic)->cachestat_valid &&
        page > 0 && rfsys_cachestat(fd, 0, 0, &cs) == 0 &&
        !__builtin_mul_overflow(cs.nr_cache, (uint64_t)page, &bytes))
        f = rf_admission_figure_of(bytes, RF_PROV_EXACT_MEASURED, "cachestat(2) of the model file");
    if (fd >= 0)
        close(fd);
    return f;
}

/*
 * A thrash verdict before the load under streaming: the admission after the
 * load decides with the plan, unless the projected anonymous memory and a
 * minimum window (RF_STREAM_MIN_WINDOW_BYTES / 2, the floor of one layer)
 * already exceed the room under the hard limit: the kernel would kill the
 * load, so that is a hard excess, rejected in every mode.
 */
static void streaming_preload(struct rf_admission_result *out)
{
    const struct rf_admission_level_check *c = &out->cgroups[out->thrash_level];
    uint64_t need;

    if (out->has_thrash_level && c->working_set_checked && !c->working_set_fits &&
        out->has_anonymous &&
        (__builtin_add_overflow(out->anonymous_bytes, RF_STREAM_MIN_WINDOW_BYTES / 2, &need) ||
         need > c->run_room_bytes)) {
        out->outcome = RF_ADMIT_REJECTED;
        out->cause = RF_ADMIT_CAUSE_HARD_LIMIT;
        out->refused = out->mode != RF_ADMISSION_OFF;
        rf_admission_append(
            out,
            "Streaming cannot help: the projected anonymous memory and a minimum window of "
            "%llu bytes exceed the %llu bytes of room under the hard limit: the kernel would "
            "kill the run, so it is rejected.",
            (unsigned long long)(RF_STREAM_MIN_WINDOW_BYTES / 2),
            (unsigned long long)c->run_room_bytes);
        return;
    }
    out->refused = false;
    out->outcome = RF_ADMIT_WARNING;
    rf_admission_append(out, "Under --residency-policy streaming the admission after the load "
                             "decides.");
}

/* The pre-load decision from PATH's header against the hierarchy tree (borrowed). */
static int preload_decide(const char *path, bool use_extra_bufts, struct rf_session_params params,
                          const struct rf_operation_request *request,
                          const struct rfsys_cgroup_tree *tree, bool file_uncached,
                          struct rf_admission_result *out, char err[FORGE_ERR_MAX])
{
    struct forge_gguf_estimate est;
    struct rf_admission_input in = {0};
    struct rfsys_status st;
    uint64_t cells, kv;

    int rc = forge_gguf_estimate(path, use_extra_bufts, &est, err);
    if (rc < 0)
        return rc;
    in.mode = params.admission_mode;
    in.phase = RF_ADMISSION_PRE_LOAD;
    if (rfsys_read_status(NULL, "self", &st) == 0) {
        in.process_rss = measured(st.has_vm_rss, st.vm_rss_bytes, "/proc/self/status VmRSS");
        in.anonymous = measured(st.has_rss_anon, st.rss_anon_bytes, "/proc/self/status RssAnon");
    }
    /* A container not started yet (--memory-limit) reads the whole file itself: the pages
       cached here are charged to this host's cgroups, not to it (issue 37). */
    in.model_cached = file_uncached ? rf_admission_figure_of(0, RF_PROV_ESTIMATED,
                                                             "hypothetical container: the model "
                                                             "file starts uncached in it")
                                    : cached_bytes(path);
    if (in.model_cached.has)
        in.mapped_weights =
            rf_admission_figure_of(est.file_size_bytes > in.model_cached.bytes
                                       ? est.file_size_bytes - in.model_cached.bytes
                                       : 0,
                                   RF_PROV_ESTIMATED, "GGUF file size minus its cached bytes");
    in.repacked_weights =
        rf_admission_figure_of(est.repacked_bytes, RF_PROV_ESTIMATED,
                               "GGUF header: blk.*/output Q4_0, Q4_K, IQ4_NL weights (CPU_REPACK)");
    if (rf_session_releases_during_load(&params) && est.repacked_bytes) /* forge_load_release.h */
        in.load_release = rf_admission_figure_of(est.repacked_max_bytes, RF_PROV_ESTIMATED,
                                                 "the largest repacked weight, twice at once");
    in.file_working_set = rf_admission_figure_of(
        est.file_working_set_bytes, RF_PROV_ESTIMATED,
        est.n_expert ? "GGUF header: weights read from the mapping (not repacked, not "
                       "token_embd): the dense ones + k/n of the routed experts (MoE: a token "
                       "reads k of the n experts of each layer)"
                     : "GGUF header: weights read from the mapping (not repacked, not token_embd)");
    if (est.n_expert) { /* a MoE model: the verdict in experts (admission_experts.c) */
        in.experts.n_expert = est.n_expert;
        in.experts.n_expert_used = est.n_expert_used;
        in.experts.dense_bytes = est.dense_read_bytes;
        in.experts.routed_bytes = est.routed_read_bytes;
        in.experts.n_layer = est.expert_layers;
    }
    uint64_t loader, tables;
    long page = sysconf(_SC_PAGESIZE);
    if (est.n_vocab && rf_admission_loader_bytes(est.n_vocab, est.n_tensors, &loader) == 0)
        in.loader_growth = rf_admission_figure_of(
            loader, RF_PROV_ESTIMATED,
            "llama.cpp's load: 224 B per vocabulary token + 2 KiB per tensor (measured)");
    else
        in.loader_growth.source = "the header has no tokenizer.ggml.tokens array";
    if (page > 0 &&
        rf_admission_page_table_bytes(est.file_size_bytes, (uint64_t)page, &tables) == 0)
        in.page_tables = rf_admission_figure_of(
            tables, RF_PROV_ESTIMATED, "page tables of the model mapping: 8 bytes per page mapped");
    uint64_t n_embd_kv = est.n_head ? (uint64_t)est.n_embd / est.n_head * est.n_head_kv : 0;
    if (n_embd_kv && est.n_layer &&
        rf_admission_ctx_cells(request->n_ctx, request->n_prompt, request->n_predict,
                               RF_KV_CELL_PAD, &cells) == 0 &&
        rf_kv_cache_bytes(est.n_layer, cells, n_embd_kv, n_embd_kv,
                          request->has_cache_types ? request->type_k : RF_KV_TYPE_F16,
                          request->has_cache_types ? request->type_v : RF_KV_TYPE_F16, &kv) == 0)
        in.kv_cache = rf_admission_figure_of(
            kv, RF_PROV_ESTIMATED,
            request->has_cache_types
                ? "GGUF hyperparameters x padded context cells (the program's cache types)"
                : "GGUF hyperparameters x padded context cells (f16)");
    in.mlock_requested = params.mlock_requested;
    in.streaming = params.policy == RF_POLICY_STREAMING;
    uint64_t magic;
    in.file_in_memory =
        rfsys_fs_magic_path(path, &magic) == 0 ? rf_fs_in_memory_reason(magic) : NULL;
    in.has_target = params.has_target;
    in.target_bytes = params.target_bytes;
    in.reserve_bytes = params.reserve_bytes;
    in.cgroups = tree->levels;
    in.n_cgroups = tree->n;
    in.cgroups_truncated = tree->truncated;
    in.host = &tree->host;
    ses_estimate_runtime(est.n_vocab, est.n_embd, request, params.n_threads, &in);
    rc = rf_admission_decide(&in, out);
    if (rc == 0 && params.policy == RF_POLICY_STREAMING && out->cause == RF_ADMIT_CAUSE_THRASH)
        streaming_preload(out);
    if (rc < 0)
        snprintf(err, FORGE_ERR_MAX, "%s: admission could not decide: %s", path, rf_strerror(rc));
    return rc;
}

/*
 * The arguments of a decision from the header checked (-EINVAL), *out
 * zeroed and an empty cgroup tree allocated into *tree (the caller frees
 * it; -ENOMEM).
 */
static int preload_begin(const char *path, const struct rf_operation_request *request,
                         struct rf_admission_result *out, struct rfsys_cgroup_tree **tree)
{
    if (!path || !request || !out)
        return -EINVAL;
    memset(out, 0, sizeof(*out));
    *tree = calloc(1, sizeof(**tree));
    return *tree ? 0 : -ENOMEM;
}

int rf_session_preload_admit(const char *path, bool use_extra_bufts,
                             struct rf_session_params params,
                             const struct rf_operation_request *request,
                             struct rf_admission_result *out, bool *decided,
                             char err[FORGE_ERR_MAX])
{
    if (decided)
        *decided = false;
    struct rfsys_cgroup_tree *tree;
    int ret = preload_begin(path, request, out, &tree);
    if (ret < 0)
        return ret;
    /*
     * Only a limit can refuse a run before its load: without any enforced
     * limit or memory.high in the hierarchy the header is not parsed (it
     * costs a parse of the whole GGUF metadata).
     */
    bool limited = false;
    if (rfsys_read_cgroup_tree(NULL, "self", tree) == 0)
        for (size_t i = 0; i < tree->n; i++)
            limited |= rf_cgroup_level_enforced(&tree->levels[i]) ||
                       (tree->levels[i].high.has && !tree->levels[i].high.unlimited);
    ret =
        limited ? preload_decide(path, use_extra_bufts, params, request, tree, false, out, err) : 0;
    free(tree);
    if (decided)
        *decided = limited && ret == 0;
    return ret;
}

int rf_session_fit_check(const char *path, bool use_extra_bufts, struct rf_session_params params,
                         const struct rf_operation_request *request, bool has_limit,
                         uint64_t limit_bytes, struct rf_admission_result *out,
                         char err[FORGE_ERR_MAX])
{
    struct rfsys_status st;
    struct rfsys_cgroup_tree *tree;
    int ret = preload_begin(path, request, out, &tree);
    if (ret < 0)
        return ret;
    if (!has_limit) {
        if (rfsys_read_cgroup_tree(NULL, "self", tree) < 0)
            tree->n = 0; /* no memory controller: nothing limits the run */
    } else {
        /* One cgroup of the given limit holding only this process (nothing else charged). */
        struct rf_cgroup_level *l = &tree->levels[0];
        tree->n = 1;
        snprintf(l->dir, sizeof(l->dir), "(hypothetical: --memory-limit)");
        l->limit.has = true;
        l->limit.bytes = limit_bytes;
        snprintf(l->limit.source, sizeof(l->limit.source), "--memory-limit");
        l->high.error = -ENOENT;
        l->inactive_file.has = true; /* a cgroup of its own: no other file cache charged */
        snprintf(l->inactive_file.source, sizeof(l->inactive_file.source),
                 "hypothetical: no file cache charged before the run");
        l->reclaimable_file = l->inactive_file;
        l->mapped_file.error = -ENOENT; /* not read: its usage bounds the model's pages */
        snprintf(l->mapped_file.source, sizeof(l->mapped_file.source),
                 "hypothetical: no memory.stat to read");
        if (rfsys_read_status(NULL, "self", &st) == 0 && st.has_vm_rss) {
            l->usage.has = true;
            l->usage.bytes = st.vm_rss_bytes;
            snprintf(l->usage.source, sizeof(l->usage.source),
                     "this process's /proc/self/status VmRSS (alone in the cgroup)");
        } else {
            l->usage.error = -ENOENT;
        }
    }
    ret = preload_decide(path, use_extra_bufts, params, request, tree, has_limit, out, err);
    free(tree);
    return ret;
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
    void *pass = s->native->page_pass_begin(s->ud);
    rp.page_budget_pages = pages;
    rp.sample = pass ? s->native->page_sampler : NULL; /* no pass: every page unknown */
    rp.sample_ud = pass;
    rp.source = src.source;
    rp.targeted = targets;
    rp.n_targeted = n_targets;
    int taken = rf_residency_snapshot_take(&s->inv, &rp, &snap);
    s->native->page_pass_end(pass);
    if (taken == 0 && snap.coverage.targeted.resident_pages <= INT64_MAX) {
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
    uint32_t *hot = ses_profile_stage_order(s, &sp.n_order); /* --profile: hot first */
    uint8_t *resident = ses_profile_stage_exclude(s);        /* --profile: skip what is resident */
    sp.order = hot;
    sp.exclude = resident;
    rc = rf_staging_plan_build(&s->inv, &sp, &s->op.staging);
    free(hot);
    free(resident);
    if (rc < 0)
        return rc;
    r->staging = &s->op.staging;
    if (s->op.staging.n_ranges == 0) {
        r->staging_refused_reason = "the staging plan selected nothing";
        rf_timing_add(&s->op.timing, RF_TIMER_STAGING, rf_now_ns() - t0);
        return 0;
    }
    staged_cache(s, &r->staging_cached_before, &r->staging_sampled_pages);
    ses_prediction_before(s); /* --profile: every file page's state before the prefetch */
    if (!s->n_samples && ses_take_sample(s, "before_staging", RF_MEASURE_MAPPING_RSS) < 0)
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
    long after_i = ses_take_sample(s, "after_staging", RF_MEASURE_MAPPING_RSS);
    if (after_i < 0)
        return (int)after_i;
    const struct rf_residency_sample *before = &s->samples[before_i], *after = &s->samples[after_i];
    r->staging_mapping_delta = ses_delta(after->has_mapping, after->mapping_rss_bytes,
                                         before->has_mapping, before->mapping_rss_bytes);
    return 0;
}
