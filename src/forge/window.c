/*
 * The read-ahead window (forge_window.h): a ring of anonymous slots a
 * helper thread fills with the streamed layers' bytes by pread, and the
 * cb_eval callback that points the weights at a slot while their layer
 * computes.
 *
 * Workload: the callback runs for every node of every decode (about 30 per
 * layer per token in tinyllama): a name compare per weight source, a
 * bsearch per window weight, one mutex round trip per layer change; each
 * node that reads a slot ends a range of the scheduler's (about 9 a layer,
 * each a graph compute of its own). The thread reads one layer per slot
 * (about 47 MB in tinyllama Q8_0) in one pread per piece.
 *
 * Slot states (under mu): FREE -> READING (thread) -> READY or FAILED
 * (thread) -> IN_USE (decode; READY only) -> FREE (decode). The thread fills
 * sequence numbers 0, 1, 2, ... in order, sequence q into slot q % slots
 * with window layer q % n_layers; the decode takes them in the same order.
 * It frees the layer before (every node that read it is computed: each
 * ended a range) before it waits for the next, so it holds no slot while
 * waiting; with 2 slots the thread reads layer L + 1 while L computes.
 */
#include "forge_internal.h"

#include "ramforge/forge_window.h"
#include "ramforge/timing.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ggml.h"

enum slot_state { SLOT_FREE, SLOT_READING, SLOT_READY, SLOT_FAILED, SLOT_IN_USE };

struct pointed {
    struct ggml_tensor *t;
    void *orig; /* the mapping's address */
};

struct slot {
    enum slot_state state;
    uint64_t seq;        /* the sequence number it holds (READING and after) */
    struct pointed *pts; /* max_tensors: the weights pointed at it */
    size_t n_pts;
};

struct wtensor {
    char name[RF_NAME_MAX];
    uintptr_t map_addr;   /* the mapping's address of its first byte */
    uint64_t slot_offset; /* in its layer's slot */
};

struct forge_window {
    int fd;
    bool fd_direct;        /* fd has O_DIRECT (the thread's; st.direct follows it under mu) */
    const char *fd_reason; /* why not, static; the thread's as fd_direct */
    uint64_t file_bytes;
    struct rf_stream_window plan; /* the sizes; its arrays are the copies below */
    struct rf_stream_window_layer *layers;
    struct rf_stream_window_piece *pieces;
    struct wtensor *tensors; /* sorted by name */
    int32_t *pos_of_layer;   /* blk.N -> window layer position, -1: not in the window */
    uint32_t max_layer;      /* entries of pos_of_layer */
    uint8_t *ring;           /* slots * slot_bytes */
    struct slot *slots;
    pthread_t thread;
    bool thread_started;
    pthread_mutex_t mu;
    pthread_cond_t cv_free, cv_ready;
    bool stop;
    uint64_t fill_next, use_next; /* sequence numbers (under mu) */
    /* decoding thread only */
    int cur_layer; /* blk.N of the last layer change; -1: none */
    int cur_slot;  /* slot of the window layer computing; -1: none (mapping) */
    bool inner_asked;
    bool (*inner)(struct ggml_tensor *t, bool ask, void *user_data);
    void *inner_ud;
    struct rf_stream_read_ahead st; /* counters: thread's under mu, decode's its own */
};

static int wtensor_cmp(const void *a, const void *b)
{
    return strcmp(((const struct wtensor *)a)->name, ((const struct wtensor *)b)->name);
}

/* Reads n bytes at off into dst; short only at the end of the file. 0 or -errno. */
static int read_piece(struct forge_window *w, uint8_t *dst, uint64_t off, uint64_t n)
{
    uint64_t got = 0;
    while (got < n) {
        ssize_t r = pread(w->fd, dst + got, (size_t)(n - got), (off_t)(off + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && errno == EINVAL && w->fd_direct &&
            fcntl(w->fd, F_SETFL, fcntl(w->fd, F_GETFL) & ~O_DIRECT) == 0) {
            w->fd_direct = false; /* the filesystem refused this read with O_DIRECT */
            w->fd_reason = "the filesystem refused an O_DIRECT read (EINVAL): the window "
                           "reads through the page cache";
            continue;
        }
        if (r < 0)
            return -errno;
        if (r == 0)
            return off + got >= w->file_bytes ? 0 : -EIO;
        got += (uint64_t)r;
    }
    return 0;
}

static void *window_thread(void *arg)
{
    struct forge_window *w = arg;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        struct slot *s = &w->slots[w->fill_next % w->plan.slots];
        while (!w->stop && s->state != SLOT_FREE)
            pthread_cond_wait(&w->cv_free, &w->mu);
        if (w->stop)
            break;
        const struct rf_stream_window_layer *L = &w->layers[w->fill_next % w->plan.n_layers];
        uint8_t *base = w->ring + (size_t)(s - w->slots) * w->plan.slot_bytes;
        s->state = SLOT_READING;
        s->seq = w->fill_next++;
        pthread_mutex_unlock(&w->mu);
        uint64_t t0 = rf_now_ns();
        int rc = 0;
        for (size_t i = 0; rc == 0 && i < L->n_pieces; i++) {
            const struct rf_stream_window_piece *p = &w->pieces[L->first_piece + i];
            rc = read_piece(w, base + p->slot_offset_bytes, p->file_offset_bytes, p->bytes);
        }
        uint64_t dt = rf_now_ns() - t0;
        pthread_mutex_lock(&w->mu);
        w->st.read_ns += dt;
        w->st.direct = w->fd_direct;
        w->st.direct_reason = w->fd_reason;
        if (rc == 0) {
            w->st.layers_read++;
            w->st.read_bytes += L->bytes;
        } else if (!w->st.first_error) {
            w->st.first_error = rc;
        }
        s->state = rc == 0 ? SLOT_READY : SLOT_FAILED;
        pthread_cond_broadcast(&w->cv_ready);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

/* Points slot's weights back at the mapping and frees it (-1: no-op). Under mu. */
static void slot_release(struct forge_window *w, int si)
{
    if (si < 0)
        return;
    struct slot *s = &w->slots[si];
    for (size_t i = 0; i < s->n_pts; i++)
        s->pts[i].t->data = s->pts[i].orig;
    s->n_pts = 0;
    s->state = SLOT_FREE;
    pthread_cond_broadcast(&w->cv_free);
}

/* Waits for sequence use_next's slot to be read; its index. Under mu. */
static int wait_next(struct forge_window *w)
{
    int si = (int)(w->use_next % w->plan.slots);
    struct slot *s = &w->slots[si];
    if (!(s->seq == w->use_next && (s->state == SLOT_READY || s->state == SLOT_FAILED))) {
        uint64_t t0 = rf_now_ns();
        while (!(s->seq == w->use_next && (s->state == SLOT_READY || s->state == SLOT_FAILED)))
            pthread_cond_wait(&w->cv_ready, &w->mu);
        w->st.waits++;
        w->st.wait_ns += rf_now_ns() - t0;
    }
    w->use_next++;
    return si;
}

/* The decode reached window layer pos: its slot, read (-1: the mapping serves it). */
static int take_layer(struct forge_window *w, uint32_t pos)
{
    pthread_mutex_lock(&w->mu);
    /* a layer out of the expected order: the slots before it are read and dropped */
    for (uint32_t k = 0; k < w->plan.n_layers && w->use_next % w->plan.n_layers != pos; k++) {
        slot_release(w, wait_next(w));
        w->st.layers_skipped++;
    }
    int si = wait_next(w);
    if (w->slots[si].state == SLOT_READY) {
        w->slots[si].state = SLOT_IN_USE;
        w->st.layers_used++;
    } else {
        slot_release(w, si);
        w->st.layers_fallback++;
        si = -1;
    }
    pthread_mutex_unlock(&w->mu);
    return si;
}

static const struct wtensor *find(const struct forge_window *w, const char *name)
{
    struct wtensor key;
    size_t n = strnlen(name, sizeof(key.name) - 1);
    memcpy(key.name, name, n);
    key.name[n] = '\0';
    return bsearch(&key, w->tensors, w->plan.n_tensors, sizeof(*w->tensors), wtensor_cmp);
}

/* Points node t's weights of the computing window layer at its slot; true when it reads one. */
static bool point(struct forge_window *w, struct ggml_tensor *t)
{
    bool reads = false;
    if (w->cur_slot < 0)
        return false;
    struct slot *s = &w->slots[w->cur_slot];
    uint8_t *base = w->ring + (size_t)w->cur_slot * w->plan.slot_bytes;
    for (int i = 0; i < GGML_MAX_SRC; i++) {
        struct ggml_tensor *src = t->src[i];
        if (!src || src->op != GGML_OP_NONE || rf_stream_layer_of(src->name) != w->cur_layer)
            continue;
        const struct wtensor *wt = find(w, src->name);
        reads |= wt != NULL;
        if (!wt || (uint8_t *)src->data == base + wt->slot_offset)
            continue;
        if ((uintptr_t)src->data != wt->map_addr || s->n_pts == w->plan.n_tensors) {
            w->st.tensors_not_mapped++; /* a repacked copy, or not the mapping's: untouched */
            continue;
        }
        s->pts[s->n_pts++] = (struct pointed){.t = src, .orig = src->data};
        src->data = base + wt->slot_offset;
        w->st.tensors_pointed++;
    }
    return reads;
}

/* blk.N of the first weight node t reads; -1: none. */
static int layer_of_node(const struct ggml_tensor *t)
{
    for (int i = 0; i < GGML_MAX_SRC; i++) {
        const struct ggml_tensor *s = t->src[i];
        int l = s && s->op == GGML_OP_NONE ? rf_stream_layer_of(s->name) : -1;
        if (l >= 0)
            return l;
    }
    return -1;
}

static bool window_eval_cb(struct ggml_tensor *t, bool ask, void *ud)
{
    struct forge_window *w = ud;
    if (!ask)
        return w->inner_asked ? w->inner(t, false, w->inner_ud) : true;
    int l = layer_of_node(t);
    if (l >= 0 && l != w->cur_layer) {
        /*
         * Every node that read the layer before from its slot ended a range (below), and
         * the ranges before t are computed: its slot goes back to the thread, and t's layer
         * is waited for while the thread reads the next into it.
         */
        pthread_mutex_lock(&w->mu);
        slot_release(w, w->cur_slot);
        pthread_mutex_unlock(&w->mu);
        w->cur_layer = l;
        int32_t pos = (uint32_t)l < w->max_layer ? w->pos_of_layer[l] : -1;
        w->cur_slot = pos >= 0 ? take_layer(w, (uint32_t)pos) : -1;
    }
    bool split = point(w, t); /* a node reading a slot ends its range: computed before the next */
    w->inner_asked = w->inner ? w->inner(t, true, w->inner_ud) : false;
    return split || w->inner_asked;
}

void forge_window_decode_end(struct forge_window *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->mu);
    slot_release(w, w->cur_slot);
    pthread_mutex_unlock(&w->mu);
    w->cur_slot = -1;
    w->cur_layer = -1;
}

void forge_window_context_params(struct forge_window *w, struct forge_context_params *p)
{
    w->inner = p->cb_eval;
    w->inner_ud = p->cb_eval_user_data;
    w->inner_asked = false;
    p->cb_eval = window_eval_cb;
    p->cb_eval_user_data = w;
}

void forge_window_stats(struct forge_window *w, struct rf_stream_read_ahead *out)
{
    memset(out, 0, sizeof(*out));
    if (!w)
        return;
    pthread_mutex_lock(&w->mu);
    *out = w->st;
    pthread_mutex_unlock(&w->mu);
    out->on = true;
}

/* The copies of plan w's arrays and the name index; -EINVAL, -ENOMEM. */
static int copy_plan(struct forge_window *fw, struct forge_model *m, const struct rf_inventory *inv,
                     const struct rf_stream_window *w)
{
    fw->layers = calloc(w->n_layers, sizeof(*fw->layers));
    fw->pieces = calloc(w->n_pieces, sizeof(*fw->pieces));
    fw->tensors = calloc(w->n_tensors, sizeof(*fw->tensors));
    fw->slots = calloc(w->slots, sizeof(*fw->slots));
    if (!fw->layers || !fw->pieces || !fw->tensors || !fw->slots)
        return -ENOMEM;
    memcpy(fw->layers, w->layers, w->n_layers * sizeof(*fw->layers));
    memcpy(fw->pieces, w->pieces, w->n_pieces * sizeof(*fw->pieces));
    for (uint32_t i = 0; i < w->slots; i++)
        if (!(fw->slots[i].pts = calloc(w->n_tensors, sizeof(*fw->slots[i].pts))))
            return -ENOMEM;
    for (size_t li = 0; li < w->n_layers; li++) {
        const struct rf_stream_window_layer *L = &w->layers[li];
        if ((uint32_t)L->layer + 1 > fw->max_layer)
            fw->max_layer = (uint32_t)L->layer + 1;
        for (size_t k = 0; k < L->n_tensors; k++) {
            const struct rf_stream_window_tensor *t = &w->tensors[L->first_tensor + k];
            struct wtensor *o = &fw->tensors[L->first_tensor + k];
            if (t->entry >= inv->n || t->file_offset_bytes < m->mapping.map_offset_bytes ||
                !m->map_start)
                return -EINVAL;
            memcpy(o->name, inv->entries[t->entry].name, sizeof(o->name));
            o->name[sizeof(o->name) - 1] = '\0';
            o->map_addr = m->map_start + (t->file_offset_bytes - m->mapping.map_offset_bytes);
            o->slot_offset = t->slot_offset_bytes;
        }
    }
    qsort(fw->tensors, w->n_tensors, sizeof(*fw->tensors), wtensor_cmp);
    if (!(fw->pos_of_layer = malloc(fw->max_layer * sizeof(*fw->pos_of_layer))))
        return -ENOMEM;
    for (uint32_t l = 0; l < fw->max_layer; l++)
        fw->pos_of_layer[l] = -1;
    for (size_t li = 0; li < w->n_layers; li++)
        fw->pos_of_layer[w->layers[li].layer] = (int32_t)li;
    return 0;
}

int forge_window_create(struct forge_model *m, const struct rf_inventory *inv,
                        const struct rf_stream_window *w, struct forge_window **out)
{
    struct forge_window *fw = NULL;
    uint64_t ring_bytes;
    int rc;

    if (!out)
        return -EINVAL;
    *out = NULL;
    if (!m || !inv || !w || w->n_layers == 0 || w->slots < RF_STREAM_READ_AHEAD_MIN_SLOTS ||
        __builtin_mul_overflow(w->slot_bytes, (uint64_t)w->slots, &ring_bytes) ||
        ring_bytes > SIZE_MAX)
        return -EINVAL;
    if (!(fw = calloc(1, sizeof(*fw))))
        return -ENOMEM;
    fw->fd = -1;
    fw->ring = MAP_FAILED;
    fw->plan = *w;
    fw->plan.layers = NULL; /* borrowed: copied by copy_plan */
    fw->plan.pieces = NULL;
    fw->plan.tensors = NULL;
    fw->cur_layer = fw->cur_slot = -1;
    fw->st.slots = w->slots;
    fw->st.slot_bytes = w->slot_bytes;
    fw->st.n_layers = (uint32_t)w->n_layers;
    fw->st.layers_too_large = w->layers_too_large;
    pthread_mutex_init(&fw->mu, NULL);
    pthread_cond_init(&fw->cv_free, NULL);
    pthread_cond_init(&fw->cv_ready, NULL);
    if ((rc = copy_plan(fw, m, inv, w)) < 0)
        goto out;
    fw->file_bytes = (uint64_t)m->file_st.st_size;
    fw->fd_direct = true;
    fw->fd = open(m->mapping.path, O_RDONLY | O_CLOEXEC | O_DIRECT);
    if (fw->fd < 0 && errno == EINVAL) {
        fw->fd_direct = false;
        fw->fd_reason = "the filesystem refuses O_DIRECT (open: EINVAL): the window "
                        "reads through the page cache";
        fw->fd = open(m->mapping.path, O_RDONLY | O_CLOEXEC);
    }
    fw->st.direct = fw->fd_direct;
    fw->st.direct_reason = fw->fd_reason;
    if (fw->fd < 0) {
        rc = -errno;
        goto out;
    }
    fw->ring =
        mmap(NULL, (size_t)ring_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (fw->ring == MAP_FAILED) {
        rc = -errno;
        goto out;
    }
    madvise(fw->ring, (size_t)ring_bytes, MADV_HUGEPAGE); /* a hint: refused is harmless */
    memset(fw->ring, 0, (size_t)ring_bytes);              /* charged now, not in the decode */
    rc = -pthread_create(&fw->thread, NULL, window_thread, fw);
    fw->thread_started = rc == 0;
out:
    if (rc < 0) {
        forge_window_free(fw);
        return rc;
    }
    *out = fw;
    return 0;
}

void forge_window_free(struct forge_window *w)
{
    if (!w)
        return;
    if (w->thread_started) {
        pthread_mutex_lock(&w->mu);
        w->stop = true;
        pthread_cond_broadcast(&w->cv_free);
        pthread_mutex_unlock(&w->mu);
        pthread_join(w->thread, NULL);
    }
    forge_window_decode_end(w);
    if (w->ring != MAP_FAILED)
        munmap(w->ring, (size_t)(w->plan.slot_bytes * w->plan.slots));
    if (w->fd >= 0)
        close(w->fd);
    for (uint32_t i = 0; w->slots && i < w->plan.slots; i++)
        free(w->slots[i].pts);
    free(w->slots);
    free(w->pos_of_layer);
    free(w->tensors);
    free(w->pieces);
    free(w->layers);
    pthread_cond_destroy(&w->cv_ready);
    pthread_cond_destroy(&w->cv_free);
    pthread_mutex_destroy(&w->mu);
    free(w);
}
