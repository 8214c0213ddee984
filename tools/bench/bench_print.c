/*
 * The printed output of `ramforge bench` (see bench_print.h): progress
 * lines on stderr, the summary table on stdout.
 */
#include "bench_print.h"

#include <stdio.h>
#include <string.h>

#include "common/cli.h"

void bench_print_progress(const struct bench_options *o, const struct bench_row *r, size_t k,
                          size_t n_rows)
{
    const char *cname = bench_condition_name(r->cond), *pname = o->variants[r->variant].name;
    char b1[32], b2[32];

    if (r->run_status < 0) {
        fprintf(stderr, "[%zu/%zu] %s %s #%lld: failed (not run%s%s)\n", k + 1, n_rows, cname,
                pname, r->rep, r->reason[0] ? ": " : "", r->reason);
        return;
    }
    if (r->run_status != 0) {
        fprintf(stderr, "[%zu/%zu] %s %s #%lld: %s, failed: %s\n", k + 1, n_rows, cname, pname,
                r->rep, bench_label_name(r->label), r->reason);
        return;
    }
    fprintf(stderr, "[%zu/%zu] %s %s #%lld: %s, ttft %s, end-to-end %s\n", k + 1, n_rows, cname,
            pname, r->rep, bench_label_name(r->label),
            r->v[BENCH_M_TTFT].has ? cli_format_ns(r->v[BENCH_M_TTFT].u, b1, sizeof(b1)) : "-",
            r->v[BENCH_M_E2E].has ? cli_format_ns(r->v[BENCH_M_E2E].u, b2, sizeof(b2)) : "-");
}
/* "%.2f" of a JSON number into buf, or "-". */
static const char *num2(const json_t *v, char *buf, size_t len)
{
    if (!json_is_number(v))
        return "-";
    snprintf(buf, len, "%.2f", json_number_value(v));
    return buf;
}

/* With --memory-limit: per group decode tokens/s, ratio to off, the bound, ratio to the bound. */
static void print_limit_table(json_t *summary)
{
    json_t *ml = json_object_get(summary, "memory_limit"), *g;
    size_t i;
    char b[32], s1[16], s2[16], s3[16], s4[16];

    if (!json_is_object(ml))
        return;
    printf("memory limit %s per run (a child memory cgroup each); bound per token = t_c + max(0, "
           "W - R) / B\n",
           cli_format_bytes((uint64_t)json_integer_value(json_object_get(ml, "limit_bytes")), false,
                            b, sizeof(b)));
    json_t *cal = json_object_get(ml, "calibration");
    json_t *ctps = json_object_get(cal, "decode_tokens_per_s");
    if (json_is_number(ctps) && json_number_value(ctps) > 0)
        printf("t_c %.1f ms per token: a warm run without limit (policy observe, %lld major "
               "faults, %s read from storage)\n",
               1e3 / json_number_value(ctps),
               (long long)json_integer_value(json_object_get(cal, "major_faults")),
               cli_format_bytes((uint64_t)json_integer_value(json_object_get(cal, "read_bytes")),
                                false, b, sizeof(b)));
    else
        printf("t_c unknown: %s\n", json_string_value(json_object_get(cal, "error")));
    printf("%-21s %-14s %12s %9s %12s %9s\n", "condition", "policy", "decode tok/s", "ratio",
           "bound tok/s", "x bound");
    json_array_foreach(json_object_get(summary, "groups"), i, g)
    {
        json_t *bound = json_object_get(g, "bound");
        printf("%-21s %-14s %12s %9s %12s %9s\n",
               json_string_value(json_object_get(g, "condition")),
               json_string_value(json_object_get(g, "policy")),
               num2(json_object_get(json_object_get(g, "median"),
                                    bench_metric_name(BENCH_M_DECODE_TPS)),
                    s1, sizeof(s1)),
               num2(json_object_get(json_object_get(g, "ratio_to_off"), "decode_tokens_per_s"), s2,
                    sizeof(s2)),
               num2(json_object_get(bound, "bound_tokens_per_s"), s3, sizeof(s3)),
               num2(json_object_get(bound, "ratio_to_bound"), s4, sizeof(s4)));
    }
}

/*
 * The verdicts: per isolated-nonresident policy, its median cold load over
 * the physical read limit (TTFT, the prompt's compute, said apart); with --memory-limit, per
 * policy its per-token time over the bound.
 */
static void print_verdicts(json_t *summary)
{
    json_t *pl = json_object_get(summary, "physical_limit"), *g;
    json_t *lim = json_object_get(pl, "limit_seconds");
    size_t i;

    json_array_foreach(json_object_get(summary, "groups"), i, g)
    {
        const char *cond = json_string_value(json_object_get(g, "condition"));
        const char *pol = json_string_value(json_object_get(g, "policy"));
        json_t *med = json_object_get(g, "median");
        json_t *load = json_object_get(med, bench_metric_name(BENCH_M_LOAD));
        json_t *ttft = json_object_get(med, bench_metric_name(BENCH_M_TTFT));
        if (strcmp(cond, bench_condition_name(BENCH_COND_ISOLATED)) == 0 && json_is_number(lim) &&
            json_number_value(lim) > 0 && json_is_number(load)) {
            /* The load alone reads the file; TTFT (prompt compute) is said apart. */
            char b1[32], b2[32];
            double x = json_number_value(load) / 1e9 / json_number_value(lim);
            printf("%s: cold load is %s: %.2fx the physical read limit (load %s", pol,
                   x <= BENCH_DISK_BOUND_RATIO ? "disk-bound" : "not disk-bound", x,
                   cli_format_ns((uint64_t)json_number_value(load), b1, sizeof(b1)));
            if (json_is_number(ttft))
                printf(", then TTFT %s",
                       cli_format_ns((uint64_t)json_number_value(ttft), b2, sizeof(b2)));
            printf(")\n");
        }
        json_t *rb = json_object_get(json_object_get(g, "bound"), "ratio_to_bound");
        if (json_is_number(rb))
            printf("%s (%s, memory limit): %.2fx the bound per token\n", pol, cond,
                   json_number_value(rb));
    }
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
    print_limit_table(summary);
    if (json_is_number(json_object_get(pl, "limit_seconds"))) {
        double bytes = (double)json_integer_value(json_object_get(pl, "bytes"));
        double secs = json_number_value(json_object_get(pl, "read_seconds"));
        printf("physical limit: %s read cold (%s) in %.3f s = %.1f MiB/s: no cold load of this "
               "file on this disk can take less than %.3f s\n",
               cli_format_bytes((uint64_t)bytes, false, b1, sizeof(b1)),
               json_string_value(json_object_get(pl, "label")), secs,
               secs > 0 ? bytes / secs / (1024.0 * 1024.0) : 0.0,
               json_number_value(json_object_get(pl, "limit_seconds")));
    } else {
        printf("physical limit: not measured (%s)\n",
               json_string_value(json_object_get(pl, "reason")));
    }
    print_verdicts(summary);
}
