/*
 * The session's persisted access profile and prediction accounting
 * (--profile PATH; profile.h, docs/PREDICTION.md).
 *
 * open reads and checks the file once (size cap before parsing, the
 * model's identity), and the profile then orders reuse-aware's release
 * (cold first) at every boundary and staging (hot first) of every
 * operation. A complete dispatch trace updates it; save writes it back
 * atomically. A file that could not be read, could not be parsed or
 * belongs to another model is never replaced.
 *
 * Per operation the prediction is recorded from the staging plan, the
 * native prefetch's acceptance, the mapping RSS change, and per page from
 * a mincore pass over every file page before staging and the tensors the
 * dispatch trace named. The save (read-merge-write under a lock) is
 * profile_save.c's.
 *
 * Also here: the dispatch trace of an operation (rf_session_dispatch_trace),
 * attributed to the inventory; a complete one is the access profile.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ramforge/core/report_json.h"
#include "ramforge/error.h"
#include "ramforge/forge/forge_observer.h"
#include "ramforge/forge/forge_routing.h"
#include "session_internal.h"

static void free_before(struct session_persist *ps)
{
    for (size_t m = 0; m < ps->n_maps; m++)
        free(ps->before[m]);
    free(ps->before);
    free(ps->n_before);
    ps->before = NULL;
    ps->n_before = NULL;
    ps->n_maps = 0;
}

void ses_profile_free(struct rf_session *s)
{
    struct session_persist *ps = &s->persist;
    free_before(ps);
    rf_profile_free(&ps->prof);
    free(ps->path);
    free(ps->source);
    memset(ps, 0, sizeof(*ps));
}

/* The report fields of the persisted profile, in the open operation. */
void ses_profile_fill_report(struct rf_session *s)
{
    struct session_persist *ps = &s->persist;
    struct rf_report *r = &s->op.rep;
    if (!ps->path)
        return;
    r->profile_path = ps->path;
    r->profile_identity = ps->has_identity ? ps->identity : NULL;
    r->profile_loaded = ps->loaded;
    r->profile_file_reason = ps->reason[0] ? ps->reason : NULL;
    r->profile_operations = ps->prof.operations;
    r->profile_saved = ps->saved;
    r->profile_save_reason = ps->save_reason[0] ? ps->save_reason : NULL;
    r->history_entries = ps->prof.n_history;
    r->history_max = ps->prof.max_history;
    r->prediction = ps->has_pred ? &ps->pred : NULL;
    r->prediction_reason = ps->has_pred ? NULL : ps->pred_reason;
    if (ps->has_pred)
        r->prediction_evidence =
            ps->pred.has_pages
                ? "per page: dispatch trace (file pages of the tensors it named) x staging "
                  "plan ranges x mincore before staging"
                : NULL;
    if (ps->timers_pending) {
        rf_timing_set(&s->op.timing, RF_TIMER_PROFILE_LOAD, ps->load_ns);
        rf_timing_set(&s->op.timing, RF_TIMER_HISTORY_LOAD, ps->history_ns);
    }
}

/* Installs the persisted profile's cold-first order when none is in force. */
static void install_order(struct rf_session *s)
{
    struct session_persist *ps = &s->persist;
    if (!ps->loaded || s->profile_order)
        return;
    uint32_t *cold = NULL;
    size_t n = 0;
    if (rf_profile_orders(&ps->prof, &s->inv, &cold, &n, NULL, NULL, NULL) < 0)
        return;
    s->profile_order = cold;
    s->n_profile_order = n;
}

void ses_profile_reorder(struct rf_session *s)
{
    struct rf_report *r = &s->op.rep;
    install_order(s);
    r->profile_order = s->profile_order; /* never the freed order of the old generation */
    r->n_profile_order = s->profile_order ? s->n_profile_order : 0;
    if (!s->profile_order && r->profile_source) {
        r->profile_source = NULL;
        r->profile_reason = "the inventory was rebuilt (a new generation): the access profile "
                            "of the old one was dropped";
    }
}

void ses_profile_op_open(struct rf_session *s)
{
    struct session_persist *ps = &s->persist;
    if (!ps->path)
        return;
    free_before(ps);
    ps->has_pred = false;
    ps->pred_reason = "no staging and no dispatch trace in this operation";
    ps->saved = false;
    ps->save_reason[0] = 0;
    install_order(s);
    ses_prediction_before(s); /* the page cache as the operation found it */
    struct rf_report *r = &s->op.rep;
    if (ps->loaded && s->profile_order) {
        r->profile_order = s->profile_order;
        r->n_profile_order = s->n_profile_order;
        r->profile_source = ps->source;
    }
    ses_profile_fill_report(s);
}

int ses_profile_read(const char *path, char **text, size_t *len)
{
    /* O_NONBLOCK: a FIFO is refused below, not waited on in open(2) (no effect on a file). */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    struct stat st;
    if (fd < 0)
        return -errno;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        int rc = fstat(fd, &st) < 0 ? -errno : -EINVAL;
        close(fd);
        return rc;
    }
    if ((uint64_t)st.st_size > RF_PROFILE_MAX_FILE_BYTES) {
        close(fd);
        *len = (size_t)st.st_size;
        return -EFBIG;
    }
    size_t cap = (size_t)st.st_size + 1, n = 0;
    char *buf = malloc(cap);
    if (!buf) {
        close(fd);
        return -ENOMEM;
    }
    for (;;) {
        ssize_t got = read(fd, buf + n, cap - n);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            int rc = -errno;
            free(buf);
            close(fd);
            return rc;
        }
        if (got == 0 || (n += (size_t)got) == cap)
            break;
    }
    close(fd);
    if (n > RF_PROFILE_MAX_FILE_BYTES) { /* grew while read */
        free(buf);
        *len = n;
        return -EFBIG;
    }
    *text = buf;
    *len = n;
    return 0;
}

const char *ses_profile_read_error(int rc)
{
    return rc == -EFBIG    ? "larger than the profile size limit"
           : rc == -EINVAL ? "not a regular file (a FIFO, device or directory is never read)"
                           : rf_strerror(rc);
}

int rf_session_profile_open(struct rf_session *s, const char *path, size_t history_max, bool *used,
                            char err[RF_SESSION_PROFILE_ERR_MAX])
{
    if (used)
        *used = false;
    if (!s || !path || !err || s->p.policy == RF_POLICY_OFF)
        return -EINVAL;
    ses_op_open(s);
    ses_profile_free(s);
    struct session_persist *ps = &s->persist;
    uint64_t t0 = rf_now_ns();
    char why[RF_ERR_MAX] = "";
    char *text = NULL;
    size_t len = 0;
    int rc;

    err[0] = 0;
    rf_profile_init(&ps->prof);
    if (history_max)
        ps->prof.max_history =
            history_max > RF_PROFILE_MAX_HISTORY ? RF_PROFILE_MAX_HISTORY : history_max;
    if (!(ps->path = strdup(path)))
        return -ENOMEM;
    ps->timers_pending = true;
    ps->pred_reason = "no staging and no dispatch trace in this operation";
    if (s->native->identity && s->native->identity(s->ud, ps->identity, &ps->file_size_bytes) == 0)
        ps->has_identity = true;
    rc = ses_profile_read(path, &text, &len);
    if (rc == -ENOENT) {
        ps->writable = ps->has_identity;
        snprintf(ps->reason, sizeof(ps->reason),
                 "%s does not exist yet: written at the end from this run's dispatch trace", path);
        rc = 0;
        goto out;
    }
    if (rc < 0) {
        snprintf(ps->reason, sizeof(ps->reason), "cannot read %s: %s%s", path,
                 ses_profile_read_error(rc), "; it is not used and is left as it is");
        snprintf(err, RF_SESSION_PROFILE_ERR_MAX, "%s", ps->reason);
        if (rc == -ENOMEM)
            goto out;
        rc = 0;
        goto out;
    }
    struct rf_profile loaded;
    rc = rf_profile_parse(text, len, ps->prof.max_history, &loaded, why, sizeof(why));
    free(text);
    if (rc < 0) {
        snprintf(ps->reason, sizeof(ps->reason),
                 "profile %s rejected: %s; it is not used and is left as it is", path, why);
        snprintf(err, RF_SESSION_PROFILE_ERR_MAX, "%s", ps->reason);
        rc = rc == -ENOMEM ? rc : 0;
        goto out;
    }
    ps->load_ns = rf_now_ns() - t0;
    uint64_t t1 = rf_now_ns();
    if (!ps->has_identity ||
        !rf_profile_matches(&loaded, ps->identity, ps->file_size_bytes, why, sizeof(why))) {
        snprintf(ps->reason, sizeof(ps->reason),
                 "profile %s ignored: %s; it is not used and is left as it is", path,
                 ps->has_identity ? why : "this model's identity is not known");
        snprintf(err, RF_SESSION_PROFILE_ERR_MAX, "%s", ps->reason);
        rf_profile_free(&loaded);
        rc = 0;
        goto out;
    }
    /* The history was identity-validated against the file's identity, which is ours. */
    loaded.max_history = ps->prof.max_history;
    rf_profile_free(&ps->prof);
    ps->prof = loaded;
    ps->history_ns = rf_now_ns() - t1;
    ps->loaded = true;
    ps->writable = true;
    ps->base_operations = ps->prof.operations;
    if (asprintf(&ps->source, "persisted profile %s (identity %s, %" PRIu64 " operation(s))", path,
                 ps->identity, ps->prof.operations) < 0) {
        ps->source = NULL;
        return -ENOMEM;
    }
    rc = 0;
out:
    if (!ps->load_ns)
        ps->load_ns = rf_now_ns() - t0;
    free(s->profile_order); /* the persisted profile orders from now on */
    s->profile_order = NULL;
    s->n_profile_order = 0;
    if (!ps->loaded)
        s->op.rep.profile_reason = ps->reason;
    ses_profile_op_open(s);
    if (used)
        *used = ps->loaded;
    return rc;
}

uint32_t *ses_profile_stage_order(struct rf_session *s, size_t *n)
{
    struct session_persist *ps = &s->persist;
    uint32_t *hot = NULL;
    *n = 0;
    if (!ps->loaded)
        return NULL;
    uint64_t t0 = rf_now_ns();
    if (rf_profile_orders(&ps->prof, &s->inv, NULL, NULL, &hot, n, NULL) < 0)
        hot = NULL;
    rf_timing_add(&s->op.timing, RF_TIMER_PREDICTION, rf_now_ns() - t0);
    return hot;
}

uint8_t *ses_profile_stage_exclude(struct rf_session *s)
{
    struct session_persist *ps = &s->persist;
    if (!ps->before || !s->inv.n)
        return NULL;
    uint8_t *ex = calloc(s->inv.n, 1);
    for (size_t i = 0; ex && i < s->inv.n; i++) {
        const struct rf_inventory_entry *e = &s->inv.entries[i];
        int32_t m = e->mapping_index;
        if (!e->file_backed || m < 0 || (size_t)m >= ps->n_maps || !ps->before[m] ||
            e->pages.end_page > ps->n_before[m] || rf_page_range_pages(e->pages) == 0)
            continue;
        bool all = true;
        for (uint64_t pg = e->pages.first_page; all && pg < e->pages.end_page; pg++)
            all = ps->before[m][pg] == RF_PAGE_RESIDENT;
        ex[i] = all;
    }
    return ex;
}

void ses_prediction_before(struct rf_session *s)
{
    struct session_persist *ps = &s->persist;
    if (!ps->path || !s->inv.page_bytes)
        return;
    free_before(ps); /* retaken: right before staging when staging runs */
    uint64_t t0 = rf_now_ns();
    size_t nm = s->model.n_mappings;
    ps->before = calloc(nm ? nm : 1, sizeof(*ps->before));
    ps->n_before = calloc(nm ? nm : 1, sizeof(*ps->n_before));
    if (!ps->before || !ps->n_before) {
        free_before(ps);
        return;
    }
    ps->n_maps = nm;
    void *pass = s->native->page_pass_begin(s->ud);
    for (size_t m = 0; pass && m < nm; m++) {
        uint64_t pages =
            (s->model.mappings[m].file_size_bytes + s->inv.page_bytes - 1) / s->inv.page_bytes;
        if (!(ps->before[m] = calloc(pages ? pages : 1, 1)))
            continue;
        ps->n_before[m] = pages;
        /* Only the mapped part can be asked (a window crossing its end fails whole). */
        const struct rf_mapping_meta *mm = &s->model.mappings[m];
        uint64_t lo = mm->map_offset_bytes / s->inv.page_bytes,
                 hi = (mm->map_offset_bytes + mm->map_length_bytes) / s->inv.page_bytes;
        if (!mm->validated || hi > pages)
            hi = mm->validated ? pages : lo;
        for (uint64_t at = lo; at < hi; at += RF_PAGE_WINDOW_PAGES) {
            uint64_t k = hi - at < RF_PAGE_WINDOW_PAGES ? hi - at : RF_PAGE_WINDOW_PAGES;
            if (s->native->page_sampler(pass, (int32_t)m, at, k, ps->before[m] + at) < 0)
                memset(ps->before[m] + at, RF_PAGE_UNKNOWN, k);
        }
    }
    s->native->page_pass_end(pass);
    rf_timing_add(&s->op.timing, RF_TIMER_OBSERVATION, rf_now_ns() - t0);
}

/* The prediction's staging figures of the open operation. */
static void staging_figures(struct rf_session *s, struct rf_prediction *e)
{
    const struct rf_report *r = &s->op.rep;
    memset(e, 0, sizeof(*e));
    e->operation = s->persist.prof.operations;
    snprintf(e->identity, sizeof(e->identity), "%s", s->persist.identity);
    e->selected_bytes = r->staging ? r->staging->selected_bytes : 0;
    e->has_accepted = r->staging_attempted;
    e->accepted_bytes = r->staging_accepted_bytes;
    e->has_mapping_delta = r->staging_mapping_delta.has_value;
    e->mapping_delta_bytes = r->staging_mapping_delta.value;
}

/* Records e as the operation's prediction and in the bounded history. */
static void record(struct rf_session *s, const struct rf_prediction *e)
{
    struct session_persist *ps = &s->persist;
    ps->pred = *e;
    ps->has_pred = true;
    if (ps->has_identity && rf_profile_history_push(&ps->prof, e) == 0)
        ps->n_new_history++;
    ses_profile_fill_report(s);
}

void ses_profile_trace(struct rf_session *s)
{
    struct session_persist *ps = &s->persist;
    const struct rf_dispatch_summary *d = &s->op.dispatch;
    char why[RF_ERR_MAX] = "";
    if (!ps->path || !ps->has_identity)
        return;
    uint64_t t0 = rf_now_ns();
    int rc = rf_profile_update(&ps->prof, &s->inv, d, ps->identity, ps->file_size_bytes, why,
                               sizeof(why));
    if (rc == -ENODATA) {
        snprintf(ps->save_reason, sizeof(ps->save_reason), "not updated: %s", why);
        ps->pred_reason = "the dispatch trace is incomplete: no per-page prediction";
        return;
    }
    if (rc < 0)
        return;
    ps->traced = true;
    /* The pages the operation used: file pages of the tensors the trace named and the
       graph reads from the file. */
    struct rf_file_range *used = calloc(d->n_tensors ? d->n_tensors : 1, sizeof(*used));
    size_t n_used = 0;
    struct rf_prediction e;
    staging_figures(s, &e);
    for (size_t i = 0; used && i < d->n_tensors && i < s->inv.n; i++) {
        const struct rf_inventory_entry *en = &s->inv.entries[i];
        if (d->tensors[i].references && en->file_backed && en->access == RF_ACCESS_FILE_BACKED &&
            en->mapping_index >= 0)
            used[n_used++] = (struct rf_file_range){en->mapping_index, en->pages};
    }
    const struct rf_staging_plan *sp = s->op.rep.staging_attempted ? &s->op.staging : NULL;
    if (used && ps->before &&
        rf_prediction_count(sp ? sp->ranges : NULL, sp ? sp->n_ranges : 0, used, n_used,
                            (const uint8_t *const *)ps->before, ps->n_before, ps->n_maps,
                            &e) == 0) {
        e.page_bytes = s->inv.page_bytes;
    } else {
        ps->pred_reason = "no page-cache snapshot before the operation";
    }
    free(used);
    rf_timing_add(&s->op.timing, RF_TIMER_PREDICTION, rf_now_ns() - t0);
    record(s, &e);
}

void ses_prediction_finish(struct rf_session *s)
{
    struct session_persist *ps = &s->persist;
    ps->timers_pending = false; /* the next operations did not load it */
    if (!ps->path || ps->has_pred || !s->op.rep.staging)
        return;
    struct rf_prediction e;
    staging_figures(s, &e);
    ps->pred_reason = "no dispatch trace: hits, misses and waste are unknown";
    record(s, &e);
    ps->has_pred = true;
}

/* ------------------------------------------------------------------ dispatch */

/* The operation's routing (when it routed a token) becomes the persisted profile's. */
static int keep_routing(struct rf_session *s)
{
    const struct rf_routing *r = s->op.rep.routing;
    struct rf_routing copy;

    if (!s->persist.path || !r)
        return 0;
    int rc = rf_routing_copy(r, &copy);
    if (rc < 0)
        return rc;
    rf_routing_free(&s->persist.prof.routing);
    s->persist.prof.routing = copy;
    return 0;
}

int rf_session_routing_set(struct rf_session *s, const struct rf_routing *routing)
{
    if (!s || !routing)
        return -EINVAL;
    ses_op_open(s);
    rf_routing_free(&s->op.routing);
    int rc = rf_routing_copy(routing, &s->op.routing);
    s->op.rep.routing = rc == 0 && s->op.routing.n_layer ? &s->op.routing : NULL;
    return rc < 0 ? rc : keep_routing(s);
}

struct forge_routing *rf_session_routing(struct rf_session *s)
{
    return s ? s->ctx_routing : NULL;
}

int ses_routing_end(struct rf_session *s)
{
    const struct rf_routing *seen = forge_routing_stats(s->ctx_routing);

    if (!seen || s->op.rep.routing)
        return 0;
    rf_routing_free(&s->op.routing);
    int rc = forge_routing_copy(s->ctx_routing, &s->op.routing);
    bool any = false;
    for (uint32_t l = 0; rc == 0 && l < s->op.routing.n_layer && !any; l++)
        any = s->op.routing.tokens[l] > 0;
    s->op.rep.routing = any ? &s->op.routing : NULL;
    return rc < 0 ? rc : keep_routing(s);
}

int rf_session_dispatch_trace(struct rf_session *s, const struct forge_observer *obs)
{
    struct forge_observer_stats st;
    size_t n_events;

    if (!s || !obs)
        return -EINVAL;
    ses_op_open(s);
    struct rf_report *r = &s->op.rep;
    if (s->p.policy == RF_POLICY_OFF) {
        r->dispatch_reason = "residency policy off: no inventory to attribute events to";
        return 0;
    }
    const struct rf_dispatch_event *ev = forge_observer_events(obs, &n_events);
    forge_observer_stats(obs, &st);
    rf_dispatch_summary_free(&s->op.dispatch);
    if (rf_dispatch_summarize(&s->inv, s->model.instance_id, ev, n_events, st.dropped_events,
                              &s->op.dispatch) < 0) {
        r->dispatch_reason = "the dispatch events could not be attributed";
        return 0;
    }
    r->dispatch = &s->op.dispatch;
    if (!s->op.dispatch.complete) {
        r->profile_reason = "the dispatch trace is incomplete (events were dropped): no "
                            "profile; raise --dispatch-events";
        ses_add_warning(s, "the dispatch observer dropped events: the trace is incomplete and "
                           "gives no access profile (raise --dispatch-events)");
        ses_profile_trace(s);
        return 0;
    }
    size_t n = s->op.dispatch.n_tensors;
    uint32_t *by_rank = malloc((n ? n : 1) * sizeof(uint32_t)); /* rank -> tensor index */
    uint32_t *order = calloc(n ? n : 1, sizeof(uint32_t));
    size_t n_order = 0;
    if (!order || !by_rank) {
        free(by_rank);
        free(order);
        return -ENOMEM;
    }
    memset(by_rank, 0xff, (n ? n : 1) * sizeof(uint32_t));
    for (size_t i = 0; i < n; i++) {
        uint32_t rank = s->op.dispatch.tensors[i].first_order;
        if (rank == UINT32_MAX || rank >= n)
            order[n_order++] = s->inv.entries[i].key.tensor_index;
        else
            by_rank[rank] = s->inv.entries[i].key.tensor_index;
    }
    for (size_t rank = n; rank-- > 0;)
        if (by_rank[rank] != UINT32_MAX)
            order[n_order++] = by_rank[rank];
    free(by_rank);
    ses_profile_trace(s);
    if (s->persist.loaded) { /* the persisted profile orders this operation */
        free(order);
        return 0;
    }
    free(s->profile_order);
    s->profile_order = order;
    s->n_profile_order = n_order;
    r->profile_order = order;
    r->n_profile_order = n_order;
    r->profile_source = "dispatch trace of this run's session (--observe-dispatch)";
    return 0;
}
