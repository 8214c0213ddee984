/*
 * Layer-ahead prefetch (forge_ahead.h): a thread that reads the next
 * layer's file extent into the page cache with posix_fadvise(WILLNEED) on
 * its own read-only descriptor, driven by cb_eval progress; or, in the
 * locking mode, that mlocks (reads and pins) the next streamed layers'
 * pages in the model mapping and munlocks each layer once the decode has
 * computed it.
 *
 * Workload: the callback runs for every node of every decode (about 30 per
 * layer per token) on the decoding thread; it scans the node's sources for
 * a blk.N name (a few compares), and on a layer change does an atomic store
 * and a sem_post (fadvise), or posts the layer under a mutex and, when the
 * layer streams and is not locked yet, waits for the thread (locking). The
 * thread makes one call per layer (22 a token in tinyllama), each over one
 * layer's extent (about 50 MB in Q8_0).
 */
#include "forge_internal.h"

#include "ramforge/forge_ahead.h"
#include "ramforge/pages.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/mman.h>

#include "ggml.h"

#include "ramforge/timing.h"

struct layer_extent {
    uint64_t begin, end; /* file bytes, half-open; begin == end: no file range */
};

/* One streamed piece of a layer in the model mapping (locking mode). */
struct piece {
    uint64_t va, len; /* validated address, bytes (page multiples) */
};

struct forge_ahead {
    int fd;       /* fadvise mode: the model file, read-only; locking mode: -1 */
    bool locking; /* the locking mode (forge_ahead_create_locking) */
    uint32_t distance;
    struct layer_extent *layers; /* n_layers */
    uint32_t n_layers;
    pthread_t thread;
    sem_t sem;
    atomic_bool stop;
    atomic_int posted; /* latest layer to read ahead; -1: none */
    int current;       /* layer of the last node asked (decoding thread only) */
    bool inner_asked;  /* the inner callback asked for the node being computed */
    bool (*inner)(struct ggml_tensor *t, bool ask, void *user_data);
    void *inner_ud;
    _Atomic uint64_t layers_posted, layers_prefetched, requested_bytes, calls, failed_calls;
    atomic_int first_error;
    /* locking mode */
    struct piece *pieces; /* the streamed pieces, layer by layer */
    uint32_t *first;      /* n_layers + 1: layer l's pieces are [first[l], first[l + 1]) */
    uint32_t window;      /* layers locked at once, the one the decode computes included */
    pthread_mutex_t mu;   /* guards pos, done, quit */
    pthread_cond_t cv;    /* pos, done or quit changed */
    uint64_t pos;         /* position the decode computes: epoch * n_layers + layer */
    uint64_t done;        /* positions below are locked, or skipped (nothing streams) */
    bool quit;            /* the thread stops: no waiting for it */
    bool joined;          /* settled: the thread is joined, nothing is locked */
    uint64_t epoch;       /* decoding thread only: passes through the layers */
    int pending;          /* decoding thread only: layer to sync at its data phase; -1 */
    uint64_t read_ns, wait_ns, waits, unlocked; /* [mu] read_ns/unlocked: the thread's */
};

/* N of a name "blk.N.*"; -1 otherwise. */
static int layer_of_name(const char *name)
{
    if (strncmp(name, "blk.", 4) != 0)
        return -1;
    const char *p = name + 4;
    long n = 0;
    if (*p < '0' || *p > '9')
        return -1;
    while (*p >= '0' && *p <= '9' && n < 1000000)
        n = n * 10 + (*p++ - '0');
    return *p == '.' ? (int)n : -1;
}

/* The layer whose weights node t reads; -1: none. */
static int layer_of_node(const struct ggml_tensor *t)
{
    for (int i = 0; i < GGML_MAX_SRC; i++) {
        const struct ggml_tensor *s = t->src[i];
        if (s && s->op == GGML_OP_NONE) {
            int l = layer_of_name(s->name);
            if (l >= 0)
                return l;
        }
    }
    return -1;
}

/*
 * Locking mode, at the data phase of layer l's first node (layer l - 1 is
 * computed, l's matrices are not): posts l's position, so the thread
 * unlocks what was computed and locks ahead, and waits, if l streams, until
 * the thread has read (locked) it.
 */
static void lock_sync(struct forge_ahead *a, int l)
{
    uint64_t p = a->epoch * a->n_layers + (uint64_t)l;
    bool streams = a->first[l + 1] > a->first[l];
    pthread_mutex_lock(&a->mu);
    a->pos = p;
    pthread_cond_broadcast(&a->cv);
    if (streams && a->done <= p && !a->quit) {
        uint64_t t0 = rf_now_ns();
        while (a->done <= p && !a->quit)
            pthread_cond_wait(&a->cv, &a->mu);
        a->wait_ns += rf_now_ns() - t0;
        a->waits++;
    }
    pthread_mutex_unlock(&a->mu);
}

static bool ahead_eval_cb(struct ggml_tensor *t, bool ask, void *ud)
{
    struct forge_ahead *a = ud;
    if (!ask) { /* the data phase of a node someone asked for */
        if (a->pending >= 0) {
            lock_sync(a, a->pending);
            a->pending = -1;
        }
        return a->inner_asked ? a->inner(t, false, a->inner_ud) : true;
    }
    bool split = false;
    int l = layer_of_node(t);
    if (l >= 0 && (uint32_t)l < a->n_layers && l != a->current) {
        if (l < a->current)
            a->epoch++;
        a->current = l;
        int target = l + (int)a->distance - 1;
        if (a->locking) {
            a->pending = l;
            atomic_fetch_add_explicit(&a->layers_posted, 1, memory_order_relaxed);
        } else if (target < (int)a->n_layers) {
            atomic_store(&a->posted, target);
            atomic_fetch_add_explicit(&a->layers_posted, 1, memory_order_relaxed);
            sem_post(&a->sem);
        }
        split = true; /* compute up to here before asking further */
    }
    a->inner_asked = a->inner ? a->inner(t, true, a->inner_ud) : false;
    return split || a->inner_asked;
}

static void *ahead_thread(void *arg)
{
    struct forge_ahead *a = arg;
    int done = -1;
    for (;;) {
        while (sem_wait(&a->sem) != 0 && errno == EINTR)
            ;
        if (atomic_load(&a->stop))
            break;
        int want = atomic_load(&a->posted);
        if (want < 0 || want == done)
            continue;
        done = want;
        const struct layer_extent *e = &a->layers[want];
        if (e->end <= e->begin)
            continue;
        int rc =
            posix_fadvise(a->fd, (off_t)e->begin, (off_t)(e->end - e->begin), POSIX_FADV_WILLNEED);
        atomic_fetch_add_explicit(&a->calls, 1, memory_order_relaxed);
        if (rc != 0) {
            atomic_fetch_add_explicit(&a->failed_calls, 1, memory_order_relaxed);
            int zero = 0;
            atomic_compare_exchange_strong(&a->first_error, &zero, -rc);
            continue;
        }
        atomic_fetch_add_explicit(&a->layers_prefetched, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&a->requested_bytes, e->end - e->begin, memory_order_relaxed);
    }
    return NULL;
}

/* munlock (lock false) or mlock layer l's streamed pieces; the thread only. */
static void lock_layer(struct forge_ahead *a, uint32_t l, bool lock)
{
    uint64_t t0 = rf_now_ns(), bytes = 0;
    for (uint32_t i = a->first[l]; i < a->first[l + 1]; i++) {
        const struct piece *pc = &a->pieces[i];
        void *va = (void *)(uintptr_t)pc->va;
        int rc = lock ? mlock(va, pc->len) : munlock(va, pc->len);
        atomic_fetch_add_explicit(&a->calls, 1, memory_order_relaxed);
        if (rc != 0) {
            atomic_fetch_add_explicit(&a->failed_calls, 1, memory_order_relaxed);
            int zero = 0;
            atomic_compare_exchange_strong(&a->first_error, &zero, -errno);
        } else {
            bytes += pc->len;
        }
    }
    pthread_mutex_lock(&a->mu);
    if (lock)
        a->read_ns += rf_now_ns() - t0;
    else
        a->unlocked++;
    pthread_mutex_unlock(&a->mu);
    if (lock) {
        atomic_fetch_add_explicit(&a->layers_prefetched, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&a->requested_bytes, bytes, memory_order_relaxed);
    }
}

/*
 * The locking mode's thread. Positions (epoch * n_layers + layer) are
 * handled in increasing order: a streamed layer at position q is locked
 * once q >= pos (never behind the decode), while fewer than window layers
 * are locked and q is less than one pass ahead; it is unlocked once the
 * decode has computed it (pos > q). ring holds the locked positions.
 */
static void *lock_thread(void *arg)
{
    struct forge_ahead *a = arg;
    uint64_t ring[FORGE_AHEAD_MAX_WINDOW], next = 0;
    uint32_t head = 0, n_locked = 0;
    pthread_mutex_lock(&a->mu);
    while (!a->quit) {
        uint64_t p = a->pos;
        if (next < p)
            next = p; /* never read behind the decode */
        bool unlock = n_locked > 0 && ring[head] < p;
        bool lock = !unlock && n_locked < a->window && next < p + a->n_layers;
        if (!unlock && !lock) {
            a->done = next;
            pthread_cond_broadcast(&a->cv);
            pthread_cond_wait(&a->cv, &a->mu);
            continue;
        }
        pthread_mutex_unlock(&a->mu);
        uint32_t l = (uint32_t)((unlock ? ring[head] : next) % a->n_layers);
        if (unlock) {
            lock_layer(a, l, false);
            head = (head + 1) % FORGE_AHEAD_MAX_WINDOW;
            n_locked--;
        } else if (a->first[l + 1] > a->first[l]) {
            lock_layer(a, l, true);
            ring[(head + n_locked++) % FORGE_AHEAD_MAX_WINDOW] = next++;
        } else {
            next++;
        }
        pthread_mutex_lock(&a->mu);
        if (!unlock) {
            a->done = next;
            pthread_cond_broadcast(&a->cv);
        }
    }
    pthread_mutex_unlock(&a->mu);
    for (; n_locked > 0; n_locked--, head = (head + 1) % FORGE_AHEAD_MAX_WINDOW)
        lock_layer(a, (uint32_t)(ring[head] % a->n_layers), false);
    return NULL;
}

/* A prefetcher for m with each layer's file extent; no thread yet. */
static int ahead_new(struct forge_model *m, struct forge_ahead **out)
{
    uint32_t n_layers = 0;
    for (size_t i = 0; i < m->n_tensors; i++) {
        int l = layer_of_name(m->tensors[i].name);
        if (l >= 0 && m->tensors[i].mapping_index >= 0 && (uint32_t)l + 1 > n_layers)
            n_layers = (uint32_t)l + 1;
    }
    if (n_layers == 0)
        return -EINVAL;
    struct forge_ahead *a = calloc(1, sizeof(*a));
    if (!a)
        return -ENOMEM;
    a->layers = calloc(n_layers, sizeof(*a->layers));
    if (!a->layers) {
        free(a);
        return -ENOMEM;
    }
    a->n_layers = n_layers;
    a->fd = -1;
    a->current = -1;
    a->pending = -1;
    atomic_init(&a->posted, -1);
    atomic_init(&a->stop, false);
    for (size_t i = 0; i < m->n_tensors; i++) {
        const struct rf_tensor_meta *t = &m->tensors[i];
        int l = layer_of_name(t->name);
        uint64_t end;
        if (l < 0 || t->mapping_index < 0 || t->logical_bytes == 0 ||
            __builtin_add_overflow(t->file_offset_bytes, t->logical_bytes, &end))
            continue;
        struct layer_extent *e = &a->layers[l];
        if (e->end == e->begin) {
            e->begin = t->file_offset_bytes;
            e->end = end;
        } else {
            if (t->file_offset_bytes < e->begin)
                e->begin = t->file_offset_bytes;
            if (end > e->end)
                e->end = end;
        }
    }
    *out = a;
    return 0;
}

int forge_ahead_create(struct forge_model *m, uint32_t distance, struct forge_ahead **out)
{
    if (!m || !out || distance < 1 || distance > FORGE_AHEAD_MAX_DISTANCE)
        return -EINVAL;
    *out = NULL;
    struct forge_ahead *a;
    int rc = ahead_new(m, &a);
    if (rc < 0)
        return rc;
    a->distance = distance;
    a->fd = open(m->mapping.path, O_RDONLY | O_CLOEXEC);
    if (a->fd < 0) {
        rc = -errno;
        goto out;
    }
    sem_init(&a->sem, 0, 0);
    rc = -pthread_create(&a->thread, NULL, ahead_thread, a);
    if (rc < 0)
        sem_destroy(&a->sem);
out:
    if (rc < 0) {
        if (a->fd >= 0)
            close(a->fd);
        free(a->layers);
        free(a);
        return rc;
    }
    *out = a;
    return 0;
}

/*
 * The pieces of ranges (validated addresses va) inside each layer's page
 * extent, layer by layer, into a->pieces and a->first. Errors: -ENOMEM.
 */
static int layer_pieces(struct forge_ahead *a, const struct rf_file_range *ranges, size_t n,
                        const uint64_t *va, uint64_t page)
{
    a->first = calloc(a->n_layers + 1, sizeof(*a->first));
    if (!a->first)
        return -ENOMEM;
    for (int pass = 0; pass < 2; pass++) {
        uint32_t k = 0;
        for (uint32_t l = 0; l < a->n_layers; l++) {
            const struct layer_extent *e = &a->layers[l];
            uint64_t lo = e->begin / page, hi = (e->end + page - 1) / page;
            a->first[l] = k;
            for (size_t i = 0; e->end > e->begin && i < n; i++) {
                const struct rf_page_range *r = &ranges[i].pages;
                uint64_t b = r->first_page > lo ? r->first_page : lo;
                uint64_t f = r->end_page < hi ? r->end_page : hi;
                if (f <= b || va[i] == 0)
                    continue;
                if (pass == 1)
                    a->pieces[k] = (struct piece){va[i] + (b - r->first_page) * page, (f - b) * page};
                k++;
            }
        }
        a->first[a->n_layers] = k;
        if (pass == 0 && !(a->pieces = calloc(k ? k : 1, sizeof(*a->pieces))))
            return -ENOMEM;
    }
    return 0;
}

int forge_ahead_create_locking(struct forge_model *m, const struct rf_file_range *ranges, size_t n,
                               uint32_t window, struct forge_ahead **out)
{
    if (!m || !out || (!ranges && n > 0) || window < 1 || window > FORGE_AHEAD_MAX_WINDOW)
        return -EINVAL;
    *out = NULL;
    struct forge_ahead *a;
    uint64_t *va = calloc(n ? n : 1, sizeof(*va));
    int rc = va ? ahead_new(m, &a) : -ENOMEM;
    if (rc < 0) {
        free(va);
        return rc;
    }
    a->locking = true;
    a->window = window;
    rc = forge_ranges_addresses(m, ranges, n, va);
    if (rc == 0)
        rc = layer_pieces(a, ranges, n, va, rfsys_page_bytes());
    free(va);
    if (rc < 0)
        goto out;
    pthread_mutex_init(&a->mu, NULL);
    pthread_cond_init(&a->cv, NULL);
    rc = -pthread_create(&a->thread, NULL, lock_thread, a);
    if (rc < 0) {
        pthread_cond_destroy(&a->cv);
        pthread_mutex_destroy(&a->mu);
    }
out:
    if (rc < 0) {
        free(a->pieces);
        free(a->first);
        free(a->layers);
        free(a);
        return rc;
    }
    *out = a;
    return 0;
}

void forge_ahead_settle(struct forge_ahead *a)
{
    if (!a || !a->locking || a->joined)
        return;
    pthread_mutex_lock(&a->mu);
    a->quit = true;
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
    pthread_join(a->thread, NULL);
    a->joined = true;
}

void forge_ahead_free(struct forge_ahead *a)
{
    if (!a)
        return;
    if (a->locking) {
        forge_ahead_settle(a);
        pthread_cond_destroy(&a->cv);
        pthread_mutex_destroy(&a->mu);
        free(a->pieces);
        free(a->first);
    } else {
        atomic_store(&a->stop, true);
        sem_post(&a->sem);
        pthread_join(a->thread, NULL);
        sem_destroy(&a->sem);
        close(a->fd);
    }
    free(a->layers);
    free(a);
}

void forge_ahead_context_params(struct forge_ahead *a, struct forge_context_params *p)
{
    a->inner = p->cb_eval;
    a->inner_ud = p->cb_eval_user_data;
    a->inner_asked = false;
    a->current = -1;
    a->pending = -1;
    a->epoch++; /* positions keep increasing across contexts */
    p->cb_eval = ahead_eval_cb;
    p->cb_eval_user_data = a;
}

void forge_ahead_stats(struct forge_ahead *a, struct forge_ahead_stats *out)
{
    memset(out, 0, sizeof(*out));
    if (!a)
        return;
    out->layers_posted = atomic_load(&a->layers_posted);
    out->layers_prefetched = atomic_load(&a->layers_prefetched);
    out->requested_bytes = atomic_load(&a->requested_bytes);
    out->calls = atomic_load(&a->calls);
    out->failed_calls = atomic_load(&a->failed_calls);
    out->first_error = atomic_load(&a->first_error);
    out->n_layers = a->n_layers;
    out->locking = a->locking;
    out->window_layers = a->window;
    if (a->locking) {
        pthread_mutex_lock(&a->mu);
        out->read_ns = a->read_ns;
        out->wait_ns = a->wait_ns;
        out->waits = a->waits;
        out->layers_unlocked = a->unlocked;
        pthread_mutex_unlock(&a->mu);
    }
}
