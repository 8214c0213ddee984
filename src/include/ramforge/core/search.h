/*
 * The one bounded binary search of the project (core's internal
 * interface, never installed): the partition point of a sorted array,
 * the shape every lookup here needs (first range whose end is above a
 * page, the VMA that may contain an address, a tensor index).
 */
#ifndef RAMFORGE_CORE_SEARCH_H
#define RAMFORGE_CORE_SEARCH_H

#include <stdbool.h>
#include <stddef.h>

/*
 * The first index i of [0, n) for which above(ctx, i) is true; n when
 * there is none. above must be false, then true, over [0, n) (the array is
 * partitioned by it, as a sorted array is by "element >= key"). At most
 * ceil(log2(n + 1)) calls of above, each with i < n; never reads outside
 * [0, n). static inline, so a constant above is inlined in hot loops.
 */
static inline size_t rf_partition_point(size_t n, bool (*above)(const void *ctx, size_t i),
                                        const void *ctx)
{
    size_t lo = 0, hi = n;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;

        if (above(ctx, mid))
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

#endif
