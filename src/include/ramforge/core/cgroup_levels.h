/*
 * A process's memory cgroup and its ancestors as plain values: per level
 * the hard limit, the soft limit, the usage, the inactive file cache, the
 * file cache the kernel can drop under the limit (reclaimable, whatever
 * LRU list it is on) and the kernel's verdict counters, each figure with
 * the file it came from. src/sys fills these from /sys (rfsys_read_cgroup_tree);
 * admission reads them; the report prints them.
 *
 * The kernel enforces every ancestor's limit on a child, and an ancestor's
 * usage includes its other children (siblings of the run), so admission
 * checks each level against its own usage, not the process's.
 *
 * Plain C, no OS calls. A hierarchy has at most RF_CGROUP_MAX_LEVELS
 * levels; deeper ones are cut at the top and flagged.
 */
#ifndef RAMFORGE_CGROUP_LEVELS_H
#define RAMFORGE_CGROUP_LEVELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RF_CGROUP_MAX_LEVELS 16 /* the cgroup and up to 15 ancestors */
#define RF_CGROUP_PATH_MAX 600  /* a directory or file path, including the NUL */

/*
 * One figure read from a cgroup file. source is the file tried (relative
 * to the sysroot; for a keyed file "<file> <key>"), whether or not it
 * could be read, so a reason can name it.
 */
struct rf_cgroup_figure {
    bool has;       /* read and parsed */
    bool unlimited; /* limits only: v2 "max", v1 at or above the "no limit" sentinel */
    uint64_t bytes; /* meaningful when has && !unlimited, bytes */
    int error;      /* 0 when has; else -ENOENT (absent), -EBADMSG (malformed), other -errno */
    char source[RF_CGROUP_PATH_MAX];
};

/*
 * The kernel's verdict counters of one cgroup, monotonic while the cgroup
 * lives. v1: memory.failcnt (usage hit the limit) and memory.oom_control
 * oom_kill; v2: memory.events high (throttled over memory.high), max
 * (usage hit memory.max), oom and oom_kill (v2 events count the subtree).
 */
struct rf_cgroup_counters {
    bool has_failcnt;
    uint64_t failcnt; /* v1 memory.failcnt */
    bool has_oom_kill;
    uint64_t oom_kill; /* v1 memory.oom_control oom_kill, v2 memory.events oom_kill */
    bool has_events_high;
    uint64_t events_high; /* v2 memory.events high */
    bool has_events_max;
    uint64_t events_max; /* v2 memory.events max */
    bool has_events_oom;
    uint64_t events_oom; /* v2 memory.events oom */
};

/* One cgroup of the hierarchy. */
struct rf_cgroup_level {
    char dir[RF_CGROUP_PATH_MAX];          /* controller directory, relative to the sysroot */
    struct rf_cgroup_figure limit;         /* hard: v1 memory.limit_in_bytes, v2 memory.max */
    struct rf_cgroup_figure high;          /* soft: v2 memory.high; v1: has false, -ENOENT */
    struct rf_cgroup_figure usage;         /* v1 memory.usage_in_bytes, v2 memory.current */
    struct rf_cgroup_figure inactive_file; /* v1 memory.stat total_inactive_file,
                                              v2 memory.stat inactive_file (reported) */
    /*
     * The clean, unmapped file cache the kernel can drop under the limit,
     * on the active list as on the inactive one: v1 memory.stat
     * total_active_file + total_inactive_file - total_mapped_file, v2
     * file - file_mapped - shmem - unevictable; both less dirty and
     * writeback pages where memory.stat reports them, floored at 0.
     * source: the file and the keys used; -ENOENT when a required key is
     * absent. What admission counts as headroom (reclaimable, not free).
     */
    struct rf_cgroup_figure reclaimable_file;
    /*
     * The clean file pages some process maps, charged to this level (the
     * model mapping's and the programs' libraries among them): v1
     * memory.stat total_mapped_file, v2 file_mapped, less shmem,
     * unevictable (locked), dirty and writeback pages where reported,
     * floored at 0. The kernel can unmap and drop them (they are re-read
     * when touched again); a mapped page of a file charged to another
     * cgroup is not here. -ENOENT when the mapped key is absent.
     */
    struct rf_cgroup_figure mapped_file;
    struct rf_cgroup_counters counters;
};

/*
 * The host's memory (/proc/meminfo, kB fields in bytes): the level that
 * binds a run when no cgroup of its hierarchy enforces a hard limit.
 * read false: not attempted (the figures mean nothing); else each figure
 * has its source ("/proc/meminfo MemAvailable") and, unread, its error.
 */
struct rf_host_memory {
    bool read;
    struct rf_cgroup_figure total;      /* MemTotal */
    struct rf_cgroup_figure available;  /* MemAvailable (Linux 3.14+): allocatable without
                                           swapping, reclaimable cache included */
    struct rf_cgroup_figure swap_total; /* SwapTotal */
    struct rf_cgroup_figure swap_free;  /* SwapFree */
};

/* True when the level's hard limit was read and is a finite number. */
bool rf_cgroup_level_enforced(const struct rf_cgroup_level *l);

/*
 * A short text for a figure's error: "" for 0, "absent" for -ENOENT,
 * "malformed" for -EBADMSG, else strerror's text. Never NULL.
 */
const char *rf_cgroup_error_text(int err);

/* The change of one cgroup's counters over a run; a counter is present in both. */
struct rf_cgroup_verdict_level {
    char dir[RF_CGROUP_PATH_MAX];
    struct rf_cgroup_counters delta; /* after - before, per counter present in both */
};

/*
 * What the kernel did to the run's cgroups: per level the counter deltas,
 * and the summary flags over every level.
 */
struct rf_cgroup_verdict {
    size_t n; /* levels matched by directory in before and after */
    struct rf_cgroup_verdict_level levels[RF_CGROUP_MAX_LEVELS];
    bool hit_limit;  /* a failcnt or events max/oom delta > 0: usage reached a hard limit */
    bool oom_killed; /* an oom_kill delta > 0 */
    bool throttled;  /* an events high delta > 0: usage went over memory.high */
    bool complete;   /* no counter present on one side was missing or smaller on the other */
};

/*
 * Builds the verdict from the levels read before the run and after it.
 * Levels are matched by dir (after's order); a level only in one of them is
 * left out. A counter missing on either side, or smaller after than before
 * (the cgroup was recreated), has no delta and clears complete. Errors:
 * -EINVAL for a NULL out, a NULL array with a nonzero count, or a count
 * above RF_CGROUP_MAX_LEVELS; *out is zeroed first.
 */
int rf_cgroup_verdict_build(const struct rf_cgroup_level *before, size_t n_before,
                            const struct rf_cgroup_level *after, size_t n_after,
                            struct rf_cgroup_verdict *out);

/*
 * The room before the OOM kill: how many more bytes of anonymous memory a
 * cgroup level can be charged before the kernel, having dropped every page
 * it may drop without harm, kills. One formula, used by admission (the
 * charge check, admission.h) and by ramforge watch (its "room"):
 *
 *   usage        the level's usage (l->usage: v1 memory.usage_in_bytes,
 *                v2 memory.current), bytes
 *   cache        min(l->reclaimable_file, usage) - own->cache_to_lock_bytes,
 *                floored at 0 (the clean unmapped file cache; 0 when
 *                memory.stat did not give it: unknown counts as none)
 *   mapped       the clean mapped file pages the kernel may unmap and drop,
 *                at most usage - cache:
 *                  own NULL or !own->loaded: l->mapped_file (0 when unread)
 *                  own->loaded, smaps Rss and Locked known: l->mapped_file
 *                    - locked, or, memory.stat's mapped key unread, the
 *                    caller's mapping Rss - Locked
 *                  own->loaded, either unknown: 0 (a locked page is no room)
 *   reclaimable  cache + mapped
 *   room         limit - (usage - reclaimable), floored at 0 (l->limit:
 *                v1 memory.limit_in_bytes, v2 memory.max)
 *
 * memory.high is not in it: over memory.high the kernel throttles and
 * reclaims, it does not kill. All figures bytes.
 */
struct rf_oom_room_own {
    bool loaded;                  /* the caller's model is mapped: its pages are charged */
    bool has_locked;              /* locked_bytes was read */
    uint64_t locked_bytes;        /* smaps Locked of the model mappings */
    bool has_mapping_rss;         /* mapping_rss_bytes was read */
    uint64_t mapping_rss_bytes;   /* smaps Rss of the model mappings */
    uint64_t cache_to_lock_bytes; /* before a load that will mlock: the model's cached pages
                                     (in the cache above, soon locked); else 0 */
};

/* One level's room; has_* false: the figure is unknown, never a 0 standing in for it. */
struct rf_oom_room_level {
    bool has_reclaimable;       /* the usage was read: cache, mapped and reclaimable are set */
    uint64_t cache_bytes;       /* min(reclaimable_file, usage), before cache_to_lock */
    uint64_t mapped_bytes;      /* the mapped term above */
    uint64_t reclaimable_bytes; /* cache (less cache_to_lock) + mapped */
    bool has_room;              /* has_reclaimable and the level enforces a hard limit */
    uint64_t room_bytes;        /* limit - (usage - reclaimable), floored at 0 */
};

/* l's room as above; own may be NULL (nothing known of the caller's pages). */
void rf_oom_room_of_level(const struct rf_cgroup_level *l, const struct rf_oom_room_own *own,
                          struct rf_oom_room_level *out);

/*
 * The room of a hierarchy ([0] the process's cgroup, then its ancestors):
 * the binding level is the enforced one with the least room (nearest on
 * ties). Unknown (has false, why set) when an enforced level's usage is
 * unknown (that level may have less room) or the hierarchy was cut
 * (truncated). When no level enforces a hard limit the host binds:
 * MemAvailable + SwapFree (swap unread: none counted), unknown without
 * MemAvailable. host may be NULL (not read: unknown).
 */
struct rf_oom_room {
    bool has;
    int level;           /* index of the binding level in levels[]; -1: the host */
    uint64_t room_bytes; /* bytes */
    const char *why;     /* static, when !has: why the room is unknown */
};

void rf_oom_room_find(const struct rf_cgroup_level *levels, size_t n, bool truncated,
                      const struct rf_host_memory *host, const struct rf_oom_room_own *own,
                      struct rf_oom_room *out);

#ifdef __cplusplus
}
#endif

#endif
