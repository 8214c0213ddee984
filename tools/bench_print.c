/*
 * The printed output of `ramforge bench` (see bench_print.h): progress
 * lines on stderr, the summary table on stdout.
 */
#include "bench_print.h"

#include <stdio.h>
#include <string.h>

#include "cli.h"

void bench_print_progress(const struct bench_options *o, const struct bench_row *r, size_t k,
                          size_t n_rows)
{
    const char *cname = bench_condition_name(r->cond), *pname = o->variants[r->variant].name;
    char b1[32], b2[32];

    if (r->run_status < 0) {
        fprintf(stderr, "[%zu/%zu] %s %s #%lld: failed (not run)\n", k + 1, n_rows, cname, pname,
                r->rep);
        return;
    }
    fprintf(stderr, "[%zu/%zu] %s %s #%lld: %s, ttft %s, end-to-end %s\n", k + 1, n_rows, cname,
            pname, r->rep, bench_label_name(r->label),
            r->v[BENCH_M_TTFT].has ? cli_format_ns(r->v[BENCH_M_TTFT].u, b1, sizeof(b1)) : "-",
            r->v[BENCH_M_E2E].has ? cli_format_ns(r->v[BENCH_M_E2E].u, b2, sizeof(b2)) : "-");
}
void bench_print_table(json_t *summary)
{
    json_t *groups = json_object_get(summary, "groups"), *g;
    size_t i;
    char b1[32], b2[32], b3[32];

    printf("%-21s %-14s %-5s %-22s %11s %11s %11s %7s %7s\n", "condition", "policy", "runs",
           "labels", "load", "ttft", "end-to-end", "e2e/off", "ttft/off");
    json_array_foreach(groups, i, g)
    {
        char labels[64] = "", runs[16];
        json_t *counts = json_object_get(g, "labels"), *med = json_object_get(g, "median");
        json_t *ratio = json_object_get(g, "ratio_to_off");
        const char *key;
        json_t *val;
        json_object_foreach(counts, key, val)
        {
            size_t len = strlen(labels);
            if (json_integer_value(val) > 0)
                snprintf(labels + len, sizeof(labels) - len, "%s%s %lld", len ? ", " : "", key,
                         (long long)json_integer_value(val));
        }
        snprintf(runs, sizeof(runs), "%lld/%lld",
                 (long long)json_integer_value(json_object_get(g, "completed")),
                 (long long)json_integer_value(json_object_get(g, "runs")));
        json_t *load = json_object_get(med, bench_metric_name(BENCH_M_LOAD));
        json_t *ttft = json_object_get(med, bench_metric_name(BENCH_M_TTFT));
        json_t *e2e = json_object_get(med, bench_metric_name(BENCH_M_E2E));
        json_t *re = json_object_get(ratio, "end_to_end"), *rt = json_object_get(ratio, "ttft");
        char re_s[16] = "-", rt_s[16] = "-";
        if (json_is_number(re))
            snprintf(re_s, sizeof(re_s), "%.2f", json_number_value(re));
        if (json_is_number(rt))
            snprintf(rt_s, sizeof(rt_s), "%.2f", json_number_value(rt));
        printf(
            "%-21s %-14s %-5s %-22s %11s %11s %11s %7s %7s\n",
            json_string_value(json_object_get(g, "condition")),
            json_string_value(json_object_get(g, "policy")), runs, labels,
            json_is_number(load) ? cli_format_ns((uint64_t)json_number_value(load), b1, 32) : "-",
            json_is_number(ttft) ? cli_format_ns((uint64_t)json_number_value(ttft), b2, 32) : "-",
            json_is_number(e2e) ? cli_format_ns((uint64_t)json_number_value(e2e), b3, 32) : "-",
            re_s, rt_s);
    }
    json_t *pl = json_object_get(summary, "physical_limit");
    if (json_is_number(json_object_get(pl, "limit_seconds")))
        printf("physical limit: %s read cold (%s) in %.3f s = %.1f MB/s: no cold load of this "
               "file on this disk can take less than %.3f s\n",
               cli_format_bytes((uint64_t)json_integer_value(json_object_get(pl, "bytes")), false,
                                b1, sizeof(b1)),
               json_string_value(json_object_get(pl, "label")),
               json_number_value(json_object_get(pl, "read_seconds")),
               json_number_value(json_object_get(pl, "read_mb_per_s")),
               json_number_value(json_object_get(pl, "limit_seconds")));
    else
        printf("physical limit: not measured (%s)\n",
               json_string_value(json_object_get(pl, "reason")));
}
