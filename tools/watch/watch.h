/*
 * ramforge watch: the ledger of running llama.cpp processes, read from
 * outside (procfs, pagemap, the model file's page cache, the cgroup
 * tree), without touching them. One reading per interval; the modules:
 *   cmd_watch.c      options and the loop
 *   watch_read.c     one process: status, stat, smaps, cgroup, anonymous growth
 *   watch_model.c    one model mapping: the GGUF tensor table, pagemap and page cache
 *   watch_json.c     the reading as JSON lines (schema/watch.schema.json)
 *   watch_view.c     the terminal view
 *   watch_metrics.c  the reading as Prometheus text, for --metrics-file and --listen
 *                    (metrics_listen.c)
 *   watch_release.c  --release-idle: process_madvise of the idle model mapping
 *   watch_budget.c   --budget: one byte budget over the watched processes' models
 *                    (ramforge/core/budget.h decides; exec's control channel or
 *                    process_madvise acts; docs/BUDGET.md)
 *   watch_budget_metrics.c  its figures, lines and Prometheus families
 */
#ifndef RAMFORGE_TOOLS_WATCH_H
#define RAMFORGE_TOOLS_WATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ramforge/core/inventory.h"
#include "ramforge/core/residency.h"
#include "ramforge/error.h"
#include "ramforge/forge/forge_pages.h"
#include "ramforge/sys/pages.h"
#include "ramforge/sys/procwatch.h"
#include "ramforge/sys/sys.h"

#define WATCH_SCHEMA_VERSION 1
#define WATCH_MAX_MODELS 8     /* model files per process read; more are named in a note */
#define WATCH_OTHER_LAYER (-1) /* tensors outside blk.N. (token_embd, output, norms) */
/*
 * smaps is read at most this often, seconds: its page walk (Pss needs each
 * page's map count) costs about 9 ms on a 1 GiB model. Between two reads
 * the mapping's Rss comes from the pagemap walk (the same present pages),
 * Pss and Locked from the last smaps, with its age.
 */
#define WATCH_SMAPS_EVERY_S 10.0

/* What the anonymous memory holds, said wherever its figure is. */
#define WATCH_ANON_LABEL                                                                           \
    "KV cache, prompt cache, compute scratch, repacked weights and heap together: not split "      \
    "from outside"

/* How the room before the OOM kill is computed (rf_oom_room_find), said with its figure. */
#define WATCH_ROOM_BASIS                                                                           \
    "limit - (usage - reclaimable) at the level with the least room, reclaimable being the "       \
    "clean unmapped file cache and the clean mapped file pages less the model mappings' "          \
    "Locked (as admission counts them); host: MemAvailable + SwapFree"

/* What a count of processes --all could not read means, said wherever the count is. */
#define WATCH_UNREADABLE_NOTE                                                                      \
    "their maps could not be read (another user's processes need root or ptrace access): any of "  \
    "them may map a GGUF file"

struct watch_options {
    int *pids; /* the PID operands; owned */
    size_t n_pids;
    bool all;                 /* --all: every process that maps a GGUF file */
    double interval_s;        /* -i */
    long long iterations;     /* -n: readings, 0 = until interrupted; --once = 1 */
    bool json;                /* --json */
    bool raw;                 /* --bytes */
    const char *metrics_file; /* --metrics-file */
    const char *listen;       /* --listen ADDR:PORT */
    bool release;             /* --release-idle given */
    double release_idle_s;
    uint64_t target_bytes; /* --memory-target */
    enum rfsys_remote_advice release_mode;
    bool budget;           /* --budget given */
    uint64_t budget_bytes; /* --budget */
    char **keep;           /* --keep operands (a pid, a model's file name or path); borrowed */
    size_t n_keep;
    const char *cgroup; /* --cgroup DIR: the processes of that cgroup (and below) */
};

/* A count of pages by state, in bytes. */
struct watch_pages {
    bool has; /* observed (some known state) */
    uint64_t resident_bytes;
    uint64_t nonresident_bytes;
    uint64_t unknown_bytes;
};

struct watch_layer {
    int layer; /* N of blk.N., or WATCH_OTHER_LAYER */
    uint64_t logical_bytes;
    struct watch_pages mapped;
    struct watch_pages cache;
};

/* One VMA of the model file in the process. */
struct watch_vma {
    uint64_t start_addr, end_addr, offset_bytes;
    char perms[5];
};

/* One model file mapped by the process, and what was read of it. */
struct watch_model {
    char path[4096]; /* as /proc/PID/maps names it */
    uint32_t dev_major, dev_minor;
    uint64_t inode;
    bool deleted;           /* maps says " (deleted)" */
    bool replaced;          /* the path names another file now */
    struct watch_vma *vmas; /* owned */
    size_t n_vmas;
    struct rfsys_mapping_sum sum; /* smaps Rss, Pss, Locked of the file's VMAs */
    bool has_sum;
    const char *rss_source; /* "smaps", or the pagemap walk's between two smaps reads */
    double smaps_age_s;     /* seconds since the smaps read that gave Pss and Locked */
    char sum_reason[RF_ERR_MAX];
    bool has_table; /* the tensor table was read (the figures below) */
    char table_reason[RF_ERR_MAX];
    uint64_t file_bytes, logical_bytes, page_bytes;
    const char *mapped_source;      /* "pagemap" */
    char mapped_reason[RF_ERR_MAX]; /* "" when mapped was observed */
    const char *cache_source;       /* "mincore", "cachestat" */
    char cache_reason[RF_ERR_MAX];
    struct watch_pages mapped;     /* over the tensors' pages */
    struct watch_pages cache;      /* over the tensors' pages */
    struct watch_pages file_cache; /* over the whole file (fincore's figure) */
    struct watch_pages dead;       /* mapped pages of tensors read from an anonymous copy */
    uint64_t dead_logical_bytes;
    struct watch_layer *layers; /* owned */
    size_t n_layers;
    struct rf_inventory inv; /* the tensors' page ranges in this process's fragment */
    uint8_t *mapped_states;  /* per file page, owned */
    uint8_t *cache_states;   /* per file page, owned */
};

/* A model mapping's smaps sums, kept between two smaps reads. */
struct watch_smaps_sum {
    uint32_t dev_major, dev_minor;
    uint64_t inode;
    struct rfsys_mapping_sum sum;
};

enum watch_state {
    WATCH_RUNNING = 0,
    WATCH_EXITED,     /* the process is gone */
    WATCH_PID_REUSED, /* another process has the pid now */
};

struct watch_proc {
    int pid;
    char pid_s[16];
    bool started;         /* first reading taken */
    uint64_t start_ticks; /* of the first reading: identity with the pid */
    enum watch_state state;
    char comm[64];
    struct rfsys_proc_stat stat;
    int stat_rc;
    struct rfsys_status status;
    int status_rc;
    struct rfsys_cgroup_tree cg;
    int cg_rc;
    int maps_rc; /* maps or smaps read */
    bool has_smaps_at;
    double smaps_at_s;                                   /* monotonic time of the last smaps read */
    struct watch_smaps_sum smaps_last[WATCH_MAX_MODELS]; /* the model mappings' sums of that read */
    size_t n_smaps_last;
    struct watch_model models[WATCH_MAX_MODELS];
    size_t n_models;
    size_t models_left_out; /* GGUF files past WATCH_MAX_MODELS */
    /* anonymous growth over the watch: RssAnon + VmSwap */
    bool has_anon0;
    double t0_s;
    uint64_t anon0_bytes;
    bool has_growth;
    double growth_bytes_per_min;
    /* idleness for --release-idle: known only while /proc/PID/stat reads */
    bool cpu_known;          /* the last reading read stat: the idle clock runs */
    uint64_t last_cpu_ticks; /* utime + stime of that read */
    double cpu_changed_s;    /* when cpu_ticks last moved, or stat was first read (again) */
    /* the last release, for the reading's report */
    bool released;
    char release_json_note[RF_ERR_MAX];
    uint64_t rel_requested_bytes, rel_accepted_bytes;
    bool rel_has_observed;
    int64_t rel_observed_bytes;
    uint64_t rel_before_bytes, rel_after_bytes;
    int rel_error;
    bool rel_met_target;
    struct watch_budget *budget; /* --budget's state of this process (watch_budget.c); owned */
};

/* The budget's figures of one reading (--budget). */
struct watch_budget_total {
    bool has;               /* --budget given and the plan made */
    uint64_t budget_bytes;  /* --budget */
    uint64_t held_bytes;    /* the models' resident pages, each file once */
    int64_t headroom_bytes; /* budget - held: negative over it */
    uint64_t pending_bytes; /* gated requests waiting for their process's idle moment */
};

#define WATCH_MAX_REASONS 8 /* distinct reasons --all counts unreadable processes under */

/* The processes --all could not read (their maps refused): each may map a GGUF file. */
struct watch_unreadable {
    size_t n; /* processes */
    size_t n_reasons;
    struct {
        int err;             /* -errno of the maps read */
        size_t n;            /* processes refused with it */
    } by[WATCH_MAX_REASONS]; /* the first WATCH_MAX_REASONS reasons met */
};

struct watch_reading {
    double time_s;  /* CLOCK_REALTIME */
    double now_s;   /* CLOCK_MONOTONIC: the clock of the procs' times */
    uint64_t index; /* 1, 2, ... */
    bool all;       /* --all: unreadable is counted */
    struct watch_unreadable unreadable;
    bool metrics_file;            /* --metrics-file given */
    uint64_t metrics_file_errors; /* its failed writes since the watch began */
    struct watch_budget_total budget;
};

/* watch_read.c */
void watch_proc_init(struct watch_proc *p, int pid);
void watch_proc_clear_models(struct watch_proc *p);
/* One reading of p at monotonic time now_s. Sets p->state; never fails. */
void watch_proc_read(struct watch_proc *p, double now_s);
/*
 * Lists every pid whose maps name a GGUF file (--all); *out owned; the
 * processes whose maps could not be read (not those that exited meanwhile)
 * are counted in *u by reason. 0 or -errno.
 */
int watch_find_all(int **out, size_t *n, struct watch_unreadable *u);
/* As watch_find_all over the processes of the cgroup directory dir and its descendants. */
int watch_find_cgroup(const char *dir, int **out, size_t *n, struct watch_unreadable *u);
/*
 * Seconds p's CPU time has not moved at monotonic time now_s in *idle_s;
 * false when unknown: the last reading could not read /proc/PID/stat (a
 * busy process would look idle), or p no longer runs.
 */
bool watch_idle_seconds(const struct watch_proc *p, double now_s, double *idle_s);
/*
 * What watch knows of p's own pages for the room before the OOM kill: its
 * models are mapped; the smaps Rss and Locked of every model mapping
 * (unknown when one model's smaps sums were not read).
 */
void watch_room_own(const struct watch_proc *p, struct rf_oom_room_own *own);
/*
 * The room before the OOM kill of p (rf_oom_room_find over p's cgroup tree
 * and watch_room_own): room->level the binding level's index in cg.levels
 * (-1: the host). False, with room->why, when unknown.
 */
bool watch_binding(const struct watch_proc *p, struct rf_oom_room *room);

/* watch_model.c */
/*
 * Reads the model file of maps entry m into *wm (zeroed first); never
 * fails. fresh: maps is a read of smaps (its sums are kept in p), else of
 * maps (Rss from the pagemap walk, Pss and Locked from p's last smaps).
 */
void watch_model_read(struct watch_model *wm, struct watch_proc *p, const struct rfsys_maps *maps,
                      size_t m, bool fresh, double now_s);
void watch_model_free(struct watch_model *wm);
/* Frees the tensor tables kept across readings (at the end of the watch). */
void watch_model_cache_free(void);
/* True when PATH (or an open /proc/PID/map_files link) starts with the GGUF magic. */
bool watch_is_gguf(const char *path);

/* watch_json.c: one line per process to f. */
int watch_json_line(FILE *f, const struct watch_reading *r, const struct watch_proc *p);
/* With --all, the reading's own line (kind watch_all): n processes listed, those not readable. */
int watch_json_all(FILE *f, const struct watch_reading *r, size_t n);

/* watch_view.c: the terminal view of procs[0..n). */
void watch_view(FILE *f, const struct watch_reading *r, struct watch_proc *const *procs, size_t n,
                bool raw, bool clear);

/* watch_metrics.c */
int watch_metrics_text(const struct watch_reading *r, struct watch_proc *const *procs, size_t n,
                       char **out);

/* watch_release.c: --release-idle for p at monotonic time now_s. */
void watch_release_maybe(struct watch_proc *p, const struct watch_options *o, double now_s);
/*
 * process_madvise(mode) of up to want_bytes of m's present r--s pages in p,
 * from the end of the file backwards, leaving out the file pages skip marks
 * (may be NULL), validated against a fresh maps read. *requested: the bytes
 * submitted, *accepted: those the kernel accepted. 0 or -errno (-ESTALE:
 * the process remapped since the reading; -ESRCH: it exited).
 */
int watch_advise(const struct watch_proc *p, const struct watch_model *m, uint64_t want_bytes,
                 const uint8_t *skip, enum rfsys_remote_advice mode, uint64_t *requested,
                 uint64_t *accepted);

/* watch_budget.c */
/* --budget over procs[0..n) at monotonic time now_s: plans, acts, says; figures in *total. */
void watch_budget_run(struct watch_proc *const *procs, size_t n, const struct watch_options *o,
                      double now_s, struct watch_budget_total *total);
/* p leaves the watch (exited, pid reused): what its budget could not do is said; freed. */
void watch_budget_gone(struct watch_proc *p);

/* The path label of a process: its first model's path, "" when none. */
const char *watch_model_label(const struct watch_proc *p);

#endif
