/*
 * Unit tests of admission's verdict for a mixture-of-experts model
 * (admission_experts.c, issue 33 item 4): the cache a limit leaves beyond
 * the dense part and the anonymous memory, in experts per layer; the hit
 * rate expected of it (uniform c/n, or the observed routing's LRU rate);
 * the routed bytes a token streams; a cache of fewer than k experts a
 * layer; and the refusal when not even the cache's minimum (n experts, a
 * prompt batch's of one layer) fits. Figures are MiB-sized numbers
 * written n * MIB.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "ramforge/core/admission.h"
#include "ramforge/core/routing.h"

#define MIB UINT64_C(1048576)

static struct rf_admission_figure fig(uint64_t bytes)
{
    return rf_admission_figure_of(bytes, RF_PROV_EXACT_MEASURED, "test");
}

/* A cgroup with a hard limit, usage 795 MiB of which 560 MiB reclaimable file cache. */
static struct rf_cgroup_level level(uint64_t limit)
{
    struct rf_cgroup_level l;

    memset(&l, 0, sizeof(l));
    snprintf(l.dir, sizeof(l.dir), "/sys/fs/cgroup/memory/t");
    l.limit.has = true;
    l.limit.bytes = limit;
    l.high.error = -2;
    l.usage.has = true;
    l.usage.bytes = 795 * MIB;
    l.reclaimable_file.has = true;
    l.reclaimable_file.bytes = 560 * MIB;
    return l;
}

/*
 * RSS 760 MiB (so the run room is the limit), anonymous 40 + KV 11 +
 * scratch 5 = 56 MiB; a MoE model of dense 300 MiB and routed 1024 MiB
 * in 16 layers of 64 experts (16 MiB each over every layer, 1 MiB in one),
 * 8 used: a token reads 300 + 128 = 428 MiB.
 */
static void moe_input(struct rf_admission_input *in, struct rf_cgroup_level *l)
{
    memset(in, 0, sizeof(*in));
    in->process_rss = fig(760 * MIB);
    in->anonymous = fig(40 * MIB);
    in->kv_cache = fig(11 * MIB);
    in->graph_scratch = fig(5 * MIB);
    in->file_working_set = fig(428 * MIB);
    in->experts.n_expert = 64;
    in->experts.n_expert_used = 8;
    in->experts.dense_bytes = 300 * MIB;
    in->experts.routed_bytes = 1024 * MIB;
    in->experts.n_layer = 16;
    in->cgroups = l;
    in->n_cgroups = 1;
}

/*
 * Under 800 MiB: 744 MiB beside the anonymous memory, 444 MiB beyond the
 * dense part: 27 experts a layer (432 slots of 1 MiB). Uniform: hit rate 27/64, a
 * token streams (1 - 27/64) x 128 MiB. The verdict admits and says so; the
 * old one (no experts) did not name them.
 */
static void test_uniform(void **state)
{
    struct rf_cgroup_level l = level(800 * MIB);
    struct rf_admission_input in;
    struct rf_admission_result r;
    char head[512];

    (void)state;
    moe_input(&in, &l);
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_ADMITTED);
    assert_false(r.thrash);
    assert_true(r.has_experts);
    assert_int_equal(r.cache_experts, 27);
    assert_int_equal(r.expert_cache_bytes, 27 * 16 * MIB);
    assert_true(r.expert_cache_min);
    assert_false(r.expert_hit_observed);
    assert_true(r.expert_hit_rate == 27.0 / 64.0);
    assert_int_equal(r.expert_stream_bytes, (uint64_t)((1.0 - 27.0 / 64.0) * 128.0 * MIB));
    assert_non_null(strstr(r.reason, "; streams experts: "));
    assert_non_null(strstr(r.reason, " bytes per token, expected hit rate 0.42 at this budget"));
    rf_admission_headline(&r, head, sizeof(head));
    assert_non_null(strstr(head, "streams experts: "));
    assert_non_null(strstr(head, "expected hit rate 0.42 at this budget"));

    /* Every expert fits: hit rate 1, nothing streams. */
    l = level(2000 * MIB);
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.cache_experts, 64);
    assert_true(r.expert_hit_rate == 1.0);
    assert_int_equal(r.expert_stream_bytes, 0);

    /* A dense model: no expert figures, the reason as before. */
    in.experts.n_expert = 0;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_false(r.has_experts);
    assert_null(strstr(r.reason, "experts"));
}

/*
 * Observed routing: one layer of 64 experts where tokens cycle through
 * experts 0..15 (8 a token, two alternating sets): an LRU cache of 16 or
 * more holds every selection but the first ones, so the expected hit rate
 * at 27 experts is rf_routing_lru_hits', not 27/64.
 */
static void test_observed(void **state)
{
    struct rf_cgroup_level l = level(800 * MIB);
    struct rf_admission_input in;
    struct rf_admission_result r;
    struct rf_routing ro;
    uint64_t hits, sel;

    (void)state;
    assert_int_equal(rf_routing_init(&ro, 1, 64, 8), 0);
    for (int t = 0; t < 40; t++) {
        int32_t ids[8];
        for (int i = 0; i < 8; i++)
            ids[i] = (t % 2) * 8 + i;
        assert_int_equal(rf_routing_add(&ro, 0, ids, 8), 0);
    }
    assert_int_equal(rf_routing_lru_hits(&ro, -1, 27, &hits, &sel), 0);
    moe_input(&in, &l);
    in.experts.routing = &ro;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_true(r.expert_hit_observed);
    assert_true(r.expert_hit_rate == (double)hits / (double)sel);
    assert_true(r.expert_hit_rate > 0.9);
    assert_non_null(strstr(r.reason, "the rate of the routing observed"));

    /* A routing of another model (n differs) is not used. */
    ro.n_expert = 32;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_false(r.expert_hit_observed);
    ro.n_expert = 64;
    rf_routing_free(&ro);
}

/*
 * Under 456 MiB: 400 MiB beside the anonymous memory, 100 MiB beyond the
 * dense part: 100 slots, c = 6 experts a layer (96 + the 2 more of the
 * layer decoded), fewer than the 8 a token selects. Without streaming the
 * page cache holds them and re-reads a token's others by faults: "will
 * thrash", refused under enforce. Under streaming the expert cache reads
 * them (the old verdict refused the minimum below k of every layer):
 * "streams". Under 410 MiB: 54 slots, fewer than the 64 a prompt batch may
 * select in one layer: the cache's minimum does not fit, refused under
 * enforce (a warning under warn), saying what cannot fit, never "will
 * thrash".
 */
static void test_minimum(void **state)
{
    struct rf_cgroup_level l = level(456 * MIB);
    struct rf_admission_input in;
    struct rf_admission_result r;
    char head[512];

    (void)state;
    moe_input(&in, &l);
    in.mode = RF_ADMISSION_ENFORCE;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_REJECTED);
    assert_true(r.expert_cache_min);
    assert_int_equal(r.cache_experts, 6);
    assert_int_equal(r.expert_cache_bytes, 98 * MIB);
    assert_true(r.expert_hit_rate == 6.0 / 64.0);
    assert_non_null(strstr(r.reason, "will thrash"));
    in.streaming = true;
    in.mode = RF_ADMISSION_WARN;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_WARNING);
    assert_true(r.expert_cache_min);
    assert_false(r.expert_dense_streams);
    assert_int_equal(r.cache_experts, 6);
    assert_non_null(strstr(r.reason, "streams: "));
    assert_null(strstr(r.reason, "will thrash"));
    assert_null(strstr(r.reason, "cannot fit the experts' minimum"));
    rf_admission_headline(&r, head, sizeof(head));
    assert_null(strstr(head, "cannot fit the experts' minimum"));
    assert_non_null(strstr(head, "streams experts: "));
    in.streaming = false;
    in.mode = RF_ADMISSION_ENFORCE;
    l = level(410 * MIB);
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_REJECTED);
    assert_true(r.refused);
    assert_true(r.thrash);
    assert_int_equal(r.cache_experts, 0);
    assert_false(r.expert_cache_min);
    assert_non_null(strstr(r.reason, "cannot fit the experts' minimum"));
    assert_non_null(strstr(r.reason, "at least the 64 of one layer a prompt batch may select"));
    assert_null(strstr(r.reason, "will thrash"));
    rf_admission_headline(&r, head, sizeof(head));
    assert_non_null(strstr(head, "cannot fit the experts' minimum"));
    in.mode = RF_ADMISSION_WARN;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_WARNING);
}

/*
 * The same 410 MiB under streaming: the dense part (300 MiB) does not fit
 * beside the cache's minimum, but the minimum (64 slots) and a minimum
 * window (16 MiB) do in the 354 MiB: the dense part streams through the
 * window (the plan, streaming_experts.c), so the verdict streams, with the
 * minimum's cache (c = 3: 48 + 5 of 64 slots), instead of "cannot fit the
 * experts' minimum" (the verdict without streaming). With experts of 4
 * MiB a layer (a minimum of 256 MiB) and 260 MiB (204 MiB beside the
 * anonymous memory) even that does not fit, and the minimum is refused as
 * without streaming.
 */
static void test_dense_streams(void **state)
{
    struct rf_cgroup_level l = level(410 * MIB);
    struct rf_admission_input in;
    struct rf_admission_result r;

    (void)state;
    moe_input(&in, &l);
    in.mode = RF_ADMISSION_WARN;
    in.streaming = true;
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_int_equal(r.outcome, RF_ADMIT_WARNING);
    assert_true(r.expert_cache_min);
    assert_true(r.expert_dense_streams);
    assert_int_equal(r.cache_experts, 3);
    assert_int_equal(r.expert_cache_bytes, 64 * MIB);
    assert_non_null(strstr(r.reason, "streams: "));
    assert_non_null(strstr(r.reason, "streams through the read-ahead window"));
    assert_null(strstr(r.reason, "cannot fit the experts' minimum"));
    assert_null(strstr(r.reason, "will thrash"));
    in.experts.routed_bytes = 4096 * MIB; /* 4 MiB an expert of a layer: 256 MiB the minimum */
    in.file_working_set = fig(812 * MIB);
    l = level(260 * MIB); /* 204 MiB beside the anonymous memory */
    assert_int_equal(rf_admission_decide(&in, &r), 0);
    assert_false(r.expert_cache_min);
    assert_false(r.expert_dense_streams);
    assert_non_null(strstr(r.reason, "cannot fit the experts' minimum"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_uniform),
        cmocka_unit_test(test_observed),
        cmocka_unit_test(test_minimum),
        cmocka_unit_test(test_dense_streams),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
