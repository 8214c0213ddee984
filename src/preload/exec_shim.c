/*
 * libramforge-preload.so: the shim ramforge exec preloads into an
 * unmodified llama.cpp program (docs/EXEC.md). It defines the libllama
 * calls the gate and the session need (load, free, contexts, decode and
 * encode, synchronize and every getter that synchronizes: logits,
 * embeddings and the backend-sampling results, and the sequence-state
 * saves and restores of llama-server's prompt cache), and each calls the
 * real one, resolved once with dlsym(RTLD_NEXT).
 *
 * It links no llama.cpp and does nothing until the program loads a model:
 * then, once per process, it checks that the libllama defining the real
 * llama_model_load_from_file carries the GNU build ID ramforge was built
 * against (a mismatched llama_model_params is undefined behaviour, so a
 * mismatch is one line on stderr and every call passes through), and loads
 * the engine (libramforge-exec.so) with RTLD_DEEPBIND, so that the
 * engine's own llama_* calls bind to libllama, not to these definitions.
 *
 * The nesting guard: a thread-local depth, raised around every hook. A
 * call that arrives with the depth raised (made by a hook, or by libllama
 * itself inside an interposed call, as a deprecated wrapper calls its
 * successor) goes straight to libllama: no hook runs twice for one call,
 * no lease is taken twice. The shim takes no lock of its own besides
 * pthread_once's at the first load.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ramforge/core/kv_types.h"
#include "ramforge/preload/forge_exec.h"
#include "ramforge/sys/elf_info.h"

#include "llama.h"

/* core's cache types are ggml's ids (the context's type_k/type_v reach admission as they are) */
_Static_assert((int)RF_KV_TYPE_F32 == (int)GGML_TYPE_F32 &&
                   (int)RF_KV_TYPE_F16 == (int)GGML_TYPE_F16 &&
                   (int)RF_KV_TYPE_BF16 == (int)GGML_TYPE_BF16 &&
                   (int)RF_KV_TYPE_Q8_0 == (int)GGML_TYPE_Q8_0 &&
                   (int)RF_KV_TYPE_Q4_0 == (int)GGML_TYPE_Q4_0 &&
                   (int)RF_KV_TYPE_Q4_1 == (int)GGML_TYPE_Q4_1 &&
                   (int)RF_KV_TYPE_Q5_0 == (int)GGML_TYPE_Q5_0 &&
                   (int)RF_KV_TYPE_Q5_1 == (int)GGML_TYPE_Q5_1 &&
                   (int)RF_KV_TYPE_IQ4_NL == (int)GGML_TYPE_IQ4_NL,
               "ramforge/core/kv_types.h: a cache type's id is not ggml's");

/* RAMFORGE_LLAMA_VERSION, _SONAME and _BUILD_ID: the build recorded by CMake (llama_build.c's). */
#define ENGINE_NAME "libramforge-exec.so"

#define SHIM_API __attribute__((visibility("default")))

static __thread unsigned depth __attribute__((tls_model("initial-exec")));
static const struct forge_exec_hooks *_Atomic hooks;
static pthread_once_t engine_once = PTHREAD_ONCE_INIT;

/* The real definition of name after this object's (dlsym RTLD_NEXT), cached in *slot. */
static void *real_sym(void *_Atomic *slot, const char *name)
{
    void *p = atomic_load_explicit(slot, memory_order_acquire);
    if (p)
        return p;
    p = dlsym(RTLD_NEXT, name);
    if (!p) {
        /* A definition was called, so one exists after the preload; never return garbage. */
        char line[160];
        int n = snprintf(line, sizeof(line),
                         "ramforge: exec: %s: no definition after the "
                         "preload (dlsym RTLD_NEXT)\n",
                         name);
        if (write(STDERR_FILENO, line, (size_t)n) < 0)
            abort();
        abort();
    }
    atomic_store_explicit(slot, p, memory_order_release);
    return p;
}

#define REAL(name)                                                                                 \
    ({                                                                                             \
        static void *_Atomic slot_;                                                                \
        (__typeof__(&name))real_sym(&slot_, #name);                                                \
    })

/* One line on stderr: an admission reason (up to RF_ADMISSION_REASON_MAX, 4096 bytes) with
   the path and the engine's words around it fits whole. */
static void say(const char *fmt, ...)
{
    char line[8192];
    va_list ap;
    int n = snprintf(line, sizeof(line), "ramforge: ");
    va_start(ap, fmt);
    n += vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof(line) - 2)
        n = (int)sizeof(line) - 2;
    line[n++] = '\n';
    if (write(STDERR_FILENO, line, (size_t)n) < 0)
        return; /* nowhere else to say it */
}

/* The hooks when the engine runs and the calling thread is not inside a hook; else NULL. */
static const struct forge_exec_hooks *enter(void)
{
    const struct forge_exec_hooks *h = atomic_load_explicit(&hooks, memory_order_acquire);
    if (!h || depth)
        return NULL;
    depth++;
    return h;
}

static void leave(void)
{
    depth--;
}

static void real_synchronize(struct llama_context *ctx)
{
    REAL(llama_synchronize)(ctx);
}

static uint32_t real_n_ctx(const struct llama_context *ctx)
{
    return REAL(llama_n_ctx)(ctx);
}

/* Once per process, at the first model load: the libllama check, then the engine. */
static void engine_load(void)
{
    static struct forge_exec_host host = {
        .say = say, .synchronize = real_synchronize, .n_ctx = real_n_ctx};
    char lib[512], id[RFSYS_BUILD_ID_MAX], engine[1024];
    Dl_info self;

    void *real_load = REAL(llama_model_load_from_file);
    int rc = rfsys_build_id_at(real_load, lib, sizeof(lib), id, sizeof(id));
    if (rc < 0 || strcmp(id, RAMFORGE_LLAMA_BUILD_ID) != 0) {
        say("exec: this process runs %s (build ID %s), not the llama.cpp ramforge was built "
            "against (%s, %s, build ID %s): its models are not managed",
            lib[0] ? lib : "a libllama of unknown path", rc == 0 ? id : "unknown",
            RAMFORGE_LLAMA_VERSION, RAMFORGE_LLAMA_SONAME, RAMFORGE_LLAMA_BUILD_ID);
        return;
    }
    if (!dladdr((void *)engine_load, &self) || !self.dli_fname) {
        say("exec: cannot find the preload's own file: its models are not managed");
        return;
    }
    host.shim_path = self.dli_fname;
    const char *path = getenv(FORGE_EXEC_ENV_ENGINE);
    if (path && path[0]) {
        snprintf(engine, sizeof(engine), "%s", path);
    } else {
        const char *slash = strrchr(self.dli_fname, '/');
        int dir = slash ? (int)(slash - self.dli_fname) + 1 : 0;
        snprintf(engine, sizeof(engine), "%.*s%s", dir, self.dli_fname, ENGINE_NAME);
    }
    /* DEEPBIND: the engine's llama_* calls bind to libllama, never to the definitions here. */
    void *h = dlopen(engine, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (!h) {
        say("exec: cannot load the engine: %s: its models are not managed", dlerror());
        return;
    }
    forge_exec_engine_init_fn init = (forge_exec_engine_init_fn)dlsym(h, FORGE_EXEC_ENGINE_ENTRY);
    const struct forge_exec_hooks *eh = init ? init(&host) : NULL;
    if (!eh) {
        if (!init)
            say("exec: %s has no %s: its models are not managed", engine, FORGE_EXEC_ENGINE_ENTRY);
        return; /* the engine said why */
    }
    atomic_store_explicit(&hooks, eh, memory_order_release);
}

SHIM_API struct llama_model *llama_model_load_from_file(const char *path,
                                                        struct llama_model_params params)
{
    if (!depth) {
        depth++; /* the engine's load and checks run with the guard raised */
        pthread_once(&engine_once, engine_load);
        depth--;
    }
    const struct forge_exec_hooks *h = enter();
    if (!h)
        return REAL(llama_model_load_from_file)(path, params);
    enum llama_load_mode lm = params.load_mode;
    const struct forge_exec_load load = {
        .mmap = lm != LLAMA_LOAD_MODE_NONE && lm != LLAMA_LOAD_MODE_MLOCK &&
                lm != LLAMA_LOAD_MODE_DIRECT_IO,
        .mlock = lm == LLAMA_LOAD_MODE_MLOCK || lm == LLAMA_LOAD_MODE_MMAP_MLOCK,
        .use_extra_bufts = params.use_extra_bufts,
        .no_alloc = params.no_alloc,
    };
    struct llama_model *m = NULL;
    if (h->before_load(path, &load) == 0) {
        void *token = h->load_begin(path, &params, &load);
        m = REAL(llama_model_load_from_file)(path, params);
        h->load_end(token);
        if (m)
            h->loaded(m, path, &load);
    }
    leave();
    return m;
}

SHIM_API void llama_model_free(struct llama_model *model)
{
    const struct forge_exec_hooks *h = enter();
    if (h) {
        h->model_freeing(model);
        leave();
    }
    REAL(llama_model_free)(model);
}

SHIM_API struct llama_context *llama_init_from_model(struct llama_model *model,
                                                     struct llama_context_params params)
{
    const struct forge_exec_hooks *h = enter();
    /* llama.cpp's n_ctx 0: the model's training context (llama-server's default) */
    const struct forge_exec_context want = {
        .n_ctx = params.n_ctx || !model || !h ? params.n_ctx
                                              : (uint32_t)REAL(llama_model_n_ctx_train)(model),
        .n_seq_max = params.n_seq_max,
        .type_k = (uint32_t)params.type_k,
        .type_v = (uint32_t)params.type_v};
    if (h) {
        if (h->context_admit(model, &want) < 0) {
            leave();
            return NULL; /* refused before its KV cache exists (the engine said why) */
        }
    }
    void *token = NULL;
    if (h && h->context_params(model, &params, &token) < 0) {
        leave();
        return NULL; /* it would read weights a window refills: not created */
    }
    struct llama_context *ctx = REAL(llama_init_from_model)(model, params);
    if (h) {
        if (h->context_created(model, ctx, params.n_ctx, &want, token) < 0 && ctx) {
            REAL(llama_free)(ctx); /* it would decode without a lease: not created */
            ctx = NULL;
        }
        leave();
    }
    return ctx;
}

/* The context's lease ends before the real free; it stops counting after it (its buffers are
   gone by the after_session boundary the last one runs). */
SHIM_API void llama_free(struct llama_context *ctx)
{
    const struct forge_exec_hooks *h = enter();
    if (!h) {
        REAL(llama_free)(ctx);
        return;
    }
    void *freeing = h->context_freeing(ctx);
    REAL(llama_free)(ctx);
    h->context_freed(freeing);
    leave();
}

/* A submission under the gate: the lease from the call until completion is observed. */
#define SUBMIT(name, ctx, batch)                                                                   \
    do {                                                                                           \
        const struct forge_exec_hooks *h = enter();                                                \
        if (!h)                                                                                    \
            return REAL(name)(ctx, batch);                                                         \
        h->submit(ctx, batch.n_tokens);                                                            \
        int32_t rc_ = REAL(name)(ctx, batch);                                                      \
        h->submitted(ctx, rc_);                                                                    \
        leave();                                                                                   \
        return rc_;                                                                                \
    } while (0)

SHIM_API int32_t llama_decode(struct llama_context *ctx, struct llama_batch batch)
{
    SUBMIT(llama_decode, ctx, batch);
}

SHIM_API int32_t llama_encode(struct llama_context *ctx, struct llama_batch batch)
{
    SUBMIT(llama_encode, ctx, batch);
}

/* A sequence state saved or restored (llama-server's host prompt cache): the real call, then
   its size to the engine (a save's bytes written: llama-server's buffer is that size). */
#define STATE(name, saved, ctx, buf, size, seq_id, flags)                                          \
    do {                                                                                           \
        const struct forge_exec_hooks *h = enter();                                                \
        size_t n_ = REAL(name)(ctx, buf, size, seq_id, flags);                                     \
        if (h) {                                                                                   \
            h->state(ctx, n_, saved, flags &LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY);                   \
            leave();                                                                               \
        }                                                                                          \
        return n_;                                                                                 \
    } while (0)

/* The size of a state to save: the engine may give a size over llama-server's bound (its
   prompt cache then skips the entry, allocating nothing). */
SHIM_API size_t llama_state_seq_get_size_ext(struct llama_context *ctx, llama_seq_id seq_id,
                                             llama_state_seq_flags flags)
{
    const struct forge_exec_hooks *h = enter();
    size_t n = REAL(llama_state_seq_get_size_ext)(ctx, seq_id, flags);
    if (h) {
        uint64_t seen = h->state_size(ctx, n, flags & LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY);
        n = seen <= SIZE_MAX ? (size_t)seen : n;
        leave();
    }
    return n;
}

SHIM_API size_t llama_state_seq_get_data_ext(struct llama_context *ctx, uint8_t *dst, size_t size,
                                             llama_seq_id seq_id, llama_state_seq_flags flags)
{
    STATE(llama_state_seq_get_data_ext, true, ctx, dst, size, seq_id, flags);
}

SHIM_API size_t llama_state_seq_set_data_ext(struct llama_context *ctx, const uint8_t *src,
                                             size_t size, llama_seq_id dest_seq_id,
                                             llama_state_seq_flags flags)
{
    STATE(llama_state_seq_set_data_ext, false, ctx, src, size, dest_seq_id, flags);
}

/* After a call that synchronizes ctx: completion observed. */
static void completed(struct llama_context *ctx)
{
    const struct forge_exec_hooks *h = enter();
    if (h) {
        h->completed(ctx);
        leave();
    }
}

SHIM_API void llama_synchronize(struct llama_context *ctx)
{
    REAL(llama_synchronize)(ctx);
    completed(ctx);
}

/* A getter that synchronizes ctx (whatever it returns): the real call, then completion
   observed. */
#define SYNCED(name, ctx, ...)                                                                     \
    do {                                                                                           \
        __typeof__(name(ctx, ##__VA_ARGS__)) r_ = REAL(name)(ctx, ##__VA_ARGS__);                  \
        completed(ctx);                                                                            \
        return r_;                                                                                 \
    } while (0)

SHIM_API float *llama_get_logits(struct llama_context *ctx)
{
    SYNCED(llama_get_logits, ctx);
}

SHIM_API float *llama_get_logits_ith(struct llama_context *ctx, int32_t i)
{
    SYNCED(llama_get_logits_ith, ctx, i);
}

SHIM_API float *llama_get_embeddings(struct llama_context *ctx)
{
    SYNCED(llama_get_embeddings, ctx);
}

SHIM_API float *llama_get_embeddings_ith(struct llama_context *ctx, int32_t i)
{
    SYNCED(llama_get_embeddings_ith, ctx, i);
}

SHIM_API float *llama_get_embeddings_seq(struct llama_context *ctx, llama_seq_id seq_id)
{
    SYNCED(llama_get_embeddings_seq, ctx, seq_id);
}

/* The backend-sampling getters (llama.h's "backend sampling API"): each synchronizes ctx, and a
   program that samples on the backend (common_sampler with --backend-sampling) may read its
   token through them alone. */
SHIM_API llama_token llama_get_sampled_token_ith(struct llama_context *ctx, int32_t i)
{
    SYNCED(llama_get_sampled_token_ith, ctx, i);
}

SHIM_API float *llama_get_sampled_probs_ith(struct llama_context *ctx, int32_t i)
{
    SYNCED(llama_get_sampled_probs_ith, ctx, i);
}

SHIM_API uint32_t llama_get_sampled_probs_count_ith(struct llama_context *ctx, int32_t i)
{
    SYNCED(llama_get_sampled_probs_count_ith, ctx, i);
}

SHIM_API float *llama_get_sampled_logits_ith(struct llama_context *ctx, int32_t i)
{
    SYNCED(llama_get_sampled_logits_ith, ctx, i);
}

SHIM_API uint32_t llama_get_sampled_logits_count_ith(struct llama_context *ctx, int32_t i)
{
    SYNCED(llama_get_sampled_logits_count_ith, ctx, i);
}

SHIM_API llama_token *llama_get_sampled_candidates_ith(struct llama_context *ctx, int32_t i)
{
    SYNCED(llama_get_sampled_candidates_ith, ctx, i);
}

SHIM_API uint32_t llama_get_sampled_candidates_count_ith(struct llama_context *ctx, int32_t i)
{
    SYNCED(llama_get_sampled_candidates_count_ith, ctx, i);
}
