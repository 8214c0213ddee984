/*
 * Measurement glue: takes a point-in-time sample of the process, the model
 * mappings and the cgroup through the sys probes, and records it in the
 * ledger with each figure's provenance and source.
 *
 * Cost: status and the cgroup files are a few small reads. The mapping's
 * own figures are the expensive part: smaps walks every page of every
 * mapping of the process (about 8 ms per GiB of mapped model here), while
 * PAGEMAP_SCAN counts the present pages of the model mappings alone (about
 * 1.2 ms per GiB) but gives no Pss. A sample therefore reads the resident
 * bytes with PAGEMAP_SCAN (RF_MEASURE_MAPPING_RSS), and the sample whose
 * figures go into the ledger adds smaps (rf_measure_sample_mapping with
 * RF_MEASURE_MAPPING_SMAPS).
 */
#ifndef RAMFORGE_MEASURE_H
#define RAMFORGE_MEASURE_H

#include <stdbool.h>
#include <stddef.h>

#include "ramforge/core/inventory.h"
#include "ramforge/core/ledger.h"
#include "ramforge/core/report.h"
#include "ramforge/sys/sys.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a sample reads about the model mappings. */
enum rf_measure_mapping {
    /* Resident bytes only: one read of SYSROOT/proc/PID/maps and PAGEMAP_SCAN
       (Linux 6.7+) over the r--s mappings of each validated mapping's
       dev+inode; mapping_source "pagemap_scan", no Pss. Where PAGEMAP_SCAN is
       unavailable (older kernel, a fixture sysroot) it falls back to smaps. */
    RF_MEASURE_MAPPING_RSS = 0,
    /* Rss and Pss from SYSROOT/proc/PID/smaps; mapping_source "smaps". */
    RF_MEASURE_MAPPING_SMAPS = 1,
    /* The mapping is not read at this sample (mapping_not_read; the figures
       absent): a sample of the process and the cgroup alone. */
    RF_MEASURE_MAPPING_NONE = 2,
};

/*
 * Samples SYSROOT/proc/PID/status (VmRSS, VmHWM), the model mappings as
 * `what` says (rf_measure_sample_mapping) and the cgroup memory controller
 * into *out, labelled label. A probe that fails leaves its has_* false; cg
 * (may be NULL) receives the cgroup figures with their source files.
 * Always returns 0: an absent figure is recorded as absent, not as an
 * error.
 */
int rf_measure_sample(const char *sysroot, const char *pid, const struct rf_mapping_meta *mappings,
                      size_t n_mappings, enum rf_measure_mapping what, const char *label,
                      struct rf_residency_sample *out, struct rfsys_cgroup_memory *cg);

/*
 * (Re)reads only the mapping figures of *out (has_mapping, mapping_rss_bytes,
 * has_mapping_pss, mapping_pss_bytes, mapping_source, mapping_not_read),
 * summed over the
 * r--s mappings of each validated mapping's dev+inode; the other figures
 * are left as they are. With RF_MEASURE_MAPPING_SMAPS, use it on the sample
 * whose mapping figures go into the ledger (FileBackedResident and
 * MappingPss come from one smaps read). Every mapping must be validated
 * and found, else the figures are absent (has_mapping false, source NULL).
 * Always returns 0.
 */
int rf_measure_sample_mapping(const char *sysroot, const char *pid,
                              const struct rf_mapping_meta *mappings, size_t n_mappings,
                              enum rf_measure_mapping what, struct rf_residency_sample *out);

/*
 * Records the ledger for one run: FileBackedLogical and AnonymousWeights
 * from the inventory (native_logical, the source naming how the weights
 * were classified: basis; AnonymousWeights unknown when basis is
 * RF_ACCESS_BASIS_NONE), FileBackedResident / MappingPss / ProcessRss /
 * ProcessRssPeak / CgroupCurrent / CgroupPeak from the sample
 * (exact_measured, with their source files; unknown with the reason when
 * absent: MappingPss is unknown for a sample read without smaps). Staging,
 * KV cache, graph scratch and runtime keep the unknown entries of
 * rf_ledger_init unless the caller sets them. inv may be NULL.
 */
void rf_measure_fill_ledger(struct rf_ledger *l, const struct rf_inventory *inv,
                            enum rf_access_basis basis, const struct rf_residency_sample *s,
                            const struct rfsys_cgroup_memory *cg, const char *pid);

#ifdef __cplusplus
}
#endif

#endif
