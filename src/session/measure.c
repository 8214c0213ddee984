/*
 * Measurement glue between the probes and the ledger (see measure.h): one
 * sample of status, smaps and cgroup figures, and the ledger entries made
 * from it with their provenance and source file.
 */
#include "ramforge/measure.h"

#include <stdio.h>
#include <string.h>

int rf_measure_sample(const char *sysroot, const char *pid, const struct rf_mapping_meta *mappings,
                      size_t n_mappings, const char *label, struct rf_residency_sample *out,
                      struct rfsys_cgroup_memory *cg)
{
    struct rfsys_cgroup_memory cgm;
    struct rfsys_status st;
    struct rfsys_maps maps;

    memset(out, 0, sizeof(*out));
    out->taken = true;
    out->label = label;
    if (rfsys_read_status(sysroot, pid, &st) == 0) {
        out->has_process_rss = st.has_vm_rss;
        out->process_rss_bytes = st.vm_rss_bytes;
        out->has_process_rss_peak = st.has_vm_hwm;
        out->process_rss_peak_bytes = st.vm_hwm_bytes;
        out->has_anon = st.has_rss_anon;
        out->anon_bytes = st.rss_anon_bytes;
        out->has_locked = st.has_vm_lck;
        out->locked_bytes = st.vm_lck_bytes;
    }
    rfsys_maps_init(&maps);
    if (n_mappings > 0 && rfsys_read_smaps(sysroot, pid, &maps) == 0) {
        bool ok = true;
        for (size_t i = 0; ok && i < n_mappings; i++) {
            const struct rf_mapping_meta *m = &mappings[i];
            struct rfsys_mapping_sum sum;
            if (!m->validated ||
                rfsys_maps_sum_file(&maps, m->dev_major, m->dev_minor, m->inode, "r--s", &sum) <
                    0 ||
                !sum.complete || sum.n_mappings == 0 ||
                __builtin_add_overflow(out->mapping_rss_bytes, sum.rss_bytes,
                                       &out->mapping_rss_bytes) ||
                __builtin_add_overflow(out->mapping_pss_bytes, sum.pss_bytes,
                                       &out->mapping_pss_bytes) ||
                __builtin_add_overflow(out->mapping_locked_bytes, sum.locked_bytes,
                                       &out->mapping_locked_bytes))
                ok = false;
        }
        out->has_mapping = ok;
        if (!ok)
            out->mapping_rss_bytes = out->mapping_pss_bytes = out->mapping_locked_bytes = 0;
    }
    rfsys_maps_free(&maps);
    if (!cg)
        cg = &cgm;
    if (rfsys_read_cgroup_memory(sysroot, pid, cg) == 0) {
        out->has_cgroup_current = cg->has_current;
        out->cgroup_current_bytes = cg->current_bytes;
        out->has_cgroup_peak = cg->has_peak;
        out->cgroup_peak_bytes = cg->peak_bytes;
        out->has_cgroup_events = cg->has_events;
        out->cgroup_events_high = cg->events_high;
        out->cgroup_events_max = cg->events_max;
        out->cgroup_events_oom = cg->events_oom;
        out->cgroup_events_oom_kill = cg->events_oom_kill;
    } else {
        memset(cg, 0, sizeof(*cg));
    }
    return 0;
}

/* value with provenance exact_measured, or unknown with the reason. */
static void measured(struct rf_ledger *l, enum rf_ledger_category c, bool has, uint64_t v,
                     const char *source, const char *note, const char *reason)
{
    if (has)
        rf_ledger_set(l, c, v, RF_PROV_EXACT_MEASURED, source, note);
    else
        rf_ledger_set_unknown(l, c, source, reason);
}

void rf_measure_fill_ledger(struct rf_ledger *l, const struct rf_inventory *inv, bool access_probed,
                            const struct rf_residency_sample *s,
                            const struct rfsys_cgroup_memory *cg, const char *pid)
{
    char src[RF_LEDGER_SOURCE_MAX];
    char dev[96] = "the model file";

    if (inv) {
        rf_ledger_set(l, RF_LEDGER_FILE_BACKED_LOGICAL, inv->totals.file_backed_logical_bytes,
                      RF_PROV_NATIVE_LOGICAL, "GGUF tensor table (gguf_get_tensor_size)",
                      "payload bytes of tensors inside the validated file mapping, repacked "
                      "weights included (their file pages stay mapped); not residency");
        if (access_probed)
            rf_ledger_set(l, RF_LEDGER_ANONYMOUS_WEIGHTS, inv->totals.anonymous_logical_bytes,
                          RF_PROV_NATIVE_LOGICAL,
                          "GGUF tensor table + graph probe (cb_eval source data pointers)",
                          "GGUF payload bytes of weights the graph reads from an anonymous "
                          "(CPU_REPACK) copy; the copy's own size may differ");
        else
            rf_ledger_set_unknown(l, RF_LEDGER_ANONYMOUS_WEIGHTS, "graph probe",
                                  "the access probe did not run: which weights are repacked is "
                                  "unknown");
        if (inv->n_mappings > 0)
            snprintf(dev, sizeof(dev), "dev %02x:%02x inode %llu", inv->mappings[0].dev_major,
                     inv->mappings[0].dev_minor, (unsigned long long)inv->mappings[0].inode);
    }
    snprintf(src, sizeof(src), "/proc/%s/smaps Rss of r--s mappings of %s", pid, dev);
    measured(l, RF_LEDGER_FILE_BACKED_RESIDENT, s->has_mapping, s->mapping_rss_bytes, src,
             "resident pages of the model mapping in this process; not page cache, not cgroup",
             "the model mapping was not found in smaps");
    snprintf(src, sizeof(src), "/proc/%s/smaps Pss of r--s mappings of %s", pid, dev);
    measured(l, RF_LEDGER_MAPPING_PSS, s->has_mapping, s->mapping_pss_bytes, src,
             "proportional share: lower than Rss when other processes map the same pages",
             "the model mapping was not found in smaps");
    snprintf(src, sizeof(src), "/proc/%s/status VmRSS", pid);
    measured(l, RF_LEDGER_PROCESS_RSS, s->has_process_rss, s->process_rss_bytes, src,
             "whole process at this sample: mapping pages, repacked copies, runtime, and the "
             "KV cache and scratch of any context alive then",
             "VmRSS missing from status");
    snprintf(src, sizeof(src), "/proc/%s/status VmHWM", pid);
    measured(l, RF_LEDGER_PROCESS_RSS_PEAK, s->has_process_rss_peak, s->process_rss_peak_bytes, src,
             "process RSS high-water mark since start", "VmHWM missing from status");
    measured(l, RF_LEDGER_CGROUP_CURRENT, s->has_cgroup_current, s->cgroup_current_bytes,
             cg && cg->current_source[0] ? cg->current_source : "cgroup memory controller",
             cg && cg->version == RFSYS_CGROUP_V1
                 ? "charged to the cgroup: page cache, kernel memory and other processes "
                   "included; v1 usage_in_bytes is approximate (the kernel documents it as fuzzy)"
                 : "charged to the cgroup: includes page cache, kernel memory and other processes",
             cg && cg->version == RFSYS_CGROUP_NONE ? "no cgroup memory controller found"
                                                    : "the cgroup's usage file is not readable");
    measured(l, RF_LEDGER_CGROUP_PEAK, s->has_cgroup_peak, s->cgroup_peak_bytes,
             cg && cg->peak_source[0] ? cg->peak_source : "cgroup memory controller",
             "cgroup high-water mark (since the cgroup was created or last reset)",
             cg && cg->version == RFSYS_CGROUP_NONE
                 ? "no cgroup memory controller found"
                 : "no peak file (memory.peak needs Linux 5.19+ on cgroup v2)");
    rf_ledger_set_unknown(l, RF_LEDGER_RUNTIME, "llama.cpp C API",
                          "allocator, loader and tokenizer memory are not reported by llama.cpp; "
                          "they are inside ProcessRss");
    rf_ledger_set(l, RF_LEDGER_STAGING_REQUESTED, 0, RF_PROV_REQUESTED, "ramforge staging",
                  "no staging was planned in this run: 0 bytes were requested");
    rf_ledger_set(l, RF_LEDGER_STAGING_ACCEPTED, 0, RF_PROV_NATIVE_ACCEPTED, "ramforge staging",
                  "no prefetch was submitted in this run: 0 bytes were accepted");
}
