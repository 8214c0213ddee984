/*
 * forge model: loads a GGUF model through llama.cpp (mmap), builds the plain
 * tensor and mapping tables the inventory consumes, and classifies each
 * weight by what the inference graph actually reads.
 *
 * The tensor table comes from the GGUF header (gguf_init_from_file,
 * no_alloc): name, type, absolute file offset (data offset + tensor offset)
 * and payload size. The mapping comes from /proc/self/maps: the r--s
 * mapping whose dev+inode are the file's and which holds this model's
 * tensor data (another instance of the file may be mapped too; see
 * find_mapping). llama.cpp unmaps the header pages
 * after load, so the mapping starts at a non-zero file offset; a tensor's
 * address is map_start + (file offset - mapping file offset).
 *
 * The access probe decodes one token on a short-lived context with a
 * cb_eval callback. In the ask phase (before the scheduler splits the
 * graph) it looks at each node's sources; a source in a weights buffer is
 * looked up by name and classified by its data pointer: inside the file
 * mapping it is FILE_BACKED, elsewhere ANONYMOUS (a CPU_REPACK copy). The
 * callback always answers false, so it adds no barrier and reads no data.
 * One decode reads every weight once: on a 1.1 GiB model about 60 ms here.
 *
 * Placement applies the same pointer rule to the tensors the model holds
 * (llama.cpp's tensor map) instead of a graph's sources: no context, no
 * decode, microseconds. It cannot see whether a graph reads a held tensor
 * at all; enum rf_access_basis documents the difference.
 */
#include "forge_internal.h"

#include "ramforge/core/timing.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "ramforge/error.h"
#include "ramforge/forge/forge_load_release.h"
#include "ramforge/sys/pages.h"
#include "ramforge/sys/sys.h"

#include "ggml-backend.h"
#include "ggml.h"
#include "gguf.h"
#include "llama.h"

static atomic_uint_fast64_t next_instance_id = 1;

struct forge_model_params forge_model_default_params(void)
{
    struct forge_model_params p = {
        .use_extra_bufts = true,
        .mlock = false,
        .n_threads = 0,
        .probe_access = true,
        .placement_access = false,
    };
    return p;
}

/* Sorted (name, index) pairs so the probe callback finds a weight by name. */
struct name_index {
    const char *name;
    uint32_t index;
};

static int cmp_name_index(const void *a, const void *b)
{
    return strcmp(((const struct name_index *)a)->name, ((const struct name_index *)b)->name);
}

static int load_tensor_table(struct forge_model *m, struct gguf_context *g)
{
    int64_t n = gguf_get_n_tensors(g);

    m->tensors = calloc(n > 0 ? (size_t)n : 1, sizeof(*m->tensors));
    m->by_name = calloc(n > 0 ? (size_t)n : 1, sizeof(*m->by_name));
    if (!m->tensors || !m->by_name)
        return -ENOMEM;
    forge_tensor_table_fill(g, m->tensors);
    for (int64_t i = 0; i < n; i++) {
        m->by_name[i].name = m->tensors[i].name;
        m->by_name[i].index = (uint32_t)i;
    }
    m->n_tensors = (size_t)n;
    qsort(m->by_name, m->n_tensors, sizeof(*m->by_name), cmp_name_index);
    return 0;
}

/* Resolves a graph source to the model weight it reads, or NULL. */
static struct rf_tensor_meta *weight_of(struct forge_model *m, const struct ggml_tensor *src)
{
    while (src->view_src)
        src = src->view_src;
    if (!src->buffer ||
        ggml_backend_buffer_get_usage(src->buffer) != GGML_BACKEND_BUFFER_USAGE_WEIGHTS)
        return NULL;
    int64_t i = forge_model_tensor_index(m, src->name);
    return i >= 0 ? &m->tensors[i] : NULL;
}

/*
 * The classification rule of the probe and of placement: weight w read
 * through tensor src (or the tensor its view points into) is FILE_BACKED
 * when the data lies in the file mapping, else ANONYMOUS. A weight read
 * both ways keeps FILE_BACKED: its file pages are live.
 */
static void classify(struct forge_model *m, struct rf_tensor_meta *w, const struct ggml_tensor *src)
{
    while (src->view_src)
        src = src->view_src;
    uintptr_t p = (uintptr_t)src->data;
    enum rf_weight_access a = (m->map_end > m->map_start && p >= m->map_start && p < m->map_end)
                                  ? RF_ACCESS_FILE_BACKED
                                  : RF_ACCESS_ANONYMOUS;
    if (w->access != RF_ACCESS_FILE_BACKED)
        w->access = a;
}

static bool probe_eval_cb(struct ggml_tensor *t, bool ask, void *user_data)
{
    struct forge_model *m = user_data;

    if (!ask)
        return true;
    for (int i = 0; i < GGML_MAX_SRC; i++) {
        const struct ggml_tensor *src = t->src[i];
        struct rf_tensor_meta *w = src ? weight_of(m, src) : NULL;
        if (w)
            classify(m, w, src);
    }
    return false; /* observe only: no data, no barrier */
}

/* Decodes one BOS token on a throw-away context whose cb_eval is cb(ud). */
static int probe_decode(struct forge_model *m, int n_threads, ggml_backend_sched_eval_callback cb,
                        void *ud, char err[FORGE_ERR_MAX])
{
    struct llama_context_params cp = llama_context_default_params();
    const struct llama_vocab *vocab = llama_model_get_vocab(m->model);
    struct forge_context *fc;
    int rc;

    cp.n_ctx = 64;
    cp.n_batch = 1;
    cp.n_ubatch = 1;
    if (n_threads > 0) {
        cp.n_threads = n_threads;
        cp.n_threads_batch = n_threads;
    }
    cp.cb_eval = cb;
    cp.cb_eval_user_data = ud;
    cp.no_perf = true;

    rc = forge_context_open(m, &cp, &fc, err);
    if (rc < 0)
        return rc;
    llama_token tok = llama_vocab_bos(vocab);
    if (tok == LLAMA_TOKEN_NULL)
        tok = 0;
    rc = forge_context_decode(fc, &tok, 1);
    if (rc < 0)
        snprintf(err, FORGE_ERR_MAX, "%s: llama.cpp could not decode the probe token",
                 m->info.path);
    else
        forge_context_synchronize(fc);
    forge_context_free(fc);
    return rc;
}

/*
 * The probe: one decode with probe_eval_cb, then every weight the graph
 * never named is UNREFERENCED.
 */
static int probe_access(struct forge_model *m, int n_threads, char err[FORGE_ERR_MAX])
{
    uint64_t t0 = rf_now_ns();
    int rc = probe_decode(m, n_threads, probe_eval_cb, m, err);

    if (rc == 0) {
        for (size_t i = 0; i < m->n_tensors; i++)
            if (m->tensors[i].access == RF_ACCESS_UNKNOWN)
                m->tensors[i].access = RF_ACCESS_UNREFERENCED;
        m->info.access_probed = true;
        m->info.access_basis = RF_ACCESS_BASIS_GRAPH_PROBE;
    }
    m->info.probe_ns = rf_now_ns() - t0;
    return rc;
}

/* One r--s range of the model file in this process (contiguous VMAs merged). */
struct file_map {
    uint64_t start, end; /* virtual addresses, half-open */
    uint64_t off_bytes;  /* file offset of start */
    uint64_t hits;       /* data pointers of the model's tensors inside it */
};

struct file_maps {
    struct file_map *v;
    size_t n;
};

/* Counts t's data (or the data its view points into) in the range holding it. */
static void locate_data(struct file_maps *fm, const struct ggml_tensor *t)
{
    while (t->view_src)
        t = t->view_src;
    uintptr_t p = (uintptr_t)t->data;
    if (!t->buffer || !p)
        return;
    for (size_t i = 0; i < fm->n; i++)
        if (p >= fm->v[i].start && p < fm->v[i].end)
            fm->v[i].hits++;
}

static void locate_visit(void *ud, const struct ggml_tensor *t)
{
    locate_data(ud, t);
}

static bool locate_eval_cb(struct ggml_tensor *t, bool ask, void *ud)
{
    if (!ask)
        return true;
    for (int i = 0; i < GGML_MAX_SRC; i++)
        if (t->src[i])
            locate_data(ud, t->src[i]);
    return false; /* observe only */
}

/* The model file's r--s ranges in maps into fm->v (allocated, maps.n entries at most). */
static int file_maps_read(const struct rf_mapping_meta *mm, struct file_maps *fm)
{
    struct rfsys_maps maps;
    int rc;

    rfsys_maps_init(&maps);
    rc = rfsys_read_maps(NULL, "self", &maps);
    if (rc < 0)
        goto out;
    fm->v = calloc(maps.n ? maps.n : 1, sizeof(*fm->v));
    if (!fm->v) {
        rc = -ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < maps.n; i++) {
        const struct rfsys_mapping *v = &maps.v[i];
        if (v->inode != mm->inode || v->dev_major != mm->dev_major ||
            v->dev_minor != mm->dev_minor || strcmp(v->perms, "r--s") != 0)
            continue;
        struct file_map *last = fm->n ? &fm->v[fm->n - 1] : NULL;
        if (last && last->end == v->start_addr &&
            v->offset_bytes == last->off_bytes + (last->end - last->start)) {
            last->end = v->end_addr;
            continue;
        }
        fm->v[fm->n++] = (struct file_map){v->start_addr, v->end_addr, v->offset_bytes, 0};
    }
out:
    rfsys_maps_free(&maps);
    return rc;
}

/*
 * Binds m to the mapping of the model file that holds m's own tensor data:
 * with two instances of one file loaded (a reload before the old model is
 * freed, a model loaded without mmap beside an mmap'd one), the file has
 * several r--s ranges, and only one, or none, is this model's. Each range
 * counts the data pointers of the tensors the model holds (llama.cpp's
 * tensor map; where the build has none, the sources of a probe decode);
 * the range with the most is the model's, and a tensor outside it becomes
 * NOT_MAPPED in the inventory. A model forge loaded itself (with mmap) and
 * the file's only range need no look. No range holding any: the mapping
 * stays unvalidated (a borrowed model is then refused by the caller).
 */
static int find_mapping(struct forge_model *m, const struct stat *st, int n_threads,
                        char err[FORGE_ERR_MAX])
{
    struct rf_mapping_meta *mm = &m->mapping;
    struct file_maps fm = {0};
    int rc;

    memset(mm, 0, sizeof(*mm));
    snprintf(mm->path, sizeof(mm->path), "%s", m->info.path);
    mm->file_size_bytes = (uint64_t)st->st_size;
    mm->dev_major = major(st->st_dev);
    mm->dev_minor = minor(st->st_dev);
    mm->inode = (uint64_t)st->st_ino;

    rc = file_maps_read(mm, &fm);
    if (rc < 0) {
        snprintf(err, FORGE_ERR_MAX, "cannot read /proc/self/maps: %s", rf_strerror(rc));
        goto out;
    }
    if (fm.n == 1 && !m->borrowed)
        fm.v[0].hits = 1;
    else if (fm.n > 0 && forge_model_tensor_map(m->model, locate_visit, &fm) < 0)
        rc = probe_decode(m, n_threads, locate_eval_cb, &fm, err);
    if (rc < 0)
        goto out;
    const struct file_map *best = NULL;
    for (size_t i = 0; i < fm.n; i++)
        if (fm.v[i].hits > 0 && (!best || fm.v[i].hits > best->hits))
            best = &fm.v[i];
    if (best) {
        mm->validated = true;
        mm->map_offset_bytes = best->off_bytes;
        mm->map_length_bytes = best->end - best->start;
        m->map_start = (uintptr_t)best->start;
        m->map_end = (uintptr_t)best->end;
    }
out:
    free(fm.v);
    return rc;
}

struct placement {
    struct forge_model *m;
    bool *held; /* n_tensors: the model holds a tensor of this name */
};

static void placement_visit(void *ud, const struct ggml_tensor *t)
{
    struct placement *pl = ud;
    int64_t i = forge_model_tensor_index(pl->m, t->name);
    if (i < 0)
        return; /* not a tensor of the file */
    pl->held[i] = true;
    const struct ggml_tensor *base = t;
    while (base->view_src)
        base = base->view_src;
    if (base->buffer && base->data) /* else: held without data, access stays unknown */
        classify(pl->m, &pl->m->tensors[i], t);
}

/*
 * Classifies by placement: every tensor the model holds by its data
 * pointer; a file tensor the model holds none of is UNREFERENCED (no graph
 * of this model can read it). Returns 0, or -ENOSYS / -EIO of
 * forge_model_tensor_map / -ENOMEM with every access left UNKNOWN.
 */
static int placement_access(struct forge_model *m)
{
    uint64_t t0 = rf_now_ns();
    struct placement pl = {m, calloc(m->n_tensors ? m->n_tensors : 1, sizeof(bool))};

    if (!pl.held)
        return -ENOMEM;
    int rc = forge_model_tensor_map(m->model, placement_visit, &pl);
    for (size_t i = 0; i < m->n_tensors; i++) {
        if (rc < 0)
            m->tensors[i].access = RF_ACCESS_UNKNOWN;
        else if (!pl.held[i])
            m->tensors[i].access = RF_ACCESS_UNREFERENCED;
    }
    free(pl.held);
    if (rc == 0)
        m->info.access_basis = RF_ACCESS_BASIS_PLACEMENT;
    m->info.probe_ns = rf_now_ns() - t0;
    return rc;
}

int forge_model_shell(const char *path, struct forge_model **out, char err[FORGE_ERR_MAX])
{
    struct gguf_context *g = NULL;
    struct forge_model *m = NULL;
    struct stat st;
    int rc;

    *out = NULL;
    rc = forge_gguf_open(path, &g, &st, err);
    if (rc < 0)
        return rc;
    m = calloc(1, sizeof(*m));
    if (!m) {
        gguf_free(g);
        return -ENOMEM;
    }
    m->instance_id = atomic_fetch_add(&next_instance_id, 1);
    forge_gate_init(&m->gate);
    m->gate_ready = true;
    snprintf(m->info.path, sizeof(m->info.path), "%s", path);
    m->info.file_size_bytes = (uint64_t)st.st_size;
    if (rfsys_fs_magic_path(path, &m->info.fs_magic) < 0)
        m->info.fs_magic = 0;
    m->file_st = st;
    rc = load_tensor_table(m, g);
    gguf_free(g);
    if (rc < 0) {
        forge_model_free(m);
        return rc;
    }
    *out = m;
    return 0;
}

int64_t forge_model_tensor_index(const struct forge_model *m, const char *name)
{
    struct name_index key = {.name = name};
    struct name_index *hit =
        bsearch(&key, m->by_name, m->n_tensors, sizeof(*m->by_name), cmp_name_index);
    return hit ? (int64_t)hit->index : -1;
}

/*
 * Binds a forge model to path's GGUF header and to `model` (loaded by the
 * caller when borrowed, else here with params, releasing the file pages
 * of copied weights during the load when asked), then finds the mapping,
 * reads the hyperparameters and runs the access probe.
 */
static int model_open(const char *path, struct llama_model *borrowed,
                      const struct forge_model_params *params, struct forge_model **out,
                      char err[FORGE_ERR_MAX])
{
    struct forge_model_params defaults = forge_model_default_params();
    struct forge_model *m = NULL;
    int rc;

    if (!out || !path) {
        snprintf(err, FORGE_ERR_MAX, "invalid argument");
        return -EINVAL;
    }
    *out = NULL;
    if (!params)
        params = &defaults;
    rc = forge_model_shell(path, &m, err);
    if (rc < 0)
        return rc;
    if (borrowed) {
        m->model = borrowed;
        m->borrowed = true;
    } else {
        struct llama_model_params mp = llama_model_default_params();
        mp.load_mode = params->mlock ? LLAMA_LOAD_MODE_MMAP_MLOCK : LLAMA_LOAD_MODE_MMAP;
        mp.use_extra_bufts = params->use_extra_bufts;
        struct forge_load_release *lr = NULL;
        if (params->release_during_load)
            (void)forge_load_release_begin(path, &mp, &lr);
        m->model = llama_model_load_from_file(path, mp);
        forge_load_release_end(lr, &m->info.load_release); /* lr NULL: zeroed */
    }
    if (!m->model) {
        snprintf(err, FORGE_ERR_MAX,
                 "%s: llama.cpp could not load the model (rerun with --verbose)", path);
        rc = -RF_EBADMODEL;
        goto fail;
    }
    rc = forge_model_claim(m);
    if (rc < 0) {
        snprintf(err, FORGE_ERR_MAX,
                 "%s: this llama_model already has a session (one model instance has one "
                 "execution gate); free that session first",
                 path);
        goto fail;
    }
    rc = find_mapping(m, &m->file_st, params->n_threads, err);
    if (rc < 0)
        goto fail;
    if (!m->mapping.validated && m->borrowed) {
        /* Another file (or a copy) than the model was loaded from, or loaded without mmap. */
        snprintf(err, FORGE_ERR_MAX,
                 "%s: not the file the model was loaded from (no read-only shared mapping of it "
                 "in this process holds the model's tensor data; the model must be loaded with "
                 "mmap from this path)",
                 path);
        rc = -EINVAL;
        goto fail;
    }
    if (!m->mapping.validated)
        for (size_t i = 0; i < m->n_tensors; i++)
            m->tensors[i].mapping_index = -1;

    struct forge_model_info *info = &m->info;
    llama_model_desc(m->model, info->desc, sizeof(info->desc));
    info->n_params = llama_model_n_params(m->model);
    info->size_bytes = llama_model_size(m->model);
    info->n_layer = llama_model_n_layer(m->model);
    info->n_embd = llama_model_n_embd(m->model);
    info->n_head = llama_model_n_head(m->model);
    info->n_head_kv = llama_model_n_head_kv(m->model);
    info->n_ctx_train = llama_model_n_ctx_train(m->model);
    info->n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(m->model));
    forge_moe_info(m->model, info);

    /* Placement where this build can; else the probe, so the classification is not lost. */
    if (params->probe_access || (params->placement_access && placement_access(m) < 0)) {
        rc = probe_access(m, params->n_threads, err);
        if (rc < 0)
            goto fail;
    }
    *out = m;
    return 0;
fail:
    forge_model_free(m);
    return rc;
}

int forge_model_load(const char *path, const struct forge_model_params *params,
                     struct forge_model **out, char err[FORGE_ERR_MAX])
{
    return model_open(path, NULL, params, out, err);
}

int forge_model_wrap(struct llama_model *model, const char *path,
                     const struct forge_model_params *params, struct forge_model **out,
                     char err[FORGE_ERR_MAX])
{
    if (!model) {
        snprintf(err, FORGE_ERR_MAX, "no llama_model to wrap");
        return -EINVAL;
    }
    return model_open(path, model, params, out, err);
}

void forge_model_lease_begin(struct forge_model *m)
{
    forge_gate_submit(&m->gate);
}

void forge_model_lease_end(struct forge_model *m)
{
    forge_gate_complete(&m->gate);
}

void forge_model_context_opened(struct forge_model *m)
{
    forge_gate_context_opened(&m->gate);
}

void forge_model_context_closed(struct forge_model *m)
{
    forge_gate_context_closed(&m->gate);
}

void forge_model_free(struct forge_model *m)
{
    if (!m)
        return;
    forge_model_unclaim(m);
    if (m->model && !m->borrowed)
        llama_model_free(m->model);
    free(m->by_name);
    free(m->tensors);
    if (m->gate_ready)
        forge_gate_destroy(&m->gate);
    free(m);
}

uint64_t forge_model_instance_id(const struct forge_model *m)
{
    return m->instance_id;
}

const struct rf_tensor_meta *forge_model_tensors(const struct forge_model *m, size_t *n_out)
{
    *n_out = m->n_tensors;
    return m->tensors;
}

const struct rf_mapping_meta *forge_model_mappings(const struct forge_model *m, size_t *n_out)
{
    *n_out = 1;
    return &m->mapping;
}

void forge_model_get_info(const struct forge_model *m, struct forge_model_info *out)
{
    *out = m->info;
}
