/*
 * Reading one run's operation report back for `ramforge bench`: the
 * timers, the generated-token count and fingerprint, and four ledger
 * categories, into a bench_row's figures. Keys come from the library's
 * own names (RF_REPORT_KEY_*, rf_timer_name, rf_ledger_category_name), so
 * a renamed key breaks the build or the e2e test, not the figures
 * silently.
 */
#ifndef RAMFORGE_BENCH_REPORT_H
#define RAMFORGE_BENCH_REPORT_H

#include <jansson.h>
#include <stddef.h>

#include "bench_results.h"

/*
 * Reads the JSON report at PATH into r's report figures (load, staging,
 * TTFT, end-to-end, decode tokens/s, peak RSS, mapping RSS, cgroup current
 * and peak) and r->fingerprint. A figure missing, null, negative or not an
 * integer leaves r's value unknown; decode tokens/s needs decode_ns > 0
 * and at least 2 generated tokens, and is rounded to 3 decimals. Other
 * fields of r are untouched. Returns 0, or -EBADMSG when the file cannot
 * be read or parsed (err gets "cannot read the report PATH: reason").
 */
int bench_report_read(const char *path, struct bench_row *r, char *err, size_t errlen);

/*
 * The inputs of bench --memory-limit's per-token bound from the parsed
 * run report doc into *out (zeroed first), the one place that knows their
 * keys: the streaming policy's streaming.plan with integer
 * working_set_bytes and resident_bytes gives W and R; otherwise W = model.inventory.totals.
 * file_backed_logical_bytes and R's parts come from the ledger entries
 * AnonymousWeights, KvCache, GraphScratch and Runtime (has_parts needs the
 * first three; Runtime may be unknown). bench_report_read calls it into
 * r->bound_in.
 */
void bench_bound_inputs_from_report(const json_t *doc, struct bench_bound_inputs *out);

#endif
