// KV cache and compute-buffer sizes of a context, from llama.cpp's
// llama_get_memory_breakdown (C++, declared in the internal src/llama-ext.h,
// exported by libllama), summed over buffer types and handed to C.
#include "forge_internal.h"

#include <cerrno>

#include "llama-ext.h"

extern "C" int forge_memory_breakdown(const struct llama_context *ctx, uint64_t *context_bytes,
                                      uint64_t *compute_bytes)
{
    try {
        llama_memory_breakdown mb = llama_get_memory_breakdown(ctx);
        uint64_t kv = 0, compute = 0;
        for (const auto &it : mb) {
            kv += it.second.context;
            compute += it.second.compute;
        }
        *context_bytes = kv;
        *compute_bytes = compute;
        return 0;
    } catch (...) {
        return -EIO;
    }
}
