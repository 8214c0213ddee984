/*
 * Fuzz harness: /proc/PID/status (rfsys_read_status, src/sys/status.c).
 * The input is the file's text, written to a private sysroot.
 */
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_sysroot.h"
#include "ramforge/sys/sys.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct rfsys_status st;

    fuzz_write("proc/self/status", data, size);
    int rc = rfsys_read_status(fuzz_sysroot(), "self", &st);
    /* a field is reported only with its value; on error nothing is */
    if (rc < 0 && (st.has_vm_rss || st.vm_rss_bytes || st.has_vm_hwm || st.has_rss_file))
        abort();
    if (rc == 0 && !st.has_vm_rss && st.vm_rss_bytes)
        abort();
    return 0;
}
