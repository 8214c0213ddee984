/*
 * Measurement glue: takes a point-in-time sample of the process, the model
 * mappings and the cgroup through the sys probes, and records it in the
 * ledger with each figure's provenance and source.
 */
#ifndef RAMFORGE_MEASURE_H
#define RAMFORGE_MEASURE_H

#include <stdbool.h>
#include <stddef.h>

#include "ramforge/inventory.h"
#include "ramforge/ledger.h"
#include "ramforge/report.h"
#include "ramforge/sys.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Samples SYSROOT/proc/PID/status (VmRSS, VmHWM), SYSROOT/proc/PID/smaps
 * (Rss and Pss summed over the r--s mappings of each validated mapping's
 * dev+inode) and the cgroup memory controller into *out, labelled label.
 * A probe that fails leaves its has_* false; cg (may be NULL) receives the
 * cgroup figures with their source files. Always returns 0: an absent figure
 * is recorded as absent, not as an error.
 */
int rf_measure_sample(const char *sysroot, const char *pid, const struct rf_mapping_meta *mappings,
                      size_t n_mappings, const char *label, struct rf_residency_sample *out,
                      struct rfsys_cgroup_memory *cg);

/*
 * Records the ledger for one run: FileBackedLogical and AnonymousWeights
 * from the inventory (native_logical; AnonymousWeights unknown when the
 * access probe did not run), FileBackedResident / MappingPss /
 * ProcessRss / ProcessRssPeak / CgroupCurrent / CgroupPeak from the sample
 * (exact_measured, with their source files; unknown with the reason when
 * absent). Staging, KV cache, graph scratch and runtime keep the unknown
 * entries of rf_ledger_init unless the caller sets them. inv may be NULL.
 */
void rf_measure_fill_ledger(struct rf_ledger *l, const struct rf_inventory *inv, bool access_probed,
                            const struct rf_residency_sample *s, const struct rfsys_cgroup_memory *cg,
                            const char *pid);

#ifdef __cplusplus
}
#endif

#endif
