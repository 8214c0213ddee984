/*
 * Probes for watching another process from outside (ramforge watch):
 * its /proc/PID/stat identity and CPU time, the present bits of its page
 * tables (/proc/PID/pagemap), and non-destructive advice on its memory
 * through a pidfd (pidfd_open(2), process_madvise(2)).
 *
 * Nothing here faults a page in or changes what the process computes:
 * pagemap is read, not written; process_madvise takes only MADV_COLD and
 * MADV_PAGEOUT, advice the kernel allows on another process because it
 * never changes the contents the process reads (a page advised out is
 * read back from the file on the next access).
 *
 * Every call returns 0 or a negative errno; nothing prints.
 */
#ifndef RAMFORGE_PROCWATCH_H
#define RAMFORGE_PROCWATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What /proc/PID/stat says of the process's identity and CPU time. */
struct rfsys_proc_stat {
    char state;                /* field 3: 'R', 'S', 'Z', ... */
    uint64_t cpu_ticks;        /* fields 14 + 15: utime + stime, clock ticks */
    uint64_t start_ticks;      /* field 22: start time after boot, clock ticks; with the pid
                                  it names one process (a reused pid has another) */
    uint64_t ticks_per_second; /* sysconf(_SC_CLK_TCK) */
};

/*
 * Parses SYSROOT/proc/PID/stat into *out (zeroed first). The command name
 * (field 2) may hold spaces and parentheses: fields are counted after its
 * last ')'. Errors: those of rfsys_slurp (-ENOENT: the process is gone),
 * -EBADMSG (too few fields, a field that is not a number), -EOVERFLOW
 * (utime + stime), -EINVAL.
 */
int rfsys_read_proc_stat(const char *sysroot, const char *pid, struct rfsys_proc_stat *out);

/*
 * Whether each of the n_pages pages from the page-aligned virtual address
 * addr is present in the page tables of the process whose pagemap_fd (an
 * open /proc/PID/pagemap, rfsys_pagemap_open) is given: states[i] becomes
 * RF_PAGE_RESIDENT when page i is present (what smaps counts as Rss),
 * RF_PAGE_NONRESIDENT otherwise (never touched, advised out, reclaimed, or
 * swapped). Asked with PAGEMAP_SCAN (Linux 6.7+: one answer per run of
 * present pages; *scanned true), else by reading the entries' present bit
 * (bit 63; *scanned false). Only the kernel's page tables are read; no
 * page is faulted. Errors (every state RF_PAGE_UNKNOWN): -EINVAL (NULL
 * states or scanned, unaligned addr, a range that wraps), -EIO (a short
 * read or an answer outside the range), -errno of pread or the ioctl
 * (-EACCES, -ESRCH when the process exited, ...).
 */
int rfsys_pagemap_present(int pagemap_fd, uint64_t addr, uint64_t n_pages, uint8_t *states,
                          bool *scanned);

/* One range of the other process's address space. */
struct rfsys_range {
    uint64_t addr;      /* first byte, page aligned */
    uint64_t len_bytes; /* bytes, a multiple of the page size */
};

/*
 * pidfd_open(2) of pid into *fd (the caller closes it). Errors: -EINVAL
 * (pid <= 0, NULL fd), -ESRCH (no such process), -ENOSYS (a kernel older
 * than 5.3), -errno.
 */
int rfsys_pidfd_open(int pid, int *fd);

/* The advice process_madvise accepts here. */
/* Ranges per process_madvise(2) call: a stack array of iovecs, well under
   the kernel's UIO_MAXIOV (1024), which the call refuses above with -EINVAL. */
#define RFSYS_MADVISE_BATCH 64

enum rfsys_remote_advice {
    RFSYS_ADVISE_COLD = 0,    /* MADV_COLD: deactivate; reclaimed first under pressure */
    RFSYS_ADVISE_PAGEOUT = 1, /* MADV_PAGEOUT: reclaim now (clean file pages are dropped) */
};

/*
 * process_madvise(2) of advice over ranges[0..n) of the process behind
 * pidfd, in batches of at most RFSYS_MADVISE_BATCH ranges. *accepted_bytes is the sum
 * the kernel said it advised (it stops at the first range it refuses:
 * then the call returns that error with the bytes accepted so far).
 * Needs PTRACE_MODE_READ on the process and CAP_SYS_NICE. The kernel
 * does not check that the ranges still map what the caller validated:
 * the process may have changed its mappings since (see watch's report).
 * Errors: -EINVAL (NULL argument, a bad advice), -ENOSYS (a kernel older
 * than 5.10), -EPERM, -ESRCH, -ENOMEM (a range not mapped), -errno.
 */
int rfsys_process_madvise(int pidfd, const struct rfsys_range *ranges, size_t n,
                          enum rfsys_remote_advice advice, uint64_t *accepted_bytes);

/* "cold", "pageout"; NULL outside the enum. */
const char *rfsys_remote_advice_name(enum rfsys_remote_advice a);

#ifdef __cplusplus
}
#endif

#endif
