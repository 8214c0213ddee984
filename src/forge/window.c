/*
 * The read-ahead window (forge_window.h): a ring of anonymous memory that
 * helper threads fill with the streamed tensors' bytes by pread, in the
 * order the decode uses them, and the cb_eval callback that points each
 * weight at its bytes in the ring while the nodes that read it compute.
 *
 * Workload: the callback runs for every node of every decode (about 30 per
 * layer per token in tinyllama): a name compare per weight source, a
 * bsearch per window weight, one mutex round trip per tensor change; each
 * node that reads the ring ends a range of the scheduler's (about 9 a
 * layer, each a graph compute of its own). A thread reads one tensor (at
 * most about 12 MB in tinyllama Q8_0) in one pread.
 *
 * The order: the first decode (the prompt) runs from the mapping and
 * records the order in which its nodes first read each window tensor; at
 * its end the ring is allocated and the threads start, reading the tensors
 * in that order, over and over (graphs of later decodes read them in the
 * same order). A tensor the first decode did not read goes last.
 *
 * The ring (ring_bytes: the option's slots x the largest tensor) holds the
 * tensors packed in sequence order, each at a page-aligned offset after the
 * one before, starting again at 0 when one does not fit before the end:
 * its capacity is bytes, not tensors, so the threads read as far ahead as
 * the bytes allow whatever the tensors' sizes (a layer's norms are a page
 * each). A tensor's place is a slot, slots[q % n_units] for sequence q.
 * Slot states (under mu): FREE -> READING (thread) -> READY or FAILED
 * (thread) -> IN_USE (decode; READY only) -> FREE (decode). The threads
 * fill sequence numbers 0, 1, 2, ... in order, sequence q with unit
 * order[q % n_units]; the decode takes them in the same order and frees
 * them in that order (the ring's tail moves up). It frees the unit before
 * (every node that read it is computed: each ended a range) before it
 * waits for the next, so it holds no bytes of the ring while waiting.
 */
#include "forge_internal.h"

#include "ramforge/core/timing.h"
#include "ramforge/forge/forge_experts.h"
#include "ramforge/forge/forge_window.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "ggml.h"
#include "llama.h"

/* Reader threads: each has one pread in flight (a 12 MB read is 3 requests of 4 MiB on a
   virtio disk), so a second keeps the device busier while the first waits. */
#define WINDOW_READERS 2

enum slot_state { SLOT_FREE, SLOT_READING, SLOT_READY, SLOT_FAILED, SLOT_IN_USE };

/* A unit's place in the ring: sequence q's is slots[q % n_units] (at most n_units in it). */
struct slot {
    enum slot_state state;
    uint64_t seq;          /* the sequence number it holds (READING and after) */
    uint64_t off;          /* its first byte in the ring (page aligned) */
    struct ggml_tensor *t; /* the weight pointed at it while IN_USE; NULL: none yet */
    void *orig;            /* t's data before: the mapping's address */
};

struct wunit {
    char name[RF_NAME_MAX];
    uintptr_t map_addr;   /* the mapping's address of the tensor's first byte */
    uint64_t file_offset; /* its first page */
    uint64_t bytes;       /* its pages: what is read */
    uint64_t slot_offset; /* the tensor's first byte in the slot */
    bool seen;            /* the first decode read it (order learning) */
};

struct forge_window {
    struct forge_direct_file file; /* the model file, O_DIRECT where allowed */
    uint64_t ring_bytes;           /* the option's slots x the largest unit */
    struct wunit *units;           /* n_units, sorted by name */
    size_t n_units;
    uint32_t *order; /* n_units: unit indices in the decode's order (n_order learned) */
    size_t n_order;
    uint32_t *pos;      /* n_units: unit -> its position in order */
    bool ready;         /* order learned, ring allocated: the thread reads (under mu) */
    bool disabled;      /* the ring could not be allocated: the mapping serves everything */
    uint8_t *ring;      /* ring_bytes; MAP_FAILED until ready */
    uint32_t skip_max;  /* units a little out of order: at most this many are dropped */
    struct slot *slots; /* n_units */
    pthread_t threads[WINDOW_READERS];
    uint32_t n_threads; /* started */
    uint32_t reading;   /* reads in flight (under mu) */
    uint64_t busy_t0;   /* when reading went from 0 to 1 (under mu) */
    pthread_mutex_t mu;
    pthread_cond_t cv_free, cv_ready;
    bool stop;
    uint64_t fill_next, use_next; /* sequence numbers (under mu) */
    uint64_t rel_next; /* the oldest sequence number not released: the ring's tail (mu) */
    uint64_t head;     /* the ring's byte after the newest unit's (under mu) */
    /* decoding thread only */
    int cur_unit;                   /* the unit whose slot the computing node reads; -1: none */
    int cur_slot;                   /* its slot; -1: none (the mapping) */
    struct forge_eval_chain chain;  /* forge_window_context_params': the callback before */
    struct rf_stream_read_ahead st; /* counters: thread's under mu, decode's its own */
    struct forge_experts *experts;  /* a MoE model's expert cache (owned); NULL: none */
};

static int wunit_cmp(const void *a, const void *b)
{
    return strcmp(((const struct wunit *)a)->name, ((const struct wunit *)b)->name);
}

/*
 * Room in the ring for a unit of n bytes after the newest (fill_next - 1),
 * in sequence order: its offset, or UINT64_MAX while the ring is full.
 * The units in the ring, rel_next .. fill_next - 1, occupy one circular
 * run from the tail (rel_next's offset) to head; a unit that does not fit
 * before the ring's end starts again at 0. Under mu.
 */
static uint64_t ring_room(const struct forge_window *w, uint64_t n)
{
    if (w->fill_next - w->rel_next >= w->n_units)
        return UINT64_MAX;
    if (w->rel_next == w->fill_next)
        return 0; /* empty */
    uint64_t tail = w->slots[w->rel_next % w->n_units].off;
    if (w->head > tail) /* one run [tail, head): room after it, or before it */
        return w->head + n <= w->ring_bytes ? w->head : n <= tail ? 0 : UINT64_MAX;
    return w->head + n <= tail ? w->head : UINT64_MAX; /* wrapped: room is [head, tail) */
}

static void *window_thread(void *arg)
{
    struct forge_window *w = arg;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        const struct wunit *u = &w->units[w->order[w->fill_next % w->n_units]];
        uint64_t off;
        while (!w->stop && (!w->ready || (off = ring_room(w, u->bytes)) == UINT64_MAX)) {
            pthread_cond_wait(&w->cv_free, &w->mu);
            u = &w->units[w->order[w->fill_next % w->n_units]]; /* another reader took one */
        }
        if (w->stop)
            break;
        struct slot *s = &w->slots[w->fill_next % w->n_units];
        s->state = SLOT_READING;
        s->seq = w->fill_next++;
        s->off = off;
        w->head = off + u->bytes;
        if (w->reading++ == 0)
            w->busy_t0 = rf_now_ns();
        pthread_mutex_unlock(&w->mu);
        int rc = forge_direct_read(&w->file, w->ring + off, u->file_offset, u->bytes);
        pthread_mutex_lock(&w->mu);
        if (--w->reading == 0) /* read time: the union of the readers' reads */
            w->st.read_ns += rf_now_ns() - w->busy_t0;
        w->st.direct = w->file.direct;
        w->st.direct_reason = w->file.reason;
        if (rc == 0) {
            w->st.units_read++;
            w->st.read_bytes += u->bytes;
        } else if (!w->st.first_error) {
            w->st.first_error = rc;
        }
        s->state = rc == 0 ? SLOT_READY : SLOT_FAILED;
        pthread_cond_broadcast(&w->cv_ready);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

/*
 * Points slot si's weight back at the mapping and frees its bytes (-1:
 * no-op). The decode releases in sequence order: si is the ring's tail.
 * Under mu.
 */
static void slot_release(struct forge_window *w, int si)
{
    if (si < 0)
        return;
    struct slot *s = &w->slots[si];
    if (s->t)
        s->t->data = s->orig;
    s->t = NULL;
    s->state = SLOT_FREE;
    w->rel_next = s->seq + 1;
    if (w->rel_next == w->fill_next)
        w->head = 0; /* empty: the next unit starts at the ring's first byte */
    pthread_cond_broadcast(&w->cv_free);
}

/* Waits for sequence use_next's slot to be read; its index. Under mu. */
static int wait_next(struct forge_window *w)
{
    int si = (int)(w->use_next % w->n_units);
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

/* The decode reached unit u: its slot, read (-1: the mapping serves it). */
static int take_unit(struct forge_window *w, uint32_t u)
{
    pthread_mutex_lock(&w->mu);
    size_t ahead = (w->pos[u] + w->n_units - w->use_next % w->n_units) % w->n_units;
    if (ahead > w->skip_max) { /* far from the learned order (read twice?): the mapping */
        w->st.units_fallback++;
        pthread_mutex_unlock(&w->mu);
        return -1;
    }
    /* a unit a little out of the learned order: the slots before it are read and dropped */
    for (size_t k = 0; k < ahead; k++) {
        slot_release(w, wait_next(w));
        w->st.units_skipped++;
    }
    int si = wait_next(w);
    if (w->slots[si].state == SLOT_READY) {
        w->slots[si].state = SLOT_IN_USE;
        w->st.units_used++;
    } else {
        slot_release(w, si);
        w->st.units_fallback++;
        si = -1;
    }
    pthread_mutex_unlock(&w->mu);
    return si;
}

static struct wunit *find(struct forge_window *w, const char *name)
{
    struct wunit key;
    size_t n = strnlen(name, sizeof(key.name) - 1);
    memcpy(key.name, name, n);
    key.name[n] = '\0';
    return bsearch(&key, w->units, w->n_units, sizeof(*w->units), wunit_cmp);
}

/*
 * Node t's window weight (the first source that is one; NULL: none): in the
 * first decode its first read is recorded; afterwards the unit before is
 * freed when t reads another, and the weight is pointed at its slot.
 */
static bool visit(struct forge_window *w, struct ggml_tensor *t)
{
    for (int i = 0; i < GGML_MAX_SRC; i++) {
        struct ggml_tensor *src = t->src[i];
        if (!src || src->op != GGML_OP_NONE || rf_tensor_layer_of(src->name) < 0)
            continue;
        struct wunit *u = find(w, src->name);
        if (!u)
            continue;
        uint32_t ui = (uint32_t)(u - w->units);
        if (!w->ready) { /* learning (or disabled): the mapping serves it */
            if (!w->disabled && !u->seen) {
                u->seen = true;
                w->order[w->n_order++] = ui;
            }
            return false;
        }
        if ((int)ui != w->cur_unit) {
            /* every node that read the unit before ended a range: computed */
            pthread_mutex_lock(&w->mu);
            slot_release(w, w->cur_slot);
            pthread_mutex_unlock(&w->mu);
            w->cur_unit = (int)ui;
            w->cur_slot = take_unit(w, ui);
        }
        if (w->cur_slot < 0)
            return true;
        struct slot *s = &w->slots[w->cur_slot];
        uint8_t *at = w->ring + s->off + u->slot_offset;
        if (s->t == src && (uint8_t *)src->data == at)
            return true;
        if (s->t || (uintptr_t)src->data != u->map_addr) {
            w->st.tensors_not_mapped++; /* a repacked copy, or not the mapping's: untouched */
            return true;
        }
        s->t = src;
        s->orig = src->data;
        src->data = at;
        w->st.tensors_pointed++;
        return true; /* one window weight a node: a second stays on the mapping */
    }
    return false;
}

bool forge_window_eval(struct forge_window *w, struct ggml_tensor *t, bool ask,
                       struct forge_eval_chain *inner)
{
    if (!ask) {
        if (w->experts) /* the router's node: the missing experts read before the matmuls */
            forge_experts_computed(w->experts, t);
        return inner->asked ? inner->cb(t, false, inner->ud) : true;
    }
    bool split = visit(w, t); /* a node reading a slot ends its range: computed before the next */
    if (w->experts)
        split |= forge_experts_ask(w->experts, t);
    inner->asked = inner->cb ? inner->cb(t, true, inner->ud) : false;
    return split || inner->asked;
}

static bool window_eval_cb(struct ggml_tensor *t, bool ask, void *ud)
{
    struct forge_window *w = ud;
    return forge_window_eval(w, t, ask, &w->chain);
}

/* After the first decode: the order completed, the ring allocated, the thread started. */
static void start_reading(struct forge_window *w)
{
    uint64_t ring_bytes = w->ring_bytes; /* checked at create */
    for (size_t i = 0; i < w->n_units; i++)
        if (!w->units[i].seen)
            w->order[w->n_order++] = (uint32_t)i;
    for (size_t q = 0; q < w->n_units; q++)
        w->pos[w->order[q]] = (uint32_t)q;
    w->ring =
        mmap(NULL, (size_t)ring_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (w->ring == MAP_FAILED) {
        w->disabled = true;
        w->st.first_error = -errno;
        return;
    }
    madvise(w->ring, (size_t)ring_bytes, MADV_HUGEPAGE); /* a hint: refused is harmless */
    memset(w->ring, 0, (size_t)ring_bytes);              /* charged now, between two decodes */
    pthread_mutex_lock(&w->mu);
    w->ready = true;
    pthread_cond_broadcast(&w->cv_free);
    pthread_mutex_unlock(&w->mu);
}

void forge_window_decode_end(struct forge_window *w)
{
    if (!w)
        return;
    if (!w->ready && !w->disabled && w->n_order > 0)
        start_reading(w);
    pthread_mutex_lock(&w->mu);
    slot_release(w, w->cur_slot);
    pthread_mutex_unlock(&w->mu);
    w->cur_slot = -1;
    w->cur_unit = -1;
    forge_experts_decode_end(w->experts);
}

void forge_window_set_experts(struct forge_window *w, struct forge_experts *x)
{
    if (w)
        w->experts = x;
}

void forge_window_experts_stats(struct forge_window *w, struct rf_stream_experts *out)
{
    forge_experts_stats(w ? w->experts : NULL, out);
}

void forge_window_context_params(struct forge_window *w, struct forge_context_params *p)
{
    w->chain = (struct forge_eval_chain){.cb = p->cb_eval, .ud = p->cb_eval_user_data};
    p->cb_eval = window_eval_cb;
    p->cb_eval_user_data = w;
}

void forge_window_llama_context_params(struct forge_window *w, struct llama_context_params *p)
{
    if (!w || !p)
        return;
    struct forge_context_params fp = {.cb_eval = p->cb_eval,
                                      .cb_eval_user_data = p->cb_eval_user_data};
    forge_window_context_params(w, &fp);
    p->cb_eval = fp.cb_eval;
    p->cb_eval_user_data = fp.cb_eval_user_data;
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

/* The units of plan w with their names and mapping addresses; -EINVAL, -ENOMEM. */
static int copy_units(struct forge_window *fw, struct forge_model *m,
                      const struct rf_inventory *inv, const struct rf_stream_window *w)
{
    const size_t n = w->n_units ? w->n_units : 1; /* none: the expert cache's carrier */
    fw->units = calloc(n, sizeof(*fw->units));
    fw->order = calloc(n, sizeof(*fw->order));
    fw->pos = calloc(n, sizeof(*fw->pos));
    fw->slots = calloc(n, sizeof(*fw->slots));
    if (!fw->units || !fw->order || !fw->pos || !fw->slots)
        return -ENOMEM;
    for (size_t i = 0; i < w->n_units; i++) {
        const struct rf_stream_window_unit *u = &w->units[i];
        struct wunit *o = &fw->units[i];
        uint64_t off = u->file_offset_bytes + u->slot_offset_bytes;
        if (u->entry >= inv->n || off < m->mapping.map_offset_bytes || !m->map_start ||
            u->bytes > w->slot_bytes)
            return -EINVAL;
        memcpy(o->name, inv->entries[u->entry].name, sizeof(o->name));
        o->name[sizeof(o->name) - 1] = '\0';
        o->map_addr = m->map_start + (off - m->mapping.map_offset_bytes);
        o->file_offset = u->file_offset_bytes;
        o->bytes = u->bytes;
        o->slot_offset = u->slot_offset_bytes;
    }
    qsort(fw->units, w->n_units, sizeof(*fw->units), wunit_cmp);
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
    if (!m || !inv || !w || w->slots < RF_STREAM_READ_AHEAD_MIN_SLOTS ||
        __builtin_mul_overflow(w->slot_bytes, (uint64_t)w->slots, &ring_bytes) ||
        ring_bytes > SIZE_MAX)
        return -EINVAL;
    if (!(fw = calloc(1, sizeof(*fw))))
        return -ENOMEM;
    fw->file.fd = -1;
    fw->ring = MAP_FAILED;
    fw->n_units = w->n_units;
    fw->ring_bytes = ring_bytes;
    fw->skip_max = w->slots;
    fw->cur_unit = fw->cur_slot = -1;
    fw->st.slots = w->slots;
    fw->st.slot_bytes = w->slot_bytes;
    fw->st.n_units = (uint32_t)w->n_units;
    fw->st.units_too_large = w->units_too_large;
    pthread_mutex_init(&fw->mu, NULL);
    pthread_cond_init(&fw->cv_free, NULL);
    pthread_cond_init(&fw->cv_ready, NULL);
    if ((rc = copy_units(fw, m, inv, w)) < 0)
        goto out;
    rc = forge_direct_open(&fw->file, m, &fw->mu);
    fw->st.direct = fw->file.direct;
    fw->st.direct_reason = fw->file.reason;
    if (rc < 0)
        goto out;
    for (rc = 0; rc == 0 && w->n_units && fw->n_threads < WINDOW_READERS; fw->n_threads += rc == 0)
        rc = -pthread_create(&fw->threads[fw->n_threads], NULL, window_thread, fw);
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
    pthread_mutex_lock(&w->mu);
    w->stop = true;
    pthread_cond_broadcast(&w->cv_free);
    pthread_mutex_unlock(&w->mu);
    for (uint32_t i = 0; i < w->n_threads; i++)
        pthread_join(w->threads[i], NULL);
    if (w->slots) {
        pthread_mutex_lock(&w->mu);
        slot_release(w, w->cur_slot);
        pthread_mutex_unlock(&w->mu);
    }
    forge_experts_free(w->experts); /* its weights back at the mapping */
    if (w->ring != MAP_FAILED)
        munmap(w->ring, (size_t)w->ring_bytes);
    forge_direct_close(&w->file);
    free(w->slots);
    free(w->pos);
    free(w->order);
    free(w->units);
    pthread_cond_destroy(&w->cv_ready);
    pthread_cond_destroy(&w->cv_free);
    pthread_mutex_destroy(&w->mu);
    free(w);
}
