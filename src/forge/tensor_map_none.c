/* Builds without llama.cpp's internal llama-model.h: no tensor map. */
#include "forge_internal.h"

#include <errno.h>

int forge_model_tensor_map(const struct llama_model *model,
                           void (*fn)(void *ud, const struct ggml_tensor *t), void *ud)
{
    (void)model;
    (void)fn;
    (void)ud;
    return -ENOSYS;
}
