/*
 * exec's control channel (docs/EXEC.md, "The control channel";
 * ramforge/core/exec_ctl.h): a unix socket RUNTIME/exec-PID.sock, mode
 * 0600 in a directory of the process's user only (0700), started with the
 * first managed model. One thread of the engine's own accepts one
 * connection at a time (a backlog of one: a second asker waits or times
 * out), reads one request line and answers it:
 *   status   each managed model's submissions, in-flight count, idle time
 *            and its last release request's outcome;
 *   release  a byte count of one model's file pages queued (one request per
 *            model at a time), taken at the model's next idle moment: no
 *            submission in flight and none for --budget-quiet-ms (cfg.budget_quiet_ns), under
 *            session_mu and the gate's exclusive side
 *            (rf_session_release_ranges: EBUSY when a decode began
 *            meanwhile: tried again later). A decode running throughout is
 *            never released under.
 * The pages chosen are the page-cache-resident pages of the model's file
 * mapping from its end backwards (the output and last layers first, as
 * watch --release-idle), advised with MADV_PAGEOUT through the session: its
 * report lists the release as an application of its own (boundary
 * "budget", requested_by saying who asked what), the mapping's Rss
 * measured around it by the session's samples.
 */
#include "preload_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "ramforge/core/exec_ctl.h"
#include "ramforge/core/intervals.h"
#include "ramforge/core/report.h"
#include "ramforge/core/timing.h"
#include "ramforge/forge/forge.h"
#include "ramforge/forge/forge_pages.h"
#include "ramforge/session/session_ext.h"
#include "ramforge/sys/pages.h"

#define EXEC_CTL_POLL_MS 100     /* how often a waiting request looks for that moment */
#define EXEC_CTL_IO_MS 1000      /* an asker has this long to send its line */
#define EXEC_CTL_MAX_RANGES 4096 /* runs of pages one release submits */

/* One model slot's identity and its last request, beside exec_engine.models. ctl_mu. */
struct ctl_slot {
    const struct llama_model *model; /* the slot's model when these were filled; NULL: none */
    struct rf_exec_ctl_model st;     /* identity, path and the last request (figures: status) */
    uint64_t bytes;                  /* a waiting request's bytes */
};

static struct {
    pthread_mutex_t mu;
    struct ctl_slot slots[EXEC_MAX_MODELS];
    uint64_t next_id;
    int fd;
    char path[108];
    bool started;
} ctl = {.mu = PTHREAD_MUTEX_INITIALIZER, .fd = -1};

/* The slot i's identity filled for its current model (its mapping's device and inode). */
static bool slot_fill(size_t i, struct ctl_slot *s)
{
    struct exec_model *m = &exec_engine.models[i];
    pthread_mutex_lock(&exec_engine.table_mu);
    const struct llama_model *model = m->model;
    pthread_mutex_unlock(&exec_engine.table_mu);
    if (!model)
        return false;
    if (s->model == model)
        return true;
    bool ok = false;
    pthread_mutex_lock(&exec_engine.session_mu); /* the session is freed under it only */
    pthread_mutex_lock(&exec_engine.table_mu);   /* a load writes the slot under this one */
    struct rf_session *session = m->model == model ? m->s : NULL;
    pthread_mutex_unlock(&exec_engine.table_mu);
    if (session) {
        size_t n = 0;
        const struct rf_mapping_meta *mm =
            forge_model_mappings(rf_session_forge_model(session), &n);
        if (n && mm[0].validated) {
            memset(s, 0, sizeof(*s));
            s->model = model;
            s->st.dev_major = mm[0].dev_major;
            s->st.dev_minor = mm[0].dev_minor;
            s->st.inode = mm[0].inode;
            snprintf(s->st.path, sizeof(s->st.path), "%s", m->path);
            s->st.path[strcspn(s->st.path, "\n")] = '\0';
            ok = true;
        }
    }
    pthread_mutex_unlock(&exec_engine.session_mu);
    return ok;
}

/* The status answer into buf. */
static size_t answer_status(char *buf, size_t size)
{
    size_t n = 0;
    uint64_t now = rf_now_ns();
    for (size_t i = 0; i < EXEC_MAX_MODELS; i++) {
        pthread_mutex_lock(&ctl.mu);
        struct ctl_slot *s = &ctl.slots[i];
        if (slot_fill(i, s)) {
            struct exec_model *m = &exec_engine.models[i];
            pthread_mutex_lock(&exec_engine.table_mu);
            s->st.submits = m->clock.submits;
            s->st.in_flight = m->clock.in_flight;
            s->st.idle_ms =
                now > m->clock.last_activity_ns ? (now - m->clock.last_activity_ns) / 1000000 : 0;
            pthread_mutex_unlock(&exec_engine.table_mu);
            int k = rf_exec_ctl_format_model(&s->st, buf + n, size - n);
            n += k > 0 ? (size_t)k : 0;
        }
        pthread_mutex_unlock(&ctl.mu);
    }
    n += (size_t)snprintf(buf + n, size - n, "end\n");
    return n < size ? n : size - 1;
}

/* The answer to a release request into buf. */
static void answer_release(const struct rf_exec_ctl_request *r, char *buf, size_t size)
{
    for (size_t i = 0; i < EXEC_MAX_MODELS; i++) {
        pthread_mutex_lock(&ctl.mu);
        struct ctl_slot *s = &ctl.slots[i];
        if (!slot_fill(i, s) || s->st.dev_major != r->dev_major ||
            s->st.dev_minor != r->dev_minor || s->st.inode != r->inode) {
            pthread_mutex_unlock(&ctl.mu);
            continue;
        }
        if (s->st.state == RF_EXEC_CTL_WAITING) {
            snprintf(buf, size, "busy %llu\n", (unsigned long long)s->st.id);
        } else {
            s->st.id = ++ctl.next_id;
            s->st.state = RF_EXEC_CTL_WAITING;
            s->st.asked_bytes = s->bytes = r->bytes;
            s->st.accepted_bytes = 0;
            s->st.change_bytes = 0;
            s->st.error = 0;
            snprintf(buf, size, "queued %llu\n", (unsigned long long)s->st.id);
        }
        pthread_mutex_unlock(&ctl.mu);
        return;
    }
    snprintf(buf, size, "error no managed model maps %u:%u %llu\n", r->dev_major, r->dev_minor,
             (unsigned long long)r->inode);
}

/*
 * The resident pages of fm's mapping from its end backwards, as runs, until bytes are
 * covered: *out owned. 0, or the sampling's error.
 */
static int pick_resident(struct forge_model *fm, uint64_t bytes, struct rf_file_range **out,
                         size_t *n)
{
    size_t nm = 0;
    const struct rf_mapping_meta *mm = forge_model_mappings(fm, &nm);
    uint64_t page = rfsys_page_bytes(), got = 0;
    uint8_t *states = malloc(RF_PAGE_WINDOW_PAGES);
    struct rf_file_range *v = calloc(EXEC_CTL_MAX_RANGES, sizeof(*v));
    int rc = 0;

    *out = NULL;
    *n = 0;
    if (!states || !v) {
        rc = -ENOMEM;
        goto out;
    }
    uint64_t first = mm[0].map_offset_bytes / page;
    uint64_t end = (mm[0].map_offset_bytes + mm[0].map_length_bytes) / page;
    while (end > first && got < bytes && *n < EXEC_CTL_MAX_RANGES) {
        uint64_t w = end - first < RF_PAGE_WINDOW_PAGES ? end - first : RF_PAGE_WINDOW_PAGES;
        if ((rc = forge_model_sample_pages(fm, 0, end - w, w, states)) < 0)
            goto out;
        for (uint64_t k = w; k-- > 0 && got < bytes;) {
            if (states[k] != RF_PAGE_RESIDENT)
                continue;
            uint64_t pg = end - w + k;
            if (*n && v[*n - 1].pages.first_page == pg + 1) {
                v[*n - 1].pages.first_page = pg;
            } else if (*n < EXEC_CTL_MAX_RANGES) {
                v[(*n)++] = (struct rf_file_range){0, {pg, pg + 1}};
            } else {
                break;
            }
            got += page;
        }
        end -= w;
    }
    *out = v;
    v = NULL;
out:
    free(states);
    free(v);
    return rc;
}

/*
 * Slot i's waiting request, if its model is at its idle moment now: released under
 * session_mu and the gate. Called without ctl.mu.
 */
static void take_if_idle(size_t i)
{
    struct exec_model *m = &exec_engine.models[i];
    pthread_mutex_lock(&ctl.mu);
    struct ctl_slot s = ctl.slots[i];
    pthread_mutex_unlock(&ctl.mu);
    if (s.st.state != RF_EXEC_CTL_WAITING)
        return;
    uint64_t now = rf_now_ns();
    pthread_mutex_lock(&exec_engine.table_mu);
    bool same = m->model == s.model && m->model;
    bool idle = same && m->clock.in_flight == 0 && now >= m->clock.last_activity_ns &&
                now - m->clock.last_activity_ns >= exec_engine.cfg.budget_quiet_ns;
    pthread_mutex_unlock(&exec_engine.table_mu);
    int err = 0;
    struct rf_report_application app = {0};
    if (!same) {
        err = -ESTALE; /* the model was freed meanwhile */
    } else if (!idle || pthread_mutex_trylock(&exec_engine.session_mu) != 0) {
        return; /* not its idle moment yet, or a boundary runs: the next poll */
    } else {
        struct rf_file_range *ranges = NULL;
        size_t n = 0;
        char by[320];
        pthread_mutex_lock(&exec_engine.table_mu); /* the slot as a load wrote it */
        struct rf_session *session = m->model == s.model ? m->s : NULL;
        pthread_mutex_unlock(&exec_engine.table_mu);
        struct forge_model *fm = session ? rf_session_forge_model(session) : NULL;
        err = fm ? pick_resident(fm, s.bytes, &ranges, &n) : -ESTALE;
        snprintf(by, sizeof(by),
                 "watch --budget asked %llu bytes through exec's control channel (request %llu): "
                 "the model's resident file pages from the file's end backwards, pageout, taken "
                 "at its idle moment (no submission for %.1f s)",
                 (unsigned long long)s.bytes, (unsigned long long)s.st.id,
                 (double)exec_engine.cfg.budget_quiet_ns / 1e9);
        if (err == 0)
            err = rf_session_release_ranges(session, "budget", "after_budget", by, ranges, n,
                                            FORGE_RELEASE_PAGEOUT, &app);
        if (err == 0)
            err = app.first_error;
        if (err == 0) {
            pthread_mutex_lock(&exec_engine.table_mu);
            m->budget_releases++;
            m->budget_accepted_bytes += app.accepted_bytes;
            m->budget_wake_armed = true; /* the next submission is timed: the wake */
            pthread_mutex_unlock(&exec_engine.table_mu);
        }
        if (err != -EBUSY)
            exec_write_figures(m); /* the session report lists the release */
        pthread_mutex_unlock(&exec_engine.session_mu);
        free(ranges);
        if (err == -EBUSY)
            return; /* a decode began between the check and the gate: the next poll */
    }
    int64_t change = app.mapping_delta.has_value ? app.mapping_delta.value : 0;
    pthread_mutex_lock(&ctl.mu);
    struct rf_exec_ctl_model *st = &ctl.slots[i].st;
    if (st->id == s.st.id) {
        st->state = err < 0 ? RF_EXEC_CTL_FAILED : RF_EXEC_CTL_DONE;
        st->error = err;
        st->accepted_bytes = app.accepted_bytes;
        st->change_bytes = change;
    }
    pthread_mutex_unlock(&ctl.mu);
    if (exec_engine.cfg.verbose)
        exec_engine.host->say("exec: %s: release request %llu of the control channel: asked %llu "
                              "bytes, the kernel accepted %llu, the mapping's Rss %s by %lld "
                              "bytes%s%s",
                              s.st.path, (unsigned long long)s.st.id, (unsigned long long)s.bytes,
                              (unsigned long long)app.accepted_bytes, change <= 0 ? "fell" : "rose",
                              (long long)(change <= 0 ? -change : change), err ? ": " : "",
                              err ? rf_strerror(err) : "");
}

/* One connection: a line read under a deadline, answered, closed. */
static void serve_one(int c)
{
    static char line[RF_EXEC_CTL_LINE_MAX], answer[EXEC_MAX_MODELS * RF_EXEC_CTL_LINE_MAX + 8];
    size_t n = 0;
    struct pollfd p = {c, POLLIN, 0};
    while (n < sizeof(line) - 1 && !memchr(line, '\n', n)) {
        if (poll(&p, 1, EXEC_CTL_IO_MS) <= 0)
            break;
        ssize_t r = recv(c, line + n, sizeof(line) - 1 - n, MSG_DONTWAIT);
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    line[n] = '\0';
    struct rf_exec_ctl_request req;
    size_t len;
    if (rf_exec_ctl_parse_request(line, &req) < 0) {
        len = (size_t)snprintf(answer, sizeof(answer), "error not a request\n");
    } else if (req.kind == RF_EXEC_CTL_STATUS) {
        len = answer_status(answer, sizeof(answer));
    } else {
        answer_release(&req, answer, sizeof(answer));
        len = strlen(answer);
    }
    for (size_t sent = 0; sent < len;) {
        ssize_t w = send(c, answer + sent, len - sent, MSG_NOSIGNAL);
        if (w <= 0)
            break;
        sent += (size_t)w;
    }
}

/* The figures of m rewritten after a wake was measured (its metrics file carries it at once),
   unless a boundary runs: then at the next poll. */
static void write_wake(struct exec_model *m)
{
    pthread_mutex_lock(&exec_engine.table_mu);
    bool due = m->model && m->wake_unwritten;
    pthread_mutex_unlock(&exec_engine.table_mu);
    if (!due || pthread_mutex_trylock(&exec_engine.session_mu) != 0)
        return;
    pthread_mutex_lock(&exec_engine.table_mu);
    m->wake_unwritten = false;
    pthread_mutex_unlock(&exec_engine.table_mu);
    if (m->s)
        exec_write_figures(m);
    pthread_mutex_unlock(&exec_engine.session_mu);
}

static void *control_thread(void *ud)
{
    (void)ud;
    for (;;) {
        struct pollfd p = {ctl.fd, POLLIN, 0};
        int r = poll(&p, 1, EXEC_CTL_POLL_MS);
        pthread_mutex_lock(&exec_engine.table_mu);
        bool stop = exec_engine.stopping;
        pthread_mutex_unlock(&exec_engine.table_mu);
        if (stop)
            break;
        if (r > 0) {
            int c = accept4(ctl.fd, NULL, NULL, SOCK_CLOEXEC);
            if (c >= 0) {
                serve_one(c);
                close(c);
            }
        }
        for (size_t i = 0; i < EXEC_MAX_MODELS; i++) {
            take_if_idle(i);
            write_wake(&exec_engine.models[i]);
        }
    }
    return NULL;
}

void exec_control_wake_submit(struct exec_model *m, const struct llama_context *ctx, uint64_t t0)
{
    if (!m->budget_wake_armed || m->wake_ctx)
        return;
    m->budget_wake_armed = false;
    m->wake_ctx = ctx;
    m->wake_t0_ns = t0;
}

void exec_control_wake_done(struct exec_model *m, const struct llama_context *ctx)
{
    if (!m->wake_ctx || m->wake_ctx != ctx)
        return;
    uint64_t now = rf_now_ns();
    m->wake_last_ns = now > m->wake_t0_ns ? now - m->wake_t0_ns : 0;
    m->budget_wakes++;
    m->wake_ctx = NULL;
    m->wake_unwritten = true;
}

/* The runtime directory made (0700) or checked: a directory of this user's alone. */
static int runtime_dir(char *dir, size_t size)
{
    struct stat st;
    int rc = rf_exec_ctl_runtime_dir(getenv("RAMFORGE_RUNTIME_DIR"), getenv("XDG_RUNTIME_DIR"),
                                     (unsigned)geteuid(), dir, size);
    if (rc < 0)
        return rc;
    if (mkdir(dir, 0700) < 0 && errno != EEXIST)
        return -errno;
    if (lstat(dir, &st) < 0)
        return -errno;
    if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077))
        return -EPERM; /* another user's, or open to others: not ours to listen in */
    return 0;
}

static void start_once(void)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    char dir[4096];
    pthread_t tid;
    int rc, fd = -1;

    if ((rc = runtime_dir(dir, sizeof(dir))) < 0 ||
        (rc = rf_exec_ctl_socket_path(dir, (int)getpid(), ctl.path, sizeof(ctl.path))) < 0)
        goto fail;
    memcpy(a.sun_path, ctl.path, strlen(ctl.path) + 1);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        rc = -errno;
        goto fail;
    }
    unlink(ctl.path); /* a socket left by an earlier process of this pid */
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || chmod(ctl.path, 0600) < 0 ||
        listen(fd, 1) < 0) {
        rc = -errno;
        unlink(ctl.path);
        goto fail;
    }
    ctl.fd = fd;
    if (pthread_create(&tid, NULL, control_thread, NULL) != 0) {
        rc = -EAGAIN;
        unlink(ctl.path);
        ctl.fd = -1;
        goto fail;
    }
    pthread_detach(tid);
    ctl.started = true;
    if (exec_engine.cfg.verbose)
        exec_engine.host->say("exec: control channel on %s", ctl.path);
    return;
fail:
    if (fd >= 0)
        close(fd);
    if (exec_engine.cfg.verbose)
        exec_engine.host->say("exec: no control channel (watch --budget releases this process "
                              "by advice, without its gate): %s: %s",
                              ctl.path[0] ? ctl.path : "the runtime directory", rf_strerror(rc));
}

void exec_control_start(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, start_once);
}

void exec_control_forget(size_t i)
{
    pthread_mutex_lock(&ctl.mu);
    memset(&ctl.slots[i], 0, sizeof(ctl.slots[i]));
    pthread_mutex_unlock(&ctl.mu);
}

void exec_control_stop(void)
{
    if (ctl.started)
        unlink(ctl.path);
}
