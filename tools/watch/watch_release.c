/*
 * ramforge watch --release-idle: when a watched process's CPU time has not
 * moved for the idle seconds and its model mapping's Rss is above
 * --memory-target, advise file-backed pages of its own model mapping out
 * with process_madvise(2) (MADV_PAGEOUT, or MADV_COLD) until the excess is
 * covered, then measure. A process whose /proc/PID/stat could not be
 * read at the last reading is not known idle, so it is never advised.
 * Only present pages of the model file's r--s mappings, validated against
 * /proc/PID/maps just before the call; never anonymous memory. The advice
 * is non-destructive (the process reads the same bytes back from the
 * file), so its tokens cannot change, only the next request's speed. The
 * guarantee is weaker than run's and serve's: there is no gate, the
 * process may begin a decode meanwhile.
 */
#include "watch.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RELEASE_GUARANTEE                                                                          \
    "no gate: the process may begin a decode meanwhile; the ranges were the model's r--s file "    \
    "mapping when validated, the kernel does not re-check them; the advice never changes "         \
    "contents, only the next access's speed"

/* Whether [addr, addr + len) lies inside one r--s VMA of the model's file in a fresh maps. */
static bool still_model(const struct rfsys_maps *maps, const struct watch_model *m, uint64_t addr,
                        uint64_t len)
{
    for (size_t i = 0; i < maps->n; i++) {
        const struct rfsys_mapping *v = &maps->v[i];
        if (v->inode == m->inode && v->dev_major == m->dev_major && v->dev_minor == m->dev_minor &&
            !strcmp(v->perms, "r--s") && v->start_addr <= addr && addr + len <= v->end_addr)
            return true;
    }
    return false;
}

/*
 * The present runs of the model's r--s VMAs, from the end of the file
 * backwards, until want_bytes are covered, leaving out the file pages skip
 * marks (may be NULL). *out owned; n ranges.
 */
static int pick_ranges(const struct watch_model *m, uint64_t want_bytes, const uint8_t *skip,
                       struct rfsys_range **out, size_t *n, uint64_t *picked)
{
    uint64_t page = m->page_bytes, file_pages = (m->file_bytes + page - 1) / page;
    struct rfsys_range *v = NULL;
    size_t cap = 0;

    *out = NULL;
    *n = 0;
    *picked = 0;
    for (size_t k = m->n_vmas; k-- > 0 && *picked < want_bytes;) {
        const struct watch_vma *vma = &m->vmas[k];
        if (strcmp(vma->perms, "r--s"))
            continue;
        uint64_t first = vma->offset_bytes / page;
        uint64_t end = first + (vma->end_addr - vma->start_addr) / page;
        end = end < file_pages ? end : file_pages;
        for (uint64_t pg = end; pg-- > first && *picked < want_bytes;) {
            if (m->mapped_states[pg] != RF_PAGE_RESIDENT || (skip && skip[pg]))
                continue;
            uint64_t addr = vma->start_addr + (pg - first) * page;
            if (*n && v[*n - 1].addr == addr + page) {
                v[*n - 1].addr = addr;
                v[*n - 1].len_bytes += page;
            } else {
                if (*n == cap) {
                    cap = cap ? cap * 2 : 64;
                    struct rfsys_range *nv = realloc(v, cap * sizeof(*v));
                    if (!nv) {
                        free(v);
                        return -ENOMEM;
                    }
                    v = nv;
                }
                v[(*n)++] = (struct rfsys_range){addr, page};
            }
            *picked += page;
        }
    }
    *out = v;
    return 0;
}

int watch_advise(const struct watch_proc *p, const struct watch_model *m, uint64_t want_bytes,
                 const uint8_t *skip, enum rfsys_remote_advice mode, uint64_t *requested,
                 uint64_t *accepted)
{
    struct rfsys_range *ranges = NULL;
    struct rfsys_maps maps;
    size_t n = 0;
    uint64_t picked;
    int pidfd = -1;

    *requested = *accepted = 0;
    rfsys_maps_init(&maps);
    int rc = pick_ranges(m, want_bytes, skip, &ranges, &n, &picked);
    if (rc == 0)
        rc = rfsys_read_maps(NULL, p->pid_s, &maps);
    for (size_t i = 0; rc == 0 && i < n; i++)
        if (!still_model(&maps, m, ranges[i].addr, ranges[i].len_bytes))
            rc = -ESTALE; /* the process remapped since the reading: advise nothing */
    if (rc == 0)
        rc = rfsys_pidfd_open(p->pid, &pidfd);
    if (rc == 0) {
        *requested = picked;
        rc = rfsys_process_madvise(pidfd, ranges, n, mode, accepted);
    }
    if (pidfd >= 0)
        close(pidfd);
    rfsys_maps_free(&maps);
    free(ranges);
    return rc;
}

void watch_release_maybe(struct watch_proc *p, const struct watch_options *o, double now_s)
{
    double idle_s;

    p->released = false;
    /* idle unknown (stat unreadable) is never idle: no advice */
    if (!o->release || !p->n_models || !watch_idle_seconds(p, now_s, &idle_s) ||
        idle_s < o->release_idle_s)
        return;
    const struct watch_model *m = &p->models[0];
    if (!m->has_sum || !m->has_table || m->mapped_reason[0] || m->sum.rss_bytes <= o->target_bytes)
        return;
    p->released = true;
    p->rel_has_observed = false;
    p->rel_before_bytes = m->sum.rss_bytes;
    p->rel_met_target = false;
    snprintf(p->release_json_note, sizeof(p->release_json_note), "%s", RELEASE_GUARANTEE);
    p->rel_error = watch_advise(p, m, m->sum.rss_bytes - o->target_bytes, NULL, o->release_mode,
                                &p->rel_requested_bytes, &p->rel_accepted_bytes);
    if (p->rel_accepted_bytes) {
        struct rfsys_maps after;
        struct rfsys_mapping_sum sum;
        rfsys_maps_init(&after);
        if (rfsys_read_smaps(NULL, p->pid_s, &after) == 0 &&
            rfsys_maps_sum_file(&after, m->dev_major, m->dev_minor, m->inode, NULL, &sum) == 0 &&
            sum.complete) {
            p->rel_has_observed = true;
            p->rel_after_bytes = sum.rss_bytes;
            p->rel_observed_bytes = (int64_t)p->rel_before_bytes - (int64_t)sum.rss_bytes;
            p->rel_met_target = sum.rss_bytes <= o->target_bytes;
        }
        rfsys_maps_free(&after);
    }
}
