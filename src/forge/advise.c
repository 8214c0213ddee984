/*
 * The one advise loop under release (release.c: MADV_DONTNEED or
 * MADV_PAGEOUT), prefetch (prefetch.c: MADV_WILLNEED) and the streaming
 * policy's pins (pin.c: mlock, munlock): argument checks,
 * the exclusive side of the execution gate, one fresh read of
 * /proc/self/maps, per-range validation, checked byte sums, the shared-page
 * protection of release, and madvise in bounded chunks.
 *
 * Validation. A range is advised only when it lies wholly inside r--s
 * VMAs of the model file (same dev+inode) that follow one another without
 * a gap, at the file offsets it claims: one VMA, or the pieces that mlock
 * and madvise split it into (the streaming policy's pins and hints do; a
 * VM_NOHUGEPAGE flag outlives its pins). A range that is not validated is
 * never touched: madvise on the anonymous CPU_REPACK copy of a weight
 * corrupts inference.
 *
 * Protection. A page holding bytes of two or more of the model's
 * file-backed tensors is left alone when one of those tensors has a page
 * of its own (holding no other tensor's bytes) that is not requested: that
 * tensor is outside the request, and its bytes must stay mapped. A release
 * plan of the policy (policy.h) never meets this rule, since it requests
 * every own page of the tensors it selected and no page of an unselected
 * one; a direct caller asking for the outward pages of one tensor does.
 *
 * Expected workload: one call per safe boundary (release) or before
 * inference (prefetch), a few to a few thousand ranges over a model of a
 * few hundred to tens of thousands of tensors; the protection costs one
 * sort of the tensor table per call, nothing beside the madvise calls.
 */
#include "forge_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "ramforge/core/intervals.h"
#include "ramforge/sys/pages.h"
#include "ramforge/sys/sys.h"

/* One requested range after validation. */
struct checked_range {
    uint64_t va;  /* address of its first page; 0 when refused or empty */
    uint64_t len; /* bytes; 0 when empty or on -EOVERFLOW */
    int err;      /* 0, or why it is refused (-EFAULT, -EOVERFLOW) */
    bool advise;  /* validated and non-empty: pass 2 advises it */
};

/*
 * Whether [va, va + len) (len > 0, va + len checked by the caller) is
 * covered by r--s VMAs of the model file in maps (address order) that
 * follow one another without a gap, each at the file offset continuing
 * file_off.
 */
static bool covered_by_file(const struct forge_model *m, const struct rfsys_maps *maps, uint64_t va,
                            uint64_t len, uint64_t file_off)
{
    const struct rf_mapping_meta *mm = &m->mapping;
    uint64_t cur = va, end = va + len;

    for (size_t i = 0; i < maps->n && cur < end; i++) {
        const struct rfsys_mapping *v = &maps->v[i];

        if (v->end_addr <= cur)
            continue;
        if (v->start_addr > cur || strcmp(v->perms, "r--s") != 0 || v->inode != mm->inode ||
            v->dev_major != mm->dev_major || v->dev_minor != mm->dev_minor ||
            v->offset_bytes + (cur - v->start_addr) != file_off + (cur - va))
            return false; /* a gap, another mapping, or other offsets */
        cur = v->end_addr;
    }
    return cur >= end;
}

/*
 * Validates the non-empty range r into *c: inside the validated mapping
 * fragment and, in maps, wholly inside gapless r--s VMAs of the model file
 * at the file offsets it claims (covered_by_file). c->len is the range's length whenever it fits
 * in 64 bits (-EOVERFLOW: it does not, len 0).
 */
static void validate(const struct forge_model *m, const struct rfsys_maps *maps,
                     const struct rf_file_range *r, uint64_t page_bytes, struct checked_range *c)
{
    const struct rf_mapping_meta *mm = &m->mapping;
    uint64_t file_off, len, va;

    memset(c, 0, sizeof(*c));
    if (__builtin_mul_overflow(r->pages.first_page, page_bytes, &file_off) ||
        __builtin_mul_overflow(r->pages.end_page - r->pages.first_page, page_bytes, &len)) {
        c->err = -EOVERFLOW;
        return;
    }
    c->len = len;
    if (r->mapping_index != 0 || !mm->validated || file_off < mm->map_offset_bytes ||
        len > mm->map_length_bytes ||
        file_off - mm->map_offset_bytes > mm->map_length_bytes - len) {
        c->err = -EFAULT;
        return;
    }
    va = (uint64_t)m->map_start + (file_off - mm->map_offset_bytes);
    if (!covered_by_file(m, maps, va, len, file_off)) {
        c->err = -EFAULT;
        return;
    }
    c->va = va;
    c->advise = true;
}

/* Adds every range of src to *dst. Errors: -ENOMEM. */
static int set_add_all(struct rf_interval_set *dst, const struct rf_interval_set *src)
{
    for (size_t i = 0; i < src->n; i++) {
        int rc = rf_interval_set_add(dst, src->v[i]);

        if (rc < 0)
            return rc;
    }
    return 0;
}

/* Adds r ∩ (each range of s) to *dst. Errors: -ENOMEM. */
static int set_add_intersection(struct rf_interval_set *dst, const struct rf_interval_set *s,
                                struct rf_page_range r)
{
    for (size_t j = rf_interval_set_first_end_above(s, r.first_page);
         j < s->n && s->v[j].first_page < r.end_page; j++) {
        int rc = rf_interval_set_add(dst, rf_page_range_intersect(s->v[j], r));

        if (rc < 0)
            return rc;
    }
    return 0;
}

/*
 * The pages of req (the validated requested pages) that the protection rule
 * (file-top comment) leaves alone, into *q (initialised, empty). The
 * model's file-backed tensors are those of mapping 0 with a non-empty
 * payload; each owns its outward page range. Errors: -ENOMEM, -EOVERFLOW
 * (a tensor's bytes end past 2^64).
 */
static int protected_pages(const struct forge_model *m, const struct rf_interval_set *req,
                           uint64_t page_bytes, struct rf_interval_set *q)
{
    struct rf_page_range *tr = NULL;
    struct rf_interval_set shared, covered;
    size_t n = 0;
    int rc = 0;

    rf_interval_set_init(&shared);
    rf_interval_set_init(&covered);
    if (req->n == 0 || m->n_tensors == 0)
        return 0;
    tr = calloc(m->n_tensors, sizeof(*tr));
    if (!tr)
        return -ENOMEM;
    for (size_t i = 0; i < m->n_tensors; i++) {
        const struct rf_tensor_meta *t = &m->tensors[i];

        if (t->mapping_index != 0 || t->logical_bytes == 0)
            continue;
        rc = rf_page_range_outward(t->file_offset_bytes, t->logical_bytes, page_bytes, &tr[n]);
        if (rc < 0)
            goto out;
        n++;
    }
    /* covered = requested or shared: a tensor inside it has all its own pages requested */
    rc = rf_interval_multi_covered(tr, n, &shared);
    if (rc == 0)
        rc = set_add_all(&covered, req);
    if (rc == 0)
        rc = set_add_all(&covered, &shared);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        if (rf_interval_set_overlap_pages(req, tr[i]) == 0 ||
            rf_interval_set_overlap_pages(&covered, tr[i]) == rf_page_range_pages(tr[i]))
            continue; /* not requested at all, or inside the request */
        /* outside the request: its shared pages that were requested are protected */
        for (size_t j = rf_interval_set_first_end_above(&shared, tr[i].first_page);
             rc == 0 && j < shared.n && shared.v[j].first_page < tr[i].end_page; j++)
            rc = set_add_intersection(q, req, rf_page_range_intersect(shared.v[j], tr[i]));
    }
out:
    rf_interval_set_free(&covered);
    rf_interval_set_free(&shared);
    free(tr);
    return rc;
}

static void note_error(struct forge_advise_tally *t, int err)
{
    if (!t->first_error)
        t->first_error = err;
}

/*
 * madvise over [va, va + len) in calls of at most p->chunk_bytes (0: one
 * call); counts calls and accepted bytes. Returns 0 or the first call's
 * negative errno; a failed call does not stop the later ones.
 */
static int advise_piece(uint64_t va, uint64_t len, const struct forge_advise_params *p,
                        struct forge_advise_tally *t)
{
    const uint64_t chunk = p->chunk_bytes ? p->chunk_bytes : len;
    int first = 0;

    for (uint64_t off = 0; off < len; off += chunk) {
        uint64_t step = len - off < chunk ? len - off : chunk;

        void *addr = (void *)(uintptr_t)(va + off);
        /* mlock/munlock as system calls: AddressSanitizer's interceptors make the
           libc functions no-ops, and the report says what the kernel locked */
        int r = p->lock > 0   ? (int)syscall(SYS_mlock, addr, (size_t)step)
                : p->lock < 0 ? (int)syscall(SYS_munlock, addr, (size_t)step)
                              : madvise(addr, (size_t)step, p->advice);

        t->n_calls++;
        if (r != 0) {
            int err = -errno;

            t->n_failed_calls++;
            note_error(t, err);
            if (!first)
                first = err;
        } else {
            t->accepted_bytes += step; /* <= requested_bytes, a checked sum */
        }
    }
    return first;
}

/*
 * Advises the validated range r (its first page at va) but the pages of q;
 * adds what q kept out to t->protected_bytes. Returns 0 or the first
 * failed call's negative errno.
 */
static int advise_range(const struct rf_file_range *r, uint64_t va, const struct rf_interval_set *q,
                        uint64_t page_bytes, const struct forge_advise_params *p,
                        struct forge_advise_tally *t)
{
    uint64_t cur = r->pages.first_page, end = r->pages.end_page;
    int first = 0, err;

    for (size_t j = rf_interval_set_first_end_above(q, cur); cur < end; j++) {
        /* the next protected run inside the range, or none: [stop, resume) */
        uint64_t stop = j < q->n && q->v[j].first_page < end ? q->v[j].first_page : end;
        uint64_t resume = stop < end && q->v[j].end_page < end ? q->v[j].end_page : end;

        if (stop < cur)
            stop = cur;
        if (stop > cur) {
            err = advise_piece(va + (cur - r->pages.first_page) * page_bytes,
                               (stop - cur) * page_bytes, p, t);
            if (err && !first)
                first = err;
        }
        t->protected_bytes += (resume - stop) * page_bytes; /* <= requested_bytes */
        cur = resume;
    }
    return first;
}

int forge_advise_ranges(struct forge_model *m, const struct rf_file_range *ranges, size_t n,
                        const struct forge_advise_params *p, struct forge_advise_tally *t,
                        int *range_errors)
{
    const uint64_t page = rfsys_page_bytes();
    struct checked_range *c = NULL;
    struct rf_interval_set req, q;
    struct rfsys_maps maps;
    int rc;

    if (!t)
        return -EINVAL;
    memset(t, 0, sizeof(*t));
    if (!m || !p || (!ranges && n > 0))
        return -EINVAL;
    if (n > 0) {
        c = calloc(n, sizeof(*c));
        if (!c)
            return -ENOMEM;
    }
    if (range_errors)
        memset(range_errors, 0, n * sizeof(*range_errors)); /* fits: c did */
    rc = forge_gate_try_release(&m->gate);
    if (rc < 0) {
        free(c);
        return rc;
    }
    rf_interval_set_init(&req);
    rf_interval_set_init(&q);
    rfsys_maps_init(&maps);
    rc = rfsys_read_maps(NULL, "self", &maps);
    if (rc < 0)
        goto out;

    /* Pass 1: validate every range and sum the bytes; nothing is advised yet. */
    for (size_t i = 0; i < n; i++) {
        const struct rf_file_range *r = &ranges[i];
        uint64_t sum;

        if (r->pages.end_page <= r->pages.first_page)
            continue;
        t->n_ranges++;
        validate(m, &maps, r, page, &c[i]);
        if (__builtin_add_overflow(t->requested_bytes, c[i].len, &sum)) {
            c[i].err = -EOVERFLOW; /* not counted, not touched */
            c[i].advise = false;
        } else {
            t->requested_bytes = sum;
        }
        if (c[i].err) {
            t->n_refused++;
            t->n_failed++;
            note_error(t, c[i].err);
        } else if (p->protect_shared) {
            rc = rf_interval_set_add(&req, r->pages);
            if (rc < 0)
                goto out;
        }
    }
    if (p->protect_shared) {
        rc = protected_pages(m, &req, page, &q);
        if (rc < 0)
            goto out;
    }

    /* Pass 2: advise the validated ranges but their protected pages. */
    for (size_t i = 0; i < n; i++) {
        if (!c[i].advise)
            continue;
        c[i].err = advise_range(&ranges[i], c[i].va, &q, page, p, t);
        if (c[i].err)
            t->n_failed++;
    }
    for (size_t i = 0; range_errors && i < n; i++)
        range_errors[i] = c[i].err;
out:
    if (rc < 0)
        memset(t, 0, sizeof(*t)); /* nothing was advised */
    rfsys_maps_free(&maps);
    rf_interval_set_free(&q);
    rf_interval_set_free(&req);
    forge_gate_end_release(&m->gate);
    free(c);
    return rc;
}
