/*
 * llama-server's host prompt cache in the ledger (docs/EXEC.md, "The prompt
 * cache"): the shim hands the engine the size of every sequence state the
 * program saves (llama_state_seq_get_data_ext) or restores
 * (llama_state_seq_set_data_ext) on a managed model's context; the server's
 * own rule under its --cache-ram (ramforge/core/prompt_cache.h) gives the
 * cache's bytes, an estimate, since its evictions cross no libllama call.
 * At each operation's end the figure goes into the ledger as PromptCache,
 * beside its bound, with what it explains of the process's anonymous memory:
 * RssAnon's growth since the first save (the reconciliation). While the last
 * operation's admission is over the hard limit, the cache stops growing:
 * llama-server is given a state size one byte over its --cache-ram, which its
 * server_prompt_cache::alloc skips ("exceeds cache size limit") without
 * allocating; the prompt is simply not cached, the answer the same.
 */
#include "preload_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "ramforge/core/prom.h"
#include "ramforge/session/metrics.h"
#include "ramforge/session/session_ext.h"
#include "ramforge/sys/sys.h"

#define MIB ((uint64_t)1024 * 1024)

/* RssAnon now (/proc/self/status); false when it cannot be read. */
static bool rss_anon(uint64_t *out)
{
    struct rfsys_status st;
    if (rfsys_read_status(NULL, "self", &st) < 0 || !st.has_rss_anon)
        return false;
    *out = st.rss_anon_bytes;
    return true;
}

void exec_prompt_state(struct exec_model *m, uint64_t bytes, bool saved, bool partial)
{
    const struct exec_config *c = &exec_engine.cfg;
    if (!bytes)
        return; /* a failed call: nothing saved or restored */
    if (partial) {
        m->partial_states++; /* a checkpoint's part (SWA, recurrent): not the prompt cache */
        return;
    }
    if (!m->cache_seen) {
        m->cache_seen = true;
        rf_prompt_cache_init(&m->cache, c->has_cache_ram, c->cache_ram_mib * MIB);
        uint64_t anon;
        /* the first entry is in RssAnon already (written by the call): the base is before it */
        m->has_anon_base = saved && rss_anon(&anon);
        m->anon_base_bytes = m->has_anon_base && anon > bytes ? anon - bytes : 0;
    }
    if (saved)
        rf_prompt_cache_save(&m->cache, bytes);
    else
        rf_prompt_cache_restore(&m->cache, bytes);
}

uint64_t exec_prompt_state_size(struct exec_model *m, uint64_t size, bool partial)
{
    const struct exec_config *c = &exec_engine.cfg;
    /* a checkpoint (partial) is not the cache's entry; without a bound nothing is skipped */
    if (partial || !c->cache_stop || !c->has_cache_ram || !c->cache_ram_mib)
        return size;
    if (!m->room_short) {
        m->cache_stopped = false;
        return size;
    }
    m->cache_stops++;
    if (!m->cache_stopped)
        exec_engine.host->say("exec: warning: %s: an operation is over the hard limit: "
                              "llama-server's prompt cache stops growing (its saves skipped, "
                              "the answers the same) until one fits again (--keep-cache-ram: "
                              "not stopped)",
                              m->path);
    m->cache_stopped = true;
    return c->cache_ram_mib * MIB + 1; /* over llama-server's bound: the entry is skipped */
}

void exec_prompt_push(struct exec_model *m)
{
    struct rf_ledger_entry e = {
        .category = RF_LEDGER_PROMPT_CACHE, .has_value = true, .provenance = RF_PROV_ESTIMATED};
    char bound[64], recon[160] = "RssAnon could not be read: not reconciled";
    uint64_t anon = 0;

    pthread_mutex_lock(&exec_engine.table_mu);
    bool seen = m->cache_seen, has_base = m->has_anon_base;
    struct rf_prompt_cache pc = m->cache;
    uint64_t base = m->anon_base_bytes;
    pthread_mutex_unlock(&exec_engine.table_mu);
    if (!seen)
        return; /* the ledger's default: nothing observed */
    e.value_bytes = pc.bytes;
    if (pc.has_limit)
        snprintf(bound, sizeof(bound), "--cache-ram %" PRIu64 " MiB",
                 (uint64_t)(pc.limit_bytes / MIB));
    else
        snprintf(bound, sizeof(bound), "no --cache-ram known (unlimited)");
    snprintf(e.source, sizeof(e.source),
             "the sequence states the program saved through llama_state_seq_get_data_ext "
             "(%" PRIu64 " saves, %" PRIu64 " restores) under llama-server's rule, %s",
             pc.saves, pc.restores, bound);
    if (has_base && rss_anon(&anon)) {
        uint64_t grown = anon > base ? anon - base : 0;
        snprintf(recon, sizeof(recon),
                 "RssAnon grew by %" PRIu64 " bytes since before the first save (%" PRIu64
                 "%% of it explained; llama-server's own growth included)",
                 grown, grown ? pc.bytes * 100 / grown : 0);
    }
    snprintf(e.note, sizeof(e.note),
             "llama-server's host prompt cache, heap memory: %" PRIu64 " entries evicted, %" PRIu64
             " larger than the bound skipped, %" PRIu64 " restored into a slot; a prompt a newer "
             "one contains is dropped unseen (an upper bound); %s",
             pc.evicted, pc.skipped, pc.taken, recon);
    rf_session_set_prompt_cache(m->s, &e);
}

void exec_prompt_families(struct exec_model *m, struct rf_prom *p, const char *canon)
{
    pthread_mutex_lock(&exec_engine.table_mu);
    bool seen = m->cache_seen;
    struct rf_prompt_cache pc = m->cache;
    uint64_t partial = m->partial_states, stops = m->cache_stops;
    pthread_mutex_unlock(&exec_engine.table_mu);
    const struct {
        const char *name, *type, *help;
        double v;
        bool has;
    } fam[] = {
        {"ramforge_exec_prompt_cache_limit_bytes", "gauge",
         "The prompt cache's bound (llama-server's --cache-ram); absent: none known.",
         (double)pc.limit_bytes, seen && pc.has_limit},
        {"ramforge_exec_prompt_cache_saves_total", "counter",
         "Sequence states the program saved (llama_state_seq_get_data_ext).", (double)pc.saves,
         true},
        {"ramforge_exec_prompt_cache_restores_total", "counter",
         "Sequence states the program restored (llama_state_seq_set_data_ext).",
         (double)pc.restores, true},
        {"ramforge_exec_prompt_cache_evictions_total", "counter",
         "Entries llama-server's rule evicted to fit its bound.", (double)pc.evicted, true},
        {"ramforge_exec_prompt_cache_stops_total", "counter",
         "Saves skipped while an operation was over the hard limit (the cache's growth "
         "stopped).",
         (double)stops, true},
        {"ramforge_exec_partial_states_total", "counter",
         "Partial sequence states (checkpoints) saved or restored: not counted in the cache.",
         (double)partial, true},
    };
    for (size_t i = 0; i < sizeof(fam) / sizeof(fam[0]); i++) {
        if (!fam[i].has)
            continue;
        rf_prom_family(p, fam[i].name, fam[i].type, fam[i].help);
        rf_prom_sample(p, fam[i].name);
        rf_metrics_model_labels(p, canon);
        rf_prom_double(p, fam[i].v);
    }
}
