/*
 * The line --memory-limit's supervising parent writes once its child ended
 * (limit_cgroup.h): the OOM kill with the ways out that are not in use
 * already, a kill by another signal, or the footer with the cgroup's limit
 * and peak. A figure that could not be read is said to be unknown, with
 * why, never printed as 0 bytes.
 */
#include "limit_cgroup.h"

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "cli.h"

/* "512.00 MiB", "none (memory.max says max)" or "unknown (WHY)" into buf. */
static const char *limit_text(const struct limit_end *e, char *buf, size_t len)
{
    char b[32];

    if (e->read_error)
        snprintf(buf, len, "unknown (the cgroup's files could not be read: %s)",
                 strerror(-e->read_error));
    else if (!e->st.has_limit)
        snprintf(buf, len, "unknown (its limit file could not be read)");
    else if (e->st.limit_max)
        snprintf(buf, len, "none (memory.max says max)");
    else
        snprintf(buf, len, "%s", cli_format_bytes(e->st.limit_bytes, false, b, sizeof(b)));
    return buf;
}

enum limit_end_kind limit_cgroup_end_text(const struct limit_end *e, char *buf, size_t len)
{
    char limit[160], peak[32];
    bool killed = WIFSIGNALED(e->wstatus);

    buf[0] = '\0';
    limit_text(e, limit, sizeof(limit));
    if (!e->read_error && e->st.has_peak)
        cli_format_bytes(e->st.peak_bytes, false, peak, sizeof(peak));
    else
        snprintf(peak, sizeof(peak), "unknown");
    if (killed && !e->read_error && e->st.has_oom_kill && e->st.oom_kill > 0) {
        snprintf(buf, len,
                 "the kernel's OOM killer killed the run in its memory cgroup (limit %s, peak "
                 "%s): try a larger --memory-limit%s",
                 limit, peak,
                 e->streaming ? " or a smaller context (-c); it streams already "
                                "(--residency-policy streaming)"
                              : " or --residency-policy streaming");
        return LIMIT_END_OOM;
    }
    if (killed && WTERMSIG(e->wstatus) != e->stop) { /* a stop signal passed on: said by none */
        snprintf(buf, len, "the run was killed by signal %d (%s)", WTERMSIG(e->wstatus),
                 strsignal(WTERMSIG(e->wstatus)));
        return LIMIT_END_KILLED;
    }
    if (e->quiet)
        return LIMIT_END_NONE;
    if (!e->read_error && e->st.has_limit && !e->st.limit_max)
        snprintf(limit + strlen(limit), sizeof(limit) - strlen(limit), " (%" PRIu64 " bytes)",
                 e->st.limit_bytes);
    snprintf(buf, len, "  memory cgroup of --memory-limit: limit %s, peak %s (this run only)%s",
             limit, peak,
             !e->read_error && e->st.has_failcnt && e->st.failcnt ? ", limit reached" : "");
    return LIMIT_END_FOOTER;
}
