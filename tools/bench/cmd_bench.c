/*
 * ramforge bench: `ramforge run` as a separate process per repetition, over
 * a list of residency policies and cache conditions, with each run's cache
 * condition prepared and verified before the process starts (spec:
 * "Cache-condition preparation", "Execution timing").
 *
 * The workload: a few policies x two conditions x a few repetitions, each
 * run a fresh process of this same binary (/proc/self/exe) writing its JSON
 * operation report, which is read back with jansson. Runs are ordered
 * condition by condition, then repetition, then policy, so slow drift of
 * the machine spreads over all policies alike.
 *
 * Outputs, in the output directory DIR:
 *   results.tsv    one row per run
 *   summary.json   per (condition, policy): label counts, medians, the
 *                  ratios to the `off` policy of the same bench run; the
 *                  physical limit of a cold load (copy size / sequential
 *                  read bandwidth of the cold copy, measured in this run)
 *   runs/          each run's report (.json), stdout (.out) and stderr (.err)
 * Both summary files are written through a temporary file and a rename.
 *
 * This file is the order of the work; each job has its module:
 *   bench_options   command line and usage
 *   bench_prepare   cache conditions, the isolated copy, the physical limit
 *   bench_spawn     one `ramforge run` process
 *   bench_limit     --memory-limit: run cgroups, calibration, the bound
 *   bench_cleanup   signal handler: child, cgroup and copy removed
 *   bench_report    a run's report read back
 *   bench_results   rows, results.tsv, medians and ratios, summary.json
 *   bench_print     progress lines and the summary table
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench_cleanup.h"
#include "bench_limit.h"
#include "bench_options.h"
#include "bench_prepare.h"
#include "bench_print.h"
#include "bench_report.h"
#include "bench_results.h"
#include "bench_spawn.h"
#include "common/cli.h"
#include "ramforge/core/report.h"
#include "ramforge/core/report_json.h"
#include "ramforge/forge/forge.h"
#include "ramforge/session/metrics.h"
#include "ramforge/sys/pages.h"
#include "run/run.h"

/* Prepares row r's cache condition and verifies it; sets r->label (failed on an error). */
static void prepare_row(const struct bench_options *o, const struct bench_copy *cp,
                        struct bench_row *r)
{
    const char *path = r->cond == BENCH_COND_WARM ? o->model : cp->path;
    char err[BENCH_ERR_MAX];

    r->label = BENCH_LABEL_FAILED;
    if (r->cond == BENCH_COND_ISOLATED && !cp->made) {
        snprintf(r->reason, sizeof(r->reason), "%s", cp->error); /* printed once */
        return;
    }
    if (bench_prepare_condition(r->cond, path, &r->prep, &r->label, err) < 0) {
        snprintf(r->reason, sizeof(r->reason), "%s", err);
        cli_error("%s (run labeled failed)", err);
        r->probed = false;
        r->label = BENCH_LABEL_FAILED;
        return;
    }
    r->probed = true;
}

/*
 * One run: prepares row r's condition, starts the run process, reads its
 * report. k is the row's index (for messages). Returns -1 to go on, or
 * the exit status that stops the bench: RF_EXIT_USAGE when 'run' rejected
 * the arguments, RF_EXIT_FAILURE when no process could be started.
 */
static int bench_one(const struct bench_options *o, const struct bench_copy *cp,
                     struct bench_row *r, size_t k, size_t n_rows)
{
    const char *cname = bench_condition_name(r->cond), *pname = o->variants[r->variant].name;
    char base[PATH_MAX], path[PATH_MAX], msg[BENCH_ERR_MAX];
    struct bench_process proc;
    int rc;

    r->run_status = -1;
    prepare_row(o, cp, r);
    if (r->label == BENCH_LABEL_FAILED) {
        if (!o->quiet)
            bench_print_progress(o, r, k, n_rows);
        return -1;
    }
    snprintf(r->report, sizeof(r->report), "runs/%s-%s-%lld.json", cname, pname, r->rep);
    if (snprintf(base, sizeof(base), "%s/runs/%s-%s-%lld", o->out_dir, cname, pname, r->rep) >=
        (int)sizeof(base) - 5) {
        cli_error("cannot write %s/runs: %s", o->out_dir, strerror(ENAMETOOLONG));
        return RF_EXIT_FAILURE;
    }
    struct rfsys_cgroup_child cg;
    memset(&cg, 0, sizeof(cg));
    if (o->memory_limit && bench_limit_cgroup_create(o, k, &cg, r->reason, sizeof(r->reason)) < 0) {
        cli_error("%s (run labeled failed)", r->reason);
        r->label = BENCH_LABEL_FAILED;
        r->report[0] = '\0';
        if (!o->quiet)
            bench_print_progress(o, r, k, n_rows);
        return -1;
    }
    rc = bench_spawn_run(o, r->variant, r->cond == BENCH_COND_WARM ? o->model : cp->path, base,
                         o->memory_limit ? &cg : NULL, &proc);
    if (rc >= 0)
        r->run_status = proc.status;
    if (o->memory_limit)
        bench_limit_cgroup_finish(&cg, r);
    if (rc < 0) {
        cli_error("cannot start %s run: %s", BENCH_SELF_EXE, strerror(-rc));
        r->report[0] = '\0';
        return RF_EXIT_FAILURE;
    }
    r->v[BENCH_M_PROCESS] = (struct bench_value){.has = true, .u = proc.process_ns};
    if (proc.has_maxrss)
        r->v[BENCH_M_MAXRSS] = (struct bench_value){.has = true, .u = proc.maxrss_bytes};
    r->v[BENCH_M_MAJFLT] = (struct bench_value){.has = true, .u = proc.major_faults};
    r->v[BENCH_M_READ_BYTES] = (struct bench_value){.has = true, .u = proc.read_bytes};
    if (proc.setup_error) {
        snprintf(r->reason, sizeof(r->reason), "the run process could not %s: %s", proc.setup_step,
                 strerror(-proc.setup_error));
        cli_error("run %zu (%s %s #%lld): %s", k + 1, cname, pname, r->rep, r->reason);
        r->label = BENCH_LABEL_FAILED;
        r->report[0] = '\0';
        return -1;
    }
    snprintf(path, sizeof(path), "%s.err", base);
    if (r->run_status == RF_EXIT_USAGE) {
        bench_run_message(path, msg, sizeof(msg));
        cli_error("'run' rejected the arguments of policy '%s': %s", pname, msg);
        /* A bad command line leaves nothing behind: this run's captured output goes. */
        bench_run_remove_outputs(base);
        return RF_EXIT_USAGE;
    }
    if (r->run_status != 0) {
        bench_run_message(path, msg, sizeof(msg));
        if (!r->reason[0])
            snprintf(r->reason, sizeof(r->reason), "exit status %d: %s", r->run_status, msg);
        cli_error("run %zu (%s %s #%lld) exited with status %d: %s", k + 1, cname, pname, r->rep,
                  r->run_status, r->reason);
        if (!o->quiet)
            bench_print_progress(o, r, k, n_rows);
        r->report[0] = '\0';
        return -1;
    }
    snprintf(path, sizeof(path), "%s.json", base);
    if (bench_report_read(path, r, msg, sizeof(msg)) < 0) {
        cli_error("%s", msg);
        r->report[0] = '\0';
    }
    if (!o->quiet)
        bench_print_progress(o, r, k, n_rows);
    return -1;
}

/*
 * Checks MODEL is a regular file this process can open and a GGUF file
 * llama.cpp can map (forge_gguf_check, the header check `run` makes before
 * its load: header only, no tensor data read), so a bad model stops the
 * bench with one line before any copy or run; *st gets its fstat.
 */
/*
 * forge_gguf_check of model (the check run makes), leaving model's page
 * cache as it was: bench promises to only ever read MODEL without caching
 * it, so the pages the header read brought in (nonresident before,
 * resident after, by mincore or cachestat) are dropped again with
 * POSIX_FADV_DONTNEED. Pages that cannot be observed are left alone.
 * Returns forge_gguf_check's result.
 */
static int gguf_check_leaving_cache(const char *model, char err[FORGE_ERR_MAX])
{
    struct rfsys_file_pages fp;
    uint8_t *before = NULL, *after = NULL;
    bool observed = rfsys_file_pages_open(model, &fp) == 0 && fp.file_pages > 0 &&
                    (before = malloc(fp.file_pages)) && (after = malloc(fp.file_pages)) &&
                    rfsys_file_pages_sample(&fp, 0, fp.file_pages, before) == 0;
    int rc = forge_gguf_check(model, err);

    if (observed && rfsys_file_pages_sample(&fp, 0, fp.file_pages, after) == 0) {
        for (uint64_t p = 0; p < fp.file_pages;) {
            uint64_t end = p;
            while (end < fp.file_pages && before[end] == RF_PAGE_NONRESIDENT &&
                   after[end] == RF_PAGE_RESIDENT)
                end++;
            if (end > p)
                (void)posix_fadvise(fp.fd, (off_t)(p * fp.page_bytes),
                                    (off_t)((end - p) * fp.page_bytes), POSIX_FADV_DONTNEED);
            p = end > p ? end : p + 1;
        }
    }
    free(before);
    free(after);
    rfsys_file_pages_close(&fp);
    return rc;
}

static bool model_usable(const char *model, struct stat *st)
{
    char err[FORGE_ERR_MAX];
    int fd = open(model, O_RDONLY | O_CLOEXEC);
    int rc = fd < 0 || fstat(fd, st) < 0 ? -errno : 0;

    if (fd >= 0)
        close(fd);
    if (rc == 0 && !S_ISREG(st->st_mode)) {
        cli_error("cannot open %s: not a regular file", model);
        return false;
    }
    if (rc < 0) {
        cli_error("cannot open %s: %s", model, strerror(-rc));
        return false;
    }
    if (gguf_check_leaving_cache(model, err) < 0) {
        cli_error("%s", err);
        return false;
    }
    return true;
}

int cmd_bench(int argc, char **argv)
{
    struct bench_options o;
    struct bench_copy *cp = NULL;
    struct bench_row *rows = NULL;
    json_t *summary = NULL;
    struct bench_calibration cal;
    char path[PATH_MAX];
    struct stat st;
    size_t n_rows = 0, k = 0, completed = 0;
    int rc, status = RF_EXIT_FAILURE;

    memset(&o, 0, sizeof(o));
    memset(&cal, 0, sizeof(cal));
    rc = bench_options_parse(argc, argv, &o);
    if (rc >= 0) {
        status = rc;
        goto out;
    }
    if (!model_usable(o.model, &st))
        goto out;
    if (o.metrics_path && !run_report_path_usable(o.metrics_path, o.model))
        goto out;
    rc = bench_make_output_dir(o.out_dir);
    if (rc == 0) {
        snprintf(path, sizeof(path), "%s/runs", o.out_dir);
        rc = bench_make_output_dir(path);
    }
    if (rc < 0) {
        cli_error("cannot write the output directory %s: %s", o.out_dir, strerror(-rc));
        goto out;
    }
    rc = bench_cleanup_install();
    if (rc < 0) {
        cli_error("cannot install the signal handlers: %s", strerror(-rc));
        goto out;
    }
    if (o.memory_limit) {
        rc = bench_limit_calibrate(&o, &cal);
        if (rc >= 0) {
            cli_error("%s", cal.error);
            status = rc;
            goto out;
        }
        if (cal.error[0])
            cli_error("%s%s", cal.error, cal.ok ? "" : " (no bound: t_c unknown)");
    }
    n_rows = o.n_conditions * (size_t)o.repetitions * o.n_variants;
    rows = calloc(n_rows, sizeof(*rows));
    cp = calloc(1, sizeof(*cp));
    if (!rows || !cp) {
        cli_error("out of memory");
        goto out;
    }
    for (size_t ci = 0; ci < o.n_conditions; ci++) {
        if (o.conditions[ci] == BENCH_COND_ISOLATED) {
            cp->wanted = true;
            if (bench_copy_make(o.model, o.copy_dir ? o.copy_dir : o.out_dir,
                                !o.quiet && isatty(STDERR_FILENO), cp) < 0)
                cli_error("%s (isolated-nonresident runs are labeled failed)", cp->error);
            else if (o.keep_copy)
                bench_cleanup_set_copy(NULL); /* complete: --keep-copy keeps it */
        }
        for (long long rep = 1; rep <= o.repetitions; rep++) {
            for (size_t v = 0; v < o.n_variants; v++, k++) {
                rows[k].cond = o.conditions[ci];
                rows[k].variant = v;
                rows[k].rep = rep;
                rc = bench_one(&o, cp, &rows[k], k, n_rows);
                if (rc >= 0) {
                    status = rc;
                    goto out;
                }
                completed += rows[k].run_status == 0;
            }
        }
    }

    snprintf(path, sizeof(path), "%s/results.tsv", o.out_dir);
    rc = bench_write_tsv(path, &o, rows, n_rows);
    if (rc < 0) {
        cli_error("cannot write %s: %s", path, strerror(-rc));
        goto out;
    }
    summary = bench_summary_json(&o, (uint64_t)st.st_size, rows, n_rows, cp, &cal);
    if (!summary) {
        cli_error("out of memory");
        goto out;
    }
    snprintf(path, sizeof(path), "%s/summary.json", o.out_dir);
    rc = rf_json_write_file(summary, path);
    if (rc < 0) {
        cli_error("cannot write %s: %s", path, strerror(-rc));
        goto out;
    }
    if (o.metrics_path) {
        char *text = bench_summary_metrics(summary);
        rc = text ? rf_metrics_write_file(text, o.metrics_path) : -ENOMEM;
        free(text);
        if (rc < 0) {
            cli_error("cannot write %s: %s", o.metrics_path, strerror(-rc));
            goto out;
        }
    }
    bench_print_table(summary);
    if (completed == 0) {
        cli_error("no run completed (see %s/results.tsv)", o.out_dir);
        goto out;
    }
    status = 0;
out:
    if (cp && cp->made && !o.keep_copy)
        unlink(cp->path);
    bench_cleanup_set_copy(NULL);
    json_decref(summary);
    free(cp);
    free(rows);
    bench_options_free(&o);
    return status;
}
