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
#include <string.h>

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
    pthread_mutex_lock(&exec_engine.table_mu); /* the prompt cache's saves read it */
    m->room_short = a->outcome == RF_ADMIT_REJECTED && a->cause == RF_ADMIT_CAUSE_HARD_LIMIT;
    pthread_mutex_unlock(&exec_engine.table_mu);
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

/*
 * Whether what (a refusal, a bad file) of path is new: not what the engine said of the last
 * load. llama-server asks twice, its --fit pass and then its load, and the second answer is
 * the first's: said once (with -v, again in a few words). Under table_mu.
 */
bool exec_said_first(const char *what, const char *path)
{
    char key[sizeof(exec_engine.said)];
    snprintf(key, sizeof(key), "%s:%s", what, path);
    bool first = strcmp(exec_engine.said, key) != 0;
    snprintf(exec_engine.said, sizeof(exec_engine.said), "%s", key);
    if (!first && exec_engine.cfg.verbose)
        exec_engine.host->say("exec: %s: %s again (another load attempt of the process)", path,
                              what);
    return first;
}

/*
 * The decision on what ("loading PATH", "creating a context of N tokens for PATH") as run says it
 * (ramforge/core/admission.h): the headline and the ways out, the whole reason with -v, every
 * "N bytes" in IEC units (rf_size_text); a refusal of path once (exec_said_first).
 */
void exec_say_admission(const char *what, const char *path, const struct rf_admission_result *adm)
{
    static char head[512], ways[1024], line[8192], text[sizeof(line)]; /* under table_mu */
    pthread_mutex_lock(&exec_engine.table_mu);
    if (adm->refused && !exec_said_first("admission refused it", path)) {
        pthread_mutex_unlock(&exec_engine.table_mu);
        return;
    }
    rf_admission_headline(adm, head, sizeof(head));
    rf_admission_ways_out(adm, ways, sizeof(ways));
    int n =
        adm->refused
            ? snprintf(line, sizeof(line), "exec: admission refused %s (%s, --admission %s): %s",
                       what, rf_admission_outcome_name(adm->outcome),
                       rf_admission_mode_name(adm->mode), head)
            : snprintf(line, sizeof(line), "exec: warning: admission before %s: %s", what, head);
    for (char *w = ways, *next; *w && n >= 0 && (size_t)n < sizeof(line); w = next) {
        next = w + strcspn(w, "\n");
        if (*next)
            *next++ = '\0';
        n += snprintf(line + n, sizeof(line) - (size_t)n, "\n  way out: %s", w);
    }
    if (exec_engine.cfg.verbose && n >= 0 && (size_t)n < sizeof(line))
        snprintf(line + n, sizeof(line) - (size_t)n, "\n  in full: %s", adm->reason);
    exec_engine.host->say("%s", rf_size_text(line, text, sizeof(text)));
    pthread_mutex_unlock(&exec_engine.table_mu);
}
