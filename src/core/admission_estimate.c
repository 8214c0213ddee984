/*
 * The estimates admission is fed from plain structs, before or after the
 * load: the reclaimable bytes now (lifetime states, locks), the file
 * working set (inventory page ranges), the KV cache and the padded
 * context size; and what the run will request, projected onto each cgroup
 * level (rf_admission_project, rf_admission_check_level). The decision
 * over them, its rules and its reasons, is admission.c.
 */
#include "admission_internal.h"
#include "ramforge/core/admission.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ramforge/core/intervals.h"

/* a + b into *sum; false on overflow. An absent b adds nothing. */
static bool add_figure(uint64_t *sum, const struct rf_admission_figure *b)
{
    return !b->has || !__builtin_add_overflow(*sum, b->bytes, sum);
}

/*
 * The request, growth and anonymous projection. Returns NULL, or a static
 * phrase naming what is missing (Unknown), or "overflow".
 */
const char *rf_admission_project(const struct rf_admission_input *in,
                                 struct rf_admission_result *out)
{
    bool pre = in->phase == RF_ADMISSION_PRE_LOAD;
    uint64_t growth = 0, request, anon;

    if (!in->process_rss.has)
        return "the process RSS is unknown";
    if (!in->kv_cache.has)
        return "the KV cache size is unknown";
    if (pre && !in->mapped_weights.has)
        return "the bytes the load will map are unknown";
    if (pre && !in->repacked_weights.has)
        return "which weights the load will repack is unknown";
    /* The charge grows by anonymous memory; mapped file pages are the working set's. */
    if (!add_figure(&growth, &in->kv_cache) || !add_figure(&growth, &in->graph_scratch) ||
        !add_figure(&growth, &in->runtime) ||
        (pre &&
         (!add_figure(&growth, &in->repacked_weights) || !add_figure(&growth, &in->loader_growth) ||
          !add_figure(&growth, &in->page_tables))))
        return "overflow";
    request = in->process_rss.bytes;
    /* The load populates every page of the file: all of it will be in the RSS. */
    if (__builtin_add_overflow(request, growth, &request) ||
        (pre &&
         (!add_figure(&request, &in->mapped_weights) || !add_figure(&request, &in->model_cached))))
        return "overflow";
    /* Released during the load, a copied weight's file pages leave as its copy arrives: the
       peak holds the repacked bytes once, and the weight being copied twice. */
    if (pre && in->load_release.has && in->repacked_weights.has) {
        request = rf_admission_sat_sub(request, in->repacked_weights.bytes);
        if (!add_figure(&request, &in->load_release))
            return "overflow";
    }
    out->has_growth = true;
    out->growth_bytes = growth;
    out->has_request = true;
    out->request_bytes = request;
    if (in->anonymous.has) {
        if (__builtin_add_overflow(in->anonymous.bytes, growth, &anon))
            return "overflow";
        out->has_anonymous = true;
        out->anonymous_bytes = anon;
        if (in->file_working_set.has && !in->file_in_memory) {
            if (__builtin_add_overflow(in->file_working_set.bytes, anon, &out->working_set_bytes))
                return "overflow";
            out->has_working_set = true;
        }
    }
    return NULL;
}

/*
 * The most of the model's pages this level can hold: its whole usage, or
 * less when memory.stat was read. After the load the mapping's pages are
 * mapped, clean or locked: at most the clean mapped file pages and the
 * mapping's locked bytes. Before it the file's cached pages are page
 * cache, unmapped or mapped by another process: at most the clean
 * unmapped and mapped file pages (its locked pages are not, unless some
 * process of the level locked them: then the usage bounds it).
 */
static uint64_t model_charged_at_most(const struct rf_admission_input *in,
                                      const struct rf_cgroup_level *l)
{
    uint64_t at_most = l->usage.bytes, held;
    bool loaded = in->phase == RF_ADMISSION_AFTER_LOAD;

    if (!l->mapped_file.has || (loaded ? !in->locked.has : !l->reclaimable_file.has))
        return at_most;
    if (!__builtin_add_overflow(l->mapped_file.bytes,
                                loaded ? in->locked.bytes : l->reclaimable_file.bytes, &held) &&
        held < at_most)
        at_most = held;
    return at_most;
}

/*
 * Checks one level. Returns false when a projected figure overflows.
 * others (out) is the level's unreclaimable charge that is not this
 * process's, when checked.
 */
bool rf_admission_check_level(const struct rf_admission_input *in, struct rf_admission_result *out,
                              struct rf_admission_level_check *c)
{
    const struct rf_cgroup_level *l = &c->level;
    uint64_t usage = l->usage.bytes, base, others, cached = 0;
    struct rf_oom_room_own own = {
        .loaded = in->phase == RF_ADMISSION_AFTER_LOAD,
        .has_locked = in->locked.has,
        .locked_bytes = in->locked.bytes,
        .has_mapping_rss = in->mapping_rss.has,
        .mapping_rss_bytes = in->mapping_rss.bytes,
    };
    struct rf_oom_room_level room;

    c->enforced = rf_cgroup_level_enforced(l);
    c->working_set_fits = true;
    c->high_fits = true;
    c->high_working_set_fits = true;
    if (!l->usage.has || !out->has_growth)
        return true;
    /* Before the load the model's cached pages become the process's: not others'. */
    if (in->phase == RF_ADMISSION_PRE_LOAD && in->model_cached.has)
        cached = in->model_cached.bytes;
    if (in->mlock_requested)
        own.cache_to_lock_bytes = cached;
    rf_oom_room_of_level(l, &own, &room);
    others = rf_admission_sat_sub(
        rf_admission_sat_sub(usage - rf_admission_sat_sub(room.cache_bytes, cached),
                             in->process_rss.bytes),
        cached);
    /*
     * One rule under every policy (rf_oom_room_of_level): clean file pages nobody locked are
     * reclaimable (the kernel drops them and the run re-reads them: "will thrash" is the
     * working set's), locked ones are not. Before the load the model's cached pages are
     * unmapped cache, unless --mlock will lock them; after it, the level's clean mapped file
     * pages less the model mapping's locked bytes (Locked unknown: none).
     */
    c->mapping_reclaimable_bytes = room.mapped_bytes;
    c->reclaimable_bytes = room.reclaimable_bytes;
    base = usage - c->reclaimable_bytes;
    if (__builtin_add_overflow(base, out->growth_bytes, &c->projected_bytes))
        return false;
    if (c->enforced) {
        c->checked = true;
        c->room_bytes = room.room_bytes; /* the room before the OOM kill */
        c->fits = c->projected_bytes <= l->limit.bytes;
        c->run_room_bytes = rf_admission_sat_sub(l->limit.bytes, others);
        if (out->has_working_set) {
            c->working_set_checked = true;
            c->working_set_fits = out->working_set_bytes <= c->run_room_bytes;
            /* The model's pages beyond this level's whole charge are charged elsewhere: after
               the load its mapping's RSS, before it (inspect's fit check too) its cached pages. */
            if (in->phase == RF_ADMISSION_AFTER_LOAD && in->mapping_rss.has)
                c->unbound_bytes =
                    rf_admission_sat_sub(in->mapping_rss.bytes, model_charged_at_most(in, l));
            else if (in->phase != RF_ADMISSION_AFTER_LOAD && !in->streaming && in->model_cached.has)
                c->unbound_bytes =
                    rf_admission_sat_sub(in->model_cached.bytes, model_charged_at_most(in, l));
            c->working_set_unbound =
                !c->working_set_fits &&
                rf_admission_sat_sub(out->working_set_bytes, c->unbound_bytes) <= c->run_room_bytes;
        }
    }
    if (l->high.has && !l->high.unlimited) {
        c->high_checked = true;
        c->high_fits = c->projected_bytes <= l->high.bytes;
        c->high_run_room_bytes = rf_admission_sat_sub(l->high.bytes, others);
        if (out->has_working_set)
            c->high_working_set_fits = out->working_set_bytes <= c->high_run_room_bytes;
    }
    return true;
}

int rf_admission_loader_bytes(uint64_t n_vocab, uint64_t n_tensors, uint64_t *out)
{
    uint64_t a, b;

    if (!out)
        return -EINVAL;
    *out = 0;
    if (__builtin_mul_overflow(n_vocab, (uint64_t)RF_ADMISSION_LOADER_TOKEN_BYTES, &a) ||
        __builtin_mul_overflow(n_tensors, (uint64_t)RF_ADMISSION_LOADER_TENSOR_BYTES, &b) ||
        __builtin_add_overflow(a, b, out)) {
        *out = 0;
        return -EOVERFLOW;
    }
    return 0;
}

int rf_admission_scratch_bytes(uint64_t n_ubatch, uint64_t n_vocab, uint64_t n_embd, uint64_t *out)
{
    uint64_t floats, ub = n_ubatch < 1 ? 1 : n_ubatch;

    if (!out)
        return -EINVAL;
    *out = 0;
    if (ub > RF_ADMISSION_UBATCH_MAX)
        ub = RF_ADMISSION_UBATCH_MAX;
    if (__builtin_mul_overflow(n_embd, (uint64_t)2, &floats) ||
        __builtin_add_overflow(floats, n_vocab, &floats) ||
        __builtin_add_overflow(floats, (uint64_t)4, &floats) ||
        __builtin_mul_overflow(floats, ub, &floats) ||
        __builtin_mul_overflow(floats, (uint64_t)sizeof(float), out)) {
        *out = 0;
        return -EOVERFLOW;
    }
    return 0;
}

int rf_admission_runtime_bytes(uint64_t n_vocab, uint64_t n_threads, uint64_t *out)
{
    uint64_t logits, stacks;

    if (!out)
        return -EINVAL;
    *out = 0;
    if (__builtin_mul_overflow(n_vocab, (uint64_t)sizeof(float), &logits) ||
        __builtin_mul_overflow(n_threads ? n_threads : 1, (uint64_t)RF_ADMISSION_THREAD_BYTES,
                               &stacks) ||
        __builtin_add_overflow(logits, stacks, out)) {
        *out = 0;
        return -EOVERFLOW;
    }
    return 0;
}

int rf_admission_page_table_bytes(uint64_t mapped_bytes, uint64_t page_bytes, uint64_t *out)
{
    uint64_t pages;

    if (!out || !page_bytes)
        return -EINVAL;
    pages = mapped_bytes / page_bytes + (mapped_bytes % page_bytes != 0);
    if (__builtin_mul_overflow(pages, (uint64_t)8, out)) {
        *out = 0;
        return -EOVERFLOW;
    }
    return 0;
}

int rf_admission_reclaimable_now(const struct rf_inventory *inv, const struct rf_lifetime *lt,
                                 const bool *mapping_locked, const struct rf_binding *b,
                                 struct rf_reclaimable_now *out)
{
    const char *why = NULL;

    if (!out)
        return -EINVAL;
    memset(out, 0, sizeof(*out));
    if (!inv || !lt || !b || lt->n != inv->n || (inv->n_mappings && !mapping_locked) ||
        (inv->n && (!inv->entries || !lt->states)))
        return -EINVAL;
    for (size_t i = 0; i < inv->n; i++) {
        const struct rf_inventory_entry *e = &inv->entries[i];
        bool eligible =
            e->eligibility == RF_ELIGIBLE || e->eligibility == RF_ELIGIBLE_DEAD_FILE_PAGES;

        if (e->mapping_index >= 0 && (size_t)e->mapping_index >= inv->n_mappings) {
            memset(out, 0, sizeof(*out));
            return -EINVAL;
        }
        switch (lt->states[i]) {
        case RF_LT_RELEASE_ELIGIBLE:
            if (!eligible || e->mapping_index < 0) {
                out->n_not_eligible++;
            } else if (mapping_locked[e->mapping_index]) {
                out->n_locked++;
            } else {
                if (__builtin_add_overflow(out->bytes, e->unique_reclaimable_bytes, &out->bytes)) {
                    memset(out, 0, sizeof(*out));
                    return -EOVERFLOW;
                }
                out->n_counted++;
            }
            break;
        case RF_LT_RELEASE_SELECTED:
        case RF_LT_RELEASE_REQUESTED:
        case RF_LT_NATIVE_ACCEPTED:
        case RF_LT_RECONCILED:
            out->n_released++;
            break;
        case RF_LT_SHARED_OR_REUSED:
            out->n_shared++;
            break;
        case RF_LT_NATIVE_FAILURE:
        case RF_LT_RELEASE_FAILED:
            out->n_failed++;
            break;
        case RF_LT_UNKNOWN:
        case RF_LT_INVALIDATED:
            out->n_unknown++;
            break;
        default:
            out->n_not_eligible++;
            break;
        }
    }
    if (!rf_binding_may_select(b, &why)) {
        out->bytes = 0;
        out->reason = why ? why : "selection is not allowed now";
        return 0;
    }
    out->has_value = true;
    return 0;
}

int rf_admission_file_working_set(const struct rf_inventory *inv, uint64_t *out)
{
    return rf_admission_read_bytes(inv, NULL, NULL, out);
}

int rf_admission_read_bytes(const struct rf_inventory *inv,
                            bool (*keep)(const struct rf_inventory_entry *e, void *ud), void *ud,
                            uint64_t *out)
{
    struct rf_interval_set *sets = NULL;
    uint64_t total = 0;
    int ret = 0;

    if (!inv || !out || (inv->n && !inv->entries) || (inv->n_mappings && !inv->mappings))
        return -EINVAL;
    *out = 0;
    if (inv->n_mappings) {
        sets = calloc(inv->n_mappings, sizeof(*sets));
        if (!sets)
            return -ENOMEM;
        for (size_t m = 0; m < inv->n_mappings; m++)
            rf_interval_set_init(&sets[m]);
    }
    for (size_t i = 0; i < inv->n; i++) {
        const struct rf_inventory_entry *e = &inv->entries[i];

        if (e->access != RF_ACCESS_FILE_BACKED || !e->file_backed || e->mapping_index < 0 ||
            (keep && !keep(e, ud)))
            continue;
        if ((size_t)e->mapping_index >= inv->n_mappings) {
            ret = -EINVAL;
            goto out;
        }
        ret = rf_interval_set_add(&sets[e->mapping_index], e->pages);
        if (ret < 0)
            goto out;
    }
    for (size_t m = 0; m < inv->n_mappings; m++) {
        uint64_t bytes;

        if (__builtin_mul_overflow(rf_interval_set_pages(&sets[m]), inv->page_bytes, &bytes) ||
            __builtin_add_overflow(total, bytes, &total)) {
            ret = -EOVERFLOW;
            goto out;
        }
    }
    *out = total;

out:
    for (size_t m = 0; sets && m < inv->n_mappings; m++)
        rf_interval_set_free(&sets[m]);
    free(sets);
    return ret;
}

int rf_admission_kv_bytes(uint64_t n_layer, uint64_t n_ctx, uint64_t n_embd_k, uint64_t n_embd_v,
                          uint64_t elem_bytes, uint64_t *out)
{
    uint64_t width, v;

    if (!out)
        return -EINVAL;
    *out = 0;
    if (!n_layer || !n_ctx || !n_embd_k || !n_embd_v || !elem_bytes)
        return -EINVAL;
    if (__builtin_add_overflow(n_embd_k, n_embd_v, &width) ||
        __builtin_mul_overflow(width, elem_bytes, &v) || __builtin_mul_overflow(v, n_ctx, &v) ||
        __builtin_mul_overflow(v, n_layer, &v))
        return -EOVERFLOW;
    *out = v;
    return 0;
}

int rf_admission_ctx_cells(uint64_t n_ctx_requested, uint64_t n_prompt_tokens, uint64_t n_predict,
                           uint64_t pad, uint64_t *out)
{
    uint64_t n = n_ctx_requested, rem;

    if (!out)
        return -EINVAL;
    *out = 0;
    if (!pad)
        return -EINVAL;
    if (!n) {
        if (!n_prompt_tokens || !n_predict)
            return -EINVAL; /* a prompt token and a generated one at least */
        if (__builtin_add_overflow(n_prompt_tokens, n_predict, &n))
            return -EOVERFLOW;
        n -= 1;
    }
    rem = n % pad;
    if (rem && __builtin_add_overflow(n, pad - rem, &n))
        return -EOVERFLOW;
    *out = n;
    return 0;
}
