/*
 * Tests for the resource-lifetime state machine: every ordered pair of
 * states against an expected table written out here independently of
 * lifetime.c, the happy path, the failure path keeping its errno, the
 * loops of later sessions, and the counts.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "ramforge/core/lifetime.h"

#define N RF_LT_N

/* Short names for the expected table. */
enum {
    DIS = RF_LT_DISCOVERED,
    OWN = RF_LT_OWNED,
    REF = RF_LT_REFERENCED,
    SUB = RF_LT_EXECUTION_SUBMITTED,
    CMP = RF_LT_EXECUTION_COMPLETED,
    OBS = RF_LT_OPERATION_BOUNDARY_SYNCHRONIZED,
    ELG = RF_LT_RELEASE_ELIGIBLE,
    SEL = RF_LT_RELEASE_SELECTED,
    REQ = RF_LT_RELEASE_REQUESTED,
    ACC = RF_LT_NATIVE_ACCEPTED,
    NFL = RF_LT_NATIVE_FAILURE,
    REC = RF_LT_RECONCILED,
    RFL = RF_LT_RELEASE_FAILED,
    FIN = RF_LT_FINAL_USE_PROVEN,
    INV = RF_LT_INVALIDATED,
    SHR = RF_LT_SHARED_OR_REUSED,
    UNK = RF_LT_UNKNOWN,
};

/*
 * The expected legal transitions, one row per from-state, 1 = legal.
 * Columns in enum order:
 *            DIS OWN REF SUB CMP OBS ELG SEL REQ ACC NFL REC RFL FIN INV SHR UNK
 */
/* clang-format off */
static const unsigned char expected[N][N] = {
    /* DIS */ {0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1},
    /* OWN */ {0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1},
    /* REF */ {0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1},
    /* SUB */ {0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1},
    /* CMP */ {0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1},
    /* OBS */ {0, 0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1},
    /* ELG */ {0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 1, 1},
    /* SEL */ {0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 1, 1},
    /* REQ */ {0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 1, 0, 1},
    /* ACC */ {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 1, 0, 1},
    /* NFL */ {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 0, 1},
    /* REC */ {0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1},
    /* RFL */ {0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1},
    /* FIN */ {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    /* INV */ {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    /* SHR */ {0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1},
    /* UNK */ {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0},
};
/* clang-format on */

/* A path from Discovered to each state, along the diagram (FIN: none). */
static const int path_to[N][12] = {
    [DIS] = {-1},
    [OWN] = {OWN, -1},
    [REF] = {OWN, REF, -1},
    [SUB] = {OWN, REF, SUB, -1},
    [CMP] = {OWN, REF, SUB, CMP, -1},
    [OBS] = {OWN, REF, SUB, CMP, OBS, -1},
    [ELG] = {OWN, REF, SUB, CMP, OBS, ELG, -1},
    [SEL] = {OWN, REF, SUB, CMP, OBS, ELG, SEL, -1},
    [REQ] = {OWN, REF, SUB, CMP, OBS, ELG, SEL, REQ, -1},
    [ACC] = {OWN, REF, SUB, CMP, OBS, ELG, SEL, REQ, ACC, -1},
    [NFL] = {OWN, REF, SUB, CMP, OBS, ELG, SEL, REQ, NFL, -1},
    [REC] = {OWN, REF, SUB, CMP, OBS, ELG, SEL, REQ, ACC, REC, -1},
    [RFL] = {OWN, REF, SUB, CMP, OBS, ELG, SEL, REQ, NFL, RFL, -1},
    [FIN] = {-2},
    [INV] = {INV, -1},
    [SHR] = {OWN, REF, SUB, CMP, OBS, ELG, SHR, -1},
    [UNK] = {UNK, -1},
};

/* Drives resource i from Discovered to state s along path_to. */
static void drive(struct rf_lifetime *lt, size_t i, int s)
{
    int k;

    assert_int_equal(lt->states[i], RF_LT_DISCOVERED);
    for (k = 0; path_to[s][k] >= 0; k++)
        assert_int_equal(rf_lifetime_advance(lt, i, (enum rf_lifetime_state)path_to[s][k]), 0);
    assert_int_equal(lt->states[i], s);
}

static void test_names(void **state)
{
    static const char *const names[N] = {
        "Discovered",
        "Owned",
        "Referenced",
        "ExecutionSubmitted",
        "ExecutionCompleted",
        "OperationBoundarySynchronized",
        "ReleaseEligible",
        "ReleaseSelected",
        "ReleaseRequested",
        "NativeAccepted",
        "NativeFailure",
        "Reconciled",
        "ReleaseFailed",
        "FinalUseProven",
        "Invalidated",
        "SharedOrReused",
        "Unknown",
    };
    int s;

    (void)state;
    assert_int_equal(RF_LT_N, 17);
    for (s = 0; s < N; s++)
        assert_string_equal(rf_lifetime_state_name((enum rf_lifetime_state)s), names[s]);
    assert_null(rf_lifetime_state_name(RF_LT_N));
    assert_null(rf_lifetime_state_name((enum rf_lifetime_state)(-1)));
}

/* rf_lifetime_transition_legal over all 17 x 17 pairs, plus out-of-range states. */
static void test_legal_table(void **state)
{
    int from, to;

    (void)state;
    for (from = 0; from < N; from++)
        for (to = 0; to < N; to++)
            assert_int_equal(rf_lifetime_transition_legal((enum rf_lifetime_state)from,
                                                          (enum rf_lifetime_state)to),
                             expected[from][to]);
    for (from = 0; from < N; from++) {
        assert_false(rf_lifetime_transition_legal((enum rf_lifetime_state)from, RF_LT_N));
        assert_false(rf_lifetime_transition_legal(RF_LT_N, (enum rf_lifetime_state)from));
    }
}

/* The spec's invariants, stated directly as well as through the table. */
static void test_key_invariants(void **state)
{
    int s;

    (void)state;
    assert_false(rf_lifetime_transition_legal(RF_LT_EXECUTION_COMPLETED, RF_LT_RELEASE_ELIGIBLE));
    for (s = 0; s < N; s++) {
        assert_false(rf_lifetime_transition_legal((enum rf_lifetime_state)s, s));
        assert_false(
            rf_lifetime_transition_legal((enum rf_lifetime_state)s, RF_LT_FINAL_USE_PROVEN));
        assert_false(
            rf_lifetime_transition_legal(RF_LT_FINAL_USE_PROVEN, (enum rf_lifetime_state)s));
        assert_false(rf_lifetime_transition_legal(RF_LT_INVALIDATED, (enum rf_lifetime_state)s));
    }
}

/*
 * rf_lifetime_advance for every reachable from-state and every to-state:
 * legal pairs succeed and land on to, illegal ones return -EINVAL and
 * leave the state (and the error) unchanged. FinalUseProven is
 * unreachable, so its row is the table check's alone.
 */
static void test_advance_every_pair(void **state)
{
    struct rf_lifetime lt;
    int from, to;
    size_t i;

    (void)state;
    assert_int_equal(rf_lifetime_init(&lt, (size_t)N * N), 0);
    for (from = 0; from < N; from++) {
        if (from == FIN)
            continue;
        for (to = 0; to < N; to++) {
            i = (size_t)from * N + (size_t)to;
            drive(&lt, i, from);
            if (expected[from][to]) {
                assert_int_equal(rf_lifetime_advance(&lt, i, (enum rf_lifetime_state)to), 0);
                assert_int_equal(lt.states[i], to);
            } else {
                assert_int_equal(rf_lifetime_advance(&lt, i, (enum rf_lifetime_state)to), -EINVAL);
                assert_int_equal(lt.states[i], from);
            }
            assert_int_equal(rf_lifetime_error(&lt, i), 0);
        }
        assert_true(rf_lifetime_check(&lt));
    }
    /* Out of range: index and state. */
    assert_int_equal(rf_lifetime_advance(&lt, lt.n, RF_LT_OWNED), -EINVAL);
    assert_int_equal(rf_lifetime_advance(&lt, 0, RF_LT_N), -EINVAL);
    assert_int_equal(lt.states[0], RF_LT_DISCOVERED);
    assert_int_equal(rf_lifetime_advance(NULL, 0, RF_LT_OWNED), -EINVAL);
    rf_lifetime_free(&lt);
}

static void test_happy_path(void **state)
{
    static const enum rf_lifetime_state chain[] = {
        RF_LT_OWNED,
        RF_LT_REFERENCED,
        RF_LT_EXECUTION_SUBMITTED,
        RF_LT_EXECUTION_COMPLETED,
        RF_LT_EXECUTION_SUBMITTED, /* next decode */
        RF_LT_EXECUTION_COMPLETED,
        RF_LT_OPERATION_BOUNDARY_SYNCHRONIZED,
        RF_LT_RELEASE_ELIGIBLE,
        RF_LT_RELEASE_SELECTED,
        RF_LT_RELEASE_REQUESTED,
        RF_LT_NATIVE_ACCEPTED,
        RF_LT_RECONCILED,
        RF_LT_REFERENCED, /* a later session: pages re-fault */
        RF_LT_EXECUTION_SUBMITTED,
        RF_LT_EXECUTION_COMPLETED,
        RF_LT_OPERATION_BOUNDARY_SYNCHRONIZED,
        RF_LT_RELEASE_ELIGIBLE,
        RF_LT_EXECUTION_SUBMITTED, /* eligible, not selected: next session */
        RF_LT_EXECUTION_COMPLETED,
        RF_LT_OPERATION_BOUNDARY_SYNCHRONIZED,
        RF_LT_RELEASE_ELIGIBLE,
        RF_LT_RELEASE_SELECTED,
        RF_LT_SHARED_OR_REUSED,
        RF_LT_INVALIDATED, /* generation refresh */
    };
    struct rf_lifetime lt;
    size_t k;

    (void)state;
    assert_int_equal(rf_lifetime_init(&lt, 3), 0);
    assert_true(rf_lifetime_check(&lt));
    for (k = 0; k < 3; k++)
        assert_int_equal(lt.states[k], RF_LT_DISCOVERED);
    for (k = 0; k < sizeof(chain) / sizeof(chain[0]); k++) {
        assert_int_equal(rf_lifetime_advance(&lt, 1, chain[k]), 0);
        assert_int_equal(lt.states[1], chain[k]);
        assert_true(rf_lifetime_check(&lt));
    }
    /* Invalidated is terminal. */
    assert_int_equal(rf_lifetime_advance(&lt, 1, RF_LT_UNKNOWN), -EINVAL);
    assert_int_equal(rf_lifetime_advance(&lt, 1, RF_LT_DISCOVERED), -EINVAL);
    /* The others did not move. */
    assert_int_equal(lt.states[0], RF_LT_DISCOVERED);
    assert_int_equal(lt.states[2], RF_LT_DISCOVERED);
    rf_lifetime_free(&lt);
    assert_null(lt.states);
    assert_int_equal(lt.n, 0);
    rf_lifetime_free(&lt); /* a zeroed struct */
    rf_lifetime_free(NULL);
}

static void test_failure_keeps_errno(void **state)
{
    struct rf_lifetime lt;

    (void)state;
    assert_int_equal(rf_lifetime_init(&lt, 2), 0);
    drive(&lt, 0, REQ);
    drive(&lt, 1, SEL);

    /* Only from ReleaseRequested, only a negative errno; nothing changes otherwise. */
    assert_int_equal(rf_lifetime_fail(&lt, 1, -EBUSY), -EINVAL);
    assert_int_equal(lt.states[1], RF_LT_RELEASE_SELECTED);
    assert_int_equal(rf_lifetime_error(&lt, 1), 0);
    assert_int_equal(rf_lifetime_fail(&lt, 0, 0), -EINVAL);
    assert_int_equal(rf_lifetime_fail(&lt, 0, EBUSY), -EINVAL);
    assert_int_equal(lt.states[0], RF_LT_RELEASE_REQUESTED);
    assert_int_equal(rf_lifetime_fail(&lt, 2, -EBUSY), -EINVAL);
    assert_int_equal(rf_lifetime_fail(NULL, 0, -EBUSY), -EINVAL);

    assert_int_equal(rf_lifetime_fail(&lt, 0, -EBUSY), 0);
    assert_int_equal(lt.states[0], RF_LT_RELEASE_FAILED);
    assert_int_equal(rf_lifetime_error(&lt, 0), -EBUSY);
    assert_true(rf_lifetime_check(&lt));

    /* Failing twice is not a transition from ReleaseRequested. */
    assert_int_equal(rf_lifetime_fail(&lt, 0, -EIO), -EINVAL);
    assert_int_equal(rf_lifetime_error(&lt, 0), -EBUSY);

    /* An illegal move keeps both the state and the errno. */
    assert_int_equal(rf_lifetime_advance(&lt, 0, RF_LT_RECONCILED), -EINVAL);
    assert_int_equal(lt.states[0], RF_LT_RELEASE_FAILED);
    assert_int_equal(rf_lifetime_error(&lt, 0), -EBUSY);

    /* Referenced again in a later session: the error belongs to the old state. */
    assert_int_equal(rf_lifetime_advance(&lt, 0, RF_LT_REFERENCED), 0);
    assert_int_equal(rf_lifetime_error(&lt, 0), 0);
    assert_int_equal(lt.errors[0], 0);
    assert_true(rf_lifetime_check(&lt));

    /* Out of range. */
    assert_int_equal(rf_lifetime_error(&lt, 2), -EINVAL);
    assert_int_equal(rf_lifetime_error(NULL, 0), -EINVAL);
    rf_lifetime_free(&lt);
}

static void test_counts(void **state)
{
    /* Target state per resource. */
    static const int targets[] = {
        DIS, OWN, REF, SUB, CMP, OBS, ELG, ELG, SEL, REQ, ACC,
        NFL, REC, REC, REC, RFL, INV, INV, SHR, UNK, UNK, UNK,
    };
    const size_t n = sizeof(targets) / sizeof(targets[0]);
    uint64_t want[N] = {0}, counts[N];
    struct rf_lifetime lt;
    uint64_t total = 0;
    size_t i;
    int s;

    (void)state;
    assert_int_equal(rf_lifetime_init(&lt, n), 0);
    for (i = 0; i < n; i++) {
        drive(&lt, i, targets[i]);
        want[targets[i]]++;
    }
    memset(counts, 0xa5, sizeof(counts));
    rf_lifetime_counts(&lt, counts);
    for (s = 0; s < N; s++) {
        assert_int_equal(counts[s], want[s]);
        total += counts[s];
    }
    assert_int_equal(total, n);
    assert_int_equal(counts[RF_LT_RECONCILED], 3);
    assert_int_equal(counts[RF_LT_UNKNOWN], 3);
    assert_int_equal(counts[RF_LT_FINAL_USE_PROVEN], 0);

    memset(counts, 0xa5, sizeof(counts));
    rf_lifetime_counts(NULL, counts);
    for (s = 0; s < N; s++)
        assert_int_equal(counts[s], 0);
    rf_lifetime_free(&lt);
}

static void test_init_and_check(void **state)
{
    struct rf_lifetime lt;

    (void)state;
    assert_int_equal(rf_lifetime_init(NULL, 4), -EINVAL);
    assert_int_equal(rf_lifetime_init(&lt, 0), 0);
    assert_int_equal(lt.n, 0);
    assert_true(rf_lifetime_check(&lt));
    assert_int_equal(rf_lifetime_advance(&lt, 0, RF_LT_OWNED), -EINVAL);
    rf_lifetime_free(&lt);
    assert_int_equal(rf_lifetime_init(&lt, SIZE_MAX / 2), -ENOMEM);
    assert_null(lt.states);
    assert_null(lt.errors);
    assert_int_equal(lt.n, 0);

    /* The checker catches each broken invariant. */
    assert_false(rf_lifetime_check(NULL));
    assert_int_equal(rf_lifetime_init(&lt, 2), 0);
    assert_true(rf_lifetime_check(&lt));
    lt.states[1] = RF_LT_N;
    assert_false(rf_lifetime_check(&lt));
    lt.states[1] = RF_LT_RECONCILED;
    lt.errors[1] = -EIO; /* an error off ReleaseFailed */
    assert_false(rf_lifetime_check(&lt));
    lt.states[1] = RF_LT_RELEASE_FAILED;
    assert_true(rf_lifetime_check(&lt));
    lt.errors[1] = EIO; /* a positive error */
    assert_false(rf_lifetime_check(&lt));
    lt.errors[1] = 0;
    assert_true(rf_lifetime_check(&lt)); /* ReleaseFailed via advance: no errno kept */
    rf_lifetime_free(&lt);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),          cmocka_unit_test(test_legal_table),
        cmocka_unit_test(test_key_invariants), cmocka_unit_test(test_advance_every_pair),
        cmocka_unit_test(test_happy_path),     cmocka_unit_test(test_failure_keeps_errno),
        cmocka_unit_test(test_counts),         cmocka_unit_test(test_init_and_check),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
