/*
 * /proc/<pid>/status: the process's own memory figures (VmRSS, VmHWM,
 * RssAnon, RssFile, RssShmem, VmLck, VmSwap), in bytes; and /proc/meminfo: the
 * host's (MemTotal, MemAvailable, SwapTotal, SwapFree).
 *
 * Both are a few KiB of "Name:\tvalue" lines; only the size fields named
 * are parsed, every other line (including ones without a colon) is ignored.
 */
#include "ramforge/sys/sys.h"
#include "sys_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * Applies one line to *st. Lines without a colon and unknown fields are
 * ignored; a known field must hold "<number> kB" (-EBADMSG, -EOVERFLOW).
 * A field that appears twice keeps its last value.
 */
static int parse_status_line(char *line, struct rfsys_status *st)
{
    const struct {
        const char *name;
        bool *has;
        uint64_t *bytes;
    } fields[] = {
        {"VmRSS", &st->has_vm_rss, &st->vm_rss_bytes},
        {"VmHWM", &st->has_vm_hwm, &st->vm_hwm_bytes},
        {"RssAnon", &st->has_rss_anon, &st->rss_anon_bytes},
        {"RssFile", &st->has_rss_file, &st->rss_file_bytes},
        {"RssShmem", &st->has_rss_shmem, &st->rss_shmem_bytes},
        {"VmLck", &st->has_vm_lck, &st->vm_lck_bytes},
        {"VmSwap", &st->has_vm_swap, &st->vm_swap_bytes},
    };
    char *colon = strchr(line, ':');
    size_t i;

    if (!colon)
        return 0;
    *colon = '\0';
    for (i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        uint64_t bytes;
        int ret;

        if (strcmp(line, fields[i].name) != 0)
            continue;
        ret = rfsys__parse_kb(colon + 1, &bytes);
        if (ret < 0)
            return ret;
        *fields[i].has = true;
        *fields[i].bytes = bytes;
        return 0;
    }
    return 0;
}

int rfsys_read_status(const char *sysroot, const char *pid, struct rfsys_status *out)
{
    struct rfsys_status st;
    char *text = NULL;
    char *cursor, *line;
    int ret;

    if (!out)
        return -EINVAL;
    memset(out, 0, sizeof(*out));
    memset(&st, 0, sizeof(st));
    ret = rfsys__proc_slurp(sysroot, pid, "status", &text);
    if (ret < 0)
        goto out;

    cursor = text;
    while ((line = rfsys__next_line(&cursor)) != NULL) {
        ret = parse_status_line(line, &st);
        if (ret < 0)
            goto out;
    }
    *out = st;
    ret = 0;

out:
    free(text);
    return ret;
}

void rfsys_read_host_memory(const char *sysroot, struct rf_host_memory *out)
{
    struct {
        const char *key;
        struct rf_cgroup_figure *f;
    } keys[4];
    char *text = NULL;
    char *cursor, *line;
    int ret;

    if (!out)
        return;
    memset(out, 0, sizeof(*out));
    out->read = true;
    keys[0].key = "MemTotal", keys[0].f = &out->total;
    keys[1].key = "MemAvailable", keys[1].f = &out->available;
    keys[2].key = "SwapTotal", keys[2].f = &out->swap_total;
    keys[3].key = "SwapFree", keys[3].f = &out->swap_free;
    for (size_t i = 0; i < 4; i++) {
        snprintf(keys[i].f->source, sizeof(keys[i].f->source), "/proc/meminfo %s", keys[i].key);
        keys[i].f->error = -ENOENT;
    }
    ret = rfsys_slurp(sysroot, "/proc/meminfo", RFSYS_SMALL_FILE_BYTES, &text, NULL);
    cursor = text;
    while (ret == 0 && (line = rfsys__next_line(&cursor)) != NULL) {
        char *colon = strchr(line, ':');

        if (!colon)
            continue;
        *colon = '\0';
        for (size_t i = 0; ret == 0 && i < 4; i++) {
            if (strcmp(line, keys[i].key) != 0)
                continue;
            ret = rfsys__parse_kb(colon + 1, &keys[i].f->bytes);
            keys[i].f->has = ret == 0;
            keys[i].f->error = 0;
        }
    }
    for (size_t i = 0; ret < 0 && i < 4; i++) {
        keys[i].f->has = false;
        keys[i].f->bytes = 0;
        keys[i].f->error = ret;
    }
    free(text);
}
