/*
 * The session's native table over forge and the sys probes: the real
 * gate, /proc/self samples, madvise release and prefetch, mincore pages.
 * ud is the struct forge_model *.
 */
#include "session_internal.h"

#include <stdlib.h>

#include "ramforge/forge/forge_pages.h"

static void fn_lifetime(void *ud, struct rf_native_lifetime *out)
{
    struct forge_model_lifetime fl;
    forge_model_lifetime_state(ud, &fl);
    *out = (struct rf_native_lifetime){
        .has_contract = true,
        .contract_version = fl.contract_version,
        .instance_id = fl.instance_id,
        .quiescent = fl.quiescent,
        .in_flight_contexts = fl.in_flight_contexts,
        .active_contexts = fl.active_contexts,
        .execution_generation = fl.execution_generation,
    };
}

static void fn_sample(void *ud, const char *label, enum rf_measure_mapping what,
                      struct rf_residency_sample *out, struct rfsys_cgroup_memory *cg)
{
    size_t n;
    const struct rf_mapping_meta *mm = forge_model_mappings(ud, &n);
    rf_measure_sample(NULL, "self", mm, n, what, label, out, cg);
}

static void fn_sample_mapping(void *ud, enum rf_measure_mapping what,
                              struct rf_residency_sample *out)
{
    size_t n;
    const struct rf_mapping_meta *mm = forge_model_mappings(ud, &n);
    rf_measure_sample_mapping(NULL, "self", mm, n, what, out);
}

/* One validation and one maps read for a whole snapshot (forge_page_pass). */
static void *fn_page_pass_begin(void *ud)
{
    struct forge_page_pass *pass = calloc(1, sizeof(*pass));
    if (pass)
        forge_page_pass_begin(ud, pass);
    return pass;
}

static void fn_page_pass_end(void *pass)
{
    forge_page_pass_end(pass);
    free(pass);
}

static int fn_release(void *ud, const struct rf_file_range *ranges, size_t n,
                      enum forge_release_mode mode, struct forge_release_result *out, int *errs)
{
    return forge_model_release(ud, ranges, n, mode, out, errs);
}

static int fn_prefetch(void *ud, const struct rf_file_range *ranges, size_t n,
                       struct forge_prefetch_result *out)
{
    return forge_model_prefetch(ud, ranges, n, FORGE_PREFETCH_DEFAULT_CHUNK_BYTES, out);
}

static int fn_page_source(void *ud, struct forge_page_source *out)
{
    return forge_model_page_source(ud, out);
}

static int fn_cgroup_tree(void *ud, struct rfsys_cgroup_tree *out)
{
    (void)ud;
    return rfsys_read_cgroup_tree(NULL, "self", out);
}

static int fn_identity(void *ud, char out[RF_PROFILE_IDENTITY_MAX], uint64_t *file_size_bytes)
{
    struct forge_model_info info;
    char err[FORGE_ERR_MAX];
    forge_model_get_info(ud, &info);
    return forge_gguf_identity(info.path, out, file_size_bytes, err);
}

static void fn_lease_begin(void *ud)
{
    forge_model_lease_begin(ud);
}

static void fn_lease_end(void *ud)
{
    forge_model_lease_end(ud);
}

static void fn_context_opened(void *ud)
{
    forge_model_context_opened(ud);
}

static void fn_context_closed(void *ud)
{
    forge_model_context_closed(ud);
}

static int fn_lock(void *ud, const struct rf_file_range *ranges, size_t n,
                   struct forge_pin_result *out)
{
    return forge_model_pin(ud, ranges, n, out);
}

static int fn_unlock(void *ud, const struct rf_file_range *ranges, size_t n,
                     struct forge_pin_result *out)
{
    return forge_model_unpin(ud, ranges, n, out);
}

static int fn_advise_stream(void *ud, const struct rf_file_range *ranges, size_t n,
                            enum forge_stream_advice advice, struct forge_pin_result *out)
{
    return forge_model_advise_stream(ud, ranges, n, advice, out);
}

static int fn_thp_enabled(void *ud, char *out, size_t out_size)
{
    (void)ud;
    return rfsys_read_thp_enabled(NULL, out, out_size);
}

static int fn_io(void *ud, struct rfsys_io *out)
{
    (void)ud;
    return rfsys_read_io(NULL, "self", out);
}

static int fn_file_changed(void *ud, bool *changed, char *why, size_t why_size)
{
    return forge_model_file_changed(ud, changed, why, why_size);
}

const struct rf_session_native rf_session_forge_native = {
    .lifetime = fn_lifetime,
    .sample = fn_sample,
    .sample_mapping = fn_sample_mapping,
    .release = fn_release,
    .prefetch = fn_prefetch,
    .page_source = fn_page_source,
    .page_pass_begin = fn_page_pass_begin,
    .page_sampler = forge_page_pass_sampler,
    .page_pass_end = fn_page_pass_end,
    .cgroup_tree = fn_cgroup_tree,
    .identity = fn_identity,
    .lease_begin = fn_lease_begin,
    .lease_end = fn_lease_end,
    .context_opened = fn_context_opened,
    .context_closed = fn_context_closed,
    .lock = fn_lock,
    .unlock = fn_unlock,
    .advise_stream = fn_advise_stream,
    .thp_enabled = fn_thp_enabled,
    .io = fn_io,
    .file_changed = fn_file_changed,
};
