/*
 * serve --profile: the persisted access profile over a long-lived
 * session. Read once at start (rf_session_profile_open); every request
 * runs the dispatch observer so a complete trace updates the profile and
 * the request's prediction joins its history; saved after every K
 * requests (--profile-save-every) and at shutdown, atomically. The idle
 * release and the wake-up staging take their orders from the profile
 * inside the session (cold first, hot first).
 */
#include "common/cli.h"
#include "ramforge/error.h"
#include "ramforge/forge/forge_observer.h"
#include "ramforge/session/session_ext.h"
#include "serve.h"

#define SERVE_OBSERVER_EVENTS 65536 /* about 52 MiB: a request's nodes, prompt and decode */

bool serve_profile_open(struct serve *sv)
{
    const struct serve_options *o = sv->o;
    char err[RF_SESSION_PROFILE_ERR_MAX];
    if (!o->sess.profile_path)
        return true;
    bool used = false;
    int rc = rf_session_profile_open(sv->session, o->sess.profile_path,
                                     (size_t)o->sess.profile_history, &used, err);
    if (rc < 0) {
        cli_error("cannot use profile %s: %s", o->sess.profile_path, rf_strerror(rc));
        return false;
    }
    if (!used && err[0])
        cli_error("warning: %s", err);
    rc = forge_observer_create(SERVE_OBSERVER_EVENTS, &sv->observer);
    if (rc < 0) {
        cli_error("cannot allocate the dispatch observer: %s", rf_strerror(rc));
        return false;
    }
    return true;
}

struct forge_observer *serve_profile_observer(struct serve *sv)
{
    if (sv->observer)
        forge_observer_reset(sv->observer);
    return sv->observer;
}

void serve_profile_trace(struct serve *sv)
{
    if (!sv->observer)
        return;
    int rc = rf_session_dispatch_trace(sv->session, sv->observer);
    if (rc < 0)
        cli_error("cannot attribute the dispatch trace: %s", rf_strerror(rc));
}

/* Saves; prints the failure (one line). */
static bool save(struct serve *sv)
{
    char err[RF_SESSION_PROFILE_ERR_MAX];
    bool saved = false;
    int rc = rf_session_profile_save(sv->session, &saved, err);
    if (rc < 0)
        cli_error("%s", err);
    else if (!saved && err[0] && sv->o->sess.verbose)
        cli_error("warning: profile %s", err);
    sv->profile_requests = 0;
    return rc >= 0;
}

void serve_profile_after_request(struct serve *sv)
{
    if (!sv->o->sess.profile_path || sv->o->profile_save_every <= 0)
        return;
    if (++sv->profile_requests >= (uint64_t)sv->o->profile_save_every)
        save(sv);
}

bool serve_profile_close(struct serve *sv)
{
    if (!sv->o->sess.profile_path)
        return true;
    pthread_mutex_lock(&sv->session_mu);
    bool ok = save(sv);
    pthread_mutex_unlock(&sv->session_mu);
    return ok;
}
