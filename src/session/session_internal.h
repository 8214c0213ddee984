/*
 * Private to src/session (and its unit tests): the session struct and the
 * table of native operations the session calls, so tests drive the whole
 * boundary sequence on a fake native layer without llama.cpp.
 */
#ifndef RAMFORGE_SESSION_INTERNAL_H
#define RAMFORGE_SESSION_INTERNAL_H

#include "ramforge/core/binding.h"
#include "ramforge/core/dispatch.h"
#include "ramforge/core/inventory.h"
#include "ramforge/core/ledger.h"
#include "ramforge/core/lifetime.h"
#include "ramforge/core/profile.h"
#include "ramforge/core/report.h"
#include "ramforge/core/residency.h"
#include "ramforge/core/routing.h"
#include "ramforge/core/staging.h"
#include "ramforge/core/streaming.h"
#include "ramforge/core/timing.h"
#include "ramforge/forge/forge.h"
#include "ramforge/forge/forge_pages.h"
#include "ramforge/forge/forge_pin.h"
#include "ramforge/forge/forge_prefetch.h"
#include "ramforge/session/measure.h"
#include "ramforge/session/metrics.h"
#include "ramforge/session/session_ext.h"
#include "ramforge/sys/sys.h"

/*
 * What the session asks of the native layer. The forge table
 * (rf_session_forge_native) calls forge and the sys probes; tests supply
 * their own. ud is the table's user data.
 */
struct rf_session_native {
    /* The gate's facts now (contract, instance, quiescence, counters). */
    void (*lifetime)(void *ud, struct rf_native_lifetime *out);
    /* A point-in-time sample labelled label reading the mapping as `what` says
       (rf_measure_sample's contract); cg receives the cgroup figures. */
    void (*sample)(void *ud, const char *label, enum rf_measure_mapping what,
                   struct rf_residency_sample *out, struct rfsys_cgroup_memory *cg);
    /* Re-reads only the mapping figures of *out (rf_measure_sample_mapping). */
    void (*sample_mapping)(void *ud, enum rf_measure_mapping what, struct rf_residency_sample *out);
    /* forge_model_release's contract. */
    int (*release)(void *ud, const struct rf_file_range *ranges, size_t n,
                   enum forge_release_mode mode, struct forge_release_result *out, int *errs);
    /* forge_model_prefetch's contract, default chunk. */
    int (*prefetch)(void *ud, const struct rf_file_range *ranges, size_t n,
                    struct forge_prefetch_result *out);
    /* forge_model_page_source's contract; page_sampler samples pages (residency.h)
       with the user data page_pass_begin returns, valid until page_pass_end. */
    int (*page_source)(void *ud, struct forge_page_source *out);
    void *(*page_pass_begin)(void *ud);
    rf_page_sampler_fn page_sampler;
    void (*page_pass_end)(void *pass);
    /* The process's memory cgroup and its ancestors (rfsys_read_cgroup_tree's contract). */
    int (*cgroup_tree)(void *ud, struct rfsys_cgroup_tree *out);
    /* The model's identity (forge_gguf_identity's contract); NULL: not known. */
    int (*identity)(void *ud, char out[RF_PROFILE_IDENTITY_MAX], uint64_t *file_size_bytes);
    /* The execution lease around a decode. */
    void (*lease_begin)(void *ud);
    void (*lease_end)(void *ud);
    /* A context of the application's own opened / freed; NULL: not counted (-ENOSYS). */
    void (*context_opened)(void *ud);
    void (*context_closed)(void *ud);
    /* The streaming policy's pins: forge_model_pin / forge_model_unpin's contracts
       (mlock / munlock of validated file ranges); NULL: the layer cannot pin. */
    int (*lock)(void *ud, const struct rf_file_range *ranges, size_t n,
                struct forge_pin_result *out);
    int (*unlock)(void *ud, const struct rf_file_range *ranges, size_t n,
                  struct forge_pin_result *out);
    /* forge_model_advise_stream's contract (its enum forge_stream_advice); NULL: none. */
    int (*advise_stream)(void *ud, const struct rf_file_range *ranges, size_t n,
                         enum forge_stream_advice advice, struct forge_pin_result *out);
    /* The transparent-huge-page mode (rfsys_read_thp_enabled's contract); NULL: unknown. */
    int (*thp_enabled)(void *ud, char *out, size_t out_size);
    /* The process's storage traffic (rfsys_read_io's contract); NULL: unknown. */
    int (*io)(void *ud, struct rfsys_io *out);
    /* Whether the model file changed since the load (forge_model_file_changed's contract:
       0 with *changed, why filled when true; or -errno); NULL: the file is taken as unchanged. */
    int (*file_changed)(void *ud, bool *changed, char *why, size_t why_size);
};

/* The model a session is bound to, as plain tables (borrowed for the session's life). */
struct rf_session_model {
    const struct rf_tensor_meta *tensors;
    size_t n_tensors;
    const struct rf_mapping_meta *mappings;
    size_t n_mappings;
    struct forge_model_info info;
    uint64_t instance_id;
    uint64_t page_bytes; /* kernel page size */
    uint64_t load_ns;    /* model load, probe excluded; 0: not loaded by ramforge */
};

/*
 * Creates a session over model with the native table (both borrowed,
 * outliving the session) and runs the after_load boundary. Errors: -EINVAL,
 * -ENOMEM, an inventory error.
 */
int rf_session_create_native(const struct rf_session_model *model,
                             const struct rf_session_native *native, void *ud,
                             struct rf_session_params params, struct rf_session **out);

/*
 * Applies a plan built elsewhere at boundary (a before sample is taken;
 * the after sample is labelled boundary too). For tests of the apply
 * path's refusals. Returns as apply_plan in boundary.c: 0 (the report's
 * application says what was accepted), -RF_ESTALE (another generation),
 * -ENOENT (a tensor not in the inventory), -EPROTO, -ENOMEM, -EINVAL.
 */
int rf_session_apply_plan(struct rf_session *s, const char *boundary, const struct rf_plan *plan);

/* The forge-backed table; ud is the struct forge_model *. */
extern const struct rf_session_native rf_session_forge_native;

/* ---- the session's state, shared by session.c, boundary.c and prepare.c ---- */

/* The streaming policy's state in one operation (stream.c). */
struct ses_stream {
    struct rf_stream_plan plan;
    struct rf_expert_map experts; /* a MoE model's routed experts (the plan's, the cache's) */
    bool planned;                 /* plan holds a plan */
    bool apply;                   /* admission asked for the pins (the working set does not fit) */
    bool held;                    /* pins are held now: munlock is owed */
    bool seq_advised;             /* the streamed ranges are MADV_SEQUENTIAL: MADV_NORMAL is owed */
    bool huge_advised;            /* ... MADV_HUGEPAGE: MADV_NOHUGEPAGE is owed */
    bool rows_advised;            /* the row-read ranges are MADV_RANDOM: MADV_NORMAL is owed */
    struct rfsys_io io_before;    /* storage traffic when the operation opened */
    bool has_io_before;
    struct rf_stream_report rep;
};

/* The expert cache's T slots (0: no cache) and c a layer (*per_layer) when the plan is applied
   on a MoE model. */
uint32_t ses_stream_expert_slots(struct rf_session *s, uint32_t *per_layer);

/* The routed experts the plan was made over (borrowed). */
const struct rf_expert_map *ses_stream_experts(struct rf_session *s);

/* Adds an expert cache's figures to the operation's streaming.experts (sums; c and the
   budget replaced, the direct flag and-ed). */
void ses_stream_experts_add(struct rf_session *s, const struct rf_stream_experts *x);

/* Per-operation state; reset when the next operation opens. */
struct session_op {
    uint64_t index;       /* 1, 2, ... */
    bool ended;           /* rf_session_operation_end ran */
    uint64_t start_ns;    /* when the operation opened */
    size_t first_sample;  /* its slice of the session's samples */
    size_t first_app;     /* its slice of the session's applications */
    struct rf_report rep; /* the operation's report fields (arrays excluded) */
    struct rf_timing timing;
    struct rf_admission_result admission;
    struct rf_admission_result *before_load; /* owned copy of the pre-load decision; NULL */
    struct rfsys_cgroup_tree tree_before;    /* cgroup counters when the operation opened */
    bool has_tree_before;
    struct rf_cgroup_verdict verdict; /* the kernel's verdict over the operation */
    struct rf_staging_plan staging;
    struct rf_dispatch_summary dispatch;
    struct rf_routing routing; /* a MoE model's observed routing (rf_session_routing_set) */
    struct rf_residency_snapshot snapshot;
    struct forge_page_source page_source; /* of the end-of-operation snapshot */
    struct rf_ledger ledger;
    struct rf_reconciliation recon;
    int32_t *prompt_tokens, *tokens, *verify_tokens; /* owned copies */
    char *text;
    const char **warnings; /* n_warnings, static strings */
    size_t n_warnings, cap_warnings;
    bool has_memory_breakdown;
    uint64_t kv_cache_bytes, compute_bytes;
    uint64_t kv_n_ctx;             /* the context size of the KV estimate */
    uint32_t kv_type_k, kv_type_v; /* its cache types (ggml_type ids; f16 when not given) */
    struct ses_stream stream;
};

/*
 * The figures of the last operation that ran a request (an admission decided, or tokens):
 * what the metrics text keeps through operations that ran none (serve's idle boundary),
 * until the next such operation replaces them (metrics.c). Copies: no pointer into the op.
 */
struct ses_held {
    bool has;
    struct rf_report rep; /* admission, staging, speed fields pointing below; the rest zero */
    struct rf_timing timing;
    struct rf_admission_result admission;
    struct rf_staging_plan staging;    /* selected_bytes only */
    struct rf_stream_report streaming; /* the read bytes, major faults and experts only */
};

struct rf_session {
    struct rf_session_params p;
    const struct rf_session_native *native;
    void *ud;
    struct forge_model *m; /* forge-backed sessions; NULL on a fake native layer */
    bool owns_model;
    struct rf_session_model model;
    struct rf_inventory inv;
    struct rf_lifetime lt;
    struct rf_binding binding;
    uint8_t *exclude;                         /* inv.n: not ReleaseEligible now */
    struct rfsys_cgroup_memory cg;            /* cgroup figures of the last sample */
    uint32_t leases;                          /* leases held through the session */
    const struct rfsys_cgroup_tree *baseline; /* the first operation's verdict baseline,
                                                 read before the load; NULL after use */
    /* Where each retained operation's samples and applications start (history cap). */
    struct session_op_start {
        size_t first_sample, first_app;
    } * op_starts;
    size_t n_op_starts, cap_op_starts;
    uint64_t operations_dropped; /* operations whose samples and plans the cap dropped */
    struct rf_release_totals dropped_releases; /* the attempted applications the cap dropped */
    uint64_t walked_generation; /* native execution generation the lifetimes walked */
    bool alive_ok;              /* the boundary running allows alive contexts (idle_alive) */
    uint64_t invalidated;       /* resources of older generations made Invalidated */

    struct rf_residency_sample *samples;
    size_t n_samples, cap_samples;
    char **labels; /* sample labels with an ordinal ("after_release_2"), interned, owned */
    size_t n_labels, cap_labels;
    struct rf_report_application *apps;
    size_t n_apps, cap_apps;
    struct rf_plan **plans; /* one per application; stable pointers */
    size_t n_plans, cap_plans;

    uint32_t *profile_order; /* from a complete dispatch trace; NULL: none */
    size_t n_profile_order;

    /* --profile: the persisted profile and the operation's prediction (profile.c) */
    struct session_persist {
        char *path;                             /* NULL: no persisted profile */
        struct rf_profile prof;                 /* loaded and/or updated; identity "" : none */
        bool loaded;                            /* the file matched this model */
        bool writable;                          /* a save may replace the file */
        char reason[RF_ERR_MAX];                /* why not loaded / not writable */
        char *source;                           /* profile_source text; owned */
        bool has_identity;                      /* identity below is this model's */
        char identity[RF_PROFILE_IDENTITY_MAX]; /* this model's identity */
        uint64_t file_size_bytes;
        uint64_t load_ns, history_ns; /* timers, reported by the first operation */
        bool timers_pending;
        uint8_t **before;   /* per mapping: page states before staging; owned */
        uint64_t *n_before; /* pages of each */
        size_t n_maps;
        struct rf_prediction pred; /* the operation's, when has_pred */
        bool has_pred;
        const char *pred_reason;
        bool saved;
        char save_reason[RF_ERR_MAX];
        /* what this process added since it read (or last saved) the file, for the merge */
        uint64_t base_operations; /* prof.operations then (0: no file) */
        size_t n_new_history;     /* history entries pushed since */
        bool traced;              /* a complete trace of its own updated the tensors */
    } persist;
    /* The warning while the model file differs from the one loaded ("": it does not);
       also the refused_reason of the releases it stopped. */
    char file_changed[320];

    struct session_op op;
    struct ses_held held; /* the last request's figures, for the metrics text */
    uint64_t n_ended;
    bool idle_released; /* the last idle boundary released bytes: the next start stages (host.c) */
    struct forge_window_hook *window_hook;  /* streaming with a read-ahead ring: the window of
                                               the contexts the application decorates (host.c);
                                               NULL: none */
    struct forge_window *window_installed;  /* the operation's window in window_hook; NULL: none */
    struct rf_stream_experts experts_total; /* the expert caches' figures, every operation's */
    struct forge_routing *ctx_routing;      /* a MoE model's routing in the contexts the
                                               application decorates (host.c), since the
                                               session began; NULL: a dense model, or off */
    bool has_prompt_cache;                  /* the host's PromptCache entry below */
    struct rf_ledger_entry prompt_cache;    /* copied into each operation's ledger at its end */
    struct rf_report view[2]; /* rf_session_report's assembly, per scope (operation, session) */
};

/* host.c: removes the window installed for the application's contexts (none: nothing),
   its figures the operation's. */
void ses_window_remove(struct rf_session *s);
/* Grows *arr (elements of size elem) to hold need; 0 or -ENOMEM. */
int ses_grow(void **arr, size_t *cap, size_t need, size_t elem);
/* Adds a static warning line to the operation's report (once). */
void ses_add_warning(struct rf_session *s, const char *w);
/* Opens the next operation when the current one has ended (operation.c). */
void ses_op_open(struct rf_session *s);
/* Frees what an operation's state owns (operation.c). */
void ses_op_free(struct session_op *op);
/*
 * Takes the next sample through the native layer; its index or -ENOMEM.
 * The mapping is read as `what` says (smaps at every sample with
 * params.sample_smaps). Labels are unique within an operation: a label the
 * operation already has gets an ordinal ("after_release_2").
 */
long ses_take_sample(struct rf_session *s, const char *label, enum rf_measure_mapping what);
/* boundary.c: appends an empty application at boundary (static) with its own plan (nothing
   selected); NULL on -ENOMEM. */
struct rf_report_application *ses_new_application(struct rf_session *s, const char *boundary);
/* boundary.c: an application whose native release call returned 0: its figures from res. */
void ses_app_attempted(struct rf_report_application *app, const struct forge_release_result *res);
/* boundary.c: the sample after_label taken after app's release (app's after_label), and the
   deltas against the sample before_i. 0, or the sample's error. */
int ses_app_measure_after(struct rf_session *s, struct rf_report_application *app, size_t before_i,
                          const char *after_label);
/* The latest sample, or NULL. */
const struct rf_residency_sample *ses_last_sample(const struct rf_session *s);
/* after - before when both are known and fit int64, else absent. */
struct rf_recon_value ses_delta(bool has_a, uint64_t after, bool has_b, uint64_t before);
/*
 * Whether the model file changed since the load (boundary.c): asks the
 * native layer and, when it did, sets s->file_changed and adds it to the
 * operation's warnings.
 */
bool ses_file_changed(struct rf_session *s);
/* At an operation's end (metrics.c): one that ran a request becomes s->held. */
void ses_metrics_hold(struct rf_session *s);
/* The after_load boundary (boundary.c): inventory, lifetimes, sample, dead-page release. */
int ses_after_load(struct rf_session *s);
/*
 * At an operation's end (boundary.c): the native facts when no boundary of
 * the operation observed them, and the lifetimes' walk of the executions
 * since the last walk when the model is quiescent (a request whose release
 * waits for the idle boundary). 0 or -EPROTO (an illegal transition).
 */
int ses_operation_walk(struct rf_session *s);
/* profile.c: the persisted profile's part of a new operation's report (and its orders). */
void ses_profile_op_open(struct rf_session *s);
/* profile.c: page states of every model file page now (op open, and again before staging). */
void ses_prediction_before(struct rf_session *s);
/* profile.c: a complete trace updates the persisted profile and records the prediction. */
void ses_profile_trace(struct rf_session *s);
/* profile.c: records the prediction without a trace (operation end), if staging ran. */
void ses_prediction_finish(struct rf_session *s);
/* profile.c: after a new inventory generation: the persisted profile's order over it (the
   report's order pointer follows; without a persisted profile it is cleared). */
void ses_profile_reorder(struct rf_session *s);
/* profile.c: the report fields of the persisted profile, in the open operation. */
void ses_profile_fill_report(struct rf_session *s);
/*
 * profile.c: reads the profile file path (a regular file of at most
 * RF_PROFILE_MAX_FILE_BYTES; a FIFO is refused without waiting) into *text
 * (the caller frees) and *len. Errors: -errno of open/read, -EINVAL (not a
 * regular file), -EFBIG, -ENOMEM.
 */
int ses_profile_read(const char *path, char **text, size_t *len);
/* profile.c: the reason text of ses_profile_read's error rc (static). */
const char *ses_profile_read_error(int rc);
/* profile.c: frees the persisted state. */
void ses_profile_free(struct rf_session *s);
/* profile.c: per inventory entry, every page resident when the operation opened (mincore):
   staging skips it (caller frees); NULL: no snapshot (no --profile). */
uint8_t *ses_profile_stage_exclude(struct rf_session *s);
/* The hot-first staging order of the persisted profile (caller frees); NULL: none. */
uint32_t *ses_profile_stage_order(struct rf_session *s, size_t *n);
/* KV cache bytes of n_ctx cells from the hyperparameters (f16 K and V); false: unknown. */
/* smaps Locked of the model mappings read now (stream.c); false: unknown (not read). */
bool ses_mapping_locked(struct rf_session *s, uint64_t *out);

/* An operation in a context that exists (request->in_context): the KV cache not growth, nor
   (context_warm) its compute buffers and runtime: in's figures 0, measured inside the RSS. */
void ses_in_context(const struct rf_operation_request *request, struct rf_admission_input *in);
bool ses_estimate_kv(const struct forge_model_info *info, uint64_t n_ctx, uint32_t type_k,
                     uint32_t type_v, uint64_t *out);

/*
 * The bytes of file pages one token reads (admission's file working set):
 * rf_admission_file_working_set, or for a MoE model (info->n_expert) the
 * dense weights' pages + k/n of the routed experts' (rf_expert_token_read),
 * and x (NULL: not wanted; untouched for a dense model) its split for
 * admission's experts. Their errors.
 */
/*
 * At an operation's end: when the application set no routing of its own
 * (rf_session_routing_set) and the decorated contexts' recorder saw a
 * token, a copy of what it saw since the session began is the
 * operation's (its report's residency.experts). -ENOMEM.
 */
int ses_routing_end(struct rf_session *s);

int ses_token_read(const struct rf_inventory *inv, const struct forge_model_info *info,
                   uint64_t *out, struct rf_admission_experts *x);

/*
 * Sets in's graph_scratch and runtime to their estimates before the
 * operation's context exists (a batch of request's n_batch, else n_prompt,
 * tokens; n_threads <= 0: one), or unknown with the reason when n_vocab is 0.
 */
void ses_estimate_runtime(uint64_t n_vocab, uint64_t n_embd,
                          const struct rf_operation_request *request, int32_t n_threads,
                          struct rf_admission_input *in);

/* ---- the streaming policy (stream.c) ---- */

/* Reads the operation's storage-traffic baseline; links the report's streaming object. */
void ses_stream_op_open(struct rf_session *s);
/* Frees the operation's streaming plan (pins must be undone already). */
void ses_stream_op_free(struct ses_stream *st);
/*
 * After admission decided from in: under streaming, plans the pinned set
 * and rewrites a thrash verdict (admitted under streaming when the fixed
 * part and a minimum window fit). Errors: -ENOMEM, -EOVERFLOW.
 */
int ses_stream_admit(struct rf_session *s, const struct rf_admission_input *in);
/* munlock of the held pins, recorded as done at `at`; no-op when none are held. */
void ses_stream_unpin(struct rf_session *s, const char *at);
/* At the operation's end: unpins, storage-traffic deltas, the achieved time and the bound. */
void ses_stream_op_end(struct rf_session *s, const struct rf_operation_output *out);

#endif
