/*
 * Page-cache residency probes (see pages.h): mincore and cachestat
 * wrappers, the kernel's can_do_mincore rule, a streaming /proc/PID/maps
 * lookup that allocates nothing, and a read-only observation mapping of a
 * file with a per-page sampler.
 *
 * The expected workload is a model file of a few MiB to tens of GiB,
 * sampled in windows of at most a few thousand pages (callers bound the
 * window, RF_PAGE_WINDOW_PAGES of intervals.h: 16 MiB of file at 4 KiB
 * pages and 4 KiB of state). Nothing here reads, prefetches or advises the observed pages.
 */
#include "ramforge/sys/pages.h"
#include "ramforge/core/fs_profile.h"
#include "ramforge/core/residency.h"
#include "sys_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <stdio.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

/* cachestat(2) is syscall 451 wherever it exists (x86_64 and the generic table). */
#if defined(__NR_cachestat)
#define RFSYS_NR_CACHESTAT __NR_cachestat
#elif defined(__x86_64__) || defined(__aarch64__)
#define RFSYS_NR_CACHESTAT 451
#endif

/* mincore's -EAGAIN (kernel out of resources) is retried this many times. */
#define MINCORE_EAGAIN_RETRIES 8

/* Bytes of /proc/PID/maps read per read(2) call into the stack buffer. */
#define MAPS_CHUNK_BYTES 4096
/* Bytes of a maps line kept for parsing: the header fields need at most 94. */
#define MAPS_HEAD_BYTES 128

/* The bisection of rfsys_cachestat_pages never goes deeper than log2(2^64). */
#define CACHESTAT_MAX_DEPTH 64

static const char REASON_OWNER[] = "the process owns the file (inode uid == fsuid)";
static const char REASON_FOWNER[] = "the process has CAP_FOWNER";
static const char REASON_WRITE[] = "the process may write the file";
static const char REASON_FAKE[] =
    "mincore reports every page of a file the process neither owns nor may write as "
    "resident (kernel rule can_do_mincore): such pages are unknown";
static const char REASON_ERROR[] = "cannot tell whether mincore is trustworthy for this file";

uint64_t rfsys_page_bytes(void)
{
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (uint64_t)p : 4096;
}

static bool is_page_aligned(uintptr_t v, uint64_t page)
{
    return (v & (page - 1)) == 0;
}

int rfsys_mincore(const void *addr, uint64_t len_bytes, uint8_t *vec, size_t vec_len)
{
    const uint64_t page = rfsys_page_bytes();
    uint64_t pages, end;

    if (!vec || !is_page_aligned((uintptr_t)addr, page))
        return -EINVAL;
    if (len_bytes == 0)
        return 0;
    if (__builtin_add_overflow((uint64_t)(uintptr_t)addr, len_bytes, &end) || end > UINTPTR_MAX ||
        len_bytes > SIZE_MAX)
        return -EINVAL;
    pages = len_bytes / page + (len_bytes % page != 0);
    if (pages > vec_len)
        return -EINVAL;
    for (int tries = 0;; tries++) {
        if (mincore((void *)addr, (size_t)len_bytes, (unsigned char *)vec) == 0)
            break;
        if (errno != EAGAIN || tries >= MINCORE_EAGAIN_RETRIES)
            return -errno;
    }
    for (uint64_t i = 0; i < pages; i++)
        vec[i] &= 1; /* the other bits are reserved */
    return 0;
}

/* The kernel ABI of cachestat (linux/mman.h). */
struct rfsys_cachestat_range {
    uint64_t off;
    uint64_t len;
};

int rfsys_cachestat(int fd, uint64_t off_bytes, uint64_t len_bytes, struct rfsys_cachestat *out)
{
    if (!out)
        return -EINVAL;
    memset(out, 0, sizeof(*out));
#ifdef RFSYS_NR_CACHESTAT
    struct rfsys_cachestat_range r = {.off = off_bytes, .len = len_bytes};
    struct rfsys_cachestat cs;
    if (syscall(RFSYS_NR_CACHESTAT, fd, &r, &cs, 0) != 0)
        return -errno;
    *out = cs;
    return 0;
#else
    (void)fd;
    (void)off_bytes;
    (void)len_bytes;
    return -ENOSYS;
#endif
}

/* *has: CAP_FOWNER is in the effective set. 0, or -errno if capget fails. */
static int has_cap_fowner(bool *has)
{
    struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];

    memset(data, 0, sizeof(data));
    if (syscall(SYS_capget, &hdr, data) != 0)
        return -errno;
    *has = (data[CAP_TO_INDEX(CAP_FOWNER)].effective & CAP_TO_MASK(CAP_FOWNER)) != 0;
    return 0;
}

/* *writable: W_OK with the effective ids, as the kernel's MAY_WRITE check. 0 or -errno. */
static int may_write(int fd, bool *writable)
{
    int rc = faccessat(fd, "", W_OK, AT_EACCESS | AT_EMPTY_PATH);
    if (rc != 0 && (errno == EINVAL || errno == ENOSYS)) {
        /* no faccessat2 (Linux < 5.8): the same inode through /proc/self/fd */
        char path[64];
        snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
        rc = faccessat(AT_FDCWD, path, W_OK, AT_EACCESS);
    }
    *writable = rc == 0;
    if (rc == 0 || errno == EACCES || errno == EROFS || errno == EPERM || errno == ETXTBSY)
        return 0;
    return -errno;
}

int rfsys_mincore_trustworthy(const struct stat *st, int fd, bool *trustworthy, const char **reason)
{
    struct stat own;
    bool yes = false;
    int rc;

    if (reason)
        *reason = REASON_ERROR;
    if (trustworthy)
        *trustworthy = false;
    if (fd < 0 || !trustworthy)
        return -EINVAL;
    if (!st) {
        if (fstat(fd, &own) != 0)
            return -errno;
        st = &own;
    }
    /* setfsuid with an invalid id changes nothing and returns the current fsuid */
    uid_t fsuid = (uid_t)setfsuid((uid_t)-1);
    if (st->st_uid == fsuid) {
        if (reason)
            *reason = REASON_OWNER;
        *trustworthy = true;
        return 0;
    }
    rc = has_cap_fowner(&yes);
    if (rc < 0)
        return rc;
    if (yes) {
        if (reason)
            *reason = REASON_FOWNER;
        *trustworthy = true;
        return 0;
    }
    rc = may_write(fd, &yes);
    if (rc < 0)
        return rc;
    if (reason)
        *reason = yes ? REASON_WRITE : REASON_FAKE;
    *trustworthy = yes;
    return 0;
}

/* Consumes c at *sp. */
static bool eat(const char **sp, char c)
{
    if (**sp != c)
        return false;
    (*sp)++;
    return true;
}

/* Consumes one or more blanks. */
static bool eat_blanks(const char **sp)
{
    if (**sp != ' ')
        return false;
    while (**sp == ' ')
        (*sp)++;
    return true;
}

/* Parses the header of one maps line (path ignored). 0 or -EBADMSG. */
static int parse_vma_head(const char *s, struct rfsys_vma *v)
{
    uint64_t major, minor;

    memset(v, 0, sizeof(*v));
    if (rfsys__parse_u64(&s, 16, &v->start_addr) < 0 || !eat(&s, '-') ||
        rfsys__parse_u64(&s, 16, &v->end_addr) < 0 || !eat_blanks(&s))
        return -EBADMSG;
    if ((s[0] != 'r' && s[0] != '-') || (s[1] != 'w' && s[1] != '-') ||
        (s[2] != 'x' && s[2] != '-') || (s[3] != 's' && s[3] != 'p'))
        return -EBADMSG; /* stops at the NUL of a truncated field */
    memcpy(v->perms, s, 4);
    v->perms[4] = '\0';
    s += 4;
    if (!eat_blanks(&s) || rfsys__parse_u64(&s, 16, &v->offset_bytes) < 0 || !eat_blanks(&s) ||
        rfsys__parse_u64(&s, 16, &major) < 0 || !eat(&s, ':') ||
        rfsys__parse_u64(&s, 16, &minor) < 0 || !eat_blanks(&s) ||
        rfsys__parse_u64(&s, 10, &v->inode) < 0)
        return -EBADMSG;
    if (*s != '\0' && *s != ' ')
        return -EBADMSG;
    if (v->end_addr < v->start_addr || major > UINT32_MAX || minor > UINT32_MAX)
        return -EBADMSG;
    v->dev_major = (uint32_t)major;
    v->dev_minor = (uint32_t)minor;
    return 0;
}

/* Parses a completed line; 1 when it contains addr, 0 when not, -EBADMSG. */
static int check_line(char *head, size_t len, uint64_t addr, struct rfsys_vma *out)
{
    struct rfsys_vma v;

    head[len] = '\0';
    if (len == 0)
        return 0; /* the kernel writes no empty lines; tolerate one */
    if (parse_vma_head(head, &v) < 0)
        return -EBADMSG;
    if (addr >= v.start_addr && addr < v.end_addr) {
        *out = v;
        return 1;
    }
    return 0;
}

int rfsys_maps_find(const char *sysroot, const char *pid, uint64_t addr, struct rfsys_vma *out)
{
    char rel[64], path[4096], buf[MAPS_CHUNK_BYTES], head[MAPS_HEAD_BYTES + 1];
    size_t head_len = 0;
    int fd, rc;

    if (!out)
        return -EINVAL;
    memset(out, 0, sizeof(*out));
    rc = rfsys__proc_path(rel, sizeof(rel), pid, "maps");
    if (rc < 0)
        return rc;
    rc = rfsys__path(path, sizeof(path), sysroot, rel);
    if (rc < 0)
        return rc;
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    rc = -ENOENT;
    for (;;) {
        ssize_t got = read(fd, buf, sizeof(buf));
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            rc = -errno;
            break;
        }
        if (got == 0) {
            if (head_len > 0) { /* a last line without '\n' */
                int r = check_line(head, head_len, addr, out);
                rc = r < 0 ? r : (r ? 0 : -ENOENT);
            }
            break;
        }
        for (ssize_t i = 0; i < got; i++) {
            if (buf[i] != '\n') {
                if (head_len < MAPS_HEAD_BYTES)
                    head[head_len++] = buf[i];
                continue;
            }
            int r = check_line(head, head_len, addr, out);
            head_len = 0;
            if (r != 0) {
                rc = r < 0 ? r : 0;
                goto out;
            }
        }
    }
out:
    close(fd);
    if (rc < 0)
        memset(out, 0, sizeof(*out));
    return rc;
}

const char *rfsys_page_method_name(enum rfsys_page_method m)
{
    switch (m) {
    case RFSYS_PAGES_MINCORE:
        return "mincore";
    case RFSYS_PAGES_CACHESTAT:
        return "cachestat";
    case RFSYS_PAGES_NONE:
        return "none";
    }
    return "none";
}

int rfsys_file_pages_open(const char *path, struct rfsys_file_pages *out)
{
    struct rfsys_cachestat cs;
    int rc;

    if (!out)
        return -EINVAL;
    memset(out, 0, sizeof(*out));
    out->fd = -1;
    if (!path)
        return -EINVAL;
    out->page_bytes = rfsys_page_bytes();
    out->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (out->fd < 0) {
        rc = -errno;
        goto fail;
    }
    if (fstat(out->fd, &out->st) != 0) {
        rc = -errno;
        goto fail;
    }
    if (!S_ISREG(out->st.st_mode)) {
        rc = -EINVAL;
        goto fail;
    }
    if ((uint64_t)out->st.st_size > SIZE_MAX / 2) {
        rc = -EFBIG;
        goto fail;
    }
    out->map_bytes = (uint64_t)out->st.st_size;
    out->file_pages = out->map_bytes / out->page_bytes + (out->map_bytes % out->page_bytes != 0);
    if (out->map_bytes > 0) {
        /* PROT_READ, MAP_SHARED, no MAP_POPULATE: nothing is faulted in */
        void *p = mmap(NULL, (size_t)out->map_bytes, PROT_READ, MAP_SHARED, out->fd, 0);
        if (p == MAP_FAILED) {
            rc = -errno;
            goto fail;
        }
        out->map = p;
    }
    rfsys_mincore_trustworthy(&out->st, out->fd, &out->mincore_trustworthy, &out->mincore_reason);
    /* one page at offset 0: does the kernel answer cachestat for this file? */
    out->cachestat_error = rfsys_cachestat(out->fd, 0, out->page_bytes, &cs);
    if (rfsys_fs_magic(out->fd, &out->fs_magic) < 0)
        out->fs_magic = 0;
    if (out->mincore_trustworthy)
        out->method = RFSYS_PAGES_MINCORE;
    else if (out->cachestat_error == 0 && rf_fs_profile_of(out->fs_magic)->cachestat_valid)
        out->method = RFSYS_PAGES_CACHESTAT;
    else
        out->method = RFSYS_PAGES_NONE;
    return 0;
fail:
    rfsys_file_pages_close(out);
    return rc;
}

void rfsys_file_pages_close(struct rfsys_file_pages *fp)
{
    if (!fp)
        return;
    if (fp->map)
        munmap(fp->map, (size_t)fp->map_bytes);
    fp->map = NULL;
    if (fp->fd >= 0)
        close(fp->fd);
    fp->fd = -1;
}

static void fill(uint8_t *states, uint64_t n, uint8_t v)
{
    memset(states, v, (size_t)n);
}

/* Bisects [first, first + n) (n >= 1, byte offsets checked by the caller). */
static int bisect(int fd, uint64_t page_bytes, uint64_t first, uint64_t n, uint8_t *states,
                  uint64_t *calls, int depth)
{
    struct rfsys_cachestat cs;
    int rc;

    if (depth > CACHESTAT_MAX_DEPTH)
        return -EOVERFLOW;
    rc = rfsys_cachestat(fd, first * page_bytes, n * page_bytes, &cs);
    if (calls)
        (*calls)++;
    if (rc < 0)
        return rc;
    if (cs.nr_cache == 0) {
        fill(states, n, RF_PAGE_NONRESIDENT);
        return 0;
    }
    if (cs.nr_cache >= n) {
        fill(states, n, RF_PAGE_RESIDENT);
        return 0;
    }
    uint64_t half = n / 2; /* n >= 2 here: one page is 0 or 1 cached */
    rc = bisect(fd, page_bytes, first, half, states, calls, depth + 1);
    if (rc < 0)
        return rc;
    return bisect(fd, page_bytes, first + half, n - half, states + half, calls, depth + 1);
}

int rfsys_cachestat_pages(int fd, uint64_t page_bytes, uint64_t first_page, uint64_t n_pages,
                          uint8_t *states, uint64_t *calls)
{
    uint64_t end, end_bytes;
    int rc;

    if (!states || page_bytes == 0)
        return -EINVAL;
    if (n_pages == 0)
        return 0;
    if (__builtin_add_overflow(first_page, n_pages, &end) ||
        __builtin_mul_overflow(end, page_bytes, &end_bytes)) {
        fill(states, n_pages, RF_PAGE_UNKNOWN);
        return -EOVERFLOW;
    }
    rc = bisect(fd, page_bytes, first_page, n_pages, states, calls, 0);
    if (rc < 0)
        fill(states, n_pages, RF_PAGE_UNKNOWN);
    return rc;
}

int rfsys_file_pages_sample(struct rfsys_file_pages *fp, uint64_t first_page, uint64_t n_pages,
                            uint8_t *states)
{
    uint64_t end, in_file = 0;
    int rc = 0;

    if (!fp || !states)
        return -EINVAL;
    if (n_pages == 0)
        return 0;
    if (__builtin_add_overflow(first_page, n_pages, &end)) {
        fill(states, n_pages, RF_PAGE_UNKNOWN);
        return -EINVAL;
    }
    if (fp->method == RFSYS_PAGES_NONE) {
        fill(states, n_pages, RF_PAGE_UNKNOWN);
        return -EACCES; /* mincore untrustworthy and cachestat refused */
    }
    if (first_page < fp->file_pages)
        in_file = (end < fp->file_pages ? end : fp->file_pages) - first_page;
    if (in_file > 0) {
        if (fp->method == RFSYS_PAGES_MINCORE) {
            rc = rfsys_mincore(fp->map + first_page * fp->page_bytes, in_file * fp->page_bytes,
                               states, (size_t)in_file);
            if (rc == 0)
                for (uint64_t i = 0; i < in_file; i++)
                    states[i] = states[i] ? RF_PAGE_RESIDENT : RF_PAGE_NONRESIDENT;
        } else {
            rc = rfsys_cachestat_pages(fp->fd, fp->page_bytes, first_page, in_file, states,
                                       &fp->cachestat_calls);
        }
        if (rc < 0) {
            fill(states, n_pages, RF_PAGE_UNKNOWN);
            return rc;
        }
    }
    /* past the end of the file the page cache holds nothing */
    fill(states + in_file, n_pages - in_file, RF_PAGE_NONRESIDENT);
    return 0;
}
