/*
 * forge: the native layer over llama.cpp's C API.
 *
 * It loads a GGUF model through llama.cpp (mmap), exposes its tensors and
 * mappings as the plain structs of inventory.h, observes once which weights
 * the inference graph reads from the file mapping and which from an
 * anonymous (repacked) copy, runs greedy generation, and generates test
 * models. It is the only part of ramforge that includes llama.cpp headers;
 * callers see opaque handles and plain structs.
 *
 * Errors are negative errno values (or -RF_EBADMODEL) with a one-line
 * message written to a caller buffer ("cannot open x.gguf: No such file or
 * directory"); nothing is printed.
 */
#ifndef RAMFORGE_FORGE_H
#define RAMFORGE_FORGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ramforge/core/binding.h"
#include "ramforge/core/inventory.h"
#include "ramforge/core/load_release.h"
#include "ramforge/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FORGE_ERR_MAX RF_ERR_MAX /* size of the message buffers below (ramforge/error.h) */

/* llama.cpp version string this build links, e.g. "v0.5.0 de3ff81". */
const char *forge_llama_version(void);

/* The llama.cpp build ramforge was compiled against; static strings, "unknown" if not known. */
struct forge_llama_build {
    const char *version;  /* tag and commit, forge_llama_version() */
    const char *soname;   /* SONAME of its libllama, "libllama.so.0" */
    const char *build_id; /* GNU build ID of that libllama, hex */
};
const struct forge_llama_build *forge_llama_built(void);

/*
 * NULL when the process's libllama is the build above (same GNU build ID);
 * otherwise one static line naming both builds: llama.cpp's C++ internals
 * (memory breakdown, tensor map) are then not called and what they give is
 * unknown. Checked once per process (logged once as a warning).
 */
const char *forge_llama_mismatch(void);

struct llama_context;

/*
 * Sums llama_get_memory_breakdown(ctx) over buffer types: context (KV
 * cache) and compute (graph scratch) bytes, of any context (forge's or a
 * program's under exec). -ENOSYS where the build has no llama-ext.h,
 * -ENOEXEC with another libllama (forge_llama_mismatch), -EIO when
 * llama.cpp throws.
 */
int forge_memory_breakdown(const struct llama_context *ctx, uint64_t *context_bytes,
                           uint64_t *compute_bytes);

/*
 * Where the llama.cpp ramforge was built against comes from (static text: the pinned
 * build of scripts/build-llama.sh and its npm package, an install prefix, the package's
 * private copy), and the file of the libllama this process runs (path_size bytes, the
 * path dladdr gives). Returns 0, or -ENOENT when the loaded libllama is not found.
 */
const char *forge_llama_origin(void);
int forge_llama_loaded(char *path, size_t path_size);

/*
 * Initialises llama.cpp's backends once and routes its log through
 * rf_log (verbose false drops its INFO/DEBUG lines). Idempotent.
 */
void forge_init(bool verbose);

/*
 * Checks that PATH is a GGUF file llama.cpp can map: readable, GGUF magic,
 * a header gguf can parse, and every tensor's data inside the file. Reads
 * only the header (gguf_init_from_file with no_alloc). Returns 0, or
 * -errno (open/stat) / -RF_EBADMODEL with the reason in err.
 */
int forge_gguf_check(const char *path, char err[FORGE_ERR_MAX]);

struct forge_model;

struct forge_model_params {
    bool use_extra_bufts;     /* allow CPU_REPACK (repacked anonymous weights); default true */
    bool mlock;               /* LLAMA_LOAD_MODE_MMAP_MLOCK: lock the mapping; default false */
    int n_threads;            /* threads for the access probe; <= 0: llama.cpp's default */
    bool probe_access;        /* run the graph probe at load; default true */
    bool placement_access;    /* without the probe: classify weights by placement (no
                                 decode); default false */
    bool release_during_load; /* release each copied (repacked) weight's file pages as soon
                                 as the load copied it (forge_load_release.h); default false */
};

struct forge_model_params forge_model_default_params(void);

/*
 * Loads PATH with llama_model_load_from_file (LLAMA_LOAD_MODE_MMAP), reads
 * the tensor table with gguf, finds the model's r--s mappings in
 * /proc/self/maps by the file's dev+inode, and classifies the weights'
 * access (forge_model_info.access_basis; enum rf_access_basis says what
 * each value then means):
 *
 *   probe_access      decodes one token on a short-lived context whose
 *                     cb_eval ask phase records each weight source's data
 *                     pointer: inside the file mapping = FILE_BACKED,
 *                     elsewhere = ANONYMOUS, never seen = UNREFERENCED. The
 *                     probe context is freed before this returns. Costs one
 *                     decode: it reads every weight once.
 *   placement_access  (when probe_access is false) the same pointer rule on
 *                     every tensor llama.cpp's model holds
 *                     (llama_internal_get_tensor_map, from the pinned
 *                     build's internal headers), without decoding; a file
 *                     tensor the model holds no tensor for is UNREFERENCED.
 *                     Microseconds. A build without those headers runs the
 *                     probe instead, so the classification is not lost.
 *   neither           every access stays UNKNOWN.
 *
 * *out is freed with forge_model_free. Errors: those of forge_gguf_check,
 * -EIO when llama.cpp refuses the model, -ENOMEM.
 */
int forge_model_load(const char *path, const struct forge_model_params *params,
                     struct forge_model **out, char err[FORGE_ERR_MAX]);

struct llama_model;

/*
 * As forge_model_load, for a model the application loaded itself from
 * PATH (llama_model_load_from_file with mmap): the model is borrowed,
 * never freed by forge_model_free, and must outlive *out. params->mlock
 * and use_extra_bufts are ignored (the application chose them);
 * probe_access and n_threads apply. A llama_model is bound to one forge
 * model at a time (one instance, one execution gate). Errors: -EBUSY (a
 * live forge model is already bound to model), -EINVAL (NULL model or path;
 * no read-only shared mapping of PATH in this process holds the model's
 * tensor data: another file, or a copy, than the one the model was loaded
 * from, or a model loaded without mmap, even beside an mmap'd instance of
 * the same file), those of forge_model_load.
 */
int forge_model_wrap(struct llama_model *model, const char *path,
                     const struct forge_model_params *params, struct forge_model **out,
                     char err[FORGE_ERR_MAX]);

/*
 * The execution lease for decode calls forge does not make (an embedding
 * application's own llama_decode): begin takes the gate's shared side
 * (waits while a release runs), end releases it after llama_synchronize
 * and counts one completed execution. Every end must match a begin.
 */
void forge_model_lease_begin(struct forge_model *m);
void forge_model_lease_end(struct forge_model *m);

/*
 * A context the application created itself (llama_init_from_model outside
 * forge, as ramforge exec sees it) opened / was freed: counted in the gate
 * as alive (forge_model_lifetime.active_contexts), as forge's own are.
 * Every close must match an open.
 */
void forge_model_context_opened(struct forge_model *m);
void forge_model_context_closed(struct forge_model *m);

/* Frees the model and everything it owns (not a wrapped model's llama_model). NULL is a no-op. */
void forge_model_free(struct forge_model *m);

/* Process-unique id of this loaded model instance (1, 2, ...). */
uint64_t forge_model_instance_id(const struct forge_model *m);

/* The tensor table (GGUF order); owned by m, valid until forge_model_free. */
const struct rf_tensor_meta *forge_model_tensors(const struct forge_model *m, size_t *n_out);

/* The model's mappings (one per file); owned by m. */
const struct rf_mapping_meta *forge_model_mappings(const struct forge_model *m, size_t *n_out);

/* Model facts from llama.cpp (llama_model_desc, n_layer, ...). */
struct forge_model_info {
    char desc[128];  /* llama_model_desc: "llama 1B Q8_0" */
    char path[4096]; /* as given to forge_model_load */
    uint64_t file_size_bytes;
    uint64_t n_params;   /* llama_model_n_params */
    uint64_t size_bytes; /* llama_model_size: native logical tensor bytes */
    int32_t n_layer, n_embd, n_head, n_head_kv, n_ctx_train, n_vocab;
    uint32_t n_expert;      /* MoE: routed experts per layer ("<arch>.expert_count"); 0: dense */
    uint32_t n_expert_used; /* MoE: experts each token selects per layer (k) */
    bool has_route_skew;    /* the model names the routing skew it was generated with */
    float route_skew;       /* FORGE_KEY_ROUTE_SKEW (mkmodel --route-skew) */
    bool access_probed;     /* the graph probe ran and classified tensors */
    enum rf_access_basis access_basis; /* how the tensors' access was classified */
    uint64_t probe_ns; /* wall time of the classification (probe or placement), ns */
    uint64_t fs_magic; /* statfs f_type of the file's filesystem (rf_fs_profile_of);
                          0: not known */
    struct rf_load_release load_release; /* release_during_load: what it did */
};
void forge_model_get_info(const struct forge_model *m, struct forge_model_info *out);

/*
 * Whether the file at the model's path is still the file loaded: stat(2)
 * of info.path now against the fstat taken when its header was checked
 * before the load (st_dev, st_ino, st_size, st_mtim). A file replaced by a
 * rename has another inode (the mapping still holds the old one); one
 * truncated or rewritten in place has another size or mtime, and its
 * mapping may now reach past the end of the file (a read there raises
 * SIGBUS; madvise, mincore and PAGEMAP_SCAN read no page and stay safe).
 * Returns 0 with *changed false when all four match; 0 with *changed true
 * when the file changed, or is gone or cannot be stat'ed (nothing can be
 * vouched for), with why (why_size bytes, may be NULL) set to one line
 * naming what differs, at load -> now; -EINVAL for NULL m or changed.
 * Reads no byte of the file or its mapping.
 */
int forge_model_file_changed(const struct forge_model *m, bool *changed, char *why,
                             size_t why_size);

/*
 * Lifetime (native contract version RF_CONTRACT_VERSION of binding.h, 1:
 * the version the policy binds to). A model-scoped execution gate:
 * a context holds a shared lease from graph submission (llama_decode) until
 * llama_synchronize or its destruction observes completion; page release
 * takes the exclusive side without blocking and fails with -EBUSY while any
 * lease is held, and new submissions wait while a release runs.
 */
struct forge_model_lifetime {
    uint32_t contract_version;     /* RF_CONTRACT_VERSION */
    uint64_t instance_id;          /* forge_model_instance_id */
    bool quiescent;                /* no context in flight and none alive */
    uint32_t in_flight_contexts;   /* contexts holding a lease */
    uint32_t active_contexts;      /* contexts alive */
    uint64_t execution_generation; /* completed executions of all contexts */
};

/* A consistent snapshot of the model's gate. Thread-safe. */
void forge_model_lifetime_state(struct forge_model *m, struct forge_model_lifetime *out);

struct forge_context;

struct ggml_tensor;

struct forge_context_params {
    uint32_t n_ctx;    /* context size, tokens */
    uint32_t n_batch;  /* largest batch passed to forge_context_decode; 0 = n_ctx */
    int32_t n_threads; /* <= 0: llama.cpp's default */
    /* llama.cpp's cb_eval (ggml_backend_sched_eval_callback), installed only
     * when non-NULL; NULL (the zero value): no callback at all. */
    bool (*cb_eval)(struct ggml_tensor *t, bool ask, void *user_data);
    void *cb_eval_user_data; /* passed to cb_eval; borrowed */
};

struct forge_context_lifetime {
    bool in_flight;                /* holds a lease */
    uint64_t execution_generation; /* completed executions of this context */
};

/* Creates a context (counted active until freed). Errors: -EIO, -ENOMEM. */
int forge_context_create(struct forge_model *m, const struct forge_context_params *p,
                         struct forge_context **out, char err[FORGE_ERR_MAX]);

/*
 * Submits n tokens (positions continue from the last decode): synchronizes
 * a previous submission, takes the shared lease (waiting while a release
 * runs) and calls llama_decode. The lease is held until
 * forge_context_synchronize. Errors: -EIO (llama_decode failed; the lease
 * is ended).
 */
int forge_context_decode(struct forge_context *fc, int32_t *tokens, size_t n);

/* llama_synchronize, then ends the lease. A no-op when nothing is in flight. */
void forge_context_synchronize(struct forge_context *fc);

/* Synchronizes, frees the llama_context and stops counting it. NULL is a no-op. */
void forge_context_free(struct forge_context *fc);

void forge_context_lifetime_state(const struct forge_context *fc,
                                  struct forge_context_lifetime *out);

enum forge_release_mode {
    FORGE_RELEASE_DONTNEED = 0, /* MADV_DONTNEED: drops mapping RSS; page cache stays */
    FORGE_RELEASE_PAGEOUT = 1,  /* MADV_PAGEOUT: reclaims the pages (Linux 5.4+) */
};

struct forge_release_result {
    uint64_t requested_bytes; /* bytes of the non-empty ranges submitted, refused ones too
                                 (not a range whose bytes do not fit: -EOVERFLOW) */
    uint64_t accepted_bytes;  /* bytes madvise returned 0 for: not proof of reclamation */
    uint64_t protected_bytes; /* bytes of validated ranges left alone: pages shared with a
                                 tensor outside the request (counted per range) */
    size_t n_failed;          /* ranges refused (validation, overflow) or with a failed call */
    int first_error;          /* negative errno of the first refusal or failed call, 0 if none */
};

/*
 * Advises the ranges away under the exclusive side of the gate, held across
 * every madvise call. Returns -EBUSY at once, changing nothing, when any
 * context is in flight (idle contexts are allowed here; ramforge's policy
 * demands a quiescent model before it calls this). Each non-empty range is
 * validated against a fresh /proc/self/maps: wholly inside r--s VMAs of
 * the model file without a gap (one, or the pieces mlock and madvise split
 * it into) at the right file offsets, else it is refused with -EFAULT
 * and not touched; a range whose bytes (pages * page size, or the running
 * sum of requested bytes) pass 2^64 is refused with -EOVERFLOW.
 *
 * Shared pages are protected here, whatever the caller planned: a page
 * holding bytes of two or more of the model's tensors (those of the tensor
 * table with a non-empty payload in the model file, repacked ones
 * included, as the policy's inventory counts them) is not advised when one
 * of those tensors has a page of its own (no other tensor's bytes on it)
 * that no validated range requests. That tensor is
 * outside the request and keeps its bytes; the page counts in
 * protected_bytes. Requesting the outward pages of one tensor thus leaves
 * its boundary pages shared with neighbours resident; a release plan of
 * policy.h is never trimmed (it requests every own page of the tensors it
 * selected, and no page of the others).
 *
 * range_errors (n entries, may be NULL) receives 0 or the negative errno
 * per range (-EINVAL from madvise for an mlocked range); a range whose
 * pages were all protected gets 0. Returns 0 when the gate was taken (see
 * out for per-range outcomes), -EBUSY, -EINVAL (NULL m or out, ranges NULL
 * with n > 0), -ENOMEM, or the error of reading /proc/self/maps; on a
 * negative return nothing was advised and *out (when not NULL) is zero.
 */
int forge_model_release(struct forge_model *m, const struct rf_file_range *ranges, size_t n,
                        enum forge_release_mode mode, struct forge_release_result *out,
                        int *range_errors);

struct forge_observer;
struct forge_ahead;
struct forge_window;

/* A bias added to one token's logit (llama_logit_bias); -INFINITY: never sampled. */
struct forge_logit_bias {
    int32_t token;
    float bias;
};

/*
 * The probabilities of one generated token (forge_generate_params.n_probs
 * > 0), as llama-server's n_probs: before the sampling chain, the softmax
 * of the raw logits; with post_sampling_probs, the candidates the chain
 * left (at most n_probs of them). Borrowed for the on_token call.
 */
struct forge_token_probs {
    float p;            /* the generated token's probability */
    size_t n;           /* entries below, most probable first */
    const int32_t *ids; /* n token ids */
    const float *p_top; /* n probabilities */
};

/*
 * Called after each generated token with its id and text piece (len bytes,
 * not NUL-terminated; a piece may be a partial UTF-8 sequence) and, with
 * n_probs > 0, its probabilities (else NULL). Return false to stop the
 * generation after this token (a client gone, a shutdown, a stop string):
 * the result then has cancelled set.
 */
typedef bool (*forge_token_fn)(int32_t id, const char *piece, size_t len,
                               const struct forge_token_probs *probs, void *user_data);

/*
 * Called while the prompt is decoded (forge_generate_params.n_batch): once
 * before its first batch (processed 0), then after each batch, with the
 * prompt tokens decoded so far out of total.
 */
typedef void (*forge_progress_fn)(size_t processed, size_t total, void *user_data);

struct forge_generate_params {
    const char *prompt;           /* UTF-8, tokenized with add_special = true, parse_special = true;
                                     ignored when prompt_tokens is given */
    const int32_t *prompt_tokens; /* n_prompt_tokens ids used as they are (borrowed); NULL:
                                     tokenize prompt */
    size_t n_prompt_tokens;
    int32_t n_predict;               /* tokens to generate (stops early at end-of-generation) */
    uint32_t n_ctx;                  /* context size; 0 = n_prompt + n_predict */
    int32_t n_threads;               /* <= 0: llama.cpp's default */
    struct forge_observer *observer; /* dispatch observer (forge_observer.h), borrowed;
                                        NULL: no callback installed */
    struct forge_ahead *ahead;       /* layer-ahead prefetch (forge_ahead.h), borrowed; composes
                                        with observer; NULL: none */
    struct forge_window *window;     /* streaming read-ahead window (forge_window.h), borrowed;
                                        composes with both; NULL: none */
    struct forge_routing *routing;   /* MoE routing recorder (forge_routing.h), borrowed;
                                        composes with the others; NULL: none */
    /*
     * Called once with the session's context still alive, after the last
     * token (KV cache and compute buffers allocated); may be NULL.
     */
    void (*on_session_end)(void *user_data);
    void *user_data;
    /*
     * Sampling through llama.cpp's sampler chain. temperature <= 0 (the
     * zero value): greedy, exactly the tokens of the plain greedy chain.
     * Otherwise top_k (<= 0: off), top_p (>= 1: off), min_p (<= 0: off),
     * temperature, then dist seeded with seed.
     */
    float temperature;
    int32_t top_k;
    float top_p;
    float min_p;
    uint32_t seed;
    /*
     * llama-server's further samplers, all off at their zero values, in
     * its order: logit_bias, penalties, grammar, then the chain above.
     * penalties: llama_sampler_init_penalties(penalty_last_n, repeat,
     * freq, present) over the generated tokens. grammar: GBNF whose start
     * rule is "root" (llama_sampler_init_grammar; forge_grammar_check
     * first). ignore_eos: every end-of-generation token biased -INFINITY.
     */
    const struct forge_logit_bias *logit_bias; /* n_logit_bias entries, borrowed */
    size_t n_logit_bias;
    bool penalties;
    int32_t penalty_last_n;
    float penalty_repeat, penalty_freq, penalty_present;
    const char *grammar; /* borrowed; NULL or "": none */
    bool ignore_eos;
    int32_t n_probs;          /* > 0: on_token receives the top n_probs probabilities */
    bool post_sampling_probs; /* probabilities after the chain instead of before */
    /*
     * llama-server's backend sampling (llama_set_sampler, [EXPERIMENTAL]
     * in llama.h): the chain's longest prefix the backend supports runs
     * in the model's graph, the rest on the CPU over its candidates. As
     * llama-server, sampling stays on the CPU with a grammar or with
     * n_probs before the chain (!post_sampling_probs).
     */
    bool backend_sampling;
    forge_token_fn on_token; /* may be NULL */
    void *token_user_data;
    uint32_t n_batch; /* the prompt is decoded in batches of at most n_batch tokens (the
                         context's n_batch, as llama-server's --batch-size); 0: one batch */
    forge_progress_fn on_prompt_progress; /* may be NULL; gets token_user_data */
    /*
     * A one-slot prompt cache (llama-server's cache_prompt), or NULL: a
     * context of the generation's own, freed at its end. Else *keep is a
     * context a previous generation left (or NULL): reused when it fits
     * (n_ctx, n_batch, the same observer; a kept context's n_batch is
     * n_batch, not capped by the prompt), its KV cache's longest common
     * prefix with the prompt kept (all but the prompt's last token at
     * most) and only the rest decoded; one that does not fit is freed. At
     * a successful end the context is left in *keep, alive (the model is
     * then not quiescent: forge_context_free it before a release).
     */
    struct forge_context **keep;
};

/* What a generation produced, and its timings in nanoseconds (CLOCK_MONOTONIC). */
struct forge_generate_result {
    int32_t *prompt_tokens; /* n_prompt ids, owned */
    size_t n_prompt;
    int32_t *tokens; /* n_tokens generated ids, owned */
    size_t n_tokens;
    char *text;                   /* generated text (pieces of tokens), owned, NUL-terminated */
    uint32_t n_ctx;               /* the context size used */
    uint64_t context_init_ns;     /* llama_init_from_model */
    uint64_t prompt_ns;           /* first llama_decode (prompt processing) */
    uint64_t ttft_ns;             /* inference start to first sampled token */
    uint64_t decode_ns;           /* decode of generated tokens after the first */
    bool has_decode_io;           /* the two below were read at the first token and the last */
    uint64_t decode_read_bytes;   /* /proc/self/io read_bytes over decode_ns, bytes */
    uint64_t decode_major_faults; /* /proc/self/stat majflt over decode_ns */
    bool has_decode_cpu;          /* getrusage(RUSAGE_SELF) answered at both ends */
    uint64_t decode_user_ns;      /* the process's user CPU time over decode_ns, every thread */
    uint64_t decode_system_ns;    /* its system CPU time (faults, reclaim) over decode_ns */
    uint64_t sync_ns;             /* explicit llama_synchronize calls, summed */
    uint64_t inference_ns;        /* prompt processing start to the last token */
    int32_t n_threads;            /* llama_n_threads of the context used */
    uint64_t context_execution_generation; /* completed executions of that context */
    bool has_memory_breakdown;             /* llama_get_memory_breakdown answered */
    uint64_t kv_cache_bytes;               /* context (KV cache) buffers, bytes */
    uint64_t compute_bytes;                /* compute (graph scratch) buffers, bytes */
    bool stopped_eog;                      /* the model produced end-of-generation */
    size_t n_cached;  /* prompt tokens the kept context's KV cache already held (keep) */
    size_t n_kv_kept; /* tokens in the KV cache of the context left in *keep */
    bool cancelled;   /* on_token asked to stop */
};

/*
 * Tokenizes the prompt (or takes prompt_tokens), creates a context,
 * decodes with the sampler chain of the params (greedy: llama.cpp's
 * examples/simple), calls on_token after each token, frees the context,
 * and fills *out (free with forge_generate_result_free). With params->observer, the
 * observer is the context's cb_eval, bound to it for this generation and
 * unbound before return; its events accumulate across calls. Without it no
 * cb_eval is installed. Errors: -EINVAL (empty prompt,
 * n_predict < 1, a prompt token outside the vocabulary, context too small), -EIO (llama.cpp failed;
 * err says where), -ENOMEM.
 */
int forge_generate(struct forge_model *m, const struct forge_generate_params *params,
                   struct forge_generate_result *out, char err[FORGE_ERR_MAX]);

void forge_generate_result_free(struct forge_generate_result *r);

/*
 * The number of tokens text tokenizes to, as forge_generate tokenizes a
 * prompt (llama_tokenize, add_special and parse_special). Errors: -EINVAL
 * (NULL argument, empty or untokenizable text, longer than INT32_MAX).
 */
int forge_tokenize_count(struct forge_model *m, const char *text, uint32_t *n_out);

/*
 * Tokenizes text (llama_tokenize with add_special and parse_special as
 * given) into *tokens (n ids; the caller frees with free(); an empty
 * result is a valid allocation of one id). Reads the vocabulary only:
 * callable from any thread while the model lives. Errors: -EINVAL (NULL
 * argument, text longer than INT32_MAX, untokenizable), -ENOMEM.
 */
int forge_tokenize(struct forge_model *m, const char *text, bool add_special, bool parse_special,
                   int32_t **tokens, size_t *n);

/*
 * The text of n tokens (llama_detokenize, special tokens rendered, no
 * leading-space removal) into *text (NUL-terminated, the caller frees with
 * free()). Any thread, as forge_tokenize. Errors: -EINVAL (NULL argument,
 * a token outside [0, n_vocab)), -ENOMEM, -EIO.
 */
int forge_detokenize(struct forge_model *m, const int32_t *tokens, size_t n, char **text);

/*
 * Whether grammar (GBNF, start rule "root") parses for m's vocabulary, as
 * forge_generate's grammar sampler will take it. Any thread. Returns 0, or
 * -EINVAL (NULL argument, a grammar llama.cpp rejects), -ENOMEM.
 */
int forge_grammar_check(struct forge_model *m, const char *grammar);

/*
 * The text of one token as generation emits it (llama_token_to_piece,
 * special tokens rendered, the leading space kept): into buf (size bytes),
 * its length in *len (not NUL-terminated; may be a partial UTF-8
 * sequence). Any thread. Returns 0, -EINVAL (NULL argument, id outside
 * the vocabulary), -ENOSPC (buf too small).
 */
int forge_token_piece(struct forge_model *m, int32_t id, char *buf, size_t size, size_t *len);

/* One message of a chat (llama_chat_message): role and content, borrowed. */
struct forge_chat_message {
    const char *role;
    const char *content;
};

/*
 * The chat template m carries (tokenizer.chat_template), or NULL when it
 * has none (forge_chat_apply then uses llama.cpp's chatml, as
 * llama-server). Owned by the model.
 */
const char *forge_chat_template(struct forge_model *m);

/*
 * msgs through a chat template (llama_chat_apply_template: the templates
 * llama.cpp recognises, without a Jinja engine): tmpl, a template or the
 * name of one of llama.cpp's built-in ones ("llama3", "chatml", ...;
 * borrowed), or NULL for the model's. With the assistant's opening when
 * add_assistant. *text is NUL-terminated, the caller frees. Any thread.
 * Returns 0, -EINVAL (NULL argument, a template llama.cpp does not
 * recognise), -ENOMEM.
 */
int forge_chat_apply(struct forge_model *m, const char *tmpl, const struct forge_chat_message *msgs,
                     size_t n, bool add_assistant, char **text);

#ifdef __cplusplus
}
#endif

#endif
