/*
 * Release during the load (forge_load_release.h): the file pages of each
 * weight llama.cpp copies out of the mapping are released from the load's
 * progress callback as soon as the copy is made. The header says how the
 * callback knows which copies are made and what it releases; the release
 * itself is forge_model_release's (advise.c's validation and protection)
 * over a shell forge model (the file's tensor table, no llama_model) whose
 * mapping is the load's own, found at the first callback.
 *
 * Expected workload: one metadata-only load before the real one (0.1 to
 * 0.2 s on TinyLlama's shapes: the vocabulary is parsed twice), then one callback per
 * tensor (a few hundred to tens of thousands), each releasing the pages
 * of the tensor loaded just before: one read of /proc/self/maps and a
 * few madvise and fadvise calls.
 */
#include "forge_internal.h"

#include "ramforge/forge/forge_load_release.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ramforge/core/intervals.h"
#include "ramforge/core/timing.h"
#include "ramforge/forge/forge_pages.h"
#include "ramforge/sys/pages.h"
#include "ramforge/sys/sys.h"

#include "ggml-backend.h"
#include "ggml.h"
#include "llama.h"

/* One tensor of the load's order (the metadata-only load's tensor map). */
struct load_entry {
    uint64_t bytes; /* ggml_nbytes: what the load's bytes done advance by */
    int64_t tensor; /* index in the shell's tensor table; -1: not a tensor of the file */
    bool copied;    /* outside the CPU's default buffer type: copied out of the mapping */
};

struct forge_load_release {
    struct forge_model *shell;      /* the file's tensor table; its mapping: the load's */
    int fd;                         /* the model file (posix_fadvise), or -1 */
    llama_progress_callback app_cb; /* the callback the caller's params had, or NULL */
    void *app_ud;                   /* its user data */
    struct load_entry *order;       /* n_order entries, the load's order */
    size_t n_order;
    uint64_t *done_bytes;        /* n_order + 1: bytes of order[0, k) */
    uint32_t *pending;           /* per file tensor: copies not yet made */
    bool *kept;                  /* per file tensor: a loaded tensor reads it in place */
    struct rf_page_range *pages; /* per file tensor: its outward file pages (empty: none) */
    uint32_t *by_offset;         /* file tensors with pages, in file order */
    uint32_t *pos;               /* per file tensor: its place in by_offset */
    size_t n_by_offset;
    bool *released;              /* per file tensor: its pages released already */
    uint64_t *asked;             /* per file tensor: the call that last requested it */
    uint32_t *fresh;             /* scratch: the tensors one call releases */
    uint32_t *reread;            /* kept tensors released with their folios, n_kept:
                                    read back alone after each drop (reread_kept) */
    struct rf_interval_set dead; /* every file page released so far */
    uint64_t *before;            /* start addresses of the file's r--s VMAs before */
    size_t n_before;
    size_t next;                  /* order[0, next) already handled */
    struct rf_file_range *ranges; /* scratch: one call's ranges (n_tensors at most) */
    struct rf_load_release r;     /* what it did */
};

/* Stops the release for the rest of the load; why is static. */
static void stop(struct forge_load_release *lr, const char *why)
{
    if (!lr->r.stopped)
        lr->r.stopped = why;
}

static bool stopped(const struct forge_load_release *lr)
{
    return lr->r.stopped != NULL;
}

/* The metadata-only load's tensor map, one entry at a time (tensor_map.cpp). */
struct order_fill {
    struct forge_load_release *lr;
    ggml_backend_buffer_type_t cpu; /* the CPU's default buffer type: mapped in place */
    size_t cap;
    int err;
};

static void order_visit(void *ud, const struct ggml_tensor *t)
{
    struct order_fill *f = ud;
    struct forge_load_release *lr = f->lr;

    if (f->err)
        return;
    if (lr->n_order == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 256;
        struct load_entry *v = realloc(lr->order, cap * sizeof(*v));
        if (!v) {
            f->err = -ENOMEM;
            return;
        }
        lr->order = v;
        f->cap = cap;
    }
    struct load_entry *e = &lr->order[lr->n_order++];
    e->bytes = ggml_nbytes(t);
    e->tensor = forge_model_tensor_index(lr->shell, ggml_get_name(t));
    e->copied = t->buffer && ggml_backend_buffer_get_type(t->buffer) != f->cpu;
}

/*
 * The load's order from a metadata-only load of path with *mp (no_alloc,
 * no mmap, no callback): lr->order, done_bytes, pending, kept. Returns 0,
 * or a static reason the release cannot run into *why, or -ENOMEM.
 */
static int read_order(struct forge_load_release *lr, const char *path,
                      const struct llama_model_params *mp, const char **why)
{
    struct llama_model_params pp = *mp;
    ggml_backend_dev_t cpu_dev = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    struct order_fill f = {.lr = lr};
    bool any = false;

    if (!cpu_dev) {
        *why = "llama.cpp has no CPU backend";
        return 0;
    }
    f.cpu = ggml_backend_dev_buffer_type(cpu_dev);
    pp.no_alloc = true;
    pp.load_mode = LLAMA_LOAD_MODE_NONE; /* with mmap, llama.cpp would populate the file */
    pp.progress_callback = NULL;
    pp.progress_callback_user_data = NULL;
    struct llama_model *probe = llama_model_load_from_file(path, pp);
    if (!probe) {
        *why = "the metadata-only load failed";
        return 0;
    }
    int rc = forge_model_tensor_map(probe, order_visit, &f);
    llama_model_free(probe);
    if (f.err)
        return f.err;
    if (rc < 0) {
        *why = "llama.cpp's tensor map is not available in this build";
        return 0;
    }
    lr->done_bytes = calloc(lr->n_order + 1, sizeof(*lr->done_bytes));
    lr->pending = calloc(lr->shell->n_tensors + 1, sizeof(*lr->pending));
    lr->kept = calloc(lr->shell->n_tensors + 1, sizeof(*lr->kept));
    if (!lr->done_bytes || !lr->pending || !lr->kept)
        return -ENOMEM;
    for (size_t k = 0; k < lr->n_order; k++) {
        const struct load_entry *e = &lr->order[k];

        lr->done_bytes[k + 1] = lr->done_bytes[k] + e->bytes; /* < 2^64: bytes of one file */
        if (e->tensor < 0)
            continue;
        if (e->copied) {
            lr->pending[e->tensor]++;
            any = true;
        } else {
            lr->kept[e->tensor] = true;
        }
    }
    if (!any)
        *why = "the load copies no weight out of the mapping";
    return 0;
}

/* File order of two tensors' outward pages (by_offset's sort). */
struct placed {
    struct rf_page_range pages;
    uint32_t tensor;
};

static int cmp_placed(const void *a, const void *b)
{
    const struct placed *x = a, *y = b;

    if (x->pages.first_page != y->pages.first_page)
        return x->pages.first_page < y->pages.first_page ? -1 : 1;
    return x->tensor < y->tensor ? -1 : x->tensor > y->tensor;
}

/*
 * Each file tensor's outward pages and the file order (lr->pages,
 * by_offset, pos), so that a release also requests the released
 * neighbours sharing a page with it: a page shared with a tensor already
 * released is dead, and the protection rule must not keep it (with large
 * folios it would keep the whole folio mapped and cached). -ENOMEM.
 */
static int read_pages(struct forge_load_release *lr)
{
    const uint64_t page = rfsys_page_bytes();
    const struct forge_model *m = lr->shell;
    size_t n = m->n_tensors + 1;
    struct placed *v = calloc(n, sizeof(*v));

    lr->pages = calloc(n, sizeof(*lr->pages));
    lr->by_offset = calloc(n, sizeof(*lr->by_offset));
    lr->pos = calloc(n, sizeof(*lr->pos));
    lr->released = calloc(n, sizeof(*lr->released));
    lr->asked = calloc(n, sizeof(*lr->asked));
    lr->fresh = calloc(n, sizeof(*lr->fresh));
    lr->reread = calloc(n, sizeof(*lr->reread));
    lr->ranges = calloc(n, sizeof(*lr->ranges));
    if (!v || !lr->pages || !lr->by_offset || !lr->pos || !lr->released || !lr->asked ||
        !lr->fresh || !lr->reread || !lr->ranges) {
        free(v);
        return -ENOMEM;
    }
    for (size_t i = 0; i < m->n_tensors; i++) {
        const struct rf_tensor_meta *t = &m->tensors[i];

        if (t->mapping_index != 0 || t->logical_bytes == 0 ||
            rf_page_range_outward(t->file_offset_bytes, t->logical_bytes, page, &lr->pages[i]) < 0)
            continue; /* no pages: never requested */
        v[lr->n_by_offset++] = (struct placed){lr->pages[i], (uint32_t)i};
    }
    qsort(v, lr->n_by_offset, sizeof(*v), cmp_placed);
    for (size_t j = 0; j < lr->n_by_offset; j++) {
        lr->by_offset[j] = v[j].tensor;
        lr->pos[v[j].tensor] = (uint32_t)j;
    }
    free(v);
    return 0;
}

/* Adds tensor t's pages to this call's request, once. */
static void request(struct forge_load_release *lr, uint32_t t, size_t *n)
{
    if (lr->asked[t] == lr->r.n_calls)
        return;
    lr->asked[t] = lr->r.n_calls; /* >= 1 during a call: n_calls counts it */
    lr->ranges[*n].mapping_index = 0;
    lr->ranges[(*n)++].pages = lr->pages[t];
}

/*
 * Adds the released tensors sharing a page with t, before and after it in
 * file order, to the request.
 */
static void request_neighbours(struct forge_load_release *lr, uint32_t t, size_t *n)
{
    const struct rf_page_range r = lr->pages[t];

    for (size_t j = lr->pos[t]; j-- > 0;) {
        uint32_t u = lr->by_offset[j];
        if (lr->pages[u].end_page <= r.first_page)
            break;
        if (lr->released[u])
            request(lr, u, n);
    }
    for (size_t j = lr->pos[t] + 1; j < lr->n_by_offset; j++) {
        uint32_t u = lr->by_offset[j];
        if (lr->pages[u].first_page >= r.end_page)
            break;
        if (lr->released[u])
            request(lr, u, n);
    }
}

/*
 * Whether kept tensor u is dropped with its neighbours' folios: a tensor
 * read in place (a norm) of at most one PMD of pages between two released
 * ones (or the file's ends) shares large folios with dead pages only, and
 * its mapped page would keep each whole folio in the page cache. Marks it
 * released and lists it in lr->reread: after each drop, its own bytes are
 * read back alone (reread_kept), in small folios, so that its first use
 * finds them cached and starts no read-around of the dead pages.
 */
static bool kept_between_dead(struct forge_load_release *lr, uint32_t u)
{
    const uint64_t pmd_pages = (2u << 20) / rfsys_page_bytes();
    uint32_t j = lr->pos[u];

    if (!lr->kept[u] || lr->released[u] || rf_page_range_pages(lr->pages[u]) > pmd_pages ||
        (j > 0 && !lr->released[lr->by_offset[j - 1]]) ||
        (j + 1 < lr->n_by_offset && !lr->released[lr->by_offset[j + 1]]))
        return false;
    lr->released[u] = true;
    lr->reread[lr->r.n_kept++] = u;
    return true;
}

/*
 * Reads back the kept tensors of lr->reread that meet run (pages just
 * dropped from the page cache) through lr->fd, opened with
 * POSIX_FADV_RANDOM: no read-ahead, only their own pages come back.
 */
static void reread_kept(struct forge_load_release *lr, struct rf_page_range run)
{
    char buf[64 << 10];

    for (size_t i = 0; i < lr->r.n_kept; i++) {
        const struct rf_tensor_meta *t = &lr->shell->tensors[lr->reread[i]];

        if (rf_page_range_pages(rf_page_range_intersect(lr->pages[lr->reread[i]], run)) == 0)
            continue;
        for (uint64_t off = 0; off < t->logical_bytes;) {
            size_t step = t->logical_bytes - off < sizeof(buf) ? (size_t)(t->logical_bytes - off)
                                                               : sizeof(buf);
            ssize_t got = pread(lr->fd, buf, step, (off_t)(t->file_offset_bytes + off));
            if (got <= 0)
                break; /* its first use reads it then */
            off += (uint64_t)got;
        }
    }
}

/*
 * Releases the file tensors whose last copy is among order[next, k) and
 * that no loaded tensor reads in place, the small kept ones between
 * released ones (kept_between_dead), and their released neighbours
 * (request_neighbours): MADV_DONTNEED through forge_model_release, then
 * posix_fadvise(DONTNEED) over each run of released pages that holds
 * pages it validated now (at the last call also those llama.cpp unmapped
 * itself: their copies are made), then the kept ones read back.
 */
static void release_done(struct forge_load_release *lr, size_t k, bool last)
{
    const uint64_t page = rfsys_page_bytes();
    size_t n = 0, n_new = 0;

    for (; lr->next < k; lr->next++) {
        const struct load_entry *e = &lr->order[lr->next];

        if (!e->copied || e->tensor < 0 || --lr->pending[e->tensor] > 0 || lr->kept[e->tensor] ||
            rf_page_range_pages(lr->pages[e->tensor]) == 0)
            continue;
        lr->released[e->tensor] = true;
        lr->fresh[n_new++] = (uint32_t)e->tensor;
    }
    for (size_t i = 0, copied = n_new; i < copied; i++) {
        uint32_t t = lr->fresh[i];
        if (lr->pos[t] > 0 && kept_between_dead(lr, lr->by_offset[lr->pos[t] - 1]))
            lr->fresh[n_new++] = lr->by_offset[lr->pos[t] - 1];
        if (lr->pos[t] + 1 < lr->n_by_offset &&
            kept_between_dead(lr, lr->by_offset[lr->pos[t] + 1]))
            lr->fresh[n_new++] = lr->by_offset[lr->pos[t] + 1];
    }
    for (size_t i = 0; i < n_new; i++)
        request(lr, lr->fresh[i], &n);
    for (size_t i = 0; i < n_new; i++)
        request_neighbours(lr, lr->fresh[i], &n);
    if (n == 0)
        return;
    int *errs = calloc(n, sizeof(*errs));
    struct forge_release_result res;
    if (!errs ||
        forge_model_release(lr->shell, lr->ranges, n, FORGE_RELEASE_DONTNEED, &res, errs) < 0) {
        free(errs);
        stop(lr, "a release during the load failed");
        return;
    }
    struct rf_interval_set now;
    rf_interval_set_init(&now);
    for (size_t i = 0; i < n; i++) {
        const struct rf_page_range *p = &lr->ranges[i].pages;
        uint64_t bytes = (p->end_page - p->first_page) * page; /* fits: a page range of the file */

        /* -EFAULT at the last call: llama.cpp unmapped the fragment before calling */
        bool unmapped = last && errs[i] == -EFAULT;
        if (i < n_new)
            lr->r.requested_bytes += bytes;
        if (errs[i] && !unmapped) {
            if (!lr->r.first_error)
                lr->r.first_error = errs[i];
            continue;
        }
        if (i < n_new) {
            lr->r.n_tensors++; /* (a kept one too) */
            lr->r.released_bytes += bytes;
        }
        if (rf_interval_set_add(&lr->dead, *p) < 0 || rf_interval_set_add(&now, *p) < 0)
            stop(lr, "out of memory during the load");
    }
    /*
     * fadvise over each run of dead pages that holds pages released now: a large folio
     * leaves the page cache only when the range holds all of it, and one folio can span
     * tensors released at different calls.
     */
    for (size_t i = 0, j = 0; lr->fd >= 0 && i < now.n; i++) {
        j = rf_interval_set_first_end_above(&lr->dead, now.v[i].first_page);
        if (j >= lr->dead.n || (i > 0 && lr->dead.v[j].first_page < now.v[i - 1].end_page))
            continue; /* (the run of the previous one, advised already) */
        (void)posix_fadvise(lr->fd, (off_t)(lr->dead.v[j].first_page * page),
                            (off_t)((lr->dead.v[j].end_page - lr->dead.v[j].first_page) * page),
                            POSIX_FADV_DONTNEED);
        reread_kept(lr, lr->dead.v[j]);
    }
    rf_interval_set_free(&now);
    free(errs);
}

/*
 * The progress callback: before the load's k-th tensor (k = calls so
 * far), or with k == n_order after the last, the first k tensors of the
 * order are loaded when progress says so.
 */
static bool on_progress(float progress, void *ud)
{
    struct forge_load_release *lr = ud;
    size_t k = (size_t)lr->r.n_calls++;

    if (!stopped(lr)) {
        const uint64_t total = lr->done_bytes[lr->n_order];
        /* llama.cpp's fraction is a float quotient: about 2e-7 relative error */
        double slack = (double)total * 4e-7 + 1.0;
        double at = (double)progress * (double)total;

        if (k > lr->n_order)
            stop(lr, "llama.cpp called the progress callback more often than it has tensors");
        else if (at < (double)lr->done_bytes[k] - slack || at > (double)lr->done_bytes[k] + slack)
            stop(lr, "the load's order differs from the metadata-only load's");
        else if (k == 0 && !forge_bind_new_mapping(lr->shell, lr->before, lr->n_before))
            stop(lr, "no new mapping of the file at the load's first tensor");
        if (!stopped(lr)) {
            lr->r.armed = true;
            release_done(lr, k, k == lr->n_order);
        }
    }
    return lr->app_cb ? lr->app_cb(progress, lr->app_ud) : true;
}

/*
 * Whether the header says no weight would be copied out of the mapping: no
 * device but the CPU, and no tensor of a type llama.cpp repacks (or no
 * extra buffer types): the metadata-only load is then not worth its time.
 */
static bool copies_nothing(const struct forge_model *shell, const struct llama_model_params *mp)
{
    for (size_t i = 0; i < ggml_backend_dev_count(); i++)
        if (ggml_backend_dev_type(ggml_backend_dev_get(i)) != GGML_BACKEND_DEVICE_TYPE_CPU)
            return false;
    for (size_t i = 0; mp->use_extra_bufts && i < shell->n_tensors; i++)
        if (forge_gguf_tensor_copied(shell->tensors[i].name, shell->tensors[i].type_name))
            return false;
    return true;
}

int forge_load_release_begin(const char *path, struct llama_model_params *mp,
                             struct forge_load_release **out)
{
    char err[FORGE_ERR_MAX];
    const char *why = NULL;
    uint64_t t0 = rf_now_ns();
    int rc;

    if (!out || !path || !mp)
        return -EINVAL;
    *out = NULL;
    struct forge_load_release *lr = calloc(1, sizeof(*lr));
    if (!lr)
        return -ENOMEM;
    lr->fd = -1;
    if (mp->load_mode == LLAMA_LOAD_MODE_MLOCK || mp->load_mode == LLAMA_LOAD_MODE_MMAP_MLOCK)
        why = "the load locks the model (mlock)";
    else if (mp->load_mode == LLAMA_LOAD_MODE_NONE || mp->load_mode == LLAMA_LOAD_MODE_DIRECT_IO)
        why = "the load maps nothing (no mmap)";
    else if (forge_model_shell(path, &lr->shell, err) < 0)
        why = "the model's header cannot be read";
    else if (copies_nothing(lr->shell, mp))
        why = "the load copies no weight out of the mapping (GGUF header)";
    rc = why ? 0 : read_order(lr, path, mp, &why);
    if (rc == 0 && !why)
        rc = read_pages(lr);
    if (rc == 0 && !why)
        rc = forge_file_vma_starts(lr->shell, &lr->before, &lr->n_before);
    if (rc == 0 && !why) {
        struct stat st;
        lr->fd = open(path, O_RDONLY | O_CLOEXEC);
        if (lr->fd >= 0 && (fstat(lr->fd, &st) < 0 || st.st_ino != lr->shell->file_st.st_ino ||
                            st.st_dev != lr->shell->file_st.st_dev)) {
            close(lr->fd);
            lr->fd = -1; /* another file now: madvise only */
        }
        if (lr->fd >= 0)
            (void)posix_fadvise(lr->fd, 0, 0, POSIX_FADV_RANDOM); /* reread_kept: no read-ahead */
        lr->app_cb = mp->progress_callback;
        lr->app_ud = mp->progress_callback_user_data;
        mp->progress_callback = on_progress;
        mp->progress_callback_user_data = lr;
    }
    lr->r.prepare_ns = rf_now_ns() - t0;
    lr->r.stopped = why;
    if (rc < 0) {
        forge_load_release_end(lr, NULL);
        return rc;
    }
    *out = lr;
    return 0;
}

void forge_load_release_end(struct forge_load_release *lr, struct rf_load_release *out)
{
    if (out)
        memset(out, 0, sizeof(*out));
    if (!lr)
        return;
    if (out)
        *out = lr->r;
    if (lr->fd >= 0)
        close(lr->fd);
    forge_model_free(lr->shell);
    free(lr->ranges);
    free(lr->before);
    free(lr->asked);
    free(lr->fresh);
    free(lr->reread);
    rf_interval_set_free(&lr->dead);
    free(lr->released);
    free(lr->pos);
    free(lr->by_offset);
    free(lr->pages);
    free(lr->kept);
    free(lr->pending);
    free(lr->done_bytes);
    free(lr->order);
    free(lr);
}
