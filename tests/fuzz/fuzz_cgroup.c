/*
 * Fuzz harness: the memory cgroup readers (src/sys/cgroup.c,
 * cgroup_tree.c): /proc/self/cgroup, mountinfo, and the controller's
 * files (memory.max, memory.high, memory.current, memory.events,
 * memory.stat, v1 memory.limit_in_bytes, memory.oom_control, ...). The
 * input is a tree of files (fuzz_tree's "@@ path" form: the seeds are the
 * fixture trees of tests/data/sys), so paths and contents both mutate.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_sysroot.h"
#include "ramforge/sys/sys.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *root = fuzz_tree((const char *)data, size);
    struct rfsys_cgroup_memory m;
    struct rfsys_cgroup_tree *t = malloc(sizeof(*t));

    if (!t)
        abort();
    int rc = rfsys_read_cgroup_memory(root, "self", &m);
    /* on error: all zero, or (a file of the found controller failed) version, dir and the
       error kept, every figure zero */
    if (rc < 0 && m.version != RFSYS_CGROUP_NONE &&
        (m.error != rc || !m.dir[0] || m.has_current || m.has_peak || m.has_limit || m.has_high ||
         m.has_events))
        abort();
    if (!memchr(m.error_source, '\0', sizeof(m.error_source)))
        abort();
    if (m.version == RFSYS_CGROUP_NONE && m.dir[0])
        abort();
    if (m.has_limit && m.limit_unlimited && m.limit_bytes)
        abort();
    if (!memchr(m.dir, '\0', sizeof(m.dir)) ||
        !memchr(m.limit_source, '\0', sizeof(m.limit_source)))
        abort();
    rc = rfsys_read_cgroup_tree(root, "self", t);
    if (t->n > RF_CGROUP_MAX_LEVELS || (rc < 0 && t->n) ||
        (t->version == RFSYS_CGROUP_NONE && t->n))
        abort();
    free(t);
    return 0;
}
