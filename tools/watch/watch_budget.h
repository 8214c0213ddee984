/*
 * ramforge watch --budget's state of one process, shared by watch_budget.c
 * (the plan and the releases) and watch_budget_metrics.c (its Prometheus
 * families). docs/BUDGET.md is the user's view.
 */
#ifndef RAMFORGE_TOOLS_WATCH_BUDGET_H
#define RAMFORGE_TOOLS_WATCH_BUDGET_H

#include "ramforge/core/budget.h"
#include "ramforge/core/exec_ctl.h"
#include "ramforge/core/prom.h"
#include "watch.h"

/* One model file of the process, kept across readings (by device and inode). */
struct watch_budget_model {
    uint32_t dev_major, dev_minor;
    uint64_t inode;
    char path[4096];           /* as maps names it */
    bool seen;                 /* mapped at this reading */
    uint64_t held_bytes;       /* its present pages at this reading */
    uint64_t releasable_bytes; /* of those, no other watched process's and not locked */
    struct rf_budget_memory mem;
    bool pending; /* a gated request waits for the process's idle moment */
    uint64_t pending_id, pending_bytes;
    bool settling; /* its request was seen done: measured at the next reading */
    uint64_t gate_requests, advice_requests; /* releases asked, by route */
    int last_error;                          /* the last error said (said once per change) */
};

struct watch_budget {
    bool gated;         /* exec's control channel answered at this reading */
    int ctl_error;      /* why not (-ENOENT: no channel: not under exec) */
    int ctl_error_said; /* the reason last said (said once per change) */
    struct rf_exec_ctl_model ctl[WATCH_MAX_MODELS]; /* the status of this reading */
    size_t n_ctl;
    struct watch_budget_model m[WATCH_MAX_MODELS];
    size_t n;
};

/* watch_budget_metrics.c: the budget's families (ramforge_watch_budget_*), after the others. */
void watch_budget_metrics(struct rf_prom *f, const struct watch_reading *r,
                          struct watch_proc *const *procs, size_t n);

#endif
