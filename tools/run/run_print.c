/* ramforge run: the bounded human-readable residency report (stderr). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/cli.h"
#include "ramforge/core/fs_profile.h"
#include "run.h"

/* s, or fallback when s is NULL: no "(null)" ever reaches the output. */
static const char *or_text(const char *s, const char *fallback)
{
    return s ? s : fallback;
}

static const char *opt_bytes(bool has, uint64_t v, char *buf, size_t len)
{
    return has ? cli_format_bytes(v, false, buf, len) : "unknown";
}

static const char *signed_iec(struct rf_recon_value v, char *buf, size_t len)
{
    if (!v.has_value)
        return "unknown";
    return cli_format_signed_bytes(v.value, buf, len);
}

/* A measured change in words ("fell by 1.00 MiB"), or that it is unknown. */
static const char *change(struct rf_recon_value v, char *buf, size_t len)
{
    if (!v.has_value)
        return "change unknown";
    return cli_format_change(v.value, buf, len);
}

static void print_ledger(FILE *f, const struct rf_report *r)
{
    char b1[32], b2[32];
    if (!r->ledger) {
        fprintf(f, "ledger: not built (%s)\n",
                or_text(r->not_built_reason, "the run ended before the ledger was recorded"));
        return;
    }
    fprintf(f, "ledger (categories are not additive; no total):\n");
    for (int c = 0; c < RF_LEDGER_N_CATEGORIES; c++) {
        const struct rf_ledger_entry *e = &r->ledger->entries[c];
        fprintf(f, "  %-20s %12s  %-15s %s%s\n",
                rf_ledger_category_name((enum rf_ledger_category)c),
                e->has_value ? cli_format_bytes(e->value_bytes, false, b1, sizeof(b1)) : "unknown",
                rf_provenance_name(e->provenance), e->has_value ? e->source : e->note,
                c == RF_LEDGER_CGROUP_PEAK && e->has_value
                    ? " (the cgroup's peak over its lifetime, not this run's)"
                    : "");
    }
    const struct rf_reconciliation *rc = r->reconciliation;
    fprintf(f, "reconciliation (signed differences, not overhead):\n");
    fprintf(f, "  process RSS - mapping resident: %s\n",
            signed_iec(rc->rss_minus_mapping_resident_bytes, b1, sizeof(b1)));
    fprintf(f, "  cgroup current - process RSS:   %s\n",
            signed_iec(rc->cgroup_current_minus_rss_bytes, b2, sizeof(b2)));
}

static void print_population(FILE *f, const char *name, const struct rf_residency_population *p)
{
    if (!p->has_coverage) {
        fprintf(f, "  %-8s n/a (no pages)\n", name);
        return;
    }
    fprintf(f,
            "  %-8s %" PRIu64 " resident, %" PRIu64 " nonresident, %" PRIu64 " unknown of %" PRIu64
            " pages (%u.%02u%% known)\n",
            name, p->resident_pages, p->nonresident_pages, p->unknown_pages, p->available_pages,
            p->coverage_bp / 100, p->coverage_bp % 100);
}

static void print_staging(FILE *f, const struct rf_report *r)
{
    char b1[32], b2[32], b3[32];
    const struct rf_staging_plan *p = r->staging;
    if (!p)
        return;
    fprintf(f, "staging (budget %s): selected %s, accepted %s",
            cli_format_bytes(p->budget_bytes, false, b1, sizeof(b1)),
            cli_format_bytes(p->selected_bytes, false, b2, sizeof(b2)),
            r->staging_attempted
                ? cli_format_bytes(r->staging_accepted_bytes, false, b3, sizeof(b3))
                : "not attempted");
    if (r->staging_cached_before.has_value && r->staging_cached_after.has_value)
        fprintf(f, "; staged tensors' pages in page cache %" PRId64 " -> %" PRId64 " of %" PRId64,
                r->staging_cached_before.value, r->staging_cached_after.value,
                r->staging_sampled_pages.value);
    fprintf(f, "; mapping RSS %s\n", signed_iec(r->staging_mapping_delta, b1, sizeof(b1)));
    fprintf(f, "  %s\n", p->reason);
}

static void print_dispatch(FILE *f, const struct rf_report *r)
{
    const struct rf_dispatch_summary *d = r->dispatch;
    if (!d)
        return;
    fprintf(f,
            "dispatch: %" PRIu64 " events, %" PRIu64 " dropped (%s); %" PRIu64 " of %" PRIu64
            " weight references attributed; %" PRIu64 " tensors named\n",
            d->events, d->dropped_events, d->complete ? "complete" : "incomplete",
            d->weight_refs - d->unattributed_weight_refs, d->weight_refs, d->tensors_named);
    fprintf(f, "  %s\n", d->caveat);
}

/* A MoE model's routing as observed: tokens, and the hit rate of per-layer LRU caches. */
static void print_experts(FILE *f, const struct rf_report *r)
{
    const struct rf_routing *g = r->routing;
    if (!g)
        return;
    uint64_t tokens = 0;
    for (uint32_t l = 0; l < g->n_layer; l++)
        tokens = g->tokens[l] > tokens ? g->tokens[l] : tokens;
    fprintf(f,
            "experts: %" PRIu64 " tokens routed, %" PRIu32 " of %" PRIu32
            " experts per layer; a per-layer LRU cache would have held",
            tokens, g->n_expert_used, g->n_expert);
    for (uint32_t c = g->n_expert_used; c < g->n_expert; c *= 2) {
        uint64_t hits, sel;
        if (rf_routing_lru_hits(g, -1, c, &hits, &sel) == 0 && sel)
            fprintf(f, " %.0f%% at %" PRIu32, 100.0 * (double)hits / (double)sel, c);
    }
    fprintf(f, " experts\n");
}

/* The admission outcome, the binding cgroup's figures and the kernel's verdict. */
static void print_admission(FILE *f, const struct rf_report *r)
{
    const struct rf_admission_result *a = r->admission;
    const struct rf_cgroup_verdict *v = r->cgroup_verdict;
    char b1[32], b2[32], b3[32], b4[32], text[RF_ADMISSION_REASON_MAX];

    fprintf(f, "admission (%s, mode %s%s): %s: %s\n", rf_admission_phase_name(a->phase),
            rf_admission_mode_name(a->mode), a->refused ? ", refused" : "",
            rf_admission_outcome_name(a->outcome), cli_iec_text(a->reason, text, sizeof(text)));
    if (a->has_binding) {
        const struct rf_admission_level_check *c = &a->cgroups[a->binding];
        char b5[32];
        fprintf(f,
                "  binding cgroup %s (%zu levels read): limit %s, usage %s, reclaimable %s (%s "
                "of it the model mapping's own unlocked pages), projected %s\n",
                c->level.dir, a->n_cgroups,
                cli_format_bytes(c->level.limit.bytes, false, b1, sizeof(b1)),
                cli_format_bytes(c->level.usage.bytes, false, b2, sizeof(b2)),
                cli_format_bytes(c->reclaimable_bytes, false, b3, sizeof(b3)),
                cli_format_bytes(c->mapping_reclaimable_bytes, false, b5, sizeof(b5)),
                cli_format_bytes(c->projected_bytes, false, b4, sizeof(b4)));
    }
    if (a->lock_note[0])
        fprintf(f, "  %s\n", a->lock_note);
    if (v)
        fprintf(f, "  kernel verdict over the run: %s%s%s\n",
                v->hit_limit ? "the cgroup hit its limit" : "no limit hit",
                v->oom_killed ? ", OOM kill" : "", v->throttled ? ", throttled (memory.high)" : "");
}

static void print_policy(FILE *f, const struct rf_report *r, bool verbose)
{
    char b1[32], b2[32], b3[32], b4[32], b5[32], text[2048];
    if (r->admission)
        print_admission(f, r);
    if (r->plan) {
        const struct rf_plan *p = r->plan;
        fprintf(f,
                "plan (%s, %s): %zu of %zu candidates selected, %s of tensors, release %s "
                "(%s of shared pages protected), estimated mapping resident after %s, soft target "
                "%s: %s\n",
                rf_policy_name(p->profile), r->plan_boundary ? r->plan_boundary : "", p->n_selected,
                p->n_candidates, cli_format_bytes(p->selected_logical_bytes, false, b1, sizeof(b1)),
                cli_format_bytes(p->release_bytes, false, b2, sizeof(b2)),
                cli_format_bytes(p->shared_bytes_protected, false, b3, sizeof(b3)),
                opt_bytes(p->has_estimated_resident_after, p->estimated_resident_after_bytes, b4,
                          sizeof(b4)),
                p->has_soft_target ? (p->target_met ? "met" : "not met") : "none",
                cli_iec_text(p->reason, text, sizeof(text)));
    } else if (r->plan_reason) {
        fprintf(f, "plan: none (%s)\n", r->plan_reason);
    }
    for (size_t i = 0; i < r->n_applications; i++) {
        const struct rf_report_application *a = &r->applications[i];
        if (!a->attempted) {
            fprintf(f, "release at %s: not attempted (%s)\n", or_text(a->boundary, "a boundary"),
                    or_text(a->refused_reason, "no reason was recorded"));
            continue;
        }
        fprintf(f,
                "release at %s (%s): requested %s, accepted %s, %" PRIu64
                " ranges refused%s%s; measured: mapping RSS %s, process RSS %s, cgroup charge "
                "%s\n",
                or_text(a->boundary, "a boundary"), or_text(r->release_mode, "no release mode"),
                cli_format_bytes(a->requested_bytes, false, b1, sizeof(b1)),
                cli_format_bytes(a->accepted_bytes, false, b2, sizeof(b2)), a->n_failed,
                a->first_error ? ": " : "", a->first_error ? strerror(-a->first_error) : "",
                change(a->mapping_delta, b3, sizeof(b3)), change(a->rss_delta, b4, sizeof(b4)),
                change(a->cgroup_delta, b5, sizeof(b5)));
    }
    if (r->has_native && verbose)
        fprintf(f,
                "native: contract %u, instance %" PRIu64 ", %s, %u in flight, %u active, "
                "execution generation %" PRIu64 " (%s)\n",
                r->native.contract_version, r->native.instance_id,
                r->native.quiescent ? "quiescent" : "not quiescent", r->native.in_flight_contexts,
                r->native.active_contexts, r->native.execution_generation,
                r->native_boundary ? r->native_boundary : "");
    if (r->page_snapshot) {
        const struct rf_residency_coverage *c = &r->page_snapshot->coverage;
        fprintf(f,
                "page cache of the model mapping (%s, budget %" PRIu64 " pages; resident = in "
                "the page cache, not mapped RSS):\n",
                or_text(r->page_snapshot->source, "unknown source"), c->page_budget_pages);
        print_population(f, "selected", &c->targeted);
        print_population(f, "other", &c->general);
        if (c->selected_resources)
            fprintf(f,
                    "  selected tensors: %" PRIu64 " fully, %" PRIu64 " partially, %" PRIu64
                    " not observed\n",
                    c->selected_fully_observed, c->selected_partially_observed,
                    c->selected_not_observed);
    }
    print_staging(f, r);
    print_dispatch(f, r);
    print_experts(f, r);
    if (r->has_file_cache)
        fprintf(f, "page cache, whole file (%s): %s\n",
                r->file_cache_source ? r->file_cache_source : "unknown source",
                cli_format_bytes(r->file_cached_pages * r->file_cache_page_bytes, false, b1,
                                 sizeof(b1)));
    else if (r->file_cache_source)
        fprintf(f, "page cache, whole file: %s\n", r->file_cache_source);
    if (r->lifetime && verbose) {
        uint64_t counts[RF_LT_N];
        rf_lifetime_counts(r->lifetime, counts);
        fprintf(f, "lifetime:");
        for (int s = 0; s < RF_LT_N; s++)
            if (counts[s])
                fprintf(f, " %s %" PRIu64, rf_lifetime_state_name((enum rf_lifetime_state)s),
                        counts[s]);
        fputc('\n', f);
    }
}

/* The model file's filesystem and, where they differ from a local disk, what figures mean. */
static void print_filesystem(FILE *f, const struct rf_report *r)
{
    const struct rf_fs_profile *p = rf_fs_profile_of(r->model_fs_magic);
    fprintf(f, "filesystem: %s", p->name);
    if (r->model_fs_magic)
        fprintf(f, " (f_type 0x%" PRIx64 ")", r->model_fs_magic);
    if (p->cachestat_why)
        fprintf(f, "; cachestat: %s", p->cachestat_why);
    if (p->page_figures_why)
        fprintf(f, "; page figures: %s", p->page_figures_why);
    if (p->release_why)
        fprintf(f, "; release %s: %s", rf_fs_release_name(p->release), p->release_why);
    fputc('\n', f);
}

void run_print_report(const struct rf_report *r, bool verbose)
{
    char b1[32], b2[32], text[2048];
    FILE *f = stderr;

    run_print_summary(f, r);
    fprintf(f, "\n-- details (report schema %d) --\n", RF_REPORT_SCHEMA_VERSION);
    fprintf(f, "model: %s (%s), file %s, native tensor size %s",
            or_text(r->model_path, "unknown path"), or_text(r->model_desc, "no description"),
            cli_format_bytes(r->model_file_size_bytes, false, b1, sizeof(b1)),
            cli_format_bytes(r->model_native_size_bytes, false, b2, sizeof(b2)));
    if (verbose)
        fprintf(f, ", instance %" PRIu64, r->instance_id);
    fputc('\n', f);
    print_filesystem(f, r);
    if (r->inventory) {
        const struct rf_inventory_totals *t = &r->inventory->totals;
        uint64_t reads_file = 0;
        for (size_t i = 0; i < r->inventory->n; i++)
            reads_file += r->inventory->entries[i].access == RF_ACCESS_FILE_BACKED;
        if (verbose)
            fprintf(f, "inventory generation %" PRIu64 "\n", r->inventory->generation);
        fprintf(f,
                "inventory: %" PRIu64 " tensors, %" PRIu64
                " inside the file mapping; the graph reads %" PRIu64
                " from the mapping and %" PRIu64 " from anonymous copies; %" PRIu64
                " release-eligible\n",
                t->n_tensors, t->n_file_backed, reads_file, t->n_anonymous, t->n_eligible);
    } else {
        fprintf(f, "inventory: not built (%s)\n",
                or_text(r->not_built_reason, "no inventory was built in this run"));
    }
    print_ledger(f, r);
    print_policy(f, r, verbose);
    run_print_streaming(f, r);
    const struct rf_timing *t = r->timing;
    fprintf(f, "timing:");
    static const enum rf_timer shown[] = {
        RF_TIMER_MODEL_LOAD, RF_TIMER_OBSERVATION, RF_TIMER_PLANNING,  RF_TIMER_STAGING,
        RF_TIMER_TTFT,       RF_TIMER_INFERENCE,   RF_TIMER_END_TO_END};
    for (size_t i = 0; i < sizeof(shown) / sizeof(shown[0]); i++) {
        if (!t->has[shown[i]])
            continue;
        const char *name = rf_timer_name(shown[i]);
        int len = (int)strlen(name) - 3; /* without "_ns": the value carries its unit */
        fprintf(f, " %.*s %s", len, name, cli_format_ns(t->ns[shown[i]], b1, sizeof(b1)));
    }
    fputc('\n', f);
    char fp[32];
    rf_token_fingerprint(r->tokens, r->n_tokens, fp);
    fprintf(f, "output: %zu prompt tokens, %zu generated, %s\n", r->n_prompt, r->n_tokens, fp);
    if (r->n_ctx)
        fprintf(f,
                "context: %u cells (-c, or prompt + -n without it, padded by llama.cpp to a "
                "multiple of 256)\n",
                r->n_ctx);
    if (r->verified)
        fprintf(f, "verify session after release: tokens %s\n",
                r->verify_tokens_equal ? "identical" : "DIFFERENT");
    size_t general = 0;
    for (size_t i = 0; i < r->n_warnings; i++) {
        if (!verbose && run_warning_is_general(r->warnings[i]))
            general++;
        else
            fprintf(f, "warning: %s\n", cli_iec_text(r->warnings[i], text, sizeof(text)));
    }
    if (general)
        fprintf(f,
                "(%zu notes true of every such run left out: docs/guide/report.md; "
                "--verbose prints them)\n",
                general);
}
