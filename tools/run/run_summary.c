/*
 * ramforge run: the answer first. The opening lines of the human report:
 * where the process's memory went at the end of the run (weights mapped and
 * resident, repacked copies, the session's KV cache and scratch, the rest)
 * against the binding cgroup limit and the room left; for a releasing
 * policy, before -> after and whether the cgroup charge moved; the
 * verify session's verdict; the admission outcome. IEC units throughout.
 * And which report warnings hold for every run (they are documented in
 * docs/guide/report.md and ramforge(1), and printed only with --verbose).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/cli.h"
#include "run.h"

/* Warnings that are true of every run of a kind: documented, not repeated on each run. */
static const char *const general_warnings[] = {
    "FileBackedResident is this process's mapping RSS",
    "the ledger is sampled after the session was dropped",
    "Runtime is unknown:",
    "a release request is not reclamation",
    "some weights are read from anonymous repacked copies",
};

void run_print_admission(const struct rf_admission_result *a, const char *when, bool verbose)
{
    char head[512], ways[1024], text[RF_ADMISSION_REASON_MAX];

    rf_admission_headline(a, head, sizeof(head));
    if (a->refused)
        cli_error("admission refused the run%s (%s, --admission %s): %s", when,
                  rf_admission_outcome_name(a->outcome), rf_admission_mode_name(a->mode), head);
    else
        cli_error("warning: admission%s: %s", when, head);
    rf_admission_ways_out(a, ways, sizeof(ways));
    for (char *line = ways, *next; *line; line = next) {
        next = line + strcspn(line, "\n");
        if (*next)
            *next++ = '\0';
        fprintf(stderr, "  way out: %s\n", cli_iec_text(line, text, sizeof(text)));
    }
    if (verbose)
        fprintf(stderr, "  in full: %s\n", cli_iec_text(a->reason, text, sizeof(text)));
}

bool run_warning_is_general(const char *w)
{
    for (size_t i = 0; w && i < sizeof(general_warnings) / sizeof(general_warnings[0]); i++)
        if (strncmp(w, general_warnings[i], strlen(general_warnings[i])) == 0)
            return true;
    return false;
}

static const char *or_default(const char *s, const char *fallback)
{
    return s ? s : fallback;
}

static const struct rf_ledger_entry *entry(const struct rf_report *r, enum rf_ledger_category c)
{
    return r->ledger && r->ledger->entries[c].has_value ? &r->ledger->entries[c] : NULL;
}

static const char *iec(uint64_t v, char *buf, size_t len)
{
    return cli_format_bytes(v, false, buf, len);
}

/* The first sample with a mapping figure, and the last one. */
static void mapping_ends(const struct rf_report *r, const struct rf_residency_sample **first,
                         const struct rf_residency_sample **last)
{
    *first = *last = NULL;
    for (size_t i = 0; i < r->n_samples; i++) {
        if (!r->samples[i].has_mapping)
            continue;
        if (!*first)
            *first = &r->samples[i];
        *last = &r->samples[i];
    }
}

/* Where the memory went, from the ledger (the last sample, contexts dropped). */
static void print_where(FILE *f, const struct rf_report *r)
{
    const struct rf_ledger_entry *rss = entry(r, RF_LEDGER_PROCESS_RSS),
                                 *peak = entry(r, RF_LEDGER_PROCESS_RSS_PEAK),
                                 *mapped = entry(r, RF_LEDGER_FILE_BACKED_LOGICAL),
                                 *res = entry(r, RF_LEDGER_FILE_BACKED_RESIDENT),
                                 *anon = entry(r, RF_LEDGER_ANONYMOUS_WEIGHTS),
                                 *kv = entry(r, RF_LEDGER_KV_CACHE),
                                 *scratch = entry(r, RF_LEDGER_GRAPH_SCRATCH);
    char b1[32], b2[32];

    if (!rss) {
        fprintf(f, "  process memory: unknown (%s)\n",
                r->ledger ? "VmRSS was not read" : "no ledger was built");
        return;
    }
    fprintf(f, "  process RSS %s at the end", iec(rss->value_bytes, b1, sizeof(b1)));
    if (peak)
        fprintf(f, " (peak %s)", iec(peak->value_bytes, b2, sizeof(b2)));
    fputs(":\n", f);
    if (mapped && res)
        fprintf(f, "    weights in the file mapping  %11s resident, of %s of weights mapped\n",
                iec(res->value_bytes, b1, sizeof(b1)), iec(mapped->value_bytes, b2, sizeof(b2)));
    if (anon && anon->value_bytes)
        fprintf(f, "    repacked weight copies       %11s anonymous (release cannot return it)\n",
                iec(anon->value_bytes, b1, sizeof(b1)));
    if (anon && anon->value_bytes && r->inventory && r->inventory->totals.anonymous_logical_bytes)
        fprintf(f,
                "      their sources, %s of the file, are never read again: %s; --no-repack "
                "avoids both\n",
                iec(r->inventory->totals.anonymous_logical_bytes, b1, sizeof(b1)),
                r->load_release.armed && !r->load_release.stopped
                    ? "released during the load, each once copied (--dead-file-pages release)"
                : r->policy_mutates && r->release_dead_file_pages
                    ? "released after the load (--dead-file-pages release)"
                    : "--residency-policy conservative releases them");
    if (kv || scratch)
        fprintf(f,
                "    KV cache + graph scratch     %11s + %s, freed with the session (in the "
                "peak)\n",
                kv ? iec(kv->value_bytes, b1, sizeof(b1)) : "unknown",
                scratch ? iec(scratch->value_bytes, b2, sizeof(b2)) : "unknown");
    uint64_t known = (res ? res->value_bytes : 0) + (anon ? anon->value_bytes : 0);
    if (res && known <= rss->value_bytes)
        fprintf(f, "    other                        %11s (runtime, libraries, allocator)\n",
                iec(rss->value_bytes - known, b1, sizeof(b1)));
}

/* An enforced level of the admission whose usage could not be read, or NULL. */
static const struct rf_admission_level_check *unread_level(const struct rf_admission_result *a)
{
    for (size_t i = 0; a && i < a->n_cgroups; i++)
        if (a->cgroups[i].enforced && !a->cgroups[i].level.usage.has)
            return &a->cgroups[i];
    return NULL;
}

/* The admission outcome, and for a MoE model under a limit the experts that stream. */
static void print_admission_line(FILE *f, const struct rf_admission_result *a, bool mutates)
{
    char b1[32], b2[32];

    fprintf(f, "  admission: %s%s", rf_admission_outcome_name(a->outcome),
            a->outcome == RF_ADMIT_ADMITTED ? ""
            : a->cause == RF_ADMIT_CAUSE_SOFT_TARGET && mutates
                ? " (the projection before the release was over the soft target: the soft "
                  "target line says where the release left the run)"
                : " (see the admission line)");
    if (a->has_experts && a->expert_cache_min)
        fprintf(f,
                "; streams experts: %s per token, expected hit rate %.2f at this budget (an LRU "
                "cache of %" PRIu32 " of %" PRIu32 " experts a layer, %s; rate %s)",
                iec(a->expert_stream_bytes, b1, sizeof(b1)), a->expert_hit_rate, a->cache_experts,
                a->n_expert, iec(a->expert_cache_bytes, b2, sizeof(b2)),
                a->expert_hit_observed ? "observed" : "of uniform routing");
    fputc('\n', f);
}

/* The binding limit and the room left at admission, or that nothing binds. */
static void print_limit(FILE *f, const struct rf_report *r)
{
    const struct rf_admission_result *a = r->admission;
    char b1[32], b2[32], b3[32];

    if (a && a->has_binding) {
        const struct rf_admission_level_check *c = &a->cgroups[a->binding];
        char b4[32];
        fprintf(f,
                "  binding limit %s: the cgroup's charge at admission %s, %s of it reclaimable; "
                "room %s = the limit - the charge the kernel cannot reclaim\n",
                iec(c->level.limit.bytes, b1, sizeof(b1)),
                iec(c->level.usage.bytes, b2, sizeof(b2)),
                iec(c->reclaimable_bytes, b3, sizeof(b3)), iec(c->room_bytes, b4, sizeof(b4)));
        fprintf(f,
                "    reclaimable: %s clean unmapped page cache (memory.stat) + %s the model "
                "mapping's own unlocked pages%s; re-read when reclaimed)",
                iec(c->reclaimable_bytes - c->mapping_reclaimable_bytes, b1, sizeof(b1)),
                iec(c->mapping_reclaimable_bytes, b2, sizeof(b2)),
                c->level.mapped_file.has
                    ? " and the libraries' charged to this cgroup (memory.stat clean mapped file "
                      "pages - smaps Locked"
                    : " (smaps Rss - Locked");
        if (r->streaming && r->streaming->has_locked && r->streaming->locked_bytes > 0)
            fprintf(f, "; then the streaming plan locked %s of them (pinned: not reclaimable)",
                    iec(r->streaming->locked_bytes, b3, sizeof(b3)));
        fputc('\n', f);
        fprintf(f, "    cgroup %s", c->level.dir);
        if (r->ledger && r->ledger->entries[RF_LEDGER_CGROUP_PEAK].has_value)
            fprintf(f, "; CgroupPeak %s is its lifetime peak (this run's only with --memory-limit)",
                    iec(r->ledger->entries[RF_LEDGER_CGROUP_PEAK].value_bytes, b1, sizeof(b1)));
        fputc('\n', f);
    } else if (a && a->host_binding) {
        fprintf(f,
                "  binding limit: the host (no cgroup enforces a limit): %s available at "
                "admission (%s)\n",
                iec(a->host_room_bytes, b1, sizeof(b1)), a->host_source);
    } else if (r->cgroup_error) {
        fprintf(f,
                "  memory limit: unknown: cgroup %s %s has a memory controller, but %s could "
                "not be read (%s)\n",
                or_default(r->cgroup_version, "?"), or_default(r->cgroup_dir, "?"),
                or_default(r->cgroup_error_source, "a file of it"),
                rf_cgroup_error_text(r->cgroup_error));
    } else if (unread_level(a)) {
        const struct rf_cgroup_level *l = &unread_level(a)->level;
        fprintf(f,
                "  memory limit: unknown: cgroup %s enforces %s, but its usage could not be read "
                "(%s: %s)\n",
                l->dir, iec(l->limit.bytes, b1, sizeof(b1)), l->usage.source,
                rf_cgroup_error_text(l->usage.error ? l->usage.error : -ENOENT));
    } else if (r->has_cgroup_limit && !r->cgroup_limit_unlimited) {
        fprintf(f, "  cgroup limit %s\n", iec(r->cgroup_limit_bytes, b1, sizeof(b1)));
    } else if (!r->cgroup_version) {
        fprintf(f, "  memory limit: not read (%s)\n",
                or_default(r->admission_reason, "no admission decision"));
    } else {
        fprintf(f, "  no memory limit binds this run (cgroup %s%s%s)\n",
                or_default(r->cgroup_version, "none"), r->cgroup_dir ? " " : "",
                r->cgroup_dir ? r->cgroup_dir : "");
    }
}

/* The last sample with a mapping figure labelled label (NULL: none). */
static const struct rf_residency_sample *last_labelled(const struct rf_report *r, const char *label)
{
    for (size_t i = r->n_samples; label && i-- > 0;)
        if (r->samples[i].has_mapping && r->samples[i].label &&
            strcmp(r->samples[i].label, label) == 0)
            return &r->samples[i];
    return NULL;
}

/*
 * After the release line: the mapping at the end when a later boundary
 * measured another figure without releasing (a verify session faulted pages
 * back and the mapping stayed under the target), with that boundary's reason.
 */
static void print_after_release(FILE *f, const struct rf_report *r,
                                const struct rf_residency_sample *end,
                                const struct rf_residency_sample *last)
{
    const char *why = NULL;
    char b1[32];

    if (!end || !last || last <= end || last->mapping_rss_bytes == end->mapping_rss_bytes)
        return;
    for (size_t i = 0; i < r->n_applications; i++) {
        const struct rf_report_application *a = &r->applications[i];
        if (!a->attempted && a->boundary && last->label && strcmp(a->boundary, last->label) == 0)
            why = a->refused_reason;
    }
    fprintf(f, "  then: mapping resident %s at %s (%s%s)\n",
            iec(last->mapping_rss_bytes, b1, sizeof(b1)), or_default(last->label, "?"),
            why ? "not released there: " : "measured after the last release", why ? why : "");
}

/*
 * Before -> after of a releasing policy: from the first mapping sample to
 * the sample taken after the last release that accepted bytes (whatever
 * boundary it was at), then the mapping at the end if a later boundary
 * measured it again; whether the cgroup charge moved.
 */
static void print_release(FILE *f, const struct rf_report *r)
{
    const struct rf_residency_sample *first, *last, *end = NULL;
    char b1[32], b2[32], b3[32], b4[32];
    int64_t cg = 0;
    bool cg_known = false, released = false;

    for (size_t i = 0; i < r->n_applications; i++) {
        const struct rf_report_application *a = &r->applications[i];
        if (!a->attempted || !a->accepted_bytes)
            continue;
        released = true;
        end = last_labelled(r, a->after_label);
        if (a->cgroup_delta.has_value) {
            cg += a->cgroup_delta.value;
            cg_known = true;
        }
    }
    mapping_ends(r, &first, &last);
    if (!released) {
        fprintf(f, "  release: nothing was released\n");
        return;
    }
    if (first && end) {
        fprintf(f, "  release: mapping resident %s -> %s (%s -> %s), process RSS %s -> %s\n",
                iec(first->mapping_rss_bytes, b1, sizeof(b1)),
                iec(end->mapping_rss_bytes, b2, sizeof(b2)), or_default(first->label, "?"),
                or_default(end->label, "?"),
                first->has_process_rss ? iec(first->process_rss_bytes, b3, sizeof(b3)) : "unknown",
                end->has_process_rss ? iec(end->process_rss_bytes, b4, sizeof(b4)) : "unknown");
        print_after_release(f, r, end, last);
    }
    if (!cg_known)
        fprintf(f, "  cgroup charge: unknown (no cgroup figure around the releases)\n");
    else if (cg == 0)
        fprintf(f, "  cgroup charge: did not move (the page cache kept the pages%s)\n",
                r->release_mode && strcmp(r->release_mode, "dontneed") == 0
                    ? ": dontneed unmaps, it does not evict"
                    : "");
    else
        fprintf(f, "  cgroup charge: %s over the releases\n",
                cli_format_change(cg, b1, sizeof(b1)));
}

/* The most the model mapping held resident over the samples (0: never measured). */
static uint64_t mapping_most(const struct rf_report *r)
{
    uint64_t most = 0;

    for (size_t i = 0; i < r->n_samples; i++)
        if (r->samples[i].has_mapping && r->samples[i].mapping_rss_bytes > most)
            most = r->samples[i].mapping_rss_bytes;
    return most;
}

/*
 * The model's file pages charged elsewhere: the model mapping resident above
 * the binding hard limit means its pages were charged to the cgroup that
 * first read them (cached before the run), so the limit could not bind them.
 */
static void print_unbound(FILE *f, const struct rf_report *r)
{
    const struct rf_admission_result *a = r->admission;
    uint64_t most = mapping_most(r);
    char b1[32], b2[32];

    if (!a || !a->has_binding)
        return;
    if (most <= a->cgroups[a->binding].level.limit.bytes)
        return;
    fprintf(f,
            "  not bound: the model mapping held %s, over the %s limit: its cached pages are "
            "charged to the cgroup that read them first\n",
            iec(most, b1, sizeof(b1)),
            iec(a->cgroups[a->binding].level.limit.bytes, b2, sizeof(b2)));
    fprintf(f, "    to start cold, evict the file first: dd if=%s iflag=nocache count=0\n",
            or_default(r->model_path, "MODEL"));
}

/*
 * A process RSS (at the end or its peak) above the binding limit, explained:
 * RSS counts every page the process maps, also pages charged to another
 * cgroup and shared pages; the limit holds only this cgroup's charge. The
 * model's own pages are named among them only when its mapping alone held
 * more than the limit (print_unbound); on a cold (evicted) file the pages
 * above the limit are others: shared libraries, files cached before.
 */
static void print_rss_over_limit(FILE *f, const struct rf_report *r)
{
    const struct rf_admission_result *a = r->admission;
    const struct rf_ledger_entry *rss = entry(r, RF_LEDGER_PROCESS_RSS),
                                 *peak = entry(r, RF_LEDGER_PROCESS_RSS_PEAK),
                                 *charge = entry(r, RF_LEDGER_CGROUP_CURRENT);
    uint64_t limit, most, mapping = mapping_most(r);
    char b1[32], b2[32], b3[32], b4[32], why[160];

    if (a && a->has_binding)
        limit = a->cgroups[a->binding].level.limit.bytes;
    else if (r->has_cgroup_limit && !r->cgroup_limit_unlimited)
        limit = r->cgroup_limit_bytes;
    else
        return;
    most = rss ? rss->value_bytes : 0;
    if (peak && peak->value_bytes > most)
        most = peak->value_bytes;
    if (most <= limit)
        return;
    if (mapping > limit)
        snprintf(why, sizeof(why), "%s",
                 "the model file's pages charged to another cgroup (cached before the run) "
                 "and shared pages");
    else
        snprintf(why, sizeof(why),
                 "pages charged to other cgroups (shared libraries, other files cached before "
                 "the run; the model mapping held at most %s)",
                 iec(mapping, b4, sizeof(b4)));
    fprintf(f,
            "  process RSS %s is above the %s limit: RSS counts every page the process maps, "
            "also %s; the limit holds this cgroup's own charge, %s at the end\n",
            iec(most, b1, sizeof(b1)), iec(limit, b2, sizeof(b2)), why,
            charge ? iec(charge->value_bytes, b3, sizeof(b3)) : "not read");
}

/* Decode tokens/s, the time to the first token and the thread count. */
static void print_speed(FILE *f, const struct rf_report *r)
{
    const struct rf_timing *t = r->timing;
    char b1[32];

    double tps;

    fprintf(f, "  %zu tokens", r->n_tokens);
    if (rf_report_decode_tokens_per_s(r, &tps))
        fprintf(f, ", decode %.2f tok/s", tps);
    if (t && t->has[RF_TIMER_TTFT])
        fprintf(f, ", first token after %s", cli_format_ns(t->ns[RF_TIMER_TTFT], b1, sizeof(b1)));
    if (r->streaming && r->streaming->decode.on && r->streaming->decode.has_io)
        fprintf(f, ", %s read from storage during the decode",
                iec(r->streaming->decode.read_bytes, b1, sizeof(b1)));
    else if (r->streaming && r->streaming->has_read_bytes)
        fprintf(f, ", %s read from storage during the run (the load's reads not counted)",
                iec(r->streaming->read_bytes, b1, sizeof(b1)));
    if (r->n_threads > 0)
        fprintf(f, "; %d thread%s (-t; default the physical cores: fewer on a busy host)",
                (int)r->n_threads, r->n_threads == 1 ? "" : "s");
    fputc('\n', f);
}

/* The soft target: what the plan aimed at it (the mapping) and what the process is. */
static void print_target(FILE *f, const struct rf_report *r)
{
    const struct rf_residency_sample *first, *last;
    const struct rf_ledger_entry *rss = entry(r, RF_LEDGER_PROCESS_RSS);
    char b1[32], b2[32], b3[32];

    if (!r->has_target)
        return;
    uint64_t soft = r->target_bytes - r->reserve_bytes;
    mapping_ends(r, &first, &last);
    fprintf(f, "  soft target %s: ", iec(soft, b1, sizeof(b1)));
    if (last)
        fprintf(f, "mapping resident %s %s", iec(last->mapping_rss_bytes, b2, sizeof(b2)),
                last->mapping_rss_bytes <= soft ? "(met)" : "(NOT met)");
    else
        fputs("mapping resident unknown", f);
    if (rss && rss->value_bytes <= soft) {
        fprintf(f, "; process RSS %s is under it too", iec(rss->value_bytes, b3, sizeof(b3)));
    } else if (rss) {
        /* Name only the anonymous parts the ledger has a non-zero figure for (or cannot
         * rule out: runtime unknown). */
        static const struct {
            enum rf_ledger_category c;
            const char *what;
        } parts[] = {{RF_LEDGER_ANONYMOUS_WEIGHTS, "repacked copies"},
                     {RF_LEDGER_KV_CACHE, "KV cache"},
                     {RF_LEDGER_GRAPH_SCRATCH, "graph scratch"},
                     {RF_LEDGER_RUNTIME, "runtime"}};
        fprintf(f, "; process RSS %s is above it (", iec(rss->value_bytes, b3, sizeof(b3)));
        int n = 0;
        for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
            const struct rf_ledger_entry *e = entry(r, parts[i].c);
            bool present = e ? e->value_bytes > 0 : parts[i].c == RF_LEDGER_RUNTIME;
            if (present)
                fprintf(f, "%s%s", n++ ? ", " : "", parts[i].what);
        }
        fprintf(f, "%s: not releasable)", n ? "" : "anonymous memory");
    }
    fputc('\n', f);
}

void run_print_summary(FILE *f, const struct rf_report *r)
{
    char b1[32];

    fprintf(f, "\n== ramforge: %s, policy %s", or_default(r->model_desc, "model"),
            or_default(r->policy, "unknown"));
    if (r->has_target)
        fprintf(f, ", target %s (%" PRIu64 " bytes)", iec(r->target_bytes, b1, sizeof(b1)),
                r->target_bytes);
    if (r->release_mode)
        fprintf(f, ", release %s", r->release_mode);
    fputs(" ==\n", f);
    print_where(f, r);
    print_limit(f, r);
    print_unbound(f, r);
    print_rss_over_limit(f, r);
    if (r->policy_mutates)
        print_release(f, r);
    print_target(f, r);
    if (r->verified)
        fprintf(f, "  tokens after release: %s (--verify-session)\n",
                r->verify_tokens_equal ? "identical" : "DIFFERENT");
    if (r->admission)
        print_admission_line(f, r->admission, r->policy_mutates);
    const struct rf_stream_report *sr = r->streaming;
    if (sr && sr->plan_short &&
        (strcmp(sr->plan_reason, RF_STREAM_NO_EXPERT_CACHE) == 0 ||
         strcmp(sr->plan_reason, RF_STREAM_NO_EXPERT_CACHE_OFF) == 0))
        fprintf(f, "  streaming: %s\n", sr->plan_reason); /* a MoE model without its cache */
    if (r->cgroup_verdict && (r->cgroup_verdict->hit_limit || r->cgroup_verdict->oom_killed))
        fprintf(f, "  the kernel: %s%s\n",
                r->cgroup_verdict->hit_limit ? "the cgroup hit its limit" : "",
                r->cgroup_verdict->oom_killed ? ", OOM kill" : "");
    print_speed(f, r);
}
