/*
 * The streaming policy in the session on a fake native layer (no
 * llama.cpp, no /proc, no mlock): a cgroup whose limit the model's file
 * working set exceeds, a fake lock table that counts the pins of every
 * page, and checks that the pins are taken only on the file pages the
 * graph reads (never an anonymous repacked weight's), are undone before
 * the release boundary's first sample and at the operation's end or the
 * session's free, and that a refused mlock is undone and reported.
 *
 * The fake model, 1 MiB pages (the planner's floors are MiB-sized):
 *   token_embd 16 pages | blk.0-3: a, b of 8 pages each | blk.3.c 8 pages
 *   (read from an anonymous copy) | output_norm 1 page | output 16 pages
 * W = 4 * 16 + 1 + 16 = 81 pages (token_embd and blk.3.c excluded).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <cmocka.h>
#include <jansson.h>

#include "ramforge/error.h"

#include "../core/test_util.h"
#include "fake_native.h"

#define PAGE (1ull << 20)
#define N_PAGES 160u
#define MAX_EVENTS 64

/* nat first: the shared operations read it through the same user data. */
struct fake {
    struct fake_native nat;  /* anon_bytes: RssAnon the samples report */
    uint32_t locks[N_PAGES]; /* pins held per file page */
    uint64_t limit_bytes;    /* the cgroup's hard limit; 0: no cgroup */
    int lock_error;          /* nonzero: mlock fails on the last range with this */
    uint64_t lock_limit;     /* nonzero: pages locked at most (RLIMIT_MEMLOCK): a range
                                beyond them fails whole with -ENOMEM, as mlock(2) */
    uint64_t lock_calls, unlock_calls;
    uint32_t sequential[N_PAGES]; /* pages under MADV_SEQUENTIAL */
    uint32_t hugepage[N_PAGES];   /* pages under MADV_HUGEPAGE */
    uint32_t random[N_PAGES];     /* pages under MADV_RANDOM */
    int hugepage_error;           /* nonzero: MADV_HUGEPAGE answers this for every range */
    /* what the layer saw, in order: "lock", "unlock", "sample:<label>" with the pins then */
    char events[MAX_EVENTS][48];
    uint64_t pins_at[MAX_EVENTS];
    size_t n_events;
};
_Static_assert(offsetof(struct fake, nat) == 0, "the shared operations' user data");

static uint64_t pins(const struct fake *f)
{
    uint64_t n = 0;
    for (size_t i = 0; i < N_PAGES; i++)
        n += f->locks[i];
    return n;
}

static void event(struct fake *f, const char *what, const char *label)
{
    if (f->n_events == MAX_EVENTS)
        return;
    snprintf(f->events[f->n_events], sizeof(f->events[0]), "%s%s", what, label ? label : "");
    f->pins_at[f->n_events++] = pins(f);
}

static void sampled(struct fake_native *n, const char *label)
{
    event((struct fake *)n, "sample:", label);
}

/* smaps Locked: the pages with a pin. */
static void count_locked(struct fake *f)
{
    uint64_t n = 0;
    for (size_t i = 0; i < N_PAGES; i++)
        n += f->locks[i] ? 1 : 0;
    f->nat.locked_bytes = n * PAGE;
}

static int f_release(void *ud, const struct rf_file_range *r, size_t n,
                     enum forge_release_mode mode, struct forge_release_result *out, int *errs)
{
    (void)ud;
    (void)r;
    (void)mode;
    memset(out, 0, sizeof(*out));
    memset(errs, 0, n * sizeof(*errs));
    return 0;
}

/* One v1 level: usage = the process (no other charge), the limit as scripted. */
static int f_cgroup_tree(void *ud, struct rfsys_cgroup_tree *out)
{
    struct fake *f = ud;
    memset(out, 0, sizeof(*out));
    if (!f->limit_bytes)
        return -ENOENT;
    out->version = RFSYS_CGROUP_V1;
    out->n = 1;
    struct rf_cgroup_level *l = &out->levels[0];
    snprintf(l->dir, sizeof(l->dir), "/sys/fs/cgroup/memory/fake");
    l->limit = (struct rf_cgroup_figure){.has = true, .bytes = f->limit_bytes};
    l->usage =
        (struct rf_cgroup_figure){.has = true, .bytes = f->nat.resident_bytes + f->nat.anon_bytes};
    l->inactive_file = (struct rf_cgroup_figure){.has = true, .bytes = 0};
    l->reclaimable_file = l->inactive_file;
    l->high = (struct rf_cgroup_figure){.has = false, .error = -ENOENT};
    return 0;
}

static struct rf_tensor_meta tensors[16];
static size_t n_tensors;
static struct rf_mapping_meta mapping;
static uint64_t anon_first, anon_end; /* blk.3.c's pages */

static int f_lock(void *ud, const struct rf_file_range *r, size_t n, struct forge_pin_result *out)
{
    struct fake *f = ud;
    memset(out, 0, sizeof(*out));
    f->lock_calls++;
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(r[i].mapping_index, 0);
        assert_true(r[i].pages.end_page <= N_PAGES);
        /* never the anonymous copy's file pages */
        assert_true(r[i].pages.end_page <= anon_first || r[i].pages.first_page >= anon_end);
        uint64_t bytes = rf_page_range_pages(r[i].pages) * PAGE;
        out->requested_bytes += bytes;
        out->n_calls++;
        if ((f->lock_error && i == n - 1) ||
            (f->lock_limit && pins(f) + rf_page_range_pages(r[i].pages) > f->lock_limit)) {
            out->n_failed_calls++;
            if (!out->first_error)
                out->first_error = f->lock_error ? f->lock_error : -ENOMEM;
            continue;
        }
        for (uint64_t p = r[i].pages.first_page; p < r[i].pages.end_page; p++)
            f->locks[p]++;
        out->accepted_bytes += bytes;
    }
    out->n_ranges = n;
    count_locked(f);
    event(f, "lock", NULL);
    return 0;
}

/* munlock: a page not locked stays at 0 (munlock of an unlocked page is harmless). */
static int f_unlock(void *ud, const struct rf_file_range *r, size_t n, struct forge_pin_result *out)
{
    struct fake *f = ud;
    memset(out, 0, sizeof(*out));
    f->unlock_calls++;
    for (size_t i = 0; i < n; i++)
        for (uint64_t p = r[i].pages.first_page; p < r[i].pages.end_page; p++)
            f->locks[p] = 0;
    count_locked(f);
    event(f, "unlock", NULL);
    return 0;
}

/* The stream hints: only on pages that are not pinned */
static int f_advise_stream(void *ud, const struct rf_file_range *r, size_t n,
                           enum forge_stream_advice advice, struct forge_pin_result *out)
{
    static const char *const name[] = {"sequential", "normal", "hugepage", "nohugepage", "random"};
    struct fake *f = ud;
    bool on = advice == FORGE_STREAM_SEQUENTIAL || advice == FORGE_STREAM_HUGEPAGE ||
              advice == FORGE_STREAM_RANDOM;
    bool huge = advice == FORGE_STREAM_HUGEPAGE || advice == FORGE_STREAM_NOHUGEPAGE;
    memset(out, 0, sizeof(*out));
    if (advice == FORGE_STREAM_HUGEPAGE && f->hugepage_error) {
        out->first_error = f->hugepage_error;
        out->n_failed_calls = n;
        event(f, "hugepage-refused", NULL);
        return 0;
    }
    for (size_t i = 0; i < n; i++)
        for (uint64_t p = r[i].pages.first_page; p < r[i].pages.end_page; p++) {
            if (on)
                assert_int_equal(f->locks[p], 0);
            if (huge)
                f->hugepage[p] = on;
            else if (advice == FORGE_STREAM_RANDOM)
                f->random[p] = on;
            else if (advice == FORGE_STREAM_NORMAL) /* undoes either */
                f->sequential[p] = f->random[p] = 0;
            else
                f->sequential[p] = on;
        }
    event(f, name[advice], NULL);
    return 0;
}

static int f_thp_enabled(void *ud, char *out, size_t out_size)
{
    (void)ud;
    snprintf(out, out_size, "madvise");
    return 0;
}

static int f_io(void *ud, struct rfsys_io *out)
{
    struct fake *f = ud;
    /* every call reads 3 more pages from storage, with one more major fault */
    out->has_read_bytes = out->has_major_faults = true;
    out->read_bytes = 3 * PAGE * (f->lock_calls + f->n_events);
    out->major_faults = f->lock_calls + f->n_events;
    return 0;
}

static const struct rf_session_native fake_ops = {
    FAKE_NATIVE_OPS,
    .release = f_release,
    .cgroup_tree = f_cgroup_tree,
    .lock = f_lock,
    .unlock = f_unlock,
    .advise_stream = f_advise_stream,
    .thp_enabled = f_thp_enabled,
    .io = f_io,
};

static void add(const char *name, uint64_t first_page, uint64_t pages, enum rf_weight_access a)
{
    tensors[n_tensors] = fixture_tensor((uint32_t)n_tensors, 0, first_page * PAGE, pages * PAGE, a);
    snprintf(tensors[n_tensors].name, sizeof(tensors[0].name), "%s", name);
    n_tensors++;
}

static struct rf_session_model fake_model(void)
{
    uint64_t p = 1;
    char name[32];
    n_tensors = 0;
    add("token_embd.weight", p, 16, RF_ACCESS_FILE_BACKED);
    p += 16;
    for (int l = 0; l < 4; l++)
        for (int k = 0; k < 2; k++) {
            snprintf(name, sizeof(name), "blk.%d.%c.weight", l, 'a' + k);
            add(name, p, 8, RF_ACCESS_FILE_BACKED);
            p += 8;
        }
    anon_first = p;
    add("blk.3.c.weight", p, 8, RF_ACCESS_ANONYMOUS);
    p += 8;
    anon_end = p;
    add("output_norm.weight", p, 1, RF_ACCESS_FILE_BACKED);
    p += 1;
    add("output.weight", p, 16, RF_ACCESS_FILE_BACKED);
    p += 16;
    mapping = fixture_mapping(0, p * PAGE);
    struct rf_session_model m = fake_native_model(tensors, n_tensors, &mapping, 4, PAGE);
    m.info.access_basis = RF_ACCESS_BASIS_GRAPH_PROBE;
    return m;
}

/*
 * Streaming, enforce, window 16 pages, margin 4: with a limit of 100 pages
 * and 10 pages of anonymous memory (KV a few KiB: counted in whole bytes),
 * R = 100 - 4 - 10 - KV, so the pin budget is just under 70 pages: output
 * and output_norm (17) + blk.0-2 (48) = 65; blk.3 (its file part, 16) no
 * longer fits.
 */
static bool sequential_param, hugepage_param;      /* the stream hints start_margin asks for */
static uint64_t window_param = 16 * PAGE;          /* the window start_margin asks for */
static uint64_t bandwidth_param, warm_token_param; /* B and t_c of the bound; 0: not given */
static enum rf_admission_mode mode_param = RF_ADMISSION_ENFORCE; /* start_margin's mode */
static uint64_t fs_magic_param;   /* statfs f_type of the fake model's file; 0: not known */
static uint32_t read_ahead_param; /* --stream-read-ahead slots start_margin asks for; 0: none */

static struct rf_session *start_margin(struct fake *f, uint64_t limit_pages, uint64_t margin_pages)
{
    static struct rf_session_model m;
    struct rf_session_params p = rf_session_default_params();
    struct rf_session *s = NULL;
    memset(f, 0, sizeof(*f));
    f->nat.page_bytes = PAGE;
    f->nat.resident_bytes = 20 * PAGE;
    f->nat.anon_bytes = 10 * PAGE;
    f->nat.has_anon = true;
    f->nat.on_sample = sampled;
    f->limit_bytes = limit_pages * PAGE;
    p.policy = RF_POLICY_STREAMING;
    p.admission_mode = mode_param;
    p.stream_window_bytes = window_param;
    p.stream_margin_bytes = margin_pages * PAGE;
    p.stream_sequential = sequential_param;
    p.stream_hugepage = hugepage_param;
    p.storage_bandwidth_bytes_per_s = bandwidth_param;
    p.warm_token_ns = warm_token_param;
    p.stream_read_ahead_slots = read_ahead_param;
    m = fake_model();
    m.info.fs_magic = fs_magic_param;
    assert_int_equal(rf_session_create_native(&m, &fake_ops, f, p, &s), 0);
    return s;
}

static struct rf_session *start(struct fake *f, uint64_t limit_pages)
{
    return start_margin(f, limit_pages, 4);
}

static void admit(struct rf_session *s, struct rf_admission_result *adm)
{
    struct rf_operation_request req = {.n_ctx = 256, .n_predict = 4, .n_prompt = 3};
    assert_int_equal(rf_session_admit_result(s, &req, adm), 0);
}

/* start() at a limit of 100 pages, admitted, the plan's pins taken. */
static struct rf_session *start_pinned(struct fake *f)
{
    bool pinned = false;
    struct rf_admission_result adm;
    struct rf_session *s = start(f, 100);
    admit(s, &adm);
    assert_int_equal(rf_session_stream_pin(s, &pinned), 0);
    assert_true(pinned);
    return s;
}

static const char *jstr_at(json_t *doc, const char *a, const char *b)
{
    return json_string_value(
        json_object_get(json_object_get(json_object_get(doc, "streaming"), a), b));
}

static void test_admitted_and_pinned(void **state)
{
    bool pinned = false;
    struct fake f;
    struct rf_admission_result adm;
    (void)state;
    struct rf_session *s = start(&f, 100);
    admit(s, &adm);
    /* W = 81 pages + 10 anonymous > 100: thrash, but streaming admits it even in enforce */
    assert_true(adm.thrash);
    assert_false(adm.refused);
    assert_int_equal(adm.outcome, RF_ADMIT_WARNING);
    assert_non_null(strstr(adm.reason, "Admitted under --residency-policy streaming"));
    assert_int_equal(rf_session_stream_pin(s, &pinned), 0);
    assert_true(pinned);
    assert_int_equal(f.lock_calls, 1);
    /* output_norm + output (17 pages, contiguous) and blk.0-2 (48 pages) */
    assert_int_equal(pins(&f), 65);
    for (uint64_t p = 1; p < 17; p++)
        assert_int_equal(f.locks[p], 0); /* token_embd: read by rows */
    /* a second call pins nothing more */
    assert_int_equal(rf_session_stream_pin(s, &pinned), 0);
    assert_false(pinned);
    assert_int_equal(pins(&f), 65);

    json_t *doc = fake_report(s, RF_REPORT_OPERATION);
    json_t *st = json_object_get(doc, "streaming");
    json_t *plan = json_object_get(st, "plan");
    assert_int_equal(json_integer_value(json_object_get(plan, "working_set_bytes")), 81 * PAGE);
    assert_int_equal(json_integer_value(json_object_get(plan, "pinned_bytes")), 65 * PAGE);
    assert_int_equal(json_integer_value(json_object_get(plan, "streamed_bytes_per_token")),
                     16 * PAGE);
    assert_int_equal(json_integer_value(json_object_get(plan, "layers_pinned")), 3);
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(st, "pin"), "locked_bytes")), 65 * PAGE);
    json_decref(doc);
    rf_session_free(s);
    assert_int_equal(pins(&f), 0); /* undone at free */
}

static void test_unpinned_before_release_boundary(void **state)
{
    struct fake f;
    (void)state;
    struct rf_session *s = start_pinned(&f);
    rf_session_lease_begin(s);
    rf_session_lease_end(s);
    /* end_of_session is not a release boundary: the pins stay */
    assert_int_equal(rf_session_boundary(s, RF_BOUNDARY_END_OF_SESSION), 0);
    assert_int_equal(pins(&f), 65);
    assert_int_equal(rf_session_boundary(s, RF_BOUNDARY_AFTER_SESSION), 0);
    assert_int_equal(pins(&f), 0);
    /* every sample of the release boundary came after the munlock */
    bool saw_unlock = false, saw_after = false;
    for (size_t i = 0; i < f.n_events; i++) {
        if (strcmp(f.events[i], "unlock") == 0)
            saw_unlock = true;
        if (strcmp(f.events[i], "sample:after_session") == 0 ||
            strcmp(f.events[i], "sample:after_release") == 0) {
            saw_after = true;
            assert_true(saw_unlock);
            assert_int_equal(f.pins_at[i], 0);
        }
        if (strcmp(f.events[i], "sample:end_of_session") == 0)
            assert_int_equal(f.pins_at[i], 65);
    }
    assert_true(saw_after);
    json_t *doc = fake_report(s, RF_REPORT_OPERATION);
    assert_string_equal(jstr_at(doc, "pin", "unpinned_at"), "after_session");
    json_decref(doc);
    assert_int_equal(rf_session_operation_end(s, NULL), 0);
    assert_int_equal(f.unlock_calls, 1); /* nothing owed twice */
    rf_session_free(s);
}

static void test_unpinned_at_operation_end(void **state)
{
    struct fake f;
    (void)state;
    struct rf_session *s = start_pinned(&f);
    int32_t toks[3] = {1, 2, 3};
    struct rf_operation_output out = {.tokens = toks, .n_tokens = 3, .decode_ns = 2000};
    assert_int_equal(rf_session_operation_end(s, &out), 0);
    assert_int_equal(pins(&f), 0);
    json_t *doc = fake_report(s, RF_REPORT_OPERATION);
    json_t *st = json_object_get(doc, "streaming");
    assert_string_equal(jstr_at(doc, "pin", "unpinned_at"), "operation_end");
    /* decode_ns covers n_tokens - 1 decodes */
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(st, "bound"), "achieved_token_ns")),
        1000);
    /* storage traffic: deltas of the fake's counters over the operation */
    json_t *io = json_object_get(st, "io");
    assert_true(json_integer_value(json_object_get(io, "read_bytes")) > 0);
    assert_int_equal(json_integer_value(json_object_get(io, "read_bytes")) % (3 * PAGE), 0);
    json_decref(doc);
    rf_session_free(s);
    assert_int_equal(f.unlock_calls, 1);
}

/* Sets RLIMIT_MEMLOCK's soft limit to bytes; false (old untouched) when it cannot. */
static bool set_memlock(uint64_t bytes, struct rlimit *old)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_MEMLOCK, old) < 0)
        return false;
    rl = *old;
    rl.rlim_cur = bytes;
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < bytes)
        rl.rlim_max = bytes; /* raising it needs CAP_SYS_RESOURCE */
    return setrlimit(RLIMIT_MEMLOCK, &rl) == 0;
}

/*
 * start(f, 100), admitted, then rf_session_stream_pin with RLIMIT_MEMLOCK's
 * soft limit at bytes (restored after) and the fake's lock as set; NULL
 * when the limit cannot be set.
 */
static struct rf_session *pin_under_memlock(struct fake *f, uint64_t bytes, int lock_error,
                                            uint64_t lock_limit, bool *pinned)
{
    struct rf_admission_result adm;
    struct rlimit old;
    if (!set_memlock(bytes, &old))
        return NULL;
    struct rf_session *s = start(f, 100);
    f->lock_error = lock_error;
    f->lock_limit = lock_limit;
    admit(s, &adm);
    int rc = rf_session_stream_pin(s, pinned);
    assert_int_equal(setrlimit(RLIMIT_MEMLOCK, &old), 0);
    assert_int_equal(rc, 0);
    return s;
}

static void test_refused_mlock_falls_back(void **state)
{
    bool pinned = false;
    struct fake f;
    (void)state;
    /* RLIMIT_MEMLOCK 0: no page to pin within it, so no partial pin either; the last range
       is refused (-ENOMEM) */
    struct rf_session *s = pin_under_memlock(&f, 0, -ENOMEM, 0, &pinned);
    assert_non_null(s);
    assert_false(pinned);
    assert_int_equal(pins(&f), 0); /* what was locked is undone */
    assert_int_equal(f.unlock_calls, 1);
    json_t *doc = fake_report(s, RF_REPORT_OPERATION);
    json_t *pin = json_object_get(json_object_get(doc, "streaming"), "pin");
    assert_true(json_is_true(json_object_get(pin, "fallback")));
    assert_false(json_is_true(json_object_get(pin, "pinned")));
    assert_string_equal(json_string_value(json_object_get(pin, "error")), rf_strerror(-ENOMEM));
    assert_non_null(
        strstr(json_string_value(json_object_get(pin, "error_reason")), "RLIMIT_MEMLOCK"));
    assert_true(fake_report_warnings(doc, "mlock was refused") > 0);
    json_decref(doc);
    rf_session_free(s);
    assert_int_equal(f.unlock_calls, 1);
}

/*
 * RLIMIT_MEMLOCK of 6 pages (6 MiB: under the usual 8 MiB hard limit) under
 * a plan of 65: mlock refuses the plan whole, so the first 6 pages (file
 * order: blk.0-2's range, cut) are pinned instead, and the report says how
 * much and why.
 */
static void test_partial_pins_within_memlock(void **state)
{
    bool pinned = false;
    struct fake f;
    (void)state;
    struct rf_session *s = pin_under_memlock(&f, 6 * PAGE, 0, 6, &pinned);
    if (!s)
        skip(); /* RLIMIT_MEMLOCK's hard limit is below 6 MiB and may not be raised */
    assert_true(pinned);
    assert_int_equal(pins(&f), 6);
    json_t *doc = fake_report(s, RF_REPORT_OPERATION);
    json_t *pin = json_object_get(json_object_get(doc, "streaming"), "pin");
    assert_true(json_is_true(json_object_get(pin, "pinned")));
    assert_true(json_is_true(json_object_get(pin, "partial")));
    assert_false(json_is_true(json_object_get(pin, "fallback")));
    assert_int_equal(json_integer_value(json_object_get(pin, "requested_bytes")), 65 * PAGE);
    assert_int_equal(json_integer_value(json_object_get(pin, "memlock_limit_bytes")), 6 * PAGE);
    assert_int_equal(json_integer_value(json_object_get(pin, "accepted_bytes")), 6 * PAGE);
    assert_int_equal(json_integer_value(json_object_get(pin, "locked_bytes")), 6 * PAGE);
    assert_true(fake_report_warnings(doc, "RLIMIT_MEMLOCK is below the plan's pins") > 0);
    json_decref(doc);
    rf_session_free(s);
    assert_int_equal(pins(&f), 0); /* undone at free */
}

/*
 * W (81 pages) and the fixed part fit 112 pages, the file (106 pages) does
 * not fit beside the fixed part (10 anonymous): the kernel would reclaim
 * W's pages with the file's others (repacked models), so the plan is
 * applied though nothing thrashes: W pinned (as far as the budget goes),
 * token_embd MADV_RANDOM, undone at the operation's end.
 */
static void test_file_over_limit_pins_the_working_set(void **state)
{
    bool pinned = false;
    struct fake f;
    struct rf_admission_result adm;
    (void)state;
    struct rf_session *s = start(&f, 112);
    admit(s, &adm);
    assert_false(adm.thrash);
    assert_int_equal(rf_session_stream_pin(s, &pinned), 0);
    assert_true(pinned);
    assert_true(pins(&f) >= 65);
    assert_int_equal(f.random[1], 1);
    json_t *doc = fake_report(s, RF_REPORT_OPERATION);
    json_t *st = json_object_get(doc, "streaming");
    assert_true(json_is_null(json_object_get(st, "plan_reason")));
    assert_true(json_is_true(json_object_get(json_object_get(st, "pin"), "rows_random")));
    json_decref(doc);
    assert_int_equal(rf_session_operation_end(s, NULL), 0);
    assert_int_equal(pins(&f), 0);
    assert_int_equal(f.random[1], 0);
    rf_session_free(s);
}

static void test_fits_or_no_limit_pins_nothing(void **state)
{
    bool pinned = false;
    struct fake f;
    struct rf_admission_result adm;
    (void)state;
    /* the working set fits 200 pages: planned, not applied */
    struct rf_session *s = start(&f, 200);
    admit(s, &adm);
    assert_false(adm.thrash);
    assert_int_equal(rf_session_stream_pin(s, &pinned), 0);
    assert_false(pinned);
    assert_int_equal(f.lock_calls, 0);
    json_t *doc = fake_report(s, RF_REPORT_OPERATION);
    assert_non_null(
        strstr(json_string_value(json_object_get(json_object_get(doc, "streaming"), "plan_reason")),
               "fits"));
    json_decref(doc);
    rf_session_free(s);
    /* no cgroup limit: no plan */
    s = start(&f, 0);
    admit(s, &adm);
    assert_int_equal(rf_session_stream_pin(s, &pinned), 0);
    assert_false(pinned);
    assert_int_equal(f.lock_calls, 0);
    doc = fake_report(s, RF_REPORT_OPERATION);
    assert_true(json_is_null(json_object_get(json_object_get(doc, "streaming"), "plan")));
    json_decref(doc);
    rf_session_free(s);
}

/*
 * Issue 20, fault 8: the thrashing run of test_admitted_and_pinned with the
 * model on tmpfs: its pages are memory, so no thrash verdict, no plan, no pin.
 */
static void test_file_in_memory_streams_nothing(void **state)
{
    bool pinned = false;
    struct fake f;
    struct rf_admission_result adm;
    (void)state;
    fs_magic_param = 0x01021994; /* TMPFS_MAGIC */
    struct rf_session *s = start(&f, 100);
    fs_magic_param = 0;
    admit(s, &adm);
    assert_false(adm.thrash);
    assert_false(adm.refused);
    assert_int_equal(adm.outcome, RF_ADMIT_ADMITTED);
    assert_non_null(strstr(adm.reason, "working set was not compared"));
    assert_int_equal(rf_session_stream_pin(s, &pinned), 0);
    assert_false(pinned);
    assert_int_equal(f.lock_calls, 0);
    json_t *doc = fake_report(s, RF_REPORT_OPERATION);
    json_t *st = json_object_get(doc, "streaming");
    assert_true(json_is_null(json_object_get(st, "plan")));
    assert_non_null(strstr(json_string_value(json_object_get(st, "plan_reason")),
                           "pages are memory (tmpfs, ramfs)"));
    json_decref(doc);
    rf_session_free(s);
}

static void test_too_small_for_streaming(void **state)
{
    bool pinned = false;
    struct fake f;
    struct rf_admission_result adm;
    (void)state;
    /* 40 pages, margin 20: 10 anonymous (+ KV) + min window 16 + margin 20 > 40, while the
       charge (30 pages + KV) fits: a thrash that streaming cannot help, refused in enforce */
    struct rf_session *s = start_margin(&f, 40, 20);
    admit(s, &adm);
    assert_true(adm.thrash);
    assert_true(adm.refused);
    assert_non_null(strstr(adm.reason, "Streaming cannot help"));
    assert_int_equal(rf_session_stream_pin(s, &pinned), 0);
    assert_false(pinned);
    assert_int_equal(f.lock_calls, 0);
    rf_session_free(s);
}

/*
 * Issue 20 fault 3: an evicted copy (2 resident pages) under a limit of 24
 * pages: the fixed part (10 anonymous pages + KV) and a minimum window (16
 * pages) do not fit the room under the hard limit, while the charge (12
 * pages + KV) fits: the kernel would kill the run,
 * so it is a hard excess, rejected in every mode (refused in warn and
 * enforce; off refuses nothing). It was admitted_with_warning in warn.
 */
static void test_fixed_part_over_the_limit_is_rejected(void **state)
{
    static const enum rf_admission_mode modes[] = {RF_ADMISSION_WARN, RF_ADMISSION_ENFORCE,
                                                   RF_ADMISSION_OFF};
    struct fake f;
    struct rf_admission_result adm;
    (void)state;
    for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
        mode_param = modes[i];
        struct rf_session *s = start_margin(&f, 24, 0);
        f.nat.resident_bytes = 2 * PAGE; /* an evicted copy: the charge is mostly anonymous */
        admit(s, &adm);
        assert_true(adm.thrash);
        assert_int_equal(adm.outcome, RF_ADMIT_REJECTED);
        assert_int_equal(adm.cause, RF_ADMIT_CAUSE_HARD_LIMIT);
        assert_true(adm.refused == (modes[i] != RF_ADMISSION_OFF));
        assert_non_null(strstr(adm.reason, "Streaming cannot help"));
        assert_non_null(strstr(adm.reason, "the kernel would kill the run, so it is rejected"));
        rf_session_free(s);
    }
    mode_param = RF_ADMISSION_ENFORCE;
}

/*
 * One stream hint (huge: MADV_HUGEPAGE, else MADV_SEQUENTIAL), asked alone:
 * on the streamed pages (blk.3's file part) only while pinned, undone with
 * the pins, the other hint never given, the report's key true.
 */
static void check_hint_on_streamed_ranges(bool huge)
{
    bool pinned = false;
    struct fake f;
    struct rf_admission_result adm;
    sequential_param = !huge;
    hugepage_param = huge;
    struct rf_session *s = start(&f, 100);
    sequential_param = hugepage_param = false;
    const uint32_t *on = huge ? f.hugepage : f.sequential;
    const uint32_t *other = huge ? f.sequential : f.hugepage;
    admit(s, &adm);
    assert_int_equal(rf_session_stream_pin(s, &pinned), 0);
    assert_true(pinned);
    uint64_t n = 0;
    for (size_t p = 0; p < N_PAGES; p++) {
        n += on[p];
        assert_false(other[p]);
    }
    assert_int_equal(n, 16); /* blk.3.a and blk.3.b; not blk.3.c (anonymous), not token_embd */
    for (uint64_t p = anon_first - 16; p < anon_first; p++)
        assert_true(on[p]);
    assert_int_equal(rf_session_operation_end(s, NULL), 0);
    for (size_t p = 0; p < N_PAGES; p++)
        assert_false(on[p]);
    json_t *doc = fake_report(s, RF_REPORT_OPERATION);
    json_t *pin = json_object_get(json_object_get(doc, "streaming"), "pin");
    assert_true(json_is_true(json_object_get(pin, huge ? "hugepage" : "sequential")));
    assert_false(json_is_true(json_object_get(pin, huge ? "sequential" : "hugepage")));
    if (huge)
        assert_string_equal(json_string_value(json_object_get(pin, "thp_enabled")), "madvise");
    else
        assert_true(json_is_null(json_object_get(pin, "thp_enabled"))); /* not asked */
    json_decref(doc);
    rf_session_free(s);
}

static void test_sequential_streamed_ranges(void **state)
{
    (void)state;
    check_hint_on_streamed_ranges(false);
}

static void test_hugepage_streamed_ranges(void **state)
{
    (void)state;
    check_hint_on_streamed_ranges(true);
}

/*
 * token_embd, read by rows: MADV_RANDOM on its pages (1 .. 16) and no
 * other while the pins are held (a fault reads its page, not the
 * read-around), undone with them; pin.rows_random true.
 */
static void test_rows_random_while_pinned(void **state)
{
    struct fake f;
    (void)state;
    struct rf_session *s = start_pinned(&f);
    for (size_t p = 0; p < N_PAGES; p++)
        assert_int_equal(f.random[p], p >= 1 && p < 17);
    assert_int_equal(rf_session_operation_end(s, NULL), 0);
    for (size_t p = 0; p < N_PAGES; p++)
        assert_int_equal(f.random[p], 0);
    json_t *doc = fake_report(s, RF_REPORT_OPERATION);
    json_t *pin = json_object_get(json_object_get(doc, "streaming"), "pin");
    assert_true(json_is_true(json_object_get(pin, "rows_random")));
    json_decref(doc);
    rf_session_free(s);
}

/* A refused MADV_HUGEPAGE: reported false, the pins stand, the run goes on */
static void test_hugepage_refused(void **state)
{
    bool pinned = false;
    struct fake f;
    struct rf_admission_result adm;
    (void)state;
    hugepage_param = true;
    struct rf_session *s = start(&f, 100);
    hugepage_param = false;
    f.hugepage_error = -EINVAL;
    admit(s, &adm);
    assert_int_equal(rf_session_stream_pin(s, &pinned), 0);
    assert_true(pinned);
    assert_int_equal(pins(&f), 65);
    json_t *doc = fake_report(s, RF_REPORT_OPERATION);
    json_t *pin = json_object_get(json_object_get(doc, "streaming"), "pin");
    assert_false(json_is_true(json_object_get(pin, "hugepage")));
    assert_true(json_is_true(json_object_get(pin, "pinned")));
    json_decref(doc);
    rf_session_free(s);
    assert_int_equal(pins(&f), 0);
}

/* The bound: t_c + (W - R) / B with R = limit - fixed (no margin, no window), not W - pinned */
static void test_bound_uses_limit_minus_fixed(void **state)
{
    bool pinned = false;
    struct fake f;
    struct rf_admission_result adm;
    (void)state;
    bandwidth_param = 8 * PAGE;           /* 8 MiB/s: a page is 125 ms */
    warm_token_param = 3000000;           /* 3 ms */
    struct rf_session *s = start(&f, 90); /* W (81 pages) exceeds R here */
    bandwidth_param = warm_token_param = 0;
    admit(s, &adm);
    assert_int_equal(rf_session_stream_pin(s, &pinned), 0);
    assert_true(pinned);
    struct rf_operation_output out = {.n_tokens = 5, .decode_ns = 4000000000ull};
    struct rf_stream_decode dec = {
        .decode_ns = 4000000000ull, .tokens = 4, .has_io = true, .read_bytes = 8 * PAGE};
    assert_int_equal(rf_session_stream_decode(s, &dec), 0);
    assert_int_equal(rf_session_stream_decode(s, NULL), -EINVAL);
    assert_int_equal(rf_session_operation_end(s, &out), 0);
    json_t *doc = fake_report(s, RF_REPORT_OPERATION);
    json_t *st = json_object_get(doc, "streaming");
    json_t *plan = json_object_get(st, "plan"), *bound = json_object_get(st, "bound");
    /* 8 pages over 4 s: 2 MiB/s; the decode object is the caller's, as given */
    assert_int_equal(json_integer_value(json_object_get(json_object_get(st, "decode"),
                                                        "read_bandwidth_bytes_per_s")),
                     2 * PAGE);
    uint64_t w = (uint64_t)json_integer_value(json_object_get(plan, "working_set_bytes"));
    uint64_t r = (uint64_t)json_integer_value(json_object_get(plan, "limit_bytes")) -
                 (uint64_t)json_integer_value(json_object_get(plan, "fixed_bytes"));
    assert_int_equal(w, 81 * PAGE);
    /* R = 90 - anonymous 10 - the KV cache (a few KiB): just under 80 pages */
    assert_true(r < 80 * PAGE && r > 79 * PAGE);
    /* pinned: output + output_norm (17), blk.0-1 (32) and blk.2.a (8) alone: blk.2 whole
       passes R - margin - window (just under 60 pages) */
    assert_int_equal(json_integer_value(json_object_get(plan, "pinned_bytes")), 57 * PAGE);
    assert_int_equal(json_integer_value(json_object_get(plan, "partial_layer_tensors")), 1);
    uint64_t expect = 3000000 + (w - r) * 1000000000ull / (8 * PAGE);
    assert_int_equal(json_integer_value(json_object_get(bound, "bound_token_ns")), expect);
    /* W - pinned (24 pages) would be 3 s, W - resident_bytes (a margin more) 0.6-0.75 s;
       W - R is 1-2 pages at 125 ms */
    assert_true(expect > 3000000 + 125000000ull && expect < 3000000 + 250000000ull);
    /* the overlap limit: max(t_c, (W - R) / B), the reads (over 125 ms) here */
    assert_int_equal(json_integer_value(json_object_get(bound, "overlap_limit_token_ns")),
                     expect - 3000000);
    assert_int_equal(json_integer_value(json_object_get(bound, "achieved_token_ns")), 1000000000);
    json_decref(doc);
    rf_session_free(s);
}

/* Whether the operation report has a warning containing what. */
static bool warned(struct rf_session *s, const char *what)
{
    json_t *doc = fake_report(s, RF_REPORT_OPERATION);
    bool found = fake_report_warnings(doc, what) > 0;
    json_decref(doc);
    return found;
}

/* A window below one layer (16 pages here) is planned as asked, with a warning */
static void test_window_below_one_layer_warns(void **state)
{
    struct fake f;
    struct rf_admission_result adm;
    (void)state;
    window_param = 4 * PAGE;
    struct rf_session *s = start(&f, 100);
    window_param = 16 * PAGE;
    admit(s, &adm);
    assert_true(warned(s, "the window is smaller than one layer"));
    rf_session_free(s);
    s = start(&f, 100); /* the usual 16-page window: no warning */
    admit(s, &adm);
    assert_false(warned(s, "the window is smaller than one layer"));
    rf_session_free(s);
}

/*
 * The read-ahead window (issue 25): its ring of 2 largest layer tensors (8 pages each) is
 * the plan's window, counted against the limit; what it did reaches the report, and the
 * fraction of its read time the decode did not wait for is decode.overlapped_fraction.
 */
static void test_read_ahead_ring_is_the_window(void **state)
{
    bool pinned = false;
    struct fake f;
    struct rf_admission_result adm;
    (void)state;
    window_param = 0;
    read_ahead_param = 2;
    struct rf_session *s = start(&f, 100);
    window_param = 16 * PAGE;
    read_ahead_param = 0;
    admit(s, &adm);
    assert_false(adm.refused);
    assert_int_equal(rf_session_stream_pin(s, &pinned), 0);
    assert_true(pinned);
    struct rf_stream_read_ahead ra = {.on = true,
                                      .slots = 2,
                                      .slot_bytes = 16 * PAGE,
                                      .n_units = 1,
                                      .direct = true,
                                      .units_read = 5,
                                      .read_bytes = 80 * PAGE,
                                      .read_ns = 400,
                                      .units_used = 4,
                                      .tensors_pointed = 8,
                                      .waits = 2,
                                      .wait_ns = 100};
    assert_int_equal(rf_session_stream_read_ahead(s, &ra), 0);
    assert_int_equal(rf_session_stream_read_ahead(s, NULL), -EINVAL);
    struct rf_stream_decode dec = {
        .decode_ns = 1000, .tokens = 4, .omp_wait_policy = "PASSIVE", .gomp_spincount = "300"};
    assert_int_equal(rf_session_stream_decode(s, &dec), 0);
    json_t *doc = fake_report(s, RF_REPORT_OPERATION);
    json_t *st = json_object_get(doc, "streaming");
    json_t *plan = json_object_get(st, "plan");
    assert_int_equal(json_integer_value(json_object_get(plan, "read_ahead_slots")), 2);
    assert_int_equal(json_integer_value(json_object_get(plan, "read_ahead_bytes")), 16 * PAGE);
    assert_int_equal(json_integer_value(json_object_get(plan, "window_bytes")), 16 * PAGE);
    json_int_t used = json_integer_value(json_object_get(plan, "pinned_bytes")) +
                      json_integer_value(json_object_get(plan, "fixed_bytes")) + 16 * PAGE +
                      json_integer_value(json_object_get(plan, "margin_bytes"));
    assert_true(used <= json_integer_value(json_object_get(plan, "limit_bytes")));
    json_t *r = json_object_get(st, "read_ahead");
    assert_int_equal(json_integer_value(json_object_get(r, "units_used")), 4);
    assert_true(json_is_true(json_object_get(r, "direct")));
    json_t *d = json_object_get(st, "decode");
    assert_float_equal(json_real_value(json_object_get(d, "overlapped_fraction")), 0.75, 1e-9);
    assert_true(json_is_null(json_object_get(d, "overlapped_reason")));
    assert_string_equal(json_string_value(json_object_get(d, "omp_wait_policy")), "PASSIVE");
    assert_string_equal(json_string_value(json_object_get(d, "gomp_spincount")), "300");
    json_decref(doc);
    rf_session_free(s);
}

/* The installed start (rf_session_operation_begin): admission makes the plan, the pins
   follow, and its result says so without the internal admission struct; the read-ahead
   calls take a NULL window (a session without a native model has none). */
static void test_installed_operation_begin(void **state)
{
    struct fake f;
    struct rf_operation_begin_result r;
    struct rf_read_ahead *w = (struct rf_read_ahead *)&f; /* overwritten with NULL */
    struct rf_operation_start_params op = {.request = {.n_ctx = 256, .n_predict = 4, .n_prompt = 3},
                                           .admit = true};
    (void)state;
    struct rf_session *s = start(&f, 100);
    assert_int_equal(rf_session_operation_begin(NULL, &op, &r), -EINVAL);
    assert_int_equal(rf_session_operation_begin(s, NULL, &r), -EINVAL);
    assert_int_equal(rf_session_operation_begin(s, &op, NULL), -EINVAL);
    assert_int_equal(rf_session_operation_begin(s, &op, &r), 0);
    assert_true(r.admission_decided);
    assert_int_equal(r.admission_error, 0);
    assert_int_equal(r.admission_outcome, RF_ADMIT_WARNING); /* thrash, admitted: streaming */
    assert_false(r.refused);
    assert_false(r.staged);
    assert_true(r.pinned);
    assert_int_equal(r.pin_error, 0);
    assert_int_equal(pins(&f), 65); /* test_admitted_and_pinned's pins */
    assert_int_equal(rf_session_read_ahead_open(s, NULL), -EINVAL);
    assert_int_equal(rf_session_read_ahead_open(s, &w), 0);
    assert_null(w); /* no forge model: nothing to read ahead with */
    rf_read_ahead_context_params(NULL, NULL);
    rf_read_ahead_decode_end(NULL);
    rf_session_read_ahead_close(s, NULL);
    assert_int_equal(rf_session_boundary(s, RF_BOUNDARY_AFTER_SESSION), 0);
    assert_int_equal(pins(&f), 0); /* undone at the boundary */
    rf_session_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_admitted_and_pinned),
        cmocka_unit_test(test_installed_operation_begin),
        cmocka_unit_test(test_unpinned_before_release_boundary),
        cmocka_unit_test(test_unpinned_at_operation_end),
        cmocka_unit_test(test_refused_mlock_falls_back),
        cmocka_unit_test(test_partial_pins_within_memlock),
        cmocka_unit_test(test_fits_or_no_limit_pins_nothing),
        cmocka_unit_test(test_file_over_limit_pins_the_working_set),
        cmocka_unit_test(test_file_in_memory_streams_nothing),
        cmocka_unit_test(test_fixed_part_over_the_limit_is_rejected),
        cmocka_unit_test(test_too_small_for_streaming),
        cmocka_unit_test(test_sequential_streamed_ranges),
        cmocka_unit_test(test_hugepage_streamed_ranges),
        cmocka_unit_test(test_window_below_one_layer_warns),
        cmocka_unit_test(test_hugepage_refused),
        cmocka_unit_test(test_rows_random_while_pinned),
        cmocka_unit_test(test_bound_uses_limit_minus_fixed),
        cmocka_unit_test(test_read_ahead_ring_is_the_window),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
