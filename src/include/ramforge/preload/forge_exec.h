/*
 * The seam between ramforge exec's two preloaded parts (docs/EXEC.md):
 * the shim (libramforge-preload.so, src/preload/exec_shim.c), which stands
 * between an unmodified program and its libllama, and the engine
 * (libramforge-exec.so, src/preload/), which binds an rf_session to every
 * model the program loads. The shim links no llama.cpp: it loads the
 * engine (dlopen, RTLD_DEEPBIND) at the first model load, only when the
 * process's libllama is the build ramforge was made against, and calls it
 * through this table. Types and names only: no function is defined here.
 */
#ifndef RAMFORGE_FORGE_EXEC_H
#define RAMFORGE_FORGE_EXEC_H

#include <stdbool.h>
#include <stdint.h>

struct llama_model;
struct llama_model_params;
struct llama_context;
struct llama_context_params;

/* What the shim gives the engine. */
struct forge_exec_host {
    /* Writes "ramforge: <text>\n" to standard error in one write(2) (the host's stdout is
       never touched). */
    void (*say)(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
    const char *shim_path; /* the shim's file (dladdr); static */
    /* libllama's own llama_synchronize and llama_n_ctx (the engine includes no llama.cpp
       header): real calls, never the shim's definitions. */
    void (*synchronize)(struct llama_context *ctx);
    uint32_t (*n_ctx)(const struct llama_context *ctx);
};

/* How the program asked llama.cpp to load a model (its llama_model_params). */
struct forge_exec_load {
    bool mmap;            /* the weights mapped from the file */
    bool mlock;           /* the mapping (or the copy) locked */
    bool use_extra_bufts; /* repacked copies allowed (llama.cpp's default) */
    bool no_alloc;        /* llama.cpp's memory-fit probe (common_fit_params: llama-server's
                             --fit, on by default): metadata only, no weight read, mapped or
                             allocated, freed at once */
};

/* The context a program asks llama_init_from_model for (its llama_context_params). */
struct forge_exec_context {
    uint32_t n_ctx;     /* cells llama.cpp will size the KV cache for: the asked n_ctx, or the
                           model's training context when 0 (llama-server's default) */
    uint32_t n_seq_max; /* params.n_seq_max (llama-server's --parallel) */
    uint32_t type_k;    /* params.type_k: the K cache's ggml_type (-ctk; f16 by default) */
    uint32_t type_v;    /* params.type_v: the V cache's ggml_type (-ctv) */
};

/*
 * The engine's hooks, called by the shim's interposers with the nesting
 * guard held (a llama_* call made inside a hook, or by libllama itself
 * inside an interposed call, goes straight to libllama). Every hook takes
 * only the engine's own locks. Pointers are the program's (borrowed).
 */
struct forge_exec_hooks {
    /* Before llama_model_load_from_file(path): 0 to load, -1 to refuse (the shim returns NULL;
       the engine said why and wrote the report). */
    int (*before_load)(const char *path, const struct forge_exec_load *load);
    /* Just before the load, after before_load said 0: may decorate *params (the release
       during the load wraps its progress callback, forge_load_release.h); returns a token
       for load_end (NULL: nothing to end; a no_alloc probe loads nothing to release). */
    void *(*load_begin)(const char *path, struct llama_model_params *params,
                        const struct forge_exec_load *load);
    /* Right after the load returned (model NULL: it failed), with load_begin's token. */
    void (*load_end)(void *token);
    /* After a successful load: bind a session (mmap only; a no_alloc probe is not a model to
       manage). */
    void (*loaded)(struct llama_model *model, const char *path, const struct forge_exec_load *load);
    /* Before llama_model_free(model): the last boundary, the report, the session freed. */
    void (*model_freeing)(struct llama_model *model);
    /* Before llama_init_from_model(model, params), before the KV cache is allocated: 0 to
       create it, -1 to refuse (the shim returns NULL, the program's failed-allocation path;
       the engine said why in one line and wrote the report). */
    int (*context_admit)(struct llama_model *model, const struct forge_exec_context *c);
    /* After context_admit, before llama_init_from_model(model, *params): may decorate *params
       (the streaming policy's read-ahead window: an eval callback chaining the program's,
       ramforge/forge/forge_window.h); *token for context_created (NULL: nothing). -1: a
       decoration the engine could not make (out of memory; said), without which the context
       would read weights a window refills: the shim returns NULL without creating it. */
    int (*context_params)(struct llama_model *model, struct llama_context_params *params,
                          void **token);
    /* After llama_init_from_model(model) returned ctx (NULL: it failed, token freed); n_ctx
       as asked (0: the model's); asked: what context_admit was given (the cache types);
       token context_params'. 0: counted (or not the engine's
       model); -1: a context of a managed model the engine could not record (out of memory;
       said), which would run without a lease: the shim frees it and returns NULL, the
       program's own out-of-memory path. */
    int (*context_created)(struct llama_model *model, struct llama_context *ctx, uint32_t n_ctx,
                           const struct forge_exec_context *asked, void *token);
    /* Before llama_free(ctx): its lease ended, ctx no longer looked up (its address may be
       reused at once). Returns what context_freed takes. */
    void *(*context_freeing)(struct llama_context *ctx);
    /* After the real llama_free (its buffers gone): the context no longer counted; the last
       one's after_session boundary. freeing: context_freeing's return. */
    void (*context_freed)(void *freeing);
    /* Before llama_decode/llama_encode(ctx): the operation opened, the lease taken, the
       window's turn (forge_window_hook_decode_begin). */
    void (*submit)(struct llama_context *ctx, int32_t n_tokens);
    /* After llama_state_seq_get_data_ext (saved) or llama_state_seq_set_data_ext (restored) on
       ctx returned bytes (0: failed); partial: LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY (a
       checkpoint of the recurrent or SWA part only). llama-server's host prompt cache. */
    void (*state)(struct llama_context *ctx, uint64_t bytes, bool saved, bool partial);
    /* After llama_state_seq_get_size_ext(ctx) returned size (partial as above): the size the
       program is given. llama-server skips an entry larger than its --cache-ram without
       allocating it, so a size over the bound stops the cache's growth (engine_prompt.c). */
    uint64_t (*state_size)(struct llama_context *ctx, uint64_t size, bool partial);
    /* After llama_decode/llama_encode, on the same thread: rc its return; the window's turn
       ended; a failed submission ends the lease. */
    void (*submitted)(struct llama_context *ctx, int32_t rc);
    /* After llama_synchronize or a getter that synchronizes (llama_get_logits*,
       llama_get_embeddings*, the backend-sampling llama_get_sampled_*): completion
       observed, the lease ended. */
    void (*completed)(struct llama_context *ctx);
};

/* The engine's one exported symbol, and its type. */
#define FORGE_EXEC_ENGINE_ENTRY "rf_exec_engine_init"
typedef const struct forge_exec_hooks *(*forge_exec_engine_init_fn)(
    const struct forge_exec_host *host);

/* The environment the shim reads (ramforge exec sets them; docs/EXEC.md lists the engine's). */
#define FORGE_EXEC_ENV_ENGINE                                                                      \
    "RAMFORGE_EXEC_ENGINE" /* the engine's path; default: beside the                               \
                              shim */

#endif
