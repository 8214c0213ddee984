/* Private state shared by the forge modules (never installed). */
#ifndef RAMFORGE_FORGE_INTERNAL_H
#define RAMFORGE_FORGE_INTERNAL_H

#include <pthread.h>
#include <stdint.h>
#include <sys/stat.h>

#include "ramforge/forge/forge.h"
#include "ramforge/forge/forge_mkmodel.h"

#include "gate.h"

struct ggml_tensor;
struct gguf_context;
struct llama_context;
struct llama_context_params;
struct llama_model;
struct name_index;

struct forge_model {
    uint64_t instance_id;
    struct llama_model *model;
    bool borrowed; /* the application's model: never freed here */
    struct forge_model_info info;
    struct rf_tensor_meta *tensors; /* n_tensors, GGUF order */
    size_t n_tensors;
    struct name_index *by_name;     /* n_tensors, sorted by name */
    struct rf_mapping_meta mapping; /* the model file's mapping */
    uintptr_t map_start, map_end;   /* its virtual address range; 0,0 if not found */
    struct stat file_st;            /* fstat of the file at load (forge_model_file_changed) */
    struct forge_gate gate;         /* execution gate, contract version 1 */
    bool gate_ready;                /* gate initialised (for forge_model_free) */
    bool claimed;                   /* holds the claim of `model` (claim.c) */
    struct forge_model *next_claim; /* the next claimed forge model (claim.c's list) */
};

/*
 * Claims m->model for m: 0, or -EBUSY when another live forge model is
 * bound to the same llama_model (one instance, one execution gate).
 */
int forge_model_claim(struct forge_model *m);

/* Drops m's claim (none held: no-op); the llama_model may be bound again. */
void forge_model_unclaim(struct forge_model *m);

struct forge_context {
    struct forge_model *m;
    struct llama_context *ctx;
    uint64_t id;                   /* process-unique context id (1, 2, ...) */
    bool has_cb_eval;              /* created with a cb_eval callback installed */
    bool in_flight;                /* holds a lease: submitted, completion not observed */
    uint64_t execution_generation; /* completed executions of this context */
    int32_t *kv_tokens;            /* forge_generate's keep: the n_kv tokens its KV cache holds */
    size_t n_kv;
};

/*
 * A forge model bound to PATH's GGUF header only (tensor table, file
 * stat, gate), no llama_model yet: model_open's first step, and the
 * release during the load's table (load_release.c). Freed with
 * forge_model_free. Errors: those of forge_gguf_open, -ENOMEM.
 */
int forge_model_shell(const char *path, struct forge_model **out, char err[FORGE_ERR_MAX]);

/* Index in m's tensor table (GGUF order) of the tensor named name, or -1. */
int64_t forge_model_tensor_index(const struct forge_model *m, const char *name);

/*
 * The start addresses of the r--s VMAs of m's file (dev+inode of its
 * header's stat) now into *starts (*n of them; the caller frees). Errors:
 * those of reading /proc/self/maps, -ENOMEM (*starts NULL, *n 0).
 */
int forge_file_vma_starts(const struct forge_model *m, uint64_t **starts, size_t *n);

/*
 * Binds m's mapping (validated, file offset 0) to the r--s VMA of its file
 * at file offset 0 that starts at none of before[0, n_before), with the
 * VMAs continuing it: the mapping a load added since forge_file_vma_starts.
 * false: none, or two (m untouched).
 */
bool forge_bind_new_mapping(struct forge_model *m, const uint64_t *before, size_t n_before);

/* Creates a context from full llama.cpp parameters (the probe sets cb_eval). */
int forge_context_open(struct forge_model *m, const struct llama_context_params *cp,
                       struct forge_context **out, char err[FORGE_ERR_MAX]);

/*
 * Sums llama_get_memory_breakdown(ctx) over buffer types: context (KV
 * cache) and compute (graph scratch) bytes. -ENOSYS where the build has no
 * llama-ext.h, -EIO when llama.cpp throws.
 */
#ifdef __cplusplus
extern "C"
#endif
    int
    forge_memory_breakdown(const struct llama_context *ctx, uint64_t *context_bytes,
                           uint64_t *compute_bytes);

/*
 * Calls fn(ud, t) for every tensor llama.cpp's model holds
 * (llama_internal_get_tensor_map: name, buffer, data). Returns 0, -ENOSYS
 * where the build has no internal llama-model.h, -EIO when llama.cpp
 * throws.
 */
#ifdef __cplusplus
extern "C"
#endif
    int
    forge_model_tensor_map(const struct llama_model *model,
                           void (*fn)(void *ud, const struct ggml_tensor *t), void *ud);

/* What forge_advise_ranges does with each validated range. */
struct forge_advise_params {
    int advice;           /* MADV_DONTNEED, MADV_PAGEOUT or MADV_WILLNEED (lock 0) */
    int lock;             /* 0: madvise(advice); 1: mlock; -1: munlock (forge_pin.h) */
    uint64_t chunk_bytes; /* most bytes per madvise call, a page multiple; 0: one call per
                             piece of a range */
    bool protect_shared;  /* leave out shared pages of tensors outside the request (release) */
};

/* What forge_advise_ranges did: the figures of forge_release_result and forge_prefetch_result. */
struct forge_advise_tally {
    uint64_t requested_bytes; /* bytes of the non-empty ranges, refused ones too (not one whose
                                 bytes do not fit, or would overflow the sum: -EOVERFLOW) */
    uint64_t accepted_bytes;  /* bytes of the calls madvise returned 0 for */
    uint64_t protected_bytes; /* validated bytes left out by protect_shared */
    size_t n_ranges;          /* non-empty ranges */
    size_t n_refused;         /* refused before any call (-EFAULT, -EOVERFLOW): not touched */
    size_t n_failed;          /* refused, or with a failed call */
    uint64_t n_calls;         /* madvise calls made */
    uint64_t n_failed_calls;  /* of those, returned an error */
    int first_error;          /* negative errno of the first refusal or failure, 0 if none */
};

/*
 * Zeroes *out, a forge_pin_result or forge_prefetch_result (the same field
 * names), and fills it from the tally t of a forge_advise_ranges call that
 * began at t0 (rf_now_ns): its totals, and the time elapsed since.
 */
#define FORGE_RESULT_FROM_TALLY(out, t, t0)                                                        \
    do {                                                                                           \
        memset((out), 0, sizeof(*(out)));                                                          \
        (out)->requested_bytes = (t).requested_bytes;                                              \
        (out)->accepted_bytes = (t).accepted_bytes;                                                \
        (out)->n_ranges = (t).n_ranges;                                                            \
        (out)->n_refused = (t).n_refused;                                                          \
        (out)->n_calls = (t).n_calls;                                                              \
        (out)->n_failed_calls = (t).n_failed_calls;                                                \
        (out)->first_error = (t).first_error;                                                      \
        (out)->elapsed_ns = rf_now_ns() - (t0);                                                    \
    } while (0)

/*
 * The advise loop of release and prefetch (advise.c): under the exclusive
 * side of the gate, taken without blocking, validates each non-empty range
 * of file pages against one fresh read of /proc/self/maps (wholly inside
 * the validated mapping fragment and one r--s VMA of the model file at the
 * file offset it claims; else -EFAULT, never touched), sums bytes with
 * overflow checks (pages * page_bytes, the running sum: -EOVERFLOW, never
 * touched), then advises every validated range, but, with
 * p->protect_shared, its pages shared with a tensor outside the request
 * (the rule in advise.c), in calls of at most p->chunk_bytes.
 * range_errors (n entries, may be NULL) receives 0 or the range's negative
 * errno (refusal, or its first failed call). Returns 0 when the gate was
 * taken (*t holds the outcomes), -EINVAL (NULL m, p or t; ranges NULL with
 * n > 0), -EBUSY (a context in flight or another release running), -ENOMEM,
 * or the error of reading /proc/self/maps; on a negative return nothing was
 * advised and *t is zero.
 */
int forge_advise_ranges(struct forge_model *m, const struct rf_file_range *ranges, size_t n,
                        const struct forge_advise_params *p, struct forge_advise_tally *t,
                        int *range_errors);

/*
 * forge_gguf_check, keeping the parsed header: on success *out is a gguf
 * context (no tensor data) the caller frees with gguf_free, and *st the
 * file's stat.
 */
int forge_gguf_open(const char *path, struct gguf_context **out, struct stat *st,
                    char err[FORGE_ERR_MAX]);

/*
 * forge_gguf_open, also writing to *read_end_bytes (may be NULL) the
 * furthest byte of the file ramforge's own reads reached (+1): the header
 * is read without readahead, so the page cache gained at most the pages of
 * [0, *read_end_bytes). Written on failure too (what was read so far).
 * With direct_reason (may be NULL) the header is read with O_DIRECT
 * (aligned windows through a bounce buffer), so the page cache gains
 * nothing; where the filesystem refuses O_DIRECT (open or the first read:
 * EINVAL) it is read through the page cache as above and *direct_reason
 * says so (static); NULL when every read was direct.
 */
int forge_gguf_open_measured(const char *path, struct gguf_context **out, struct stat *st,
                             uint64_t *read_end_bytes, const char **direct_reason,
                             char err[FORGE_ERR_MAX]);

/*
 * Fills t[0 .. gguf_get_n_tensors(g)) from a header forge_gguf_open
 * accepted: index, name, type, absolute file offset (data offset + tensor
 * offset), payload bytes; mapping 0, access unknown.
 */
void forge_tensor_table_fill(const struct gguf_context *g, struct rf_tensor_meta *t);

/* --- the read-ahead window's eval callback (window.c, window_hook.c) --- */

struct forge_window;

/* The eval callback a window's callback chains, as llama.h's cb_eval and its user data. */
struct forge_eval_chain {
    bool (*cb)(struct ggml_tensor *t, bool ask, void *user_data); /* NULL: none */
    void *ud;                                                     /* cb's user data */
    bool asked; /* cb answered true to this node's ask (the decoding thread's) */
};

/*
 * The window's cb_eval on node t (ask as llama.cpp's), chaining inner:
 * inner sees every node and its answers are honoured. On the decoding
 * thread; one decode at a time per window.
 */
bool forge_window_eval(struct forge_window *w, struct ggml_tensor *t, bool ask,
                       struct forge_eval_chain *inner);

/* --- reads of the model file, O_DIRECT where allowed (direct_read.c) --- */

struct forge_direct_file {
    int fd;              /* -1: closed */
    bool direct;         /* fd has O_DIRECT (under *mu once readers run) */
    const char *reason;  /* static: why not; NULL: direct (as direct) */
    uint64_t file_bytes; /* the file's size at load */
    pthread_mutex_t *mu; /* the owner's lock, guarding direct and reason */
};

/* Opens m's model file with O_DIRECT, or without it where the filesystem refuses (EINVAL),
   with the reason. 0 or the open's -errno (fd -1). */
int forge_direct_open(struct forge_direct_file *f, const struct forge_model *m,
                      pthread_mutex_t *mu);

/* Reads n bytes at off into dst; short only at the end of the file. A refused O_DIRECT read
   (EINVAL) drops O_DIRECT and reads again. 0 or -errno. */
int forge_direct_read(struct forge_direct_file *f, uint8_t *dst, uint64_t off, uint64_t n);

/* Closes the file (closed: no-op). */
void forge_direct_close(struct forge_direct_file *f);

/* --- the MoE router's node (routing.c) and the expert cache (expert_cache.c) --- */

/* The layer of a node named "ffn_moe_topk-<layer>", or -1. */
int forge_topk_layer(const struct ggml_tensor *t);

/* The most experts a token selects that a reader of the router's node reads per row. */
#define FORGE_TOPK_MAX_USED 256

/* Row j's k = t->ne[0] expert ids of the router's node t into ids; false: not readable (not
   i32, k out of 1 .. FORGE_TOPK_MAX_USED, not contiguous in a row). */
bool forge_topk_row(const struct ggml_tensor *t, int64_t j, int32_t *ids);

struct forge_experts;

/* The expert cache on node t in the ask phase: true for the router's node of a cached layer;
   points the node's routed weights at their reservations (layers loaded this decode). */
bool forge_experts_ask(struct forge_experts *x, struct ggml_tensor *t);

/* After node t was computed: at the router's node, the missing slices read and waited for. */
void forge_experts_computed(struct forge_experts *x, struct ggml_tensor *t);

/* After a decode: every weight back at the mapping, layers above c trimmed. NULL: no-op. */
void forge_experts_decode_end(struct forge_experts *x);

/*
 * Fills info's n_expert, n_expert_used (both 0 for a dense model or
 * counts a token cannot route in) and route_skew from model's metadata.
 */
void forge_moe_info(const struct llama_model *model, struct forge_model_info *info);

/* --- model generation (mkmodel.c, mkmodel_arch.c) --- */

/* A preset of mkmodel: the architecture and its hyperparameters. */
struct mkmodel_shape {
    const char *name; /* the preset's name ("tiny", "qwen3moe-a3b", ...) */
    const char *arch; /* general.architecture: "llama", "qwen3moe", "qwen2moe" */
    uint32_t n_layer, n_embd, n_ff, n_head, n_head_kv, n_ctx;
    uint32_t n_expert;      /* routed experts per layer; 0: a dense model */
    uint32_t n_expert_used; /* experts each token selects (k) */
    uint32_t n_ff_exp;      /* an expert's feed-forward width */
    uint32_t n_ff_shexp;    /* the shared expert's feed-forward width; 0: none */
    float embd_scale;       /* token_embd's values scaled by it (0: 1), so that a token's own
                               embedding dominates the residual stream and the routing
                               depends on the token (MKMODEL_MOE_EMBD_SCALE) */
};

/* The shape of preset; NULL for a value outside the enum. */
const struct mkmodel_shape *mkmodel_shape_of(enum forge_mkmodel_preset preset);

/*
 * Writes into g the hyperparameter keys of s's architecture (vocabulary of
 * n_vocab tokens; for a MoE shape the expert keys and FORGE_KEY_ROUTE_SKEW)
 * and every tensor it reads, with its type: wtype (an enum ggml_type) for the matrices, f32
 * for norms, biases and routers.
 */
void mkmodel_describe(struct gguf_context *g, const struct mkmodel_shape *s, int wtype,
                      float route_skew, uint32_t n_vocab);

/*
 * For the router "blk.<N>.ffn_gate_inp.weight" of a model with n_expert
 * experts (at most FORGE_MKMODEL_MAX_EXPERTS) and route_skew > 0: writes
 * scales[e], the factor of expert e's row, (rank(e) + 1)^-route_skew with
 * rank a permutation of the seed and the layer, and returns true. False
 * (scales untouched) for any other tensor or a skew of 0.
 */
bool mkmodel_router_scales(const char *name, uint32_t n_expert, float route_skew, uint64_t seed,
                           float *scales);

/* --- sampling (sample.c) --- */

struct llama_sampler;
struct llama_vocab;
struct llama_token_data;

/* Scratch of forge_sample with n_probs > 0, zeroed before the first token. */
struct forge_sample_probs {
    struct llama_token_data *cand; /* n_vocab candidates */
    int32_t *ids;                  /* n_probs */
    float *p;                      /* n_probs */
    struct forge_token_probs out;  /* what on_token receives */
};

/* The sampler chain of p (see forge_generate_params), or NULL (out of memory, a bad grammar). */
struct llama_sampler *forge_sampler_chain(const struct llama_vocab *vocab,
                                          const struct forge_generate_params *p);

/*
 * Attaches chain to ctx's sequence 0 for backend sampling when
 * p->backend_sampling and llama-server would (no grammar, no n_probs
 * before the chain); true: attached (forge_sampler_detach before the
 * chain is freed), false: sampling stays on the CPU.
 */
bool forge_sampler_attach(struct llama_context *ctx, struct llama_sampler *chain,
                          const struct forge_generate_params *p);

/* Detaches the backend sampler of ctx's sequence 0 (forge_sampler_attach). */
void forge_sampler_detach(struct llama_context *ctx);

/*
 * Samples the next token of ctx's last logits through chain (accepted
 * into it) into *id; with p->n_probs > 0, fills pr->out. 0, -ENOMEM, -EIO.
 */
int forge_sample(struct llama_sampler *chain, struct llama_context *ctx,
                 const struct forge_generate_params *p, struct forge_sample_probs *pr, int32_t *id);

/* Frees the scratch of forge_sample (zeroed: no-op). */
void forge_sample_probs_free(struct forge_sample_probs *pr);

#endif
