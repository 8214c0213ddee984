/*
 * Admission: one decision per run over the cgroup hierarchy, the decode
 * working set and the soft target, with every sum checked and every
 * unknown figure leading to Unknown rather than to a guess. See
 * admission.h for the arithmetic and the order of the rules.
 *
 * The estimates it is fed (reclaimable bytes, file working set, KV cache,
 * context size) are admission_estimate.c; the names, admission_names.c.
 */
#include "ramforge/core/admission.h"
#include "admission_internal.h"
#include "ramforge/core/streaming.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RF_ANON_NOTE                                                                               \
    "page release may not address it: the excess is likely anonymous (KV cache, graph scratch, "   \
    "runtime, repacked copies)"

/* Copies src (NULL: "") into dst of size bytes, truncating, NUL-terminated. */
static void copy_str(char *dst, size_t size, const char *src)
{
    size_t len = src ? strnlen(src, size - 1) : 0;

    if (len)
        memcpy(dst, src, len);
    dst[len] = '\0';
}

/* Appends a clause to the reason, whole or not at all (rf_admission_reason_add). */
__attribute__((format(printf, 2, 3))) static void note(struct rf_admission_result *out,
                                                       const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    rf_admission_reason_add(out, false, fmt, ap);
    va_end(ap);
}

/* Sets the outcome and cause and starts the reason (after the pre-load prefix). */
__attribute__((format(printf, 4, 5))) static void decide(struct rf_admission_result *out,
                                                         enum rf_admission_outcome o,
                                                         enum rf_admission_cause c, const char *fmt,
                                                         ...)
{
    va_list ap;

    out->outcome = o;
    out->cause = c;
    out->reason[0] = '\0';
    out->reason_cut = false;
    if (out->phase == RF_ADMISSION_PRE_LOAD)
        note(out, "before the load, from GGUF-header estimates: ");
    va_start(ap, fmt);
    rf_admission_reason_add(out, false, fmt, ap);
    va_end(ap);
}

/* Records one scalar input (name static). */
static void record(struct rf_admission_result *out, const char *name,
                   const struct rf_admission_figure *f)
{
    struct rf_admission_record *r;

    if (out->n_records >= RF_ADMISSION_MAX_RECORDS)
        return;
    r = &out->records[out->n_records++];
    r->name = name;
    r->has = f->has;
    r->bytes = f->has ? f->bytes : 0;
    r->provenance = f->has ? f->provenance : RF_PROV_UNKNOWN;
    copy_str(r->source, sizeof(r->source), f->source);
}

/* Adds a component name to the unknown list when it is not there and there is room. */
static void add_unknown(struct rf_admission_result *out, const char *name)
{
    for (size_t k = 0; k < out->n_unknown; k++)
        if (strcmp(out->unknown_components[k], name) == 0)
            return;
    if (out->n_unknown < RF_ADMISSION_MAX_UNKNOWN)
        copy_str(out->unknown_components[out->n_unknown++], RF_ADMISSION_NAME_MAX, name);
}

/*
 * Whether an excess over a bound is likely anonymous: the projected
 * anonymous memory alone exceeds the room, or release cannot cover it.
 */
static bool likely_anonymous(const struct rf_admission_input *in,
                             const struct rf_admission_result *out, uint64_t excess,
                             uint64_t anon_room)
{
    if (out->has_anonymous && out->anonymous_bytes > anon_room)
        return true;
    if (in->reclaimable.has)
        return in->reclaimable.bytes < excess;
    return out->growth_bytes >= excess; /* the growth is anonymous */
}

/* "SOURCE: ERROR" of a figure that could not be had, or "not read" without a source. */
static const char *why_unknown(const struct rf_cgroup_figure *f, char *buf, size_t size)
{
    if (!f->source[0])
        return "not read";
    snprintf(buf, size, "%s: %s", f->source,
             f->error ? rf_cgroup_error_text(f->error) : "not read");
    return buf;
}

/* "; N bytes of reclaimable file cache of DIR count as headroom: reclaimable, not free (SRC)". */
static void note_reclaimable(struct rf_admission_result *out,
                             const struct rf_admission_level_check *c)
{
    if (!c->checked && !c->high_checked)
        return;
    if (c->level.reclaimable_file.has) {
        if (c->reclaimable_bytes > 0)
            note(out,
                 "; %" PRIu64 " bytes of clean unmapped file cache of %s (active and inactive "
                 "lists) count as headroom: reclaimable, not free (%s)",
                 c->reclaimable_bytes, c->level.dir, c->level.reclaimable_file.source);
    } else {
        char why[RF_CGROUP_PATH_MAX + 64];

        note(out, "; the reclaimable file cache of %s is unknown (%s): none counted as reclaimable",
             c->level.dir, why_unknown(&c->level.reclaimable_file, why, sizeof(why)));
    }
}

/* The excess note of a bound. */
static void note_excess(const struct rf_admission_input *in, struct rf_admission_result *out,
                        uint64_t excess)
{
    if (out->excess_likely_anonymous)
        note(out, "; " RF_ANON_NOTE);
    else if (in->reclaimable.has)
        note(out, "; within the eligible-reclaimable estimate of %" PRIu64 " bytes",
             in->reclaimable.bytes);
    else
        note(out, "; no eligible-reclaimable estimate is available for the %" PRIu64 " bytes",
             excess);
}

/* The index of the checked level with the least value of the key, nearest on ties. */
static bool least(const struct rf_admission_result *out, bool run_room, size_t *at)
{
    bool found = false;

    for (size_t i = 0; i < out->n_cgroups; i++) {
        const struct rf_admission_level_check *c = &out->cgroups[i];
        uint64_t v = run_room ? c->run_room_bytes : c->room_bytes;

        if (!c->checked || (run_room && (!c->working_set_checked || c->working_set_unbound)))
            continue;
        if (!found ||
            v < (run_room ? out->cgroups[*at].run_room_bytes : out->cgroups[*at].room_bytes)) {
            *at = i;
            found = true;
        }
    }
    return found;
}

/* The thrash sentence for the working set against room at a level (limit named by kind). */
static void thrash_sentence(const struct rf_admission_input *in, struct rf_admission_result *out,
                            enum rf_admission_outcome o, const struct rf_admission_level_check *c,
                            const char *kind, uint64_t limit, uint64_t room)
{
    uint64_t fit = rf_admission_sat_sub(room, out->anonymous_bytes);

    out->has_working_set_fit = true;
    out->working_set_fit_bytes = fit;
    if (in->streaming) /* re-reading what does not fit is what streaming does: no "thrash" */
        decide(out, o, RF_ADMIT_CAUSE_THRASH,
               "streams: %" PRIu64 " bytes of weights are read from the file each token and "
               "%" PRIu64 " bytes of them stay cached under the %s of %" PRIu64
               " bytes of cgroup %s (beside %" PRIu64 " bytes of anonymous memory and %" PRIu64
               " bytes of other unreclaimable charges); the rest is re-read from storage each "
               "token; a larger limit makes the decode faster",
               in->file_working_set.bytes, fit, kind, limit, c->level.dir, out->anonymous_bytes,
               rf_admission_sat_sub(limit, room));
    else
        decide(out, o, RF_ADMIT_CAUSE_THRASH,
               "will thrash: %" PRIu64 " bytes of weights are read from the file each token and "
               "only %" PRIu64 " bytes fit under the %s of %" PRIu64 " bytes of cgroup %s (beside "
               "%" PRIu64 " bytes of anonymous memory and %" PRIu64
               " bytes of other unreclaimable charges); ways out: a larger limit, a smaller "
               "model, or --residency-policy streaming (pins what fits, streams the rest)",
               in->file_working_set.bytes, fit, kind, limit, c->level.dir, out->anonymous_bytes,
               rf_admission_sat_sub(limit, room));
}

/* Fills lock_note when a requested lock did not take (fully). */
static void lock_check(const struct rf_admission_input *in, struct rf_admission_result *out)
{
    if (!in->mlock_requested || !in->locked.has)
        return;
    if (in->locked.bytes == 0)
        snprintf(out->lock_note, sizeof(out->lock_note),
                 "--mlock was requested but no page of the model mapping is locked (%s): the "
                 "kernel refused the lock (RLIMIT_MEMLOCK, or no CAP_IPC_LOCK)",
                 in->locked.source ? in->locked.source : "smaps Locked");
    else if (in->mapping_rss.has && in->locked.bytes < in->mapping_rss.bytes)
        snprintf(out->lock_note, sizeof(out->lock_note),
                 "--mlock was requested but only %" PRIu64 " of the %" PRIu64
                 " resident bytes of the model mapping are locked (%s)",
                 in->locked.bytes, in->mapping_rss.bytes,
                 in->locked.source ? in->locked.source : "smaps Locked");
}

static int check_args(const struct rf_admission_input *in)
{
    if (!in || in->n_unknown > RF_ADMISSION_MAX_UNKNOWN || in->n_cgroups > RF_CGROUP_MAX_LEVELS ||
        (!in->cgroups && in->n_cgroups) || !rf_admission_mode_name(in->mode) ||
        !rf_admission_phase_name(in->phase))
        return -EINVAL;
    for (size_t k = 0; k < in->n_unknown; k++)
        if (!in->unknown_components[k])
            return -EINVAL;
    if (in->has_target && in->reserve_bytes >= in->target_bytes)
        return -EINVAL;
    return 0;
}

/* Copies the inputs into out: records, unknowns, levels, soft target. */
static void copy_inputs(const struct rf_admission_input *in, struct rf_admission_result *out)
{
    bool pre = in->phase == RF_ADMISSION_PRE_LOAD;

    out->mode = in->mode;
    out->phase = in->phase;
    out->file_in_memory = in->file_in_memory;
    out->streaming = in->streaming;
    out->mlock_requested = in->mlock_requested;
    record(out, "process_rss", &in->process_rss);
    record(out, "anonymous", &in->anonymous);
    if (!pre)
        record(out, "mapping_rss", &in->mapping_rss);
    record(out, "locked", &in->locked);
    record(out, "kv_cache", &in->kv_cache);
    record(out, "graph_scratch", &in->graph_scratch);
    record(out, "runtime", &in->runtime);
    if (pre) {
        record(out, "mapped_weights", &in->mapped_weights);
        record(out, "repacked_weights", &in->repacked_weights);
        record(out, "model_cached", &in->model_cached);
        record(out, "loader_growth", &in->loader_growth);
        record(out, "page_tables", &in->page_tables);
        if (in->load_release.has)
            record(out, "load_release", &in->load_release);
    }
    record(out, "file_working_set", &in->file_working_set);
    record(out, "reclaimable", &in->reclaimable);
    for (size_t k = 0; k < in->n_unknown; k++)
        add_unknown(out, in->unknown_components[k]);
    if (!in->graph_scratch.has)
        add_unknown(out, "GraphScratch");
    if (!in->runtime.has)
        add_unknown(out, "Runtime");
    if (!in->file_working_set.has)
        add_unknown(out, "FileWorkingSet");
    if (pre && !in->loader_growth.has)
        add_unknown(out, "LoaderGrowth");
    if (pre && !in->page_tables.has)
        add_unknown(out, "PageTables");
    out->has_reclaimable = in->reclaimable.has;
    out->reclaimable_bytes = in->reclaimable.has ? in->reclaimable.bytes : 0;
    if (in->has_target) {
        out->has_soft_target = true;
        out->soft_target_bytes = in->target_bytes - in->reserve_bytes; /* reserve < target */
    }
    if (in->host)
        out->host = *in->host;
    out->n_cgroups = in->n_cgroups;
    out->cgroups_truncated = in->cgroups_truncated;
    for (size_t i = 0; i < in->n_cgroups; i++) {
        out->cgroups[i].level = in->cgroups[i];
        out->cgroups[i].level.dir[RF_CGROUP_PATH_MAX - 1] = '\0';
    }
}

/* The excess classification (rule order: hard, memory.high, soft target). */
static void classify_excess(const struct rf_admission_input *in, struct rf_admission_result *out)
{
    if (out->has_hard_excess && out->host_binding) {
        out->excess_over = RF_ADMIT_BOUND_HARD_LIMIT;
        out->excess_likely_anonymous =
            likely_anonymous(in, out, out->hard_excess_bytes,
                             out->host_room_bytes + (in->anonymous.has ? in->anonymous.bytes : 0));
    } else if (out->has_hard_excess) {
        const struct rf_admission_level_check *c = &out->cgroups[out->binding];

        out->excess_over = RF_ADMIT_BOUND_HARD_LIMIT;
        out->excess_likely_anonymous =
            likely_anonymous(in, out, out->hard_excess_bytes, c->run_room_bytes);
    } else if (out->has_high_excess) {
        out->excess_over = RF_ADMIT_BOUND_SOFT_LIMIT;
        out->excess_likely_anonymous = likely_anonymous(
            in, out, out->high_excess_bytes, out->cgroups[out->high_level].high_run_room_bytes);
    } else if (out->has_excess) {
        out->excess_over = RF_ADMIT_BOUND_SOFT_TARGET;
        out->excess_likely_anonymous =
            likely_anonymous(in, out, out->excess_bytes, out->soft_target_bytes);
    }
}

/* The first enforced level whose usage is unknown; false when none. */
static bool unknown_usage(const struct rf_admission_result *out, size_t *at)
{
    for (size_t i = 0; i < out->n_cgroups; i++) {
        const struct rf_admission_level_check *c = &out->cgroups[i];

        if (c->enforced && !c->checked) {
            *at = i;
            return true;
        }
    }
    return false;
}

/* Rules 6-8 once nothing harder applied. */
static void decide_soft(const struct rf_admission_input *in, struct rf_admission_result *out)
{
    size_t high_at = 0;
    bool high_over = false, high_thrash = false;

    for (size_t i = 0; i < out->n_cgroups; i++) {
        const struct rf_admission_level_check *c = &out->cgroups[i];

        if (!c->high_checked)
            continue;
        if (!c->high_fits &&
            (!high_over || c->projected_bytes - c->level.high.bytes > out->high_excess_bytes)) {
            high_over = true;
            out->has_high_excess = true;
            out->high_excess_bytes = c->projected_bytes - c->level.high.bytes;
            out->high_level = i;
            high_at = i;
        }
        if (!c->high_working_set_fits && !high_over && !high_thrash) {
            high_thrash = true;
            high_at = i;
        }
    }
    classify_excess(in, out);
    if (high_over) {
        const struct rf_admission_level_check *c = &out->cgroups[high_at];

        decide(out, RF_ADMIT_WARNING, RF_ADMIT_CAUSE_SOFT_LIMIT,
               "the projected charge of %" PRIu64 " bytes exceeds the soft limit (memory.high) of "
               "%" PRIu64 " bytes of cgroup %s by %" PRIu64
               " bytes: the kernel throttles and reclaims above it",
               c->projected_bytes, c->level.high.bytes, c->level.dir, out->high_excess_bytes);
        note_excess(in, out, out->high_excess_bytes);
        note_reclaimable(out, c);
        return;
    }
    if (high_thrash) {
        const struct rf_admission_level_check *c = &out->cgroups[high_at];

        out->thrash = true;
        out->has_thrash_level = true;
        out->thrash_level = high_at;
        thrash_sentence(in, out, RF_ADMIT_WARNING, c, "soft limit (memory.high)",
                        c->level.high.bytes, c->high_run_room_bytes);
        note_reclaimable(out, c);
        return;
    }
    if (out->has_excess) {
        decide(out, RF_ADMIT_WARNING, RF_ADMIT_CAUSE_SOFT_TARGET,
               "the projected process memory of %" PRIu64
               " bytes exceeds the soft target of %" PRIu64 " bytes by %" PRIu64 " bytes",
               out->request_bytes, out->soft_target_bytes, out->excess_bytes);
        note_excess(in, out, out->excess_bytes);
        return;
    }
    if (out->has_binding) {
        const struct rf_admission_level_check *c = &out->cgroups[out->binding];

        decide(out, RF_ADMIT_ADMITTED, RF_ADMIT_CAUSE_FITS,
               "the projected charge of %" PRIu64 " bytes fits the hard limit of %" PRIu64
               " bytes of cgroup %s (the binding one: least room, %" PRIu64 " bytes)",
               c->projected_bytes, c->level.limit.bytes, c->level.dir, c->room_bytes);
        note_reclaimable(out, c);
        if (in->file_in_memory)
            note(out, "; the decode's working set was not compared: %s", in->file_in_memory);
    } else if (out->host_binding) {
        char host[RF_ADMISSION_REASON_MAX];

        rf_admission_host_sentence(out, host, sizeof(host));
        decide(out, RF_ADMIT_ADMITTED, RF_ADMIT_CAUSE_FITS, "%s%s", host,
               out->n_cgroups ? "" : " (no cgroup memory controller was found)");
    } else {
        decide(out, RF_ADMIT_ADMITTED, RF_ADMIT_CAUSE_FITS, "%s",
               out->n_cgroups ? "no cgroup of the hierarchy enforces a hard limit"
                              : "no cgroup memory controller was found");
    }
    if (out->has_soft_target)
        note(out,
             "; the projected process memory of %" PRIu64 " bytes fits the soft target of %" PRIu64
             " bytes",
             out->request_bytes, out->soft_target_bytes);
    else
        note(out, "; no target was set");
}

/* Sets refused from the mode and the outcome (see the table in admission.h). */
static void set_refused(struct rf_admission_result *out)
{
    if (out->mode == RF_ADMISSION_ENFORCE)
        out->refused = out->outcome == RF_ADMIT_REJECTED || out->outcome == RF_ADMIT_UNKNOWN;
    else if (out->mode == RF_ADMISSION_WARN)
        out->refused = out->outcome == RF_ADMIT_REJECTED;
}

/* Rules 2-8 once the request is known. */
static void decide_known(const struct rf_admission_input *in, struct rf_admission_result *out)
{
    uint64_t with_reserve;
    size_t at = 0;
    bool host_unknown = false;

    if (out->has_soft_target && out->request_bytes > out->soft_target_bytes) {
        out->has_excess = true;
        out->excess_bytes = out->request_bytes - out->soft_target_bytes;
    }
    if (__builtin_add_overflow(out->request_bytes, in->reserve_bytes, &with_reserve)) {
        decide(out, RF_ADMIT_REJECTED, RF_ADMIT_CAUSE_OVERFLOW,
               "the projected process memory of %" PRIu64
               " bytes plus the safety reserve of %" PRIu64 " bytes overflows 64 bits",
               out->request_bytes, in->reserve_bytes);
        return;
    }
    for (size_t i = 0; i < out->n_cgroups; i++) {
        if (!rf_admission_check_level(in, out, &out->cgroups[i])) {
            decide(out, RF_ADMIT_REJECTED, RF_ADMIT_CAUSE_OVERFLOW,
                   "the projected charge of cgroup %s overflows 64 bits",
                   out->cgroups[i].level.dir);
            return;
        }
        if (out->cgroups[i].checked)
            out->hard_limit_checked = true;
    }
    if (least(out, false, &at)) {
        const struct rf_admission_level_check *c = &out->cgroups[at];

        out->has_binding = true;
        out->binding = at;
        out->has_projected_charge = true;
        out->projected_charge_bytes = c->projected_bytes;
        copy_str(out->hard_limit_source, sizeof(out->hard_limit_source), c->level.limit.source);
        if (!c->fits) {
            out->has_hard_excess = true;
            out->hard_excess_bytes = c->projected_bytes - c->level.limit.bytes;
        }
    }
    if (!out->has_binding && !unknown_usage(out, &at) && !out->cgroups_truncated)
        host_unknown = !rf_admission_check_host(in, out);
    if (least(out, true, &at)) {
        rf_admission_experts_figures(in, out, &out->cgroups[at]); /* a MoE model's */
        if (!out->cgroups[at].working_set_fits) {
            out->thrash = true;
            out->has_thrash_level = true;
            out->thrash_level = at;
        }
    }
    for (size_t i = out->n_cgroups; i-- > 0;)
        if (out->cgroups[i].working_set_unbound) {
            out->has_unbound = true;
            out->unbound_level = i;
        }

    /* 3. the charge over a hard limit: the host's when no cgroup binds */
    if (out->has_hard_excess && out->host_binding) {
        char host[RF_ADMISSION_REASON_MAX];

        classify_excess(in, out);
        rf_admission_host_sentence(out, host, sizeof(host));
        decide(out, RF_ADMIT_REJECTED, RF_ADMIT_CAUSE_HARD_LIMIT, "%s", host);
        note_excess(in, out, out->hard_excess_bytes);
        return;
    }
    if (out->has_hard_excess) {
        const struct rf_admission_level_check *c = &out->cgroups[out->binding];

        classify_excess(in, out);
        decide(out, RF_ADMIT_REJECTED, RF_ADMIT_CAUSE_HARD_LIMIT,
               "the projected charge of %" PRIu64 " bytes exceeds the hard limit of %" PRIu64
               " bytes of cgroup %s by %" PRIu64 " bytes (usage %" PRIu64
               " bytes - reclaimable %" PRIu64 " bytes + growth %" PRIu64 " bytes)",
               c->projected_bytes, c->level.limit.bytes, c->level.dir, out->hard_excess_bytes,
               c->level.usage.bytes, c->reclaimable_bytes, out->growth_bytes);
        note_excess(in, out, out->hard_excess_bytes);
        note_reclaimable(out, c);
        return;
    }
    /* 4. an enforced limit that cannot be compared */
    if (unknown_usage(out, &at)) {
        const struct rf_cgroup_level *l = &out->cgroups[at].level;
        char why[RF_CGROUP_PATH_MAX + 64];

        classify_excess(in, out);
        decide(out, RF_ADMIT_UNKNOWN, RF_ADMIT_CAUSE_UNKNOWN,
               "the hard limit of %" PRIu64 " bytes (%s) is enforced but the usage of cgroup %s "
               "is unknown (%s), so the run is not admitted",
               l->limit.bytes, l->limit.source, l->dir, why_unknown(&l->usage, why, sizeof(why)));
        return;
    }
    if (out->cgroups_truncated) {
        classify_excess(in, out);
        decide(out, RF_ADMIT_UNKNOWN, RF_ADMIT_CAUSE_UNKNOWN,
               "the cgroup hierarchy has more than %d levels: the limits above the levels read "
               "are unknown, so the run is not admitted",
               RF_CGROUP_MAX_LEVELS);
        return;
    }
    /* 4b. no cgroup binds and the host's memory is unknown */
    if (host_unknown) {
        classify_excess(in, out);
        decide(out, RF_ADMIT_UNKNOWN, RF_ADMIT_CAUSE_UNKNOWN,
               "no cgroup of the hierarchy enforces a hard limit and the host's memory is unknown "
               "(%s), so the run is not admitted",
               out->host_source);
        return;
    }
    /* 5. the decode working set under a hard limit */
    if (out->thrash) {
        const struct rf_admission_level_check *c = &out->cgroups[out->thrash_level];

        classify_excess(in, out);
        if (out->has_experts && !out->expert_cache_min) { /* the dense part (unless it
                                                             streams), the anonymous memory, k
                                                             experts a layer */
            rf_admission_experts_refuse(
                in, out, in->mode == RF_ADMISSION_ENFORCE ? RF_ADMIT_REJECTED : RF_ADMIT_WARNING,
                c);
            note_reclaimable(out, c);
            return;
        }
        thrash_sentence(in, out,
                        in->mode == RF_ADMISSION_ENFORCE ? RF_ADMIT_REJECTED : RF_ADMIT_WARNING, c,
                        "hard limit", c->level.limit.bytes, c->run_room_bytes);
        if (!in->streaming && out->working_set_fit_bytes < RF_ADMIT_MIN_WINDOW_BYTES) {
            /* Not even a minimum window of weights fits: the kernel kills, it does not thrash
               (under streaming the plan's fixed part and minimum window decide, stream.c). */
            out->outcome = RF_ADMIT_REJECTED;
            out->cause = RF_ADMIT_CAUSE_HARD_LIMIT;
            note(out,
                 ". Less than a minimum window of %llu bytes of weights fits beside the anonymous "
                 "memory: the kernel would kill the run, so it is rejected",
                 (unsigned long long)RF_ADMIT_MIN_WINDOW_BYTES);
        }
        note_reclaimable(out, c);
        if (out->has_experts) /* streaming with the dense part out of the window's room */
            rf_admission_experts_note(out);
        return;
    }
    if (out->has_unbound) /* 5b. */
        rf_admission_not_bound(in, out);
    else
        decide_soft(in, out);
    if (out->has_experts)
        rf_admission_experts_note(out);
}

int rf_admission_decide(const struct rf_admission_input *in, struct rf_admission_result *out)
{
    const char *missing;

    if (!out)
        return -EINVAL;
    memset(out, 0, sizeof(*out));
    if (check_args(in) < 0)
        return -EINVAL;
    copy_inputs(in, out);
    lock_check(in, out);

    missing = rf_admission_project(in, out);
    if (missing && strcmp(missing, "overflow") == 0) {
        decide(out, RF_ADMIT_REJECTED, RF_ADMIT_CAUSE_OVERFLOW,
               "the projected memory of the run overflows 64 bits");
    } else if (missing) {
        out->has_request = out->has_growth = out->has_anonymous = out->has_working_set = false;
        for (size_t i = 0; i < out->n_cgroups; i++)
            out->cgroups[i].enforced = rf_cgroup_level_enforced(&out->cgroups[i].level);
        decide(out, RF_ADMIT_UNKNOWN, RF_ADMIT_CAUSE_UNKNOWN,
               "the run's memory request could not be computed (%s), so it is not admitted",
               missing);
    } else {
        decide_known(in, out);
    }
    set_refused(out);
    return 0;
}
