/*
 * Policy profiles and release planning: picks eligible tensors in a
 * deterministic order and works out which file pages the selection may
 * release without taking a page from an unselected tensor.
 *
 * Expected workload: one plan per safe boundary over an inventory of a few
 * hundred to tens of thousands of tensors, in one or a few mappings.
 *
 * Page arithmetic. All page-range endpoints of file-backed entries, as
 * (mapping, page) points, are sorted once; consecutive points bound
 * elementary segments, and every segment is covered by the same set of
 * tensors throughout. Per segment the plan keeps
 *
 *   cover[k]  file-backed entries covering segment k (fixed)
 *   sel[k]    selected entries covering it (grows with the selection)
 *
 * and segment k is released exactly when 0 < sel[k] == cover[k]: some
 * selected tensor covers it and no unselected one does. Selecting a tensor
 * bumps sel[] over its segments, so the running release size (what the
 * target test needs after each pick) costs O(segments of that tensor), not
 * a rebuild. Segments with 0 < sel[k] < cover[k] are the protected shared
 * pages.
 */
#include "ramforge/core/policy.h"
#include "ramforge/core/search.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ramforge/error.h"

/* ---- profiles ---------------------------------------------------------- */

static const char *const profile_names[] = {
    [RF_POLICY_OFF] = "off",
    [RF_POLICY_OBSERVE] = "observe",
    [RF_POLICY_CONSERVATIVE] = "conservative",
    [RF_POLICY_MEMORY_BOUND] = "memory-bound",
    [RF_POLICY_REUSE_AWARE] = "reuse-aware",
    [RF_POLICY_ACTIVE] = "active",
    [RF_POLICY_STREAMING] = "streaming",
};

#define N_PROFILES (sizeof(profile_names) / sizeof(profile_names[0]))

static bool profile_valid(enum rf_policy_profile p)
{
    return (unsigned)p < N_PROFILES;
}

int rf_policy_parse(const char *name, enum rf_policy_profile *out)
{
    size_t i;

    if (!name || !out)
        return -EINVAL;
    for (i = 0; i < N_PROFILES; i++) {
        if (strcmp(name, profile_names[i]) == 0) {
            *out = (enum rf_policy_profile)i;
            return 0;
        }
    }
    return -EINVAL;
}

const char *rf_policy_name(enum rf_policy_profile p)
{
    return profile_valid(p) ? profile_names[p] : NULL;
}

bool rf_policy_plans(enum rf_policy_profile p)
{
    return profile_valid(p) && p != RF_POLICY_OFF;
}

bool rf_policy_mutates(enum rf_policy_profile p)
{
    return p == RF_POLICY_CONSERVATIVE || p == RF_POLICY_MEMORY_BOUND ||
           p == RF_POLICY_REUSE_AWARE || p == RF_POLICY_ACTIVE;
}

bool rf_policy_requires_target(enum rf_policy_profile p)
{
    return p == RF_POLICY_MEMORY_BOUND || p == RF_POLICY_ACTIVE;
}

int rf_release_mode_parse(const char *name, enum rf_release_mode *out)
{
    if (!name || !out)
        return -EINVAL;
    if (strcmp(name, "dontneed") == 0)
        *out = RF_RELEASE_DONTNEED;
    else if (strcmp(name, "pageout") == 0)
        *out = RF_RELEASE_PAGEOUT;
    else
        return -EINVAL;
    return 0;
}

const char *rf_release_mode_name(enum rf_release_mode m)
{
    return m == RF_RELEASE_DONTNEED ? "dontneed" : m == RF_RELEASE_PAGEOUT ? "pageout" : NULL;
}

/* ---- plan lifecycle ---------------------------------------------------- */

struct rf_plan_params rf_plan_default_params(void)
{
    struct rf_plan_params p;

    memset(&p, 0, sizeof(p));
    p.profile = RF_POLICY_OFF;
    p.binding_ok = false;
    p.binding_reason = NULL;
    p.profile_order = NULL;
    return p;
}

void rf_plan_init(struct rf_plan *plan)
{
    memset(plan, 0, sizeof(*plan));
}

void rf_plan_free(struct rf_plan *plan)
{
    if (!plan)
        return;
    free(plan->selected);
    free(plan->release);
    rf_plan_init(plan);
}

/* ---- segments ---------------------------------------------------------- */

/* A page-range endpoint of a file-backed entry. */
struct seg_point {
    int32_t mapping; /* mapping index */
    uint64_t page;   /* file page */
};

static int seg_point_cmp(const void *pa, const void *pb)
{
    const struct seg_point *a = pa, *b = pb;

    if (a->mapping != b->mapping)
        return a->mapping < b->mapping ? -1 : 1;
    if (a->page != b->page)
        return a->page < b->page ? -1 : 1;
    return 0;
}

/*
 * The segment structure of the file-backed entries:
 *   pt[0..n_pt)   sorted, unique points; segment k is [pt[k], pt[k + 1]),
 *                 meaningful when both points lie in one mapping
 *   cover[k]      file-backed entries covering segment k
 *   sel[k]        selected entries covering segment k
 */
struct segs {
    struct seg_point *pt;
    size_t n_pt;
    size_t *cover;
    size_t *sel;
};

static void segs_free(struct segs *s)
{
    free(s->pt);
    free(s->cover);
    free(s->sel);
    memset(s, 0, sizeof(*s));
}

/* An entry that owns pages: file-backed with a non-empty range. */
static bool has_pages(const struct rf_inventory_entry *e)
{
    return e->file_backed && e->pages.end_page > e->pages.first_page;
}

/* A point to search s->pt for. */
struct seg_key {
    const struct segs *s;
    struct seg_point point;
};

static bool seg_at_least(const void *ctx, size_t i)
{
    const struct seg_key *k = ctx;
    return seg_point_cmp(&k->s->pt[i], &k->point) >= 0;
}

/* Position of point (m, page) in s->pt; the caller knows it is there. */
static size_t segs_find(const struct segs *s, int32_t m, uint64_t page)
{
    struct seg_key k = {s, {m, page}};
    return rf_partition_point(s->n_pt, seg_at_least, &k);
}

/* Builds s over inv's entries that own pages. Errors: -ENOMEM. */
static int segs_build(const struct rf_inventory *inv, struct segs *s)
{
    size_t i, j, n = 0, bytes;

    memset(s, 0, sizeof(*s));
    for (i = 0; i < inv->n; i++)
        n += has_pages(&inv->entries[i]) ? 2 : 0;
    if (n == 0)
        return 0;
    if (__builtin_mul_overflow(n, sizeof(*s->pt), &bytes))
        return -ENOMEM;
    s->pt = malloc(bytes);
    s->cover = calloc(n, sizeof(*s->cover));
    s->sel = calloc(n, sizeof(*s->sel));
    if (!s->pt || !s->cover || !s->sel)
        return -ENOMEM;

    for (i = 0; i < inv->n; i++) {
        const struct rf_inventory_entry *e = &inv->entries[i];

        if (!has_pages(e))
            continue;
        s->pt[s->n_pt++] = (struct seg_point){e->mapping_index, e->pages.first_page};
        s->pt[s->n_pt++] = (struct seg_point){e->mapping_index, e->pages.end_page};
    }
    qsort(s->pt, s->n_pt, sizeof(*s->pt), seg_point_cmp);
    for (i = 1, j = 1; i < s->n_pt; i++) {
        if (seg_point_cmp(&s->pt[i], &s->pt[j - 1]) != 0)
            s->pt[j++] = s->pt[i];
    }
    s->n_pt = j;

    /* cover[] as a difference array over point positions, then prefix sums. */
    for (i = 0; i < inv->n; i++) {
        const struct rf_inventory_entry *e = &inv->entries[i];

        if (!has_pages(e))
            continue;
        s->cover[segs_find(s, e->mapping_index, e->pages.first_page)]++;
        s->cover[segs_find(s, e->mapping_index, e->pages.end_page)]--; /* wraps, then back */
    }
    for (i = 1; i < s->n_pt; i++)
        s->cover[i] += s->cover[i - 1];
    return 0;
}

static uint64_t seg_pages(const struct segs *s, size_t k)
{
    return s->pt[k + 1].page - s->pt[k].page;
}

/*
 * Marks e selected and adds the pages it turns into released pages (those
 * whose last unselected coverer it was) to *release_pages.
 * Errors: -EOVERFLOW.
 */
static int segs_select(struct segs *s, const struct rf_inventory_entry *e, uint64_t *release_pages)
{
    size_t k = segs_find(s, e->mapping_index, e->pages.first_page);
    size_t end = segs_find(s, e->mapping_index, e->pages.end_page);

    for (; k < end; k++) {
        s->sel[k]++;
        if (s->sel[k] == s->cover[k] &&
            __builtin_add_overflow(*release_pages, seg_pages(s, k), release_pages))
            return -EOVERFLOW;
    }
    return 0;
}

/*
 * Writes the released segments, merged, into plan->release and the
 * protected page count into *protected_pages. Errors: -ENOMEM, -EOVERFLOW.
 */
static int segs_emit(const struct segs *s, struct rf_plan *plan, uint64_t *protected_pages)
{
    size_t k, n = 0;

    *protected_pages = 0;
    for (k = 0; k + 1 < s->n_pt; k++) {
        if (s->sel[k] > 0 && s->sel[k] < s->cover[k] &&
            __builtin_add_overflow(*protected_pages, seg_pages(s, k), protected_pages))
            return -EOVERFLOW;
        if (s->sel[k] > 0 && s->sel[k] == s->cover[k])
            n++;
    }
    if (n == 0)
        return 0;
    plan->release = calloc(n, sizeof(*plan->release));
    if (!plan->release)
        return -ENOMEM;
    for (k = 0; k + 1 < s->n_pt; k++) {
        struct rf_file_range *last = plan->n_release ? &plan->release[plan->n_release - 1] : NULL;

        if (!(s->sel[k] > 0 && s->sel[k] == s->cover[k]))
            continue;
        if (last && last->mapping_index == s->pt[k].mapping &&
            last->pages.end_page == s->pt[k].page) {
            last->pages.end_page = s->pt[k + 1].page;
            continue;
        }
        plan->release[plan->n_release].mapping_index = s->pt[k].mapping;
        plan->release[plan->n_release].pages.first_page = s->pt[k].page;
        plan->release[plan->n_release].pages.end_page = s->pt[k + 1].page;
        plan->n_release++;
    }
    return 0;
}

/* ---- candidates -------------------------------------------------------- */

#define NO_RANK RF_INVENTORY_NO_RANK /* not named by the access profile */

/* A candidate with its sort keys. */
struct cand {
    size_t pos;      /* position in inv->entries */
    bool dead;       /* RF_ELIGIBLE_DEAD_FILE_PAGES */
    size_t rank;     /* position in the access profile, NO_RANK when not used */
    uint64_t unique; /* unique_reclaimable_bytes */
    uint32_t index;  /* tensor index: the final tie-break */
};

/* Dead first; then profile rank; then largest unique first; then index. */
static int cand_cmp(const void *pa, const void *pb)
{
    const struct cand *a = pa, *b = pb;

    if (a->dead != b->dead)
        return a->dead ? -1 : 1;
    if (a->rank != b->rank)
        return a->rank < b->rank ? -1 : 1;
    if (a->unique != b->unique)
        return a->unique > b->unique ? -1 : 1;
    if (a->index != b->index)
        return a->index < b->index ? -1 : 1;
    return 0;
}

/*
 * Maps the access profile onto entry positions: rank[pos] is the tensor's
 * place in profile_order, NO_RANK when absent. Returns 0 (*rank_out NULL
 * when the profile is empty or not valid: why in why[]), -ENOMEM.
 */
static int profile_ranks(const struct rf_inventory *inv, const struct rf_plan_params *p,
                         size_t **rank_out, char *why, size_t why_size)
{
    uint32_t bad;
    bool twice;
    int rc;

    *rank_out = NULL;
    if (p->n_profile_order == 0) {
        snprintf(why, why_size, "empty access profile ignored");
        return 0;
    }
    rc = rf_inventory_rank(inv, p->profile_order, p->n_profile_order, rank_out, &bad, &twice);
    if (rc == 0 && !*rank_out)
        snprintf(why, why_size, "access profile ignored: tensor %" PRIu32 " %s", bad,
                 twice ? "named twice" : "not in inventory");
    return rc;
}

/* ---- the plan ---------------------------------------------------------- */

/* How the selection loop runs. */
enum sel_mode {
    SEL_NONE,         /* select nothing */
    SEL_ALL,          /* every candidate (they are all dead-file-pages ones) */
    SEL_UNTIL_TARGET, /* in order while the estimate is above the soft target */
};

static int check_params(const struct rf_inventory *inv, const struct rf_plan_params *p)
{
    if (!profile_valid(p->profile) || (!p->profile_order && p->n_profile_order > 0))
        return -EINVAL;
    if (rf_policy_requires_target(p->profile) && !p->has_target)
        return -EINVAL;
    if (p->has_target && p->reserve_bytes >= p->target_bytes)
        return -EINVAL;
    return rf_inventory_check(inv);
}

static uint64_t estimate_after(uint64_t resident_bytes, uint64_t release_bytes)
{
    return resident_bytes > release_bytes ? resident_bytes - release_bytes : 0;
}

/*
 * Work arrays, owned by the build: cands (the ordered candidates), rank
 * (access profile positions, per entry), segs. On error *out is unchanged.
 */
int rf_plan_build(const struct rf_inventory *inv, const struct rf_plan_params *p,
                  struct rf_plan *out)
{
    struct rf_plan plan;
    struct segs segs;
    struct cand *cands = NULL;
    size_t *rank = NULL, n_cands = 0, i;
    enum sel_mode mode = SEL_NONE;
    const char *name;
    char why_profile[RF_ERR_MAX] = "", why_none[RF_ERR_MAX] = "";
    bool conservative, dead_only, have_profile = false;
    uint64_t release_pages = 0, release_bytes = 0, protected_pages = 0;
    int rc;

    rf_plan_init(&plan);
    memset(&segs, 0, sizeof(segs));
    if (!inv || !p || !out)
        return -EINVAL;
    rc = check_params(inv, p);
    if (rc < 0)
        return rc;
    name = rf_policy_name(p->profile);
    conservative = p->profile == RF_POLICY_CONSERVATIVE;

    plan.profile = p->profile;
    plan.generation = inv->generation;
    plan.page_bytes = inv->page_bytes;
    plan.applied_profile = rf_policy_mutates(p->profile);
    plan.has_soft_target = p->has_target;
    if (p->has_target)
        plan.soft_target_bytes = p->target_bytes - p->reserve_bytes; /* reserve < target */

    /* The selection mode, or why there is none. */
    dead_only = p->dead_pages_only;
    if (p->profile == RF_POLICY_OFF) {
        snprintf(why_none, sizeof(why_none), "policy off: no plan");
    } else if (!p->binding_ok) {
        snprintf(why_none, sizeof(why_none), "%s",
                 p->binding_reason ? p->binding_reason : "native binding refused selection");
    } else if (dead_only) {
        /* Dead file pages cost nothing to lose: all of them, whatever the target. */
        mode = SEL_ALL;
    } else if (conservative && !p->has_target) {
        mode = SEL_ALL;
        dead_only = true;
    } else if (conservative && !p->has_mapping_resident) {
        mode = SEL_ALL;
        dead_only = true;
        snprintf(why_profile, sizeof(why_profile),
                 "mapping resident bytes not measured: dead-file-pages candidates only");
    } else if (!p->has_target) {
        snprintf(why_none, sizeof(why_none), "%s: no target given; nothing selected", name);
    } else if (!p->has_mapping_resident) {
        snprintf(why_none, sizeof(why_none),
                 "%s: mapping resident bytes not measured; cannot plan toward the target", name);
    } else {
        mode = SEL_UNTIL_TARGET;
    }

    if (mode != SEL_NONE && p->profile == RF_POLICY_REUSE_AWARE) {
        if (p->profile_order) {
            rc = profile_ranks(inv, p, &rank, why_profile, sizeof(why_profile));
            if (rc < 0)
                goto out;
            have_profile = rank != NULL;
        } else {
            snprintf(why_profile, sizeof(why_profile), "no access profile: memory-bound order");
        }
        plan.profile_used = have_profile;
    }

    /* Candidates, ordered. */
    if (mode != SEL_NONE && inv->n > 0) {
        cands = calloc(inv->n, sizeof(*cands));
        if (!cands) {
            rc = -ENOMEM;
            goto out;
        }
    }
    for (i = 0; mode != SEL_NONE && i < inv->n; i++) {
        const struct rf_inventory_entry *e = &inv->entries[i];
        bool dead = e->eligibility == RF_ELIGIBLE_DEAD_FILE_PAGES;

        if (e->key.generation != inv->generation || !has_pages(e) ||
            (e->eligibility != RF_ELIGIBLE && !dead) || (dead_only && !dead) ||
            (p->exclude && p->exclude[i]) ||
            (conservative && !p->dead_pages_only && e->shared_page_bytes != 0))
            continue;
        cands[n_cands].pos = i;
        cands[n_cands].dead = dead;
        cands[n_cands].rank = rank && !dead ? rank[i] : NO_RANK;
        cands[n_cands].unique = e->unique_reclaimable_bytes;
        cands[n_cands].index = e->key.tensor_index;
        n_cands++;
    }
    if (n_cands > 1)
        qsort(cands, n_cands, sizeof(*cands), cand_cmp);
    plan.n_candidates = n_cands;

    /* Select. */
    rc = segs_build(inv, &segs);
    if (rc < 0)
        goto out;
    if (n_cands > 0) {
        plan.selected = calloc(n_cands, sizeof(*plan.selected));
        if (!plan.selected) {
            rc = -ENOMEM;
            goto out;
        }
    }
    for (i = 0; i < n_cands; i++) {
        const struct rf_inventory_entry *e = &inv->entries[cands[i].pos];

        if (mode == SEL_UNTIL_TARGET &&
            estimate_after(p->mapping_resident_bytes, release_bytes) <= plan.soft_target_bytes)
            break;
        rc = segs_select(&segs, e, &release_pages);
        if (rc < 0)
            goto out;
        if (__builtin_mul_overflow(release_pages, inv->page_bytes, &release_bytes) ||
            __builtin_add_overflow(plan.selected_logical_bytes, e->logical_bytes,
                                   &plan.selected_logical_bytes)) {
            rc = -EOVERFLOW;
            goto out;
        }
        plan.selected[plan.n_selected++] = e->key.tensor_index;
        plan.n_shared_dead_selected +=
            conservative && p->dead_pages_only && e->shared_page_bytes != 0;
    }

    /* Release ranges and the figures derived from them. */
    rc = segs_emit(&segs, &plan, &protected_pages);
    if (rc < 0)
        goto out;
    plan.release_pages = release_pages;
    plan.release_bytes = release_bytes;
    if (__builtin_mul_overflow(protected_pages, inv->page_bytes, &plan.shared_bytes_protected)) {
        rc = -EOVERFLOW;
        goto out;
    }
    plan.has_estimated_resident_after = p->has_mapping_resident;
    if (p->has_mapping_resident)
        plan.estimated_resident_after_bytes =
            estimate_after(p->mapping_resident_bytes, release_bytes);
    plan.target_met = plan.has_soft_target && plan.has_estimated_resident_after &&
                      plan.estimated_resident_after_bytes <= plan.soft_target_bytes;

    /* The reason line. */
    if (mode == SEL_NONE) {
        snprintf(plan.reason, sizeof(plan.reason), "%s", why_none);
    } else {
        int len = snprintf(plan.reason, sizeof(plan.reason),
                           "%s: selected %zu of %zu candidates, %" PRIu64 " bytes to release", name,
                           plan.n_selected, n_cands, release_bytes);
        size_t at = len < 0 ? 0 : (size_t)len;

        if (at < sizeof(plan.reason) && plan.has_soft_target && plan.has_estimated_resident_after)
            at += (size_t)snprintf(plan.reason + at, sizeof(plan.reason) - at,
                                   "; estimated resident after %" PRIu64
                                   " bytes %s soft target %" PRIu64 " bytes",
                                   plan.estimated_resident_after_bytes,
                                   plan.target_met ? "<=" : ">", plan.soft_target_bytes);
        if (at < sizeof(plan.reason) && why_profile[0])
            at += (size_t)snprintf(plan.reason + at, sizeof(plan.reason) - at, "; %s", why_profile);
        if (at < sizeof(plan.reason) && plan.n_shared_dead_selected)
            at += (size_t)snprintf(
                plan.reason + at, sizeof(plan.reason) - at,
                "; conservative's rule (only tensors with zero shared page bytes) is waived for "
                "dead file pages, never read again: %zu of the selected share pages, and a page "
                "shared with a tensor not selected is kept (shared_bytes_protected)",
                plan.n_shared_dead_selected);
        if (at < sizeof(plan.reason) && !plan.applied_profile)
            snprintf(plan.reason + at, sizeof(plan.reason) - at, " (inspection only)");
    }

    rf_plan_free(out);
    *out = plan;
    rf_plan_init(&plan);
out:
    segs_free(&segs);
    free(rank);
    free(cands);
    rf_plan_free(&plan);
    return rc;
}
