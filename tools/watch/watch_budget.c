/*
 * ramforge watch --budget SIZE (docs/BUDGET.md): after each reading, the
 * model pages the watched processes hold (each file once: the union of
 * their pagemap present bits) against SIZE; over it, the plan of
 * ramforge/core/budget.h asks the least recently active process first for
 * its own cold file pages (none another watched process maps). A process
 * under ramforge exec whose control channel answers is asked through it:
 * the release runs at its next idle moment under its own gate; any other
 * gets today's --release-idle advice (process_madvise pageout), labelled
 * advisory. One line on stderr per release asked, per outcome, and per
 * thing it could not do (said once until it changes); never anonymous
 * memory, never a process or model --keep names.
 */
#include "watch_budget.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/cli.h"
#include "ramforge/core/policy.h"
#include "ramforge/sys/exec_ctl_client.h"

#define BUDGET_ASK_MS 1000 /* an exec'd process's channel has this long to answer */
/* A bare process whose CPU time moved within this is busy, not asked (exec's quiet time too). */
#define BUDGET_MIN_IDLE_S 1.0

/* A model file of this reading: its pages present in how many watched processes. */
struct budget_file {
    uint32_t dev_major, dev_minor;
    uint64_t inode;
    uint64_t n_pages;
    uint8_t *count;       /* per file page, saturating at 255; NULL: no pagemap was read */
    uint8_t *shared;      /* per file page: present in two or more processes */
    uint64_t extra_bytes; /* Rss of mappings whose pages could not be read (no union) */
};

/* The entries of this reading beside the plan's: whose they are. */
struct budget_ref {
    struct watch_proc *p;
    const struct watch_model *wm;
    struct watch_budget_model *bm;
};

static const char *base_name(const char *path)
{
    const char *b = strrchr(path, '/');
    return b ? b + 1 : path;
}

static const char *sz(uint64_t bytes, char *buf, size_t len)
{
    return rf_size_format(bytes, buf, len);
}

static struct watch_budget_model *model_state(struct watch_budget *b, const struct watch_model *wm)
{
    for (size_t i = 0; i < b->n; i++)
        if (b->m[i].inode == wm->inode && b->m[i].dev_major == wm->dev_major &&
            b->m[i].dev_minor == wm->dev_minor)
            return &b->m[i];
    if (b->n == WATCH_MAX_MODELS)
        return NULL;
    struct watch_budget_model *bm = &b->m[b->n++];
    memset(bm, 0, sizeof(*bm));
    bm->dev_major = wm->dev_major;
    bm->dev_minor = wm->dev_minor;
    bm->inode = wm->inode;
    snprintf(bm->path, sizeof(bm->path), "%s", wm->path);
    return bm;
}

/* exec's status of p (b->gated, b->ctl), the reason said once when it is not the absence. */
static void ask_status(struct watch_proc *p, struct watch_budget *b)
{
    char path[128], *answer = NULL;
    int rc = rfsys_exec_ctl_find(NULL, p->pid, path, sizeof(path));
    if (rc == 0)
        rc = rfsys_exec_ctl_ask(path, p->pid, "status\n", BUDGET_ASK_MS, &answer);
    b->n_ctl = 0;
    for (char *line = answer, *next; rc == 0 && line && *line; line = next) {
        next = line + strcspn(line, "\n");
        if (*next)
            *next++ = '\0';
        if (!strcmp(line, "end")) {
            line = NULL;
            break;
        }
        if (b->n_ctl < WATCH_MAX_MODELS && rf_exec_ctl_parse_model(line, &b->ctl[b->n_ctl]) == 0)
            b->n_ctl++;
        else if (strncmp(line, "model ", 6))
            rc = -EBADMSG;
        if (!*next)
            rc = -EBADMSG; /* no "end": an answer cut short */
    }
    if (rc == 0 && !answer)
        rc = -EBADMSG;
    free(answer);
    b->gated = rc == 0;
    b->ctl_error = rc;
    if (rc < 0 && rc != -ENOENT && rc != b->ctl_error_said)
        cli_error("budget: pid %d: exec's control channel does not answer: %s; its models are "
                  "released by advice (process_madvise, no gate) until it does",
                  p->pid, rf_strerror(rc));
    b->ctl_error_said = rc == -ENOENT ? 0 : rc;
}

static const struct rf_exec_ctl_model *ctl_of(const struct watch_budget *b,
                                              const struct watch_budget_model *bm)
{
    for (size_t i = 0; b->gated && i < b->n_ctl; i++)
        if (b->ctl[i].inode == bm->inode && b->ctl[i].dev_major == bm->dev_major &&
            b->ctl[i].dev_minor == bm->dev_minor)
            return &b->ctl[i];
    return NULL;
}

static bool kept(const struct watch_options *o, const struct watch_proc *p, const char *path)
{
    for (size_t i = 0; i < o->n_keep; i++) {
        const char *k = o->keep[i];
        if (strspn(k, "0123456789") == strlen(k) ? atoi(k) == p->pid
                                                 : !strcmp(k, path) || !strcmp(k, base_name(path)))
            return true;
    }
    return false;
}

static struct budget_file *file_of(struct budget_file *files, size_t *n_files,
                                   const struct watch_model *wm)
{
    for (size_t i = 0; i < *n_files; i++)
        if (files[i].inode == wm->inode && files[i].dev_major == wm->dev_major &&
            files[i].dev_minor == wm->dev_minor)
            return &files[i];
    struct budget_file *f = &files[(*n_files)++];
    memset(f, 0, sizeof(*f));
    f->dev_major = wm->dev_major;
    f->dev_minor = wm->dev_minor;
    f->inode = wm->inode;
    return f;
}

/* Whether wm's per-page presence was read (pagemap). */
static bool has_pages(const struct watch_model *wm)
{
    return wm->has_table && wm->mapped_states && !wm->mapped_reason[0] && wm->page_bytes;
}

static uint64_t n_file_pages(const struct watch_model *wm)
{
    return (wm->file_bytes + wm->page_bytes - 1) / wm->page_bytes;
}

/* Counts wm's present pages into its file. -ENOMEM. */
static int count_pages(struct budget_file *f, const struct watch_model *wm)
{
    if (!has_pages(wm)) {
        f->extra_bytes += wm->has_sum ? wm->sum.rss_bytes : 0;
        return 0;
    }
    uint64_t np = n_file_pages(wm);
    if (!f->count) {
        f->count = calloc(np ? np : 1, 1);
        f->shared = calloc(np ? np : 1, 1);
        if (!f->count || !f->shared)
            return -ENOMEM;
        f->n_pages = np;
    }
    for (uint64_t pg = 0; pg < np && pg < f->n_pages; pg++)
        if (wm->mapped_states[pg] == RF_PAGE_RESIDENT && f->count[pg] < 255)
            f->count[pg]++;
    return 0;
}

/* The held and releasable bytes of wm in its file (after every process was counted). */
static void model_bytes(const struct budget_file *f, const struct watch_model *wm, uint64_t *held,
                        uint64_t *releasable)
{
    uint64_t own = 0, alone = 0;
    if (!has_pages(wm) || !f->count) {
        *held = wm->has_sum ? wm->sum.rss_bytes : 0;
        *releasable = 0; /* which pages are present is unknown: nothing is advised blind */
        return;
    }
    for (uint64_t pg = 0; pg < f->n_pages && pg < n_file_pages(wm); pg++) {
        if (wm->mapped_states[pg] != RF_PAGE_RESIDENT)
            continue;
        own++;
        alone += f->count[pg] == 1;
    }
    *held = own * wm->page_bytes;
    uint64_t locked = wm->has_sum ? wm->sum.locked_bytes : 0;
    *releasable = alone * wm->page_bytes > locked ? alone * wm->page_bytes - locked : 0;
}

/*
 * The activity of r's model: exec's submissions where the channel answers for it (and
 * the state of a request it waits on), else the process's CPU time.
 */
static void activity(const struct budget_ref *r, double now_s, struct rf_budget_entry *e)
{
    const struct watch_budget *b = r->p->budget;
    struct watch_budget_model *bm = r->bm;
    const struct rf_exec_ctl_model *c = ctl_of(b, bm);
    char a[32], ch[32], d[32];
    double idle_s;

    if (c) {
        e->activity = RF_BUDGET_ACTIVITY_EXEC;
        e->idle_s = (double)c->idle_ms / 1e3;
    } else if (watch_idle_seconds(r->p, now_s, &idle_s)) {
        e->activity = RF_BUDGET_ACTIVITY_CPU;
        e->idle_s = idle_s;
    }
    if (!bm->pending)
        return;
    if (c && c->id == bm->pending_id && c->state == RF_EXEC_CTL_WAITING) {
        e->pending = true;
        e->pending_bytes = bm->pending_bytes;
        return;
    }
    bm->pending = false;
    if (c && c->id == bm->pending_id && c->state == RF_EXEC_CTL_DONE) {
        /* this reading's pages may predate the release: measured at the next reading, and
           until then its bytes count as on their way (never asked twice for them) */
        bm->settling = true;
        e->pending = true;
        e->pending_bytes = c->asked_bytes;
    }
    if (!c || c->id != bm->pending_id) {
        cli_error("budget: pid %d (%s): its request %" PRIu64 " is gone with its control "
                  "channel (the model was freed or the channel stopped): not measured",
                  r->p->pid, base_name(bm->path), bm->pending_id);
        bm->mem.asked = false;
    } else if (c->state == RF_EXEC_CTL_DONE) {
        cli_error("budget: pid %d (%s): released at its idle moment under its gate (request "
                  "%" PRIu64 "): asked %s, the kernel accepted %s, its mapping's Rss %s by %s",
                  r->p->pid, base_name(bm->path), c->id, sz(c->asked_bytes, a, sizeof(a)),
                  sz(c->accepted_bytes, ch, sizeof(ch)), c->change_bytes <= 0 ? "fell" : "rose",
                  c->change_bytes <= 0 ? sz((uint64_t)-c->change_bytes, d, sizeof(d))
                                       : sz((uint64_t)c->change_bytes, d, sizeof(d)));
    } else {
        cli_error("budget: pid %d (%s): its request %" PRIu64 " failed at its idle moment: %s",
                  r->p->pid, base_name(bm->path), c->id, rf_strerror(c->error));
    }
}

/* Why the step's entry was chosen: its idle time, and the next one's. */
static void why(const struct rf_budget_plan *plan, const struct rf_budget_step *s,
                const struct rf_budget_entry *e, const struct budget_ref *refs, size_t n, char *out,
                size_t size)
{
    int k = snprintf(out, size, "the least recently active: idle %.1f s by %s", e[s->entry].idle_s,
                     e[s->entry].activity == RF_BUDGET_ACTIVITY_EXEC ? "exec's submissions"
                                                                     : "its CPU time");
    if (k < 0 || (size_t)k >= size)
        return;
    if (s->next < n)
        snprintf(out + k, size - (size_t)k, "; next: pid %d (%s) idle %.1f s", refs[s->next].p->pid,
                 base_name(refs[s->next].wm->path), e[s->next].idle_s);
    else if (plan->skipped[RF_BUDGET_SKIP_KEEP])
        snprintf(out + k, size - (size_t)k, "; %zu kept by --keep",
                 plan->skipped[RF_BUDGET_SKIP_KEEP]);
}

/* Asks r's model for bytes: through exec's gate where its channel answers, else by advice. */
static void act(const struct rf_budget_plan *plan, const struct rf_budget_step *s,
                const struct rf_budget_entry *e, const struct budget_ref *refs, size_t n,
                const struct budget_file *f)
{
    const struct budget_ref *r = &refs[s->entry];
    struct watch_budget_model *bm = r->bm;
    char reason[512], a[32], b[32], c[32], d[32], x[32], line[160], path[128], *answer = NULL;
    const char *name = base_name(bm->path);

    why(plan, s, e, refs, n, reason, sizeof(reason));
    rf_budget_asked(&bm->mem, e[s->entry].held_bytes, s->bytes);
    if (ctl_of(r->p->budget, bm)) {
        struct rf_exec_ctl_request q = {RF_EXEC_CTL_RELEASE, bm->dev_major, bm->dev_minor,
                                        bm->inode, s->bytes};
        unsigned long long id = 0;
        int rc = rf_exec_ctl_format_request(&q, line, sizeof(line));
        if (rc >= 0 && (rc = rfsys_exec_ctl_find(NULL, r->p->pid, path, sizeof(path))) == 0)
            rc = rfsys_exec_ctl_ask(path, r->p->pid, line, BUDGET_ASK_MS, &answer);
        if (rc == 0 &&
            (sscanf(answer, "queued %llu", &id) == 1 || sscanf(answer, "busy %llu", &id) == 1)) {
            bm->pending = true;
            bm->pending_id = id;
            bm->pending_bytes = s->bytes;
            bm->gate_requests++;
            cli_error("budget %s, held %s: asked pid %d (%s) for %s of its %s through exec's "
                      "gate (request %llu, taken at its next idle moment, never during a "
                      "decode): %s",
                      sz(plan->budget_bytes, a, sizeof(a)), sz(plan->held_bytes, b, sizeof(b)),
                      r->p->pid, name, sz(s->bytes, c, sizeof(c)),
                      sz(e[s->entry].held_bytes, d, sizeof(d)), id, reason);
        } else {
            if (rc == 0)
                answer[strcspn(answer, "\n")] = '\0';
            cli_error("budget: pid %d (%s): exec's control channel refused the request: %s",
                      r->p->pid, name, rc < 0 ? rf_strerror(rc) : answer);
        }
        free(answer);
        return;
    }
    uint64_t requested = 0, accepted = 0;
    int rc =
        watch_advise(r->p, r->wm, s->bytes, f->shared, RFSYS_ADVISE_PAGEOUT, &requested, &accepted);
    bm->advice_requests++;
    if (rc == 0 || accepted) {
        cli_error("budget %s, held %s: advised %s of pid %d (%s) out of its %s (advisory: "
                  "process_madvise pageout, no gate: %s; the kernel accepted %s)%s: %s",
                  sz(plan->budget_bytes, a, sizeof(a)), sz(plan->held_bytes, b, sizeof(b)),
                  sz(requested, c, sizeof(c)), r->p->pid, name,
                  sz(e[s->entry].held_bytes, d, sizeof(d)),
                  r->p->budget->ctl_error == -ENOENT ? "not under exec" : "its channel is silent",
                  sz(accepted, x, sizeof(x)),
                  r->wm->replaced || r->wm->deleted
                      ? " (its file was replaced on disk: the pages of the file it maps)"
                      : "",
                  reason);
        bm->last_error = 0;
        return;
    }
    if (rc != bm->last_error)
        cli_error("budget: cannot advise pid %d (%s) out: %s%s; not asked again until it holds "
                  "more",
                  r->p->pid, name, rf_strerror(rc),
                  rc == -EPERM    ? " (process_madvise needs CAP_SYS_NICE and ptrace access to the "
                                    "process: run the watch as root or as its user with that "
                                    "capability)"
                  : rc == -ESRCH  ? " (it exited during its release)"
                  : rc == -ESTALE ? " (it remapped its model since the reading)"
                                  : "");
    bm->last_error = rc;
}

/* The stuck line: a release that moved less than half of what it asked. */
static void say_stuck(const struct budget_ref *r, uint64_t held)
{
    char a[32], b[32], c[32];
    const struct rf_budget_memory *m = &r->bm->mem;
    uint64_t drop = m->before_bytes > held ? m->before_bytes - held : 0;
    cli_error("budget: pid %d (%s): the release of %s moved %s (pages another process maps, "
              "which MADV_PAGEOUT skips, locked pages, or a refusal said above): not asked "
              "again until it holds more than %s",
              r->p->pid, base_name(r->bm->path), sz(m->asked_bytes, a, sizeof(a)),
              sz(drop, b, sizeof(b)), sz(held, c, sizeof(c)));
}

/* The excess nothing may give, said once per change of its reasons. */
static void say_short(const struct rf_budget_plan *plan)
{
    static size_t said[RF_BUDGET_SKIP_COUNT];
    static bool was_short;
    char a[32], b[512];
    int k = 0;
    if (!plan->short_bytes) {
        was_short = false;
        return;
    }
    if (was_short && !memcmp(said, plan->skipped, sizeof(said)))
        return;
    was_short = true;
    memcpy(said, plan->skipped, sizeof(said));
    b[0] = '\0';
    for (int s = 0; s < RF_BUDGET_SKIP_COUNT && k >= 0 && (size_t)k < sizeof(b); s++)
        if (plan->skipped[s])
            k += snprintf(b + k, sizeof(b) - (size_t)k, "%s%zu %s", k ? ", " : "", plan->skipped[s],
                          rf_budget_skip_name((enum rf_budget_skip)s));
    cli_error("budget: %s over with nothing more to ask (%s): the models stay above the budget",
              sz(plan->short_bytes, a, sizeof(a)), b[0] ? b : "no model");
}

void watch_budget_run(struct watch_proc *const *procs, size_t n, const struct watch_options *o,
                      double now_s, struct watch_budget_total *total)
{
    size_t cap = n * WATCH_MAX_MODELS + 1, n_e = 0, n_files = 0;
    struct budget_file *files = calloc(cap, sizeof(*files));
    struct budget_ref *refs = calloc(cap, sizeof(*refs));
    struct rf_budget_entry *e = calloc(cap, sizeof(*e));
    uint64_t *held = calloc(cap, sizeof(*held));
    struct rf_budget_plan plan;
    int rc = -ENOMEM;

    memset(total, 0, sizeof(*total));
    memset(&plan, 0, sizeof(plan));
    if (!files || !refs || !e || !held)
        goto out;
    for (size_t i = 0; i < n; i++) {
        struct watch_proc *p = procs[i];
        if (p->state != WATCH_RUNNING)
            continue;
        if (!p->budget && !(p->budget = calloc(1, sizeof(*p->budget))))
            goto out;
        ask_status(p, p->budget);
        for (size_t k = 0; k < p->budget->n; k++)
            p->budget->m[k].seen = false;
        for (size_t k = 0; k < p->n_models; k++) {
            struct watch_budget_model *bm = model_state(p->budget, &p->models[k]);
            if (!bm)
                continue;
            bm->seen = true;
            refs[n_e] = (struct budget_ref){p, &p->models[k], bm};
            e[n_e].file = (size_t)(file_of(files, &n_files, &p->models[k]) - files);
            if (count_pages(&files[e[n_e].file], &p->models[k]) < 0)
                goto out;
            n_e++;
        }
    }
    for (size_t i = 0; i < n_e; i++) {
        struct budget_file *f = &files[e[i].file];
        struct watch_budget_model *bm = refs[i].bm;
        model_bytes(f, refs[i].wm, &e[i].held_bytes, &e[i].releasable_bytes);
        bm->held_bytes = e[i].held_bytes;
        bm->releasable_bytes = e[i].releasable_bytes;
        e[i].keep = kept(o, refs[i].p, refs[i].wm->path);
        activity(&refs[i], now_s, &e[i]);
        if (!bm->pending && !bm->settling && rf_budget_observe(&bm->mem, e[i].held_bytes))
            say_stuck(&refs[i], e[i].held_bytes);
        bm->settling = false;
        e[i].memory = &bm->mem;
    }
    for (size_t f = 0; f < n_files; f++) {
        held[f] = files[f].extra_bytes;
        for (uint64_t pg = 0; files[f].count && pg < files[f].n_pages; pg++) {
            held[f] += files[f].count[pg] ? rfsys_page_bytes() : 0;
            files[f].shared[pg] = files[f].count[pg] > 1;
        }
    }
    rc = rf_budget_plan(e, n_e, held, n_files, o->budget_bytes, BUDGET_MIN_IDLE_S, &plan);
    if (rc < 0)
        goto out;
    *total = (struct watch_budget_total){true, plan.budget_bytes, plan.held_bytes,
                                         plan.headroom_bytes, plan.pending_bytes};
    for (size_t s = 0; s < plan.n_steps; s++)
        act(&plan, &plan.steps[s], e, refs, n_e, &files[e[plan.steps[s].entry].file]);
    say_short(&plan);
out:
    if (rc < 0)
        cli_error("budget: no plan at this reading: %s", rf_strerror(rc));
    rf_budget_plan_free(&plan);
    for (size_t f = 0; files && f < n_files; f++) {
        free(files[f].count);
        free(files[f].shared);
    }
    free(files);
    free(refs);
    free(e);
    free(held);
}

void watch_budget_gone(struct watch_proc *p)
{
    struct watch_budget *b = p->budget;
    for (size_t i = 0; b && i < b->n; i++) {
        const struct watch_budget_model *bm = &b->m[i];
        if (!bm->pending && !bm->mem.asked)
            continue;
        char a[32];
        cli_error("budget: pid %d (%s) %s before its release of %s could be measured; its "
                  "models' pages left the budget with it",
                  p->pid, base_name(bm->path),
                  p->state == WATCH_PID_REUSED ? "gave its pid to another process" : "exited",
                  sz(bm->mem.asked_bytes, a, sizeof(a)));
    }
    free(b);
    p->budget = NULL;
}
