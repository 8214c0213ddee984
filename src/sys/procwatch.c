/*
 * Watching another process from outside (ramforge/sys/procwatch.h): its stat
 * line (identity, CPU time), the present bits of its pagemap, and
 * non-destructive advice through a pidfd. The workload is a watcher
 * polling once a second: each call is a few system calls, and a pagemap
 * read is bounded by PAGEMAP_BATCH entries per pread.
 */
#include "ramforge/sys/procwatch.h"
#include "ramforge/sys/pages.h" /* rfsys_page_bytes, enum rf_page_state */
#include "sys_internal.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

/* pagemap entries read per pread: 512 * 8 bytes = 4 KiB of stack, 2 MiB of 4 KiB pages. */
#define PAGEMAP_BATCH 512
#define PAGEMAP_PRESENT (1ull << 63)

#ifndef MADV_COLD
#define MADV_COLD 20
#endif
#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21
#endif
/* x86_64 and the generic table agree on both numbers. */
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_process_madvise
#define SYS_process_madvise 440
#endif

int rfsys_read_proc_stat(const char *sysroot, const char *pid, struct rfsys_proc_stat *out)
{
    uint64_t utime = 0, stime = 0;
    char *text = NULL;
    int rc;

    if (!out)
        return -EINVAL;
    memset(out, 0, sizeof(*out));
    rc = rfsys__proc_slurp(sysroot, pid, "stat", &text);
    if (rc < 0)
        return rc;
    /* after "pid (comm)": state(3) ... utime(14) stime(15) ... starttime(22) */
    const char *s = strrchr(text, ')');
    int field = 2;
    rc = -EBADMSG;
    for (s = s ? s + 1 : NULL; s && *s == ' ';) {
        s++;
        field++;
        if (field == 3) {
            out->state = *s;
        } else if (field == 14 || field == 15 || field == 22) {
            uint64_t *dst = field == 14 ? &utime : field == 15 ? &stime : &out->start_ticks;
            if (rfsys__parse_u64(&s, 10, dst) < 0)
                break;
            if (field == 22) {
                rc = 0;
                break;
            }
            continue;
        }
        s = strchr(s, ' ');
    }
    free(text);
    if (rc == 0 && __builtin_add_overflow(utime, stime, &out->cpu_ticks))
        rc = -EOVERFLOW;
    if (rc < 0) {
        memset(out, 0, sizeof(*out));
        return rc;
    }
    long hz = sysconf(_SC_CLK_TCK);
    out->ticks_per_second = hz > 0 ? (uint64_t)hz : 100;
    return 0;
}

/* The states array of a PAGEMAP_SCAN walk from addr: each present run becomes resident. */
struct scan_states {
    uint64_t addr, page_bytes;
    uint8_t *states;
};

static int mark_present(void *ctx, uint64_t start, uint64_t end)
{
    struct scan_states *s = ctx;
    memset(s->states + (start - s->addr) / s->page_bytes, RF_PAGE_RESIDENT,
           (end - start) / s->page_bytes);
    return 0;
}

int rfsys_pagemap_present(int pagemap_fd, uint64_t addr, uint64_t n_pages, uint8_t *states,
                          bool *scanned)
{
    uint64_t page = rfsys_page_bytes(), done = 0, entries[PAGEMAP_BATCH], last;

    if (!states || !scanned)
        return -EINVAL;
    *scanned = false;
    memset(states, RF_PAGE_UNKNOWN, n_pages);
    if (pagemap_fd < 0 || addr % page != 0 ||
        (n_pages && __builtin_add_overflow(addr / page, n_pages - 1, &last)) ||
        (n_pages && last > (uint64_t)INT64_MAX / sizeof(uint64_t)))
        return -EINVAL;
    if (n_pages == 0)
        return 0;
    /* PAGEMAP_SCAN first: one ioctl per run of present pages instead of 8 bytes per page. */
    struct scan_states ss = {addr, page, states};
    memset(states, RF_PAGE_NONRESIDENT, n_pages);
    int rc = rfsys__pagemap_scan(pagemap_fd, addr, addr + n_pages * page, mark_present, &ss);
    if (rc == 0) {
        *scanned = true;
        return 0;
    }
    memset(states, RF_PAGE_UNKNOWN, n_pages);
    if (rc != -EOPNOTSUPP)
        return rc;
    while (done < n_pages) {
        size_t want = n_pages - done < PAGEMAP_BATCH ? (size_t)(n_pages - done) : PAGEMAP_BATCH;
        off_t at = (off_t)((addr / page + done) * sizeof(uint64_t));
        ssize_t got = pread(pagemap_fd, entries, want * sizeof(uint64_t), at);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0 || (size_t)got != want * sizeof(uint64_t)) {
            int rc = got < 0 ? -errno : -EIO;
            memset(states, RF_PAGE_UNKNOWN, n_pages);
            return rc;
        }
        for (size_t i = 0; i < want; i++)
            states[done + i] =
                (entries[i] & PAGEMAP_PRESENT) ? RF_PAGE_RESIDENT : RF_PAGE_NONRESIDENT;
        done += want;
    }
    return 0;
}

int rfsys_pidfd_open(int pid, int *fd)
{
    if (!fd)
        return -EINVAL;
    *fd = -1;
    if (pid <= 0)
        return -EINVAL;
    long r = syscall(SYS_pidfd_open, pid, 0);
    if (r < 0)
        return -errno;
    *fd = (int)r;
    return 0;
}

const char *rfsys_remote_advice_name(enum rfsys_remote_advice a)
{
    switch (a) {
    case RFSYS_ADVISE_COLD:
        return "cold";
    case RFSYS_ADVISE_PAGEOUT:
        return "pageout";
    }
    return NULL;
}

int rfsys_process_madvise(int pidfd, const struct rfsys_range *ranges, size_t n,
                          enum rfsys_remote_advice advice, uint64_t *accepted_bytes)
{
    struct iovec iov[RFSYS_MADVISE_BATCH];
    int madv;

    if (!accepted_bytes)
        return -EINVAL;
    *accepted_bytes = 0;
    if (pidfd < 0 || (!ranges && n))
        return -EINVAL;
    if (advice == RFSYS_ADVISE_COLD)
        madv = MADV_COLD;
    else if (advice == RFSYS_ADVISE_PAGEOUT)
        madv = MADV_PAGEOUT;
    else
        return -EINVAL;
    for (size_t i = 0; i < n;) {
        size_t k = 0;
        uint64_t want = 0;
        for (; k < sizeof(iov) / sizeof(iov[0]) && i + k < n; k++) {
            iov[k].iov_base = (void *)(uintptr_t)ranges[i + k].addr;
            iov[k].iov_len = (size_t)ranges[i + k].len_bytes;
            want += ranges[i + k].len_bytes;
        }
        long r = syscall(SYS_process_madvise, pidfd, iov, k, madv, 0u);
        if (r < 0)
            return -errno;
        *accepted_bytes += (uint64_t)r;
        if ((uint64_t)r < want)
            return -ENOMEM; /* the kernel stopped at a range it could not advise */
        i += k;
    }
    return 0;
}
