/*
 * The session's calls beyond the installed interface (ramforge/session.h),
 * for the CLI, the tests and the benches, which link the internal static
 * libraries: they name the native layer's types (forge_*), the admission
 * result and the report structs, so they are not installed and
 * libramforge.so does not export them.
 */
#ifndef RAMFORGE_SESSION_EXT_H
#define RAMFORGE_SESSION_EXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ramforge/core/admission.h"
#include "ramforge/core/ledger.h"
#include "ramforge/core/policy.h"
#include "ramforge/forge/forge.h"
#include "ramforge/session.h"

#ifdef __cplusplus
extern "C" {
#endif

struct forge_observer;
struct rf_routing;
struct forge_routing;
struct rf_stream_prefetch;   /* ramforge/core/streaming.h */
struct rf_stream_decode;     /* ramforge/core/streaming.h */
struct rf_stream_read_ahead; /* ramforge/core/streaming.h */

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
/*
 * Whether a session of params p releases the file pages of each weight the
 * load copies (CPU_REPACK) during the load (forge_load_release.h): a
 * releasing policy that releases dead file pages (not --dead-file-pages
 * keep), without mlock. rf_session_load does; ramforge exec's engine does
 * around the program's load; admission before the load counts the lower
 * peak then.
 */
bool rf_session_releases_during_load(const struct rf_session_params *p);

/*
 * Records what the release during the load did (r, copied) for a session
 * bound to a model loaded elsewhere (rf_session_wrap): the report's
 * model.load_release. NULL s or r: no-op.
 */
void rf_session_set_load_release(struct rf_session *s, const struct rf_load_release *r);

int rf_session_load(const char *path, const struct forge_model_params *mp,
                    struct rf_session_params params, struct rf_session **out,
                    char err[FORGE_ERR_MAX]);

/* The native model (forge_generate, forge_model_release...); owned by the session. */
struct forge_model *rf_session_forge_model(struct rf_session *s);

/*
 * rf_session_admit with the whole decision (ramforge/core/admission.h) copied
 * into *out (may be NULL): out->refused says whether the caller must not
 * run it (params' admission_mode). The cgroup hierarchy is read with
 * rfsys_read_cgroup_tree; what release could return now is
 * rf_admission_reclaimable_now. Errors as rf_session_admit.
 */
int rf_session_admit_result(struct rf_session *s, const struct rf_operation_request *request,
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
 * process (usage: its VmRSS now; no inactive file cache counted; the model
 * file counted uncached: a container not started yet reads it itself). The
 * process deciding is the one that would run the model: its RSS and
 * RssAnon are the run's starting point. Returns 0 with *out decided, or
 * an error: -EINVAL, the header's errors (err says why), -ENOMEM.
 */
int rf_session_fit_check(const char *path, bool use_extra_bufts, struct rf_session_params params,
                         const struct rf_operation_request *request, bool has_limit,
                         uint64_t limit_bytes, struct rf_admission_result *out,
                         char err[FORGE_ERR_MAX]);

/*
 * The ledger's PromptCache entry as the program's host measured it (ramforge
 * exec: llama-server's host prompt cache), copied: every operation ending
 * after this call carries it. Errors: -EINVAL (NULL, or e of another
 * category).
 */
int rf_session_set_prompt_cache(struct rf_session *s, const struct rf_ledger_entry *e);

/*
 * Adds w, a string of static storage (borrowed for the session's life), to
 * the open operation's report warnings (once: a warning already there by
 * its text is not added again). NULL s or w: no-op.
 */
void rf_session_add_warning(struct rf_session *s, const char *w);

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
 * The report of a run that ended without writing its own (killed: the
 * kernel's OOM killer under --memory-limit), written by the process that
 * supervised it: to report_path atomically, or (report_path NULL) as JSON
 * text in *out, which the caller frees. why (required) says what ended the
 * run: the reason of every section that needs a loaded model, and a
 * warning; adm is the last decision the run recorded (NULL: none, the
 * admission is null with a reason). Errors: -EINVAL, -ENOMEM, -errno of
 * the write.
 */
int rf_session_ended_report(const char *model_path, struct rf_session_params params,
                            const struct rf_admission_result *adm, const char *why,
                            const char *report_path, char **out);

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

/*
 * Records what the caller's read-ahead window (forge_window.h) did during
 * the operation's session, for the report's streaming.read_ahead and
 * decode.overlapped_fraction (copied). Call before
 * rf_session_operation_end. -EINVAL: NULL argument.
 */
int rf_session_stream_read_ahead(struct rf_session *s, const struct rf_stream_read_ahead *r);

/*
 * Records what the operation's decode cost (its reads from storage and CPU
 * time, measured by the caller around the tokens after the first:
 * forge_generate_result's decode figures), for the report's
 * streaming.decode (copied). Call before rf_session_operation_end.
 * -EINVAL: NULL argument.
 */
int rf_session_stream_decode(struct rf_session *s, const struct rf_stream_decode *d);

/*
 * Attributes a dispatch observer's events (forge_observer.h, borrowed) to
 * the inventory; a complete trace becomes the access profile reuse-aware
 * orders by (never-dispatched weights first, then the latest first use).
 * Errors: -EINVAL, -ENOMEM.
 */
int rf_session_dispatch_trace(struct rf_session *s, const struct forge_observer *obs);

/*
 * Copies a MoE model's observed routing (routing.h; forge_routing_stats)
 * into the operation: its report's residency.experts. Errors: -EINVAL,
 * -ENOMEM.
 */
int rf_session_routing_set(struct rf_session *s, const struct rf_routing *routing);

/*
 * The session's MoE routing recorder (forge_routing.h; borrowed), NULL for
 * a dense model or --residency-policy off: the contexts decorated for the
 * application (rf_session_context_params_decorate) record into it, and a
 * program that makes its contexts with forge_generate hands it as
 * forge_generate_params.routing. At each operation's end what it saw since
 * the session began is the operation's residency.experts, unless
 * rf_session_routing_set gave the operation its own.
 */
struct forge_routing *rf_session_routing(struct rf_session *s);

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

/*
 * The output of a forge_generate call (ramforge's own decode loop) as an
 * operation's output: tokens, text, context size, threads, the context's
 * execution generation, timings and the memory breakdown; seed recorded.
 * Pointers are borrowed from gen (rf_session_operation_end copies them);
 * no verify tokens.
 */
struct rf_operation_output rf_session_output_of(const struct forge_generate_result *gen,
                                                uint32_t seed);

struct rf_residency_snapshot;

/*
 * Takes a page-level snapshot now into *out (initialised with
 * rf_residency_snapshot_init; old content freed; the caller frees it with
 * rf_residency_snapshot_free): mincore over the model mapping as at the
 * end of an operation (params.page_budget_pages, inventory order, no
 * target first; pages mincore cannot tell are unknown, with the reason in
 * out->source). Over the inventory of rf_session_report()->inventory.
 * For pictures of residency over time (ramforge/core/residency_svg.h): it
 * changes no page and no report section; its time counts as observation.
 * Errors: -EINVAL (NULL argument, policy off: no inventory), those of
 * rf_residency_snapshot_take (-ENOMEM, -EOVERFLOW).
 */
int rf_session_page_snapshot(struct rf_session *s, struct rf_residency_snapshot *out);

struct rf_report;

/*
 * The report of scope as plain structs (ramforge/core/report.h), assembled in
 * the session, one per scope: the operation's and the session's may be
 * held at once (rf_metrics_text takes both); each is valid until the next
 * call on s. For printing. NULL s: NULL, as every other call takes NULL.
 */
const struct rf_report *rf_session_report(struct rf_session *s, enum rf_report_scope scope);

/*
 * A context the application created from the session's model itself
 * (llama_init_from_model; ramforge exec's preload sees it) was opened
 * (opened true) or freed (false): counted as alive in the native lifetime facts, as the contexts
 * forge makes are, so the report's native section and the strict
 * boundaries see it. Every close must match an open. Thread-safe like the
 * lease calls. Errors: -EINVAL (NULL s), -ENOSYS (a native layer that
 * does not count contexts).
 */
int rf_session_context_alive(struct rf_session *s, bool opened);

/*
 * The idle boundary of a program that keeps its contexts between
 * operations (llama-server keeps its KV cache): as RF_BOUNDARY_IDLE, but
 * selection requires only that no context is in flight (contexts alive are
 * allowed: rf_binding_may_select_alive), labels "idle_alive" /
 * "idle_alive_release"; the report's native section records the contexts
 * alive. The release still runs under the gate's exclusive side: a decode
 * submitted meanwhile waits for the madvise pass to end (docs/EXEC.md says
 * why this is safe and what it costs). Errors as rf_session_boundary.
 */
int rf_session_idle_alive_boundary(struct rf_session *s);

struct rf_report_application; /* ramforge/core/report.h */

/*
 * A release asked from outside the policy (exec's control channel, for
 * watch --budget): ranges of the model's file advised with mode under the
 * gate's exclusive side, recorded in the operation's report as an
 * application of its own at boundary label (static), its requested_by
 * (copied; its plan's reason too, a plan that selects nothing) saying who
 * asked what and why, with the samples label and after_label (static)
 * around it: the mapping's Rss change. No lifetime moves: pages, not
 * tensors, are asked for. *out (may be NULL) receives the application,
 * its strings borrowed from the session. Returns 0 (out->attempted; the
 * kernel's refusals in out->first_error); -EBUSY (a lease in flight:
 * nothing advised) or the native call's error, recorded as refused;
 * -EINVAL, -ENOMEM.
 */
int rf_session_release_ranges(struct rf_session *s, const char *label, const char *after_label,
                              const char *requested_by, const struct rf_file_range *ranges,
                              size_t n, enum forge_release_mode mode,
                              struct rf_report_application *out);

#ifdef __cplusplus
}
#endif

#endif
