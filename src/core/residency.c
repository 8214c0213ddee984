/*
 * Page-residency snapshots with coverage (see residency.h).
 *
 * Workload: an inventory of a few hundred to tens of thousands of tensors
 * in one or a few mappings, a budget of up to a few million pages. The
 * snapshot works in three passes:
 *
 *   1. choose: walk the targeted resources, then the others, in inventory
 *      order; the pages of each range not yet chosen in its mapping (an
 *      interval set per mapping) are chosen in file order until the budget
 *      runs out. Shared pages are chosen once.
 *   2. sample: per mapping, ask the sampler about the chosen ranges in
 *      file order, in windows of at most RF_PAGE_WINDOW_PAGES, and keep
 *      the answers as sorted runs of equal state (one entry per change of
 *      state, so memory follows the residency pattern, not the page count).
 *   3. count: per resource and per population, intersect ranges with the
 *      runs. Pages no run covers are unknown.
 *
 * The sampler is therefore called at most once per (mapping, page), and
 * only inside some resource's range.
 */
#include "ramforge/core/residency.h"
#include "ramforge/core/json_util.h"
#include "ramforge/core/report_json.h"
#include "ramforge/core/search.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ramforge/error.h"

/* A run of sampled pages in one state: [first, end). */
struct run {
    uint64_t first;
    uint64_t end;
    uint8_t state; /* enum rf_page_state */
};

/* Per mapping bookkeeping. */
struct mstate {
    struct rf_interval_set all;      /* union of the resources' ranges */
    struct rf_interval_set targeted; /* union of the targeted resources' ranges */
    struct rf_interval_set chosen;   /* pages the sampler will be asked about */
    struct run *runs;                /* sorted, disjoint; n_runs used of cap_runs */
    size_t n_runs, cap_runs;
};

struct rf_residency_params rf_residency_default_params(void)
{
    struct rf_residency_params p = {
        .page_budget_pages = RF_RESIDENCY_DEFAULT_BUDGET_PAGES,
        .targeted = NULL,
        .n_targeted = 0,
        .sample = NULL,
        .sample_ud = NULL,
        .source = NULL,
    };
    return p;
}

void rf_residency_snapshot_init(struct rf_residency_snapshot *s)
{
    if (s)
        memset(s, 0, sizeof(*s));
}

void rf_residency_snapshot_free(struct rf_residency_snapshot *s)
{
    if (!s)
        return;
    free(s->resources);
    rf_residency_snapshot_init(s);
}

uint32_t rf_residency_basis_points(uint64_t part, uint64_t whole)
{
    if (whole == 0)
        return 0;
    if (part >= whole)
        return 10000;
    __extension__ unsigned __int128 num = (unsigned __int128)part * 10000u;
    return (uint32_t)(num / whole); /* < 10000 since part < whole */
}

const char *rf_page_state_name(enum rf_page_state s)
{
    switch (s) {
    case RF_PAGE_UNKNOWN:
        return "unknown";
    case RF_PAGE_NONRESIDENT:
        return "nonresident";
    case RF_PAGE_RESIDENT:
        return "resident";
    }
    return NULL;
}

void rf_page_counts_add(struct rf_page_counts *c, const uint8_t *states, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        if (states[i] == RF_PAGE_RESIDENT)
            c->resident_pages++;
        else if (states[i] == RF_PAGE_NONRESIDENT)
            c->nonresident_pages++;
        else
            c->unknown_pages++;
    }
}

const char *rf_residency_sampled_name(enum rf_residency_sampled s)
{
    switch (s) {
    case RF_SAMPLED_NONE:
        return "none";
    case RF_SAMPLED_PARTIAL:
        return "partial";
    case RF_SAMPLED_FULL:
        return "full";
    case RF_SAMPLED_NO_PAGES:
        return "no_pages";
    }
    return NULL;
}

/* Adds v to *acc; false on overflow. */
static bool add_u64(uint64_t *acc, uint64_t v)
{
    return !__builtin_add_overflow(*acc, v, acc);
}

/* A page to search the runs of ms for. */
struct run_key {
    const struct mstate *ms;
    uint64_t page;
};

static bool run_end_above(const void *ctx, size_t i)
{
    const struct run_key *k = ctx;
    return k->ms->runs[i].end > k->page;
}

/* Index of the first run whose end > page (n_runs when none). */
static size_t run_first_end_above(const struct mstate *ms, uint64_t page)
{
    struct run_key k = {ms, page};
    return rf_partition_point(ms->n_runs, run_end_above, &k);
}

/*
 * Chooses the pages of r not yet chosen in ms, in file order, while budget
 * remains. Sets *exhausted when a page of r stays unchosen for lack of
 * budget. Errors: -ENOMEM.
 */
static int choose_pages(struct mstate *ms, struct rf_page_range r, uint64_t *budget_left,
                        bool *exhausted)
{
    uint64_t cur = r.first_page;

    while (cur < r.end_page) {
        size_t i = rf_interval_set_first_end_above(&ms->chosen, cur);
        if (i < ms->chosen.n && ms->chosen.v[i].first_page <= cur) {
            cur = ms->chosen.v[i].end_page; /* already chosen: reuse */
            continue;
        }
        uint64_t gap_end = r.end_page;
        if (i < ms->chosen.n && ms->chosen.v[i].first_page < gap_end)
            gap_end = ms->chosen.v[i].first_page;
        uint64_t want = gap_end - cur;
        uint64_t take = want < *budget_left ? want : *budget_left;
        if (take == 0) {
            *exhausted = true;
            return 0;
        }
        struct rf_page_range t = {cur, cur + take};
        int rc = rf_interval_set_add(&ms->chosen, t);
        if (rc < 0)
            return rc;
        *budget_left -= take;
        if (take < want) {
            *exhausted = true;
            return 0;
        }
        cur += take;
    }
    return 0;
}

/* Appends [first, end) in state st after the last run. Errors: -ENOMEM. */
static int run_append(struct mstate *ms, uint64_t first, uint64_t end, uint8_t st)
{
    if (ms->n_runs > 0) {
        struct run *last = &ms->runs[ms->n_runs - 1];
        if (last->end == first && last->state == st) {
            last->end = end;
            return 0;
        }
    }
    if (ms->n_runs == ms->cap_runs) {
        size_t cap = ms->cap_runs ? ms->cap_runs : 16, bytes;
        if (__builtin_mul_overflow(cap, (size_t)2, &cap) ||
            __builtin_mul_overflow(cap, sizeof(struct run), &bytes))
            return -ENOMEM;
        struct run *nv = realloc(ms->runs, bytes);
        if (!nv)
            return -ENOMEM;
        ms->runs = nv;
        ms->cap_runs = cap;
    }
    ms->runs[ms->n_runs++] = (struct run){first, end, st};
    return 0;
}

static uint8_t clean_state(uint8_t v)
{
    return v == RF_PAGE_RESIDENT || v == RF_PAGE_NONRESIDENT ? v : RF_PAGE_UNKNOWN;
}

/* Asks the sampler about every chosen range of mapping mi. Errors: -ENOMEM. */
static int sample_mapping(struct mstate *ms, int32_t mi, const struct rf_residency_params *p,
                          uint8_t *states, struct rf_residency_snapshot *snap)
{
    for (size_t k = 0; k < ms->chosen.n; k++) {
        struct rf_page_range r = ms->chosen.v[k];
        for (uint64_t first = r.first_page; first < r.end_page;) {
            uint64_t n = r.end_page - first;
            if (n > RF_PAGE_WINDOW_PAGES)
                n = RF_PAGE_WINDOW_PAGES;
            memset(states, RF_PAGE_UNKNOWN, (size_t)n);
            int rc = p->sample(p->sample_ud, mi, first, n, states);
            snap->sampler_calls++;
            if (rc < 0) {
                snap->sampler_failures++;
                if (!snap->first_sampler_error)
                    snap->first_sampler_error = rc;
                memset(states, RF_PAGE_UNKNOWN, (size_t)n);
            }
            for (uint64_t i = 0; i < n;) {
                uint8_t st = clean_state(states[i]);
                uint64_t j = i + 1;
                while (j < n && clean_state(states[j]) == st)
                    j++;
                rc = run_append(ms, first + i, first + j, st);
                if (rc < 0)
                    return rc;
                i = j;
            }
            first += n;
        }
    }
    return 0;
}

/* Pages of r covered by runs: inspected, and of those resident / nonresident. */
static void count_range(const struct mstate *ms, struct rf_page_range r, uint64_t *inspected,
                        uint64_t *resident, uint64_t *nonresident)
{
    *inspected = *resident = *nonresident = 0;
    for (size_t i = run_first_end_above(ms, r.first_page);
         i < ms->n_runs && ms->runs[i].first < r.end_page; i++) {
        uint64_t a = ms->runs[i].first > r.first_page ? ms->runs[i].first : r.first_page;
        uint64_t b = ms->runs[i].end < r.end_page ? ms->runs[i].end : r.end_page;
        uint64_t n = b - a; /* within one mapping's page space: sums cannot overflow */
        *inspected += n;
        if (ms->runs[i].state == RF_PAGE_RESIDENT)
            *resident += n;
        else if (ms->runs[i].state == RF_PAGE_NONRESIDENT)
            *nonresident += n;
    }
}

static void finish_population(struct rf_residency_population *pop)
{
    pop->unknown_pages = pop->available_pages - pop->resident_pages - pop->nonresident_pages;
    pop->has_coverage = pop->available_pages > 0;
    pop->coverage_bp = rf_residency_basis_points(pop->resident_pages + pop->nonresident_pages,
                                                 pop->available_pages);
}

static bool has_pages(const struct rf_inventory *inv, const struct rf_inventory_entry *e)
{
    return e->file_backed && e->mapping_index >= 0 && (size_t)e->mapping_index < inv->n_mappings &&
           e->pages.end_page > e->pages.first_page;
}

int rf_residency_snapshot_take(const struct rf_inventory *inv, const struct rf_residency_params *p,
                               struct rf_residency_snapshot *out)
{
    struct rf_residency_snapshot s;
    struct mstate *ms = NULL;
    uint8_t *states = NULL;
    bool *targeted = NULL;
    size_t nm;
    int rc = 0;

    if (!inv || !p || !out)
        return -EINVAL;
    rf_residency_snapshot_init(&s);
    nm = inv->n_mappings;
    s.generation = inv->generation;
    s.page_bytes = inv->page_bytes;
    s.coverage.page_budget_pages = p->page_budget_pages;
    snprintf(s.source, sizeof(s.source), "%s",
             p->source   ? p->source
             : p->sample ? "unspecified"
                         : "unknown: no sampler");

    s.resources = calloc(inv->n ? inv->n : 1, sizeof(*s.resources));
    targeted = calloc(inv->n ? inv->n : 1, sizeof(*targeted));
    ms = calloc(nm ? nm : 1, sizeof(*ms));
    if (!s.resources || !targeted || !ms) {
        rc = -ENOMEM;
        goto out;
    }
    for (size_t k = 0; k < p->n_targeted; k++) {
        const struct rf_inventory_entry *e;
        struct rf_resource_key key = {.generation = inv->generation,
                                      .tensor_index = p->targeted[k]};
        rc = rf_inventory_lookup(inv, key, &e);
        if (rc < 0) {
            rc = -ENOENT;
            goto out;
        }
        targeted[e - inv->entries] = true;
    }

    /* populations: the union of all ranges and of the targeted ranges, per mapping */
    for (size_t i = 0; i < inv->n; i++) {
        const struct rf_inventory_entry *e = &inv->entries[i];
        struct rf_residency_resource *r = &s.resources[i];
        r->key = e->key;
        r->targeted = targeted[i];
        r->mapping_index = -1;
        if (targeted[i])
            s.coverage.selected_resources++;
        if (!has_pages(inv, e))
            continue;
        r->mapping_index = e->mapping_index;
        r->pages = e->pages;
        struct mstate *m = &ms[e->mapping_index];
        if ((rc = rf_interval_set_add(&m->all, e->pages)) < 0 ||
            (targeted[i] && (rc = rf_interval_set_add(&m->targeted, e->pages)) < 0))
            goto out;
    }

    /* 1. choose: targeted first, then the rest, each in inventory order */
    uint64_t budget_left = p->page_budget_pages;
    for (int pass = 0; pass < 2 && p->sample; pass++) {
        for (size_t i = 0; i < inv->n; i++) {
            const struct rf_inventory_entry *e = &inv->entries[i];
            if (targeted[i] != (pass == 0) || !has_pages(inv, e))
                continue;
            rc = choose_pages(&ms[e->mapping_index], e->pages, &budget_left,
                              &s.coverage.budget_exhausted);
            if (rc < 0)
                goto out;
        }
    }

    /* 2. sample */
    states = malloc(RF_PAGE_WINDOW_PAGES);
    if (!states) {
        rc = -ENOMEM;
        goto out;
    }
    for (size_t mi = 0; mi < nm && p->sample; mi++) {
        rc = sample_mapping(&ms[mi], (int32_t)mi, p, states, &s);
        if (rc < 0)
            goto out;
    }

    /* 3. count: resources */
    for (size_t i = 0; i < inv->n; i++) {
        struct rf_residency_resource *r = &s.resources[i];
        if (r->mapping_index < 0) {
            r->sampled = RF_SAMPLED_NO_PAGES;
        } else {
            count_range(&ms[r->mapping_index], r->pages, &r->inspected_pages, &r->resident_pages,
                        &r->nonresident_pages);
            uint64_t known = r->resident_pages + r->nonresident_pages;
            r->unknown_pages = rf_page_range_pages(r->pages) - known;
            r->sampled = known == 0              ? RF_SAMPLED_NONE
                         : r->unknown_pages == 0 ? RF_SAMPLED_FULL
                                                 : RF_SAMPLED_PARTIAL;
        }
        if (r->targeted) {
            if (r->sampled == RF_SAMPLED_FULL)
                s.coverage.selected_fully_observed++;
            else if (r->sampled == RF_SAMPLED_PARTIAL)
                s.coverage.selected_partially_observed++;
            else
                s.coverage.selected_not_observed++;
        }
    }

    /* 3. count: populations (general = all - targeted, page for page) */
    struct rf_residency_population *tp = &s.coverage.targeted, *gp = &s.coverage.general;
    for (size_t mi = 0; mi < nm; mi++) {
        struct mstate *m = &ms[mi];
        uint64_t all_pages = rf_interval_set_pages(&m->all);
        uint64_t t_pages = rf_interval_set_pages(&m->targeted);
        uint64_t all_insp = 0, all_res = 0, all_non = 0, t_insp = 0, t_res = 0, t_non = 0;
        for (size_t k = 0; k < m->n_runs; k++) {
            uint64_t n = m->runs[k].end - m->runs[k].first;
            all_insp += n;
            if (m->runs[k].state == RF_PAGE_RESIDENT)
                all_res += n;
            else if (m->runs[k].state == RF_PAGE_NONRESIDENT)
                all_non += n;
        }
        for (size_t k = 0; k < m->targeted.n; k++) {
            uint64_t insp, res, non;
            count_range(m, m->targeted.v[k], &insp, &res, &non);
            t_insp += insp;
            t_res += res;
            t_non += non;
        }
        if (!add_u64(&tp->available_pages, t_pages) || !add_u64(&tp->sampled_pages, t_insp) ||
            !add_u64(&tp->resident_pages, t_res) || !add_u64(&tp->nonresident_pages, t_non) ||
            !add_u64(&gp->available_pages, all_pages - t_pages) ||
            !add_u64(&gp->sampled_pages, all_insp - t_insp) ||
            !add_u64(&gp->resident_pages, all_res - t_res) ||
            !add_u64(&gp->nonresident_pages, all_non - t_non) ||
            !add_u64(&s.coverage.budget_used_pages, all_insp)) {
            rc = -EOVERFLOW;
            goto out;
        }
    }
    finish_population(tp);
    finish_population(gp);
    s.coverage.sampling_complete = tp->unknown_pages == 0 && gp->unknown_pages == 0;
    s.n = inv->n;

    rf_residency_snapshot_free(out);
    *out = s;
    s.resources = NULL;
out:
    free(s.resources);
    for (size_t mi = 0; ms && mi < nm; mi++) {
        rf_interval_set_free(&ms[mi].all);
        rf_interval_set_free(&ms[mi].targeted);
        rf_interval_set_free(&ms[mi].chosen);
        free(ms[mi].runs);
    }
    free(ms);
    free(targeted);
    free(states);
    return rc;
}

/* jansson integers are signed 64-bit: larger values become null. */
static json_t *population_json(const struct rf_residency_population *p)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    json_object_set_new(o, "available_pages", rf_json_u64(true, p->available_pages));
    json_object_set_new(o, "sampled_pages", rf_json_u64(true, p->sampled_pages));
    json_object_set_new(o, "resident_pages", rf_json_u64(true, p->resident_pages));
    json_object_set_new(o, "nonresident_pages", rf_json_u64(true, p->nonresident_pages));
    json_object_set_new(o, "unknown_pages", rf_json_u64(true, p->unknown_pages));
    json_object_set_new(o, "coverage_bp",
                        p->has_coverage ? json_integer(p->coverage_bp) : json_null());
    return o;
}

static json_t *resource_json(const struct rf_residency_resource *r)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    bool pages = r->mapping_index >= 0;
    json_object_set_new(o, "index", json_integer(r->key.tensor_index));
    json_object_set_new(o, "mapping_index", pages ? json_integer(r->mapping_index) : json_null());
    json_object_set_new(o, "first_page",
                        pages ? rf_json_u64(true, r->pages.first_page) : json_null());
    json_object_set_new(o, "end_page", pages ? rf_json_u64(true, r->pages.end_page) : json_null());
    json_object_set_new(o, "inspected_pages", rf_json_u64(true, r->inspected_pages));
    json_object_set_new(o, "resident_pages", rf_json_u64(true, r->resident_pages));
    json_object_set_new(o, "nonresident_pages", rf_json_u64(true, r->nonresident_pages));
    json_object_set_new(o, "unknown_pages", rf_json_u64(true, r->unknown_pages));
    json_object_set_new(o, "sampled", json_string(rf_residency_sampled_name(r->sampled)));
    json_object_set_new(o, "targeted", json_boolean(r->targeted));
    return o;
}

int rf_residency_snapshot_to_json(const struct rf_residency_snapshot *s, bool with_resources,
                                  json_t **out)
{
    const struct rf_residency_coverage *c;
    json_t *o, *cov, *sel, *smp;

    if (!s || !out)
        return -EINVAL;
    *out = NULL;
    c = &s->coverage;
    o = json_object();
    cov = json_object();
    sel = json_object();
    smp = json_object();
    if (!o || !cov || !sel || !smp)
        goto nomem;
    json_object_set_new(o, "source", rf_json_str(s->source));
    json_object_set_new(o, "generation", rf_json_u64(true, s->generation));
    json_object_set_new(o, "page_bytes", rf_json_u64(true, s->page_bytes));

    json_object_set_new(cov, "page_budget_pages", rf_json_u64(true, c->page_budget_pages));
    json_object_set_new(cov, "budget_used_pages", rf_json_u64(true, c->budget_used_pages));
    json_object_set_new(cov, "budget_exhausted", json_boolean(c->budget_exhausted));
    json_object_set_new(cov, "targeted", population_json(&c->targeted));
    json_object_set_new(cov, "general", population_json(&c->general));
    json_object_set_new(sel, "total", rf_json_u64(true, c->selected_resources));
    json_object_set_new(sel, "fully_observed", rf_json_u64(true, c->selected_fully_observed));
    json_object_set_new(sel, "partially_observed",
                        rf_json_u64(true, c->selected_partially_observed));
    json_object_set_new(sel, "not_observed", rf_json_u64(true, c->selected_not_observed));
    json_object_set_new(cov, "selected_resources", sel);
    sel = NULL;
    json_object_set_new(cov, "sampling_complete", json_boolean(c->sampling_complete));
    json_object_set_new(o, "coverage", cov);
    cov = NULL;

    json_object_set_new(smp, "calls", rf_json_u64(true, s->sampler_calls));
    json_object_set_new(smp, "failures", rf_json_u64(true, s->sampler_failures));
    json_object_set_new(smp, "first_error",
                        s->first_sampler_error ? json_string(rf_strerror(s->first_sampler_error))
                                               : json_null());
    json_object_set_new(o, "sampler", smp);
    smp = NULL;

    if (with_resources) {
        json_t *a = json_array();
        if (!a)
            goto nomem;
        for (size_t i = 0; i < s->n; i++)
            if (json_array_append_new(a, resource_json(&s->resources[i])) < 0) {
                json_decref(a);
                goto nomem;
            }
        json_object_set_new(o, "resources", a);
    }
    *out = o;
    return 0;
nomem:
    json_decref(o);
    json_decref(cov);
    json_decref(sel);
    json_decref(smp);
    return -ENOMEM;
}
