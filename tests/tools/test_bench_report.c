/*
 * Tests for bench_report_read (tools/bench/bench_report.c), the reader of a run's
 * report in `ramforge bench`, against reports written by the library's own
 * writer (rf_report_to_json + rf_json_write_file) from hand-made structs:
 * the four timers and four ledger categories bench keeps land in the right
 * metrics, decode tokens/s is (generated - 1) / decode seconds rounded to
 * 3 decimals (worked out by hand below), unknown and out-of-range figures
 * stay unknown (never 0), a policy-off report without a ledger keeps the
 * timers, and an unreadable file is -EBADMSG with a message. Expected
 * values are the inputs given to the writer, not the reader's output.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "bench/bench_report.h"
#include "ramforge/core/ledger.h"
#include "ramforge/core/report.h"
#include "ramforge/core/report_json.h"
#include "ramforge/core/timing.h"

static const int32_t tokens[] = {1, -1, 256, INT32_MAX, 15043};
#define N_TOKENS (sizeof(tokens) / sizeof(tokens[0]))

/*
 * Pinned fingerprint of `tokens` (as in test_core_report), computed outside C with:
 *   python3 -c 'import struct;h=0xcbf29ce484222325
 *   for b in struct.pack("<5i",1,-1,256,2147483647,15043): h=((h^b)*0x100000001b3)%2**64
 *   print("fnv1a64:%016x"%h)'
 */
#define TOKENS_FINGERPRINT "fnv1a64:e99004cc3f8d7a62"

struct fixture {
    struct rf_ledger ledger;
    struct rf_timing timing;
    struct rf_report r;
    char path[PATH_MAX];
};

/*
 * A report with: timers model_load 123456789, ttft 42, end_to_end
 * 5000000000, decode 3000000000 (staging absent); 5 generated tokens;
 * ledger FileBackedResident 8192, ProcessRssPeak 5000000, CgroupPeak
 * 7000000, CgroupCurrent unknown (the rest rf_ledger_init's unknowns).
 */
static void build(struct fixture *f)
{
    memset(f, 0, sizeof(*f));
    rf_ledger_init(&f->ledger);
    assert_int_equal(rf_ledger_set(&f->ledger, RF_LEDGER_FILE_BACKED_RESIDENT, 8192,
                                   RF_PROV_EXACT_MEASURED, "smaps", NULL),
                     0);
    assert_int_equal(rf_ledger_set(&f->ledger, RF_LEDGER_PROCESS_RSS_PEAK, 5000000,
                                   RF_PROV_EXACT_MEASURED, "VmHWM", NULL),
                     0);
    assert_int_equal(rf_ledger_set(&f->ledger, RF_LEDGER_CGROUP_PEAK, 7000000,
                                   RF_PROV_EXACT_MEASURED, "memory.peak", NULL),
                     0);
    assert_int_equal(rf_ledger_set_unknown(&f->ledger, RF_LEDGER_CGROUP_CURRENT, "cgroup",
                                           "no cgroup memory controller found"),
                     0);
    rf_timing_init(&f->timing);
    rf_timing_set(&f->timing, RF_TIMER_MODEL_LOAD, 123456789);
    rf_timing_set(&f->timing, RF_TIMER_TTFT, 42);
    rf_timing_set(&f->timing, RF_TIMER_END_TO_END, 5000000000ull);
    rf_timing_set(&f->timing, RF_TIMER_DECODE, 3000000000ull);
    f->r.ramforge_version = "0.1.0-test";
    f->r.llama_cpp_version = "test";
    f->r.model_path = "/models/tiny.gguf";
    f->r.policy = "observe";
    f->r.ledger = &f->ledger;
    f->r.timing = &f->timing;
    f->r.tokens = tokens;
    f->r.n_tokens = N_TOKENS;
}

/* Writes f->r to a fresh temporary file (f->path) with the library's writer. */
static void write_report(struct fixture *f)
{
    json_t *doc = NULL;
    int fd;

    snprintf(f->path, sizeof(f->path), "/tmp/test_bench_report.XXXXXX");
    fd = mkstemp(f->path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(rf_report_to_json(&f->r, &doc), 0);
    assert_int_equal(rf_json_write_file(doc, f->path), 0);
    json_decref(doc);
}

static void read_back(struct fixture *f, struct bench_row *row)
{
    char err[256] = "";

    memset(row, 0, sizeof(*row));
    write_report(f);
    assert_int_equal(bench_report_read(f->path, row, err, sizeof(err)), 0);
    assert_string_equal(err, "");
    unlink(f->path);
}

static void assert_u64(const struct bench_value *v, uint64_t want)
{
    assert_true(v->has);
    assert_true(v->u == want);
}

static void test_figures(void **state)
{
    struct fixture f;
    struct bench_row row;

    (void)state;
    build(&f);
    read_back(&f, &row);
    assert_u64(&row.v[BENCH_M_LOAD], 123456789);
    assert_false(row.v[BENCH_M_STAGING].has); /* timer absent: null, not 0 */
    assert_u64(&row.v[BENCH_M_TTFT], 42);
    assert_u64(&row.v[BENCH_M_E2E], 5000000000ull);
    /* (5 - 1) tokens / 3 s = 1.3333... -> 1.333 */
    assert_true(row.v[BENCH_M_DECODE_TPS].has);
    assert_true(row.v[BENCH_M_DECODE_TPS].d == 1.333);
    assert_u64(&row.v[BENCH_M_MAPPING_RSS], 8192);
    assert_u64(&row.v[BENCH_M_PEAK_RSS], 5000000);
    assert_u64(&row.v[BENCH_M_CG_PEAK], 7000000);
    assert_false(row.v[BENCH_M_CG_CURRENT].has); /* unknown in the ledger */
    /* bench's own figures are not in a report */
    assert_false(row.v[BENCH_M_PROCESS].has);
    assert_false(row.v[BENCH_M_MAXRSS].has);
    assert_string_equal(row.fingerprint, TOKENS_FINGERPRINT);
}

/* Decode tokens/s to 3 decimals (half up), and the runs that have no such figure. */
static void test_decode_rounding(void **state)
{
    struct fixture f;
    struct bench_row row;

    (void)state;
    build(&f);
    /* 4 tokens / 1.6 s = 2.5 exactly */
    rf_timing_set(&f.timing, RF_TIMER_DECODE, 1600000000ull);
    read_back(&f, &row);
    assert_true(row.v[BENCH_M_DECODE_TPS].d == 2.5);
    /* 4 tokens / 0.0006 s = 6666.666... -> 6666.667 */
    rf_timing_set(&f.timing, RF_TIMER_DECODE, 600000ull);
    read_back(&f, &row);
    assert_true(row.v[BENCH_M_DECODE_TPS].d == 6666.667);
    /* one token: no decode interval to time */
    f.r.n_tokens = 1;
    read_back(&f, &row);
    assert_false(row.v[BENCH_M_DECODE_TPS].has);
    /* decode_ns 0: nothing to divide by */
    f.r.n_tokens = N_TOKENS;
    rf_timing_set(&f.timing, RF_TIMER_DECODE, 0);
    read_back(&f, &row);
    assert_false(row.v[BENCH_M_DECODE_TPS].has);
}

/* A figure above INT64_MAX is null in the report: unknown here, never a wrapped value. */
static void test_out_of_range_unknown(void **state)
{
    struct fixture f;
    struct bench_row row;

    (void)state;
    build(&f);
    assert_int_equal(rf_ledger_set(&f.ledger, RF_LEDGER_PROCESS_RSS_PEAK, UINT64_MAX,
                                   RF_PROV_EXACT_MEASURED, "VmHWM", NULL),
                     0);
    read_back(&f, &row);
    assert_false(row.v[BENCH_M_PEAK_RSS].has);
    assert_u64(&row.v[BENCH_M_MAPPING_RSS], 8192);
}

/* Policy off keeps no ledger: its figures are unknown, the timers still count. */
static void test_policy_off(void **state)
{
    struct fixture f;
    struct bench_row row;

    (void)state;
    build(&f);
    f.r.policy = "off";
    f.r.ledger = NULL;
    f.r.not_built_reason = "residency policy off";
    read_back(&f, &row);
    assert_false(row.v[BENCH_M_PEAK_RSS].has);
    assert_false(row.v[BENCH_M_MAPPING_RSS].has);
    assert_false(row.v[BENCH_M_CG_CURRENT].has);
    assert_false(row.v[BENCH_M_CG_PEAK].has);
    assert_u64(&row.v[BENCH_M_LOAD], 123456789);
    assert_u64(&row.v[BENCH_M_E2E], 5000000000ull);
    assert_string_equal(row.fingerprint, TOKENS_FINGERPRINT);
}

static void test_unreadable(void **state)
{
    struct bench_row row;
    char err[256] = "", path[] = "/tmp/test_bench_report.XXXXXX";
    int fd;

    (void)state;
    memset(&row, 0, sizeof(row));
    assert_int_equal(bench_report_read("/nonexistent/report.json", &row, err, sizeof(err)),
                     -EBADMSG);
    assert_non_null(strstr(err, "cannot read the report /nonexistent/report.json: "));

    fd = mkstemp(path); /* a truncated document */
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "{\"timing\": {", 12), 12);
    close(fd);
    assert_int_equal(bench_report_read(path, &row, err, sizeof(err)), -EBADMSG);
    assert_non_null(strstr(err, path));
    unlink(path);
    for (int m = 0; m < BENCH_M_N; m++)
        assert_false(row.v[m].has);
    assert_string_equal(row.fingerprint, "");
}

/*
 * The bound's inputs from hand-written report text (json_loads): a
 * streaming.plan gives W and R; without it W is the inventory's file-backed
 * bytes and R's parts are the four ledger entries; an unknown Runtime is
 * not known; a missing KvCache leaves no parts; a plan without R falls
 * back to the inventory.
 */
static void test_bound_inputs(void **state)
{
    struct bench_bound_inputs in;
    json_error_t je;
    (void)state;

    /* R = limit - fixed (700 - 100), not resident_bytes (limit - margin - fixed) */
    json_t *doc = json_loads("{\"streaming\": {\"plan\": {\"working_set_bytes\": 1000, "
                             "\"resident_bytes\": 584, \"limit_bytes\": 700, \"fixed_bytes\": "
                             "100}}, \"model\": {\"inventory\": {\"totals\": "
                             "{\"file_backed_logical_bytes\": 5}}}}",
                             0, &je);
    assert_non_null(doc);
    bench_bound_inputs_from_report(doc, &in);
    assert_true(in.has_w && in.has_r);
    assert_int_equal(in.w_bytes, 1000);
    assert_int_equal(in.r_bytes, 600);
    assert_false(in.has_parts);
    json_decref(doc);

    const char *ledger =
        "{\"model\": {\"inventory\": {\"totals\": {\"file_backed_logical_bytes\": 7000}}}, "
        "\"streaming\": {\"plan\": {\"working_set_bytes\": 1000}}, "
        "\"ledger\": {\"entries\": [{\"category\": \"AnonymousWeights\", \"value_bytes\": 11}, "
        "{\"category\": \"KvCache\", \"value_bytes\": 13}, "
        "{\"category\": \"GraphScratch\", \"value_bytes\": 17}, "
        "{\"category\": \"Runtime\", \"value_bytes\": null}]}}";
    doc = json_loads(ledger, 0, &je);
    assert_non_null(doc);
    bench_bound_inputs_from_report(doc, &in);
    assert_true(in.has_w);
    assert_int_equal(in.w_bytes, 7000);
    assert_false(in.has_r);
    assert_true(in.has_parts);
    assert_int_equal(in.anonymous_bytes, 11);
    assert_int_equal(in.kv_bytes, 13);
    assert_int_equal(in.scratch_bytes, 17);
    assert_false(in.runtime_known);
    assert_int_equal(in.runtime_bytes, 0);
    json_decref(doc);

    doc = json_loads("{\"ledger\": {\"entries\": [{\"category\": \"AnonymousWeights\", "
                     "\"value_bytes\": 11}, {\"category\": \"GraphScratch\", \"value_bytes\": 1}, "
                     "{\"category\": \"Runtime\", \"value_bytes\": 19}]}}",
                     0, &je);
    assert_non_null(doc);
    bench_bound_inputs_from_report(doc, &in);
    assert_false(in.has_w);
    assert_false(in.has_parts); /* no KvCache */
    assert_true(in.runtime_known);
    assert_int_equal(in.runtime_bytes, 19);
    json_decref(doc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_figures),
        cmocka_unit_test(test_decode_rounding),
        cmocka_unit_test(test_out_of_range_unknown),
        cmocka_unit_test(test_policy_off),
        cmocka_unit_test(test_unreadable),
        cmocka_unit_test(test_bound_inputs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
