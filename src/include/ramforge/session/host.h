/*
 * The host of a long-running program that keeps a model (run, serve's
 * worker, exec's engine): what starts an operation and what an idle
 * boundary did, decided once here so the programs only print the result.
 *
 *   rf_session_operation_start  admission for this request, staging after
 *                               an idle release (or always, for run), the
 *                               streaming pins and, for contexts the
 *                               application decorated, the read-ahead
 *                               window: one call, one result
 *   rf_session_idle             the idle boundary (contexts alive or not)
 *                               and its outcome with the reason: released,
 *                               nothing to release and why, or refused
 *
 * The installed face of both, for an embedder (ramforge/session.h):
 * rf_session_operation_begin (this start, its result without the internal
 * admission struct) and rf_session_read_ahead_open/_close,
 * rf_read_ahead_context_params, rf_read_ahead_decode_end (the window
 * below, behind an opaque handle).
 *
 * The idle clock that says when the idle boundary is due is
 * ramforge/core/idle_clock.h (core). Both calls are session calls: not
 * concurrent with another call on the same session (the caller's session
 * lock), as ramforge/session.h says.
 */
#ifndef RAMFORGE_HOST_H
#define RAMFORGE_HOST_H

#include <stdbool.h>
#include <stdint.h>

#include "ramforge/core/admission.h"
#include "ramforge/error.h"
#include "ramforge/session.h"

#ifdef __cplusplus
extern "C" {
#endif

/* struct rf_operation_start_params: ramforge/session.h (rf_session_operation_begin's). */
struct rf_operation_start {
    bool admission_decided;               /* admission below is this operation's */
    int admission_error;                  /* rf_session_admit's error, 0 if none */
    struct rf_admission_result admission; /* when admission_decided */
    bool refused;                         /* admission refused it: nothing staged or
                                             pinned; the caller ends the operation */
    bool staged;                          /* rf_session_stage ran */
    int staging_error;                    /* its error, 0 if none */
    uint64_t staging_requested_bytes;     /* the staging plan's selected bytes (requested) */
    uint64_t staging_accepted_bytes;      /* bytes WILLNEED accepted (native_accepted) */
    bool pinned;                          /* the streaming pins are held */
    int pin_error;                        /* rf_session_stream_pin's error, 0 if none */
};

/*
 * Starts the operation of one request: admission (params->admit), then,
 * unless refused, staging (params->staging_budget_bytes, after an idle
 * release or always) and the streaming policy's pins (undone at the
 * operation's boundary). Fills *out; every step's error is in *out, not
 * returned. Returns 0, or -EINVAL (NULL s, params or out).
 */
int rf_session_operation_start(struct rf_session *s, const struct rf_operation_start_params *params,
                               struct rf_operation_start *out);

enum rf_idle_outcome {
    RF_IDLE_RELEASED = 0, /* the kernel accepted bytes of the release */
    RF_IDLE_NOTHING,      /* nothing to release (under the target, a policy that does not
                             mutate, nothing selected): the weights stay resident */
    RF_IDLE_REFUSED,      /* a release was wanted and did not happen (refused, failed,
                             0 bytes accepted) */
};

struct rf_idle_result {
    enum rf_idle_outcome outcome;
    char reason[RF_ERR_MAX];      /* "" when released; else why not, one line */
    int error;                    /* the boundary's error, 0 if none */
    bool attempted;               /* a release was submitted to the kernel */
    uint64_t requested_bytes;     /* bytes of the release ranges submitted; UINT64_MAX:
                                     the sum overflows (unknown) */
    uint64_t accepted_bytes;      /* bytes madvise accepted, not proof of reclamation;
                                     UINT64_MAX: unknown */
    bool has_mapping_change;      /* every release measured the mapping before and after */
    int64_t mapping_change_bytes; /* the mapping RSS's measured change, bytes */
    bool has_mapping_after;       /* the sample after the last release was found */
    uint64_t mapping_after_bytes; /* the mapping RSS it measured, bytes */
};

struct forge_window;

/*
 * The read-ahead window over the current operation's applied streaming
 * plan (docs/STREAMING.md): built when params.stream_read_ahead_slots > 0,
 * the plan's pins are held (rf_session_operation_start) and something
 * streams; *out is then a window the caller hands to its decode (forge's
 * generation: forge_generate_params.window; its eval callback points each
 * streamed weight at the ring), else NULL with 0. A context created with
 * the window must not outlive it. Errors: -EINVAL (NULL s or out), -ENODATA
 * (the plan's window holds no tensor), forge_window_create's: the caller
 * warns, and the streamed layers are read by the decode's faults.
 */
int rf_session_stream_window_open(struct rf_session *s, struct forge_window **out);

/* Records the window's figures (the operation's streaming.read_ahead) and frees it; NULL w:
   nothing. */
void rf_session_stream_window_close(struct rf_session *s, struct forge_window *w);

struct forge_window_decoration;
struct llama_context_params;

/*
 * llama.h's style for a program that creates its own contexts (ramforge
 * exec's llama_init_from_model): decorates the application's params p
 * before the context is created, so its decodes compute from the window an
 * operation installs (rf_session_stream_window_install), chaining the cb_eval p had
 * with its user data. *out is the context's decoration (NULL, p untouched:
 * the session has no window to give, its policy is not streaming with a
 * read-ahead ring): free it with forge_window_decoration_free after
 * llama_free of the context, before rf_session_free. Each decode of the
 * context is bracketed by forge_window_hook_decode_begin/_end(*out) (the
 * window serves one decode at a time: while one is installed, the
 * decorated contexts of the model decode one after the other;
 * ramforge/forge/forge_window.h). Thread-safe (no session state changes).
 * Errors: -EINVAL (a NULL argument), -ENOMEM.
 */
int rf_session_context_params_decorate(struct rf_session *s, struct llama_context_params *p,
                                       struct forge_window_decoration **out);

/*
 * After rf_session_operation_start took the pins: opens the read-ahead
 * window and installs it for the contexts decorated with
 * rf_session_context_params_decorate, until rf_session_stream_window_remove
 * or the operation's end (an earlier operation's window still installed is
 * removed first). *installed says whether the decorated contexts' decodes
 * compute the streamed tensors from it. Returns 0 (nothing to install: no
 * decorated context's hook, nothing streams), or rf_session_stream_window_open's
 * error: the caller warns, the streamed layers are read by the decode's faults.
 */
int rf_session_stream_window_install(struct rf_session *s, bool *installed);

/*
 * Removes the window rf_session_stream_window_install installed (none: nothing),
 * after the decode in progress, and records its figures as the
 * operation's streaming.read_ahead. The operation's end does it too; a
 * program calls it before a boundary so that the ring is freed first.
 */
void rf_session_stream_window_remove(struct rf_session *s);

/* "released", "nothing", "refused"; NULL outside the enum. */
const char *rf_idle_outcome_name(enum rf_idle_outcome o);

/*
 * The idle boundary: with contexts_alive, rf_session_idle_alive_boundary
 * (selection with contexts kept, none in flight), else
 * rf_session_boundary(RF_BOUNDARY_IDLE); then its outcome from the
 * releases of this boundary (the applications labelled "idle" or
 * "idle_alive") into *out. The next rf_session_operation_start
 * stages when this one released bytes. Does not end the operation.
 * Returns 0, or -EINVAL (NULL s or out); the boundary's own error is
 * out->error (the outcome then refused).
 */
int rf_session_idle(struct rf_session *s, bool contexts_alive, struct rf_idle_result *out);

#ifdef __cplusplus
}
#endif

#endif
