/*
 * ramforge run's warnings about options the chosen policy does not use
 * (said rather than ignored), printed once: after the options are parsed
 * and after run executed itself again, if it did (cmd_run.c).
 */
#include <stdbool.h>

#include "common/cli.h"
#include "run.h"

void run_warn_unused_options(const struct run_options *o)
{
    const struct session_options *so = &o->sess;
    if (so->policy == RF_POLICY_OFF && (so->has_target || so->has_reserve))
        cli_error("warning: --memory-target and --safety-reserve have no effect with "
                  "--residency-policy off");
    else if (so->has_reserve && !so->has_target)
        cli_error("warning: --safety-reserve has no effect without --memory-target");
    if (!o->observe_dispatch && (o->has_dispatch_events || o->has_dispatch_sample_pages))
        cli_error("warning: --dispatch-events and --dispatch-sample-pages have no effect "
                  "without --observe-dispatch");
    if (so->policy == RF_POLICY_OFF && o->verify)
        cli_error("warning: --verify-session has no effect with --residency-policy off (nothing "
                  "is released to verify)");
    if (so->policy == RF_POLICY_OFF && (o->access_probe || o->sample_smaps))
        cli_error("warning: --access-probe and --sample-smaps have no effect with "
                  "--residency-policy off");
    if (so->policy != RF_POLICY_STREAMING) {
        const char *ignored = o->stream_window           ? "--stream-window"
                              : o->stream_prefetch > 0   ? "--stream-prefetch-layers"
                              : o->stream_read_ahead_set ? "--stream-read-ahead"
                              : o->stream_spin_wait      ? "--stream-spin-wait"
                              : !o->stream_hugepage      ? "--no-stream-hugepage"
                              : !o->stream_sequential    ? "--no-stream-sequential"
                                                         : NULL;
        if (ignored)
            cli_error("warning: %s has no effect without --residency-policy streaming", ignored);
    }
}
