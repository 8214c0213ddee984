/*
 * CPU topology: the number of physical cores, the thread count llama.cpp's
 * own tools default to (common's cpu_get_num_math): SMT siblings share a
 * core's execution units, and decode threads beyond the cores slow it down.
 */
#include "ramforge/sys/sys.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RFSYS_CPU_MAX 4096 /* CPUs looked at; more are not counted */

/* Parses one decimal number of a sysfs file; -EBADMSG when it is not one. */
static int read_u32(const char *sysroot, const char *path, uint32_t *out)
{
    char *text, *end;
    size_t len;
    int rc = rfsys_slurp(sysroot, path, 64, &text, &len);
    if (rc < 0)
        return rc;
    errno = 0;
    unsigned long v = strtoul(text, &end, 10);
    rc = end == text || errno || v > UINT32_MAX || (*end && *end != '\n') ? -EBADMSG : 0;
    if (rc == 0)
        *out = (uint32_t)v;
    free(text);
    return rc;
}

int rfsys_physical_cores(const char *sysroot, uint32_t *out)
{
    char *online, *p, path[128];
    size_t len;
    uint64_t *seen;
    uint32_t n = 0;

    if (!out)
        return -EINVAL;
    int rc = rfsys_slurp(sysroot, "/sys/devices/system/cpu/online", 4096, &online, &len);
    if (rc < 0)
        return rc;
    seen = calloc(RFSYS_CPU_MAX, sizeof(*seen));
    if (!seen) {
        free(online);
        return -ENOMEM;
    }
    /* "0-3,8-11\n": ranges of online CPUs. */
    for (p = online; rc == 0 && *p && *p != '\n';) {
        char *end;
        unsigned long a = strtoul(p, &end, 10), b = a;
        if (end == p) {
            rc = -EBADMSG;
            break;
        }
        p = end;
        if (*p == '-') {
            b = strtoul(p + 1, &end, 10);
            if (end == p + 1 || b < a) {
                rc = -EBADMSG;
                break;
            }
            p = end;
        }
        if (*p == ',')
            p++;
        for (unsigned long cpu = a; cpu <= b && cpu < RFSYS_CPU_MAX; cpu++) {
            uint32_t pkg, core;
            snprintf(path, sizeof(path),
                     "/sys/devices/system/cpu/cpu%lu/topology/physical_package_id", cpu);
            if (read_u32(sysroot, path, &pkg) < 0)
                continue; /* an offline or topology-less CPU counts as no core */
            snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%lu/topology/core_id", cpu);
            if (read_u32(sysroot, path, &core) < 0)
                continue;
            uint64_t key = ((uint64_t)pkg << 32 | core) + 1; /* 0 marks an empty slot */
            bool dup = false;
            for (uint32_t i = 0; i < n && !dup; i++)
                dup = seen[i] == key;
            if (!dup && n < RFSYS_CPU_MAX)
                seen[n++] = key;
        }
    }
    free(seen);
    free(online);
    if (rc == 0 && n == 0)
        rc = -ENOENT;
    if (rc == 0)
        *out = n;
    return rc;
}
