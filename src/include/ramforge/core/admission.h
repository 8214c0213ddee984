/*
 * Admission: whether a run fits, decided before and apart from planning,
 * from figures that each carry their provenance and source.
 *
 * What is checked, for every cgroup of the hierarchy (the process's own and
 * each ancestor up to the root; the kernel enforces every ancestor's limit,
 * and an ancestor's usage includes its other children):
 *
 *   - the charge: usage - reclaimable + growth <= hard limit, where
 *     reclaimable is the level's clean, unmapped file cache on either LRU
 *     list (cgroup_levels.h reclaimable_file; the kernel drops it without
 *     harm: reclaimable, not free) plus, after the load, the model
 *     mapping's own resident pages that are not locked (smaps Rss - Locked:
 *     the kernel reclaims them under every policy, at the price of
 *     re-reading them; locked and pinned pages are not reclaimable), and
 *     growth the anonymous memory
 *     the run will add (KV cache, graph scratch; before the load also the
 *     repacked copies). Over it the kernel must take file pages the run
 *     or others use, or kill: Rejected. The binding cgroup is the one with
 *     the least room.
 *   - the decode working set: the weights the graph reads from the file
 *     mapping each token plus the process's anonymous memory must fit under
 *     the limit beside the level's other unreclaimable charges. If not, the
 *     file pages are evicted and read again every token (the run thrashes):
 *     under a hard limit Rejected in mode enforce, AdmittedWithWarning
 *     ("will thrash") otherwise. File pages never make the kernel kill, so
 *     the file growth of a load (mapped weights) is checked here only.
 *   - v2 memory.high (soft): the same two checks give AdmittedWithWarning.
 *   - the user's soft target (target - reserve) against the request (the
 *     projected process memory): AdmittedWithWarning.
 *
 * Unknown is never admitted: an enforced limit whose cgroup usage cannot be
 * read stays authoritative and gives Unknown, as does a request that
 * cannot be computed. Whether an excess is likely anonymous (KV cache,
 * scratch, repacked copies: page release cannot address it) is computed
 * for the hard-limit excess as for the soft ones.
 *
 * The mode says what the caller does with the outcome (result.refused):
 *
 *   mode     refuses                          a working set over a hard limit
 *   enforce  Rejected and Unknown             Rejected
 *   warn     Rejected (the charge would be    AdmittedWithWarning "will thrash"
 *            over a hard limit: the kernel
 *            would kill the run anyway)
 *   off      nothing (decided for the report) AdmittedWithWarning
 *
 * warn is the default of `ramforge run`; Unknown and every warning are
 * printed and reported but the run proceeds. enforce is for scripts and
 * servers that must not start what may not fit.
 *
 * Plain C over plain structs, no OS calls; one decision per run.
 */
#ifndef RAMFORGE_ADMISSION_H
#define RAMFORGE_ADMISSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ramforge/core/binding.h"
#include "ramforge/core/cgroup_levels.h"
#include "ramforge/core/experts.h"
#include "ramforge/core/inventory.h"
#include "ramforge/core/ledger.h"
#include "ramforge/core/lifetime.h"
#include "ramforge/error.h"
#include "ramforge/types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RF_ADMISSION_MAX_UNKNOWN 8       /* unknown components listed per decision */
#define RF_ADMISSION_NAME_MAX 64         /* a component name, including the NUL */
#define RF_ADMISSION_SOURCE_MAX 600      /* a figure's source, including the NUL */
#define RF_ADMISSION_REASON_MAX 4096     /* the reason, including the NUL */
#define RF_ADMISSION_NOTE_MAX RF_ERR_MAX /* the lock note, including the NUL */
#define RF_ADMISSION_MAX_RECORDS 13      /* scalar inputs recorded in the result */
/* What ends a reason that outgrew RF_ADMISSION_REASON_MAX (the report's figures have the rest). */
#define RF_ADMISSION_CUT                                                                           \
    "[The rest of the reason did not fit its buffer: see the report's figures.]"

/* enum rf_admission_outcome and enum rf_admission_mode are in ramforge/types.h. */

/* "admitted", "admitted_with_warning", "rejected", "unknown"; NULL for a bad value. */
const char *rf_admission_outcome_name(enum rf_admission_outcome o);

/* "warn", "enforce", "off"; NULL for a bad value. */
const char *rf_admission_mode_name(enum rf_admission_mode m);

/* Parses "warn", "enforce" or "off" into *out. Errors: -EINVAL (NULL or another word). */
int rf_admission_mode_parse(const char *s, enum rf_admission_mode *out);

/* What decided the outcome. */
enum rf_admission_cause {
    RF_ADMIT_CAUSE_FITS = 0,    /* nothing was exceeded */
    RF_ADMIT_CAUSE_UNKNOWN,     /* a needed figure is unknown */
    RF_ADMIT_CAUSE_OVERFLOW,    /* a sum overflowed 64 bits */
    RF_ADMIT_CAUSE_HARD_LIMIT,  /* the projected charge exceeds an enforced hard limit */
    RF_ADMIT_CAUSE_THRASH,      /* the decode working set does not fit a limit */
    RF_ADMIT_CAUSE_SOFT_LIMIT,  /* the projected charge exceeds v2 memory.high */
    RF_ADMIT_CAUSE_SOFT_TARGET, /* the request exceeds target - reserve */
    RF_ADMIT_CAUSE_NOT_BOUND,   /* the working set fits only because the limit cannot bind the
                                   model's pages (charged to another cgroup) */
};

/* "fits", "unknown", "overflow", "hard_limit", "thrash", "soft_limit", "soft_target",
 * "not_bound"; NULL. */
const char *rf_admission_cause_name(enum rf_admission_cause c);

/* Which excess excess_likely_anonymous classifies. */
enum rf_admission_bound {
    RF_ADMIT_BOUND_NONE = 0,    /* nothing exceeded */
    RF_ADMIT_BOUND_HARD_LIMIT,  /* the binding cgroup's hard limit */
    RF_ADMIT_BOUND_SOFT_LIMIT,  /* a cgroup's memory.high */
    RF_ADMIT_BOUND_SOFT_TARGET, /* target - reserve */
};

/* "none", "hard_limit", "soft_limit", "soft_target"; NULL for a bad value. */
const char *rf_admission_bound_name(enum rf_admission_bound b);

enum rf_admission_phase {
    RF_ADMISSION_AFTER_LOAD = 0, /* measured figures of the loaded model */
    RF_ADMISSION_PRE_LOAD,       /* GGUF-header estimates, before llama_model_load */
};

/* "after_load", "pre_load"; NULL for a bad value. */
const char *rf_admission_phase_name(enum rf_admission_phase p);

/*
 * One input figure. has false: unknown (never zero). provenance is that of
 * a present figure (exact_measured, native_logical or estimated); source is
 * borrowed for the call (NULL: none), e.g. "/proc/self/status VmRSS".
 */
struct rf_admission_figure {
    bool has;
    uint64_t bytes;
    enum rf_provenance provenance;
    const char *source;
};

/* A present figure; a convenience for callers and tests. */
struct rf_admission_figure rf_admission_figure_of(uint64_t bytes, enum rf_provenance provenance,
                                                  const char *source);

/* What admission is told. Zero-initialise, then fill what is known. */
struct rf_admission_input {
    enum rf_admission_mode mode;
    enum rf_admission_phase phase;

    /* The process now (already charged to its cgroup). */
    struct rf_admission_figure process_rss; /* status VmRSS, bytes; required */
    struct rf_admission_figure anonymous;   /* its anonymous memory (status RssAnon), bytes */
    struct rf_admission_figure mapping_rss; /* smaps Rss of the model mappings (after load) */
    struct rf_admission_figure locked;      /* smaps Locked of the model mappings, bytes */
    bool mlock_requested;                   /* the load was asked to mlock the model */
    bool streaming;                         /* the run's policy is streaming: a thrash verdict
                                               does not name it as a way out */
    const char *file_in_memory;             /* NULL: the model file's pages are a cache of
                                               storage; else why they are memory itself (tmpfs,
                                               ramfs): nothing is re-read from storage, so the
                                               decode's working set is not compared (no thrash) */

    /* What the run will add; all of it is anonymous except mapped_weights. */
    struct rf_admission_figure kv_cache;         /* required */
    struct rf_admission_figure graph_scratch;    /* llama.cpp's compute buffer (measured, or
                                                    before the context exists estimated by
                                                    rf_admission_scratch_bytes); absent: listed
                                                    as the unknown "GraphScratch" */
    struct rf_admission_figure runtime;          /* the rest the operation adds: the logits
                                                    buffer and the threads' stacks
                                                    (rf_admission_runtime_bytes); absent:
                                                    listed as the unknown "Runtime" */
    struct rf_admission_figure mapped_weights;   /* pre-load, required: file bytes the load
                                                    maps and brings into the page cache
                                                    (file size minus model_cached) */
    struct rf_admission_figure repacked_weights; /* pre-load, required: bytes the load copies
                                                    into anonymous (repacked) buffers */
    struct rf_admission_figure model_cached;     /* pre-load: bytes of the model file already
                                                    in the page cache (cachestat): charged
                                                    already, not another process's */
    struct rf_admission_figure load_release;     /* pre-load: the load releases each copied
                                                    weight's file pages once copied
                                                    (forge_load_release.h); the repacked
                                                    bytes resident twice at once (the largest
                                                    copied weight). Present: the request
                                                    counts the file and the copies once, plus
                                                    this; absent: file + every copy */
    struct rf_admission_figure loader_growth;    /* pre-load: anonymous memory llama.cpp's load
                                                    adds (vocabulary, tensor metadata;
                                                    rf_admission_loader_bytes); absent: listed
                                                    as the unknown "LoaderGrowth" */
    struct rf_admission_figure page_tables;      /* pre-load: page tables of the model mapping
                                                    (rf_admission_page_table_bytes), charged
                                                    and unreclaimable; absent: "PageTables" */

    /*
     * Bytes of the weight pages the graph reads from the file mapping each
     * token (repacked weights excluded): with the anonymous memory, the
     * decode working set. Absent: no thrash check, listed "FileWorkingSet".
     */
    struct rf_admission_figure file_working_set;
    struct rf_admission_experts experts; /* a MoE model's split of it; n_expert 0: dense */

    /* What page release could return now (rf_admission_reclaimable_now); absent: unknown. */
    struct rf_admission_figure reclaimable;

    bool has_target;
    uint64_t target_bytes;  /* the user's memory target, bytes */
    uint64_t reserve_bytes; /* safety reserve, bytes; added to the request, checked */

    /*
     * The host (/proc/meminfo), the binding level when no cgroup enforces a
     * hard limit; borrowed. NULL or read false: not consulted (the caller
     * did not read it).
     */
    const struct rf_host_memory *host;

    /* [0] the process's cgroup, then each parent up to the root; borrowed; NULL when 0. */
    const struct rf_cgroup_level *cgroups;
    size_t n_cgroups;       /* 0: no memory controller; <= RF_CGROUP_MAX_LEVELS */
    bool cgroups_truncated; /* the hierarchy has levels above the ones given */

    const char *unknown_components[RF_ADMISSION_MAX_UNKNOWN]; /* e.g. "Runtime"; non-NULL */
    size_t n_unknown;                                         /* <= RF_ADMISSION_MAX_UNKNOWN */
};

/* One scalar input as the decision used it, so a reader can redo the arithmetic. */
struct rf_admission_record {
    const char *name; /* static: "process_rss", "kv_cache", ... */
    bool has;
    uint64_t bytes;
    enum rf_provenance provenance; /* RF_PROV_UNKNOWN when !has */
    char source[RF_ADMISSION_SOURCE_MAX];
};

/* One cgroup as the decision checked it. Figures are bytes. */
struct rf_admission_level_check {
    struct rf_cgroup_level level; /* copy of the input */
    bool enforced;                /* a finite hard limit */
    bool checked;                 /* enforced and its usage known: the figures below are set */
    uint64_t reclaimable_bytes;   /* min(reclaimable file, usage) [- model_cached pre-load
                                     under --mlock] + mapping_reclaimable_bytes; the first
                                     term 0 when the reclaimable file cache is unknown */
    uint64_t mapping_reclaimable_bytes; /* after the load: the model mapping's own resident
                                           unlocked pages (Rss - Locked, at most usage -
                                           reclaimable file), in reclaimable_bytes; 0 before
                                           the load or when Locked is unknown */
    uint64_t room_bytes;                /* limit - (usage - reclaimable); 0 when over */
    uint64_t projected_bytes;           /* usage - reclaimable + growth */
    bool fits;                          /* projected <= limit */
    uint64_t run_room_bytes;      /* limit - (usage - reclaimable - process RSS, floored at 0):
                                     what the run's decode working set may use */
    bool working_set_checked;     /* the working set was known and compared */
    bool working_set_fits;        /* working set <= run room */
    bool high_checked;            /* a finite memory.high and the usage known */
    bool high_fits;               /* projected <= memory.high */
    uint64_t high_run_room_bytes; /* memory.high - others, floored at 0 */
    bool high_working_set_fits;   /* working set <= high run room (true when not compared) */
    uint64_t unbound_bytes;       /* after the load: the model mapping's RSS
                                     over this level's usage, so at least these bytes of the
                                     model's pages are charged to another cgroup (cached before
                                     the run) and this limit cannot evict them; else 0 */
    bool working_set_unbound;     /* over the run room, but not once unbound_bytes are taken out */
};

/* The decision. Figures are present only where they could be computed. */
struct rf_admission_result {
    enum rf_admission_outcome outcome;
    enum rf_admission_cause cause;
    enum rf_admission_mode mode;
    enum rf_admission_phase phase;
    bool refused; /* the caller must not start the run (mode and outcome, see the table) */

    bool has_request;
    uint64_t request_bytes; /* projected process memory: RSS + growth, bytes */
    bool has_growth;
    uint64_t growth_bytes; /* anonymous memory the run adds to the charge, bytes */
    bool has_anonymous;
    uint64_t anonymous_bytes; /* projected anonymous memory: anonymous now + anonymous growth */
    bool has_working_set;
    uint64_t working_set_bytes; /* file working set + projected anonymous memory, bytes */

    bool has_soft_target;
    uint64_t soft_target_bytes; /* target - reserve, bytes */
    bool has_excess;
    uint64_t excess_bytes; /* request - soft target when above it (whatever the outcome) */

    /*
     * excess_over names the excess classified: the binding hard limit's when
     * the charge exceeds it, else a memory.high's, else the soft target's.
     * excess_likely_anonymous: page release cannot address it, because the
     * projected anonymous memory alone exceeds the bound, or the reclaimable
     * estimate is below the excess, or (estimate unknown) the anonymous
     * growth is at least the excess. False without an excess.
     */
    enum rf_admission_bound excess_over;
    bool excess_likely_anonymous;

    bool has_reclaimable;       /* copied from the input */
    uint64_t reclaimable_bytes; /* bytes */

    bool hard_limit_checked; /* some enforced limit was compared (a cgroup's or the host's) */
    bool has_binding;
    size_t binding; /* cgroups[] index of the checked enforced level with the least room */
    bool has_projected_charge;
    uint64_t projected_charge_bytes; /* the binding level's projected charge, bytes */
    bool has_hard_excess;
    uint64_t hard_excess_bytes;                      /* projected - limit at the binding level */
    char hard_limit_source[RF_ADMISSION_SOURCE_MAX]; /* the binding limit's file; "" none */

    /*
     * The host as the binding level: when no cgroup enforces a hard limit
     * and the host was read, the run's anonymous growth is compared with
     * MemAvailable + SwapFree (without MemAvailable: the projected process
     * memory with MemTotal + SwapTotal). Over it: has_hard_excess, Rejected.
     */
    struct rf_host_memory host;                /* copy of the input; read false: not given */
    bool host_binding;                         /* the host was compared: it binds the run */
    uint64_t host_room_bytes;                  /* what the host can give, bytes */
    uint64_t host_projected_bytes;             /* what is compared with it, bytes */
    char host_source[RF_ADMISSION_SOURCE_MAX]; /* the meminfo keys of the room */

    bool has_high_excess;
    uint64_t high_excess_bytes; /* the largest excess over a memory.high, bytes */
    size_t high_level;          /* cgroups[] index of that memory.high */

    bool streaming;             /* the input's: the run streams (no "thrash" for re-reads) */
    bool mlock_requested;       /* the input's: --mlock locks the mapping (not reclaimable) */
    bool thrash;                /* the working set does not fit a limit (hard or memory.high) */
    const char *file_in_memory; /* the input's: why the working set was not compared, or NULL */
    bool has_thrash_level;
    size_t thrash_level; /* cgroups[] index where it fits least */
    bool has_working_set_fit;
    uint64_t working_set_fit_bytes; /* at that level: run room - anonymous ("only M fit") */
    bool has_unbound; /* some level's working set fits only without its unbound_bytes */

    /* A MoE model (input experts) where a limit's working set was compared: */
    bool has_experts;
    uint32_t n_expert, n_expert_used; /* the input's n and k */
    uint32_t cache_experts;           /* c: experts per layer the budget's cache keeps, <= n
                                         (rf_expert_lru_fit; below k when the budget is) */
    uint64_t expert_cache_bytes;      /* that cache: rf_expert_lru_slots(c) x routed_bytes /
                                         (n x the expert layers); 0: the minimum does not fit */
    uint64_t expert_dense_bytes;      /* the input's dense_bytes */
    uint64_t expert_routed_bytes;     /* the input's routed_bytes */
    uint64_t expert_stream_bytes;     /* expected routed bytes read per token (the misses) */
    double expert_hit_rate;           /* expected LRU hit rate of the cache, 0..1 */
    bool expert_hit_observed;         /* from observed routing, else uniform c / n */
    bool expert_cache_min;            /* the cache holds at least its minimum (n experts) */
    bool expert_dense_streams;        /* streaming: the dense part does not fit beside the
                                         cache's minimum and is read through the window */
    size_t unbound_level;             /* cgroups[] index of the first such level */

    size_t n_cgroups;
    struct rf_admission_level_check cgroups[RF_CGROUP_MAX_LEVELS];
    bool cgroups_truncated;

    struct rf_admission_record records[RF_ADMISSION_MAX_RECORDS];
    size_t n_records;

    char reason[RF_ADMISSION_REASON_MAX]; /* sentences, no trailing newline */
    bool reason_cut; /* a part did not fit: left out whole, the reason ends with RF_ADMISSION_CUT */
    char lock_note[RF_ADMISSION_NOTE_MAX]; /* "" unless a requested mlock did not take */

    char unknown_components[RF_ADMISSION_MAX_UNKNOWN][RF_ADMISSION_NAME_MAX]; /* copies */
    size_t n_unknown;
};

/*
 * Decides admission. Computations (checked; an overflow is Rejected):
 *
 *   growth    = kv_cache + graph_scratch
 *               [+ repacked_weights + loader_growth + page_tables pre-load]
 *               (anonymous, and the page tables the kernel charges)
 *   request   = process_rss + growth [+ mapped_weights + model_cached pre-load]
 *   anonymous = anonymous now + growth
 *   per level with an enforced limit and a known usage:
 *     file        = min(reclaimable_file, usage)  (0 when it is unknown)
 *     others      = max(0, usage - (file [- model_cached pre-load]) - process_rss
 *                          [- model_cached pre-load]): the cached model becomes the run's
 *     reclaimable = file [- model_cached pre-load under --mlock: the load locks them]
 *                   [+ min(mapping_rss - locked, usage - file) after the load, Locked
 *                    known: the model mapping's own clean unlocked pages]
 *     base        = usage - reclaimable
 *     projected   = base + growth                 must be <= limit (else Rejected)
 *     run room    = max(0, limit - others)
 *     working set = file_working_set + anonymous  must be <= run room (else thrash)
 *
 * Order of the rules:
 *
 *   1. request not computable (RSS, KV cache, pre-load weights unknown) -> Unknown
 *   2. request + reserve overflows, or a projected figure overflows      -> Rejected
 *   3. some level's projected charge over its hard limit                 -> Rejected
 *   4. an enforced limit with unknown usage, or a truncated hierarchy    -> Unknown
 *   4b. no cgroup enforces a limit and the host was read (in->host):
 *      growth over MemAvailable + SwapFree (or, MemAvailable unknown,
 *      request over MemTotal + SwapTotal)                               -> Rejected
 *      neither MemAvailable nor MemTotal known                           -> Unknown
 *   5. the working set over some level's run room (less that level's
 *      unbound_bytes: the model's pages charged to another cgroup)       -> Rejected (enforce)
 *                                                                          or AdmittedWithWarning
 *      less than RF_STREAM_MIN_WINDOW_BYTES / 2 of weights fit there, not
 *      streaming (the kernel kills rather than thrashes)                 -> Rejected (hard_limit)
 *   5b. the working set over a level's run room, but not without its
 *      unbound_bytes: the limit cannot bind the model's pages        -> AdmittedWithWarning
 *                                                                          (cause not_bound)
 *   6. over a memory.high (charge or working set)                        -> AdmittedWithWarning
 *   7. request over the soft target                                      -> AdmittedWithWarning
 *   8. otherwise                                                         -> Admitted
 *
 * Later rules still fill their figures (excess_bytes, thrash, ...) for
 * the report. The reason names the binding cgroup and says how much
 * reclaimable file cache was counted as reclaimable, not free, and from
 * which memory.stat keys. Unknown
 * components are copied (truncated to RF_ADMISSION_NAME_MAX - 1);
 * GraphScratch and FileWorkingSet are added when those figures are absent.
 * lock_note is set when mlock_requested and the locked bytes are known and
 * below the mapping RSS (or zero).
 *
 * out is fully written on success; on error it is zeroed. Errors: -EINVAL
 * for NULL arguments, a bad mode or phase, n_unknown above
 * RF_ADMISSION_MAX_UNKNOWN or a NULL name, n_cgroups above
 * RF_CGROUP_MAX_LEVELS or NULL cgroups with n_cgroups > 0, or has_target
 * with reserve_bytes >= target_bytes ("target below the safety reserve").
 */
int rf_admission_decide(const struct rf_admission_input *in, struct rf_admission_result *out);

/*
 * Appends a sentence to a->reason (fmt, printf-style): the sentence before
 * it is ended with a full stop first when it has none, and the new one is
 * set off by one space, so two sentences are never glued. Never cut in the
 * middle: a sentence that does not fit whole is left out, and so is every
 * later one, and the reason ends with RF_ADMISSION_CUT instead (reason_cut
 * set). a NULL: nothing.
 */
void rf_admission_append(struct rf_admission_result *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/*
 * The decision in one line for a terminal, into buf (len bytes, cut to
 * fit): what was compared and the outcome's figures in bytes, at most
 * about 160 characters once the CLI writes the bytes in IEC units; no
 * cgroup path (the reason and the report name it). Under streaming a
 * working set over the limit reads "streams: ...", never "will thrash".
 * A first clause of the reason over 130 characters ends at a word with
 * RF_ADMISSION_HEADLINE_CUT. a or buf NULL, or len 0: nothing.
 */
#define RF_ADMISSION_HEADLINE_CUT " ... (the rest: -v)"
void rf_admission_headline(const struct rf_admission_result *a, char *buf, size_t len);

/*
 * The ways out of a decision that is not a plain fit, one per line
 * ("\n"-separated, no trailing newline), each with the bytes it would
 * save: --no-repack (the repacked copies), a smaller -c (the KV cache), a
 * larger limit (by the excess or the part of the working set that does not
 * fit), --residency-policy streaming (a run not already streaming whose
 * excess is file pages). "" when none applies. Into buf (len bytes, cut).
 * The rule for a partial way out (--no-repack, a smaller -c): it is named
 * only when it saves at least RF_ADMISSION_WAY_MIN_PERCENT percent of the
 * excess it answers (the bytes over the hard limit, memory.high or the
 * soft target, or the weights that do not fit under the limit).
 */
#define RF_ADMISSION_WAY_MIN_PERCENT 10
void rf_admission_ways_out(const struct rf_admission_result *a, char *buf, size_t len);

/*
 * The eligible-reclaimable estimate now: what a release could return,
 * following each resource's lifetime state, not its inventory eligibility
 * alone. Counted: resources in RF_LT_RELEASE_ELIGIBLE whose inventory
 * eligibility allows release and whose mapping is not locked, each with
 * its unique_reclaimable_bytes (pages shared with a neighbour never count).
 * Out: released or being released (ReleaseSelected, ReleaseRequested,
 * NativeAccepted, Reconciled), locked (a locked mapping: the kernel
 * refuses MADV_DONTNEED on VM_LOCKED with EINVAL), SharedOrReused, failed
 * (NativeFailure, ReleaseFailed), unknown (Unknown, Invalidated) and
 * every other state (not at a boundary).
 */
struct rf_reclaimable_now {
    bool has_value;     /* false: reason says why (the binding forbids selection) */
    uint64_t bytes;     /* unique reclaimable bytes of the counted resources */
    const char *reason; /* static; NULL when has_value */
    size_t n_counted;
    size_t n_released;
    size_t n_locked;
    size_t n_shared;
    size_t n_failed;
    size_t n_unknown;
    size_t n_not_eligible; /* another state, or an ineligible inventory entry */
};

/*
 * Computes *out from inv, its lifetime states lt (lt->n == inv->n),
 * mapping_locked (inv->n_mappings flags, true when smaps shows Locked > 0
 * for that mapping; the caller passes true where it could not tell; NULL
 * only when inv->n_mappings is 0) and the binding b: when
 * rf_binding_may_select refuses, the counts are filled but has_value is
 * false with its reason. Errors: -EINVAL for NULL inv/lt/b/out, a length
 * mismatch, a NULL mapping_locked with mappings, an entry's mapping_index
 * out of range; -EOVERFLOW when the sum overflows. *out is zeroed first.
 */
int rf_admission_reclaimable_now(const struct rf_inventory *inv, const struct rf_lifetime *lt,
                                 const bool *mapping_locked, const struct rf_binding *b,
                                 struct rf_reclaimable_now *out);

/*
 * The file working set per token: the union of the file page ranges of the
 * entries the graph reads from the file mapping (access FILE_BACKED), in
 * bytes (pages * inv->page_bytes). Errors: -EINVAL (NULL), -ENOMEM,
 * -EOVERFLOW.
 */
int rf_admission_file_working_set(const struct rf_inventory *inv, uint64_t *out);

/*
 * rf_admission_file_working_set over the entries for which keep(e, ud) is
 * true (keep NULL: every entry): the bytes of the union of their page
 * ranges, per mapping. Same errors.
 */
int rf_admission_read_bytes(const struct rf_inventory *inv,
                            bool (*keep)(const struct rf_inventory_entry *e, void *ud), void *ud,
                            uint64_t *out);

/*
 * The anonymous memory llama.cpp's load adds beyond the weights (its
 * vocabulary and tensor metadata): RF_ADMISSION_LOADER_TOKEN_BYTES per
 * vocabulary token plus RF_ADMISSION_LOADER_TENSOR_BYTES per tensor.
 * Measured on the pinned build (RssAnon after the load minus before it,
 * q8_0, 32000 tokens): tiny (21 tensors) 5.81 MiB, small (39) 5.84 MiB,
 * tinyllama (201) 6.10 MiB; issue 20 saw 7.1 MiB for tinyllama under
 * streaming. The constants give 7.23 MiB for tinyllama, 6.88 MiB for tiny.
 * Errors: -EINVAL for a NULL out, -EOVERFLOW.
 */
#define RF_ADMISSION_LOADER_TOKEN_BYTES 224u
#define RF_ADMISSION_LOADER_TENSOR_BYTES 2048u
int rf_admission_loader_bytes(uint64_t n_vocab, uint64_t n_tensors, uint64_t *out);

/*
 * The page tables of a mapping of mapped_bytes: 8 bytes per page of
 * page_bytes (the last level; the upper levels add under 1%), i.e. 2 KiB
 * per MiB with 4 KiB pages. Errors: -EINVAL for a NULL out or page_bytes
 * 0, -EOVERFLOW.
 */
int rf_admission_page_table_bytes(uint64_t mapped_bytes, uint64_t page_bytes, uint64_t *out);

/*
 * llama.cpp's CPU compute buffer (graph scratch) for a batch of n_ubatch
 * tokens, before the context exists: n_ubatch * (n_vocab + 2 * n_embd + 4)
 * floats, the logits and two hidden states live at once. Measured on the
 * pinned build (flash attention on, so n_ctx does not enter): tinyllama
 * 144400 bytes per token (2, 21, 101 and 301 tokens, -c 512 and 1024),
 * small 130064: the formula exactly. An estimate: a model whose
 * feed-forward or attention outgrows its vocabulary needs more. n_ubatch is
 * capped at RF_ADMISSION_UBATCH_MAX (llama.cpp's default n_ubatch) and
 * floored at 1. Errors: -EINVAL (NULL out), -EOVERFLOW.
 */
#define RF_ADMISSION_UBATCH_MAX 512u
int rf_admission_scratch_bytes(uint64_t n_ubatch, uint64_t n_vocab, uint64_t n_embd, uint64_t *out);

/*
 * What an operation's runtime adds beside the KV cache and the compute
 * buffer: the logits of one output (n_vocab floats) and, per compute
 * thread, RF_ADMISSION_THREAD_BYTES (its stack pages, its malloc arena's
 * first heap, its kernel stack; about 170 KiB each measured on the pinned
 * build: tinyllama Q4_0, 2 threads, RssAnon at the OOM kill less the
 * admission's RssAnon, KV cache and scratch). n_threads 0: one. An
 * estimate. Errors: -EINVAL (NULL out), -EOVERFLOW.
 */
#define RF_ADMISSION_THREAD_BYTES (256u << 10)
int rf_admission_runtime_bytes(uint64_t n_vocab, uint64_t n_threads, uint64_t *out);

/*
 * KV-cache bytes of n_ctx cells: n_layer * n_ctx * (n_embd_k + n_embd_v) *
 * elem_bytes, n_embd_k/v being the per-layer K and V widths (n_embd /
 * n_head * n_head_kv for a llama model), elem_bytes 2 for f16. Errors:
 * -EINVAL for a zero argument, -EOVERFLOW.
 */
int rf_admission_kv_bytes(uint64_t n_layer, uint64_t n_ctx, uint64_t n_embd_k, uint64_t n_embd_v,
                          uint64_t elem_bytes, uint64_t *out);

/*
 * The context size a session gets: n_ctx_requested when nonzero, else
 * n_prompt_tokens + n_predict - 1 (the last generated token is not
 * decoded), rounded up to pad cells (llama.cpp pads the KV cache; 256 for
 * the pinned build). Errors: -EINVAL for a NULL out, pad 0, or (without a
 * requested size) no prompt token or nothing to predict; -EOVERFLOW.
 */
int rf_admission_ctx_cells(uint64_t n_ctx_requested, uint64_t n_prompt_tokens, uint64_t n_predict,
                           uint64_t pad, uint64_t *out);

#ifdef __cplusplus
}
#endif

#endif
