/*
 * Transparent huge pages: the system-wide mode the kernel applies to a
 * mapping's huge-page hints (the streaming policy's MADV_HUGEPAGE on the
 * streamed layers only changes faults when the mode allows it).
 */
#include "ramforge/sys/sys.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int rfsys_read_thp_enabled(const char *sysroot, char *out, size_t out_size)
{
    char *text;
    size_t len;

    if (!out || out_size == 0)
        return -EINVAL;
    int rc = rfsys_slurp(sysroot, "/sys/kernel/mm/transparent_hugepage/enabled", 256, &text, &len);
    if (rc < 0)
        return rc;
    /* "always [madvise] never\n": the bracketed word is the mode in force. */
    const char *open = memchr(text, '[', len);
    const char *close = open ? memchr(open, ']', len - (size_t)(open - text)) : NULL;
    size_t n = close ? (size_t)(close - open - 1) : 0;
    rc = -EBADMSG;
    if (n > 0 && n < out_size && strspn(open + 1, "abcdefghijklmnopqrstuvwxyz") == n) {
        memcpy(out, open + 1, n);
        out[n] = '\0';
        rc = 0;
    }
    free(text);
    return rc;
}
