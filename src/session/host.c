/*
 * The host of a long-running program (ramforge/session/host.h): an operation's
 * start (admission, staging, pins, the window installed for the contexts
 * the application decorated) and the idle boundary's outcome, once for
 * run, serve's worker and exec's engine. The outcome is read from the
 * operation's releases here, so no program reads report structs to learn
 * what the boundary did.
 */
#include "session_internal.h"

#include "ramforge/session/host.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ramforge/core/policy.h"
#include "ramforge/core/report.h"
#include "ramforge/core/stream_window.h"
#include "ramforge/forge/forge_experts.h"
#include "ramforge/forge/forge_window.h"
#include "ramforge/session/session_ext.h"

int rf_session_operation_start(struct rf_session *s, const struct rf_operation_start_params *params,
                               struct rf_operation_start *out)
{
    if (!s || !params || !out)
        return -EINVAL;
    memset(out, 0, sizeof(*out));
    if (params->admit) {
        out->admission_error = rf_session_admit_result(s, &params->request, &out->admission);
        out->admission_decided = out->admission_error == 0;
        out->refused = out->admission_decided && out->admission.refused;
        if (out->refused)
            return 0;
    }
    bool stage = params->staging_budget_bytes > 0 && (params->stage_always || s->idle_released);
    s->idle_released = false;
    if (stage) {
        out->staged = true;
        out->staging_error = rf_session_stage(s, params->staging_budget_bytes);
        if (out->staging_error == 0 && s->op.rep.staging) {
            out->staging_requested_bytes = s->op.rep.staging->selected_bytes;
            out->staging_accepted_bytes = s->op.rep.staging_accepted_bytes;
        }
    }
    out->pin_error = rf_session_stream_pin(s, &out->pinned);
    return 0;
}

int rf_session_set_prompt_cache(struct rf_session *s, const struct rf_ledger_entry *e)
{
    if (!s || !e || e->category != RF_LEDGER_PROMPT_CACHE)
        return -EINVAL;
    s->prompt_cache = *e;
    s->has_prompt_cache = true;
    return 0;
}

void rf_session_add_warning(struct rf_session *s, const char *w)
{
    if (s && w)
        ses_add_warning(s, w);
}

const char *rf_idle_outcome_name(enum rf_idle_outcome o)
{
    switch (o) {
    case RF_IDLE_RELEASED:
        return "released";
    case RF_IDLE_NOTHING:
        return "nothing";
    case RF_IDLE_REFUSED:
        return "refused";
    }
    return NULL;
}

/* Whether application a is one of the idle boundary's (label: "idle" or "idle_alive"). */
static bool of_boundary(const struct rf_report_application *a, const char *label)
{
    return a->boundary && strcmp(a->boundary, label) == 0;
}

/* The figures of the boundary's releases: sums (UINT64_MAX when they overflow), the
   measured change, the mapping after. */
static void idle_figures(const struct rf_report *r, const char *label, struct rf_idle_result *out)
{
    const char *after = NULL;
    bool over = false;
    out->has_mapping_change = true;
    for (size_t i = 0; i < r->n_applications; i++) {
        const struct rf_report_application *a = &r->applications[i];
        if (!a->attempted || !of_boundary(a, label))
            continue;
        out->attempted = true;
        over |=
            __builtin_add_overflow(out->requested_bytes, a->requested_bytes, &out->requested_bytes);
        over |=
            __builtin_add_overflow(out->accepted_bytes, a->accepted_bytes, &out->accepted_bytes);
        out->has_mapping_change = out->has_mapping_change && a->mapping_delta.has_value;
        if (a->mapping_delta.has_value)
            over |= __builtin_add_overflow(out->mapping_change_bytes, a->mapping_delta.value,
                                           &out->mapping_change_bytes);
        after = a->after_label ? a->after_label : after;
    }
    if (over)
        out->requested_bytes = out->accepted_bytes = UINT64_MAX;
    out->has_mapping_change = out->has_mapping_change && out->attempted && !over;
    for (size_t i = r->n_samples; after && !out->has_mapping_after && i-- > 0;) {
        const struct rf_residency_sample *x = &r->samples[i];
        if (x->has_mapping && x->label && strcmp(x->label, after) == 0) {
            out->has_mapping_after = true;
            out->mapping_after_bytes = x->mapping_rss_bytes;
        }
    }
}

/* The outcome and its reason from the operation's applications and the boundary's rc. */
static void idle_outcome(const struct rf_report *r, const char *label, bool mutates, int rc,
                         struct rf_idle_result *out)
{
    const struct rf_report_application *wanted = NULL, *nothing = NULL;
    for (size_t i = 0; i < r->n_applications; i++) {
        const struct rf_report_application *a = &r->applications[i];
        if (!of_boundary(a, label))
            continue;
        if (a->attempted && a->accepted_bytes > 0) {
            out->outcome = RF_IDLE_RELEASED;
            return;
        }
        if (!wanted && (a->attempted || (a->plan && a->plan->n_selected > 0)))
            wanted = a;
        if (!nothing)
            nothing = a;
    }
    out->outcome = RF_IDLE_REFUSED;
    if (!mutates) {
        out->outcome = RF_IDLE_NOTHING;
        snprintf(out->reason, sizeof(out->reason), "the policy does not mutate");
    } else if (rc < 0) {
        snprintf(out->reason, sizeof(out->reason), "the idle boundary failed: %s", rf_strerror(rc));
    } else if (wanted && wanted->attempted) {
        snprintf(out->reason, sizeof(out->reason), "the kernel accepted none of the release: %s",
                 wanted->first_error ? rf_strerror(wanted->first_error) : "0 bytes accepted");
    } else if (wanted) {
        snprintf(out->reason, sizeof(out->reason), "%s",
                 wanted->refused_reason ? wanted->refused_reason : "not attempted");
    } else {
        /* Nothing selected: under the target already, or the binding refused selection. */
        out->outcome = RF_IDLE_NOTHING;
        snprintf(out->reason, sizeof(out->reason), "nothing to release: %s",
                 nothing && nothing->plan ? nothing->plan->reason : "no plan was built");
    }
}

int rf_session_idle(struct rf_session *s, bool contexts_alive, struct rf_idle_result *out)
{
    if (!s || !out)
        return -EINVAL;
    memset(out, 0, sizeof(*out));
    out->error = contexts_alive ? rf_session_idle_alive_boundary(s)
                                : rf_session_boundary(s, RF_BOUNDARY_IDLE);
    const struct rf_report *r = rf_session_report(s, RF_REPORT_OPERATION);
    if (!r) {
        out->outcome = RF_IDLE_REFUSED;
        snprintf(out->reason, sizeof(out->reason), "the idle boundary failed: %s",
                 rf_strerror(out->error < 0 ? out->error : -ENOMEM));
        return 0;
    }
    const char *label = contexts_alive ? "idle_alive" : "idle";
    idle_figures(r, label, out);
    idle_outcome(r, label, rf_policy_mutates(s->p.policy), out->error, out);
    s->idle_released = out->outcome == RF_IDLE_RELEASED;
    return 0;
}

int rf_session_stream_window_open(struct rf_session *s, struct forge_window **out)
{
    if (!s || !out)
        return -EINVAL;
    *out = NULL;
    const uint32_t slots = s->p.stream_read_ahead_slots;
    const struct rf_report *r = rf_session_report(s, RF_REPORT_OPERATION);
    const struct rf_stream_report *sr = r ? r->streaming : NULL;
    if (!slots || !s->m || !sr || !sr->plan || !sr->inv)
        return 0;
    /* the expert cache (a MoE model, the plan applied): with the window, or in one of no unit */
    uint32_t c;
    const uint32_t xslots = ses_stream_expert_slots(s, &c);
    if (!xslots && (!sr->pinned || sr->plan->nothing_streams))
        return 0;
    struct rf_stream_window win;
    const uint64_t slot = sr->plan->read_ahead_bytes / slots;
    int rc =
        rf_stream_window_build(sr->inv, sr->plan, slots, slot - slot % sr->inv->page_bytes, &win);
    if (rc == 0 && win.n_units == 0 && !xslots)
        rc = -ENODATA;
    if (rc == 0 && !sr->pinned)
        win.n_units = 0; /* the pins were refused: the dense part streams through the mapping */
    if (rc == 0)
        rc = forge_window_create(s->m, sr->inv, &win, out);
    rf_stream_window_free(&win);
    struct forge_experts *x = NULL;
    if (rc == 0 && xslots)
        rc = forge_experts_create(s->m, sr->inv, ses_stream_experts(s), c, xslots, &x);
    if (rc == -ENODATA) { /* repacked experts are anonymous copies: they stay, nothing streams */
        rc = 0;
        ses_add_warning(s, "streaming: the routed experts were repacked into anonymous copies "
                           "(CPU_REPACK): the expert cache cannot read them (load with "
                           "--no-repack for the expert policy, docs/MOE.md)");
    }
    if (rc < 0 && *out) {
        forge_window_free(*out);
        *out = NULL;
    }
    forge_window_set_experts(*out, x);
    return rc;
}

void rf_session_stream_window_close(struct rf_session *s, struct forge_window *w)
{
    if (!w)
        return;
    struct rf_stream_read_ahead ra;
    struct rf_stream_experts ex;
    forge_window_stats(w, &ra);
    forge_window_experts_stats(w, &ex);
    if (s)
        rf_session_stream_read_ahead(s, &ra);
    if (s && ex.on)
        ses_stream_experts_add(s, &ex);
    forge_window_free(w);
}

int rf_session_operation_begin(struct rf_session *s, const struct rf_operation_start_params *params,
                               struct rf_operation_begin_result *out)
{
    if (!out)
        return -EINVAL;
    memset(out, 0, sizeof(*out));
    struct rf_operation_start st;
    int rc = rf_session_operation_start(s, params, &st);
    if (rc < 0)
        return rc;
    *out = (struct rf_operation_begin_result){
        .admission_decided = st.admission_decided,
        .admission_error = st.admission_error,
        .admission_outcome = st.admission.outcome,
        .refused = st.refused,
        .staged = st.staged,
        .staging_error = st.staging_error,
        .staging_requested_bytes = st.staging_requested_bytes,
        .staging_accepted_bytes = st.staging_accepted_bytes,
        .pinned = st.pinned,
        .pin_error = st.pin_error,
    };
    return 0;
}

/* The installed handle of the window: the forge window run and serve hand to forge_generate. */
struct rf_read_ahead {
    struct forge_window *w;
};

int rf_session_read_ahead_open(struct rf_session *s, struct rf_read_ahead **out)
{
    if (!s || !out)
        return -EINVAL;
    *out = NULL;
    struct forge_window *w;
    int rc = rf_session_stream_window_open(s, &w);
    if (rc < 0 || !w)
        return rc;
    if (!(*out = malloc(sizeof(**out)))) {
        forge_window_free(w);
        return -ENOMEM;
    }
    (*out)->w = w;
    return 0;
}

void rf_read_ahead_context_params(struct rf_read_ahead *w, struct llama_context_params *params)
{
    if (w)
        forge_window_llama_context_params(w->w, params);
}

void rf_read_ahead_decode_end(struct rf_read_ahead *w)
{
    if (w)
        forge_window_decode_end(w->w);
}

void rf_session_read_ahead_close(struct rf_session *s, struct rf_read_ahead *w)
{
    if (!w)
        return;
    rf_session_stream_window_close(s, w->w);
    free(w);
}

int rf_session_context_params_decorate(struct rf_session *s, struct llama_context_params *p,
                                       struct forge_window_decoration **out)
{
    if (!out)
        return -EINVAL;
    *out = NULL;
    if (!s || !p)
        return -EINVAL;
    if (!s->window_hook && !s->ctx_routing)
        return 0;
    return forge_window_decorate_routed(s->window_hook, s->ctx_routing, p, out);
}

int rf_session_stream_window_install(struct rf_session *s, bool *installed)
{
    if (!s || !installed)
        return -EINVAL;
    *installed = false;
    if (!s->window_hook)
        return 0;
    struct forge_window *w = NULL;
    ses_window_remove(s); /* an earlier operation's, not removed at its end */
    int rc = rf_session_stream_window_open(s, &w);
    forge_window_hook_set(s->window_hook, w);
    s->window_installed = w;
    *installed = w != NULL;
    return rc;
}

void ses_window_remove(struct rf_session *s)
{
    if (!s->window_installed)
        return;
    forge_window_hook_set(s->window_hook, NULL); /* after the decode in progress */
    rf_session_stream_window_close(s, s->window_installed);
    s->window_installed = NULL;
}

void rf_session_stream_window_remove(struct rf_session *s)
{
    if (s)
        ses_window_remove(s);
}
