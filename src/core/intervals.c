/*
 * Page ranges and interval sets: the arithmetic under the inventory, the
 * shared-page dedup and staging.
 *
 * The workload is a model's tensor table: a few hundred to a few tens of
 * thousands of ranges per mapping, added mostly in file order. Sets are a
 * sorted array of disjoint, non-adjacent half-open ranges [first, end), so
 * an add in file order appends and a lookup is a binary search. Nothing here
 * allocates except the set's array; nothing prints.
 */
#include "ramforge/core/intervals.h"
#include "ramforge/core/search.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define RF_SET_MIN_CAP 8 /* first allocation of a set's array, in ranges */

static bool is_pow2(uint64_t x)
{
    return x != 0 && (x & (x - 1)) == 0;
}

/* The end byte of [offset, offset + len), checked against page_bytes. */
static int range_end_bytes(uint64_t offset_bytes, uint64_t len_bytes, uint64_t page_bytes,
                           uint64_t *end_bytes)
{
    if (!is_pow2(page_bytes))
        return -EINVAL;
    if (__builtin_add_overflow(offset_bytes, len_bytes, end_bytes))
        return -EOVERFLOW;
    return 0;
}

/* ceil(x / d) without forming x + d - 1 (which can overflow). */
static uint64_t div_ceil(uint64_t x, uint64_t d)
{
    return x / d + (x % d != 0);
}

/* The pages of [offset, offset + len): outward every page it touches, inward whole ones only. */
static int page_range(uint64_t offset_bytes, uint64_t len_bytes, uint64_t page_bytes, bool outward,
                      struct rf_page_range *out)
{
    uint64_t end_bytes;
    int rc = range_end_bytes(offset_bytes, len_bytes, page_bytes, &end_bytes);

    if (rc < 0)
        return rc;
    if (outward) {
        out->first_page = offset_bytes / page_bytes;
        out->end_page = len_bytes == 0 ? out->first_page : div_ceil(end_bytes, page_bytes);
        return 0;
    }
    out->first_page = div_ceil(offset_bytes, page_bytes);
    out->end_page = end_bytes / page_bytes;
    if (out->end_page < out->first_page) /* no whole page inside: empty */
        out->end_page = out->first_page;
    return 0;
}

int rf_page_range_outward(uint64_t offset_bytes, uint64_t len_bytes, uint64_t page_bytes,
                          struct rf_page_range *out)
{
    return page_range(offset_bytes, len_bytes, page_bytes, true, out);
}

int rf_page_range_inward(uint64_t offset_bytes, uint64_t len_bytes, uint64_t page_bytes,
                         struct rf_page_range *out)
{
    return page_range(offset_bytes, len_bytes, page_bytes, false, out);
}

struct rf_page_range rf_page_range_intersect(struct rf_page_range a, struct rf_page_range b)
{
    struct rf_page_range r;

    r.first_page = a.first_page > b.first_page ? a.first_page : b.first_page;
    r.end_page = a.end_page < b.end_page ? a.end_page : b.end_page;
    if (r.end_page < r.first_page)
        r.end_page = r.first_page;
    return r;
}

void rf_interval_set_init(struct rf_interval_set *s)
{
    s->v = NULL;
    s->n = 0;
    s->cap = 0;
}

void rf_interval_set_free(struct rf_interval_set *s)
{
    if (!s)
        return;
    free(s->v);
    rf_interval_set_init(s);
}

/* Makes room for at least `need` ranges. Errors: -ENOMEM. */
static int set_reserve(struct rf_interval_set *s, size_t need)
{
    struct rf_page_range *nv;
    size_t cap, bytes;

    if (need <= s->cap)
        return 0;
    cap = s->cap ? s->cap : RF_SET_MIN_CAP;
    while (cap < need) {
        if (__builtin_mul_overflow(cap, (size_t)2, &cap))
            return -ENOMEM;
    }
    if (__builtin_mul_overflow(cap, sizeof(*nv), &bytes))
        return -ENOMEM;
    nv = realloc(s->v, bytes);
    if (!nv)
        return -ENOMEM;
    s->v = nv;
    s->cap = cap;
    return 0;
}

/* A page to search the ranges of s for. */
struct end_key {
    const struct rf_interval_set *s;
    uint64_t page;
};

static bool end_at_least(const void *ctx, size_t i)
{
    const struct end_key *k = ctx;
    return k->s->v[i].end_page >= k->page;
}

static bool end_above(const void *ctx, size_t i)
{
    const struct end_key *k = ctx;
    return k->s->v[i].end_page > k->page;
}

/* Index of the first range whose end_page >= page (so n when there is none). */
static size_t first_end_at_least(const struct rf_interval_set *s, uint64_t page)
{
    struct end_key k = {s, page};
    return rf_partition_point(s->n, end_at_least, &k);
}

size_t rf_interval_set_first_end_above(const struct rf_interval_set *s, uint64_t page)
{
    struct end_key k = {s, page};
    return rf_partition_point(s->n, end_above, &k);
}

/*
 * Ranges i..j-1 are those that overlap or touch r (end >= r.first and
 * first <= r.end); they and r collapse into one range at index i.
 */
int rf_interval_set_add(struct rf_interval_set *s, struct rf_page_range r)
{
    size_t i, j;
    int rc;

    if (r.end_page <= r.first_page)
        return 0;
    i = first_end_at_least(s, r.first_page);
    j = i;
    while (j < s->n && s->v[j].first_page <= r.end_page)
        j++;

    if (i == j) { /* nothing to merge: insert at i */
        rc = set_reserve(s, s->n + 1);
        if (rc < 0)
            return rc;
        memmove(&s->v[i + 1], &s->v[i], (s->n - i) * sizeof(s->v[0]));
        s->v[i] = r;
        s->n++;
        return 0;
    }

    if (s->v[i].first_page < r.first_page)
        r.first_page = s->v[i].first_page;
    if (s->v[j - 1].end_page > r.end_page)
        r.end_page = s->v[j - 1].end_page;
    s->v[i] = r;
    memmove(&s->v[i + 1], &s->v[j], (s->n - j) * sizeof(s->v[0]));
    s->n -= j - i - 1;
    return 0;
}

uint64_t rf_interval_set_pages(const struct rf_interval_set *s)
{
    uint64_t pages = 0;
    size_t i;

    /* Disjoint ranges below 2^64: the sum cannot exceed UINT64_MAX. */
    for (i = 0; i < s->n; i++)
        pages += rf_page_range_pages(s->v[i]);
    return pages;
}

uint64_t rf_interval_set_overlap_pages(const struct rf_interval_set *s, struct rf_page_range r)
{
    uint64_t pages = 0;
    size_t i;

    if (r.end_page <= r.first_page)
        return 0;
    for (i = rf_interval_set_first_end_above(s, r.first_page);
         i < s->n && s->v[i].first_page < r.end_page; i++)
        pages += rf_page_range_pages(rf_page_range_intersect(s->v[i], r));
    return pages;
}

bool rf_interval_set_contains(const struct rf_interval_set *s, uint64_t page)
{
    size_t i = rf_interval_set_first_end_above(s, page);

    return i < s->n && s->v[i].first_page <= page;
}

/* A sweep-line event: coverage changes by delta at page pos. */
struct cover_event {
    uint64_t pos;
    int delta; /* +1 at a range's first page, -1 at its end page */
};

static int cover_event_cmp(const void *pa, const void *pb)
{
    const struct cover_event *a = pa, *b = pb;

    if (a->pos != b->pos)
        return a->pos < b->pos ? -1 : 1;
    return a->delta - b->delta;
}

/*
 * Sort the 2n endpoints, then walk them keeping the number of ranges that
 * cover the current page; every stretch [pos, next pos) with coverage >= 2
 * joins the result. Segments come out in increasing order, so each add
 * appends (or merges with the last range). On error *out is left as it was.
 */
int rf_interval_multi_covered(const struct rf_page_range *ranges, size_t n,
                              struct rf_interval_set *out)
{
    struct rf_interval_set res;
    struct cover_event *ev = NULL;
    size_t n_ev = 0, bytes, i, depth = 0;
    int rc = 0;

    rf_interval_set_init(&res);
    if (__builtin_mul_overflow(n, 2 * sizeof(*ev), &bytes)) {
        rc = -ENOMEM;
        goto out;
    }
    if (n > 0) {
        ev = malloc(bytes);
        if (!ev) {
            rc = -ENOMEM;
            goto out;
        }
    }
    for (i = 0; i < n; i++) {
        if (ranges[i].end_page <= ranges[i].first_page)
            continue;
        ev[n_ev++] = (struct cover_event){ranges[i].first_page, +1};
        ev[n_ev++] = (struct cover_event){ranges[i].end_page, -1};
    }
    if (n_ev > 1)
        qsort(ev, n_ev, sizeof(*ev), cover_event_cmp);

    for (i = 0; i < n_ev;) {
        uint64_t pos = ev[i].pos;

        while (i < n_ev && ev[i].pos == pos) {
            if (ev[i].delta > 0)
                depth++;
            else
                depth--;
            i++;
        }
        if (depth >= 2 && i < n_ev) { /* depth > 0 implies a later end event */
            rc = rf_interval_set_add(&res, (struct rf_page_range){pos, ev[i].pos});
            if (rc < 0)
                goto out;
        }
    }

    rf_interval_set_free(out);
    *out = res;
    rf_interval_set_init(&res);
out:
    rf_interval_set_free(&res);
    free(ev);
    return rc;
}
