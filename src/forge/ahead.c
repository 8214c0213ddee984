/*
 * Layer-ahead prefetch (forge_ahead.h): a thread that reads the next
 * layer's file extent into the page cache with posix_fadvise(WILLNEED) on
 * its own read-only descriptor, driven by cb_eval progress.
 *
 * Workload: the callback runs for every node of every decode (about 30 per
 * layer per token) on the decoding thread; it scans the node's sources for
 * a blk.N name (a few compares), and on a layer change does an atomic store
 * and a sem_post. The thread makes one fadvise call per layer change (22 a
 * token in tinyllama), each over one layer's extent (about 50 MB in Q8_0).
 */
#include "forge_internal.h"

#include "ramforge/core/inventory.h"
#include "ramforge/forge/forge_ahead.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ggml.h"

struct layer_extent {
    uint64_t begin, end; /* file bytes, half-open; begin == end: no file range */
};

struct forge_ahead {
    int fd;
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
};

/* The layer whose weights node t reads; -1: none. */
static int layer_of_node(const struct ggml_tensor *t)
{
    for (int i = 0; i < GGML_MAX_SRC; i++) {
        const struct ggml_tensor *s = t->src[i];
        if (s && s->op == GGML_OP_NONE) {
            int l = rf_tensor_layer_of(s->name);
            if (l >= 0)
                return l;
        }
    }
    return -1;
}

static bool ahead_eval_cb(struct ggml_tensor *t, bool ask, void *ud)
{
    struct forge_ahead *a = ud;
    if (!ask) /* the data phase of a node someone asked for */
        return a->inner_asked ? a->inner(t, false, a->inner_ud) : true;
    bool split = false;
    int l = layer_of_node(t);
    if (l >= 0 && l != a->current) {
        a->current = l;
        int target = l + (int)a->distance - 1;
        if (target < (int)a->n_layers) {
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

int forge_ahead_create(struct forge_model *m, uint32_t distance, struct forge_ahead **out)
{
    if (!m || !out || distance < 1 || distance > FORGE_AHEAD_MAX_DISTANCE)
        return -EINVAL;
    *out = NULL;
    uint32_t n_layers = 0;
    for (size_t i = 0; i < m->n_tensors; i++) {
        int l = rf_tensor_layer_of(m->tensors[i].name);
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
    a->distance = distance;
    a->current = -1;
    atomic_init(&a->posted, -1);
    atomic_init(&a->stop, false);
    for (size_t i = 0; i < m->n_tensors; i++) {
        const struct rf_tensor_meta *t = &m->tensors[i];
        int l = rf_tensor_layer_of(t->name);
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
    a->fd = open(m->mapping.path, O_RDONLY | O_CLOEXEC);
    if (a->fd < 0) {
        int rc = -errno;
        free(a->layers);
        free(a);
        return rc;
    }
    sem_init(&a->sem, 0, 0);
    int rc = pthread_create(&a->thread, NULL, ahead_thread, a);
    if (rc != 0) {
        sem_destroy(&a->sem);
        close(a->fd);
        free(a->layers);
        free(a);
        return -rc;
    }
    *out = a;
    return 0;
}

void forge_ahead_free(struct forge_ahead *a)
{
    if (!a)
        return;
    atomic_store(&a->stop, true);
    sem_post(&a->sem);
    pthread_join(a->thread, NULL);
    sem_destroy(&a->sem);
    close(a->fd);
    free(a->layers);
    free(a);
}

void forge_ahead_context_params(struct forge_ahead *a, struct forge_context_params *p)
{
    a->inner = p->cb_eval;
    a->inner_ud = p->cb_eval_user_data;
    a->inner_asked = false;
    a->current = -1;
    p->cb_eval = ahead_eval_cb;
    p->cb_eval_user_data = a;
}

void forge_ahead_stats(const struct forge_ahead *a, struct forge_ahead_stats *out)
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
}
