/*
 * ramforge inspect --page-cache: the page states of the model file as they
 * were before ramforge read its GGUF header (inspect_before.c), so that
 * the figures do not count ramforge's own read.
 */
#ifndef RAMFORGE_TOOLS_INSPECT_BEFORE_H
#define RAMFORGE_TOOLS_INSPECT_BEFORE_H

#include <stdint.h>

#include "ramforge/sys/pages.h"

/*
 * Page states as they were before ramforge read the GGUF header. The
 * header read (without readahead) brings pages [0, header_pages) into the
 * page cache; so the first min(file_pages, BEFORE_MAX_PAGES) pages (16 GiB
 * of 4 KiB pages, inspect_before.c) are observed before that read and
 * every later answer for them comes from this capture. Pages past the
 * capture are observed live, except those the read touched (unknown:
 * their state before the read was not seen).
 */
struct before_read {
    struct rfsys_file_pages *fp;
    uint8_t *states;       /* [0, pages): RF_PAGE_* before the header read; owned */
    uint64_t pages;        /* pages captured */
    int error;             /* first sampler error of the capture, 0 if none */
    uint64_t header_bytes; /* ramforge read [0, header_bytes) of the file */
    uint64_t header_pages; /* ceil(header_bytes / page) */
    uint64_t brought_in;   /* pages not in the page cache before the read, in it after */
    uint64_t unobserved;   /* header pages past the capture: not seen before the read */
};

/* Captures the states of fp's first pages into b (b->states owned: free them). 0 or -ENOMEM. */
int inspect_before_capture(struct rfsys_file_pages *fp, struct before_read *b);

/* After the header read of header_bytes: which of its pages it brought into the page cache. */
void inspect_before_account(struct before_read *b, uint64_t header_bytes);

/*
 * The page-cache sampler (rf_residency_params.sample, ud the before_read)
 * over the observation mapping: mapping 0 only, states as they were
 * before the header read.
 */
int inspect_before_sampler(void *ud, int32_t mapping_index, uint64_t first_page, uint64_t n_pages,
                           uint8_t *states);

/* Page-cache figures of the whole file, [0, file_pages), within the budget. */
struct file_count {
    uint64_t pages;       /* file pages */
    uint64_t inspected;   /* pages asked about (min(pages, budget)) */
    uint64_t resident;    /* in the page cache */
    uint64_t nonresident; /* not in the page cache */
    uint64_t unknown;     /* pages - resident - nonresident */
    int first_error;      /* sampler error, 0 if none */
};

/* Counts the whole file's pages, at most budget of them, as they were before the header read. */
void inspect_count_file(struct before_read *b, uint64_t budget, struct file_count *fc);

#endif
