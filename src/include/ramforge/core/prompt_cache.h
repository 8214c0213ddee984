/*
 * A model of llama-server's host prompt cache (server_prompt_cache in the
 * pinned tools/server) built from what crosses libllama: the size of each
 * sequence state the program saves (llama_state_seq_get_data_ext) and
 * restores. The server's own rule, applied to those sizes: an entry larger
 * than the limit (--cache-ram) is skipped; otherwise the oldest entries are
 * evicted until the new one fits; an entry restored into a slot leaves the
 * cache (server_prompt_cache::load erases it). Evictions cross no libllama
 * call, so the model is what the figure rests on (estimated); a cached
 * prompt the server drops because a newer one contains it is not seen: the
 * model's bytes are then an upper bound. Plain state, no lock, no allocation.
 */
#ifndef RAMFORGE_PROMPT_CACHE_H
#define RAMFORGE_PROMPT_CACHE_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RF_PROMPT_CACHE_MAX_ENTRIES 1024 /* entries the model keeps; older ones are forgotten */

struct rf_prompt_cache {
    bool has_limit;                              /* false: no limit (--cache-ram -1) */
    uint64_t limit_bytes;                        /* --cache-ram in bytes; 0: the cache is off */
    uint64_t sizes[RF_PROMPT_CACHE_MAX_ENTRIES]; /* the live entries' sizes, bytes; a ring */
    uint32_t first, n;                           /* the oldest entry's index, the count */
    uint64_t bytes;                              /* the live entries' sum, bytes */
    uint64_t saves, restores;                    /* states saved, restored */
    uint64_t saved_bytes, restored_bytes;        /* their sums, bytes (saturating) */
    uint64_t evicted, skipped;                   /* entries evicted, saves larger than the limit */
    uint64_t taken;     /* restores that took a live entry of their size out of the cache */
    uint64_t forgotten; /* entries dropped from the model's ring while still counted by the
                           server (its bytes then undercount: more than MAX_ENTRIES entries) */
};

/* An empty cache of the limit (has_limit false: unlimited; 0 bytes: off). */
void rf_prompt_cache_init(struct rf_prompt_cache *pc, bool has_limit, uint64_t limit_bytes);

/* A state of size bytes saved: the server's rule applied (skip, evict the oldest, add). */
void rf_prompt_cache_save(struct rf_prompt_cache *pc, uint64_t size);

/*
 * A state of size bytes restored into a context: counted, and the newest
 * live entry of that size taken out, as the server erases the entry it
 * loads (which one of equal sizes does not change the bytes; none of that
 * size: a state not from the cache, only counted).
 */
void rf_prompt_cache_restore(struct rf_prompt_cache *pc, uint64_t size);

/*
 * The --cache-ram (MiB) that fits room_bytes, the room under the binding
 * limit after the weights, the KV cache and everything else measured,
 * less margin_bytes: 0 when nothing is left (the cache off). Never above
 * max_mib (llama-server's default, 8192).
 */
uint64_t rf_prompt_cache_fit_mib(uint64_t room_bytes, uint64_t margin_bytes, uint64_t max_mib);

#ifdef __cplusplus
}
#endif

#endif
