/*
 * The expert cache (forge_experts.h): anonymous reservations per routed
 * tensor, reader threads that pread the missing slices in place, and the
 * eval-callback steps the read-ahead window calls on the decoding thread.
 *
 * Workload: at each MoE layer's router node (one per layer per decode),
 * the ids of the batch's rows (k a row), an LRU select over n experts,
 * then for each missing expert one pread per routed tensor of the layer
 * (gate, up, down: a slice is 0.5 MiB in qwen3moe-a3b), spread over
 * EXPERT_READERS threads while the decoding thread waits. No compute runs
 * on the context meanwhile (the scheduler split the graph at the node).
 *
 * Reader jobs (under mu): the decoding thread posts jobs[0, n_jobs) with
 * next_job = done_jobs = 0 and waits for done_jobs == n_jobs; a reader
 * takes jobs[next_job++], reads without the lock, counts it done.
 */
#include "forge_internal.h"

#include "ramforge/core/expert_cache.h"
#include "ramforge/core/timing.h"
#include "ramforge/forge/forge_experts.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "ggml.h"

/* Reader threads: each has one slice's pread in flight; three keep a virtio queue busy. */
#define EXPERT_READERS 3

/* A routed tensor: its reservation and the weight pointed at it during a decode. */
struct xtensor {
    char name[RF_NAME_MAX];
    uint32_t layer;
    uint64_t file_offset; /* the tensor's first byte in the file */
    uint64_t slice_bytes;
    uint64_t first_page;   /* the file page of its first byte */
    uint64_t res_bytes;    /* the reservation: its outward page range, bytes */
    uint8_t *res;          /* MAP_FAILED: none */
    uintptr_t map_addr;    /* the mapping's address of its first byte */
    struct ggml_tensor *t; /* pointed at the reservation now; NULL: none */
    void *orig;            /* t's data before: the mapping's address */
    bool not_mapped;       /* counted once: its data was not the mapping's (repacked) */
};

struct job {
    uint32_t xt;     /* the tensor */
    uint32_t expert; /* its slice */
};

struct forge_experts {
    struct forge_direct_file file; /* the model file, O_DIRECT where allowed */
    uint64_t page;
    struct xtensor *xt; /* n_xt, sorted by name */
    size_t n_xt;
    uint32_t *by_layer;   /* xt indices grouped by layer: layer_at[l] .. layer_at[l + 1] */
    uint32_t *layer_at;   /* n_layer + 1 */
    uint32_t n_layer;     /* highest routed layer + 1 */
    uint32_t first_layer; /* the lowest layer with routed tensors: its rows are the tokens */
    bool *loaded;         /* n_layer: the router of l was processed in this decode */
    struct rf_expert_lru lru;
    uint32_t *load, *evict; /* n_expert each */
    int32_t *ids;           /* rows x k of the router node being processed */
    size_t ids_cap;
    bool broken; /* a read failed: every weight stays on the mapping from then on */
    pthread_t th[EXPERT_READERS];
    uint32_t n_threads;
    pthread_mutex_t mu;
    pthread_cond_t cv_job, cv_done;
    struct job *jobs; /* n_expert x the most tensors a layer */
    size_t n_jobs, next_job, done_jobs;
    int job_error; /* the first failed read of the jobs posted; 0: none */
    bool stop;
    struct rf_stream_experts st; /* readers' counters under mu */
};

static int xt_cmp(const void *a, const void *b)
{
    return strcmp(((const struct xtensor *)a)->name, ((const struct xtensor *)b)->name);
}

static void *reader(void *arg)
{
    struct forge_experts *x = arg;
    pthread_mutex_lock(&x->mu);
    for (;;) {
        while (!x->stop && x->next_job == x->n_jobs)
            pthread_cond_wait(&x->cv_job, &x->mu);
        if (x->stop)
            break;
        struct job j = x->jobs[x->next_job++];
        pthread_mutex_unlock(&x->mu);
        const struct xtensor *t = &x->xt[j.xt];
        struct rf_expert_slice sl;
        int rc = rf_expert_slice_of(t->file_offset, t->slice_bytes, j.expert, x->page, &sl);
        uint64_t bytes = rf_page_range_pages(sl.pages) * x->page;
        if (rc == 0)
            rc = forge_direct_read(&x->file,
                                   t->res + (sl.pages.first_page - t->first_page) * x->page,
                                   sl.pages.first_page * x->page, bytes);
        pthread_mutex_lock(&x->mu);
        if (rc == 0) {
            x->st.slices_read++;
            x->st.bytes_read += bytes;
        } else {
            x->st.first_error = x->st.first_error ? x->st.first_error : rc;
            x->job_error = x->job_error ? x->job_error : rc;
        }
        if (++x->done_jobs == x->n_jobs)
            pthread_cond_signal(&x->cv_done);
    }
    pthread_mutex_unlock(&x->mu);
    return NULL;
}

struct cached_ud {
    const struct rf_expert_lru *lru;
    uint32_t layer;
};

static bool cached_cb(void *ud, uint32_t j)
{
    const struct cached_ud *c = ud;
    return rf_expert_lru_cached(c->lru, c->layer, j);
}

/* Drops the own pages of the experts evict[n] (slot numbers; the LRU already holds them out). */
static void drop(struct forge_experts *x, const uint32_t *evict, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        const uint32_t l = evict[i] / x->lru.n_expert, e = evict[i] % x->lru.n_expert;
        struct cached_ud ud = {.lru = &x->lru, .layer = l};
        for (uint32_t p = x->layer_at[l]; p < x->layer_at[l + 1]; p++) {
            const struct xtensor *t = &x->xt[x->by_layer[p]];
            uint64_t first, end;
            if (rf_expert_drop_range(t->file_offset, t->slice_bytes, x->lru.n_expert, e, x->page,
                                     cached_cb, &ud, &first, &end) == 0 &&
                end > first)
                madvise(t->res + first * x->page, (size_t)((end - first) * x->page), MADV_DONTNEED);
        }
    }
    x->st.evictions += n;
}

/* Reads layer l's experts load[n] (every routed tensor's slice) and waits. 0 or -errno. */
static int read_experts(struct forge_experts *x, uint32_t l, const uint32_t *load, uint32_t n)
{
    if (!n || x->layer_at[l] == x->layer_at[l + 1])
        return 0;
    uint64_t t0 = rf_now_ns();
    pthread_mutex_lock(&x->mu);
    x->n_jobs = x->next_job = x->done_jobs = 0;
    x->job_error = 0;
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t p = x->layer_at[l]; p < x->layer_at[l + 1]; p++)
            x->jobs[x->n_jobs++] = (struct job){.xt = x->by_layer[p], .expert = load[i]};
    pthread_cond_broadcast(&x->cv_job);
    while (x->done_jobs < x->n_jobs)
        pthread_cond_wait(&x->cv_done, &x->mu);
    int rc = x->job_error;
    x->n_jobs = x->next_job = x->done_jobs = 0;
    x->st.direct = x->file.direct;
    x->st.direct_reason = x->file.reason;
    pthread_mutex_unlock(&x->mu);
    x->st.read_wait_ns += rf_now_ns() - t0;
    return rc;
}

/* Every weight pointed at a reservation back at the mapping. */
static void point_back(struct forge_experts *x)
{
    for (size_t i = 0; i < x->n_xt; i++)
        if (x->xt[i].t) {
            x->xt[i].t->data = x->xt[i].orig;
            x->xt[i].t = NULL;
        }
}

/* Layer l's weights pointed at their reservations back at the mapping. */
static void point_back_layer(struct forge_experts *x, uint32_t l)
{
    for (uint32_t p = x->layer_at[l]; p < x->layer_at[l + 1]; p++) {
        struct xtensor *u = &x->xt[x->by_layer[p]];
        if (u->t) {
            u->t->data = u->orig;
            u->t = NULL;
        }
    }
}

void forge_experts_computed(struct forge_experts *x, struct ggml_tensor *t)
{
    int layer = forge_topk_layer(t);
    if (layer < 0 || (uint32_t)layer >= x->n_layer || x->broken)
        return;
    const uint32_t l = (uint32_t)layer;
    /* this batch's router: the layer's weights back at the mapping until its experts are read
       (an earlier batch of the decode may have pointed them; a failure below leaves them so) */
    point_back_layer(x, l);
    x->loaded[l] = false;
    const int64_t k = t->ne[0], rows = t->ne[1];
    size_t need = (size_t)(k > 0 ? k : 0) * (size_t)(rows > 0 ? rows : 0);
    if (need > x->ids_cap) {
        int32_t *ids = realloc(x->ids, need * sizeof(*ids));
        if (!ids)
            return; /* not loaded: its weights stay on the mapping */
        x->ids = ids;
        x->ids_cap = need;
    }
    for (int64_t j = 0; j < rows; j++)
        if (!forge_topk_row(t, j, x->ids + (size_t)j * (size_t)k))
            return;
    uint32_t n_load, n_evict;
    if (rf_expert_lru_select(&x->lru, l, x->ids, need, x->load, &n_load, x->evict, &n_evict) < 0)
        return;
    if (l == x->first_layer)
        x->st.tokens += (uint64_t)rows;
    drop(x, x->evict, n_evict); /* before the reads: a kept edge page is read again */
    if (read_experts(x, l, x->load, n_load) < 0) {
        x->broken = true; /* the mapping serves every routed weight from now on */
        point_back(x);    /* before the matmuls of this layer (none computes now) */
        return;
    }
    x->loaded[l] = true;
}

bool forge_experts_ask(struct forge_experts *x, struct ggml_tensor *t)
{
    int layer = forge_topk_layer(t);
    if (layer >= 0)
        return (uint32_t)layer < x->n_layer && x->layer_at[layer] < x->layer_at[layer + 1];
    for (int i = 0; i < GGML_MAX_SRC; i++) {
        struct ggml_tensor *src = t->src[i];
        if (!src || src->op != GGML_OP_NONE || !rf_expert_tensor_name(src->name))
            continue;
        struct xtensor key, *u;
        size_t n = strnlen(src->name, sizeof(key.name) - 1);
        memcpy(key.name, src->name, n);
        key.name[n] = '\0';
        if (!(u = bsearch(&key, x->xt, x->n_xt, sizeof(*x->xt), xt_cmp)) || u->t == src)
            continue;
        if (!x->loaded[u->layer] || x->broken)
            continue; /* its router not seen this decode: the mapping serves it */
        if ((uintptr_t)src->data != u->map_addr) {
            x->st.tensors_not_mapped += !u->not_mapped;
            u->not_mapped = true;
            continue;
        }
        u->t = src;
        u->orig = src->data;
        src->data = u->res + (u->file_offset - u->first_page * x->page);
        x->st.tensors_pointed++;
    }
    return false;
}

void forge_experts_decode_end(struct forge_experts *x)
{
    if (!x)
        return;
    point_back(x);
    memset(x->loaded, 0, x->n_layer * sizeof(*x->loaded));
    uint32_t n;
    if (rf_expert_lru_trim(&x->lru, x->evict, &n) == 0)
        drop(x, x->evict, n);
}

/* Resident pages of the reservations (mincore), bytes. */
static uint64_t resident(const struct forge_experts *x)
{
    uint64_t sum = 0;
    unsigned char vec[256];
    for (size_t i = 0; i < x->n_xt; i++)
        for (uint64_t p = 0; x->xt[i].res != MAP_FAILED && p < x->xt[i].res_bytes / x->page;) {
            uint64_t n = x->xt[i].res_bytes / x->page - p;
            n = n < sizeof(vec) ? n : sizeof(vec);
            if (mincore(x->xt[i].res + p * x->page, (size_t)(n * x->page), vec) < 0)
                break;
            for (uint64_t j = 0; j < n; j++)
                sum += (vec[j] & 1) ? x->page : 0;
            p += n;
        }
    return sum;
}

void forge_experts_stats(struct forge_experts *x, struct rf_stream_experts *out)
{
    memset(out, 0, sizeof(*out));
    if (!x)
        return;
    pthread_mutex_lock(&x->mu);
    *out = x->st;
    pthread_mutex_unlock(&x->mu);
    out->on = true;
    out->selections = x->lru.selections;
    out->hits = x->lru.hits;
    out->misses = x->lru.misses;
    out->resident_bytes = resident(x);
}

/* The routed tensors of map the graph reads from m's mapping, with their reservations. */
static int make_tensors(struct forge_experts *x, struct forge_model *m,
                        const struct rf_inventory *inv, const struct rf_expert_map *map)
{
    if (!(x->xt = calloc(map->n ? map->n : 1, sizeof(*x->xt))))
        return -ENOMEM;
    for (size_t t = 0; t < map->n; t++) {
        const struct rf_expert_tensor *e = &map->tensors[t];
        const struct rf_inventory_entry *ie = NULL;
        for (size_t i = 0; i < inv->n && !ie; i++)
            if (inv->entries[i].key.tensor_index == e->tensor_index)
                ie = &inv->entries[i];
        if (!ie || !e->file_read || e->layer < 0 ||
            e->file_offset_bytes < m->mapping.map_offset_bytes)
            continue; /* repacked, or not the mapping's: read from its own copy */
        struct xtensor *o = &x->xt[x->n_xt];
        memcpy(o->name, ie->name, sizeof(o->name));
        o->name[sizeof(o->name) - 1] = '\0';
        o->layer = (uint32_t)e->layer;
        o->file_offset = e->file_offset_bytes;
        o->slice_bytes = e->slice_bytes;
        o->first_page = e->file_offset_bytes / x->page;
        uint64_t end = e->file_offset_bytes + e->slice_bytes * map->n_expert;
        o->res_bytes = ((end + x->page - 1) / x->page - o->first_page) * x->page;
        o->map_addr = m->map_start + (e->file_offset_bytes - m->mapping.map_offset_bytes);
        o->res = mmap(NULL, (size_t)o->res_bytes, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (o->res == MAP_FAILED)
            return -errno;
        x->n_xt++;
        madvise(o->res, (size_t)o->res_bytes, MADV_NOHUGEPAGE); /* evictions are 4 KiB exact */
        if (o->layer + 1 > x->n_layer)
            x->n_layer = o->layer + 1;
    }
    if (!m->map_start)
        return -EINVAL;
    if (!x->n_xt)
        return -ENODATA; /* every routed tensor repacked: nothing to read */
    qsort(x->xt, x->n_xt, sizeof(*x->xt), xt_cmp);
    return 0;
}

/* by_layer and layer_at from xt; the jobs and the LRU's arrays. */
static int index_layers(struct forge_experts *x, uint32_t n_expert, uint32_t capacity,
                        uint32_t slots)
{
    uint32_t most = 0;
    x->layer_at = calloc((size_t)x->n_layer + 2, sizeof(*x->layer_at));
    x->by_layer = calloc(x->n_xt, sizeof(*x->by_layer));
    x->loaded = calloc(x->n_layer, sizeof(*x->loaded));
    x->load = calloc(n_expert, sizeof(*x->load));
    x->evict = calloc((size_t)x->n_layer * n_expert, sizeof(*x->evict));
    if (!x->layer_at || !x->by_layer || !x->loaded || !x->load || !x->evict)
        return -ENOMEM;
    for (size_t i = 0; i < x->n_xt; i++)
        x->layer_at[x->xt[i].layer + 2]++;
    for (uint32_t l = 0; l < x->n_layer; l++) {
        most = x->layer_at[l + 2] > most ? x->layer_at[l + 2] : most;
        x->layer_at[l + 2] += x->layer_at[l + 1];
    }
    for (size_t i = 0; i < x->n_xt; i++)
        x->by_layer[x->layer_at[x->xt[i].layer + 1]++] = (uint32_t)i;
    x->first_layer = x->n_layer;
    for (uint32_t l = x->n_layer; l-- > 0;)
        if (x->layer_at[l] < x->layer_at[l + 1])
            x->first_layer = l;
    if (!(x->jobs = calloc((size_t)n_expert * most, sizeof(*x->jobs))))
        return -ENOMEM;
    return rf_expert_lru_init(&x->lru, x->n_layer, n_expert, capacity, slots);
}

int forge_experts_create(struct forge_model *m, const struct rf_inventory *inv,
                         const struct rf_expert_map *map, uint32_t capacity, uint32_t slots,
                         struct forge_experts **out)
{
    int rc;
    if (!out)
        return -EINVAL;
    *out = NULL;
    if (!m || !inv || !map || !map->n_expert || capacity > map->n_expert || slots < map->n_expert ||
        !inv->page_bytes)
        return -EINVAL;
    struct forge_experts *x = calloc(1, sizeof(*x));
    if (!x)
        return -ENOMEM;
    x->file.fd = -1;
    x->page = inv->page_bytes;
    x->st.per_layer = capacity;
    x->st.slots = slots;
    pthread_mutex_init(&x->mu, NULL);
    pthread_cond_init(&x->cv_job, NULL);
    pthread_cond_init(&x->cv_done, NULL);
    if ((rc = make_tensors(x, m, inv, map)) < 0 ||
        (rc = index_layers(x, map->n_expert, capacity, slots)) < 0)
        goto out;
    rc = forge_direct_open(&x->file, m, &x->mu);
    x->st.direct = x->file.direct;
    x->st.direct_reason = x->file.reason;
    if (rc < 0)
        goto out;
    for (rc = 0; rc == 0 && x->n_threads < EXPERT_READERS; x->n_threads += rc == 0)
        rc = -pthread_create(&x->th[x->n_threads], NULL, reader, x);
out:
    if (rc < 0) {
        forge_experts_free(x);
        return rc;
    }
    *out = x;
    return 0;
}

void forge_experts_free(struct forge_experts *x)
{
    if (!x)
        return;
    pthread_mutex_lock(&x->mu);
    x->stop = true;
    pthread_cond_broadcast(&x->cv_job);
    pthread_mutex_unlock(&x->mu);
    for (uint32_t i = 0; i < x->n_threads; i++)
        pthread_join(x->th[i], NULL);
    if (x->xt)
        point_back(x);
    for (size_t i = 0; x->xt && i < x->n_xt; i++)
        munmap(x->xt[i].res, (size_t)x->xt[i].res_bytes);
    forge_direct_close(&x->file);
    rf_expert_lru_free(&x->lru);
    free(x->jobs);
    free(x->ids);
    free(x->load);
    free(x->evict);
    free(x->loaded);
    free(x->by_layer);
    free(x->layer_at);
    free(x->xt);
    pthread_cond_destroy(&x->cv_done);
    pthread_cond_destroy(&x->cv_job);
    pthread_mutex_destroy(&x->mu);
    free(x);
}
