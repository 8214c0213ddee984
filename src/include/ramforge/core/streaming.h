/*
 * The streaming residency policy's planner: for a model whose file-backed
 * weights do not fit the binding memory limit, which file pages to pin
 * (mlock) so that they stay resident while the rest streams through a
 * window of the page cache by the kernel's own faults and readahead.
 *
 * The decode loop reads the layers in the same order every token, so under
 * a limit the kernel's LRU reclaims first exactly the page needed next and
 * every token rereads nearly the whole file. Locked pages are unevictable:
 * with a pinned resident set, reclaim can only take the streamed layers,
 * which must be read each token anyway (docs/STREAMING.md has the
 * measurements behind the choices below).
 *
 * What is pinned, in this order:
 *   1. the tensors outside the repeating layers that the graph reads in full
 *      every token (`output.weight`, `output_norm.weight`, ...), all or none;
 *      `token_embd.weight` is read only by the rows of the tokens (a few KiB
 *      per token), so it is never pinned, unless the model has no `output`
 *      tensor (tied embeddings: the output projection then reads it whole);
 *   2. the repeating layers `blk.N.*` whole, in increasing N while they fit;
 *      with the read-ahead window, in rf_stream_layer_order's spread order
 *      instead, so that the layers left to stream are evenly spaced and the
 *      pinned layers' compute between them hides the window's reads;
 *   3. of the first layer that did not fit, each tensor (file order) that
 *      still fits the budget left: every pinned byte is a byte not read
 *      again each token.
 * On a mixture-of-experts model (params.experts) the routed expert tensors
 * are neither pinned nor in W: k experts of every layer are reserved before
 * the pins, and what the limit leaves after them is an LRU expert cache of c
 * experts a layer (streaming_experts.c, docs/MOE.md).
 * Only entries the graph reads from the file mapping (access FILE_BACKED)
 * with a validated range (file_backed, eligibility ELIGIBLE) are ever
 * pinned: an anonymous or repacked copy is never a pin, nor a range
 * outside a validated mapping.
 *
 * The budget (all bytes, checked arithmetic):
 *   fixed    = anonymous + kv_cache + scratch + runtime
 *   resident = limit - margin - fixed           (R: what can stay resident)
 *   pin      = resident - window                (the most that is pinned)
 * with pinned counted as the union of the pinned page ranges. The plan
 * never pins more than `pin`, so pinned + fixed + window + margin <= limit.
 *
 * Plain C over plain structs, no OS calls.
 */
#ifndef RAMFORGE_STREAMING_H
#define RAMFORGE_STREAMING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ramforge/core/experts.h"
#include "ramforge/core/intervals.h"
#include "ramforge/core/inventory.h"
#include "ramforge/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RF_STREAM_MIN_WINDOW_BYTES (32ull << 20) /* floor of the default window, bytes */
#define RF_STREAM_WINDOW_LAYERS 1                /* default window: this many largest layers */
#define RF_STREAM_MIN_MARGIN_BYTES (16ull << 20) /* floor of the default margin, bytes */
#define RF_STREAM_MARGIN_DIVISOR 64              /* default margin: limit / 64 above the floor */
#define RF_STREAM_REASON_MAX RF_ERR_MAX          /* reason text, including the NUL */

/* The planner's inputs. Zero-initialise, then fill. */
struct rf_stream_params {
    uint64_t limit_bytes;      /* the binding limit's room for this process, bytes (> 0) */
    uint64_t anonymous_bytes;  /* anonymous memory now (RssAnon: repacked weights, runtime) */
    uint64_t kv_bytes;         /* KV cache the run adds, bytes */
    uint64_t scratch_bytes;    /* graph scratch the run adds, bytes (0: included elsewhere) */
    uint64_t runtime_bytes;    /* other runtime growth, bytes */
    uint64_t window_bytes;     /* page cache left for the streamed layers; 0: default
                                  (rf_stream_default_window) */
    uint64_t margin_bytes;     /* safety margin under the limit; 0: default
                                  (rf_stream_default_margin) */
    uint32_t read_ahead_slots; /* > 0: the read-ahead window (stream_window.h): the window is
                                  a ring of this many largest layer tensors of anonymous
                                  memory; window_bytes must be 0 then */
    const struct rf_expert_map *experts; /* a MoE model's routed experts (borrowed); NULL or
                                            none: a dense plan. Its tensors leave the pins and
                                            the window: the expert cache reads them */
};

/* The plan. Arrays are owned; free with rf_stream_plan_free. */
struct rf_stream_plan {
    bool fits;            /* fixed + window + margin <= limit: the run can stream (admission) */
    bool nothing_streams; /* the whole working set is pinned: the model fits */
    uint64_t page_bytes;
    uint64_t limit_bytes, margin_bytes, window_bytes, min_window_bytes; /* as used, bytes */
    uint64_t fixed_bytes;           /* anonymous + kv + scratch + runtime, bytes */
    uint64_t working_set_bytes;     /* W: union of the pages the graph reads from the file per
                                       token (token_embd excluded unless tied), bytes */
    uint64_t resident_bytes;        /* R: limit - margin - fixed (0 when negative), bytes */
    uint64_t pin_budget_bytes;      /* R - window (0 when negative), bytes */
    uint64_t pinned_bytes;          /* union of the pinned page ranges, bytes (<= pin budget) */
    uint64_t streamed_bytes;        /* W - pinned (the pinned pages W holds): read again each
                                       token, an estimate, bytes */
    uint64_t largest_layer_bytes;   /* the largest repeating layer's pages, bytes */
    uint64_t largest_tensor_bytes;  /* the largest repeating-layer tensor's pages, bytes */
    uint32_t read_ahead_slots;      /* the read-ahead ring's slots (0: no read-ahead) */
    uint64_t read_ahead_bytes;      /* its bytes: slots * largest tensor, the window then */
    int32_t n_layers;               /* repeating layers seen (highest N + 1), 0: none */
    int32_t layers_pinned;          /* layers pinned whole: the first layers_pinned of
                                       rf_stream_layer_order (blk.0 .. blk.(layers_pinned - 1)
                                       unless layers_spread) */
    bool layers_spread;             /* the layers were tried in the spread order (read-ahead) */
    int32_t partial_layer;          /* the first layer that did not fit whole; -1: none */
    uint32_t partial_layer_tensors; /* tensors of partial_layer pinned alone, in file
                                       order, each while it fits the budget left */
    bool head_pinned;               /* group 1 (output, norms) is pinned */
    size_t *pinned;                 /* inventory entry positions, inventory order */
    size_t n_pinned;
    struct rf_file_range *ranges; /* merged page ranges to lock, file order per mapping */
    size_t n_ranges;
    struct rf_file_range *stream_ranges; /* W's pages outside the pinned set: what streams,
                                            file order per mapping, disjoint */
    size_t n_stream_ranges;
    struct rf_file_range *rows_ranges; /* the pages of the tensors read by rows (token_embd
                                          when the model has an output tensor), outside W
                                          and never pinned; file order per mapping */
    size_t n_rows_ranges;
    /* the expert policy (a MoE model, params.experts): its routed tensors are neither pinned
       nor in W; what the limit leaves after fixed + pins + window + margin is an LRU cache of
       expert_cache_per_layer experts a layer (rf_stream_plan_experts) */
    uint32_t n_expert, n_expert_used;  /* n and k; 0: no routed experts */
    uint32_t expert_layers;            /* layers with routed tensors */
    uint64_t expert_bytes;             /* one expert of the largest layer: its slices' outward
                                          page spans (each at most its pages + 1), bytes */
    uint64_t expert_min_bytes;         /* n experts (a prompt batch may select every expert of
                                          a layer): the cache's minimum, bytes */
    uint32_t expert_cache_per_layer;   /* c, 0 <= c <= n (below k: every token reads k - c
                                          or more a layer) */
    uint32_t expert_cache_slots;       /* T = rf_expert_lru_slots(c): experts held at once over
                                          every layer; 0: no experts or the minimum does not fit
                                          (no cache) */
    uint64_t expert_cache_bytes;       /* T x expert_bytes: the most the cache holds */
    char reason[RF_STREAM_REASON_MAX]; /* one sentence: what was pinned or why not */
};

void rf_stream_plan_init(struct rf_stream_plan *plan);

/* Frees the arrays; leaves an empty plan. NULL is a no-op. */
void rf_stream_plan_free(struct rf_stream_plan *plan);

/*
 * The order in which the planner tries n layers for pinning, into order[n]
 * (a permutation of 0 .. n - 1). Not spread: 0, 1, ..., n - 1. Spread: the
 * reverse of the van der Corput sequence scaled to n (first occurrences),
 * so that for every m the last m layers of the order (those left to stream
 * when only n - m fit) are spread evenly over 0 .. n - 1: for n = 8,
 * 0 4 2 6 1 5 3 7 reversed. n <= 0: nothing.
 */
void rf_stream_layer_order(int32_t n, bool spread, int32_t *order);

/* The default window: RF_STREAM_WINDOW_LAYERS largest layers, at least the floor. */
uint64_t rf_stream_default_window(uint64_t largest_layer_bytes);

/* The default margin: max(floor, limit / RF_STREAM_MARGIN_DIVISOR). */
uint64_t rf_stream_default_margin(uint64_t limit_bytes);

/*
 * Plans the pinned set over inv with p (file-top comment). The minimum
 * window (what admission needs besides the fixed part) is one largest
 * layer, at least RF_STREAM_MIN_WINDOW_BYTES / 2; with read_ahead_slots,
 * the window and its minimum are the ring (read_ahead_bytes: slots largest
 * tensors of a layer), which the read-ahead allocates whole. out->fits is false when
 * fixed + min window + margin exceeds the limit: nothing is pinned then.
 * A plan that pins nothing (the budget is below the head group) is not an
 * error: the reason says so.
 *
 * *out is initialised first (old content freed). Errors: -EINVAL (NULL
 * argument, limit 0), -EOVERFLOW (a byte sum), -ENOMEM; on error *out is
 * empty; -EINVAL also for read_ahead_slots with a window_bytes.
 */
int rf_stream_plan_build(const struct rf_inventory *inv, const struct rf_stream_params *p,
                         struct rf_stream_plan *out);

/*
 * The expert part of a plan (streaming_experts.c): from p->experts, the
 * per-layer expert bytes and the minimum (n experts: a prompt batch) into out, and
 * routed[i] true for the inventory entries that are routed expert tensors
 * (inv->n of them). A dense model: nothing set. -EOVERFLOW, -ENOMEM.
 */
int rf_stream_plan_experts_size(const struct rf_inventory *inv, const struct rf_stream_params *p,
                                bool *routed, struct rf_stream_plan *out);

/* After the pins: c and T from what the limit leaves (R - window - pinned - the margin counted
   in R; rf_expert_lru_fit), when the minimum fits; appended to out->reason. */
void rf_stream_plan_experts_cache(struct rf_stream_plan *out);

/* What the expert cache did in one operation (forge_experts.h), the report's streaming.experts. */
struct rf_stream_experts {
    bool on;                 /* an expert cache ran during the operation */
    uint32_t per_layer;      /* c */
    uint32_t slots;          /* T: experts held at once over every layer */
    uint64_t budget_bytes;   /* the plan's expert_cache_bytes */
    uint64_t resident_bytes; /* cache pages resident at the end (mincore of the reservations) */
    uint64_t selections, hits, misses; /* the router's selections; hits + misses = selections */
    uint64_t bytes_read;         /* bytes the readers read (each miss: its slices' page spans) */
    uint64_t slices_read;        /* slices read */
    uint64_t tokens;             /* tokens routed through the cache (rows of the first MoE layer) */
    uint64_t read_wait_ns;       /* wall time the decode waited for the reads */
    uint64_t evictions;          /* experts dropped (MADV_DONTNEED of their own pages) */
    uint64_t tensors_pointed;    /* routed weight data pointers set to a reservation */
    uint64_t tensors_not_mapped; /* routed weights whose data was not the mapping's (repacked):
                                    untouched, read from their copy */
    bool direct;                 /* every read was O_DIRECT */
    const char *direct_reason;   /* static: why reads went through the page cache; NULL: direct */
    int first_error;             /* negative errno of the first failed read; 0: none */
};

/* What the layer-ahead prefetch thread did in one operation (forge_ahead.h). */
struct rf_stream_prefetch {
    bool on;                    /* a prefetch thread ran during the operation's session */
    uint32_t distance;          /* layers ahead: at layer L, layer L + distance - 1 */
    uint64_t layers_posted;     /* layer changes the cb_eval callback posted */
    uint64_t layers_prefetched; /* layers the thread issued POSIX_FADV_WILLNEED for */
    uint64_t requested_bytes;   /* their file extents, summed (pages already cached included) */
    uint64_t failed_calls;      /* fadvise calls that failed */
};

/* What the read-ahead window did in one operation (forge_window.h, stream_window.h). */
struct rf_stream_read_ahead {
    bool on;                     /* a window ran during the operation's sessions */
    uint32_t slots;              /* ring slots */
    uint64_t slot_bytes;         /* bytes of one slot */
    uint32_t n_units;            /* tensors the window reads each token */
    uint32_t units_too_large;    /* streamed tensors larger than a slot, left to the mapping */
    bool direct;                 /* every read was O_DIRECT */
    const char *direct_reason;   /* static: why reads went through the page cache; NULL: direct */
    uint64_t units_read;         /* tensors the thread read into a slot */
    uint64_t read_bytes;         /* bytes it read */
    uint64_t read_ns;            /* wall time of its reads */
    uint64_t units_used;         /* tensors the decode computed from a slot */
    uint64_t units_fallback;     /* window tensors read from the mapping after the first decode
                                    (a failed read, far out of the learned order) */
    uint64_t units_skipped;      /* read but not used (the decode's order differed) */
    uint64_t tensors_pointed;    /* weight data pointers set to a slot (each restored) */
    uint64_t tensors_not_mapped; /* window weights whose data was not the mapping's: untouched */
    uint64_t waits;              /* layers the decode waited for */
    uint64_t wait_ns;            /* its wall time waiting for reads */
    int first_error;             /* negative errno of the first failed read; 0: none */
};

/* What the decode (the tokens after the first) cost, measured by the caller around it. */
struct rf_stream_decode {
    bool on;                     /* given (rf_session_stream_decode) */
    uint64_t decode_ns;          /* wall time of the decode */
    uint64_t tokens;             /* tokens it decoded (generated tokens - 1) */
    bool has_io;                 /* the two below were measured */
    uint64_t read_bytes;         /* /proc/self/io read_bytes over the decode */
    uint64_t major_faults;       /* /proc/self/stat majflt over the decode */
    bool has_cpu;                /* the two below were measured */
    uint64_t user_ns;            /* getrusage user time over the decode, every thread */
    uint64_t system_ns;          /* getrusage system time over the decode (faults, reclaim) */
    const char *omp_wait_policy; /* OMP_WAIT_POLICY in the environment (borrowed); NULL: unset */
    const char *gomp_spincount;  /* GOMP_SPINCOUNT in the environment (borrowed); NULL: unset */
};

/*
 * What the streaming policy did in one operation, for the report's
 * `streaming` object (present for every policy: the storage traffic is
 * measured whatever the policy; the plan only under streaming). Pointers
 * are borrowed.
 */
/* plan_reason of a MoE model whose expert cache's minimum does not fit beside the plan's
   fixed part (plan_short; also a report warning, after "streaming: "). */
#define RF_STREAM_NO_EXPERT_CACHE                                                                  \
    "no expert cache: its minimum (the n experts of one layer a prompt batch may select), the "    \
    "fixed part, a minimum window and the margin do not fit the limit (plan.reason); the routed "  \
    "experts are read by the decode's faults through the page cache, as under "                    \
    "--residency-policy off"

/* plan_reason of a MoE model streamed with the read-ahead window off (--stream-read-ahead 0),
   which carries the expert cache (plan_short, and a report warning after "streaming: "). */
#define RF_STREAM_NO_EXPERT_CACHE_OFF                                                              \
    "no expert cache: --stream-read-ahead 0 turns it off with the read-ahead window; the routed "  \
    "experts are read by the decode's faults through the page cache, as under "                    \
    "--residency-policy off"

struct rf_stream_report {
    bool active;                       /* the policy is streaming */
    const struct rf_stream_plan *plan; /* NULL: not planned (plan_reason) */
    const struct rf_inventory *inv;    /* names of the pinned entries */
    const char *plan_reason;           /* static; why no plan, or why it was not applied */
    bool plan_short;                   /* the file does not fit beside the fixed part and the
                                          plan was not applied (RF_STREAM_NO_EXPERT_CACHE, or
                                          no room for a window): the decode faults the
                                          weights in through the page cache */
    const char *limit_source;          /* where limit_bytes came from */
    bool pin_attempted;                /* mlock was called */
    bool pinned;                       /* every pinned range was locked */
    uint64_t pin_accepted_bytes;       /* bytes mlock returned 0 for */
    uint64_t pin_ns;                   /* wall time of the pin (it reads the pages) */
    int pin_error;                     /* negative errno of a refused mlock; 0 none */
    const char *pin_error_reason;      /* static sentence; NULL none */
    bool fallback;                     /* pins refused: plain behaviour, a warning */
    uint64_t pin_requested_bytes;      /* the plan's pins (plan.pinned_bytes), bytes */
    bool partial;                      /* RLIMIT_MEMLOCK is below the plan's pins: the first
                                          memlock_limit_bytes of them (file order) were pinned */
    uint64_t memlock_limit_bytes;      /* RLIMIT_MEMLOCK (soft) when partial, bytes */
    bool sequential;                   /* the streamed ranges were MADV_SEQUENTIAL */
    bool hugepage;                     /* the streamed ranges were MADV_HUGEPAGE */
    bool rows_random;                  /* the row-read ranges (plan.rows_ranges) were
                                          MADV_RANDOM */
    bool has_thp_enabled;
    char thp_enabled[16]; /* the THP mode in force ("always", "madvise", "never"), read from
                             /sys/kernel/mm/transparent_hugepage/enabled when hugepage was
                             asked */
    bool has_locked;
    uint64_t locked_bytes;   /* smaps Locked of the model mapping after the pin,
                                exact_measured */
    const char *unpinned_at; /* the boundary where munlock ran; NULL: still pinned
                                or never pinned */
    bool has_read_bytes;
    uint64_t read_bytes; /* /proc/self/io read_bytes over the operation */
    bool has_major_faults;
    uint64_t major_faults; /* /proc/self/stat majflt over the operation */
    bool has_bandwidth;
    uint64_t bandwidth_bytes_per_s; /* B: given by the caller (bench measures it) */
    bool has_warm_token_ns;
    uint64_t warm_token_ns; /* t_c: given by the caller */
    bool has_bound;
    uint64_t bound_token_ns; /* t_c (0 when unknown) + max(0, W - (limit - fixed)) / B, ns */
    bool has_achieved;
    uint64_t achieved_token_ns;             /* decode time / decoded tokens, ns */
    struct rf_stream_prefetch prefetch;     /* the layer-ahead prefetch; on false: none */
    struct rf_stream_decode decode;         /* the decode's reads and CPU time; on false: none */
    struct rf_stream_read_ahead read_ahead; /* the read-ahead window; on false: none */
    struct rf_stream_experts experts;       /* the expert cache; on false: none */
    struct rf_stream_experts experts_total; /* every operation's since the session began (the
                                               /metrics counters); on false: none */
    bool has_overlap_limit;
    uint64_t overlap_limit_token_ns; /* max(t_c, max(0, W - (limit - fixed)) / B), ns */
};

#ifdef __cplusplus
}
#endif

#endif
