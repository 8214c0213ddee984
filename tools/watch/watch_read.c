/*
 * ramforge watch: one reading of one process from outside. /proc/PID/stat
 * names the process (its start time: a pid reused by another process has
 * another) and gives its CPU time; status its memory figures; smaps the
 * model mappings (files whose first bytes are the GGUF magic); the cgroup
 * tree admission reads gives each level's limit, usage and reclaimable
 * cache. A figure the kernel refuses is unknown with the reason, never 0.
 */
#include "watch.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void watch_proc_init(struct watch_proc *p, int pid)
{
    memset(p, 0, sizeof(*p));
    p->pid = pid;
    snprintf(p->pid_s, sizeof(p->pid_s), "%d", pid);
}

void watch_proc_clear_models(struct watch_proc *p)
{
    for (size_t i = 0; i < p->n_models; i++)
        watch_model_free(&p->models[i]);
    p->n_models = 0;
    p->models_left_out = 0;
}

const char *watch_model_label(const struct watch_proc *p)
{
    return p->n_models ? p->models[0].path : "";
}

/*
 * Files already classified, by device and inode, so that --all opens each
 * file once, not each of its mappings in every process at every reading:
 * an open-addressing table, emptied when full.
 */
#define CLASSIFIED_SLOTS 4096 /* a power of two; 96 KiB */
static struct classified {
    bool used, gguf;
    uint32_t dev_major, dev_minor;
    uint64_t inode;
} g_classified[CLASSIFIED_SLOTS];
static size_t g_n_classified;

static struct classified *classified_slot(const struct rfsys_mapping *m)
{
    size_t h = (size_t)((m->inode * 0x9E3779B97F4A7C15ull) ^ m->dev_minor ^
                        ((uint64_t)m->dev_major << 20)) &
               (CLASSIFIED_SLOTS - 1);
    for (;; h = (h + 1) & (CLASSIFIED_SLOTS - 1)) {
        struct classified *c = &g_classified[h];
        if (!c->used ||
            (c->inode == m->inode && c->dev_major == m->dev_major && c->dev_minor == m->dev_minor))
            return c;
    }
}

/* The map_files link of mapping m, or its path: what watch_is_gguf opens. */
static bool mapping_is_gguf(const char *pid, const struct rfsys_mapping *m)
{
    struct classified *c = classified_slot(m);
    if (c->used)
        return c->gguf;
    if (g_n_classified >= CLASSIFIED_SLOTS / 2) {
        memset(g_classified, 0, sizeof(g_classified));
        g_n_classified = 0;
        c = classified_slot(m);
    }
    char link[96];
    snprintf(link, sizeof(link), "/proc/%s/map_files/%" PRIx64 "-%" PRIx64, pid, m->start_addr,
             m->end_addr);
    bool gguf = watch_is_gguf(link) || (m->path && m->path[0] == '/' && watch_is_gguf(m->path));
    /* a file that could not be opened is asked again next time (another process may allow it) */
    if (gguf || access(link, F_OK) == 0) {
        *c = (struct classified){true, gguf, m->dev_major, m->dev_minor, m->inode};
        g_n_classified++;
    }
    return gguf;
}

/* Whether mapping i is the first of its file (dev, inode) in maps. */
static bool first_of_file(const struct rfsys_maps *maps, size_t i)
{
    for (size_t j = 0; j < i; j++)
        if (maps->v[j].inode == maps->v[i].inode && maps->v[j].dev_major == maps->v[i].dev_major &&
            maps->v[j].dev_minor == maps->v[i].dev_minor)
            return false;
    return true;
}

static void read_models(struct watch_proc *p, double now_s)
{
    struct rfsys_maps maps;
    bool fresh = !p->has_smaps_at || now_s - p->smaps_at_s >= WATCH_SMAPS_EVERY_S;

    rfsys_maps_init(&maps);
    p->maps_rc =
        fresh ? rfsys_read_smaps(NULL, p->pid_s, &maps) : rfsys_read_maps(NULL, p->pid_s, &maps);
    if (fresh && p->maps_rc == 0) {
        p->has_smaps_at = true;
        p->smaps_at_s = now_s;
        p->n_smaps_last = 0;
    }
    for (size_t i = 0; p->maps_rc == 0 && i < maps.n; i++) {
        const struct rfsys_mapping *m = &maps.v[i];
        if (!m->inode || !m->path || !first_of_file(&maps, i) || !mapping_is_gguf(p->pid_s, m))
            continue;
        if (p->n_models == WATCH_MAX_MODELS) {
            p->models_left_out++;
            continue;
        }
        watch_model_read(&p->models[p->n_models++], p, &maps, i, fresh, now_s);
    }
    rfsys_maps_free(&maps);
}

static void read_comm(struct watch_proc *p)
{
    char *text = NULL, rel[64];
    snprintf(rel, sizeof(rel), "/proc/%s/comm", p->pid_s);
    if (rfsys_slurp(NULL, rel, 256, &text, NULL) == 0) {
        text[strcspn(text, "\n")] = '\0';
        snprintf(p->comm, sizeof(p->comm), "%s", text);
    }
    free(text);
}

void watch_proc_read(struct watch_proc *p, double now_s)
{
    watch_proc_clear_models(p);
    if (p->state != WATCH_RUNNING)
        return;
    p->stat_rc = rfsys_read_proc_stat(NULL, p->pid_s, &p->stat);
    if (p->stat_rc == -ENOENT || p->stat_rc == -ESRCH ||
        (p->stat_rc == 0 && p->stat.state == 'Z') || (p->stat_rc == 0 && p->stat.state == 'X')) {
        p->state = WATCH_EXITED;
        return;
    }
    if (p->stat_rc == 0 && p->started && p->stat.start_ticks != p->start_ticks) {
        p->state = WATCH_PID_REUSED;
        return;
    }
    if (!p->comm[0])
        read_comm(p);
    if (p->stat_rc < 0) {
        p->cpu_known = false; /* a busy process would look idle: unknown, never idle */
    } else {
        if (!p->started) { /* the identity: the first stat read */
            p->started = true;
            p->start_ticks = p->stat.start_ticks;
        }
        /* the idle clock starts again after an unreadable stat: it may have run meanwhile */
        if (!p->cpu_known || p->stat.cpu_ticks != p->last_cpu_ticks) {
            p->last_cpu_ticks = p->stat.cpu_ticks;
            p->cpu_changed_s = now_s;
        }
        p->cpu_known = true;
    }
    p->status_rc = rfsys_read_status(NULL, p->pid_s, &p->status);
    p->cg_rc = rfsys_read_cgroup_tree(NULL, p->pid_s, &p->cg);
    read_models(p, now_s);
    /* Anonymous memory over the watch: RssAnon + VmSwap (what the process cannot drop). */
    if (p->status_rc == 0 && p->status.has_rss_anon) {
        uint64_t anon =
            p->status.rss_anon_bytes + (p->status.has_vm_swap ? p->status.vm_swap_bytes : 0);
        if (!p->has_anon0) {
            p->has_anon0 = true;
            p->t0_s = now_s;
            p->anon0_bytes = anon;
        } else if (now_s > p->t0_s) {
            p->has_growth = true;
            p->growth_bytes_per_min =
                ((double)anon - (double)p->anon0_bytes) * 60.0 / (now_s - p->t0_s);
        }
    }
}

bool watch_idle_seconds(const struct watch_proc *p, double now_s, double *idle_s)
{
    *idle_s = 0;
    if (p->state != WATCH_RUNNING || !p->cpu_known)
        return false;
    *idle_s = now_s > p->cpu_changed_s ? now_s - p->cpu_changed_s : 0;
    return true;
}

void watch_room_own(const struct watch_proc *p, struct rf_oom_room_own *own)
{
    memset(own, 0, sizeof(*own));
    own->loaded = true; /* watched from outside: its models are mapped, their pages charged */
    own->has_locked = own->has_mapping_rss = true;
    for (size_t i = 0; i < p->n_models; i++) {
        if (!p->models[i].has_sum) {
            own->has_locked = own->has_mapping_rss = false;
            break;
        }
        own->locked_bytes += p->models[i].sum.locked_bytes;
        own->mapping_rss_bytes += p->models[i].sum.rss_bytes;
    }
}

bool watch_binding(const struct watch_proc *p, struct rf_oom_room *room)
{
    struct rf_oom_room_own own;

    if (p->cg_rc < 0) {
        memset(room, 0, sizeof(*room));
        room->level = -1;
        room->why = rf_strerror(p->cg_rc);
        return false;
    }
    watch_room_own(p, &own);
    rf_oom_room_find(p->cg.levels, p->cg.n, p->cg.truncated, &p->cg.host, &own, room);
    return room->has;
}

/* Counts one process --all could not read, under its reason. */
static void count_unreadable(struct watch_unreadable *u, int err)
{
    size_t i = 0;
    u->n++;
    while (i < u->n_reasons && u->by[i].err != err)
        i++;
    if (i == WATCH_MAX_REASONS)
        return; /* counted in n, not by reason */
    if (i == u->n_reasons)
        u->by[u->n_reasons++].err = err;
    u->by[i].n++;
}

/* Whether the process pid_s maps a GGUF file; its maps refused (not gone) counted in u. */
static bool maps_gguf(const char *pid_s, struct watch_unreadable *u)
{
    struct rfsys_maps maps;
    bool gguf = false;
    rfsys_maps_init(&maps);
    int mrc = rfsys_read_maps(NULL, pid_s, &maps);
    if (mrc == 0)
        for (size_t i = 0; !gguf && i < maps.n; i++)
            gguf = maps.v[i].inode && maps.v[i].path && first_of_file(&maps, i) &&
                   mapping_is_gguf(pid_s, &maps.v[i]);
    else if (mrc != -ENOENT && mrc != -ESRCH)
        count_unreadable(u, mrc); /* refused, not gone */
    rfsys_maps_free(&maps);
    return gguf;
}

/* Appends pid to *v (n entries). -ENOMEM. */
static int push_pid(int **v, size_t *n, int pid)
{
    int *nv = realloc(*v, (*n + 1) * sizeof(**v));
    if (!nv)
        return -ENOMEM;
    *v = nv;
    nv[(*n)++] = pid;
    return 0;
}

int watch_find_all(int **out, size_t *n, struct watch_unreadable *u)
{
    DIR *d = opendir("/proc");
    struct dirent *e;
    int *v = NULL;
    int rc = 0;

    *out = NULL;
    *n = 0;
    memset(u, 0, sizeof(*u));
    if (!d)
        return -errno;
    while (rc == 0 && (e = readdir(d)) != NULL)
        if (isdigit((unsigned char)e->d_name[0]) && maps_gguf(e->d_name, u))
            rc = push_pid(&v, n, atoi(e->d_name));
    closedir(d);
    if (rc < 0) {
        free(v);
        *n = 0;
        return rc;
    }
    *out = v;
    return 0;
}

/* The processes of dir's cgroup.procs and of its descendants' that map a GGUF file. */
static int find_in_cgroup(const char *dir, int depth, int **v, size_t *n,
                          struct watch_unreadable *u)
{
    char path[4096], *text = NULL;
    struct dirent *e;
    int rc;

    if (depth > 32)
        return -ELOOP;
    snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
    rc = rfsys_slurp(NULL, path, RFSYS_SLURP_MAX_BYTES, &text, NULL);
    if (rc < 0)
        return rc;
    for (char *s = text; rc == 0 && *s;) {
        char *end;
        long pid = strtol(s, &end, 10);
        if (end == s)
            break;
        char pid_s[16];
        snprintf(pid_s, sizeof(pid_s), "%ld", pid);
        if (pid > 0 && maps_gguf(pid_s, u))
            rc = push_pid(v, n, (int)pid);
        s = end + strspn(end, "\n");
    }
    free(text);
    DIR *d = rc == 0 ? opendir(dir) : NULL;
    while (d && rc == 0 && (e = readdir(d)) != NULL) {
        if (e->d_type != DT_DIR || e->d_name[0] == '.')
            continue;
        if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) >= sizeof(path))
            continue;
        rc = find_in_cgroup(path, depth + 1, v, n, u);
        if (rc == -ENOENT)
            rc = 0; /* removed meanwhile */
    }
    if (d)
        closedir(d);
    return rc;
}

int watch_find_cgroup(const char *dir, int **out, size_t *n, struct watch_unreadable *u)
{
    int *v = NULL;

    *out = NULL;
    *n = 0;
    memset(u, 0, sizeof(*u));
    int rc = find_in_cgroup(dir, 0, &v, n, u);
    if (rc < 0) {
        free(v);
        *n = 0;
        return rc;
    }
    *out = v;
    return 0;
}
