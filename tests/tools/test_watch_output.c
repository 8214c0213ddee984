/*
 * ramforge watch's outputs from readings built by hand (no process is
 * read): a figure that could not be read is absent from the Prometheus
 * text (ramforge_ledger_unknown says so) and null in the JSON line, never
 * 0; an exited process keeps only ramforge_watch_up 0; the binding cgroup
 * level is the one with the least room (limit - usage + reclaimable), the
 * host's MemAvailable + SwapFree when no level has a limit.
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

#include "watch.h"

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

static char *metrics(struct watch_proc **procs, size_t n)
{
    char *text = NULL;
    assert_int_equal(watch_metrics_text(procs, n, &text), 0);
    assert_non_null(text);
    return text;
}

static json_t *json_line(const struct watch_proc *p)
{
    struct watch_reading r = {1.5, 2};
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
    int lvl;
    uint64_t room;
    p->cg.n = 3;
    level(&p->cg.levels[0], "/sys/fs/cgroup/pod/c", false, 0, 900 << 20, 10 << 20);
    level(&p->cg.levels[1], "/sys/fs/cgroup/pod", true, 2048ull << 20, 1800 << 20, 50 << 20);
    level(&p->cg.levels[2], "/sys/fs/cgroup", true, 8192ull << 20, 4096ull << 20, 0);
    assert_true(watch_binding(p, &lvl, &room));
    assert_int_equal(lvl, 1);
    assert_int_equal(room, (2048ull - 1800 + 50) << 20);
    char *t = metrics(&p, 1);
    assert_non_null(strstr(t, "ramforge_watch_room_before_oom_bytes{pid=\"9\",model=\"\",path=\"\","
                              "level=\"/sys/fs/cgroup/pod\"} 312475648\n"));
    free(t);
    /* usage above the limit: no room from the limit, the reclaimable cache is still room */
    level(&p->cg.levels[1], "/sys/fs/cgroup/pod", true, 1024 << 20, 1100 << 20, 5 << 20);
    assert_true(watch_binding(p, &lvl, &room));
    assert_int_equal(room, 5 << 20);
    /* no level with a limit: the host */
    p->cg.n = 1;
    p->cg.host.read = true;
    p->cg.host.available.has = true;
    p->cg.host.available.bytes = 4ull << 30;
    p->cg.host.swap_free.has = true;
    p->cg.host.swap_free.bytes = 1ull << 30;
    assert_true(watch_binding(p, &lvl, &room));
    assert_int_equal(lvl, -1);
    assert_int_equal(room, 5ull << 30);
    p->cg.host.available.has = false;
    assert_false(watch_binding(p, &lvl, &room));
    free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unknown_is_absent),
        cmocka_unit_test(test_exited),
        cmocka_unit_test(test_binding),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
