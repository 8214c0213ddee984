/*
 * The residency manager as a library: one rf_session bound to one loaded
 * llama.cpp model instance, for any program that runs llama.cpp.
 *
 * A session owns the model's inventory, ledger, resource lifetimes, plans,
 * residency samples and the report of each operation. It walks the safe
 * boundaries of the specification:
 *
 *   load or wrap -> after_load boundary (inventory, lifetimes, sample; a
 *     mutating policy may release the dead file pages of repacked weights)
 *   per operation: admission -> staging -> the application's decode calls,
 *     each inside a lease -> end_of_session sample (optional, context
 *     alive) -> after_session boundary (contexts dropped: plan, release,
 *     re-plan from the measurement) -> rf_session_operation_end (ledger,
 *     page snapshot, the operation's report)
 *
 * Several operations run against one session; operation N's report holds
 * its own samples, plans, applications and timing. An operation opens by
 * itself at the first admission, staging, lease or boundary call after the
 * previous one ended (the first opens at load).
 *
 * Conventions (llama.h style): params structs are returned by value from
 * *_default_params(); functions return 0 or a negative errno
 * (rf_strerror); the library never prints or exits (rf_log_set for its
 * log); rf_session_free(NULL) is a no-op; no JSON library type appears here.
 * Threads: rf_session_lease_begin/_end may be called from any thread, also
 * while another thread runs a session call (that is what the gate is for:
 * a boundary's release never overlaps a lease). Every other call must not
 * run concurrently with another call on the same session.
 */
#ifndef RAMFORGE_SESSION_H
#define RAMFORGE_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ramforge/admission.h"
#include "ramforge/forge.h"
#include "ramforge/policy.h"

#ifdef __cplusplus
extern "C" {
#endif

struct llama_model;
struct forge_observer;
struct rf_session;
struct rf_stream_prefetch; /* ramforge/streaming.h */

/* What the session does at load and at each boundary. */
struct rf_session_params {
    enum rf_policy_profile policy; /* default RF_POLICY_OBSERVE */
    bool has_target;
    uint64_t target_bytes;  /* memory target, bytes (required by memory-bound, active);
                               at most INT64_MAX (reports carry JSON integers) */
    uint64_t reserve_bytes; /* safety reserve taken off the target, bytes; < target */
    enum forge_release_mode release_mode; /* default FORGE_RELEASE_DONTNEED */
    /*
     * Release, at the after_load boundary and whatever the target, the file
     * pages of weights the graph reads from an anonymous repacked copy
     * (they are never read again). Default true: they cost nothing to
     * lose. Only with a mutating policy; reported in the policy section.
     */
    bool release_dead_file_pages;
    uint64_t page_budget_pages; /* pages the end-of-operation mincore snapshot may sample;
                                   default RF_RESIDENCY_DEFAULT_BUDGET_PAGES; 0: every page
                                   unknown (never nonresident) */
    bool probe_access;          /* classify weights with the access probe (a one-token
                                   decode) at load/wrap; default false: a policy that
                                   releases forces it, others classify by placement */
    bool sample_smaps;          /* every sample reads smaps (Rss and Pss, walks every page);
                                   default false: PAGEMAP_SCAN counts resident pages and
                                   only the ledger's sample reads smaps */
    uint64_t entry_ns;          /* rf_now_ns() at the program's entry (end-to-end timer
                                   start); 0: session creation */
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
    /* The streaming policy (ramforge/streaming.h); 0: the planner's defaults. */
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
};

struct rf_session_params rf_session_default_params(void);

/*
 * Loads the GGUF model at path through llama.cpp (mmap) with model params
 * mp (NULL: forge_model_default_params() with the classification params
 * ask: by placement, the probe when the policy releases or
 * params.probe_access), binds a session to it and runs the after_load
 * boundary. The cgroup counters are read before the load: the first
 * operation's kernel verdict covers the load. The session owns the model
 * (freed by rf_session_free). err receives a one-line message on failure.
 * Errors: -EINVAL (bad params, a required target missing), -RF_EBADMODEL,
 * -EIO, -ENOMEM, -errno of the file.
 */
int rf_session_load(const char *path, const struct forge_model_params *mp,
                    struct rf_session_params params, struct rf_session **out,
                    char err[FORGE_ERR_MAX]);

/*
 * Binds a session to a model the application loaded itself from path with
 * llama_model_load_from_file (mmap on). The model is borrowed: ramforge
 * never frees it, and it must outlive the session. The GGUF header at path
 * gives the tensor table; the mapping is found in /proc/self/maps; the
 * weights are classified by placement (where llama.cpp put each tensor),
 * or by a one-token probe context when the policy releases or
 * params.probe_access. Runs the after_load boundary. Errors: -EINVAL
 * also when path is not the file the model was loaded from (no read-only
 * shared mapping of it in this process: another file, a copy, or a model
 * loaded without mmap); otherwise as rf_session_load.
 */
int rf_session_wrap(struct llama_model *model, const char *path, struct rf_session_params params,
                    struct rf_session **out, char err[FORGE_ERR_MAX]);

/* Frees the session (and the model when rf_session_load loaded it). NULL: no-op. */
void rf_session_free(struct rf_session *s);

/* The native model (forge_generate, forge_model_release...); owned by the session. */
struct forge_model *rf_session_forge_model(struct rf_session *s);

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
int rf_session_refresh(struct rf_session *s);

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
int rf_session_lease_begin(struct rf_session *s);
void rf_session_lease_end(struct rf_session *s);

/* The operation admission decides on (sizes in tokens). */
struct rf_operation_request {
    uint32_t n_ctx;     /* context size; 0: n_prompt + n_predict - 1 (padded to 256 cells
                           like llama.cpp) */
    uint32_t n_batch;   /* largest batch; recorded only: graph scratch is not estimated
                           yet (admission lists it unknown) */
    uint32_t n_prompt;  /* tokens of the tokenized prompt (forge_tokenize_count); with
                           n_ctx 0 and no prompt the KV cache is unknown and so is the
                           outcome */
    uint32_t n_predict; /* tokens to generate */
};

/*
 * Decides admission of the next operation (ramforge/admission.h) from the
 * latest sample and a fresh read of the process's memory cgroup and every
 * ancestor (rfsys_read_cgroup_tree): process RSS and RssAnon
 * (/proc/self/status), the model mapping's Rss and Locked (smaps), the KV
 * cache of the request's context cells padded like llama.cpp (estimated
 * from the hyperparameters, f16), the weights the graph reads from the
 * file each token (the inventory), what release could return now
 * (rf_admission_reclaimable_now, mutating policies only), the soft target
 * and each cgroup's limit, usage, memory.high and inactive file cache. The
 * decision goes into the operation's report and *out (may be NULL);
 * out->refused says whether the caller must not run it (params'
 * admission_mode). Returns 0 whatever the outcome; errors: -EINVAL (NULL s
 * or request; policy off: no inventory to decide from).
 */
int rf_session_admit(struct rf_session *s, const struct rf_operation_request *request,
                     struct rf_admission_result *out);

/*
 * Admission before the load, from the GGUF header at path alone (no
 * llama.cpp load, no data page read): the file bytes the load will map
 * and bring into the page cache (file size minus its cached bytes,
 * cachestat), the weights it will copy into anonymous repacked buffers
 * (use_extra_bufts on AVX2) and the weights each token reads from the
 * mapping (forge_gguf_estimate), the KV cache of the request's padded
 * context, the process's RSS and RssAnon now, and the cgroup hierarchy.
 * A run it refuses (out->refused, params.admission_mode) would be killed
 * or would thrash before the after-load admission could speak. Every
 * figure is an estimate; rf_session_admit confirms after the load with
 * measurements. Returns 0 with *decided (may be NULL) true and *out
 * decided; 0 with *decided false when no cgroup of the hierarchy has an
 * enforced limit or memory.high (nothing can refuse the run before its
 * load; the header is not parsed and *out is zeroed); or an error:
 * -EINVAL, the header's errors (err says why), -ENOMEM.
 */
int rf_session_preload_admit(const char *path, bool use_extra_bufts,
                             struct rf_session_params params,
                             const struct rf_operation_request *request,
                             struct rf_admission_result *out, bool *decided,
                             char err[FORGE_ERR_MAX]);

/*
 * The fit check of `ramforge inspect -c N`: rf_session_preload_admit's
 * decision from the GGUF header alone (no llama.cpp load, no data page
 * read), but always decided, also when nothing in the hierarchy limits
 * the run (the outcome is then admitted and the result says no limit was
 * checked). Against the process's cgroup hierarchy, or, with has_limit,
 * against one hypothetical cgroup of limit_bytes that holds only this
 * process (usage: its VmRSS now; no inactive file cache counted). The
 * process deciding is the one that would run the model: its RSS and
 * RssAnon are the run's starting point. Returns 0 with *out decided, or
 * an error: -EINVAL, the header's errors (err says why), -ENOMEM.
 */
int rf_session_fit_check(const char *path, bool use_extra_bufts, struct rf_session_params params,
                         const struct rf_operation_request *request, bool has_limit,
                         uint64_t limit_bytes, struct rf_admission_result *out,
                         char err[FORGE_ERR_MAX]);

/*
 * Records the decision rf_session_preload_admit made before the load
 * (copied) in the first operation's report (admission.before_load), beside
 * the after-load decision. Errors: -EINVAL (NULL argument), -ENOMEM.
 */
int rf_session_set_preload_admission(struct rf_session *s, const struct rf_admission_result *adm);

/*
 * Writes the report of a run refused by rf_session_preload_admit to
 * report_path atomically: the model's path and size, the policy, the
 * admission with its inputs; every section that needs a loaded model is
 * null with the reason. Errors: -EINVAL, -ENOMEM, -errno of the write.
 */
int rf_session_preload_report_write(const char *model_path, struct rf_session_params params,
                                    const struct rf_admission_result *adm, const char *report_path);

/*
 * The same report as JSON text (for a caller writing it to a stream);
 * *out is NUL-terminated and the caller frees it with free(). Errors:
 * -EINVAL, -ENOMEM.
 */
int rf_session_preload_report_json(const char *model_path, struct rf_session_params params,
                                   const struct rf_admission_result *adm, char **out);

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
int rf_session_stage(struct rf_session *s, uint64_t budget_bytes);

/*
 * The streaming policy's pins, after rf_session_admit (and rf_session_stage)
 * and before the operation's decode: when admission found that the weights
 * the graph reads from the file do not fit the binding limit and the
 * streaming plan fits (the anonymous memory, KV cache, a minimum window and
 * the margin), mlocks the plan's page ranges of the model mapping (validated
 * file-backed ranges only) and measures the locked bytes (smaps Locked).
 * A refused mlock (RLIMIT_MEMLOCK, no CAP_IPC_LOCK) undoes what was locked
 * and falls back to plain behaviour: the reason goes into the report's
 * streaming.pin and a warning; the call still returns 0. The pins are undone
 * (munlock) at the next after-session, after-verify or idle boundary (before
 * any release), at rf_session_operation_end and at rf_session_free. Returns
 * 0 with *pinned (may be NULL) true when pages were pinned, false when
 * nothing was (another policy, no plan, the working set fits, a refusal);
 * -EINVAL (NULL s).
 */
int rf_session_stream_pin(struct rf_session *s, bool *pinned);

/*
 * Records what the caller's layer-ahead prefetch thread (forge_ahead.h) did
 * during the operation's session, for the report's streaming.prefetch
 * (copied). Call before rf_session_operation_end. -EINVAL: NULL argument.
 */
int rf_session_stream_prefetch(struct rf_session *s, const struct rf_stream_prefetch *p);

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
int rf_session_boundary(struct rf_session *s, enum rf_boundary b);

/*
 * Attributes a dispatch observer's events (forge_observer.h, borrowed) to
 * the inventory; a complete trace becomes the access profile reuse-aware
 * orders by (never-dispatched weights first, then the latest first use).
 * Errors: -EINVAL, -ENOMEM.
 */
int rf_session_dispatch_trace(struct rf_session *s, const struct forge_observer *obs);

#define RF_SESSION_PROFILE_ERR_MAX RF_ERR_MAX /* one line about a persisted profile (error.h) */

/*
 * Attaches the persisted access profile at path (profile.h; `--profile`)
 * and reads it once (timers profile_load and history_load of the open
 * operation): the file is capped at RF_PROFILE_MAX_FILE_BYTES before it
 * is parsed and must carry this model's identity (forge_gguf_identity)
 * and format version. A matching profile orders reuse-aware's release
 * (cold first) at every later boundary and rf_session_stage (hot first);
 * its prediction history is kept to history_max entries (0: the
 * default). Returns 0 with *used (may be NULL) true when it was loaded,
 * false when it is not used: absent (it is written by
 * rf_session_profile_save), or rejected (unreadable, oversized, malformed,
 * another format version or another model: err holds one line saying
 * why, and the file will never be replaced). Errors: -EINVAL (NULL
 * arguments, policy off), -ENOMEM.
 */
int rf_session_profile_open(struct rf_session *s, const char *path, size_t history_max, bool *used,
                            char err[RF_SESSION_PROFILE_ERR_MAX]);

/*
 * Writes the profile (updated by the complete dispatch traces since it
 * was opened, with this operation's prediction in its history) back to
 * its path atomically: a temporary file in the same directory, fsync,
 * rename (rf_file_write_atomic), so a crash or a failure leaves the old
 * file or the new one, never a mix. Returns 0 with *saved (may be NULL)
 * true when written, false when there was nothing to save or the file
 * must not be replaced (err says why); a negative errno of the failing
 * call (the old file is intact; err says so). The operation report
 * records the outcome.
 */
int rf_session_profile_save(struct rf_session *s, bool *saved,
                            char err[RF_SESSION_PROFILE_ERR_MAX]);

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
    bool has_memory_breakdown; /* llama_get_memory_breakdown answered */
    uint64_t kv_cache_bytes;   /* context buffers, bytes */
    uint64_t compute_bytes;    /* compute buffers, bytes */
    /* a verify session (the same prompt after release); n_verify 0: none */
    const int32_t *verify_tokens;
    size_t n_verify_tokens;
};

/*
 * The output of a forge_generate call (ramforge's own decode loop) as an
 * operation's output: tokens, text, context size, threads, the context's
 * execution generation, timings and the memory breakdown; seed recorded.
 * Pointers are borrowed from gen (rf_session_operation_end copies them);
 * no verify tokens.
 */
struct rf_operation_output rf_session_output_of(const struct forge_generate_result *gen,
                                                uint32_t seed);

/*
 * Ends the current operation (opening one first if the last had ended):
 * records out (may be NULL), fills the ledger from the last sample (its
 * mapping re-read from smaps when it was not), takes the page-level
 * snapshot (page_budget_pages) and the kernel's verdict (cgroup counter
 * deltas since the operation opened), and freezes the operation's report.
 * Errors: -EINVAL (NULL s), -ENOMEM.
 */
int rf_session_operation_end(struct rf_session *s, const struct rf_operation_output *out);

struct rf_residency_snapshot;

/*
 * Takes a page-level snapshot now into *out (initialised with
 * rf_residency_snapshot_init; old content freed; the caller frees it with
 * rf_residency_snapshot_free): mincore over the model mapping as at the
 * end of an operation (params.page_budget_pages, inventory order, no
 * target first; pages mincore cannot tell are unknown, with the reason in
 * out->source). Over the inventory of rf_session_report()->inventory.
 * For pictures of residency over time (ramforge/residency_svg.h): it
 * changes no page and no report section; its time counts as observation.
 * Errors: -EINVAL (NULL argument, policy off: no inventory), those of
 * rf_residency_snapshot_take (-ENOMEM, -EOVERFLOW).
 */
int rf_session_page_snapshot(struct rf_session *s, struct rf_residency_snapshot *out);

enum rf_report_scope {
    RF_REPORT_OPERATION = 0, /* the current operation: the open one, else the last ended */
    RF_REPORT_SESSION,       /* every operation kept (params.history_operations): their samples,
                                plans and applications; admission, ledger, output and timing of
                                the current one */
};

struct rf_report;

/*
 * The report of scope as plain structs (ramforge/report.h), assembled in
 * the session: valid until the next call on s. For printing.
 */
const struct rf_report *rf_session_report(struct rf_session *s, enum rf_report_scope scope);

/*
 * The report (schema_version 1) as JSON text; *out is a NUL-terminated
 * string the caller frees with free(). Errors: -EINVAL, -ENOMEM.
 */
int rf_session_report_json(struct rf_session *s, enum rf_report_scope scope, char **out);

/*
 * Writes the report to path atomically (temporary file in the same
 * directory, rename): never partial. Errors: -errno of the failing call.
 */
int rf_session_report_write(struct rf_session *s, enum rf_report_scope scope, const char *path);

/* Operations ended so far. */
uint64_t rf_session_operations(const struct rf_session *s);

/*
 * The last operation's report warnings, for a program to print: calls fn
 * once per warning line of the report (borrowed strings).
 */
void rf_session_foreach_warning(const struct rf_session *s,
                                void (*fn)(const char *warning, void *ud), void *ud);

#ifdef __cplusplus
}
#endif

#endif
