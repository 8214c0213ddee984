// The tensors llama.cpp's model holds, from llama_internal_get_tensor_map
// (C++, declared in the internal src/llama-model.h of the pinned build,
// exported by libllama), handed to C one at a time. forge classifies the
// weights by these tensors' data pointers without decoding (model.c).
#include "forge_internal.h"

#include <cerrno>

#include "llama-model.h"

extern "C" int forge_model_tensor_map(const struct llama_model *model,
                                      void (*fn)(void *ud, const struct ggml_tensor *t), void *ud)
{
    try {
        for (const auto &it : llama_internal_get_tensor_map(model))
            if (it.second)
                fn(ud, it.second);
        return 0;
    } catch (...) {
        return -EIO;
    }
}
