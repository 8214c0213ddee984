/*
 * ramforge inspect --page-cache: the capture of the model file's page
 * states before ramforge's own header read, and the whole-file count
 * (inspect_before.h).
 */
#include "inspect_before.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ramforge/core/intervals.h"
#include "ramforge/core/residency.h"

#define BEFORE_MAX_PAGES (1ull << 22) /* 16 GiB of 4 KiB pages; 4 MiB of states */

int inspect_before_capture(struct rfsys_file_pages *fp, struct before_read *b)
{
    memset(b, 0, sizeof(*b));
    b->fp = fp;
    b->pages = fp->file_pages < BEFORE_MAX_PAGES ? fp->file_pages : BEFORE_MAX_PAGES;
    b->states = malloc(b->pages ? (size_t)b->pages : 1);
    if (!b->states)
        return -ENOMEM;
    for (uint64_t first = 0; first < b->pages; first += RF_PAGE_WINDOW_PAGES) {
        uint64_t n = b->pages - first;
        n = n < RF_PAGE_WINDOW_PAGES ? n : RF_PAGE_WINDOW_PAGES;
        int rc = rfsys_file_pages_sample(fp, first, n, b->states + first);
        if (rc < 0 && !b->error)
            b->error = rc;
    }
    return 0;
}

void inspect_before_account(struct before_read *b, uint64_t header_bytes)
{
    uint8_t states[RF_PAGE_WINDOW_PAGES];
    const uint64_t pb = b->fp->page_bytes;

    b->header_bytes = header_bytes;
    b->header_pages = header_bytes / pb + (header_bytes % pb != 0);
    if (b->header_pages > b->fp->file_pages)
        b->header_pages = b->fp->file_pages;
    uint64_t seen = b->header_pages < b->pages ? b->header_pages : b->pages;
    b->unobserved = b->header_pages - seen;
    for (uint64_t first = 0; first < seen; first += RF_PAGE_WINDOW_PAGES) {
        uint64_t n = seen - first < RF_PAGE_WINDOW_PAGES ? seen - first : RF_PAGE_WINDOW_PAGES;
        if (rfsys_file_pages_sample(b->fp, first, n, states) < 0) {
            b->unobserved += n;
            continue;
        }
        for (uint64_t i = 0; i < n; i++)
            if (b->states[first + i] == RF_PAGE_NONRESIDENT && states[i] == RF_PAGE_RESIDENT)
                b->brought_in++;
    }
}

/* States of [first_page, first_page + n_pages) as they were before the header read. */
static int before_sample(struct before_read *b, uint64_t first_page, uint64_t n_pages,
                         uint8_t *states)
{
    int rc = 0;
    for (uint64_t i = 0; i < n_pages;) {
        uint64_t p = first_page + i, n;
        if (p < b->pages) {
            n = b->pages - p < n_pages - i ? b->pages - p : n_pages - i;
            memcpy(states + i, b->states + p, (size_t)n);
            if (b->error && !rc)
                rc = b->error;
        } else if (p < b->header_pages) {
            n = b->header_pages - p < n_pages - i ? b->header_pages - p : n_pages - i;
            memset(states + i, RF_PAGE_UNKNOWN, (size_t)n);
        } else {
            n = n_pages - i;
            int r = rfsys_file_pages_sample(b->fp, p, n, states + i);
            if (r < 0 && !rc)
                rc = r;
        }
        i += n;
    }
    return rc;
}

int inspect_before_sampler(void *ud, int32_t mapping_index, uint64_t first_page, uint64_t n_pages,
                           uint8_t *states)
{
    if (mapping_index != 0) {
        memset(states, RF_PAGE_UNKNOWN, (size_t)n_pages);
        return -ENXIO;
    }
    return before_sample(ud, first_page, n_pages, states);
}

void inspect_count_file(struct before_read *b, uint64_t budget, struct file_count *fc)
{
    uint8_t states[RF_PAGE_WINDOW_PAGES];
    struct rfsys_file_pages *fp = b->fp;
    uint64_t todo = fp->file_pages < budget ? fp->file_pages : budget;

    memset(fc, 0, sizeof(*fc));
    fc->pages = fp->file_pages;
    for (uint64_t first = 0; first < todo;) {
        uint64_t n = todo - first < RF_PAGE_WINDOW_PAGES ? todo - first : RF_PAGE_WINDOW_PAGES;
        int rc = before_sample(b, first, n, states);
        if (rc < 0 && !fc->first_error)
            fc->first_error = rc;
        struct rf_page_counts c = {0};
        rf_page_counts_add(&c, states, n);
        fc->resident += c.resident_pages;
        fc->nonresident += c.nonresident_pages;
        first += n;
    }
    fc->inspected = todo;
    fc->unknown = fc->pages - fc->resident - fc->nonresident;
}
