/*
 * The residency manager as a library: one rf_session bound to one loaded
 * llama.cpp model instance, for any program that runs llama.cpp. This is
 * the installed interface, with ramforge/error.h and ramforge/types.h;
 * nothing else of ramforge is installed (examples/embed.c uses it;
 * examples/stream_embed.c streams a model larger than its limit with it).
 *
 * A session owns the model's inventory, ledger, resource lifetimes, plans,
 * residency samples and the report of each operation. It walks the safe
 * boundaries of the specification:
 *
 *   wrap -> after_load boundary (inventory, lifetimes, sample; a mutating
 *     policy may release the dead file pages of repacked weights)
 *   per operation: admission -> staging (or rf_session_operation_begin,
 *     which also takes the streaming pins; the read-ahead window: below,
 *     "Streaming for an embedder") -> the application's decode calls,
 *     each inside a lease -> end_of_session sample (optional, context
 *     alive) -> after_session boundary (contexts dropped: plan, release,
 *     re-plan from the measurement) -> rf_session_operation_end (ledger,
 *     page snapshot, the operation's report)
 *
 * Several operations run against one session; operation N's report holds
 * its own samples, plans, applications and timing. An operation opens by
 * itself at the first admission, staging, lease or boundary call after the
 * previous one ended (the first opens at the wrap).
 *
 * The figures reach a program through the report, JSON text versioned by
 * its schema_version (schema/operation_report.schema.json in the source;
 * rf_session_report_json, rf_session_report_write), and through the few
 * accessors below for what a program acts on: the admission's outcome and
 * reason (rf_session_admission) and the bytes released
 * (rf_session_released_bytes). No report struct is part of the interface.
 *
 * Conventions (llama.h style): params structs are returned by value from
 * *_default_params(); functions return 0 or a negative errno
 * (rf_strerror); the library never prints or exits (rf_log_set for its
 * log); rf_session_free(NULL) is a no-op; no JSON library type appears here.
 * Threads: rf_session_lease_begin/_end may be called from any thread, also
 * while another thread runs a session call (that is what the gate is for:
 * a boundary's release never overlaps a lease). Every other call must not
 * run concurrently with another call on the same session.
 *
 * The ABI rule. While the version is 0.x, libramforge.so's SONAME is
 * libramforge.so.0.MINOR: a release that changes the interface (a call's
 * signature, a struct's layout or size, an enum's values) raises MINOR, and
 * a program built against another MINOR does not load against it. What may
 * change in a minor of 0.x: calls added or removed, fields added to
 * struct rf_session_params, struct rf_operation_request, struct
 * rf_operation_output, struct rf_operation_start_params and struct
 * rf_operation_begin_result, enum values added at the end. A patch release
 * (0.MINOR.PATCH) changes none of it. The JSON report follows its own
 * schema_version: a field added keeps the version, a field renamed or
 * removed raises it. From 1.0 the SONAME is libramforge.so.MAJOR and only a
 * major release breaks the ABI.
 */
#ifndef RAMFORGE_SESSION_H
#define RAMFORGE_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ramforge/error.h"
#include "ramforge/types.h"

#ifdef __cplusplus
extern "C" {
#endif

struct llama_model;
struct rf_session;

/*
 * The library and the llama.cpp build it was compiled against. Every
 * string is static and never NULL ("unknown" when the build did not know).
 * Later versions may add fields at the end.
 */
struct rf_version_info {
    const char *ramforge;       /* "0.1.0" */
    const char *llama_cpp;      /* the llama.cpp it was built against: tag and commit
                                   ("v0.5.0 de3ff81") */
    const char *llama_soname;   /* the SONAME of that libllama ("libllama.so.0") */
    const char *llama_build_id; /* the GNU build ID of that libllama (hex): a program whose
                                   libllama has another one runs without llama.cpp's
                                   internal sizes (the report says why) */
};

/* A pointer to the library's static rf_version_info; never NULL. */
RF_API const struct rf_version_info *rf_version(void);

/* What the session does at load and at each boundary. */
struct rf_session_params {
    enum rf_policy_profile policy; /* default RF_POLICY_OBSERVE */
    bool has_target;
    uint64_t target_bytes;             /* memory target, bytes (required by memory-bound, active);
                                          at most INT64_MAX (reports carry JSON integers) */
    uint64_t reserve_bytes;            /* safety reserve taken off the target, bytes; < target */
    enum rf_release_mode release_mode; /* default RF_RELEASE_DONTNEED */
    /*
     * Release, at the after_load boundary and whatever the target, the file
     * pages of weights the graph reads from an anonymous repacked copy
     * (they are never read again). Default true: they cost nothing to
     * lose. Only with a mutating policy; reported in the policy section.
     */
    bool release_dead_file_pages;
    uint64_t page_budget_pages; /* pages the end-of-operation mincore snapshot may sample;
                                   default 1048576 (4 GiB of 4 KiB pages); 0: every page
                                   unknown (never nonresident) */
    bool probe_access;          /* classify weights with the access probe (a one-token
                                   decode) at load/wrap; default false: a policy that
                                   releases forces it, others classify by placement */
    bool sample_smaps;          /* every sample reads smaps (Rss and Pss, walks every page);
                                   default false: PAGEMAP_SCAN counts resident pages and
                                   only the ledger's sample reads smaps */
    uint64_t entry_ns;          /* CLOCK_MONOTONIC at the program's entry, nanoseconds
                                   (end-to-end timer start); 0: session creation */
    int32_t n_threads;          /* threads of the access probe; <= 0: llama.cpp's */
    enum rf_admission_mode admission_mode; /* RF_ADMISSION_WARN (default): refuse only a
                                              charge over a hard limit; ENFORCE: also
                                              Unknown and thrashing; OFF: never refuse */
    bool mlock_requested;        /* the model was loaded with mlock (admission notes a lock
                                    that did not take) */
    uint64_t history_operations; /* operations whose samples, plans and applications the
                                    session keeps for its cumulative report; older ones are
                                    dropped when the next opens and counted in the report
                                    (operation.dropped). 0 (default): all, for a program
                                    that runs a bounded number; a server sets a cap */
    /* The streaming policy (docs/STREAMING.md); 0: the planner's defaults. */
    uint64_t stream_window_bytes;           /* page cache left for the streamed layers */
    uint64_t stream_margin_bytes;           /* safety margin under the limit */
    uint64_t storage_bandwidth_bytes_per_s; /* B of the per-token bound; 0: unknown */
    uint64_t warm_token_ns;                 /* t_c of the bound; 0: unknown (counted 0) */
    bool stream_sequential; /* also madvise(MADV_SEQUENTIAL) the streamed layers while
                               pinned (MADV_NORMAL when the pins are undone); default
                               true (docs/STREAMING.md) */
    bool stream_hugepage;   /* also madvise(MADV_HUGEPAGE) the streamed layers while pinned
                               (MADV_NOHUGEPAGE when the pins are undone); default true:
                               2.0x the decode speed measured in docs/STREAMING.md */
    uint32_t stream_read_ahead_slots; /* > 0: the plan's window is a ring of this many slots
                                         of the largest streamed tensor (anonymous memory) that
                                         the read-ahead window fills (rf_session_read_ahead_open,
                                         docs/STREAMING.md; stream_window_bytes must be 0);
                                         0 (default): none */
};

RF_API struct rf_session_params rf_session_default_params(void);

/*
 * Binds a session to a model the application loaded itself from path with
 * llama_model_load_from_file (mmap on). The model is borrowed: ramforge
 * never frees it, and it must outlive the session. The GGUF header at path
 * gives the tensor table; the mapping is found in /proc/self/maps; the
 * weights are classified by placement (where llama.cpp put each tensor),
 * or by a one-token probe context when the policy releases or
 * params.probe_access. Runs the after_load boundary. err receives a
 * one-line message on failure. One model instance has one execution gate:
 * while a session is bound to model (wrapped, or the one rf_session_load
 * made), a second rf_session_wrap of it is refused with -EBUSY; after
 * rf_session_free of the first it may be wrapped again. Errors: -EBUSY (see
 * above), -EINVAL (bad params, a required target missing, or path is not
 * the file the model was loaded from: no read-only shared mapping of it in
 * this process, another file, a copy, or a model loaded without mmap),
 * -RF_EBADMODEL, -EIO, -ENOMEM, -errno of the file.
 */
RF_API int rf_session_wrap(struct llama_model *model, const char *path,
                           struct rf_session_params params, struct rf_session **out,
                           char err[RF_ERR_MAX]);

/* Frees the session (never the model it borrows). NULL: no-op. */
RF_API void rf_session_free(struct rf_session *s);

/*
 * Refreshes the inventory as a new generation from the native layer's
 * tables (after the application changed the model's mapping, or to drop
 * every stale attempt): each resource of the old generation becomes
 * Invalidated (counted in the report's lifetime section), a plan of the
 * old generation is refused when applied, the access profile is dropped,
 * and the new generation's resources walk from Discovered to
 * ReleaseEligible. Errors: -EINVAL (policy off), -ENOMEM, an inventory
 * error.
 */
RF_API int rf_session_refresh(struct rf_session *s);

/*
 * The execution lease: call rf_session_lease_begin before each of the
 * application's own llama_decode calls and rf_session_lease_end after
 * llama_synchronize. While a lease is held a boundary's release changes
 * nothing: it is refused and recorded (the boundary's refused_reason "the
 * execution gate was busy", its resources ReleaseFailed with EBUSY), and
 * the boundary call itself still returns 0; a lease waits while a release
 * runs. Returns 0. Leases count per call, not per context; an end without
 * a begin is ignored.
 */
RF_API int rf_session_lease_begin(struct rf_session *s);
RF_API void rf_session_lease_end(struct rf_session *s);

/* The operation admission decides on (sizes in tokens). */
struct rf_operation_request {
    uint32_t n_ctx;     /* context size; 0: n_prompt + n_predict - 1 (padded to 256 cells
                           like llama.cpp) */
    uint32_t n_batch;   /* largest batch; recorded only: graph scratch is not estimated
                           yet (admission lists it unknown) */
    uint32_t n_prompt;  /* tokens of the tokenized prompt; with n_ctx 0 and no prompt the
                           KV cache is unknown and so is the outcome */
    uint32_t n_predict; /* tokens to generate */
    /* The cache's element types, ggml_type ids (llama_context_params.type_k and type_v: -ctk,
       -ctv) used when has_cache_types; false: f16, llama.cpp's default. */
    bool has_cache_types;
    uint32_t type_k;
    uint32_t type_v;
    /* The operation decodes in a context that exists (an embedder's, exec's): its KV cache
       was allocated and cleared at its creation and is in the RSS, read now (not the latest
       sample's, which may predate the context), not growth; with context_warm (it decoded
       before) its compute buffers and logits are resident too. */
    bool in_context;
    bool context_warm;
    /* in_context without context_warm: the compute buffers of the contexts whose first decode
       runs in the operation (exec: every context of the model that has not decoded), bytes
       (llama.cpp's memory breakdown, allocated at their creation, touched by their first
       decode), counted as graph scratch; 0: not known, estimated from the batch and the
       vocabulary. */
    uint64_t compute_bytes;
};

/*
 * Decides admission of the next operation from the latest sample and a
 * fresh read of the process's memory cgroup and every ancestor: process
 * RSS and RssAnon (/proc/self/status; read now with request->in_context,
 * in a sample not kept), the model mapping's Rss and Locked
 * (smaps; Locked read afresh when the sample did not read it and VmLck is
 * not 0; unknown with the reason, never 0, when it cannot be read; a locked
 * mapping is never counted reclaimable), the KV cache of the request's
 * context cells padded like
 * llama.cpp (estimated from the hyperparameters, in the request's cache
 * types, else f16), the weights the
 * graph reads from the file each token, what release could return now
 * (mutating policies only), the soft target and each cgroup's limit,
 * usage, memory.high and inactive file cache. The decision goes into the
 * operation's report (admission) and rf_session_admission says what it
 * was. Returns 0 whatever the outcome; errors: -EINVAL (NULL s or
 * request; policy off: no inventory to decide from).
 */
RF_API int rf_session_admit(struct rf_session *s, const struct rf_operation_request *request);

/*
 * The current operation's admission decision (rf_session_admit): its
 * outcome, whether the caller must not run the operation (refused: the
 * outcome under params.admission_mode) and the reason, one or more
 * sentences without a trailing newline (borrowed from s, valid until the
 * next call on s). Any out pointer may be NULL. Errors: -EINVAL (NULL s),
 * -ENODATA (nothing was decided in the current operation).
 */
RF_API int rf_session_admission(const struct rf_session *s, enum rf_admission_outcome *outcome,
                                bool *refused, const char **reason);

/*
 * Stages before the operation: plans the union of the page ranges of the
 * weights the graph reads (file order, deduplicated), at most budget_bytes
 * (page-granular, a strict maximum), and prefetches them with
 * MADV_WILLNEED in bounded chunks under the gate; observes the staged
 * tensors' page-cache state (mincore) and the mapping RSS before and
 * after. The plan and the result go into the operation's report and the
 * ledger (StagingRequested, StagingAccepted). A busy gate is recorded,
 * not returned. Errors: -EINVAL (policy off, budget 0), -ENOMEM, a planner
 * error.
 */
RF_API int rf_session_stage(struct rf_session *s, uint64_t budget_bytes);

enum rf_boundary {
    RF_BOUNDARY_END_OF_SESSION = 0, /* the context is still alive (KV cache allocated):
                                       sample only, label "end_of_session" */
    RF_BOUNDARY_AFTER_SESSION,      /* every context of the operation was dropped: the
                                       resources walk one execution, then plan, release
                                       and re-plan from the measurement (up to
                                       RF_SESSION_RELEASE_ROUNDS rounds); labels
                                       "after_session" / "after_release" */
    RF_BOUNDARY_AFTER_VERIFY,       /* as after_session, after a verify session of the
                                       same operation; "after_verify" /
                                       "after_verify_release" */
    RF_BOUNDARY_IDLE,               /* as after_session, between operations of a
                                       long-lived program; "idle" / "idle_release" */
};

#define RF_SESSION_RELEASE_ROUNDS 3 /* re-plans at one boundary while the measurement misses */

/*
 * Runs boundary b. For the after-session kinds the model must be
 * quiescent for selection (no context alive or in flight): otherwise the
 * plan records why nothing was selected. Errors: -EINVAL (bad b, policy
 * off), -ENOMEM, -EOVERFLOW (a byte sum), -EPROTO (an illegal lifetime
 * transition: a bug, recorded in the report's warnings).
 */
RF_API int rf_session_boundary(struct rf_session *s, enum rf_boundary b);

/*
 * Bytes madvise accepted in the current operation's releases, over every
 * boundary: what the kernel took, not proof of reclamation (the report's
 * application.boundaries[].observed_mapping_delta_bytes has the measured
 * change). 0 when nothing was released or s is NULL; UINT64_MAX when the sum
 * does not fit 64 bits (the report's accepted_bytes is then null).
 */
RF_API uint64_t rf_session_released_bytes(const struct rf_session *s);

/* What the application's operation produced; pointers are copied. */
struct rf_operation_output {
    const int32_t *prompt_tokens; /* n_prompt ids; may be NULL */
    size_t n_prompt;
    const int32_t *tokens; /* n_tokens generated ids; may be NULL */
    size_t n_tokens;
    const char *text;                      /* generated text; may be NULL */
    uint32_t n_ctx;                        /* context size used, tokens */
    int32_t n_threads;                     /* threads used; 0: llama.cpp's default */
    uint64_t context_execution_generation; /* completed executions (decodes) of the
                                              operation's context; 0: not known */
    uint32_t seed;                         /* recorded */
    /* timings, nanoseconds (0: not measured) */
    uint64_t context_init_ns, prompt_ns, ttft_ns, decode_ns, sync_ns, inference_ns;
    bool has_memory_breakdown; /* the two sizes below are known (llama.cpp's memory
                                  breakdown of the context) */
    uint64_t kv_cache_bytes;   /* context buffers, bytes */
    uint64_t compute_bytes;    /* compute buffers, bytes */
    /* a verify session (the same prompt after release); n_verify 0: none */
    const int32_t *verify_tokens;
    size_t n_verify_tokens;
    /* The context's cache types, ggml_type ids (type_k, type_v: -ctk, -ctv) when
       has_cache_types; false: f16. The KV cache's estimate without the memory breakdown. */
    bool has_cache_types;
    uint32_t type_k, type_v;
};

/*
 * Ends the current operation (opening one first if the last had ended):
 * records out (may be NULL), fills the ledger from the last sample (its
 * mapping re-read from smaps when it was not), takes the page-level
 * snapshot (page_budget_pages) and the kernel's verdict (cgroup counter
 * deltas since the operation opened), and freezes the operation's report.
 * Errors: -EINVAL (NULL s), -ENOMEM.
 */
RF_API int rf_session_operation_end(struct rf_session *s, const struct rf_operation_output *out);

enum rf_report_scope {
    RF_REPORT_OPERATION = 0, /* the current operation: the open one, else the last ended */
    RF_REPORT_SESSION,       /* every operation kept (params.history_operations): their samples,
                                plans and applications; admission, ledger, output and timing of
                                the current one */
};

/*
 * The report of scope (schema_version 1, schema/operation_report.schema.json)
 * as JSON text; *out is a NUL-terminated string the caller frees with
 * free(). Errors: -EINVAL, -ENOMEM.
 */
RF_API int rf_session_report_json(struct rf_session *s, enum rf_report_scope scope, char **out);

/*
 * Writes the report to path atomically (temporary file in the same
 * directory, rename): never partial. Errors: -errno of the failing call.
 */
RF_API int rf_session_report_write(struct rf_session *s, enum rf_report_scope scope,
                                   const char *path);

/*
 * Streaming for an embedder (RF_POLICY_STREAMING, docs/STREAMING.md,
 * "Embedding: streaming through installed calls"). For a model larger
 * than its memory limit the streaming plan pins a resident set (mlock) and
 * streams the rest; the read-ahead window reads the streamed tensors ahead
 * of the decode into a ring of anonymous memory the decode computes from.
 * An operation that streams, in order (examples/stream_embed.c):
 *
 *   rf_session_operation_begin      admission, staging, the plan's pins
 *   rf_session_read_ahead_open      the window over those pins (NULL when
 *                                   nothing streams: every call below takes it)
 *   rf_read_ahead_context_params    decorates the llama_context_params the
 *                                   application creates its context with
 *   per llama_decode: rf_session_lease_begin, llama_decode,
 *     llama_synchronize, rf_session_lease_end, rf_read_ahead_decode_end
 *   llama_free of that context, then rf_session_read_ahead_close (the
 *     report's streaming.read_ahead), then the after_session boundary
 *     (which undoes the pins) and rf_session_operation_end
 *
 * The session needs params.policy RF_POLICY_STREAMING and
 * params.stream_read_ahead_slots > 0 (4 is what ramforge run uses) with
 * stream_window_bytes 0. One decode at a time while a window is open: the
 * window points the model's weights (shared by every context of the model)
 * at its ring during a decode of its context, so no other context of the
 * model may decode until rf_read_ahead_decode_end returned; and one context
 * per window. rf_session_read_ahead_open and _close are session calls (the
 * threads rule above); rf_read_ahead_context_params and
 * rf_read_ahead_decode_end touch only the window, never the session.
 */

/* What rf_session_operation_begin does; zero-initialize (fields may be added at the end). */
struct rf_operation_start_params {
    struct rf_operation_request request; /* the operation's context and tokens */
    bool admit;                          /* decide admission (the policy must not be off) */
    uint64_t staging_budget_bytes;       /* 0: no staging */
    bool stage_always; /* stage whatever the last idle boundary did (a cold start);
                          false: only after an idle boundary that released bytes */
};

/* What rf_session_operation_begin did; each step's error is here, not returned. */
struct rf_operation_begin_result {
    bool admission_decided;                      /* admission was decided for this operation */
    int admission_error;                         /* rf_session_admit's error, 0 if none */
    enum rf_admission_outcome admission_outcome; /* when admission_decided; the reason:
                                                    rf_session_admission */
    bool refused;                     /* admission refused it: nothing staged or pinned; the
                                         caller does not decode and ends the operation */
    bool staged;                      /* staging ran */
    int staging_error;                /* its error, 0 if none */
    uint64_t staging_requested_bytes; /* bytes the staging plan selected */
    uint64_t staging_accepted_bytes;  /* bytes MADV_WILLNEED accepted (not proof of residency) */
    bool pinned;                      /* the streaming plan's pins are held (until the next
                                         after-session or idle boundary, or the operation's
                                         end); false: the policy is not streaming, admit was
                                         false (the plan is made at admission), or nothing
                                         streams (the model fits its limit) */
    int pin_error; /* the pins' error, 0 if none (-ENOMEM: mlock refused; the report's
                      streaming section says why, and the weights stream unpinned) */
};

/*
 * Starts an operation as ramforge run and serve do (the library's host):
 * admission when params->admit (refused: stop there), then staging of
 * params->staging_budget_bytes (always with stage_always, else only after
 * an idle boundary released bytes), then the streaming policy's pins, which
 * rf_session_read_ahead_open needs. Fills *out. Returns 0, or -EINVAL (NULL
 * argument).
 */
RF_API int rf_session_operation_begin(struct rf_session *s,
                                      const struct rf_operation_start_params *params,
                                      struct rf_operation_begin_result *out);

struct rf_read_ahead;        /* the read-ahead window of one operation (opaque) */
struct llama_context_params; /* llama.h */

/*
 * Opens the read-ahead window over the current operation's pins: its reader
 * threads (O_DIRECT where the filesystem allows it) and a ring of
 * stream_read_ahead_slots slots of anonymous memory, allocated after the
 * first decode (the prompt), which also records the order the graph reads
 * the streamed weights in. *out is NULL (and 0 returned) when there is
 * nothing to stream: a policy other than streaming, stream_read_ahead_slots
 * 0, no pins held (rf_session_operation_begin), or a model that fits its
 * limit. The caller closes it with rf_session_read_ahead_close. Errors:
 * -EINVAL (NULL s or out), -ENODATA (the plan's window holds no tensor),
 * -ENOMEM, the model file's open error, a reader thread's creation error
 * (negative errno): the application may go on without a window, its
 * decode then reads the streamed layers through page faults.
 */
RF_API int rf_session_read_ahead_open(struct rf_session *s, struct rf_read_ahead **out);

/*
 * The llama.h-style decorator of the application's context parameters:
 * installs the window's eval callback (llama.cpp's cb_eval) in *params,
 * chaining the cb_eval and cb_eval_user_data *params had, which is then
 * called for every node as before. Call it on the params of the one
 * llama_init_from_model of the window's context, after setting its own
 * cb_eval if any. By pointer: the library never includes llama.h, and this
 * header only declares struct llama_context_params (a caller includes
 * llama.h). NULL w or params: nothing (the context decodes from the mapping).
 */
RF_API void rf_read_ahead_context_params(struct rf_read_ahead *w,
                                         struct llama_context_params *params);

/*
 * After each llama_decode of the window's context, once llama_synchronize
 * returned (after rf_session_lease_end): every weight's data pointer back
 * at the model's mapping, the slots the decode held back to the readers;
 * after the first decode the ring is allocated and reading starts. NULL w:
 * nothing.
 */
RF_API void rf_read_ahead_decode_end(struct rf_read_ahead *w);

/*
 * After llama_free of the window's context: records what the window did in
 * the operation's report (streaming.read_ahead: units, units_used,
 * units_fallback, read_bytes, wait_ns, first_error) and frees it (threads
 * joined, ring unmapped). NULL w: nothing.
 */
RF_API void rf_session_read_ahead_close(struct rf_session *s, struct rf_read_ahead *w);

/* Operations ended so far. */
RF_API uint64_t rf_session_operations(const struct rf_session *s);

/*
 * The last operation's report warnings, for a program to print: calls fn
 * once per warning line of the report (borrowed strings).
 */
RF_API void rf_session_foreach_warning(const struct rf_session *s,
                                       void (*fn)(const char *warning, void *ud), void *ud);

#ifdef __cplusplus
}
#endif

#endif
