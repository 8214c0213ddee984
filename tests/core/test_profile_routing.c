/*
 * Unit tests of the persisted profile's routing (profile_routing.c through
 * rf_profile_to_text / rf_profile_parse / rf_profile_merge): a MoE model's
 * per-layer histogram and reuse distances round-trip, so a later run's
 * rf_routing_lru_hits gives the same hit rates; a malformed routing is
 * refused with its reason; a profile without one parses as before.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ramforge/core/profile.h"
#include "ramforge/core/routing.h"

#define IDENTITY "sha256:0000000000000000000000000000000000000000000000000000000000000000"

/* A profile of 2 layers of 8 experts, 2 used, 50 seeded tokens. */
static void routed_profile(struct rf_profile *p)
{
    rf_profile_init(p);
    snprintf(p->identity, sizeof(p->identity), "%s", IDENTITY);
    p->file_size_bytes = 4096;
    assert_int_equal(rf_routing_init(&p->routing, 2, 8, 2), 0);
    uint32_t x = 7;
    for (int t = 0; t < 50; t++)
        for (uint32_t l = 0; l < 2; l++) {
            x = x * 1103515245u + 12345u;
            int32_t ids[2] = {(int32_t)((x >> 8) % 8), (int32_t)((x >> 16) % 4)};
            if (ids[1] == ids[0])
                ids[1] = (ids[0] + 1) % 8;
            assert_int_equal(rf_routing_add(&p->routing, l, ids, 2), 0);
        }
}

static void test_round_trip(void **state)
{
    struct rf_profile p, q;
    char *text = NULL, why[256];
    (void)state;

    routed_profile(&p);
    assert_int_equal(rf_profile_to_text(&p, &text), 0);
    assert_non_null(strstr(text, "\"routing\""));
    assert_int_equal(rf_profile_parse(text, strlen(text), 0, &q, why, sizeof(why)), 0);
    assert_int_equal(q.routing.n_layer, 2);
    assert_int_equal(q.routing.n_expert, 8);
    assert_int_equal(q.routing.n_expert_used, 2);
    assert_memory_equal(q.routing.counts, p.routing.counts, 2 * 8 * sizeof(uint64_t));
    assert_memory_equal(q.routing.tokens, p.routing.tokens, 2 * sizeof(uint64_t));
    assert_memory_equal(q.routing.distance, p.routing.distance, 2 * 9 * sizeof(uint64_t));
    for (uint32_t c = 0; c <= 8; c++) {
        uint64_t h1, s1, h2, s2;
        assert_int_equal(rf_routing_lru_hits(&p.routing, -1, c, &h1, &s1), 0);
        assert_int_equal(rf_routing_lru_hits(&q.routing, -1, c, &h2, &s2), 0);
        assert_int_equal(h1, h2);
        assert_int_equal(s1, s2);
    }

    /* the merge: ours' routing replaces the file's */
    struct rf_profile disk;
    rf_profile_init(&disk);
    assert_int_equal(rf_profile_merge(&disk, &q, 0, false, 0), 0);
    assert_int_equal(disk.routing.n_layer, 2);
    assert_memory_equal(disk.routing.counts, p.routing.counts, 2 * 8 * sizeof(uint64_t));
    rf_profile_free(&disk);
    rf_profile_free(&q);
    free(text);

    /* no routing: null, parsed as none */
    rf_routing_free(&p.routing);
    assert_int_equal(rf_profile_to_text(&p, &text), 0);
    assert_non_null(strstr(text, "\"routing\": null"));
    assert_int_equal(rf_profile_parse(text, strlen(text), 0, &q, why, sizeof(why)), 0);
    assert_int_equal(q.routing.n_layer, 0);
    rf_profile_free(&q);
    rf_profile_free(&p);
    free(text);
}

/* Replaces the first occurrence of from in text by to (same buffer, reallocated). */
static char *replace(char *text, const char *from, const char *to)
{
    char *at = strstr(text, from);
    assert_non_null(at);
    size_t n = strlen(text) - strlen(from) + strlen(to) + 1;
    char *out = malloc(n);
    assert_non_null(out);
    snprintf(out, n, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
    free(text);
    return out;
}

static void test_malformed(void **state)
{
    static const char *const cases[][2] = {
        {"\"n_expert_used\": 2", "\"n_expert_used\": 9"}, /* k > n */
        {"\"n_expert\": 8", "\"n_expert\": 0"},
        {"\"counts\": [", "\"counts\": [1, "}, /* n + 1 counts */
        {"\"distance\": [", "\"distance\": [-1, "},
        {"\"tokens\": ", "\"tokens\": -"},
    };
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct rf_profile p, q;
        char *text = NULL, why[256] = "";
        routed_profile(&p);
        assert_int_equal(rf_profile_to_text(&p, &text), 0);
        text = replace(text, cases[i][0], cases[i][1]);
        assert_int_equal(rf_profile_parse(text, strlen(text), 0, &q, why, sizeof(why)), -EBADMSG);
        assert_non_null(strstr(why, "routing"));
        assert_int_equal(q.routing.n_layer, 0);
        rf_profile_free(&p);
        free(text);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_malformed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
