/*
 * One run's report read back (see bench_report.h): jansson over the file
 * `ramforge run --residency-report-json` wrote, looked up by the names the
 * library exports for its keys.
 */
#include "bench_report.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "ramforge/core/ledger.h"
#include "ramforge/core/report.h"
#include "ramforge/core/timing.h"

/* obj.key as a non-negative integer into *v (left unknown otherwise). */
static void get_u64(json_t *obj, const char *key, struct bench_value *v)
{
    json_t *j = json_object_get(obj, key);
    if (json_is_integer(j) && json_integer_value(j) >= 0)
        *v = (struct bench_value){.has = true, .u = (uint64_t)json_integer_value(j)};
}

/* The report's timers bench keeps, and the metric each fills. */
static const struct {
    enum rf_timer timer;
    enum bench_metric m;
} timer_map[] = {
    {RF_TIMER_MODEL_LOAD, BENCH_M_LOAD},
    {RF_TIMER_STAGING, BENCH_M_STAGING},
    {RF_TIMER_TTFT, BENCH_M_TTFT},
    {RF_TIMER_END_TO_END, BENCH_M_E2E},
};

/* The ledger categories bench keeps, and the metric each fills. */
static const struct {
    enum rf_ledger_category category;
    enum bench_metric m;
} ledger_map[] = {
    {RF_LEDGER_PROCESS_RSS_PEAK, BENCH_M_PEAK_RSS},
    {RF_LEDGER_FILE_BACKED_RESIDENT, BENCH_M_MAPPING_RSS},
    {RF_LEDGER_CGROUP_CURRENT, BENCH_M_CG_CURRENT},
    {RF_LEDGER_CGROUP_PEAK, BENCH_M_CG_PEAK},
};

/* obj.key as a non-negative integer. */
static bool get_uint(const json_t *obj, const char *key, uint64_t *v)
{
    const json_t *j = json_object_get(obj, key);
    if (!json_is_integer(j) || json_integer_value(j) < 0)
        return false;
    *v = (uint64_t)json_integer_value(j);
    return true;
}

/*
 * The report keys of the bound, in one place. The streaming policy's
 * report object streaming.plan (when present) gives W and R as it planned
 * them: working_set_bytes (the pages the graph reads per token, token_embd
 * excluded unless tied) and R = limit_bytes - fixed_bytes (what any policy
 * could keep resident: the plan's own margin is a choice of the policy, not
 * part of the bound).
 */
#define KEY_STREAMING "streaming"
#define KEY_STREAMING_PLAN "plan"
#define KEY_STREAMING_W "working_set_bytes"
#define KEY_STREAMING_LIMIT "limit_bytes"
#define KEY_STREAMING_FIXED "fixed_bytes"
#define KEY_MODEL "model"
#define KEY_INVENTORY "inventory"
#define KEY_TOTALS "totals"
#define KEY_FILE_BACKED "file_backed_logical_bytes"

void bench_bound_inputs_from_report(const json_t *doc, struct bench_bound_inputs *out)
{
    memset(out, 0, sizeof(*out));
    const json_t *plan = json_object_get(json_object_get(doc, KEY_STREAMING), KEY_STREAMING_PLAN);
    if (json_is_object(plan)) {
        uint64_t limit, fixed;
        out->has_w = get_uint(plan, KEY_STREAMING_W, &out->w_bytes);
        out->has_r = get_uint(plan, KEY_STREAMING_LIMIT, &limit) &&
                     get_uint(plan, KEY_STREAMING_FIXED, &fixed);
        if (out->has_w && out->has_r) {
            out->r_bytes = limit > fixed ? limit - fixed : 0;
            out->source = "a streaming run report's streaming.plan (working_set_bytes as W, "
                          "limit_bytes - fixed_bytes as R)";
            return;
        }
        out->has_w = out->has_r = false;
    }
    const json_t *totals = json_object_get(
        json_object_get(json_object_get(doc, KEY_MODEL), KEY_INVENTORY), KEY_TOTALS);
    out->has_w = get_uint(totals, KEY_FILE_BACKED, &out->w_bytes);

    static const enum rf_ledger_category parts[] = {RF_LEDGER_ANONYMOUS_WEIGHTS, RF_LEDGER_KV_CACHE,
                                                    RF_LEDGER_GRAPH_SCRATCH, RF_LEDGER_RUNTIME};
    uint64_t *dst[] = {&out->anonymous_bytes, &out->kv_bytes, &out->scratch_bytes,
                       &out->runtime_bytes};
    bool found[4] = {false, false, false, false};
    const json_t *entries =
        json_object_get(json_object_get(doc, RF_REPORT_KEY_LEDGER), RF_REPORT_KEY_LEDGER_ENTRIES);
    size_t i;
    const json_t *e;
    json_array_foreach(entries, i, e)
    {
        const char *cat = json_string_value(json_object_get(e, RF_REPORT_KEY_ENTRY_CATEGORY));
        for (size_t k = 0; cat && k < 4; k++)
            if (!found[k] && strcmp(cat, rf_ledger_category_name(parts[k])) == 0)
                found[k] = get_uint(e, RF_REPORT_KEY_ENTRY_VALUE, dst[k]);
    }
    out->runtime_known = found[3];
    out->has_parts = found[0] && found[1] && found[2];
    out->source = "model.inventory.totals.file_backed_logical_bytes (W) and the ledger's "
                  "AnonymousWeights, KvCache, GraphScratch, Runtime (R = limit - those)";
}

int bench_report_read(const char *path, struct bench_row *r, char *err, size_t errlen)
{
    json_error_t je;
    json_t *doc = json_load_file(path, 0, &je);

    if (!doc) {
        snprintf(err, errlen, "cannot read the report %s: %s", path, je.text);
        return -EBADMSG;
    }
    json_t *timing = json_object_get(doc, RF_REPORT_KEY_TIMING);
    for (size_t k = 0; k < sizeof(timer_map) / sizeof(timer_map[0]); k++)
        get_u64(timing, rf_timer_name(timer_map[k].timer), &r->v[timer_map[k].m]);

    json_t *output = json_object_get(doc, RF_REPORT_KEY_OUTPUT);
    struct bench_value decode = {0}, generated = {0};
    get_u64(timing, rf_timer_name(RF_TIMER_DECODE), &decode);
    get_u64(output, RF_REPORT_KEY_N_GENERATED, &generated);
    if (decode.has && decode.u > 0 && generated.has && generated.u >= 2) {
        double tps = (double)(generated.u - 1) * 1e9 / (double)decode.u;
        /* 3 decimals, as results.tsv prints it: the medians use the same values */
        double rounded = (double)(long long)(tps * 1000.0 + 0.5) / 1000.0;
        r->v[BENCH_M_DECODE_TPS] = (struct bench_value){.has = true, .d = rounded};
    }
    const char *fp = json_string_value(json_object_get(output, RF_REPORT_KEY_FINGERPRINT));
    if (fp)
        snprintf(r->fingerprint, sizeof(r->fingerprint), "%s", fp);

    json_t *ledger = json_object_get(doc, RF_REPORT_KEY_LEDGER);
    json_t *entries = json_object_get(ledger, RF_REPORT_KEY_LEDGER_ENTRIES);
    size_t i;
    json_t *e;
    json_array_foreach(entries, i, e)
    {
        const char *cat = json_string_value(json_object_get(e, RF_REPORT_KEY_ENTRY_CATEGORY));
        for (size_t k = 0; cat && k < sizeof(ledger_map) / sizeof(ledger_map[0]); k++)
            if (strcmp(cat, rf_ledger_category_name(ledger_map[k].category)) == 0)
                get_u64(e, RF_REPORT_KEY_ENTRY_VALUE, &r->v[ledger_map[k].m]);
    }
    bench_bound_inputs_from_report(doc, &r->bound_in);
    json_decref(doc);
    return 0;
}
