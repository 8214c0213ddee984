/* ramforge run: the human-readable report's streaming lines (stderr). */
#include <inttypes.h>
#include <stdio.h>

#include "common/cli.h"
#include "ramforge/error.h"
#include "run.h"

void run_print_streaming(FILE *f, const struct rf_report *r)
{
    const struct rf_stream_report *sr = r->streaming;
    char b1[32], b2[32], b3[32], b4[32], b5[32];

    if (!sr)
        return;
    fprintf(f,
            "storage: %s read from storage during the run (the prompt, any pins and the decode; "
            "/proc/self/io read_bytes; the load's reads not counted), ",
            sr->has_read_bytes ? cli_format_bytes(sr->read_bytes, false, b1, sizeof(b1))
                               : "unknown");
    if (sr->has_major_faults)
        fprintf(f, "%" PRIu64 " major faults (/proc/self/stat majflt)\n", sr->major_faults);
    else
        fprintf(f, "major faults unknown\n");
    if (!sr->active)
        return;
    if (!sr->plan) {
        fprintf(f, "streaming: no plan (%s)\n", sr->plan_reason ? sr->plan_reason : "none");
        return;
    }
    const struct rf_stream_plan *p = sr->plan;
    fprintf(f,
            "streaming: W %s read from the file per token, R %s may stay resident, window %s, "
            "pinned %s (%" PRId32 " of %" PRId32 " layers%s, %" PRIu32
            " tensor(s) of another%s), ~%s streamed per token\n",
            cli_format_bytes(p->working_set_bytes, false, b1, sizeof(b1)),
            cli_format_bytes(p->resident_bytes, false, b2, sizeof(b2)),
            cli_format_bytes(p->window_bytes, false, b3, sizeof(b3)),
            cli_format_bytes(p->pinned_bytes, false, b4, sizeof(b4)), p->layers_pinned, p->n_layers,
            p->layers_spread ? ", spread" : "", p->partial_layer_tensors,
            p->head_pinned ? ", output tensors" : "",
            cli_format_bytes(p->streamed_bytes, false, b5, sizeof(b5)));
    if (sr->plan_reason)
        fprintf(f, "streaming: %s\n", sr->plan_reason);
    if (sr->pin_attempted)
        fprintf(f, "streaming: pins %s, locked %s (smaps Locked), %s%s\n",
                sr->pinned ? "held" : "refused",
                sr->has_locked ? cli_format_bytes(sr->locked_bytes, false, b2, sizeof(b2))
                               : "unknown",
                sr->pin_error ? rf_strerror(sr->pin_error) : "undone at ",
                sr->pin_error ? "" : (sr->unpinned_at ? sr->unpinned_at : "(still held)"));
    if (sr->partial)
        fprintf(f, "streaming: partial pins: RLIMIT_MEMLOCK %s is below the plan's %s; %s pinned\n",
                cli_format_bytes(sr->memlock_limit_bytes, false, b2, sizeof(b2)),
                cli_format_bytes(sr->pin_requested_bytes, false, b3, sizeof(b3)),
                cli_format_bytes(sr->pin_accepted_bytes, false, b4, sizeof(b4)));
    if (sr->pinned)
        fprintf(f, "streaming: streamed layers advised %s, %s%s%s%s\n",
                sr->sequential ? "MADV_SEQUENTIAL" : "not sequential",
                sr->hugepage ? "MADV_HUGEPAGE" : "not hugepage",
                sr->has_thp_enabled ? " (THP mode " : "",
                sr->has_thp_enabled ? sr->thp_enabled : "", sr->has_thp_enabled ? ")" : "");
    const struct rf_stream_read_ahead *ra = &sr->read_ahead;
    if (ra->on)
        fprintf(f,
                "streaming: read-ahead %" PRIu32 " slots of %s, %" PRIu32
                " tensors a token: %s read in %s (%s), the decode waited %s%s%s\n",
                ra->slots, cli_format_bytes(ra->slot_bytes, false, b1, sizeof(b1)), ra->n_units,
                cli_format_bytes(ra->read_bytes, false, b2, sizeof(b2)),
                cli_format_ns(ra->read_ns, b3, sizeof(b3)),
                ra->direct          ? "O_DIRECT"
                : ra->direct_reason ? ra->direct_reason
                                    : "page cache",
                cli_format_ns(ra->wait_ns, b4, sizeof(b4)),
                ra->first_error ? ", first error: " : "",
                ra->first_error ? rf_strerror(ra->first_error) : "");
    const struct rf_stream_experts *x = &sr->experts;
    if (x->on)
        fprintf(f,
                "streaming: experts: cache of %" PRIu32 " a layer, %" PRIu32
                " held at once (%s budget, %s resident), %" PRIu64
                " selections, hit rate %.2f, %s read (%s a token, %s), the decode waited %s\n",
                x->per_layer, x->slots, cli_format_bytes(x->budget_bytes, false, b1, sizeof(b1)),
                cli_format_bytes(x->resident_bytes, false, b2, sizeof(b2)), x->selections,
                x->selections ? (double)x->hits / (double)x->selections : 0.0,
                cli_format_bytes(x->bytes_read, false, b3, sizeof(b3)),
                cli_format_bytes(x->tokens ? x->bytes_read / x->tokens : 0, false, b4, sizeof(b4)),
                x->direct          ? "O_DIRECT"
                : x->direct_reason ? x->direct_reason
                                   : "page cache",
                cli_format_ns(x->read_wait_ns, b5, sizeof(b5)));
    if (sr->has_bound && sr->has_achieved)
        fprintf(f, "streaming: %s per token against a bound of %s\n",
                cli_format_ns(sr->achieved_token_ns, b1, sizeof(b1)),
                cli_format_ns(sr->bound_token_ns, b2, sizeof(b2)));
}
