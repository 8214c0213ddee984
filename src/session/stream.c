/*
 * The streaming residency policy in the session: the plan made at
 * admission (ramforge/core/streaming.h), the pins (mlock through the native
 * table) before the operation's decode, their undoing before any release
 * boundary, at the operation's end and at rf_session_free, and the
 * report's `streaming` object (storage traffic for every policy; plan,
 * pins and bound under streaming).
 *
 * Pinning is not a release: the spec's release boundaries and the gate are
 * unchanged. The pins are held only between rf_session_stream_pin and the
 * next after-session boundary or the operation's end, so a boundary's
 * release never meets a locked page (MADV_DONTNEED refuses VM_LOCKED).
 */
#include "session_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

static struct ses_stream *stream_of(struct rf_session *s)
{
    return &s->op.stream;
}

void ses_stream_op_free(struct ses_stream *st)
{
    rf_stream_plan_free(&st->plan);
    rf_expert_map_free(&st->experts);
    st->planned = false;
}

void ses_stream_op_open(struct rf_session *s)
{
    struct ses_stream *st = stream_of(s);
    rf_stream_plan_init(&st->plan);
    rf_expert_map_init(&st->experts);
    st->rep.active = s->p.policy == RF_POLICY_STREAMING;
    st->rep.inv = &s->inv;
    st->rep.plan_reason = st->rep.active ? "admission has not run: nothing was planned"
                                         : "the residency policy is not streaming";
    st->has_io_before = s->native->io && s->native->io(s->ud, &st->io_before) == 0;
    if (s->p.storage_bandwidth_bytes_per_s) {
        st->rep.has_bandwidth = true;
        st->rep.bandwidth_bytes_per_s = s->p.storage_bandwidth_bytes_per_s;
    }
    if (s->p.warm_token_ns) {
        st->rep.has_warm_token_ns = true;
        st->rep.warm_token_ns = s->p.warm_token_ns;
    }
    s->op.rep.streaming = &st->rep;
}

/* The room of the level where the working set fits least (or the binding one), bytes. */
static bool limit_of(const struct rf_admission_result *a, uint64_t *room, const char **source)
{
    if (a->thrash && a->has_thrash_level) {
        const struct rf_admission_level_check *c = &a->cgroups[a->thrash_level];
        *room = c->working_set_checked ? c->run_room_bytes : c->high_run_room_bytes;
        *source = "admission: the run room (limit minus the other unreclaimable charges) of the "
                  "cgroup where the working set fits least";
        return true;
    }
    if (a->has_binding && a->cgroups[a->binding].checked) {
        *room = a->cgroups[a->binding].run_room_bytes;
        *source = "admission: the run room of the binding cgroup";
        return true;
    }
    return false;
}

int ses_stream_admit(struct rf_session *s, const struct rf_admission_input *in)
{
    struct ses_stream *st = stream_of(s);
    struct rf_admission_result *a = &s->op.admission;
    struct rf_stream_params p = {0};
    const char *source = NULL;

    if (s->p.policy != RF_POLICY_STREAMING)
        return 0;
    ses_stream_op_free(st);
    st->apply = false;
    st->rep.plan = NULL;
    if (!limit_of(a, &p.limit_bytes, &source) || p.limit_bytes == 0) {
        st->rep.plan_reason = "no enforced memory limit: nothing streams, nothing is pinned";
        return 0;
    }
    if (in->file_in_memory) {
        /* tmpfs, ramfs: the pages are memory already; nothing is read, nothing streams. */
        st->rep.plan_reason = "the model file's pages are memory (tmpfs, ramfs): nothing is "
                              "read from storage, nothing streams, nothing is pinned";
        return 0;
    }
    p.anonymous_bytes = in->anonymous.has ? in->anonymous.bytes : 0;
    p.kv_bytes = in->kv_cache.has ? in->kv_cache.bytes : 0;
    p.scratch_bytes = in->graph_scratch.has ? in->graph_scratch.bytes : 0;
    p.runtime_bytes = in->runtime.has ? in->runtime.bytes : 0;
    p.window_bytes = s->p.stream_window_bytes;
    p.read_ahead_slots = s->p.stream_read_ahead_slots;
    p.margin_bytes = s->p.stream_margin_bytes;
    int rc = 0;
    if (s->model.info.n_expert && p.read_ahead_slots) /* the expert policy (docs/MOE.md) */
        rc = rf_expert_map_build(&s->inv, s->model.info.n_expert, s->model.info.n_expert_used,
                                 &st->experts);
    p.experts = rc == 0 && st->experts.n ? &st->experts : NULL;
    if (rc == 0)
        rc = rf_stream_plan_build(&s->inv, &p, &st->plan);
    if (rc < 0) {
        st->rep.plan_reason = "the streaming plan could not be built (overflow or no memory)";
        return rc;
    }
    st->planned = true;
    st->rep.plan = &st->plan;
    if (p.window_bytes && p.window_bytes < st->plan.min_window_bytes)
        ses_add_warning(s,
                        "streaming: the window is smaller than one layer (plan.min_window_bytes):"
                        " streamed pages may be reclaimed before they are used (a 16 MiB "
                        "window thrashed in docs/STREAMING.md)");
    st->rep.limit_source = source;
    /* the file does not fit beside the fixed part (the page cache cannot hold it whole) */
    const bool file_over =
        s->inv.totals.mapped_virtual_bytes + st->plan.fixed_bytes > p.limit_bytes;
    if (!a->thrash) {
        if (a->cause == RF_ADMIT_CAUSE_NOT_BOUND) {
            st->rep.plan_reason = "not bound: the model's pages are charged to another cgroup "
                                  "(cached before the run) and the limit cannot evict them: "
                                  "nothing streams, the plan is not applied";
            return 0;
        }
        if (st->plan.fits && st->plan.nothing_streams && st->plan.n_ranges > 0 && file_over) {
            /* W fits, the file does not beside the fixed part (repacked weights: anonymous
               copies): reclaim takes the file's pages, W's among them, each read again by a
               fault with its read-around (docs/STREAMING.md): W is pinned, nothing streams */
            st->apply = true;
            st->rep.plan_reason = NULL;
            return 0;
        }
        if (st->plan.fits && st->plan.expert_cache_slots && file_over) {
            /* a MoE model whose token read fits, its file not: the expert policy reads the
               routed slices into its cache, the dense part is pinned or streamed */
            st->apply = true;
            st->rep.plan_reason = NULL;
            return 0;
        }
        /* a MoE model without its cache: the window that carries it is off (no expert map
           was built), or a token's read fits admission and the plan's cache minimum does not */
        const bool off = s->model.info.n_expert && !p.read_ahead_slots;
        if (file_over && (off || (p.experts && !st->plan.fits))) {
            st->rep.plan_reason = off ? RF_STREAM_NO_EXPERT_CACHE_OFF : RF_STREAM_NO_EXPERT_CACHE;
            st->rep.plan_short = true;
            ses_add_warning(s, off ? "streaming: " RF_STREAM_NO_EXPERT_CACHE_OFF
                                   : "streaming: " RF_STREAM_NO_EXPERT_CACHE);
            return 0;
        }
        st->rep.plan_reason = "the working set fits the limit: the plan is not applied";
        return 0;
    }
    if (a->cause != RF_ADMIT_CAUSE_THRASH)
        return 0; /* refused or warned for another cause: the verdict stands */
    if (st->plan.fits) {
        st->apply = true;
        st->rep.plan_reason = NULL;
        a->outcome = RF_ADMIT_WARNING;
        a->refused = false;
        rf_admission_append(
            a,
            "Admitted under --residency-policy streaming: %s (an estimate; the file is "
            "read again each token).",
            st->plan.reason);
    } else {
        const struct rf_admission_level_check *c = &a->cgroups[a->thrash_level];
        uint64_t need;
        bool hard = a->has_thrash_level && c->working_set_checked && !c->working_set_fits;
        /* The margin is the room the kernel's reclaim works in (the pages read now, the page
           tables, the kernel's own charges): a run with less was OOM-killed (issue 36). */
        bool over =
            __builtin_add_overflow(st->plan.fixed_bytes, st->plan.min_window_bytes, &need) ||
            __builtin_add_overflow(need, st->plan.margin_bytes, &need) || need > p.limit_bytes;

        st->rep.plan_reason = "the fixed part and a minimum window do not fit: not applied";
        st->rep.plan_short = true;
        rf_admission_append(a, "Streaming cannot help: %s.", st->plan.reason);
        if (hard && over) {
            /* Under the hard limit the kernel kills, whatever the mode says of thrashing. */
            a->outcome = RF_ADMIT_REJECTED;
            a->cause = RF_ADMIT_CAUSE_HARD_LIMIT;
            a->refused = a->mode != RF_ADMISSION_OFF;
            rf_admission_append(
                a,
                "The fixed part, a minimum window and the margin exceed the %" PRIu64
                " bytes of room under the hard limit of cgroup %s: the kernel would kill the "
                "run, so it is rejected.",
                p.limit_bytes, c->level.dir);
        }
    }
    return 0;
}

bool ses_mapping_locked(struct rf_session *s, uint64_t *out)
{
    struct rf_residency_sample smp;
    memset(&smp, 0, sizeof(smp));
    s->native->sample_mapping(s->ud, RF_MEASURE_MAPPING_SMAPS, &smp);
    *out = smp.mapping_locked_bytes;
    return smp.has_mapping_locked;
}

/*
 * madvise(advice) over ranges r[n]; *owed is set when the call was made
 * (its undoing is owed, whatever each range answered). True when every
 * range accepted it.
 */
static bool advise(struct rf_session *s, const struct rf_file_range *r, size_t n,
                   enum forge_stream_advice advice, bool *owed)
{
    struct forge_pin_result ar;
    if (!s->native->advise_stream || n == 0)
        return false;
    *owed = s->native->advise_stream(s->ud, r, n, advice, &ar) == 0;
    return *owed && ar.first_error == 0;
}

/*
 * The first room_bytes of ranges (whole pages, in their order): *n_out
 * ranges in *out (the caller frees; NULL when none fits).
 */
static int ranges_within(const struct rf_file_range *r, size_t n, uint64_t page_bytes,
                         uint64_t room_bytes, struct rf_file_range **out, size_t *n_out)
{
    uint64_t room_pages = page_bytes ? room_bytes / page_bytes : 0;
    *out = NULL;
    *n_out = 0;
    if (!room_pages || !n)
        return 0;
    if (!(*out = malloc(n * sizeof(**out))))
        return -ENOMEM;
    for (size_t i = 0; i < n && room_pages; i++) {
        struct rf_file_range c = r[i];
        uint64_t k = rf_page_range_pages(c.pages);
        if (k > room_pages)
            c.pages.end_page = c.pages.first_page + room_pages;
        room_pages -= k < room_pages ? k : room_pages;
        (*out)[(*n_out)++] = c;
    }
    return 0;
}

/*
 * After mlock refused the plan's pins whole (res over RLIMIT_MEMLOCK,
 * without CAP_IPC_LOCK): the pins undone, the first RLIMIT_MEMLOCK bytes of
 * them are pinned instead; res and the report say what was. Returns
 * mlock's error of that attempt (0: pinned), or the first one when the
 * limit leaves no page.
 */
static int pin_within_limit(struct rf_session *s, int err, struct forge_pin_result *res)
{
    struct ses_stream *st = stream_of(s);
    struct rf_file_range *part = NULL;
    size_t n = 0;
    struct rlimit rl;
    if ((err != -ENOMEM && err != -EAGAIN) || getrlimit(RLIMIT_MEMLOCK, &rl) < 0 ||
        rl.rlim_cur == RLIM_INFINITY ||
        ranges_within(st->plan.ranges, st->plan.n_ranges, s->inv.page_bytes, rl.rlim_cur, &part,
                      &n) < 0 ||
        n == 0) {
        free(part);
        return err;
    }
    ses_stream_unpin(s, "pin_over_memlock_limit");
    memset(res, 0, sizeof(*res));
    int rc = s->native->lock(s->ud, part, n, res);
    free(part);
    if (rc == 0)
        st->held = true;
    st->rep.pin_accepted_bytes = res->accepted_bytes;
    st->rep.pin_ns += res->elapsed_ns;
    err = rc < 0 ? rc : res->first_error;
    st->rep.partial = err == 0;
    st->rep.memlock_limit_bytes = err == 0 ? (uint64_t)rl.rlim_cur : 0;
    return err;
}

int rf_session_stream_pin(struct rf_session *s, bool *pinned)
{
    if (pinned)
        *pinned = false;
    if (!s)
        return -EINVAL;
    ses_op_open(s);
    struct ses_stream *st = stream_of(s);
    if (s->p.policy != RF_POLICY_STREAMING || !st->planned || st->held || st->rows_advised)
        return 0;
    if (!st->apply || st->plan.n_ranges == 0) {
        /* nothing to pin (the working set fits), yet the limit binds: a row of token_embd
           read by a fault would read around it (read_ahead_kb) every token in the full
           cgroup; undone as the pins are */
        st->rep.rows_random = advise(s, st->plan.rows_ranges, st->plan.n_rows_ranges,
                                     FORGE_STREAM_RANDOM, &st->rows_advised);
        return 0;
    }
    struct forge_pin_result res;
    memset(&res, 0, sizeof(res));
    int rc = s->native->lock ? s->native->lock(s->ud, st->plan.ranges, st->plan.n_ranges, &res)
                             : -ENOSYS;
    st->rep.pin_attempted = rc == 0;
    st->rep.pin_requested_bytes = st->plan.pinned_bytes;
    st->rep.pin_accepted_bytes = res.accepted_bytes;
    st->rep.pin_ns = res.elapsed_ns;
    int err = rc < 0 ? rc : res.first_error;
    if (rc == 0)
        st->held = true; /* something may be locked: munlock is owed either way */
    if (err && rc == 0)
        err = pin_within_limit(s, err, &res);
    if (err) {
        st->rep.pin_error = err;
        st->rep.pin_error_reason = forge_pin_error_reason(err);
        st->rep.fallback = true;
        ses_stream_unpin(s, "pin_refused");
        ses_add_warning(s, "streaming: mlock was refused, the pins were undone and the run "
                           "streams every weight through the page cache (see streaming.pin)");
        return 0;
    }
    st->rep.pinned = true;
    st->rep.has_locked = ses_mapping_locked(s, &st->rep.locked_bytes);
    if (st->rep.partial)
        ses_add_warning(s, "streaming: RLIMIT_MEMLOCK is below the plan's pins: only its first "
                           "bytes are pinned (streaming.pin.partial, memlock_limit_bytes, "
                           "accepted_bytes), the rest streams through the page cache");
    const struct rf_stream_plan *pl = &st->plan;
    if (s->p.stream_sequential)
        st->rep.sequential = advise(s, pl->stream_ranges, pl->n_stream_ranges,
                                    FORGE_STREAM_SEQUENTIAL, &st->seq_advised);
    st->rep.rows_random =
        advise(s, pl->rows_ranges, pl->n_rows_ranges, FORGE_STREAM_RANDOM, &st->rows_advised);
    if (s->p.stream_hugepage) {
        st->rep.hugepage = advise(s, pl->stream_ranges, pl->n_stream_ranges, FORGE_STREAM_HUGEPAGE,
                                  &st->huge_advised);
        st->rep.has_thp_enabled =
            s->native->thp_enabled &&
            s->native->thp_enabled(s->ud, st->rep.thp_enabled, sizeof(st->rep.thp_enabled)) == 0;
    }
    if (pinned)
        *pinned = true;
    return 0;
}

void ses_stream_unpin(struct rf_session *s, const char *at)
{
    struct ses_stream *st = stream_of(s);
    struct forge_pin_result res;
    if (st->rows_advised) /* with the pins, or alone when nothing was pinned */
        s->native->advise_stream(s->ud, st->plan.rows_ranges, st->plan.n_rows_ranges,
                                 FORGE_STREAM_NORMAL, &res);
    st->rows_advised = false;
    if (!st->held)
        return;
    if (s->native->unlock)
        s->native->unlock(s->ud, st->plan.ranges, st->plan.n_ranges, &res);
    if (st->seq_advised)
        s->native->advise_stream(s->ud, st->plan.stream_ranges, st->plan.n_stream_ranges,
                                 FORGE_STREAM_NORMAL, &res);
    if (st->huge_advised)
        s->native->advise_stream(s->ud, st->plan.stream_ranges, st->plan.n_stream_ranges,
                                 FORGE_STREAM_NOHUGEPAGE, &res);
    st->seq_advised = false;
    st->huge_advised = false;
    st->held = false;
    st->rep.unpinned_at = at;
}

int rf_session_stream_prefetch(struct rf_session *s, const struct rf_stream_prefetch *p)
{
    if (!s || !p)
        return -EINVAL;
    ses_op_open(s);
    stream_of(s)->rep.prefetch = *p;
    return 0;
}

int rf_session_stream_read_ahead(struct rf_session *s, const struct rf_stream_read_ahead *r)
{
    if (!s || !r)
        return -EINVAL;
    ses_op_open(s);
    stream_of(s)->rep.read_ahead = *r;
    return 0;
}

uint32_t ses_stream_expert_slots(struct rf_session *s, uint32_t *per_layer)
{
    const struct ses_stream *st = stream_of(s);
    bool on = st->planned && st->apply && !st->rep.fallback;
    *per_layer = on ? st->plan.expert_cache_per_layer : 0;
    return on ? st->plan.expert_cache_slots : 0;
}

const struct rf_expert_map *ses_stream_experts(struct rf_session *s)
{
    return &stream_of(s)->experts;
}

/* Adds x's figures to o (sums; c and the budget replaced, the direct flag and-ed). */
static void experts_add(struct rf_stream_experts *o, const struct rf_stream_experts *x,
                        uint64_t budget_bytes)
{
    bool first = !o->on;
    o->on = true;
    o->per_layer = x->per_layer;
    o->slots = x->slots;
    o->budget_bytes = budget_bytes;
    o->resident_bytes = x->resident_bytes;
    o->selections += x->selections;
    o->hits += x->hits;
    o->misses += x->misses;
    o->bytes_read += x->bytes_read;
    o->slices_read += x->slices_read;
    o->tokens += x->tokens;
    o->read_wait_ns += x->read_wait_ns;
    o->evictions += x->evictions;
    o->tensors_pointed += x->tensors_pointed;
    o->tensors_not_mapped += x->tensors_not_mapped;
    o->direct = (first || o->direct) && x->direct;
    o->direct_reason = x->direct_reason ? x->direct_reason : o->direct_reason;
    o->first_error = o->first_error ? o->first_error : x->first_error;
}

void ses_stream_experts_add(struct rf_session *s, const struct rf_stream_experts *x)
{
    ses_op_open(s);
    struct ses_stream *st = stream_of(s);
    experts_add(&st->rep.experts, x, st->plan.expert_cache_bytes);
    experts_add(&s->experts_total, x, st->plan.expert_cache_bytes);
    st->rep.experts_total = s->experts_total;
}

int rf_session_stream_decode(struct rf_session *s, const struct rf_stream_decode *d)
{
    if (!s || !d)
        return -EINVAL;
    ses_op_open(s);
    stream_of(s)->rep.decode = *d;
    stream_of(s)->rep.decode.on = true;
    return 0;
}

/* a - b when both are known and a >= b. */
static bool delta(bool has_a, uint64_t a, bool has_b, uint64_t b, uint64_t *out)
{
    if (!has_a || !has_b || a < b)
        return false;
    *out = a - b;
    return true;
}

void ses_stream_op_end(struct rf_session *s, const struct rf_operation_output *out)
{
    struct ses_stream *st = stream_of(s);
    struct rf_stream_report *r = &st->rep;
    struct rfsys_io now;

    ses_stream_unpin(s, "operation_end");
    if (st->has_io_before && s->native->io && s->native->io(s->ud, &now) == 0) {
        r->has_read_bytes = delta(now.has_read_bytes, now.read_bytes, st->io_before.has_read_bytes,
                                  st->io_before.read_bytes, &r->read_bytes);
        r->has_major_faults =
            delta(now.has_major_faults, now.major_faults, st->io_before.has_major_faults,
                  st->io_before.major_faults, &r->major_faults);
    }
    /* the first token comes from the prompt: decode_ns covers n_tokens - 1 decodes */
    if (out && out->decode_ns && out->n_tokens > 1) {
        r->has_achieved = true;
        r->achieved_token_ns = out->decode_ns / (out->n_tokens - 1);
    }
    if (r->active && st->planned && r->has_bandwidth) {
        /* t_c + max(0, W - R) / B, ns, R = limit - fixed; (W - R) * 1e9 checked */
        const struct rf_stream_plan *pl = &st->plan;
        uint64_t ns,
            r_bytes = pl->limit_bytes > pl->fixed_bytes ? pl->limit_bytes - pl->fixed_bytes : 0;
        uint64_t excess = pl->working_set_bytes > r_bytes ? pl->working_set_bytes - r_bytes : 0;
        if (!__builtin_mul_overflow(excess, (uint64_t)1000000000, &ns)) {
            ns /= r->bandwidth_bytes_per_s; /* the streamed part's read time */
            /* reads hidden behind the compute, or the compute behind the reads */
            r->has_overlap_limit = true;
            r->overlap_limit_token_ns = ns > r->warm_token_ns ? ns : r->warm_token_ns;
            r->has_bound = !__builtin_add_overflow(ns, r->warm_token_ns, &r->bound_token_ns);
        }
    }
}
