/*
 * Helpers shared by the core unit tests: a seeded splitmix64 stream for
 * random cases (deterministic across platforms), builders of plain
 * tensor and mapping metadata for hand-made inventories, lifetime walks,
 * and a sorted directory listing.
 */
#ifndef RAMFORGE_TEST_UTIL_H
#define RAMFORGE_TEST_UTIL_H

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ramforge/core/inventory.h"
#include "ramforge/core/lifetime.h"

static uint64_t rng_state; /* seed it in each test: rng_state = N */

/* splitmix64. */
static inline uint64_t rng_next(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Uniform-enough value in [0, bound); 0 for bound 0. */
static inline uint64_t rng_below(uint64_t bound)
{
    return bound ? rng_next() % bound : 0;
}

/* Tensor "t<index>", q8_0, at [off, off + len) of mapping `mapping`. */
static inline struct rf_tensor_meta fixture_tensor(uint32_t index, int32_t mapping, uint64_t off,
                                                   uint64_t len, enum rf_weight_access access)
{
    struct rf_tensor_meta t;

    memset(&t, 0, sizeof(t));
    t.index = index;
    snprintf(t.name, sizeof(t.name), "t%u", index);
    snprintf(t.type_name, sizeof(t.type_name), "%s", "q8_0");
    t.mapping_index = mapping;
    t.file_offset_bytes = off;
    t.logical_bytes = len;
    t.access = access;
    return t;
}

/* A validated mapping of a whole file of size bytes, mapped from offset 0. */
static inline struct rf_mapping_meta fixture_mapping(uint32_t index, uint64_t size)
{
    struct rf_mapping_meta m;

    memset(&m, 0, sizeof(m));
    m.index = index;
    snprintf(m.path, sizeof(m.path), "/models/m-%u.gguf", index);
    m.file_size_bytes = size;
    m.validated = true;
    m.map_offset_bytes = 0;
    m.map_length_bytes = size;
    m.inode = 1000 + index;
    return m;
}

/* Discovered -> ReleaseEligible along the legal transitions (what a run's after_load does). */
static const enum rf_lifetime_state fixture_to_eligible[] = {
    RF_LT_OWNED,
    RF_LT_REFERENCED,
    RF_LT_EXECUTION_SUBMITTED,
    RF_LT_EXECUTION_COMPLETED,
    RF_LT_OPERATION_BOUNDARY_SYNCHRONIZED,
    RF_LT_RELEASE_ELIGIBLE,
};
#define FIXTURE_TO_ELIGIBLE_N (sizeof(fixture_to_eligible) / sizeof(fixture_to_eligible[0]))

/* Advances resource i along path[0..n); returns 0 or the first step's error. */
static inline int fixture_walk(struct rf_lifetime *lt, size_t i, const enum rf_lifetime_state *path,
                               size_t n)
{
    for (size_t k = 0; k < n; k++) {
        int ret = rf_lifetime_advance(lt, i, path[k]);

        if (ret < 0)
            return ret;
    }
    return 0;
}

static inline int test_cmp_name(const void *a, const void *b)
{
    return strcmp(a, b);
}

/*
 * The entries of dir but "." and "..": how many (-1: dir cannot be
 * opened), the first max names copied to names, sorted.
 */
static inline int test_list_dir(const char *dir, char names[][256], int max)
{
    struct dirent *de;
    DIR *d = opendir(dir);
    int n = 0;

    if (!d)
        return -1;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (n < max)
            snprintf(names[n], 256, "%s", de->d_name);
        n++;
    }
    closedir(d);
    qsort(names, (size_t)(n < max ? n : max), 256, test_cmp_name);
    return n;
}

#endif
