/*
 * The results of `ramforge bench` (see bench_results.h): results.tsv row by
 * row, and summary.json with its label counts, medians and ratios, the
 * isolated copy and the physical limit.
 */
#include "bench_results.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench_limit.h"
#include "bench_spawn.h"
#include "ramforge/core/json_util.h"
#include "ramforge/core/policy.h"
#include "ramforge/session/metrics.h"

#ifndef RAMFORGE_VERSION
#define RAMFORGE_VERSION "0.0.0"
#endif

/* Per metric: its results.tsv column and summary.json median key, and its kind. */
static const struct {
    const char *name; /* column and summary key */
    bool real;        /* tokens/s: 3 decimals; else an integer */
} metric_info[BENCH_M_N] = {
    [BENCH_M_LOAD] = {"load_ns", false},
    [BENCH_M_STAGING] = {"staging_ns", false},
    [BENCH_M_TTFT] = {"ttft_ns", false},
    [BENCH_M_DECODE_TPS] = {"decode_tokens_per_s", true},
    [BENCH_M_E2E] = {"end_to_end_ns", false},
    [BENCH_M_PROCESS] = {"process_ns", false},
    [BENCH_M_PEAK_RSS] = {"peak_rss_bytes", false},
    [BENCH_M_MAXRSS] = {"rusage_maxrss_bytes", false},
    [BENCH_M_MAPPING_RSS] = {"mapping_rss_bytes", false},
    [BENCH_M_CG_CURRENT] = {"cgroup_current_bytes", false},
    [BENCH_M_CG_PEAK] = {"cgroup_peak_bytes", false},
    [BENCH_M_MAJFLT] = {"major_faults", false},
    [BENCH_M_READ_BYTES] = {"read_bytes", false},
    [BENCH_M_RUN_CG_LIMIT] = {"run_cgroup_limit_bytes", false},
    [BENCH_M_RUN_CG_FAILCNT] = {"run_cgroup_failcnt", false},
    [BENCH_M_RUN_CG_HIGH] = {"run_cgroup_events_high", false},
    [BENCH_M_RUN_CG_MAX] = {"run_cgroup_events_max", false},
    [BENCH_M_RUN_CG_OOM] = {"run_cgroup_events_oom", false},
    [BENCH_M_RUN_CG_OOM_KILL] = {"run_cgroup_oom_kill", false},
    [BENCH_M_RUN_CG_PEAK] = {"run_cgroup_peak_bytes", false},
};

const char *bench_metric_name(enum bench_metric m)
{
    return (unsigned)m < BENCH_M_N ? metric_info[m].name : NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double value_of(const struct bench_value *v, enum bench_metric m)
{
    return metric_info[m].real ? v->d : (double)v->u;
}

/*
 * The median of metric m over the rows of (cond, variant) that completed
 * with the condition's own label; false when none has the figure. scratch
 * holds at least n_rows doubles.
 */
static bool group_median(const struct bench_row *rows, size_t n_rows, enum bench_condition cond,
                         size_t variant, enum bench_metric m, double *scratch, double *out)
{
    size_t n = 0;
    for (size_t i = 0; i < n_rows; i++) {
        const struct bench_row *r = &rows[i];
        if (r->cond == cond && r->variant == variant && r->run_status == 0 &&
            r->label == bench_own_label(cond) && r->v[m].has)
            scratch[n++] = value_of(&r->v[m], m);
    }
    if (n == 0)
        return false;
    qsort(scratch, n, sizeof(double), cmp_double);
    *out = n % 2 ? scratch[n / 2] : (scratch[n / 2 - 1] + scratch[n / 2]) / 2.0;
    return true;
}

/* An integral value as a JSON integer (exact below 2^53), else a real. */
static json_t *json_number(double x)
{
    if (x >= 0 && x < 9007199254740992.0 && (double)(json_int_t)x == x)
        return json_integer((json_int_t)x);
    return json_real(x);
}

static json_t *json_str_or_null(const char *s)
{
    json_t *j = s && *s ? rf_json_str(s) : NULL;
    return j ? j : json_null();
}

static void tsv_value(FILE *f, const struct bench_value *v, enum bench_metric m)
{
    if (!v->has)
        return;
    if (metric_info[m].real)
        fprintf(f, "%.3f", v->d);
    else
        fprintf(f, "%" PRIu64, v->u);
}

int bench_write_tsv(const char *path, const struct bench_options *o, const struct bench_row *rows,
                    size_t n_rows)
{
    char tmp[PATH_MAX];
    int fd, rc = 0;
    FILE *f;

    if (snprintf(tmp, sizeof(tmp), "%s.tmp.XXXXXX", path) >= (int)sizeof(tmp))
        return -ENAMETOOLONG;
    fd = mkstemp(tmp);
    if (fd < 0)
        return -errno;
    f = fdopen(fd, "w");
    if (!f) {
        rc = -errno;
        close(fd);
        unlink(tmp);
        return rc;
    }
    fprintf(f, "%s\n", BENCH_TSV_COLUMNS);
    for (size_t i = 0; i < n_rows; i++) {
        const struct bench_row *r = &rows[i];
        const struct bench_variant *var = &o->variants[r->variant];
        fprintf(f, "%s\t%s\t%s\t%s\t%lld\t", bench_condition_name(r->cond),
                bench_label_name(r->label), var->name, rf_policy_name(var->policy), r->rep);
        if (r->run_status >= 0)
            fprintf(f, "%d", r->run_status);
        for (int m = 0; m < BENCH_M_N; m++) {
            fputc('\t', f);
            tsv_value(f, &r->v[m], (enum bench_metric)m);
        }
        fprintf(f, "\t%s\t", r->fingerprint);
        if (r->probed)
            fprintf(f, "%s\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64,
                    rfsys_page_method_name(r->prep.method), r->prep.resident_pages,
                    r->prep.nonresident_pages, r->prep.unknown_pages);
        else
            fputs("\t\t\t", f);
        fprintf(f, "\t%s\t", r->report);
        for (const char *c = r->reason; *c; c++) /* one cell: no tab or newline */
            fputc(*c == '\t' || *c == '\n' || *c == '\r' ? ' ' : *c, f);
        fputc('\n', f);
    }
    if (fflush(f) != 0 || fsync(fd) < 0)
        rc = -errno;
    if (fclose(f) != 0 && rc == 0)
        rc = -errno;
    if (rc == 0 && (chmod(tmp, 0644) < 0 || rename(tmp, path) < 0))
        rc = -errno;
    if (rc < 0)
        unlink(tmp);
    return rc;
}

static json_t *labels_json(const unsigned counts[BENCH_LABEL_N])
{
    json_t *j = json_object();
    for (int l = 0; j && l < BENCH_LABEL_N; l++)
        json_object_set_new(j, bench_label_name((enum bench_label)l), json_integer(counts[l]));
    return j;
}

static json_t *physical_limit_json(const struct bench_copy *cp)
{
    json_t *j = json_object();
    bool ok = cp->read_measured && cp->read_ns > 0 && cp->read_bytes > 0;
    double secs = ok ? (double)cp->read_ns / 1e9 : 0, bw = ok ? (double)cp->read_bytes / secs : 0;
    const char *reason = NULL;

    if (!cp->wanted)
        reason = "no isolated-nonresident condition: no cold copy was read";
    else if (!cp->made)
        reason = "the isolated copy could not be made";
    else if (!ok)
        reason = cp->read_error[0] ? cp->read_error : "the cold read did not run";
    json_object_set_new(j, "bytes", rf_json_u64(ok, cp->read_bytes));
    json_object_set_new(j, "read_seconds", ok ? json_real(secs) : json_null());
    json_object_set_new(j, "read_mb_per_s", ok ? json_real(bw / 1e6) : json_null());
    json_object_set_new(j, "limit_seconds",
                        ok ? json_real((double)cp->info.bytes / bw) : json_null());
    json_object_set_new(j, "label",
                        ok ? json_string(bench_label_name(cp->read_label)) : json_null());
    json_object_set_new(j, "method",
                        json_string("the isolated copy fsync'd, dropped with POSIX_FADV_DONTNEED "
                                    "and verified, then read start to end with 8 MiB "
                                    "read(2)s (POSIX_FADV_SEQUENTIAL), timed with "
                                    "CLOCK_MONOTONIC, three times, the fastest kept; MB = 10^6 "
                                    "bytes; limit_seconds = model "
                                    "size / that bandwidth. label: the copy's verified state "
                                    "before the read (controlled: every page nonresident)"));
    json_object_set_new(j, "reason", json_str_or_null(reason));
    return j;
}

json_t *bench_summary_json(const struct bench_options *o, uint64_t model_bytes,
                           const struct bench_row *rows, size_t n_rows, const struct bench_copy *cp,
                           const struct bench_calibration *cal)
{
    json_t *doc = json_object(), *a, *groups = json_array(), *fps = json_array();
    double *scratch = malloc((n_rows ? n_rows : 1) * sizeof(double));
    size_t completed = 0;
    char exe[PATH_MAX];
    ssize_t n_exe = readlink(BENCH_SELF_EXE, exe, sizeof(exe) - 1);

    if (!doc || !groups || !fps || !scratch) {
        json_decref(doc);
        json_decref(groups);
        json_decref(fps);
        free(scratch);
        return NULL;
    }
    exe[n_exe > 0 ? n_exe : 0] = '\0';
    json_object_set_new(doc, "schema_version", json_integer(1));
    json_object_set_new(doc, "kind", json_string("ramforge.bench.summary"));
    json_object_set_new(doc, "ramforge_version", json_string(RAMFORGE_VERSION));
    json_object_set_new(doc, "binary", json_str_or_null(exe));
    json_object_set_new(doc, "model",
                        json_pack("{s:o,s:I}", "path", json_str_or_null(o->model), "size_bytes",
                                  (json_int_t)model_bytes));
    json_object_set_new(doc, "run",
                        json_pack("{s:o,s:I,s:o,s:I}", "prompt", json_str_or_null(o->prompt),
                                  "n_predict", (json_int_t)o->n_predict, "threads",
                                  o->n_threads > 0 ? json_integer(o->n_threads) : json_null(),
                                  "repetitions", (json_int_t)o->repetitions));
    a = json_array();
    for (size_t i = 0; a && i < o->n_conditions; i++)
        json_array_append_new(a, json_string(bench_condition_name(o->conditions[i])));
    json_object_set_new(doc, "conditions", a);

    a = json_array();
    for (size_t v = 0; a && v < o->n_variants; v++) {
        json_t *args = json_array();
        for (size_t i = 0; args && i < o->n_common; i++)
            json_array_append_new(args, json_str_or_null(o->common_args[i]));
        for (size_t i = 0; args && i < o->variants[v].n_args; i++)
            json_array_append_new(args, json_str_or_null(o->variants[v].args[i]));
        json_array_append_new(a,
                              json_pack("{s:s,s:s,s:o}", "name", o->variants[v].name,
                                        "residency_policy", rf_policy_name(o->variants[v].policy),
                                        "run_args", args ? args : json_null()));
    }
    json_object_set_new(doc, "policies", a);

    if (cp->wanted) {
        json_t *c = json_object();
        json_object_set_new(c, "path", json_str_or_null(cp->path));
        json_object_set_new(c, "made", json_boolean(cp->made));
        json_object_set_new(c, "error", json_str_or_null(cp->error));
        json_object_set_new(c, "bytes", rf_json_u64(cp->made, cp->info.bytes));
        json_object_set_new(c, "copy_seconds",
                            cp->made ? json_real((double)cp->info.ns / 1e9) : json_null());
        json_object_set_new(c, "source_read", json_str_or_null(cp->info.source_note));
        json_object_set_new(c, "kept", json_boolean(cp->made && o->keep_copy));
        json_object_set_new(doc, "isolated_copy", c);
    } else {
        json_object_set_new(doc, "isolated_copy", json_null());
    }
    json_object_set_new(doc, "physical_limit", physical_limit_json(cp));

    size_t off = o->n_variants;
    for (size_t v = 0; v < o->n_variants; v++)
        if (strcmp(o->variants[v].name, BENCH_BASELINE) == 0)
            off = v;
    for (size_t ci = 0; ci < o->n_conditions; ci++) {
        enum bench_condition cond = o->conditions[ci];
        double off_e2e = 0, off_ttft = 0, off_tps = 0;
        bool has_off_tps =
            off < o->n_variants &&
            group_median(rows, n_rows, cond, off, BENCH_M_DECODE_TPS, scratch, &off_tps);
        bool has_off_e2e = off < o->n_variants &&
                           group_median(rows, n_rows, cond, off, BENCH_M_E2E, scratch, &off_e2e);
        bool has_off_ttft = off < o->n_variants &&
                            group_median(rows, n_rows, cond, off, BENCH_M_TTFT, scratch, &off_ttft);
        for (size_t v = 0; v < o->n_variants; v++) {
            unsigned counts[BENCH_LABEL_N] = {0};
            unsigned runs = 0, done = 0, median_runs = 0;
            for (size_t i = 0; i < n_rows; i++) {
                const struct bench_row *r = &rows[i];
                if (r->cond != cond || r->variant != v)
                    continue;
                runs++;
                counts[r->label]++;
                done += r->run_status == 0;
                median_runs += r->run_status == 0 && r->label == bench_own_label(cond);
            }
            json_t *g = json_object(), *med = json_object(), *ratio = json_object();
            double e2e = 0, ttft = 0, tps = 0;
            for (int m = 0; m < BENCH_M_N; m++) {
                double x;
                bool has = group_median(rows, n_rows, cond, v, (enum bench_metric)m, scratch, &x);
                json_object_set_new(med, metric_info[m].name,
                                    has ? (metric_info[m].real ? json_real(x) : json_number(x))
                                        : json_null());
                if (m == BENCH_M_E2E && has)
                    e2e = x;
                if (m == BENCH_M_TTFT && has)
                    ttft = x;
                if (m == BENCH_M_DECODE_TPS && has)
                    tps = x;
            }
            bool has_e2e = json_is_number(json_object_get(med, metric_info[BENCH_M_E2E].name));
            bool has_ttft = json_is_number(json_object_get(med, metric_info[BENCH_M_TTFT].name));
            json_object_set_new(ratio, "end_to_end",
                                has_e2e && has_off_e2e && off_e2e > 0 ? json_real(e2e / off_e2e)
                                                                      : json_null());
            json_object_set_new(ratio, "ttft",
                                has_ttft && has_off_ttft && off_ttft > 0
                                    ? json_real(ttft / off_ttft)
                                    : json_null());
            json_object_set_new(ratio, "decode_tokens_per_s",
                                tps > 0 && has_off_tps && off_tps > 0 ? json_real(tps / off_tps)
                                                                      : json_null());
            json_object_set_new(g, "condition", json_string(bench_condition_name(cond)));
            json_object_set_new(g, "policy", rf_json_str(o->variants[v].name));
            json_object_set_new(g, "residency_policy",
                                json_string(rf_policy_name(o->variants[v].policy)));
            json_object_set_new(g, "runs", json_integer(runs));
            json_object_set_new(g, "completed", json_integer(done));
            json_object_set_new(g, "labels", labels_json(counts));
            json_object_set_new(g, "median_label",
                                json_string(bench_label_name(bench_own_label(cond))));
            json_object_set_new(g, "median_runs", json_integer(median_runs));
            json_object_set_new(g, "median", med);
            json_object_set_new(g, "ratio_to_off", ratio);
            json_array_append_new(groups, g);
        }
    }
    json_object_set_new(doc, "memory_limit",
                        o->memory_limit ? bench_limit_json(o, cal, cp, rows, n_rows, groups)
                                        : json_null());
    json_object_set_new(doc, "groups", groups);

    for (size_t i = 0; i < n_rows; i++) {
        bool seen = !rows[i].fingerprint[0];
        completed += rows[i].run_status == 0;
        for (size_t k = 0; !seen && k < json_array_size(fps); k++)
            seen = strcmp(json_string_value(json_array_get(fps, k)), rows[i].fingerprint) == 0;
        if (!seen)
            json_array_append_new(fps, rf_json_str(rows[i].fingerprint));
    }
    json_object_set_new(doc, "token_fingerprints", fps);
    json_object_set_new(doc, "runs_total", json_integer((json_int_t)n_rows));
    json_object_set_new(doc, "runs_completed", json_integer((json_int_t)completed));
    json_object_set_new(
        doc, "note",
        json_string("medians over the runs that completed (run_status 0) with the condition's "
                    "own label (warm: warm; isolated-nonresident: controlled); runs of other "
                    "labels are counted in labels, never mixed into the medians. Timings are "
                    "the run reports' timing.*_ns (end_to_end excludes process start and "
                    "report writing; process_ns is bench's clock around the process). "
                    "ratio_to_off: the median over the median of the policy named 'off' in "
                    "the same condition (decode_tokens_per_s: tokens/s over off's tokens/s) of "
                    "this bench run; null when it is absent or a median "
                    "is null. Labels describe the model file's page cache when the run process "
                    "started: not physical reclamation, PSS or mapping residency after load."));
    free(scratch);
    return doc;
}

/* A sample of name labelled model, path, condition, policy and residency_policy of group g
   (the caller adds more and its value); model: the file's canonical path. */
static void bench_series(struct rf_prom *f, const char *name, const char *model, const json_t *g)
{
    rf_prom_sample(f, name);
    rf_metrics_model_labels(f, model);
    static const char *const keys[] = {"condition", "policy", "residency_policy"};
    for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
        rf_prom_label(f, keys[k], json_string_value(json_object_get(g, keys[k])));
}

/* A JSON number as a sample value: an integer exactly, a real with a double's every digit. */
static void bench_value(struct rf_prom *f, const json_t *v)
{
    if (json_is_integer(v))
        rf_prom_i64(f, (int64_t)json_integer_value(v));
    else
        rf_prom_double(f, json_number_value(v));
}

char *bench_summary_metrics(const json_t *summary)
{
    char *text = NULL, name[96];
    const json_t *groups = json_object_get(summary, "groups"), *g;
    const char *model =
        json_string_value(json_object_get(json_object_get(summary, "model"), "path"));
    char canon[PATH_MAX];
    if (model && realpath(model, canon)) /* as run and serve label it; else the path as given */
        model = canon;
    size_t i;
    struct rf_prom prom, *f = &prom;
    rf_prom_init(f);
    static const char *const counts[][2] = {
        {"runs", "Runs of this condition and policy."},
        {"completed", "Runs that completed (run_status 0)."},
        {"median_runs", "Runs the medians are over (completed, with the condition's own label)."},
    };
    for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
        snprintf(name, sizeof(name), "ramforge_bench_%s", counts[c][0]);
        rf_prom_family(f, name, "gauge", counts[c][1]);
        json_array_foreach(groups, i, g)
        {
            bench_series(f, name, model, g);
            bench_value(f, json_object_get(g, counts[c][0]));
        }
    }
    for (int m = 0; m < BENCH_M_N; m++) {
        snprintf(name, sizeof(name), "ramforge_bench_median_%s", metric_info[m].name);
        rf_prom_family(f, name, "gauge", "summary.json's median of this figure; absent when null.");
        json_array_foreach(groups, i, g)
        {
            const json_t *v = json_object_get(json_object_get(g, "median"), metric_info[m].name);
            if (!json_is_number(v))
                continue;
            bench_series(f, name, model, g);
            bench_value(f, v);
        }
    }
    rf_prom_family(f, "ramforge_bench_ratio_to_off", "gauge",
                   "Median over the 'off' entry's median in the same condition; absent when null.");
    json_array_foreach(groups, i, g)
    {
        static const char *const measures[] = {"end_to_end", "ttft", "decode_tokens_per_s"};
        for (size_t k = 0; k < sizeof(measures) / sizeof(measures[0]); k++) {
            const json_t *v = json_object_get(json_object_get(g, "ratio_to_off"), measures[k]);
            if (!json_is_number(v))
                continue;
            bench_series(f, "ramforge_bench_ratio_to_off", model, g);
            rf_prom_label(f, "measure", measures[k]);
            bench_value(f, v);
        }
    }
    const json_t *lim = json_object_get(summary, "physical_limit");
    rf_prom_family(
        f, "ramforge_bench_physical_limit_seconds", "gauge",
        "Model size over the cold read bandwidth of the isolated copy; absent when null.");
    if (json_is_number(json_object_get(lim, "limit_seconds"))) {
        rf_prom_sample(f, "ramforge_bench_physical_limit_seconds");
        rf_metrics_model_labels(f, model);
        bench_value(f, json_object_get(lim, "limit_seconds"));
    }
    return rf_prom_take(f, &text) == 0 ? text : NULL;
}
