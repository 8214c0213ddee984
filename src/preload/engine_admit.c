/*
 * Admission of the context a program really creates (docs/EXEC.md, "The
 * context"): llama_init_from_model's params reach the engine before
 * libllama allocates the KV cache, so a context the binding limit cannot
 * hold is refused there (the program gets NULL, its own failed-allocation
 * path) rather than killed by the kernel later. llama-server's default
 * context (0: the model's training context) is known only here, not
 * before the load. An operation's admission while the program decodes is
 * said (a warning once per outcome and cause, the report, the metrics), never
 * acted on.
 */
#include "preload_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "ramforge/core/admission.h"
#include "ramforge/core/kv_types.h"
#include "ramforge/core/policy.h"
#include "ramforge/session/host.h"
#include "ramforge/session/session_ext.h"

int exec_context_admit(struct exec_model *m, const struct forge_exec_context *want)
{
    const struct exec_config *c = &exec_engine.cfg;
    char what[PATH_MAX + 96];
    int ret = 0;

    if (c->params.policy == RF_POLICY_OFF || c->params.admission_mode == RF_ADMISSION_OFF)
        return 0;
    int n = snprintf(what, sizeof(what), "creating a context of %u tokens for %s", want->n_ctx,
                     m->path);
    if (want->n_seq_max > 1 && n > 0 && (size_t)n < sizeof(what))
        n += snprintf(what + n, sizeof(what) - (size_t)n, " (%u sequences)", want->n_seq_max);
    const char *k = rf_kv_type_name(want->type_k), *v = rf_kv_type_name(want->type_v);
    if ((want->type_k != RF_KV_TYPE_F16 || want->type_v != RF_KV_TYPE_F16) && n > 0 &&
        (size_t)n < sizeof(what))
        snprintf(what + n, sizeof(what) - (size_t)n, " (K cache %s, V cache %s)", k ? k : "?",
                 v ? v : "?");
    struct rf_admission_result *adm = calloc(1, sizeof(*adm));
    if (!adm) {
        exec_engine.host->say("exec: warning: out of memory: no admission before %s", what);
        return 0; /* the program's own allocation fails next, or not: nothing to tell it */
    }
    const struct rf_operation_request req = {.n_ctx = want->n_ctx,
                                             .has_cache_types = true,
                                             .type_k = want->type_k,
                                             .type_v = want->type_v};
    pthread_mutex_lock(&exec_engine.session_mu);
    int rc = want->n_ctx ? rf_session_admit_result(m->s, &req, adm) : -EINVAL;
    if (rc < 0) {
        exec_engine.host->say("exec: warning: no admission before %s: %s: its memory is not "
                              "checked before the kernel sees it",
                              what, want->n_ctx ? rf_strerror(rc) : "the context size is unknown");
    } else if (adm->refused) {
        exec_say_admission(what, m->path, adm);
        m->op_open = true; /* the decision ends an operation: the report says it */
        exec_op_end(m, -1);
        ret = -1;
    } else if (adm->outcome == RF_ADMIT_UNKNOWN ||
               (adm->outcome != RF_ADMIT_ADMITTED && c->verbose)) {
        exec_say_admission(what, m->path, adm);
    }
    pthread_mutex_unlock(&exec_engine.session_mu);
    free(adm);
    return ret;
}

/* The report's warning of an operation admission did not admit (static: the session borrows it). */
#define OP_REJECTED_WARNING                                                                        \
    "an operation's admission did not admit it while the program decoded (admission.reason "       \
    "says what is over and by how much): exec warns, it cannot stop a decode under way"

void exec_op_admission(struct exec_model *m, const struct rf_operation_start *st)
{
    if (!st->admission_decided)
        return;
    const struct rf_admission_result *a = &st->admission;
    bool rejected = a->outcome == RF_ADMIT_REJECTED || a->outcome == RF_ADMIT_UNKNOWN;
    /* said once per outcome and cause: a charge that hovers at the limit (page cache
       reclaimed, refaulted) flips between admitted and rejected without a new line */
    bool change =
        rejected && (!m->op_said || a->outcome != m->op_outcome || a->cause != m->op_cause);
    m->op_over_bytes = a->has_hard_excess ? a->hard_excess_bytes : 0;
    if (!rejected) {
        if (m->op_rejected && exec_engine.cfg.verbose)
            exec_engine.host->say("exec: %s: operations admitted again", m->path);
        m->op_rejected = false;
        return;
    }
    m->op_rejected = m->op_said = true;
    m->op_rejections++;
    rf_session_add_warning(m->s, OP_REJECTED_WARNING);
    if (!change)
        return;
    m->op_outcome = a->outcome;
    m->op_cause = a->cause;
    char head[512], line[1024], text[sizeof(line)];
    rf_admission_headline(a, head, sizeof(head)); /* what is over and by how much */
    snprintf(line, sizeof(line),
             "exec: warning: %s: admission of an operation while the program decodes: %s (%s): "
             "%s; the decode goes on (exec cannot stop it, docs/EXEC.md)",
             m->path, rf_admission_outcome_name(a->outcome), rf_admission_cause_name(a->cause),
             head);
    exec_engine.host->say("%s", rf_size_text(line, text, sizeof(text)));
}
