/*
 * The llama.cpp build ramforge was compiled against (recorded at configure
 * time from llama.cpp's prefix: share/ramforge/llama.cpp.version, and the
 * SONAME and GNU build ID of its libllama) and the guarded lookup of
 * llama.cpp's C++ internals (llama_build.h): the running libllama is found
 * by the address of a C symbol it defines, its build ID read from its
 * PT_NOTE segment, and compared once per process.
 */
#include "llama_build.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ramforge/error.h"
#include "ramforge/sys/elf_info.h"

#include "llama.h"

#ifndef RAMFORGE_LLAMA_VERSION
#define RAMFORGE_LLAMA_VERSION "unknown"
#endif
#ifndef RAMFORGE_LLAMA_SONAME
#define RAMFORGE_LLAMA_SONAME "unknown"
#endif
#ifndef RAMFORGE_LLAMA_BUILD_ID
#define RAMFORGE_LLAMA_BUILD_ID "unknown"
#endif
#ifndef RAMFORGE_LLAMA_ORIGIN
#define RAMFORGE_LLAMA_ORIGIN "unknown"
#endif

const struct forge_llama_build *forge_llama_built(void)
{
    static const struct forge_llama_build built = {
        .version = RAMFORGE_LLAMA_VERSION,
        .soname = RAMFORGE_LLAMA_SONAME,
        .build_id = RAMFORGE_LLAMA_BUILD_ID,
    };
    return &built;
}

const char *forge_llama_version(void)
{
    return RAMFORGE_LLAMA_VERSION;
}

/* The process's libllama: the object defining llama_backend_init. */
static int running_libllama(char *path, size_t path_size, char *build_id, size_t build_id_size)
{
    return rfsys_build_id_at((const void *)&llama_backend_init, path, path_size, build_id,
                             build_id_size);
}

const char *forge_llama_origin(void)
{
    return RAMFORGE_LLAMA_ORIGIN;
}

int forge_llama_loaded(char *path, size_t path_size)
{
    Dl_info info;
    if (!path_size || !dladdr((const void *)&llama_backend_init, &info) || !info.dli_fname)
        return -ENOENT;
    char *real = realpath(info.dli_fname, NULL); /* "/usr/bin/../lib/x" as /usr/lib/x */
    snprintf(path, path_size, "%s", real ? real : info.dli_fname);
    free(real);
    return 0;
}

static const char *running_version(void)
{
    const char *(*fn)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, "llama_version");
    return fn ? fn() : NULL;
}

int forge_llama_check(const struct forge_llama_build *built, const struct forge_llama_probe *probe,
                      char why[FORGE_LLAMA_WHY_MAX])
{
    char path[256] = "", id[128] = "";
    int rc = probe->running(path, sizeof(path), id, sizeof(id));
    const char *version = probe->version ? probe->version() : NULL;

    if (rc == 0 && strcmp(built->build_id, "unknown") != 0 && strcmp(id, built->build_id) == 0)
        return 0;
    /* The path last: a reason copied into a shorter buffer loses it first. */
    snprintf(why, FORGE_LLAMA_WHY_MAX,
             "llama.cpp's internal tables are not used: ramforge was built against llama.cpp %s "
             "(%s, build ID %s), this process runs llama.cpp %s (build ID %s, %s)",
             built->version, built->soname, built->build_id,
             version ? version : "of unknown version", rc == 0 ? id : "unknown",
             path[0] ? path : "libllama not found");
    return -ENOEXEC;
}

static pthread_once_t check_once = PTHREAD_ONCE_INIT;
static char check_why[FORGE_LLAMA_WHY_MAX];
static bool check_passed;

static void check_running(void)
{
    const struct forge_llama_probe probe = {running_libllama, running_version};
    check_passed = forge_llama_check(forge_llama_built(), &probe, check_why) == 0;
    if (!check_passed)
        rf_log(RF_LOG_WARN, "%s", check_why);
}

const char *forge_llama_mismatch(void)
{
    pthread_once(&check_once, check_running);
    return check_passed ? NULL : check_why;
}

void *forge_llama_internal(const char *mangled, const char **why)
{
    const char *mismatch = forge_llama_mismatch();
    if (mismatch) {
        *why = mismatch;
        return NULL;
    }
    void *sym = dlsym(RTLD_DEFAULT, mangled);
    if (!sym)
        *why = "the running libllama has no such C++ internal (another llama.cpp version)";
    return sym;
}
