// The tensors llama.cpp's model holds, from llama_internal_get_tensor_map
// (C++, declared in the internal src/llama-model.h of the pinned build,
// exported by libllama), handed to C one at a time. forge classifies the
// weights by these tensors' data pointers without decoding (model.c). The
// mangled symbol is looked up at first use, only when the running libllama
// is the build ramforge was compiled against (llama_build.h): another build
// gets -ENOEXEC (forge then classifies the weights with the graph probe).
#include "forge_internal.h"

#include <cerrno>

#include "llama-model.h"
#include "llama_build.h"

extern "C" int forge_model_tensor_map(const struct llama_model *model,
                                      void (*fn)(void *ud, const struct ggml_tensor *t), void *ud)
{
    const char *why = nullptr;
    auto get = reinterpret_cast<decltype(&llama_internal_get_tensor_map)>(
        forge_llama_internal("_Z29llama_internal_get_tensor_mapB5cxx11PK11llama_model", &why));
    if (!get)
        return -ENOEXEC;
    try {
        for (const auto &it : get(model))
            if (it.second)
                fn(ud, it.second);
        return 0;
    } catch (...) {
        return -EIO;
    }
}
