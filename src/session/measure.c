/*
 * Measurement glue between the probes and the ledger (see measure.h): one
 * sample of status, smaps and cgroup figures, and the ledger entries made
 * from it with their provenance and source file.
 */
#include "ramforge/session/measure.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Rss, Pss and Locked from one smaps read; false when a mapping is missing or a sum overflows. */
static bool mapping_from_smaps(const char *sysroot, const char *pid,
                               const struct rf_mapping_meta *mappings, size_t n_mappings,
                               uint64_t *rss, uint64_t *pss, uint64_t *locked)
{
    struct rfsys_maps maps;
    bool ok;

    *rss = *pss = *locked = 0;
    rfsys_maps_init(&maps);
    ok = rfsys_read_smaps(sysroot, pid, &maps) == 0;
    for (size_t i = 0; ok && i < n_mappings; i++) {
        const struct rf_mapping_meta *m = &mappings[i];
        struct rfsys_mapping_sum sum;
        ok = m->validated &&
             rfsys_maps_sum_file(&maps, m->dev_major, m->dev_minor, m->inode, "r--s", &sum) == 0 &&
             sum.complete && sum.n_mappings > 0 &&
             !__builtin_add_overflow(*rss, sum.rss_bytes, rss) &&
             !__builtin_add_overflow(*pss, sum.pss_bytes, pss) &&
             !__builtin_add_overflow(*locked, sum.locked_bytes, locked);
    }
    rfsys_maps_free(&maps);
    return ok;
}

/*
 * Resident bytes from one maps read and PAGEMAP_SCAN. Returns 0 with *has
 * true and *rss; 0 with *has false when a mapping is missing or a sum
 * overflows; -EOPNOTSUPP where PAGEMAP_SCAN cannot answer (the caller
 * falls back to smaps).
 */
static int mapping_from_pagemap(const char *sysroot, const char *pid,
                                const struct rf_mapping_meta *mappings, size_t n_mappings,
                                uint64_t *rss, bool *has)
{
    struct rfsys_maps maps;
    int fd, rc = 0;

    *rss = 0;
    *has = false;
    fd = rfsys_pagemap_open(sysroot, pid);
    if (fd < 0)
        return -EOPNOTSUPP;
    rfsys_maps_init(&maps);
    bool ok = rfsys_read_maps(sysroot, pid, &maps) == 0;
    for (size_t i = 0; ok && rc == 0 && i < n_mappings; i++) {
        const struct rf_mapping_meta *m = &mappings[i];
        struct rfsys_mapping_sum sum;
        int r = m->validated ? rfsys_maps_resident_file(&maps, fd, m->dev_major, m->dev_minor,
                                                        m->inode, "r--s", &sum)
                             : -ENOENT;
        if (r == -EOPNOTSUPP)
            rc = r;
        else if (r < 0 || sum.n_mappings == 0 || __builtin_add_overflow(*rss, sum.rss_bytes, rss))
            ok = false;
    }
    rfsys_maps_free(&maps);
    close(fd);
    *has = ok && rc == 0;
    return rc;
}

int rf_measure_sample_mapping(const char *sysroot, const char *pid,
                              const struct rf_mapping_meta *mappings, size_t n_mappings,
                              enum rf_measure_mapping what, struct rf_residency_sample *out)
{
    uint64_t rss = 0, pss = 0, locked = 0;
    bool has = false;
    int rc = -EOPNOTSUPP;

    out->has_mapping = out->has_mapping_pss = out->has_mapping_locked = false;
    out->mapping_rss_bytes = out->mapping_pss_bytes = out->mapping_locked_bytes = 0;
    out->mapping_source = NULL;
    out->mapping_not_read = what == RF_MEASURE_MAPPING_NONE;
    if (n_mappings == 0 || out->mapping_not_read)
        return 0;
    if (what == RF_MEASURE_MAPPING_RSS)
        rc = mapping_from_pagemap(sysroot, pid, mappings, n_mappings, &rss, &has);
    if (has) {
        out->has_mapping = true;
        out->mapping_rss_bytes = rss;
        out->mapping_source = "pagemap_scan";
    } else if (rc == -EOPNOTSUPP &&
               mapping_from_smaps(sysroot, pid, mappings, n_mappings, &rss, &pss, &locked)) {
        out->has_mapping = out->has_mapping_pss = out->has_mapping_locked = true;
        out->mapping_locked_bytes = locked;
        out->mapping_rss_bytes = rss;
        out->mapping_pss_bytes = pss;
        out->mapping_source = "smaps";
    }
    return 0;
}

int rf_measure_sample(const char *sysroot, const char *pid, const struct rf_mapping_meta *mappings,
                      size_t n_mappings, enum rf_measure_mapping what, const char *label,
                      struct rf_residency_sample *out, struct rfsys_cgroup_memory *cg)
{
    struct rfsys_cgroup_memory cgm;
    struct rfsys_status st;

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
    rf_measure_sample_mapping(sysroot, pid, mappings, n_mappings, what, out);
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
    } /* else cg's figures are zero; version, dir and error say what failed */
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

void rf_measure_fill_ledger(struct rf_ledger *l, const struct rf_inventory *inv,
                            enum rf_access_basis basis, const struct rf_residency_sample *s,
                            const struct rfsys_cgroup_memory *cg, const char *pid)
{
    char src[RF_LEDGER_SOURCE_MAX];
    char dev[96] = "the model file";
    char unread[RF_LEDGER_NOTE_MAX] = "the cgroup's usage file is not readable";

    if (inv) {
        rf_ledger_set(l, RF_LEDGER_FILE_BACKED_LOGICAL, inv->totals.file_backed_logical_bytes,
                      RF_PROV_NATIVE_LOGICAL, "GGUF tensor table (gguf_get_tensor_size)",
                      "payload bytes of tensors inside the validated file mapping, repacked "
                      "weights included (their file pages stay mapped); not residency");
        if (basis == RF_ACCESS_BASIS_GRAPH_PROBE)
            rf_ledger_set(l, RF_LEDGER_ANONYMOUS_WEIGHTS, inv->totals.anonymous_logical_bytes,
                          RF_PROV_NATIVE_LOGICAL,
                          "GGUF tensor table + graph probe (cb_eval source data pointers)",
                          "GGUF payload bytes of weights the graph reads from an anonymous "
                          "(CPU_REPACK) copy; the copy's own size may differ");
        else if (basis == RF_ACCESS_BASIS_PLACEMENT)
            rf_ledger_set(l, RF_LEDGER_ANONYMOUS_WEIGHTS, inv->totals.anonymous_logical_bytes,
                          RF_PROV_NATIVE_LOGICAL,
                          "GGUF tensor table + tensor placement (data pointers of llama.cpp's "
                          "model tensors)",
                          "GGUF payload bytes of weights the model holds as an anonymous "
                          "(CPU_REPACK) copy, which every graph reads instead of the file; the "
                          "copy's own size may differ");
        else
            rf_ledger_set_unknown(l, RF_LEDGER_ANONYMOUS_WEIGHTS, "graph probe or tensor placement",
                                  "the weights were not classified: which weights are repacked "
                                  "is unknown");
        if (inv->n_mappings > 0)
            snprintf(dev, sizeof(dev), "dev %02x:%02x inode %llu", inv->mappings[0].dev_major,
                     inv->mappings[0].dev_minor, (unsigned long long)inv->mappings[0].inode);
    }
    if (s->mapping_source && strcmp(s->mapping_source, "pagemap_scan") == 0)
        snprintf(src, sizeof(src),
                 "/proc/%s/pagemap PAGEMAP_SCAN present pages of r--s mappings of %s", pid, dev);
    else
        snprintf(src, sizeof(src), "/proc/%s/smaps Rss of r--s mappings of %s", pid, dev);
    measured(l, RF_LEDGER_FILE_BACKED_RESIDENT, s->has_mapping, s->mapping_rss_bytes, src,
             "resident pages of the model mapping in this process; not page cache, not cgroup",
             s->mapping_not_read ? "this sample did not read the mapping"
                                 : "the model mapping was not found in smaps");
    snprintf(src, sizeof(src), "/proc/%s/smaps Pss of r--s mappings of %s", pid, dev);
    measured(l, RF_LEDGER_MAPPING_PSS, s->has_mapping_pss, s->mapping_pss_bytes, src,
             "proportional share: lower than Rss when other processes map the same pages",
             s->has_mapping        ? "this sample did not read smaps (only PAGEMAP_SCAN: no Pss)"
             : s->mapping_not_read ? "this sample did not read the mapping"
                                   : "the model mapping was not found in smaps");
    snprintf(src, sizeof(src), "/proc/%s/status VmRSS", pid);
    measured(l, RF_LEDGER_PROCESS_RSS, s->has_process_rss, s->process_rss_bytes, src,
             "whole process at this sample: mapping pages, repacked copies, runtime, and the "
             "KV cache and scratch of any context alive then",
             "VmRSS missing from status");
    snprintf(src, sizeof(src), "/proc/%s/status VmHWM", pid);
    measured(l, RF_LEDGER_PROCESS_RSS_PEAK, s->has_process_rss_peak, s->process_rss_peak_bytes, src,
             "process RSS high-water mark since start", "VmHWM missing from status");
    if (cg && cg->error)
        snprintf(unread, sizeof(unread),
                 "the cgroup memory controller exists (%s) but its figures could not be read: "
                 "%s: %s",
                 cg->dir, cg->error_source, rf_cgroup_error_text(cg->error));
    measured(l, RF_LEDGER_CGROUP_CURRENT, s->has_cgroup_current, s->cgroup_current_bytes,
             cg && cg->current_source[0] ? cg->current_source : "cgroup memory controller",
             cg && cg->version == RFSYS_CGROUP_V1
                 ? "charged to the cgroup: page cache, kernel memory and other processes "
                   "included; v1 usage_in_bytes is approximate (the kernel documents it as fuzzy)"
                 : "charged to the cgroup: includes page cache, kernel memory and other processes",
             cg && cg->version == RFSYS_CGROUP_NONE ? "no cgroup memory controller found" : unread);
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
