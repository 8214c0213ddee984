/*
 * One room before the OOM kill (rf_oom_room_find): ramforge watch's room
 * and admission's binding room, computed from one read of a cgroup fixture
 * tree (rfsys_read_cgroup_tree), agree on the level and the bytes, v1 and
 * v2. The fixtures' binding levels hold clean mapped file pages: the old
 * watch formula (limit - usage + reclaimable unmapped cache) left them out
 * and said less room than admission; an enforced level whose usage is
 * unknown made the old watch report another level's room, and admission
 * Unknown.
 *
 * Figures (bytes):
 *   cg-v1-tree self, /pod binds: limit 1610612736, usage 1468006400,
 *     reclaimable_file 104857600 (active 2506752 + inactive 104857600 -
 *     mapped 2506752), mapped_file 2506752
 *   cg-v2-room self, /llm.slice binds: max 1073741824, current 943718400,
 *     reclaimable_file 104857600 (file 629145600 - file_mapped 524288000),
 *     mapped_file 524288000 (a 500 MiB model mapping); the leaf's
 *     memory.high 838860800 throttles, it does not kill
 *   cg-v1-tree 401, /pod/nousage: limit 1073741824, no usage file
 *   cg-none-host: no memory controller, MemAvailable 23770620 kB, no swap
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ramforge/core/admission.h"
#include "watch/watch.h"

#define ROOT(name) RF_TEST_DATA "/sys/" name
#define MIB UINT64_C(1048576)

static struct watch_proc proc;         /* large: not on the stack */
static struct rf_admission_result res; /* likewise */

static struct rf_admission_figure fig(uint64_t bytes)
{
    return rf_admission_figure_of(bytes, RF_PROV_EXACT_MEASURED, "test");
}

/*
 * Reads root's tree for pid into the watched process, with one model
 * mapping of smaps Rss rss and Locked locked (has_sum false: not read);
 * then decides admission after the load over the same levels and figures.
 */
static void read_both(const char *root, const char *pid, bool has_sum, uint64_t rss,
                      uint64_t locked)
{
    struct rf_admission_input in;

    watch_proc_init(&proc, 1);
    proc.cg_rc = rfsys_read_cgroup_tree(root, pid, &proc.cg);
    assert_int_equal(proc.cg_rc, 0);
    proc.n_models = 1;
    proc.models[0].has_sum = has_sum;
    proc.models[0].sum.rss_bytes = rss;
    proc.models[0].sum.locked_bytes = locked;

    memset(&in, 0, sizeof(in));
    in.phase = RF_ADMISSION_AFTER_LOAD;
    in.cgroups = proc.cg.levels;
    in.n_cgroups = proc.cg.n;
    in.cgroups_truncated = proc.cg.truncated;
    in.host = &proc.cg.host;
    in.process_rss = fig(rss + 50 * MIB);
    in.kv_cache = fig(1 * MIB);
    if (has_sum) {
        in.mapping_rss = fig(rss);
        in.locked = fig(locked);
    }
    assert_int_equal(rf_admission_decide(&in, &res), 0);
}

/* Watch's room, which must be admission's binding room; returns it. */
static uint64_t agreed_room(const char *dir)
{
    struct rf_oom_room room;

    assert_true(watch_binding(&proc, &room));
    assert_true(res.has_binding);
    assert_int_equal(room.level, (int)res.binding);
    assert_string_equal(proc.cg.levels[room.level].dir, dir);
    assert_int_equal(room.room_bytes, res.cgroups[res.binding].room_bytes);
    return room.room_bytes;
}

static void test_v1_agree(void **state)
{
    (void)state;
    /* unlocked model pages: the level's mapped file pages are room (old watch: 247463936) */
    read_both(ROOT("cg-v1-tree"), "self", true, 2 * MIB, 0);
    assert_int_equal(agreed_room("/sys/fs/cgroup/memory/pod"),
                     1610612736 - (1468006400 - 104857600 - 2506752));
    /* 1 MiB of them locked: not room */
    read_both(ROOT("cg-v1-tree"), "self", true, 2 * MIB, 1 * MIB);
    assert_int_equal(agreed_room("/sys/fs/cgroup/memory/pod"),
                     1610612736 - (1468006400 - 104857600 - (2506752 - 1048576)));
    /* smaps unread: Locked unknown, no mapped page counted */
    read_both(ROOT("cg-v1-tree"), "self", false, 0, 0);
    assert_int_equal(agreed_room("/sys/fs/cgroup/memory/pod"),
                     1610612736 - (1468006400 - 104857600));
}

static void test_v2_agree(void **state)
{
    (void)state;
    assert_int_equal(rfsys_read_cgroup_tree(ROOT("cg-v2-room"), "self", &proc.cg), 0);
    assert_int_equal(proc.cg.version, RFSYS_CGROUP_V2);
    /* the 500 MiB model mapping is room: 724 MiB (old watch: 224 MiB) */
    read_both(ROOT("cg-v2-room"), "self", true, 500 * MIB, 0);
    assert_int_equal(agreed_room("/sys/fs/cgroup/llm.slice"), 724 * MIB);
    /* all of it locked: the unlocked cache alone */
    read_both(ROOT("cg-v2-room"), "self", true, 500 * MIB, 500 * MIB);
    assert_int_equal(agreed_room("/sys/fs/cgroup/llm.slice"), 224 * MIB);
}

/* An enforced level without a usage: admission says Unknown, watch gives no room. */
static void test_unknown_usage(void **state)
{
    struct rf_oom_room room;

    (void)state;
    read_both(ROOT("cg-v1-tree"), "401", true, 2 * MIB, 0);
    assert_int_equal(res.outcome, RF_ADMIT_UNKNOWN);
    assert_false(watch_binding(&proc, &room));
    assert_non_null(strstr(room.why, "usage is unknown"));
}

/* No cgroup enforces a limit (cg-none-host): the host binds both, MemAvailable 23770620 kB. */
static void test_host_agree(void **state)
{
    struct rf_oom_room room;

    (void)state;
    read_both(ROOT("cg-none-host"), "self", true, 2 * MIB, 0);
    assert_true(res.host_binding);
    assert_true(watch_binding(&proc, &room));
    assert_int_equal(room.level, -1);
    assert_int_equal(room.room_bytes, res.host_room_bytes);
    assert_int_equal(room.room_bytes, UINT64_C(23770620) * 1024);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_v1_agree),
        cmocka_unit_test(test_v2_agree),
        cmocka_unit_test(test_unknown_usage),
        cmocka_unit_test(test_host_agree),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
