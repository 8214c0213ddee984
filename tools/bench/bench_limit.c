/*
 * bench --memory-limit (see bench_limit.h): the run cgroups, the
 * calibration run and the per-token bound.
 */
#include "bench_limit.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "bench_cleanup.h"
#include "bench_report.h"
#include "bench_spawn.h"
#include "common/cli.h"
#include "common/limit_cgroup.h"
#include "ramforge/core/json_util.h"

int bench_limit_cgroup_create(const struct bench_options *o, size_t k,
                              struct rfsys_cgroup_child *cg, char *reason, size_t len)
{
    char name[64];

    snprintf(name, sizeof(name), BENCH_CGROUP_PREFIX "%ld-%zu", (long)getpid(), k + 1);
    return limit_cgroup_create(name, o->memory_limit, cg, reason, len);
}

static void set_u(struct bench_row *r, enum bench_metric m, bool has, uint64_t u)
{
    if (has)
        r->v[m] = (struct bench_value){.has = true, .u = u};
}

int bench_limit_cgroup_finish(struct rfsys_cgroup_child *cg, struct bench_row *r)
{
    struct rfsys_cgroup_child_stats st;
    int rc = rfsys_cgroup_child_read(cg, &st);

    if (rc < 0) {
        cli_error("cannot read the run cgroup %s: %s", cg->path, strerror(-rc));
    } else {
        set_u(r, BENCH_M_RUN_CG_LIMIT, st.has_limit && !st.limit_max, st.limit_bytes);
        set_u(r, BENCH_M_RUN_CG_FAILCNT, st.has_failcnt, st.failcnt);
        set_u(r, BENCH_M_RUN_CG_HIGH, st.has_events, st.events_high);
        set_u(r, BENCH_M_RUN_CG_MAX, st.has_events, st.events_max);
        set_u(r, BENCH_M_RUN_CG_OOM, st.has_events, st.events_oom);
        set_u(r, BENCH_M_RUN_CG_OOM_KILL, st.has_oom_kill, st.oom_kill);
        set_u(r, BENCH_M_RUN_CG_PEAK, st.has_peak, st.peak_bytes);
        if (st.has_oom_kill && st.oom_kill > 0 && r->run_status != 0) {
            char b[32];
            snprintf(r->reason, sizeof(r->reason),
                     "oom-killed: the OOM killer of the run's memory cgroup (limit %s) killed it "
                     "(exit status %d)",
                     cli_format_bytes(st.limit_bytes, false, b, sizeof(b)), r->run_status);
        }
    }
    rc = rfsys_cgroup_child_remove(cg);
    if (rc < 0)
        cli_error("cannot remove the run cgroup %s: %s", cg->path, strerror(-rc));
    else
        cg->created = false;
    bench_cleanup_set_cgroup(NULL);
    return rc;
}

int bench_limit_calibrate(const struct bench_options *o, struct bench_calibration *cal)
{
    struct bench_options co = *o; /* shallow: no word is freed through it */
    struct bench_residency prep;
    enum bench_label label;
    struct bench_process proc;
    struct bench_row row;
    char base[PATH_MAX], path[PATH_MAX + 8], err[BENCH_ERR_MAX];
    int rc;

    memset(cal, 0, sizeof(*cal));
    memset(&row, 0, sizeof(row));
    co.variants[0].policy = RF_POLICY_OBSERVE;
    co.variants[0].n_args = 0;
    if (bench_prepare_condition(BENCH_COND_WARM, o->model, &prep, &label, err) < 0) {
        snprintf(cal->error, sizeof(cal->error), "%s", err);
        return -1;
    }
    snprintf(cal->report, sizeof(cal->report), "runs/calibration-warm.json");
    snprintf(base, sizeof(base), "%s/runs/calibration-warm", o->out_dir);
    rc = bench_spawn_run(&co, 0, o->model, base, NULL, &proc);
    if (rc < 0) {
        snprintf(cal->error, sizeof(cal->error), "cannot start the calibration run: %s",
                 strerror(-rc));
        return -1;
    }
    cal->ran = true;
    cal->major_faults = proc.major_faults;
    cal->read_bytes = proc.read_bytes;
    snprintf(path, sizeof(path), "%s.err", base);
    if (proc.status != 0) {
        bench_run_message(path, err, sizeof(err));
        snprintf(cal->error, sizeof(cal->error), "the calibration run exited with status %d: %s",
                 proc.status, err);
        return proc.status == RF_EXIT_USAGE ? RF_EXIT_USAGE : -1;
    }
    snprintf(path, sizeof(path), "%s.json", base);
    if (bench_report_read(path, &row, err, sizeof(err)) < 0) {
        snprintf(cal->error, sizeof(cal->error), "%s", err);
        return -1;
    }
    cal->in = row.bound_in;
    if (!row.v[BENCH_M_DECODE_TPS].has || row.v[BENCH_M_DECODE_TPS].d <= 0) {
        snprintf(cal->error, sizeof(cal->error),
                 "the calibration run has no decode tokens/s (needs -n 2 or more)");
        return -1;
    }
    if (label != BENCH_LABEL_WARM)
        snprintf(cal->error, sizeof(cal->error),
                 "the model file was %s, not warm, when the calibration run started",
                 bench_label_name(label));
    cal->tps = row.v[BENCH_M_DECODE_TPS].d;
    cal->ok = true;
    return -1;
}

/* The bound object of one group g of condition cond (rows: all the runs). */
static json_t *group_bound(const struct bench_options *o, const struct bench_calibration *cal,
                           double bw, enum bench_condition cond, const json_t *g,
                           const struct bench_row *rows, size_t n_rows)
{
    const struct bench_bound_inputs *in = cal->ok ? &cal->in : NULL;
    const char *why = cal->ok ? NULL : "no calibration run completed";

    for (size_t i = 0; i < n_rows; i++) {
        const struct bench_row *r = &rows[i];
        /* one bound per condition: the first plan of any group, else the calibration */
        if (r->cond == cond && r->run_status == 0 && r->bound_in.has_r && r->bound_in.has_w) {
            in = &r->bound_in;
            break;
        }
    }
    bool has_r = false;
    uint64_t r_bytes = 0;
    if (in && in->has_r) {
        has_r = true;
        r_bytes = in->r_bytes;
    } else if (in && in->has_parts) {
        uint64_t used = in->anonymous_bytes + in->kv_bytes + in->scratch_bytes + in->runtime_bytes;
        has_r = true;
        r_bytes = used < o->memory_limit ? o->memory_limit - used : 0;
    }
    if (in && !in->has_w)
        why = "the report has no file-backed weight bytes (W)";
    else if (in && !has_r)
        why = "the report's ledger has no anonymous, KV or scratch bytes (R)";
    else if (bw <= 0)
        why = "the physical read limit (B) was not measured";
    bool ok = !why && in;
    double tc = cal->ok ? 1e9 / cal->tps : 0;
    double stream = ok && in->w_bytes > r_bytes ? (double)(in->w_bytes - r_bytes) : 0;
    double bound_ns = ok ? tc + stream / bw * 1e9 : 0;
    const json_t *tps =
        json_object_get(json_object_get(g, "median"), bench_metric_name(BENCH_M_DECODE_TPS));
    bool has_tps = json_is_number(tps) && json_number_value(tps) > 0;
    double per_token = has_tps ? 1e9 / json_number_value(tps) : 0;
    json_t *b = json_object();

    json_object_set_new(b, "t_c_ns", cal->ok ? json_real(tc) : json_null());
    json_object_set_new(b, "w_bytes", rf_json_u64(in && in->has_w, in ? in->w_bytes : 0));
    json_object_set_new(b, "r_bytes", rf_json_u64(has_r, r_bytes));
    json_object_set_new(b, "b_bytes_per_s", bw > 0 ? json_real(bw) : json_null());
    json_object_set_new(b, "runtime_known",
                        in && !in->has_r ? json_boolean(in->runtime_known) : json_null());
    json_object_set_new(b, "bound_ns_per_token", ok ? json_real(bound_ns) : json_null());
    json_object_set_new(b, "bound_tokens_per_s", ok ? json_real(1e9 / bound_ns) : json_null());
    json_object_set_new(b, "decode_ns_per_token", has_tps ? json_real(per_token) : json_null());
    json_object_set_new(b, "ratio_to_bound",
                        ok && has_tps ? json_real(per_token / bound_ns) : json_null());
    json_object_set_new(b, "inputs_source",
                        in && in->source ? rf_json_str(in->source) : json_null());
    json_object_set_new(b, "reason", why ? rf_json_str(why) : json_null());
    return b;
}

json_t *bench_limit_json(const struct bench_options *o, const struct bench_calibration *cal,
                         const struct bench_copy *cp, const struct bench_row *rows, size_t n_rows,
                         json_t *groups)
{
    double bw = cp->read_measured && cp->read_ns > 0
                    ? (double)cp->read_bytes * 1e9 / (double)cp->read_ns
                    : 0;
    json_t *m = json_object(), *c = json_object();
    size_t k = 0;

    if (!m || !c) {
        json_decref(m);
        json_decref(c);
        return NULL;
    }
    json_object_set_new(m, "limit_bytes", json_integer((json_int_t)o->memory_limit));
    json_object_set_new(c, "ran", json_boolean(cal->ran));
    json_object_set_new(c, "completed", json_boolean(cal->ok));
    json_object_set_new(c, "policy", json_string(rf_policy_name(RF_POLICY_OBSERVE)));
    json_object_set_new(c, "condition", json_string(bench_condition_name(BENCH_COND_WARM)));
    json_object_set_new(c, "decode_tokens_per_s", cal->ok ? json_real(cal->tps) : json_null());
    json_object_set_new(c, "major_faults", rf_json_u64(cal->ran, cal->major_faults));
    json_object_set_new(c, "read_bytes", rf_json_u64(cal->ran, cal->read_bytes));
    json_object_set_new(c, "report", cal->ran ? rf_json_str(cal->report) : json_null());
    json_object_set_new(c, "error", cal->error[0] ? rf_json_str(cal->error) : json_null());
    json_object_set_new(m, "calibration", c);
    json_object_set_new(
        m, "note",
        json_string("each run in a fresh child memory cgroup of bench's own with this limit, "
                    "joined before exec, removed after the run. bound per token = t_c + max(0, "
                    "W - R) / B: t_c = 1 / the calibration run's decode tokens/s (warm, no "
                    "limit); one bound per condition, the same for every policy: W, R from the "
                    "first run report of the condition with streaming.plan (W = "
                    "working_set_bytes, R = limit_bytes - fixed_bytes), else from the "
                    "calibration report (W = the inventory's file-backed logical bytes, R = "
                    "limit - AnonymousWeights - KvCache - GraphScratch - Runtime, unknown "
                    "Runtime as 0); B = physical_limit's bandwidth. ratio_to_bound = "
                    "median decode per-token time / bound (1 = at the bound)"));
    for (size_t ci = 0; ci < o->n_conditions; ci++)
        for (size_t v = 0; v < o->n_variants; v++, k++) {
            json_t *g = json_array_get(groups, k);
            if (g)
                json_object_set_new(g, "bound",
                                    group_bound(o, cal, bw, o->conditions[ci], g, rows, n_rows));
        }
    return m;
}
