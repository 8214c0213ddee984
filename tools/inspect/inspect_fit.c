/*
 * ramforge inspect -c N: the fit check. The admission decision `run` makes
 * before loading (rf_session_fit_check: the GGUF header, the page cache's
 * share of the file, this process's RSS, the KV cache of N padded cells)
 * against the cgroup hierarchy this command runs in, or a hypothetical
 * limit (--memory-limit), without loading the model. Exit status: 0 the
 * run would be admitted, 1 it would be refused (or the check failed), 2 a
 * usage error.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cli.h"
#include "inspect_fit.h"
#include "ramforge/core/json_util.h"
#include "ramforge/core/report_json.h"
#include "ramforge/core/timing.h"
#include "ramforge/session/session_ext.h"

#define FIT_KIND "ramforge.fit_check"
#define FIT_SCHEMA_VERSION 1

static const struct rf_admission_record *find(const struct rf_admission_result *a, const char *name)
{
    for (size_t i = 0; i < a->n_records; i++)
        if (strcmp(a->records[i].name, name) == 0)
            return &a->records[i];
    return NULL;
}

/* One input line: "  what  SIZE  (source)"; an unknown figure says why. */
static void print_input(const struct rf_admission_result *a, const char *name, const char *what,
                        bool raw)
{
    const struct rf_admission_record *r = find(a, name);
    char b[32];
    if (!r)
        return;
    printf("  %-18s %12s  (%s)\n", what,
           r->has ? cli_format_bytes(r->bytes, raw, b, sizeof(b)) : "unknown",
           r->source[0] ? r->source : "not known before the load");
}

/*
 * The verdict in a container's terms (issue 37): what the kernel would do to the run.
 * *key is the JSON's container_verdict. A working set that fits only because the file's
 * pages are charged to another cgroup (not_bound) thrashes in a container of its own.
 */
static const char *container_verdict(const struct rf_admission_result *a, const char **key)
{
    if (a->outcome == RF_ADMIT_UNKNOWN || a->cause == RF_ADMIT_CAUSE_OVERFLOW) {
        *key = "unknown";
        return "cannot tell: a figure the decision needs is unknown (the reason below)";
    }
    if (a->cause == RF_ADMIT_CAUSE_HARD_LIMIT) {
        *key = "oom_killed";
        return "would be OOM-killed: the memory the run cannot give back exceeds the limit";
    }
    if (a->cause == RF_ADMIT_CAUSE_THRASH || a->cause == RF_ADMIT_CAUSE_NOT_BOUND) {
        *key = "thrashes";
        return "runs but thrashes: the weights each token reads do not all fit under the "
               "limit, so every token reads part of them again from storage";
    }
    *key = "fits";
    return "fits: the run's memory and the weights each token reads stay under the limit";
}

static void print_fit(const struct fit_options *f, const struct rf_admission_result *a,
                      uint64_t cells)
{
    char b1[32], b2[32], b3[32], b4[32], b5[32];
    const char *key;
    bool raw = f->raw;

    if (f->has_limit)
        printf("in a container with a %s memory limit: ",
               cli_format_bytes(f->limit_bytes, raw, b1, sizeof(b1)));
    else if (a->has_binding)
        printf("under this cgroup's %s memory limit: ",
               cli_format_bytes(a->cgroups[a->binding].level.limit.bytes, raw, b1, sizeof(b1)));
    else
        printf("on this host (no memory limit; --memory-limit SIZE checks a container's): ");
    printf("%s%s\n", container_verdict(a, &key),
           a->refused && a->cause != RF_ADMIT_CAUSE_HARD_LIMIT ? " (refused: exit 1)" : "");

    printf("fit check of %s with a context of %" PRIu64 " cells (-c %lld, padded to 256 like "
           "llama.cpp), before loading: GGUF-header estimates, nothing loaded\n",
           f->model, cells, f->n_ctx);
    printf("what the run would add or hold:\n");
    print_input(a, "mapped_weights", "to read in", raw);
    print_input(a, "model_cached", "already cached", raw);
    print_input(a, "repacked_weights", "repacked copies", raw);
    print_input(a, "loader_growth", "loader metadata", raw);
    print_input(a, "page_tables", "page tables", raw);
    print_input(a, "kv_cache", "KV cache", raw);
    print_input(a, "graph_scratch", "graph scratch", raw);
    print_input(a, "runtime", "runtime", raw);
    print_input(a, "file_working_set", "read per token", raw);
    print_input(a, "process_rss", "this command now", raw);
    if (a->has_request)
        printf("  %-18s %12s  (the process at the end of the load: this command's size + "
               "repacked copies + loader + page tables + KV cache + the whole model file)\n",
               "projected memory", cli_format_bytes(a->request_bytes, raw, b1, sizeof(b1)));
    if (a->has_binding) {
        const struct rf_admission_level_check *c = &a->cgroups[a->binding];
        printf("binding limit: %s%s %s (%" PRIu64 " bytes)\n",
               f->has_limit ? "--memory-limit" : "cgroup ", f->has_limit ? "" : c->level.dir,
               cli_format_bytes(c->level.limit.bytes, raw, b1, sizeof(b1)), c->level.limit.bytes);
        printf("  %-18s %12s  (%s)\n", "in use now",
               cli_format_bytes(c->level.usage.bytes, raw, b2, sizeof(b2)),
               f->has_limit ? "this command alone, as the run would start" : "the cgroup's usage");
        printf("  %-18s %12s  (clean unmapped page cache the kernel can drop)\n", "reclaimable",
               cli_format_bytes(c->reclaimable_bytes, raw, b3, sizeof(b3)));
        printf("  %-18s %12s  (limit - in use + reclaimable)\n", "room",
               cli_format_bytes(c->room_bytes, raw, b4, sizeof(b4)));
        printf("  %-18s %12s  (in use - reclaimable + the run's anonymous growth; the file's "
               "pages are page cache: the working set decides them, not the charge)\n",
               "to be charged", cli_format_bytes(c->projected_bytes, raw, b5, sizeof(b5)));
    } else if (a->host_binding) {
        printf("binding limit: the host (no enforced memory limit in this process's cgroups%s): "
               "it can give %s (%s); projected %s\n",
               a->n_cgroups ? "" : ": no memory controller",
               cli_format_bytes(a->host_room_bytes, raw, b1, sizeof(b1)), a->host_source,
               cli_format_bytes(a->host_projected_bytes, raw, b2, sizeof(b2)));
    } else if (!a->hard_limit_checked) {
        printf("binding limit: none (no enforced memory limit in this process's cgroups%s); "
               "give --memory-limit SIZE to check a container's limit\n",
               a->n_cgroups ? "" : ": no memory controller");
    }
    char head[512], ways[1024], text[2048];
    size_t hl, cl = strlen(RF_ADMISSION_HEADLINE_CUT);
    rf_admission_headline(a, head, sizeof(head));
    hl = strlen(head);
    /* A headline cut short is not printed: the reason follows in full (not "the rest: -v"). */
    bool cut = hl >= cl && strcmp(head + hl - cl, RF_ADMISSION_HEADLINE_CUT) == 0;
    printf("verdict: %s%s%s%s\n", rf_admission_outcome_name(a->outcome),
           a->refused ? " (run would refuse it, exit 1)" : "", cut ? " (the reason below)" : ": ",
           cut ? "" : cli_iec_text(head, text, sizeof(text)));
    rf_admission_ways_out(a, ways, sizeof(ways));
    for (char *line = ways, *next; *line; line = next) {
        next = line + strcspn(line, "\n");
        if (*next)
            *next++ = '\0';
        printf("  way out: %s\n", cli_iec_text(line, text, sizeof(text)));
    }
    char reason[sizeof(a->reason) * 2];
    if (cut || strcmp(head, a->reason) != 0) /* the verdict line said it all otherwise */
        printf("reason: %s\n", cli_iec_text(a->reason, reason, sizeof(reason)));
    if (a->n_unknown) {
        printf("not counted (unknown before the load):");
        for (size_t i = 0; i < a->n_unknown; i++)
            printf("%s %s", i ? "," : "", a->unknown_components[i]);
        putchar('\n');
    }
}

/* {"kind", "schema_version", "model", "n_ctx", "n_ctx_cells", "memory_limit_bytes",
   "admission": the run report's admission object}. NULL: out of memory. */
static json_t *fit_json(const struct fit_options *f, const struct rf_admission_result *a,
                        uint64_t cells)
{
    struct rf_report r;
    struct rf_timing t;
    json_t *report = NULL, *doc = json_object();

    memset(&r, 0, sizeof(r));
    rf_timing_init(&t);
    r.scope = "operation";
    r.model_path = f->model;
    r.policy = "observe";
    r.admission = a;
    r.not_built_reason = r.plan_reason = r.page_snapshot_reason = "fit check: nothing was loaded";
    r.cgroup_verdict_reason = r.not_built_reason;
    r.timing = &t;
    if (!doc || rf_report_to_json(&r, &report) < 0) {
        json_decref(doc);
        return NULL;
    }
    json_object_set_new(doc, "kind", json_string(FIT_KIND));
    json_object_set_new(doc, "schema_version", json_integer(FIT_SCHEMA_VERSION));
    json_object_set_new(doc, "model", rf_json_str(f->model));
    json_object_set_new(doc, "n_ctx", json_integer(f->n_ctx));
    json_object_set_new(doc, "n_ctx_cells", json_integer((json_int_t)cells));
    json_object_set_new(doc, "memory_limit_bytes",
                        f->has_limit ? json_integer((json_int_t)f->limit_bytes) : json_null());
    const char *key;
    container_verdict(a, &key);
    json_object_set_new(doc, "container_verdict", json_string(key));
    json_object_set(doc, "admission", json_object_get(report, "admission"));
    json_decref(report);
    return doc;
}

bool inspect_print_json(json_t *doc)
{
    if (!doc) {
        cli_error("out of memory");
        return false;
    }
    json_dumpf(doc, stdout, JSON_INDENT(2) | JSON_SORT_KEYS);
    fputc('\n', stdout);
    json_decref(doc);
    return true;
}

int inspect_fit(const struct fit_options *f)
{
    struct rf_session_params p = rf_session_default_params();
    struct rf_operation_request req = {.n_ctx = (uint32_t)f->n_ctx};
    struct rf_admission_result *a = calloc(1, sizeof(*a));
    char err[FORGE_ERR_MAX];
    uint64_t cells = 0;
    int status = RF_EXIT_FAILURE;

    if (!a) {
        cli_error("out of memory");
        return RF_EXIT_FAILURE;
    }
    p.admission_mode = f->mode;
    rf_admission_ctx_cells(req.n_ctx, 0, 0, 256, &cells);
    int rc =
        rf_session_fit_check(f->model, f->repack, p, &req, f->has_limit, f->limit_bytes, a, err);
    if (rc < 0) {
        cli_error("%s", err);
        goto out;
    }
    if (f->json) {
        if (!inspect_print_json(fit_json(f, a, cells)))
            goto out;
    } else {
        print_fit(f, a, cells);
    }
    if (cli_flush_stdout() != 0)
        goto out;
    if (a->refused) { /* the refusal on stderr too, as run's: a script that keeps stdout sees it */
        char head[512], text[1024];

        rf_admission_headline(a, head, sizeof(head));
        cli_error("%s: the fit check refuses the run (%s): %s", f->model,
                  rf_admission_outcome_name(a->outcome), cli_iec_text(head, text, sizeof(text)));
    }
    status = a->refused ? RF_EXIT_FAILURE : 0;
out:
    free(a);
    return status;
}
