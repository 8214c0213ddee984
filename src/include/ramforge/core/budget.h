/*
 * One byte budget over the model mappings of several processes (ramforge
 * watch --budget, docs/BUDGET.md): which process gives back how many of
 * its models' file pages when the bytes they hold pass the budget, and
 * which one never again until something changed. Plain decisions over
 * plain structs: the caller (watch) measures and acts; nothing here reads
 * /proc or advises a page.
 *
 * What is counted. Each distinct model file counts once, by the pages any
 * watched process maps (the union of their pagemap present bits): two
 * processes mapping one file hold its pages once. A release can only drop
 * a process's own pages: those no other watched process maps and not
 * mlocked (the kernel's MADV_PAGEOUT skips a page mapped twice), its
 * releasable bytes.
 *
 * The order. Over the budget, the excess is asked from the least recently
 * active entry first (the longest idle: exec's submissions where its
 * control channel answers, else CPU time), each giving at most its
 * releasable bytes, until the excess is covered. Never an entry --keep
 * names, nor one whose activity is unknown (a busy process would look
 * idle), nor one whose CPU time moved within the plan's min_idle_s (its
 * pages are being read: advice would only make it read them again; an
 * exec'd entry is asked anyway, its engine waits for the idle moment), nor
 * one with a gated request still waiting for its idle moment
 * (one request at a time: its bytes count as on their way), nor one that
 * is stuck (below).
 *
 * Stuck: a release that moved less than half of what it asked (pages
 * another process outside the watch maps, a refusal, a file the process no
 * longer maps at that path) marks the entry stuck at the bytes it then
 * held; it is asked again only once it holds more (pages came back), so
 * the same pages are never advised in a loop.
 */
#ifndef RAMFORGE_CORE_BUDGET_H
#define RAMFORGE_CORE_BUDGET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Where an entry's activity comes from. */
enum rf_budget_activity {
    RF_BUDGET_ACTIVITY_UNKNOWN = 0, /* neither: never chosen */
    RF_BUDGET_ACTIVITY_EXEC,        /* exec's control channel: the model's last submission */
    RF_BUDGET_ACTIVITY_CPU,         /* the process's CPU time (utime + stime) last moved */
};

/* What an entry's release remembers between readings (kept by the caller, per entry). */
struct rf_budget_memory {
    bool asked;              /* a release is being measured (rf_budget_observe next) */
    uint64_t before_bytes;   /* held when it was asked */
    uint64_t asked_bytes;    /* what it asked */
    bool stuck;              /* the last release moved less than half of what it asked */
    uint64_t stuck_bytes;    /* held when it was found stuck */
    uint64_t released_bytes; /* the drops measured so far, bytes (a counter) */
    uint64_t releases;       /* releases asked so far */
};

/* One model mapping of one watched process. */
struct rf_budget_entry {
    size_t file;               /* index of its model file in the files array */
    uint64_t held_bytes;       /* its mapping's present pages, bytes (shared ones too) */
    uint64_t releasable_bytes; /* of those, no other watched process's and not locked */
    enum rf_budget_activity activity;
    double idle_s;                         /* seconds since its last activity (activity known) */
    bool keep;                             /* --keep names the process or the model */
    bool pending;                          /* a gated request waits for its idle moment */
    uint64_t pending_bytes;                /* what that request asked */
    const struct rf_budget_memory *memory; /* may be NULL: never asked */
};

/* Why an entry was passed over (the plan's counts). */
enum rf_budget_skip {
    RF_BUDGET_SKIP_KEEP = 0, /* --keep */
    RF_BUDGET_SKIP_UNKNOWN,  /* activity unknown */
    RF_BUDGET_SKIP_BUSY,     /* CPU time moved within min_idle_s: its pages are not cold */
    RF_BUDGET_SKIP_PENDING,  /* a gated request waits */
    RF_BUDGET_SKIP_STUCK,    /* its last release moved nothing */
    RF_BUDGET_SKIP_NOTHING,  /* no releasable page */
    RF_BUDGET_SKIP_COUNT
};

struct rf_budget_step {
    size_t entry;   /* index into the entries */
    uint64_t bytes; /* to release from it */
    size_t next;    /* the entry that would have been next (== n entries: none) */
};

struct rf_budget_plan {
    uint64_t budget_bytes;
    uint64_t held_bytes;          /* the files' bytes, each file once */
    int64_t headroom_bytes;       /* budget - held: negative over the budget */
    uint64_t pending_bytes;       /* gated requests still waiting, counted as on their way */
    uint64_t excess_bytes;        /* held - budget - pending, 0 when under */
    uint64_t short_bytes;         /* the part of the excess no entry may give */
    struct rf_budget_step *steps; /* least recently active first; owned (rf_budget_plan_free) */
    size_t n_steps;
    size_t skipped[RF_BUDGET_SKIP_COUNT]; /* entries passed over while over the budget */
};

/*
 * The plan for entries[0..n) whose files hold file_held_bytes[0..n_files)
 * under budget_bytes (entries of CPU activity idle less than min_idle_s
 * passed over as busy), into *out (its steps freed with rf_budget_plan_free).
 * Deterministic: ties in idle time go to the entry with more releasable
 * bytes, then the lower index. Returns 0, -EINVAL (NULL argument, an
 * entry's file outside the files), -EOVERFLOW (the held sum), -ENOMEM.
 */
int rf_budget_plan(const struct rf_budget_entry *entries, size_t n, const uint64_t *file_held_bytes,
                   size_t n_files, uint64_t budget_bytes, double min_idle_s,
                   struct rf_budget_plan *out);
void rf_budget_plan_free(struct rf_budget_plan *p);

/* A release of asked_bytes was asked of an entry holding held_bytes. */
void rf_budget_asked(struct rf_budget_memory *m, uint64_t held_bytes, uint64_t asked_bytes);

/*
 * The entry's held bytes measured after its release (or at a later
 * reading): the drop is counted, and a drop under half of what was asked
 * marks it stuck. A stuck entry holding more than when it stuck is not
 * stuck any more. Returns true when this call found it stuck.
 */
bool rf_budget_observe(struct rf_budget_memory *m, uint64_t held_bytes);

/* "exec", "cpu", "unknown". */
const char *rf_budget_activity_name(enum rf_budget_activity a);
/* "keep", "unknown_activity", "busy", "pending", "stuck", "nothing_releasable". */
const char *rf_budget_skip_name(enum rf_budget_skip s);

#ifdef __cplusplus
}
#endif

#endif
