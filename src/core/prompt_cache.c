/*
 * The model of llama-server's host prompt cache (ramforge/core/prompt_cache.h):
 * a ring of the live entries' sizes, O(1) per save but the evictions it makes.
 */
#include "ramforge/core/prompt_cache.h"

#include <string.h>

#define MIB (1024ull * 1024ull)

void rf_prompt_cache_init(struct rf_prompt_cache *pc, bool has_limit, uint64_t limit_bytes)
{
    memset(pc, 0, sizeof(*pc));
    pc->has_limit = has_limit;
    pc->limit_bytes = has_limit ? limit_bytes : 0;
}

/* The oldest entry out of the ring; its bytes out of the sum. */
static void drop_oldest(struct rf_prompt_cache *pc)
{
    pc->bytes -= pc->sizes[pc->first];
    pc->first = (pc->first + 1) % RF_PROMPT_CACHE_MAX_ENTRIES;
    pc->n--;
}

static uint64_t add_sat(uint64_t a, uint64_t b)
{
    uint64_t s;
    return __builtin_add_overflow(a, b, &s) ? UINT64_MAX : s;
}

void rf_prompt_cache_save(struct rf_prompt_cache *pc, uint64_t size)
{
    pc->saves++;
    pc->saved_bytes = add_sat(pc->saved_bytes, size);
    if (pc->has_limit && size > pc->limit_bytes) {
        pc->skipped++;
        return;
    }
    while (pc->n && pc->has_limit && pc->bytes + size > pc->limit_bytes) {
        drop_oldest(pc);
        pc->evicted++;
    }
    if (pc->n == RF_PROMPT_CACHE_MAX_ENTRIES) {
        drop_oldest(pc);
        pc->forgotten++;
    }
    pc->sizes[(pc->first + pc->n++) % RF_PROMPT_CACHE_MAX_ENTRIES] = size;
    pc->bytes = add_sat(pc->bytes, size); /* bounded by the limit, or by the ring */
}

void rf_prompt_cache_restore(struct rf_prompt_cache *pc, uint64_t size)
{
    pc->restores++;
    pc->restored_bytes = add_sat(pc->restored_bytes, size);
    /* the newest live entry of that size leaves the ring, the newer ones close the gap */
    for (uint32_t i = pc->n; i-- > 0;) {
        if (pc->sizes[(pc->first + i) % RF_PROMPT_CACHE_MAX_ENTRIES] != size)
            continue;
        for (uint32_t k = i; k + 1 < pc->n; k++)
            pc->sizes[(pc->first + k) % RF_PROMPT_CACHE_MAX_ENTRIES] =
                pc->sizes[(pc->first + k + 1) % RF_PROMPT_CACHE_MAX_ENTRIES];
        pc->n--;
        pc->bytes -= size;
        pc->taken++;
        return;
    }
}

uint64_t rf_prompt_cache_fit_mib(uint64_t room_bytes, uint64_t margin_bytes, uint64_t max_mib)
{
    uint64_t mib = room_bytes > margin_bytes ? (room_bytes - margin_bytes) / MIB : 0;
    return mib < max_mib ? mib : max_mib;
}
