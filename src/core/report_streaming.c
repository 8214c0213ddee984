/*
 * The report's `streaming` object (streaming.h's rf_stream_report): the
 * operation's storage traffic, and under the streaming policy the plan,
 * the pins, the per-token bounds and where the decode's reads went. One
 * object, so that bench reads its keys in one place.
 */
#include "ramforge/core/json_util.h"
#include "ramforge/core/ledger.h"
#include "ramforge/core/report_json.h"
#include "ramforge/error.h"

#include <stdint.h>

static json_t *io_json(const struct rf_stream_report *sr)
{
    const char *prov = rf_provenance_name(RF_PROV_EXACT_MEASURED);
    return json_pack(
        "{s:o, s:s, s:o, s:o, s:s, s:o}", "read_bytes",
        rf_json_u64(sr->has_read_bytes, sr->read_bytes), "read_bytes_source",
        "/proc/self/io read_bytes, the operation's delta (bytes fetched from "
        "storage; page-cache hits excluded)",
        "read_bytes_provenance", sr->has_read_bytes ? json_string(prov) : json_null(),
        "major_faults", rf_json_u64(sr->has_major_faults, sr->major_faults), "major_faults_source",
        "/proc/self/stat majflt (field 12), the operation's delta", "major_faults_provenance",
        sr->has_major_faults ? json_string(prov) : json_null());
}

static json_t *plan_json(const struct rf_stream_report *sr)
{
    const struct rf_stream_plan *p = sr->plan;
    json_t *names = json_array();
    if (!names)
        return NULL;
    for (size_t i = 0; sr->inv && i < p->n_pinned; i++)
        if (p->pinned[i] < sr->inv->n)
            json_array_append_new(names, rf_json_str(sr->inv->entries[p->pinned[i]].name));
    json_t *o = json_object();
    if (!o) {
        json_decref(names);
        return NULL;
    }
    json_object_set_new(o, "limit_bytes", rf_json_u64(true, p->limit_bytes));
    json_object_set_new(o, "limit_source", rf_json_str(sr->limit_source));
    json_object_set_new(o, "margin_bytes", rf_json_u64(true, p->margin_bytes));
    json_object_set_new(o, "window_bytes", rf_json_u64(true, p->window_bytes));
    json_object_set_new(o, "min_window_bytes", rf_json_u64(true, p->min_window_bytes));
    json_object_set_new(o, "read_ahead_slots", json_integer(p->read_ahead_slots));
    json_object_set_new(o, "read_ahead_bytes", rf_json_u64(true, p->read_ahead_bytes));
    json_object_set_new(o, "fixed_bytes", rf_json_u64(true, p->fixed_bytes));
    json_object_set_new(o, "working_set_bytes", rf_json_u64(true, p->working_set_bytes));
    json_object_set_new(o, "resident_bytes", rf_json_u64(true, p->resident_bytes));
    json_object_set_new(o, "pin_budget_bytes", rf_json_u64(true, p->pin_budget_bytes));
    json_object_set_new(o, "pinned_bytes", rf_json_u64(true, p->pinned_bytes));
    json_object_set_new(o, "streamed_bytes_per_token", rf_json_u64(true, p->streamed_bytes));
    json_object_set_new(o, "streamed_provenance",
                        json_string(rf_provenance_name(RF_PROV_ESTIMATED)));
    json_object_set_new(o, "fits", json_boolean(p->fits));
    json_object_set_new(o, "n_layers", json_integer(p->n_layers));
    json_object_set_new(o, "layers_pinned", json_integer(p->layers_pinned));
    json_object_set_new(o, "layers_spread", json_boolean(p->layers_spread));
    json_object_set_new(o, "expert_cache_per_layer", json_integer(p->expert_cache_per_layer));
    json_object_set_new(o, "expert_cache_slots", json_integer(p->expert_cache_slots));
    json_object_set_new(o, "expert_cache_bytes", rf_json_u64(true, p->expert_cache_bytes));
    json_object_set_new(o, "expert_bytes", rf_json_u64(true, p->expert_bytes));
    json_object_set_new(o, "expert_min_bytes", rf_json_u64(true, p->expert_min_bytes));
    json_object_set_new(o, "partial_layer",
                        p->partial_layer >= 0 ? json_integer(p->partial_layer) : json_null());
    json_object_set_new(o, "partial_layer_tensors", json_integer(p->partial_layer_tensors));
    json_object_set_new(o, "head_pinned", json_boolean(p->head_pinned));
    json_object_set_new(o, "pinned_tensors", names);
    json_object_set_new(o, "reason", rf_json_str(p->reason));
    return o;
}

static json_t *pin_json(const struct rf_stream_report *sr)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    json_object_set_new(o, "attempted", json_boolean(sr->pin_attempted));
    json_object_set_new(o, "pinned", json_boolean(sr->pinned));
    json_object_set_new(o, "accepted_bytes",
                        rf_json_u64(sr->pin_attempted, sr->pin_accepted_bytes));
    json_object_set_new(o, "elapsed_ns", rf_json_u64(sr->pin_attempted, sr->pin_ns));
    json_object_set_new(o, "error",
                        sr->pin_error ? json_string(rf_strerror(sr->pin_error)) : json_null());
    json_object_set_new(o, "error_reason", rf_json_str(sr->pin_error_reason));
    json_object_set_new(o, "fallback", json_boolean(sr->fallback));
    json_object_set_new(o, "requested_bytes",
                        rf_json_u64(sr->pin_attempted, sr->pin_requested_bytes));
    json_object_set_new(o, "partial", json_boolean(sr->partial));
    json_object_set_new(o, "memlock_limit_bytes",
                        rf_json_u64(sr->partial, sr->memlock_limit_bytes));
    json_object_set_new(o, "sequential", json_boolean(sr->sequential));
    json_object_set_new(o, "hugepage", json_boolean(sr->hugepage));
    json_object_set_new(o, "rows_random", json_boolean(sr->rows_random));
    json_object_set_new(o, "thp_enabled",
                        sr->has_thp_enabled ? rf_json_str(sr->thp_enabled) : json_null());
    json_object_set_new(
        o, "thp_enabled_source",
        json_string("/sys/kernel/mm/transparent_hugepage/enabled, the bracketed mode; null: "
                    "hugepage not asked, or the file is missing (a kernel without THP)"));
    json_object_set_new(o, "locked_bytes", rf_json_u64(sr->has_locked, sr->locked_bytes));
    json_object_set_new(o, "locked_source",
                        json_string("/proc/self/smaps Locked of the model mapping after the pin"));
    json_object_set_new(o, "unpinned_at", rf_json_str(sr->unpinned_at));
    return o;
}

static json_t *bound_json(const struct rf_stream_report *sr)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    json_object_set_new(o, "bandwidth_bytes_per_s",
                        rf_json_u64(sr->has_bandwidth, sr->bandwidth_bytes_per_s));
    json_object_set_new(o, "warm_token_ns", rf_json_u64(sr->has_warm_token_ns, sr->warm_token_ns));
    json_object_set_new(o, "bound_token_ns", rf_json_u64(sr->has_bound, sr->bound_token_ns));
    json_object_set_new(o, "achieved_token_ns",
                        rf_json_u64(sr->has_achieved, sr->achieved_token_ns));
    json_object_set_new(o, "ratio_to_bound",
                        sr->has_bound && sr->has_achieved && sr->bound_token_ns > 0
                            ? json_real((double)sr->achieved_token_ns / (double)sr->bound_token_ns)
                            : json_null());
    json_object_set_new(o, "overlap_limit_token_ns",
                        rf_json_u64(sr->has_overlap_limit, sr->overlap_limit_token_ns));
    json_object_set_new(
        o, "ratio_to_overlap_limit",
        sr->has_overlap_limit && sr->has_achieved && sr->overlap_limit_token_ns > 0
            ? json_real((double)sr->achieved_token_ns / (double)sr->overlap_limit_token_ns)
            : json_null());
    json_object_set_new(
        o, "formula",
        json_string("bound = t_c + max(0, W - R) / B: t_c the warm per-token compute time "
                    "(0 when not given), W the plan's working_set_bytes, R its limit_bytes - "
                    "fixed_bytes (what any policy could keep resident; the plan's margin and "
                    "window are its own choice), B the storage bandwidth (not measured by run: "
                    "given by the caller, as bench measures it); the additive bound: no read "
                    "overlaps the compute. overlap limit = max(t_c, max(0, W - R) / B): every "
                    "read overlaps the compute"));
    return o;
}

static json_t *prefetch_json(const struct rf_stream_prefetch *p)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    json_object_set_new(o, "distance_layers", json_integer(p->distance));
    json_object_set_new(o, "layers_posted", json_integer((json_int_t)p->layers_posted));
    json_object_set_new(o, "layers_prefetched", json_integer((json_int_t)p->layers_prefetched));
    json_object_set_new(o, "requested_bytes", rf_json_u64(true, p->requested_bytes));
    json_object_set_new(o, "failed_calls", json_integer((json_int_t)p->failed_calls));
    json_object_set_new(o, "mechanism",
                        json_string("a helper thread, posted the layer each decode reaches by "
                                    "cb_eval, posix_fadvise(POSIX_FADV_WILLNEED) over the "
                                    "layer's file extent on its own read-only descriptor"));
    return o;
}

static json_t *read_ahead_json(const struct rf_stream_read_ahead *r)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    json_object_set_new(o, "slots", json_integer(r->slots));
    json_object_set_new(o, "slot_bytes", rf_json_u64(true, r->slot_bytes));
    json_object_set_new(o, "units", json_integer(r->n_units));
    json_object_set_new(o, "units_too_large", json_integer(r->units_too_large));
    json_object_set_new(o, "direct", json_boolean(r->direct));
    json_object_set_new(o, "direct_reason", rf_json_str(r->direct_reason));
    json_object_set_new(o, "units_read", rf_json_u64(true, r->units_read));
    json_object_set_new(o, "read_bytes", rf_json_u64(true, r->read_bytes));
    json_object_set_new(o, "read_ns", rf_json_u64(true, r->read_ns));
    json_object_set_new(o, "units_used", rf_json_u64(true, r->units_used));
    json_object_set_new(o, "units_fallback", rf_json_u64(true, r->units_fallback));
    json_object_set_new(o, "units_skipped", rf_json_u64(true, r->units_skipped));
    json_object_set_new(o, "tensors_pointed", rf_json_u64(true, r->tensors_pointed));
    json_object_set_new(o, "tensors_not_mapped", rf_json_u64(true, r->tensors_not_mapped));
    json_object_set_new(o, "waits", rf_json_u64(true, r->waits));
    json_object_set_new(o, "wait_ns", rf_json_u64(true, r->wait_ns));
    json_object_set_new(o, "first_error", json_integer(r->first_error));
    json_object_set_new(o, "mechanism",
                        json_string("helper threads pread the streamed tensors in the order "
                                    "the first decode read them, packed one after the other "
                                    "into a ring of anonymous memory of slots x slot_bytes "
                                    "(O_DIRECT where the filesystem allows it); cb_eval points "
                                    "each weight at its bytes there while the nodes that read "
                                    "it compute and back at the mapping after them and after "
                                    "every decode"));
    return o;
}

/* The expert cache of a MoE model (docs/MOE.md, "The expert policy"). */
static json_t *experts_json(const struct rf_stream_experts *x)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    json_object_set_new(o, "experts_per_layer", json_integer(x->per_layer));
    json_object_set_new(o, "cache_slots", json_integer(x->slots));
    json_object_set_new(o, "cache_budget_bytes", rf_json_u64(true, x->budget_bytes));
    json_object_set_new(o, "cache_resident_bytes", rf_json_u64(true, x->resident_bytes));
    json_object_set_new(o, "cache_resident_provenance",
                        json_string(rf_provenance_name(RF_PROV_EXACT_MEASURED)));
    json_object_set_new(o, "selections", rf_json_u64(true, x->selections));
    json_object_set_new(o, "hits", rf_json_u64(true, x->hits));
    json_object_set_new(o, "misses", rf_json_u64(true, x->misses));
    json_object_set_new(o, "hit_rate",
                        x->selections ? json_real((double)x->hits / (double)x->selections)
                                      : json_null());
    json_object_set_new(o, "bytes_read", rf_json_u64(true, x->bytes_read));
    json_object_set_new(o, "slices_read", rf_json_u64(true, x->slices_read));
    json_object_set_new(o, "tokens", rf_json_u64(true, x->tokens));
    json_object_set_new(o, "bytes_read_per_token",
                        rf_json_u64(x->tokens > 0, x->tokens ? x->bytes_read / x->tokens : 0));
    json_object_set_new(o, "read_wait_ns", rf_json_u64(true, x->read_wait_ns));
    json_object_set_new(o, "evictions", rf_json_u64(true, x->evictions));
    json_object_set_new(o, "tensors_pointed", rf_json_u64(true, x->tensors_pointed));
    json_object_set_new(o, "tensors_not_mapped", rf_json_u64(true, x->tensors_not_mapped));
    json_object_set_new(o, "direct_io", json_boolean(x->direct));
    json_object_set_new(o, "direct_io_reason", rf_json_str(x->direct_reason));
    json_object_set_new(o, "first_error", json_integer(x->first_error));
    json_object_set_new(o, "mechanism",
                        json_string("at each MoE layer's router node (ffn_moe_topk) the experts "
                                    "its rows selected that a per-layer LRU of "
                                    "experts_per_layer does not hold are read, one pread per "
                                    "slice, into anonymous reservations as large as each routed "
                                    "tensor (charged to the cgroup); the least recently used "
                                    "leave (MADV_DONTNEED), a layer's own while it holds more "
                                    "than experts_per_layer, any layer's while more than "
                                    "cache_slots are held; the routed weights point there "
                                    "during the decode, never at the file mapping"));
    return o;
}

/*
 * The decode's reads: achieved bandwidth, CPU time, and the fraction of the
 * window's reads that overlapped compute (1 - wait / read time); without the
 * window no reader of this tree measures it: the streamed pages are read
 * by the decode's own faults (or fadvise, untimed).
 */
static json_t *decode_json(const struct rf_stream_report *sr)
{
    const struct rf_stream_decode *d = &sr->decode;
    bool io = d->on && d->has_io, cpu = d->on && d->has_cpu;
    bool bw = io && d->decode_ns > 0;
    json_t *o = json_object();
    if (!o)
        return NULL;
    json_object_set_new(o, "decode_ns", rf_json_u64(d->on, d->decode_ns));
    json_object_set_new(o, "tokens", rf_json_u64(d->on, d->tokens));
    json_object_set_new(o, "read_bytes", rf_json_u64(io, d->read_bytes));
    json_object_set_new(
        o, "read_bytes_per_token",
        rf_json_u64(io && d->tokens > 0, d->tokens ? d->read_bytes / d->tokens : 0));
    json_object_set_new(o, "major_faults", rf_json_u64(io, d->major_faults));
    json_object_set_new(
        o, "read_bandwidth_bytes_per_s",
        rf_json_u64(bw, bw ? (uint64_t)((double)d->read_bytes * 1e9 / (double)d->decode_ns) : 0));
    json_object_set_new(o, "user_ns", rf_json_u64(cpu, d->user_ns));
    json_object_set_new(o, "system_ns", rf_json_u64(cpu, d->system_ns));
    json_object_set_new(o, "omp_wait_policy", rf_json_str(d->omp_wait_policy));
    json_object_set_new(o, "gomp_spincount", rf_json_str(d->gomp_spincount));
    const struct rf_stream_read_ahead *ra = &sr->read_ahead;
    if (ra->on && ra->read_ns > 0) {
        double f = 1.0 - (double)ra->wait_ns / (double)ra->read_ns;
        json_object_set_new(o, "overlapped_fraction", json_real(f < 0 ? 0 : f));
        json_object_set_new(o, "overlapped_reason", json_null());
    } else {
        json_object_set_new(o, "overlapped_fraction", json_null());
        json_object_set_new(
            o, "overlapped_reason",
            json_string(ra->on ? "the read-ahead window read nothing"
                        : sr->prefetch.on
                            ? "the fadvise read-ahead does not time its reads: not measured"
                            : "no read-ahead thread: the streamed pages are read by the decode "
                              "threads' own page faults, each waited for by the thread that "
                              "faulted (docs/STREAMING.md)"));
    }
    json_object_set_new(
        o, "source",
        json_string("/proc/self/io read_bytes and /proc/self/stat majflt, getrusage(RUSAGE_SELF) "
                    "user and system time, read at the first token and the last; "
                    "read_bandwidth = read_bytes / decode_ns; null: not given by the caller"));
    return o;
}

json_t *rf_stream_report_json(const struct rf_stream_report *sr)
{
    if (!sr)
        return json_null();
    json_t *o = json_object();
    if (!o)
        return NULL;
    json_object_set_new(o, "active", json_boolean(sr->active));
    json_object_set_new(o, "io", io_json(sr));
    json_object_set_new(o, "plan", sr->plan ? plan_json(sr) : json_null());
    json_object_set_new(o, "plan_reason", rf_json_str(sr->plan_reason));
    json_object_set_new(o, "pin", sr->active ? pin_json(sr) : json_null());
    json_object_set_new(o, "bound", sr->active ? bound_json(sr) : json_null());
    json_object_set_new(o, "prefetch",
                        sr->prefetch.on ? prefetch_json(&sr->prefetch) : json_null());
    json_object_set_new(o, "read_ahead",
                        sr->read_ahead.on ? read_ahead_json(&sr->read_ahead) : json_null());
    json_object_set_new(o, "decode", decode_json(sr));
    json_object_set_new(o, "experts", sr->experts.on ? experts_json(&sr->experts) : json_null());
    return o;
}
