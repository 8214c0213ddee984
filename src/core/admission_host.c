/*
 * Admission's host level: when no cgroup of the hierarchy enforces a hard
 * limit, the host's memory (/proc/meminfo, read by src/sys) binds the run.
 * The anonymous growth must fit MemAvailable + SwapFree (what the kernel
 * can give without an OOM kill, reclaimable cache included: the room of
 * rf_oom_room_find, watch's too); without
 * MemAvailable the projected process memory must fit MemTotal + SwapTotal.
 * The decision's order and reasons are admission.c's.
 */
#include "admission_internal.h"
#include "ramforge/core/admission.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* The swap the room counts: SwapFree (or SwapTotal) when read, else none with a note. */
static uint64_t swap_part(const struct rf_cgroup_figure *swap, const char **note)
{
    if (swap->has) {
        *note = "";
        return swap->bytes;
    }
    *note = " (swap unknown: none counted)";
    return 0;
}

bool rf_admission_check_host(const struct rf_admission_input *in, struct rf_admission_result *out)
{
    const struct rf_host_memory *h = &out->host;
    const char *swap_note;
    uint64_t room, swap;

    if (!in->host || !in->host->read)
        return true;
    if (h->available.has) {
        struct rf_oom_room host_room; /* the room before the OOM kill, as watch's */

        swap_part(&h->swap_free, &swap_note);
        snprintf(out->host_source, sizeof(out->host_source),
                 "/proc/meminfo MemAvailable + SwapFree%s", swap_note);
        out->host_projected_bytes = out->growth_bytes;
        rf_oom_room_find(NULL, 0, false, h, NULL, &host_room);
        room = host_room.room_bytes;
    } else if (h->total.has) {
        swap = swap_part(&h->swap_total, &swap_note);
        snprintf(out->host_source, sizeof(out->host_source),
                 "/proc/meminfo MemTotal + SwapTotal%s (MemAvailable: %s)", swap_note,
                 rf_cgroup_error_text(h->available.error));
        out->host_projected_bytes = out->request_bytes;
        if (__builtin_add_overflow(h->total.bytes, swap, &room))
            room = UINT64_MAX;
    } else {
        snprintf(out->host_source, sizeof(out->host_source),
                 "/proc/meminfo: MemAvailable %s, "
                 "MemTotal %s",
                 rf_cgroup_error_text(h->available.error), rf_cgroup_error_text(h->total.error));
        return false;
    }
    out->host_binding = true;
    out->hard_limit_checked = true;
    out->host_room_bytes = room;
    out->has_projected_charge = true;
    out->projected_charge_bytes = out->host_projected_bytes;
    snprintf(out->hard_limit_source, sizeof(out->hard_limit_source), "%s", out->host_source);
    if (out->host_projected_bytes > room) {
        out->has_hard_excess = true;
        out->hard_excess_bytes = out->host_projected_bytes - room;
    }
    return true;
}

void rf_admission_host_sentence(struct rf_admission_result *out, char *buf, size_t size)
{
    const char *what = out->host.available.has ? "anonymous growth" : "projected process memory";

    if (out->has_hard_excess)
        snprintf(buf, size,
                 "the %s of %" PRIu64 " bytes exceeds the %" PRIu64
                 " bytes the host can give (%s) by %" PRIu64
                 " bytes: no cgroup of the hierarchy enforces a hard limit, so the host is the "
                 "binding level and the kernel would kill the run",
                 what, out->host_projected_bytes, out->host_room_bytes, out->host_source,
                 out->hard_excess_bytes);
    else
        snprintf(buf, size,
                 "no cgroup of the hierarchy enforces a hard limit: the host is the binding "
                 "level, and the %s of %" PRIu64 " bytes fits the %" PRIu64
                 " bytes it can give (%s)",
                 what, out->host_projected_bytes, out->host_room_bytes, out->host_source);
}
