/*
 * Test-model generation (ramforge mkmodel): GGUF files of the presets
 * (mkmodel_arch.c: llama, and the MoE architectures qwen3moe and qwen2moe)
 * built with llama.cpp's own API, never downloaded.
 *
 * The metadata lists the hyperparameters, the tokenizer keys copied
 * from ggml-vocab-llama-spm.gguf, and every standard tensor with its type
 * (llama_model_init_from_user creates any tensor it does not find as F32).
 * The pinned library also creates the optional tensors (biases, scales,
 * rope_freqs) on its own; they are filled with neutral values (0 for a
 * bias, 1 otherwise) and left out of the written file.
 *
 * Weights come from a splitmix64 stream seeded by the seed and the tensor
 * name, are quantized row-block by row-block with ggml_quantize_chunk and
 * written with ggml_backend_tensor_set, so the same arguments give a
 * byte-identical file. The model is saved with llama_model_save_to_file to
 * a temporary file, copied with gguf keeping only the standard tensors, and
 * renamed into place: a failure leaves no partial file.
 */
#include "forge_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ramforge/error.h"

#include "ggml-backend.h"
#include "ggml.h"
#include "gguf.h"
#include "llama.h"

/* The chat template written into every generated model (llama.cpp's chatml). */
#define MKMODEL_CHAT_TEMPLATE                                                                      \
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "                   \
    "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}"        \
    "{{ '<|im_start|>assistant\\n' }}{% endif %}"
/* Rows quantized per ggml_backend_tensor_set call: bounds the float buffer. */
#define MKMODEL_ROWS_PER_CHUNK 256

struct fill_state {
    uint64_t seed;
    enum ggml_type wtype;
    const struct gguf_context *g; /* the described model: its tensors are the standard ones */
    uint32_t n_expert;            /* routed experts per layer; 0: dense */
    float embd_scale;             /* token_embd's scale (mkmodel_shape); 1: none */
    uint64_t done, total;
    const struct forge_mkmodel_params *params;
    int rc;
};

static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

/* A tensor mkmodel_describe listed; anything else is optional (llama.cpp made it). */
static bool is_standard(const struct gguf_context *g, const char *name)
{
    return gguf_find_tensor(g, name) >= 0;
}

static bool is_norm(const char *name)
{
    return strstr(name, "_norm.weight") != NULL;
}

/* The value of element i of tensor name: weights ~U(-0.035, 0.035) (std 0.02). */
static float weight_value(uint64_t *state)
{
    double u = (double)(splitmix64(state) >> 11) / 9007199254740992.0; /* [0, 1) */
    return (float)((u * 2.0 - 1.0) * 0.0346);
}

static void set_tensor_data(struct ggml_tensor *t, void *user_data)
{
    struct fill_state *fs = user_data;
    const int64_t n_per_row = t->ne[0];
    const int64_t nrows = ggml_nelements(t) / n_per_row;
    const size_t row_bytes = ggml_row_size(t->type, n_per_row);
    /* Random weights for standard matrices and routers; norms, biases and optional tensors get
       a constant. */
    const bool bias = strstr(t->name, ".bias") != NULL;
    const bool random = is_standard(fs->g, t->name) && !is_norm(t->name) && !bias;
    const float constant = bias ? 0.0f : 1.0f;
    float scales[FORGE_MKMODEL_MAX_EXPERTS];
    const bool embd = fs->embd_scale != 1.0f && !strcmp(t->name, "token_embd.weight");
    const bool skewed =
        nrows == fs->n_expert &&
        mkmodel_router_scales(t->name, fs->n_expert, fs->params->route_skew, fs->seed, scales);
    uint64_t state = fs->seed ^ fnv1a(t->name);
    float *src = NULL;
    void *dst = NULL;

    if (fs->rc < 0)
        return;
    src = malloc((size_t)n_per_row * MKMODEL_ROWS_PER_CHUNK * sizeof(float));
    dst = malloc(row_bytes * MKMODEL_ROWS_PER_CHUNK);
    if (!src || !dst) {
        fs->rc = -ENOMEM;
        goto out;
    }
    for (int64_t r0 = 0; r0 < nrows; r0 += MKMODEL_ROWS_PER_CHUNK) {
        int64_t nr = nrows - r0 < MKMODEL_ROWS_PER_CHUNK ? nrows - r0 : MKMODEL_ROWS_PER_CHUNK;
        int64_t ne = nr * n_per_row;
        for (int64_t i = 0; i < ne; i++)
            src[i] = random ? weight_value(&state) : constant;
        for (int64_t i = 0; skewed && i < ne; i++)
            src[i] *= scales[r0 + i / n_per_row];
        for (int64_t i = 0; embd && i < ne; i++)
            src[i] *= fs->embd_scale;
        size_t bytes = (size_t)nr * row_bytes;
        switch (t->type) {
        case GGML_TYPE_F32:
            memcpy(dst, src, bytes);
            break;
        case GGML_TYPE_F16:
            ggml_fp32_to_fp16_row(src, dst, ne);
            break;
        default:
            ggml_quantize_chunk(t->type, src, dst, 0, nr, n_per_row, NULL);
            break;
        }
        ggml_backend_tensor_set(t, dst, (size_t)r0 * row_bytes, bytes);
    }
    fs->done++;
    if (fs->params->progress)
        fs->params->progress(fs->done, fs->total, fs->params->progress_user_data);
out:
    free(src);
    free(dst);
}

/* Copies the tokenizer.* keys of the vocab file into g. */
static int copy_tokenizer(struct gguf_context *g, const char *vocab_path, char err[FORGE_ERR_MAX])
{
    struct gguf_context *v = NULL, *tmp = NULL;
    struct stat st;
    int rc = forge_gguf_open(vocab_path, &v, &st, err);
    if (rc < 0)
        return rc;
    tmp = gguf_init_empty();
    if (!tmp) {
        rc = -ENOMEM;
        goto out;
    }
    gguf_set_kv(tmp, v);
    for (int64_t i = gguf_get_n_kv(tmp) - 1; i >= 0; i--) {
        const char *key = gguf_get_key(tmp, i);
        if (strncmp(key, "tokenizer.", 10) != 0)
            gguf_remove_key(tmp, key);
    }
    if (gguf_find_key(tmp, "tokenizer.ggml.tokens") < 0) {
        snprintf(err, FORGE_ERR_MAX, "%s: no tokenizer.ggml.tokens in the vocab file", vocab_path);
        rc = -RF_EBADMODEL;
        goto out;
    }
    gguf_set_kv(g, tmp);
out:
    if (tmp)
        gguf_free(tmp);
    gguf_free(v);
    return rc;
}

static int parse_type(const char *s, enum ggml_type *out)
{
    static const struct {
        const char *name;
        enum ggml_type type;
    } types[] = {{"f32", GGML_TYPE_F32},
                 {"f16", GGML_TYPE_F16},
                 {"q8_0", GGML_TYPE_Q8_0},
                 {"q4_0", GGML_TYPE_Q4_0}};
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
        if (!strcmp(s, types[i].name)) {
            *out = types[i].type;
            return 0;
        }
    }
    return -EINVAL;
}

/* Creates an empty temporary file beside path; *out is freed by the caller. */
static int make_temp(const char *path, char **out, char err[FORGE_ERR_MAX])
{
    int fd;

    if (asprintf(out, "%s.tmp.XXXXXX", path) < 0) {
        *out = NULL;
        return -ENOMEM;
    }
    fd = mkstemp(*out);
    if (fd < 0) {
        int rc = -errno;
        snprintf(err, FORGE_ERR_MAX, "cannot create %s: %s", path, strerror(errno));
        free(*out);
        *out = NULL;
        return rc;
    }
    close(fd);
    return 0;
}

static uint32_t llama_ftype_of(enum ggml_type t)
{
    switch (t) {
    case GGML_TYPE_F16:
        return LLAMA_FTYPE_MOSTLY_F16;
    case GGML_TYPE_Q8_0:
        return LLAMA_FTYPE_MOSTLY_Q8_0;
    case GGML_TYPE_Q4_0:
        return LLAMA_FTYPE_MOSTLY_Q4_0;
    default:
        return LLAMA_FTYPE_ALL_F32;
    }
}

/*
 * Copies the model llama_model_save_to_file wrote at in_path to out_path
 * with gguf, keeping every key but only the standard tensors: the optional
 * tensors the pinned library invented (biases, scales, rope_freqs) are
 * dropped, and general.file_type is set so llama_model_desc names the type.
 */
static int write_standard_tensors(const char *in_path, const char *out_path,
                                  const struct gguf_context *g, enum ggml_type wtype,
                                  char err[FORGE_ERR_MAX])
{
    struct ggml_context *data = NULL;
    struct gguf_init_params gp = {.no_alloc = false, .ctx = &data};
    struct gguf_context *src = gguf_init_from_file(in_path, gp), *dst = NULL;
    int rc = 0;

    if (!src) {
        snprintf(err, FORGE_ERR_MAX, "cannot read back %s: llama_model_save_to_file failed",
                 in_path);
        return -EIO;
    }
    dst = gguf_init_empty();
    if (!dst) {
        rc = -ENOMEM;
        goto out;
    }
    gguf_set_kv(dst, src);
    gguf_set_val_u32(dst, "general.file_type", llama_ftype_of(wtype));
    /* chatml, which llama_chat_apply_template recognises and llama-server's Jinja runs alike
       (set here: llama_model_save_to_file does not keep it) */
    gguf_set_val_str(dst, "tokenizer.chat_template", MKMODEL_CHAT_TEMPLATE);
    /* ramforge's own keys (the routing skew): llama_model_save_to_file does not know them */
    for (int64_t i = 0; i < gguf_get_n_kv(g); i++)
        if (!strcmp(gguf_get_key(g, i), FORGE_KEY_ROUTE_SKEW))
            gguf_set_val_f32(dst, FORGE_KEY_ROUTE_SKEW, gguf_get_val_f32(g, i));
    for (int64_t i = 0; i < gguf_get_n_tensors(src); i++) {
        const char *tn = gguf_get_tensor_name(src, i);
        if (is_standard(g, tn))
            gguf_add_tensor(dst, ggml_get_tensor(data, tn));
    }
    if (!gguf_write_to_file(dst, out_path, false)) {
        snprintf(err, FORGE_ERR_MAX, "cannot write %s", out_path);
        rc = -EIO;
    }
out:
    if (dst)
        gguf_free(dst);
    gguf_free(src);
    ggml_free(data);
    return rc;
}

static bool silent_progress(float progress, void *user_data)
{
    (void)progress;
    (void)user_data;
    return true;
}

int forge_mkmodel(const struct forge_mkmodel_params *p, char err[FORGE_ERR_MAX])
{
    const struct mkmodel_shape *s = mkmodel_shape_of(p->preset);
    struct gguf_context *g = NULL;
    struct llama_model *model = NULL;
    struct fill_state fs = {0};
    char *tmp_path = NULL, *saved_path = NULL;
    char name[96];
    int rc;

    if (!s) {
        snprintf(err, FORGE_ERR_MAX, "unknown preset");
        return -EINVAL;
    }
    if (p->route_skew < 0.0f || (p->route_skew > 0.0f && !s->n_expert)) {
        snprintf(err, FORGE_ERR_MAX, "a routing skew needs a MoE preset and a value >= 0");
        return -EINVAL;
    }
    if (parse_type(p->type, &fs.wtype) < 0) {
        snprintf(err, FORGE_ERR_MAX, "unknown type '%s' (expected f32, f16, q8_0 or q4_0)",
                 p->type);
        return -EINVAL;
    }
    /* The temporary files first: an output that cannot be written is said before the
       generation's seconds, not after. */
    rc = make_temp(p->out_path, &saved_path, err);
    if (rc < 0)
        goto out;
    rc = make_temp(p->out_path, &tmp_path, err);
    if (rc < 0)
        goto out;
    g = gguf_init_empty();
    if (!g) {
        rc = -ENOMEM;
        goto out;
    }
    rc = copy_tokenizer(g, p->vocab_path, err);
    if (rc < 0)
        goto out;
    uint32_t n_vocab = (uint32_t)gguf_get_arr_n(g, gguf_find_key(g, "tokenizer.ggml.tokens"));

    snprintf(name, sizeof(name), "ramforge-%s-%s-seed%llu", s->name, p->type,
             (unsigned long long)p->seed);
    gguf_set_val_str(g, "general.name", name);
    mkmodel_describe(g, s, fs.wtype, p->route_skew, n_vocab);
    fs.seed = p->seed;
    fs.g = g;
    fs.n_expert = s->n_expert;
    fs.embd_scale = s->embd_scale > 0.0f ? s->embd_scale : 1.0f;
    fs.total = (uint64_t)gguf_get_n_tensors(g);
    fs.params = p;

    struct llama_model_params mp = llama_model_default_params();
    mp.progress_callback = silent_progress;
    model = llama_model_init_from_user(g, set_tensor_data, &fs, mp);
    if (!model || fs.rc < 0) {
        rc = fs.rc < 0 ? fs.rc : -EIO;
        snprintf(err, FORGE_ERR_MAX, "llama.cpp could not build the %s model: %s", s->name,
                 fs.rc < 0 ? rf_strerror(fs.rc) : "llama_model_init_from_user failed");
        goto out;
    }

    llama_model_save_to_file(model, saved_path);
    rc = write_standard_tensors(saved_path, tmp_path, g, fs.wtype, err);
    if (rc < 0)
        goto out;
    if (chmod(tmp_path, 0644) < 0 || rename(tmp_path, p->out_path) < 0) {
        rc = -errno;
        snprintf(err, FORGE_ERR_MAX, "cannot write %s: %s", p->out_path, strerror(errno));
        goto out;
    }
    free(tmp_path);
    tmp_path = NULL;
    rc = 0;
out:
    if (tmp_path) {
        unlink(tmp_path);
        free(tmp_path);
    }
    if (saved_path) {
        unlink(saved_path);
        free(saved_path);
    }
    if (model)
        llama_model_free(model);
    if (g)
        gguf_free(g);
    return rc;
}
