/*
 * Private to src/forge (and its unit test): how the running libllama is
 * checked against the llama.cpp build ramforge was compiled against before
 * a C++ internal of llama.cpp (llama_get_memory_breakdown,
 * llama_internal_get_tensor_map) is called. Those symbols are mangled C++
 * whose types change between builds, so libramforge.so does not import
 * them: they are looked up at first use (dlsym), and only when the running
 * libllama carries the recorded GNU build ID. Otherwise the caller gets one
 * line naming both builds and the figure becomes unknown with that reason.
 */
#ifndef RAMFORGE_FORGE_LLAMA_BUILD_H
#define RAMFORGE_FORGE_LLAMA_BUILD_H

#include <stddef.h>

#include "ramforge/forge/forge.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FORGE_LLAMA_WHY_MAX 512 /* the mismatch line, with the NUL */

/* What the check asks of the process; tests supply fakes. */
struct forge_llama_probe {
    /* The running libllama: its file and GNU build ID (hex) into the buffers;
       0 or a negative errno (-ENOENT: no build ID note). */
    int (*running)(char *path, size_t path_size, char *build_id, size_t build_id_size);
    /* llama_version() of the running libllama, or NULL where it has none. */
    const char *(*version)(void);
};

/*
 * Compares the running libllama (probe) with the recorded build (built):
 * 0 when their build IDs are equal; -ENOEXEC when they differ or either
 * is unknown, with why holding one line naming both builds.
 */
int forge_llama_check(const struct forge_llama_build *built, const struct forge_llama_probe *probe,
                      char why[FORGE_LLAMA_WHY_MAX]);

/*
 * The C++ internal `mangled` of the running libllama (dlsym), after the
 * check above has passed once for the process; NULL otherwise, with *why
 * the static line saying why (the check's, or that the build has no such
 * symbol).
 */
void *forge_llama_internal(const char *mangled, const char **why);

#ifdef __cplusplus
}
#endif

#endif
