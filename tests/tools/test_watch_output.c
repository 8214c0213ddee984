/*
 * ramforge watch's outputs from readings built by hand (no process is
 * read): a figure that could not be read is absent from the Prometheus
 * text (ramforge_ledger_unknown says so) and null in the JSON line, never
 * 0; an exited process keeps only ramforge_watch_up 0; the binding cgroup
 * level is the one with the least room (rf_oom_room_find: limit - (usage -
 * reclaimable), unknown when an enforced level's usage is), the host's
 * MemAvailable + SwapFree when no level has a limit; an unlinked
 * model file is said deleted in the view and the labels; Pss's smaps age is
 * exported; an unreadable stat makes idle unknown (no advice); --all's
 * unreadable processes and --metrics-file's failed writes are counted.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "watch/watch.h"

static struct watch_proc *new_proc(int pid)
{
    struct watch_proc *p = calloc(1, sizeof(*p));
    assert_non_null(p);
    watch_proc_init(p, pid);
    snprintf(p->comm, sizeof(p->comm), "llama-server");
    p->status.has_vm_rss = p->status.has_rss_anon = p->status.has_vm_swap = true;
    p->status.vm_rss_bytes = 300 << 20;
    p->status.rss_anon_bytes = 100 << 20;
    p->status.vm_swap_bytes = 1 << 20;
    return p;
}

static void level(struct rf_cgroup_level *l, const char *dir, bool limited, uint64_t limit,
                  uint64_t usage, uint64_t reclaimable)
{
    memset(l, 0, sizeof(*l));
    snprintf(l->dir, sizeof(l->dir), "%s", dir);
    l->limit.has = true;
    l->limit.unlimited = !limited;
    l->limit.bytes = limited ? limit : 0;
    l->usage.has = true;
    l->usage.bytes = usage;
    l->reclaimable_file.has = true;
    l->reclaimable_file.bytes = reclaimable;
}

static char *metrics_of(const struct watch_reading *r, struct watch_proc **procs, size_t n)
{
    char *text = NULL;
    assert_int_equal(watch_metrics_text(r, procs, n, &text), 0);
    assert_non_null(text);
    return text;
}

static char *metrics(struct watch_proc **procs, size_t n)
{
    struct watch_reading r = {.time_s = 1.5, .now_s = 100, .index = 2};
    return metrics_of(&r, procs, n);
}

/* What f wrote, as a string the caller frees. */
static char *text_of(FILE *f, char **buf)
{
    assert_int_equal(fclose(f), 0);
    assert_non_null(*buf);
    return *buf;
}

/* The terminal view of procs[0..n), as a string the caller frees. */
static char *view_of(const struct watch_reading *r, struct watch_proc **procs, size_t n)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    watch_view(f, r, procs, n, false, false);
    return text_of(f, &buf);
}

static json_t *json_line(const struct watch_proc *p)
{
    struct watch_reading r = {.time_s = 1.5, .now_s = 100, .index = 2};
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_int_equal(watch_json_line(f, &r, p), 0);
    fclose(f);
    assert_non_null(strchr(buf, '\n'));
    json_t *doc = json_loads(buf, 0, NULL);
    assert_non_null(doc);
    free(buf);
    return doc;
}

/* No model mapping readable, no cgroup: those figures are unknown, never 0. */
static void test_unknown_is_absent(void **state)
{
    (void)state;
    struct watch_proc *p = new_proc(42);
    p->maps_rc = -EACCES;
    p->cg_rc = -EACCES;
    char *t = metrics(&p, 1);
    assert_non_null(strstr(t,
                           "ramforge_ledger_bytes{pid=\"42\",model=\"\",path=\"\","
                           "category=\"ProcessRss\",provenance=\"exact_measured\"} 314572800\n"));
    assert_null(strstr(t, "category=\"FileBackedResident\",provenance"));
    assert_non_null(strstr(t, "ramforge_ledger_unknown{pid=\"42\",model=\"\",path=\"\",category="
                              "\"FileBackedResident\"} 1\n"));
    assert_non_null(strstr(t, "ramforge_ledger_unknown{pid=\"42\",model=\"\",path=\"\",category="
                              "\"CgroupCurrent\"} 1\n"));
    assert_null(strstr(t, "ramforge_watch_room_before_oom_bytes{"));
    assert_non_null(strstr(t, "category=\"Anonymous\",provenance=\"exact_measured\"} 105906176\n"));
    free(t);
    json_t *d = json_line(p);
    assert_string_equal(json_string_value(json_object_get(d, "maps_reason")), "Permission denied");
    assert_int_equal(json_array_size(json_object_get(d, "models")), 0);
    json_t *cg = json_object_get(d, "cgroup");
    assert_true(json_is_null(json_object_get(cg, "room_before_oom_bytes")));
    assert_true(json_is_string(json_object_get(cg, "reason")));
    json_t *st = json_object_get(d, "status");
    assert_int_equal(json_integer_value(json_object_get(st, "vm_rss_bytes")), 300 << 20);
    assert_true(json_is_null(json_object_get(st, "rss_file_bytes"))); /* not read: null */
    assert_true(
        json_is_null(json_object_get(json_object_get(d, "anonymous"), "growth_bytes_per_minute")));
    json_decref(d);
    free(p);
}

/* An exited process: up 0 and nothing else; the JSON line says why. */
static void test_exited(void **state)
{
    (void)state;
    struct watch_proc *p = new_proc(7);
    p->state = WATCH_EXITED;
    char *t = metrics(&p, 1);
    assert_non_null(strstr(t, "ramforge_watch_up{pid=\"7\",model=\"\",path=\"\"} 0\n"));
    assert_null(strstr(t, "ramforge_watch_bytes{pid=\"7\""));
    assert_null(strstr(t, "ramforge_ledger_bytes{pid=\"7\""));
    free(t);
    json_t *d = json_line(p);
    assert_string_equal(json_string_value(json_object_get(d, "state")), "exited");
    assert_string_equal(json_string_value(json_object_get(d, "reason")), "the process exited");
    assert_true(json_is_null(json_object_get(json_object_get(d, "status"), "vm_rss_bytes")));
    assert_true(json_is_null(json_object_get(d, "cgroup")));
    json_decref(d);
    free(p);
}

/* The level with the least room binds; unlimited levels never do; else the host. */
static void test_binding(void **state)
{
    (void)state;
    struct watch_proc *p = new_proc(9);
    struct rf_oom_room room;
    p->cg.n = 3;
    level(&p->cg.levels[0], "/sys/fs/cgroup/pod/c", false, 0, 900 << 20, 10 << 20);
    level(&p->cg.levels[1], "/sys/fs/cgroup/pod", true, 2048ull << 20, 1800 << 20, 50 << 20);
    level(&p->cg.levels[2], "/sys/fs/cgroup", true, 8192ull << 20, 4096ull << 20, 0);
    assert_true(watch_binding(p, &room));
    assert_int_equal(room.level, 1);
    assert_int_equal(room.room_bytes, (2048ull - 1800 + 50) << 20);
    char *t = metrics(&p, 1);
    assert_non_null(strstr(t, "ramforge_watch_room_before_oom_bytes{pid=\"9\",model=\"\",path=\"\","
                              "level=\"/sys/fs/cgroup/pod\"} 312475648\n"));
    free(t);
    /* usage 76 MiB above the limit: dropping the 5 MiB of cache leaves it above, no room
       (the old formula said 5 MiB: 0 from the limit, plus the cache) */
    level(&p->cg.levels[1], "/sys/fs/cgroup/pod", true, 1024 << 20, 1100 << 20, 5 << 20);
    assert_true(watch_binding(p, &room));
    assert_int_equal(room.room_bytes, 0);
    /* an enforced level whose usage is unknown may bind: unknown, not the other level's room */
    p->cg.levels[1].usage.has = false;
    assert_false(watch_binding(p, &room));
    assert_non_null(strstr(room.why, "usage is unknown"));
    t = metrics(&p, 1);
    assert_null(strstr(t, "ramforge_watch_room_before_oom_bytes{"));
    free(t);
    /* no level with a limit: the host */
    p->cg.n = 1;
    p->cg.host.read = true;
    p->cg.host.available.has = true;
    p->cg.host.available.bytes = 4ull << 30;
    p->cg.host.swap_free.has = true;
    p->cg.host.swap_free.bytes = 1ull << 30;
    assert_true(watch_binding(p, &room));
    assert_int_equal(room.level, -1);
    assert_int_equal(room.room_bytes, 5ull << 30);
    p->cg.host.available.has = false;
    assert_false(watch_binding(p, &room));
    free(p);
}

/* One model mapping of path whose smaps sums were read age_s ago. */
static void add_model(struct watch_proc *p, const char *path, bool deleted, double age_s)
{
    struct watch_model *m = &p->models[p->n_models++];
    memset(m, 0, sizeof(*m));
    snprintf(m->path, sizeof(m->path), "%s", path);
    m->deleted = deleted;
    m->has_sum = true;
    m->rss_source = "pagemap_scan";
    m->sum.rss_bytes = 64 << 20;
    m->sum.pss_bytes = 32 << 20;
    m->sum.locked_bytes = 0;
    m->smaps_age_s = age_s;
}

/* A model file unlinked since it was mapped: " (deleted)" in the view, deleted="true" on every
   series of the process (the JSON has said "deleted": true all along). */
static void test_deleted(void **state)
{
    (void)state;
    struct watch_proc *p = new_proc(11);
    struct watch_reading r = {.time_s = 1.5, .now_s = 100, .index = 1};
    add_model(p, "/models/m.gguf", true, 0);
    char *t = metrics(&p, 1);
    assert_non_null(strstr(t, "ramforge_watch_up{pid=\"11\",model=\"m.gguf\",path=\"/models/"
                              "m.gguf\",deleted=\"true\"} 1\n"));
    assert_non_null(strstr(t, "ramforge_ledger_bytes{pid=\"11\",model=\"m.gguf\",path=\"/models/"
                              "m.gguf\",deleted=\"true\",category=\"MappingPss\""));
    free(t);
    t = view_of(&r, &p, 1);
    assert_non_null(strstr(t, "  /models/m.gguf (deleted)\n"));
    free(t);
    /* not deleted: neither */
    p->models[0].deleted = false;
    t = metrics(&p, 1);
    assert_null(strstr(t, "deleted"));
    free(t);
    t = view_of(&r, &p, 1);
    assert_null(strstr(t, "(deleted)"));
    free(t);
    free(p);
}

/* Pss and Locked come from the last smaps read: its age is exported beside them. */
static void test_smaps_age(void **state)
{
    (void)state;
    struct watch_proc *p = new_proc(12);
    add_model(p, "/models/m.gguf", false, 7.2504);
    char *t = metrics(&p, 1);
    assert_non_null(strstr(t, "# TYPE ramforge_watch_smaps_age_seconds gauge\n"));
    assert_non_null(strstr(t, "ramforge_watch_smaps_age_seconds{pid=\"12\",model=\"m.gguf\","
                              "path=\"/models/m.gguf\"} 7.25\n"));
    assert_non_null(strstr(t, "category=\"MappingPss\",provenance=\"exact_measured\"} 33554432\n"));
    free(t);
    p->models[0].has_sum = false; /* no smaps read: no Pss, no age */
    t = metrics(&p, 1);
    assert_null(strstr(t, "ramforge_watch_smaps_age_seconds{"));
    free(t);
    free(p);
}

/* A reading whose /proc/PID/stat could not be read: idle unknown, never idle, no advice. */
static void test_idle_unknown(void **state)
{
    (void)state;
    struct watch_proc *p = new_proc(13);
    struct watch_options o = {.release = true, .release_idle_s = 0.5, .target_bytes = 1 << 20};
    double idle_s;
    add_model(p, "/models/m.gguf", false, 0);
    p->models[0].has_table = true;
    p->started = true;
    p->cpu_changed_s = 10; /* CPU time last moved 90 s before now_s = 100 */
    p->stat_rc = -EACCES;
    p->cpu_known = false;
    assert_false(watch_idle_seconds(p, 100, &idle_s));
    watch_release_maybe(p, &o, 100);
    assert_false(p->released);
    json_t *d = json_line(p);
    assert_true(json_is_null(json_object_get(d, "idle_seconds")));
    assert_non_null(strstr(json_string_value(json_object_get(d, "idle_reason")),
                           "/proc/13/stat: Permission denied: idle unknown, never idle"));
    json_decref(d);
    p->stat_rc = 0;
    p->cpu_known = true;
    assert_true(watch_idle_seconds(p, 100, &idle_s));
    assert_true(idle_s == 90.0);
    d = json_line(p);
    assert_true(json_real_value(json_object_get(d, "idle_seconds")) == 90.0);
    assert_true(json_is_null(json_object_get(d, "idle_reason")));
    json_decref(d);
    free(p);
}

/* --all's processes it could not read are said in the view, the JSON and the metrics. */
static void test_unreadable(void **state)
{
    (void)state;
    struct watch_reading r = {.time_s = 1.5, .now_s = 100, .index = 3, .all = true};
    r.unreadable.n = 5;
    r.unreadable.n_reasons = 2;
    r.unreadable.by[0].err = -EACCES;
    r.unreadable.by[0].n = 4;
    r.unreadable.by[1].err = -EIO;
    r.unreadable.by[1].n = 1;
    char *t = metrics_of(&r, NULL, 0);
    assert_non_null(strstr(t, "# TYPE ramforge_watch_unreadable_processes gauge\n"));
    assert_non_null(
        strstr(t, "ramforge_watch_unreadable_processes{reason=\"Permission denied\"} 4\n"));
    assert_non_null(
        strstr(t, "ramforge_watch_unreadable_processes{reason=\"Input/output error\"} 1\n"));
    assert_null(strstr(t, "ramforge_watch_metrics_file_errors_total"));
    free(t);
    t = view_of(&r, NULL, 0);
    assert_non_null(strstr(t, "reading 3, 0 processes\nnot read: 5 processes (Permission denied: "
                              "4, Input/output error: 1): their maps could not be read"));
    free(t);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_int_equal(watch_json_all(f, &r, 0), 0);
    t = text_of(f, &buf);
    json_t *d = json_loads(t, 0, NULL);
    assert_non_null(d);
    assert_string_equal(json_string_value(json_object_get(d, "kind")), "watch_all");
    assert_int_equal(json_integer_value(json_object_get(d, "processes")), 0);
    assert_int_equal(json_integer_value(json_object_get(d, "unreadable_processes")), 5);
    json_t *by = json_array_get(json_object_get(d, "unreadable"), 0);
    assert_string_equal(json_string_value(json_object_get(by, "reason")), "Permission denied");
    assert_int_equal(json_integer_value(json_object_get(by, "processes")), 4);
    assert_true(json_is_string(json_object_get(d, "note")));
    json_decref(d);
    free(t);
}

/* --metrics-file's failed writes: a counter, present from the first reading. */
static void test_metrics_file_errors(void **state)
{
    (void)state;
    struct watch_reading r = {.time_s = 1.5, .now_s = 100, .index = 1, .metrics_file = true};
    char *t = metrics_of(&r, NULL, 0);
    assert_non_null(strstr(t, "# TYPE ramforge_watch_metrics_file_errors_total counter\n"
                              "ramforge_watch_metrics_file_errors_total 0\n"));
    assert_null(strstr(t, "ramforge_watch_unreadable_processes")); /* not --all */
    free(t);
    r.metrics_file_errors = 3;
    t = metrics_of(&r, NULL, 0);
    assert_non_null(strstr(t, "ramforge_watch_metrics_file_errors_total 3\n"));
    free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unknown_is_absent), cmocka_unit_test(test_exited),
        cmocka_unit_test(test_binding),           cmocka_unit_test(test_deleted),
        cmocka_unit_test(test_smaps_age),         cmocka_unit_test(test_idle_unknown),
        cmocka_unit_test(test_unreadable),        cmocka_unit_test(test_metrics_file_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
