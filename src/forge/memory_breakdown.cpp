// KV cache and compute-buffer sizes of a context, from llama.cpp's
// llama_get_memory_breakdown (C++, declared in the internal src/llama-ext.h,
// exported by libllama), summed over buffer types and handed to C. The
// symbol is mangled C++ whose types belong to one llama.cpp build: it is
// looked up at first use (llama_build.h), only when the running libllama
// is the build ramforge was compiled against, so libramforge.so imports
// nothing of llama.cpp's C++ and another build gets -ENOEXEC and a reason.
#include "forge_internal.h"

#include <cerrno>

#include "llama-ext.h"
#include "llama_build.h"

extern "C" int forge_memory_breakdown(const struct llama_context *ctx, uint64_t *context_bytes,
                                      uint64_t *compute_bytes)
{
    const char *why = nullptr;
    auto get = reinterpret_cast<decltype(&llama_get_memory_breakdown)>(
        forge_llama_internal("_Z26llama_get_memory_breakdownPK13llama_context", &why));
    if (!get)
        return -ENOEXEC;
    try {
        llama_memory_breakdown mb = get(ctx);
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
