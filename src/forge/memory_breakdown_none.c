/* Fallback when llama.cpp's internal llama-ext.h is not available: no breakdown. */
#include "forge_internal.h"

#include <errno.h>

int forge_memory_breakdown(const struct llama_context *ctx, uint64_t *context_bytes,
                           uint64_t *compute_bytes)
{
    (void)ctx;
    (void)context_bytes;
    (void)compute_bytes;
    return -ENOSYS;
}
