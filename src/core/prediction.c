/*
 * Per-page prediction counts (rf_prediction_count, profile.h): how the
 * pages a staging round prefetched compare with the pages the operation
 * then used, against the page-cache state before staging (hit, miss,
 * wasted, unknown). Workload: a few mappings of up to a few million pages.
 */
#include "ramforge/core/profile.h"

#include <errno.h>

#include "ramforge/core/intervals.h"
#include "ramforge/core/residency.h"

/* The state before staging of page pg of mapping m. */
static uint8_t before_state(const uint8_t *const *before, const uint64_t *n_before, size_t n_maps,
                            int32_t m, uint64_t pg)
{
    if (m < 0 || (size_t)m >= n_maps || !before || !before[m] || pg >= n_before[m])
        return RF_PAGE_UNKNOWN;
    return before[m][pg];
}

int rf_prediction_count(const struct rf_file_range *staged, size_t n_staged,
                        const struct rf_file_range *used, size_t n_used,
                        const uint8_t *const *before, const uint64_t *n_before_pages,
                        size_t n_mappings, struct rf_prediction *out)
{
    if (!out || (!staged && n_staged) || (!used && n_used) || (n_mappings && !n_before_pages))
        return -EINVAL;
    int32_t max_map = -1;
    for (size_t i = 0; i < n_staged; i++)
        if (staged[i].mapping_index < 0)
            return -EINVAL;
    for (size_t i = 0; i < n_used; i++)
        if (used[i].mapping_index < 0)
            return -EINVAL;
    for (size_t i = 0; i < n_staged; i++)
        if (staged[i].mapping_index > max_map)
            max_map = staged[i].mapping_index;
    for (size_t i = 0; i < n_used; i++)
        if (used[i].mapping_index > max_map)
            max_map = used[i].mapping_index;
    uint64_t hit = 0, miss = 0, wasted = 0, unknown = 0, n_u = 0, pre = 0;
    int rc = 0;
    for (int32_t m = 0; m <= max_map; m++) {
        struct rf_interval_set s, u;
        rf_interval_set_init(&s);
        rf_interval_set_init(&u);
        for (size_t i = 0; rc == 0 && i < n_staged; i++)
            if (staged[i].mapping_index == m)
                rc = rf_interval_set_add(&s, staged[i].pages);
        for (size_t i = 0; rc == 0 && i < n_used; i++)
            if (used[i].mapping_index == m)
                rc = rf_interval_set_add(&u, used[i].pages);
        if (rc == 0) {
            uint64_t s_pages = rf_interval_set_pages(&s), h = 0;
            for (size_t k = 0; k < s.n; k++)
                for (uint64_t pg = s.v[k].first_page; pg < s.v[k].end_page; pg++)
                    if (before_state(before, n_before_pages, n_mappings, m, pg) == RF_PAGE_RESIDENT)
                        pre++;
            for (size_t k = 0; k < u.n; k++) {
                struct rf_page_range r = u.v[k];
                h += rf_interval_set_overlap_pages(&s, r);
                for (uint64_t pg = r.first_page; pg < r.end_page; pg++) {
                    if (rf_interval_set_contains(&s, pg))
                        continue;
                    uint8_t st = before_state(before, n_before_pages, n_mappings, m, pg);
                    if (st == RF_PAGE_NONRESIDENT)
                        miss++;
                    else if (st != RF_PAGE_RESIDENT)
                        unknown++;
                }
            }
            hit += h;
            wasted += s_pages - h;
            n_u += rf_interval_set_pages(&u);
        }
        rf_interval_set_free(&s);
        rf_interval_set_free(&u);
        if (rc < 0)
            return rc;
    }
    out->hit_pages = hit;
    out->miss_pages = miss;
    out->wasted_pages = wasted;
    out->unknown_pages = unknown;
    out->used_pages = n_u;
    out->resident_staged_pages = pre;
    out->has_pages = true;
    return 0;
}
