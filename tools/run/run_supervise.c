/*
 * run --memory-limit: the supervising parent's side of a run. The kernel's
 * OOM killer ends the child with SIGKILL, so it cannot write its report;
 * the parent can. Before the fork the parent maps a small shared anonymous
 * page set (touched by the parent, so charged outside the run's cgroup)
 * where the child records what the parent needs: its last admission
 * decision, what it was doing, and whether it wrote its report. When the
 * child was killed without writing it, the parent writes the report (every
 * loaded-model section null with what ended the run) or says why none
 * could be written.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common/cli.h"
#include "common/limit_cgroup.h"
#include "ramforge/error.h"
#include "ramforge/session/session_ext.h"
#include "run.h"

struct run_shared {
    bool has_admission;
    struct rf_admission_result admission; /* the child's last decision (static strings shared:
                                             the same image after the fork) */
    const char *stage;                    /* static: what the child was doing */
    bool report_written;                  /* the child wrote its report (or its refusal's) */
};

/* The parent's hook data. */
struct run_parent {
    const struct run_options *o;
    struct rf_session_params params;
    struct run_shared *sh;
};

void run_shared_stage(struct run_shared *sh, const char *stage)
{
    if (sh)
        sh->stage = stage;
}

void run_shared_admission(struct run_shared *sh, const struct rf_admission_result *a)
{
    if (!sh || !a)
        return;
    sh->has_admission = false; /* a torn copy is never read as whole: the parent reads after */
    sh->admission = *a;
    sh->has_admission = true;
}

void run_shared_written(struct run_shared *sh)
{
    if (sh)
        sh->report_written = true;
}

/* After the child ended: its report, when it was killed before writing one and one was asked. */
static void ended(const struct limit_end *e, enum limit_end_kind kind, void *ud)
{
    const struct run_parent *rp = ud;
    const char *path = rp->o->sess.json_path;
    char line[512], why[768];
    char *text = NULL;
    int rc;

    if ((kind != LIMIT_END_OOM && kind != LIMIT_END_KILLED) || !path ||
        (rp->sh && rp->sh->report_written))
        return;
    if (!rp->sh) {
        cli_error("no report was written to %s: the run was killed before it wrote one (its "
                  "supervising process could not map the page it would have recorded to)",
                  path);
        return;
    }
    limit_cgroup_end_text(e, line, sizeof(line));
    snprintf(why, sizeof(why), "%s; the run was %s", line,
             rp->sh->stage ? rp->sh->stage : "starting");
    const struct rf_admission_result *adm = rp->sh->has_admission ? &rp->sh->admission : NULL;
    if (run_json_to_stdout(rp->o)) {
        rc = rf_session_ended_report(rp->o->sess.model, rp->params, adm, why, NULL, &text);
        if (rc == 0)
            rc = run_put_json(text);
        free(text);
    } else {
        rc = rf_session_ended_report(rp->o->sess.model, rp->params, adm, why, path, NULL);
    }
    if (rc < 0)
        cli_error("no report was written to %s: the run was killed before it wrote one, and its "
                  "supervising process could not: %s",
                  path, rf_strerror(rc));
    else if (!run_json_to_stdout(rp->o))
        cli_error("the run was killed before it wrote its report: its supervising process wrote "
                  "%s (every loaded-model section null, with what ended the run)",
                  path);
}

int run_supervise(const struct run_options *o, struct rf_session_params params,
                  struct run_shared **shared)
{
    struct run_parent rp = {.o = o, .params = params};
    const struct limit_parent hooks = {.ended = ended, .ud = &rp};
    int rc;

    *shared = NULL;
    rp.sh = mmap(NULL, sizeof(*rp.sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (rp.sh == MAP_FAILED)
        rp.sh = NULL; /* the run goes on; a killed run's report cannot be written */
    else
        memset(rp.sh, 0, sizeof(*rp.sh)); /* the parent's pages: charged outside the limit */
    rc = limit_cgroup_supervise("rf-run-", &o->sess.memory_limit, o->sess.quiet,
                                o->sess.policy == RF_POLICY_STREAMING, &hooks);
    if (rc < 0) {
        *shared = rp.sh; /* the child: unmapped at its exit */
        return rc;
    }
    if (rp.sh)
        munmap(rp.sh, sizeof(*rp.sh));
    return rc;
}
