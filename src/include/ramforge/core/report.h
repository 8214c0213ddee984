/*
 * The operation report: a versioned JSON document (schema_version 1, kind
 * "ramforge.residency.operation_report") built from the plain structs of
 * the other core modules (the JSON writers are private: src/core/report_json.h).
 *
 * Every top-level key is always present. A section whose figures could not
 * be had, or whose feature is not part of this run, keeps its keys with
 * null values and a "reason"; nothing is reported as a fake zero.
 */
#ifndef RAMFORGE_REPORT_H
#define RAMFORGE_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ramforge/core/admission.h"
#include "ramforge/core/binding.h"
#include "ramforge/core/dispatch.h"
#include "ramforge/core/inventory.h"
#include "ramforge/core/ledger.h"
#include "ramforge/core/lifetime.h"
#include "ramforge/core/load_release.h"
#include "ramforge/core/policy.h"
#include "ramforge/core/profile.h"
#include "ramforge/core/residency.h"
#include "ramforge/core/routing.h"
#include "ramforge/core/staging.h"
#include "ramforge/core/streaming.h"
#include "ramforge/core/timing.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RF_REPORT_SCHEMA_VERSION 1
#define RF_REPORT_KIND "ramforge.residency.operation_report"
/* Samples residency.samples lists at most: the newest ones (one operation takes up to 13 with
   three release rounds at two boundaries;
   a session report of many operations keeps its last ones); the older taken samples left out
   are counted in residency.samples_dropped. */
#define RF_REPORT_MAX_SAMPLES 32
/* Boundaries application.boundaries lists at most: the newest ones (one operation makes up to 7:
   after_load, then RF_SESSION_RELEASE_ROUNDS rounds at after_session and at after_verify; a
   session report of many operations, or a program calling rf_session_apply_plan often, makes
   more); the older ones left out are counted in application.boundaries_dropped, and the
   application totals still cover them. */
#define RF_REPORT_MAX_APPLICATIONS 32

/*
 * Keys of the report a reader needs to find its figures (`ramforge bench`
 * reads each run's report through them); rf_report_to_json writes the same
 * macros. The keys inside "timing" are rf_timer_name(), and a ledger entry's
 * "category" value is rf_ledger_category_name().
 */
#define RF_REPORT_KEY_LEDGER "ledger"           /* object: entries, reconciliation, note */
#define RF_REPORT_KEY_LEDGER_ENTRIES "entries"  /* in ledger: array, one object per category */
#define RF_REPORT_KEY_ENTRY_CATEGORY "category" /* in an entry: rf_ledger_category_name() */
#define RF_REPORT_KEY_ENTRY_VALUE "value_bytes" /* in an entry: integer bytes, null if unknown */
#define RF_REPORT_KEY_TIMING "timing"           /* object: rf_timer_name() -> ns, null if absent */
#define RF_REPORT_KEY_OUTPUT "output"           /* object: the generation's tokens */
#define RF_REPORT_KEY_N_GENERATED "n_generated_tokens" /* in output: integer */
#define RF_REPORT_KEY_FINGERPRINT "token_fingerprint"  /* in output: rf_token_fingerprint() */

/* One point-in-time sample of process, mapping and cgroup figures. */
struct rf_residency_sample {
    bool taken;        /* false: the sample was not taken */
    const char *label; /* "after_load", "after_session", ... */
    bool has_process_rss;
    uint64_t process_rss_bytes; /* /proc/self/status VmRSS */
    bool has_process_rss_peak;
    uint64_t process_rss_peak_bytes; /* VmHWM */
    bool has_mapping;                /* mapping_rss_bytes was measured */
    uint64_t mapping_rss_bytes;      /* resident bytes of the model mappings (smaps Rss, or the
                                        present pages PAGEMAP_SCAN counts: the same figure) */
    bool has_mapping_pss;            /* mapping_pss_bytes was measured (smaps only) */
    uint64_t mapping_pss_bytes;      /* smaps Pss of the model mappings */
    bool has_mapping_locked;         /* mapping_locked_bytes was measured (smaps only) */
    uint64_t mapping_locked_bytes;   /* smaps Locked of the model mappings (mlocked pages:
                                        never releasable) */
    const char *mapping_source;      /* static: "smaps", "pagemap_scan"; NULL when neither */
    bool mapping_not_read;           /* the mapping was not read at this sample, by choice */
    bool has_anon;
    uint64_t anon_bytes; /* /proc/self/status RssAnon */
    bool has_locked;
    uint64_t locked_bytes; /* /proc/self/status VmLck */
    bool has_cgroup_current;
    uint64_t cgroup_current_bytes;
    bool has_cgroup_peak;
    uint64_t cgroup_peak_bytes;
    bool has_cgroup_events; /* v2 memory.events */
    uint64_t cgroup_events_high, cgroup_events_max, cgroup_events_oom, cgroup_events_oom_kill;
};

/*
 * One release at a safe boundary: what was requested, what the native call
 * accepted, and what was observed around it (signed deltas, after - before).
 * A request is not reclamation; the deltas are point-in-time observations.
 */
struct rf_report_application {
    const char *boundary; /* "after_load", "after_session" */
    bool attempted;       /* false: refused_reason says why */
    const char *refused_reason;
    uint64_t requested_bytes; /* bytes of the release ranges submitted */
    uint64_t accepted_bytes;  /* bytes madvise returned 0 for */
    uint64_t n_failed;        /* ranges the kernel or the validation refused */
    uint64_t protected_bytes; /* requested bytes the native call kept: shared with a tensor
                                 outside the request */
    int first_error;          /* negative errno of the first refusal, 0 if none */
    struct rf_recon_value mapping_delta; /* smaps Rss of the model mappings */
    struct rf_recon_value rss_delta;     /* status VmRSS */
    struct rf_recon_value cgroup_delta;  /* cgroup current */
    const struct rf_plan *plan;          /* the plan built at this boundary/round; NULL: none */
    const char *after_label;  /* label of the sample taken after this release ("after_release",
                                 "after_verify_release", ...); NULL: none was taken */
    const char *requested_by; /* a release asked from outside the policy (watch --budget
                                 through exec's control channel): who, what and why;
                                 NULL: the session's own policy */
};

/* Everything one operation (or a whole session) knows; pointers are borrowed. */
struct rf_report {
    const char *scope;           /* "operation" or "session" */
    uint64_t operation_index;    /* the operation reported (1, 2, ...); 0: none yet */
    uint64_t n_operations;       /* operations of the session so far, ended or open */
    uint64_t operations_dropped; /* session scope: operations whose samples and plans the
                                    history cap dropped from this report */
    const char *ramforge_version;
    const char *llama_cpp_version;

    /* model identity */
    const char *model_path;
    const char *model_desc; /* llama_model_desc */
    uint64_t model_file_size_bytes;
    uint64_t model_fs_magic;          /* statfs f_type of the model file's filesystem; 0: not known
                                         (model.filesystem, fs_profile.h) */
    uint64_t model_native_size_bytes; /* llama_model_size */
    uint64_t model_n_params;
    uint64_t instance_id;                /* forge model instance; 0: not loaded (the native
                                            figures above are then reported null) */
    bool access_probed;                  /* weights classified by the graph probe */
    enum rf_access_basis access_basis;   /* how they were classified (model.access_basis) */
    struct rf_load_release load_release; /* the release during the load
                                                      (model.load_release); zero: not asked */

    const char *policy; /* rf_policy_name */
    bool policy_plans, policy_mutates;
    bool has_target;
    uint64_t target_bytes;    /* --memory-target */
    uint64_t reserve_bytes;   /* --safety-reserve */
    const char *release_mode; /* "dontneed", "pageout"; NULL when not mutating */

    const struct rf_admission_result *admission;             /* NULL: not decided (reason below) */
    const struct rf_admission_result *admission_before_load; /* the GGUF-header decision
                                                                before the load; NULL: none */
    const char *admission_reason;
    /* the kernel's verdict over the run (rf_cgroup_verdict_build); NULL: reason below */
    const struct rf_cgroup_verdict *cgroup_verdict;
    const char *cgroup_verdict_reason;
    const struct rf_plan *plan; /* the last plan that selected something, else the
                                   first; NULL: no plan (reason below). Every plan is
                                   also summarized under its application. */
    const char *plan_reason;
    const char *plan_boundary;    /* where the plan was built */
    bool release_dead_file_pages; /* the after_load release of repacked weights' file pages */
    const struct rf_report_application *applications; /* n_applications, in order */
    size_t n_applications;
    bool has_native; /* the native lifetime facts below were observed */
    struct rf_native_lifetime native;
    const char *native_boundary;
    uint64_t context_execution_generation; /* the operation's context; 0: not known */
    const struct rf_lifetime *lifetime;    /* per-resource states, NULL: not tracked */
    uint64_t invalidated_resources; /* resources of older inventory generations Invalidated */

    /* page-level residency (mincore over the model mapping) at the end of the run */
    const struct rf_residency_snapshot *page_snapshot; /* NULL: reason below */
    const char *page_snapshot_reason;
    bool has_file_cache;            /* the whole file's cached pages are known */
    uint64_t file_cached_pages;     /* pages of the whole file in the page cache */
    uint64_t file_cache_page_bytes; /* page size of those pages */
    const char *file_cache_source;  /* forge_page_source.file_cache_source: "mincore (mapped
                                       pages) + cachestat (...)", "cachestat", "unknown: ..." */

    /* --staging-budget: the staging plan and what the prefetch did */
    const struct rf_staging_plan *staging; /* NULL: staging_reason */
    const char *staging_reason;
    bool staging_attempted; /* the prefetch ran (gate taken) */
    const char *staging_refused_reason;
    uint64_t staging_accepted_bytes; /* bytes madvise(WILLNEED) returned 0 for */
    uint64_t staging_chunk_bytes, staging_calls, staging_failed_calls;
    int staging_error;                           /* negative errno of the first failure */
    struct rf_recon_value staging_mapping_delta; /* smaps Rss of the model mappings */
    struct rf_recon_value staging_cached_before; /* staged tensors' pages in page cache */
    struct rf_recon_value staging_cached_after;
    struct rf_recon_value staging_sampled_pages; /* pages those two figures cover */

    /* --observe-dispatch: the CPU node-dispatch observer's summary */
    const struct rf_dispatch_summary *dispatch; /* NULL: reason below */
    const char *dispatch_reason;
    /* a MoE model's routing as observed (routing.h): residency.experts */
    const struct rf_routing *routing; /* NULL: reason below */
    const char *routing_reason;       /* NULL: the default (not observed) */
    /* access profile used by reuse-aware (tensor indices, coldest first) */
    const uint32_t *profile_order;
    size_t n_profile_order;
    const char *profile_source; /* NULL: no profile (profile_reason) */
    const char *profile_reason;
    /* --profile PATH: the persisted profile (profile.h); NULL path: none */
    const char *profile_path;
    const char *profile_identity;    /* this model's identity; NULL: not known */
    bool profile_loaded;             /* the file matched this model and ordered the operation */
    const char *profile_file_reason; /* why it did not, or NULL */
    uint64_t profile_operations;     /* complete traces merged into the profile */
    bool profile_saved;              /* written at the end of the operation */
    const char *profile_save_reason; /* why not, or NULL */
    const struct rf_prediction *prediction; /* this operation's; NULL: prediction_reason */
    const char *prediction_reason;
    const char *prediction_evidence;     /* what the page counts came from */
    size_t history_entries, history_max; /* the profile's prediction history */

    /* --verify-session: a second session after release */
    bool verified;
    bool verify_tokens_equal;
    const int32_t *verify_tokens;
    size_t n_verify_tokens;
    const struct rf_inventory *inventory;           /* NULL: not built (reason in policy_reason) */
    const struct rf_ledger *ledger;                 /* NULL: not built */
    const struct rf_reconciliation *reconciliation; /* NULL: derived from ledger + inventory */
    const char *not_built_reason;                   /* why inventory/ledger are NULL */

    const char *cgroup_version;      /* "v1", "v2", "none" */
    const char *cgroup_dir;          /* controller directory, or NULL */
    int cgroup_error;                /* a file of the controller could not be read: -errno */
    const char *cgroup_error_source; /* that file (cgroup_error != 0), else NULL */
    bool has_cgroup_limit;
    bool cgroup_limit_unlimited;
    uint64_t cgroup_limit_bytes;

    /* n_samples samples in the order taken: after_load, after_load_release, end_of_session,
       after_session, after_release, after_verify, ... (samples not taken are left out) */
    const struct rf_residency_sample *samples;
    size_t n_samples;

    const struct rf_timing *timing;

    /* output */
    const int32_t *prompt_tokens;
    size_t n_prompt;
    const int32_t *tokens;
    size_t n_tokens;
    const char *text;
    uint32_t n_ctx;
    int32_t n_threads; /* requested threads; 0: llama.cpp's default */
    uint32_t seed;     /* --seed: recorded; greedy decoding does not use it */

    /* storage traffic and the streaming policy's pins (streaming.h); NULL: null */
    const struct rf_stream_report *streaming;

    const char *const *warnings; /* n_warnings lines */
    size_t n_warnings;
};

/* FNV-1a 64 over the little-endian bytes of the token ids: "fnv1a64:<16 hex>". */
void rf_token_fingerprint(const int32_t *tokens, size_t n, char out[32]);

/*
 * The decode rate: (generated tokens - 1) / the decode timer (first sampled
 * token to the last), tokens per second. false (*out 0) when r is NULL, the
 * timer is unknown or zero, or fewer than two tokens were generated.
 */
bool rf_report_decode_tokens_per_s(const struct rf_report *r, double *out);

#ifdef __cplusplus
}
#endif

#endif
