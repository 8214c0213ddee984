/*
 * ramforge watch's terminal view, top-like: a header, then one line per
 * process (model mapping Rss and the model file's page cache, the
 * anonymous figure and its growth, swap, the room before the binding
 * level's OOM kill); when one process is watched, one row per layer with
 * bars of its mapped and page-cache pages. "?" is a figure that could not
 * be read (the JSON says why); with --all, a line counts the processes
 * that could not be read, by reason.
 */
#include "watch.h"

#include <inttypes.h>
#include <string.h>

#include "common/cli.h"

#define BAR_WIDTH 20         /* characters of a layer's bar */
#define DELETED " (deleted)" /* after a model path unlinked since it was mapped, as /proc says */

static const char *opt_bytes(bool has, uint64_t v, bool raw, char *buf, size_t len)
{
    return has ? cli_format_bytes(v, raw, buf, len) : "?";
}

static void bar(FILE *f, const struct watch_pages *w, uint64_t whole)
{
    size_t n = w->has && whole ? (size_t)(w->resident_bytes * BAR_WIDTH / whole) : 0;
    fputc('[', f);
    for (size_t i = 0; i < BAR_WIDTH; i++)
        fputc(!w->has ? '?' : i < n ? '#' : '.', f);
    fputc(']', f);
}

static void layers(FILE *f, const struct watch_model *m, bool raw)
{
    char a[32], b[32], c[32];
    fprintf(f, "\n  %s%s\n  %-6s %10s  %-22s %10s  %-22s %10s\n", m->path,
            m->deleted ? DELETED : "", "layer", "mapped", "", "page cache", "", "logical");
    for (size_t i = 0; i < m->n_layers; i++) {
        const struct watch_layer *l = &m->layers[i];
        char name[16];
        uint64_t whole =
            l->mapped.resident_bytes + l->mapped.nonresident_bytes + l->mapped.unknown_bytes;
        if (l->layer < 0)
            snprintf(name, sizeof(name), "other");
        else
            snprintf(name, sizeof(name), "%d", l->layer);
        fprintf(f, "  %-6s %10s  ", name,
                opt_bytes(l->mapped.has, l->mapped.resident_bytes, raw, a, sizeof(a)));
        bar(f, &l->mapped, whole);
        fprintf(f, " %10s  ", opt_bytes(l->cache.has, l->cache.resident_bytes, raw, b, sizeof(b)));
        bar(f, &l->cache, whole);
        fprintf(f, " %10s\n", cli_format_bytes(l->logical_bytes, raw, c, sizeof(c)));
    }
}

void watch_view(FILE *f, const struct watch_reading *r, struct watch_proc *const *procs, size_t n,
                bool raw, bool clear)
{
    char a[32], b[32], c[32], d[32], e[32], g[48];
    if (clear)
        fputs("\033[H\033[J", f);
    fprintf(f, "ramforge watch: reading %" PRIu64 ", %zu process%s\n", r->index, n,
            n == 1 ? "" : "es");
    if (r->all && r->unreadable.n) {
        fprintf(f, "not read: %zu process%s (", r->unreadable.n, r->unreadable.n == 1 ? "" : "es");
        for (size_t i = 0; i < r->unreadable.n_reasons; i++)
            fprintf(f, "%s%s: %zu", i ? ", " : "", rf_strerror(r->unreadable.by[i].err),
                    r->unreadable.by[i].n);
        fprintf(f, "): %s\n", WATCH_UNREADABLE_NOTE);
    }
    fprintf(f, "%7s %-15s %10s %10s %10s %12s %9s %12s  %s\n", "PID", "COMMAND", "MODEL RSS",
            "PAGECACHE", "ANON*", "ANON/MIN", "SWAP", "BEFORE OOM", "MODEL");
    for (size_t i = 0; i < n; i++) {
        const struct watch_proc *p = procs[i];
        if (p->state != WATCH_RUNNING) {
            fprintf(f, "%7d %-15s %s\n", p->pid, p->comm,
                    p->state == WATCH_EXITED ? "exited" : "pid reused by another process");
            continue;
        }
        const struct rfsys_status *s = &p->status;
        bool st = p->status_rc == 0;
        const struct watch_model *m = p->n_models ? &p->models[0] : NULL;
        struct rf_oom_room room;
        bool has_room = watch_binding(p, &room);
        char maps_why[64];
        snprintf(maps_why, sizeof(maps_why), "maps: %s", rf_strerror(p->maps_rc));
        if (st && p->has_growth)
            cli_format_signed_bytes((int64_t)p->growth_bytes_per_min, g, sizeof(g));
        else
            snprintf(g, sizeof(g), "?");
        fprintf(f, "%7d %-15.15s %10s %10s %10s %12s %9s %12s  %s%s\n", p->pid, p->comm,
                opt_bytes(m && m->has_sum, m ? m->sum.rss_bytes : 0, raw, a, sizeof(a)),
                opt_bytes(m && m->file_cache.has, m ? m->file_cache.resident_bytes : 0, raw, b,
                          sizeof(b)),
                opt_bytes(st && s->has_rss_anon, s->rss_anon_bytes, raw, c, sizeof(c)), g,
                opt_bytes(st && s->has_vm_swap, s->vm_swap_bytes, raw, d, sizeof(d)),
                opt_bytes(has_room, room.room_bytes, raw, e, sizeof(e)),
                m                ? m->path
                : p->maps_rc < 0 ? maps_why
                                 : "(no GGUF mapping)",
                m && m->deleted ? DELETED : "");
        if (p->released)
            fprintf(f, "%7s release: requested %" PRIu64 ", accepted %" PRIu64 " bytes%s\n", "",
                    p->rel_requested_bytes, p->rel_accepted_bytes,
                    p->rel_met_target ? ", target met" : "");
    }
    fprintf(f, "* ANON: %s\n", WATCH_ANON_LABEL);
    if (n == 1 && procs[0]->state == WATCH_RUNNING)
        for (size_t i = 0; i < procs[0]->n_models; i++)
            if (procs[0]->models[i].has_table)
                layers(f, &procs[0]->models[i], raw);
}
