/*
 * The text of exec's control channel (ramforge/core/exec_ctl.h): request
 * and status lines formatted and parsed strictly, the socket's directory
 * and name. A line per request and per model, a few a second at most.
 */
#include "ramforge/core/exec_ctl.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SOCKET_PATH_MAX 108 /* sizeof(struct sockaddr_un.sun_path) on Linux */

static int fitted(int n, size_t size)
{
    return n < 0 ? -EINVAL : (size_t)n >= size ? -ENOSPC : n;
}

int rf_exec_ctl_format_request(const struct rf_exec_ctl_request *r, char *buf, size_t size)
{
    if (!r || !buf)
        return -EINVAL;
    if (r->kind == RF_EXEC_CTL_STATUS)
        return fitted(snprintf(buf, size, "status\n"), size);
    if (r->kind != RF_EXEC_CTL_RELEASE)
        return -EINVAL;
    return fitted(snprintf(buf, size, "release %" PRIu32 ":%" PRIu32 " %" PRIu64 " %" PRIu64 "\n",
                           r->dev_major, r->dev_minor, r->inode, r->bytes),
                  size);
}

/* A decimal u64 at *s followed by one of the stop characters; *s past it. */
static bool take_u64(const char **s, const char *stops, uint64_t *out)
{
    char *end;
    if (**s < '0' || **s > '9')
        return false;
    errno = 0;
    unsigned long long v = strtoull(*s, &end, 10);
    if (errno || !strchr(stops, *end))
        return false;
    *out = v;
    *s = end + (*end != '\0');
    return true;
}

/* A decimal i64 (an optional '-'); as take_u64. */
static bool take_i64(const char **s, const char *stops, int64_t *out)
{
    bool neg = **s == '-';
    uint64_t v;
    *s += neg;
    if (!take_u64(s, stops, &v) || v > (uint64_t)INT64_MAX)
        return false;
    *out = neg ? -(int64_t)v : (int64_t)v;
    return true;
}

/* The literal word w and a space at *s; *s past them. */
static bool take_word(const char **s, const char *w)
{
    size_t n = strlen(w);
    if (strncmp(*s, w, n) || (*s)[n] != ' ')
        return false;
    *s += n + 1;
    return true;
}

/* "MAJ:MIN INODE" at *s. */
static bool take_file(const char **s, uint32_t *maj, uint32_t *min, uint64_t *inode)
{
    uint64_t a, b;
    if (!take_u64(s, ":", &a) || !take_u64(s, " ", &b) || a > UINT32_MAX || b > UINT32_MAX ||
        !take_u64(s, " \n", inode))
        return false;
    *maj = (uint32_t)a;
    *min = (uint32_t)b;
    return true;
}

int rf_exec_ctl_parse_request(const char *line, struct rf_exec_ctl_request *out)
{
    if (!line || !out)
        return -EBADMSG;
    memset(out, 0, sizeof(*out));
    if (!strcmp(line, "status") || !strcmp(line, "status\n"))
        return 0;
    const char *s = line;
    out->kind = RF_EXEC_CTL_RELEASE;
    if (!take_word(&s, "release") ||
        !take_file(&s, &out->dev_major, &out->dev_minor, &out->inode) ||
        !take_u64(&s, "\n", &out->bytes) || *s)
        return -EBADMSG;
    return 0;
}

int rf_exec_ctl_format_model(const struct rf_exec_ctl_model *m, char *buf, size_t size)
{
    if (!m || !buf || strchr(m->path, '\n') || (unsigned)m->state > RF_EXEC_CTL_FAILED)
        return -EINVAL;
    return fitted(snprintf(buf, size,
                           "model %" PRIu32 ":%" PRIu32 " %" PRIu64 " submits %" PRIu64
                           " in_flight %" PRIu32 " idle_ms %" PRIu64 " request %" PRIu64
                           " %s asked %" PRIu64 " accepted %" PRIu64 " change %" PRId64
                           " error %d path %s\n",
                           m->dev_major, m->dev_minor, m->inode, m->submits, m->in_flight,
                           m->idle_ms, m->id, rf_exec_ctl_state_name(m->state), m->asked_bytes,
                           m->accepted_bytes, m->change_bytes, m->error, m->path),
                  size);
}

int rf_exec_ctl_parse_model(const char *line, struct rf_exec_ctl_model *out)
{
    uint64_t in_flight;
    int64_t err;
    const char *s = line;

    if (!line || !out)
        return -EBADMSG;
    memset(out, 0, sizeof(*out));
    if (!take_word(&s, "model") || !take_file(&s, &out->dev_major, &out->dev_minor, &out->inode) ||
        !take_word(&s, "submits") || !take_u64(&s, " ", &out->submits) ||
        !take_word(&s, "in_flight") || !take_u64(&s, " ", &in_flight) || in_flight > UINT32_MAX ||
        !take_word(&s, "idle_ms") || !take_u64(&s, " ", &out->idle_ms) ||
        !take_word(&s, "request") || !take_u64(&s, " ", &out->id))
        return -EBADMSG;
    out->in_flight = (uint32_t)in_flight;
    size_t k = strcspn(s, " ");
    bool found = false;
    for (int st = RF_EXEC_CTL_NONE; st <= RF_EXEC_CTL_FAILED; st++) {
        const char *name = rf_exec_ctl_state_name((enum rf_exec_ctl_state)st);
        if (strlen(name) == k && !strncmp(s, name, k)) {
            out->state = (enum rf_exec_ctl_state)st;
            found = true;
        }
    }
    if (!found || s[k] != ' ')
        return -EBADMSG;
    s += k + 1;
    if (!take_word(&s, "asked") || !take_u64(&s, " ", &out->asked_bytes) ||
        !take_word(&s, "accepted") || !take_u64(&s, " ", &out->accepted_bytes) ||
        !take_word(&s, "change") || !take_i64(&s, " ", &out->change_bytes) ||
        !take_word(&s, "error") || !take_i64(&s, " ", &err) || err > 0 || err < -4095 ||
        !take_word(&s, "path"))
        return -EBADMSG;
    out->error = (int)err;
    size_t n = strcspn(s, "\n");
    if (n == 0 || n >= sizeof(out->path) || (s[n] && s[n + 1]))
        return -EBADMSG;
    memcpy(out->path, s, n);
    out->path[n] = '\0';
    return 0;
}

const char *rf_exec_ctl_state_name(enum rf_exec_ctl_state s)
{
    switch (s) {
    case RF_EXEC_CTL_NONE:
        return "none";
    case RF_EXEC_CTL_WAITING:
        return "waiting";
    case RF_EXEC_CTL_DONE:
        return "done";
    case RF_EXEC_CTL_FAILED:
        return "failed";
    }
    return "unknown";
}

int rf_exec_ctl_runtime_dir(const char *runtime_env, const char *xdg, unsigned uid, char *out,
                            size_t size)
{
    int n;
    if (runtime_env && runtime_env[0])
        n = snprintf(out, size, "%s", runtime_env);
    else if (xdg && xdg[0] == '/')
        n = snprintf(out, size, "%s/ramforge", xdg);
    else if (uid == 0)
        n = snprintf(out, size, "/run/ramforge");
    else
        n = snprintf(out, size, "/tmp/ramforge-%u", uid);
    return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

int rf_exec_ctl_socket_path(const char *dir, int pid, char *out, size_t size)
{
    int n = snprintf(out, size, "%s/exec-%d.sock", dir, pid);
    return n < 0 || (size_t)n >= size || (size_t)n >= SOCKET_PATH_MAX ? -ENAMETOOLONG : 0;
}

bool rf_exec_ctl_is_socket_of(const char *path, int pid)
{
    char want[32];
    const char *base = strrchr(path, '/');
    snprintf(want, sizeof(want), "exec-%d.sock", pid);
    return base && !strcmp(base + 1, want);
}
