/*
 * Fuzz harness: /proc/PID/maps and /proc/PID/smaps (src/sys/maps.c). The
 * input is written as both files; the sums over the first mapping's file
 * (rfsys_maps_sum_file) run on whatever was parsed.
 */
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_sysroot.h"
#include "ramforge/sys/sys.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const struct rfsys_maps *m)
{
    for (size_t i = 0; i < m->n; i++) {
        if (m->v[i].end_addr < m->v[i].start_addr)
            abort(); /* the parser promises ordered bounds */
        struct rfsys_mapping_sum sum;
        int rc = rfsys_maps_sum_file(m, m->v[i].dev_major, m->v[i].dev_minor, m->v[i].inode,
                                     i % 2 ? "r--s" : NULL, &sum);
        if (rc == 0 && i % 2 == 0 && sum.n_mappings == 0)
            abort(); /* mapping i itself matches */
        if (i >= 8)
            break; /* the sums are quadratic; a few suffice */
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct rfsys_maps maps;

    fuzz_write("proc/self/maps", data, size);
    fuzz_write("proc/self/smaps", data, size);
    rfsys_maps_init(&maps);
    if (rfsys_read_maps(fuzz_sysroot(), "self", &maps) == 0)
        check(&maps);
    else if (maps.n || maps.v)
        abort(); /* an error leaves the list empty */
    if (rfsys_read_smaps(fuzz_sysroot(), "self", &maps) == 0)
        check(&maps);
    else if (maps.n || maps.v)
        abort();
    rfsys_maps_free(&maps);
    return 0;
}
