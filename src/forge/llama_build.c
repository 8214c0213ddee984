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
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ramforge/error.h"

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

/* The loaded object that holds addr, and its GNU build ID as hex. */
struct note_search {
    uintptr_t addr;
    char *build_id;
    size_t size;
    int rc;
};

/* Hex of the NT_GNU_BUILD_ID note in the PT_NOTE segment [p, end); false: none. */
static bool build_id_note(const unsigned char *p, const unsigned char *end, char *out, size_t size)
{
    while (p + sizeof(ElfW(Nhdr)) <= end) {
        const ElfW(Nhdr) *n = (const ElfW(Nhdr) *)p;
        const unsigned char *name = p + sizeof(*n);
        const unsigned char *desc = name + ((n->n_namesz + 3) & ~3u);
        if (desc + n->n_descsz > end)
            return false;
        if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 && memcmp(name, "GNU", 4) == 0 &&
            n->n_descsz * 2 < size) {
            for (size_t i = 0; i < n->n_descsz; i++)
                snprintf(out + 2 * i, 3, "%02x", desc[i]);
            return true;
        }
        p = desc + ((n->n_descsz + 3) & ~3u);
    }
    return false;
}

static int find_note(struct dl_phdr_info *info, size_t size, void *ud)
{
    struct note_search *ns = ud;
    bool holds = false;
    (void)size;
    for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t start = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && ns->addr >= start && ns->addr < start + ph->p_memsz)
            holds = true;
    }
    if (!holds)
        return 0;
    ns->rc = -ENOENT;
    for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        const unsigned char *p = (const unsigned char *)(info->dlpi_addr + ph->p_vaddr);
        if (ph->p_type == PT_NOTE && build_id_note(p, p + ph->p_memsz, ns->build_id, ns->size)) {
            ns->rc = 0;
            break;
        }
    }
    return 1;
}

/* The process's libllama: the object defining llama_backend_init. */
static int running_libllama(char *path, size_t path_size, char *build_id, size_t build_id_size)
{
    Dl_info di;
    struct note_search ns = {(uintptr_t)&llama_backend_init, build_id, build_id_size, -ENOENT};
    if (!dladdr((void *)&llama_backend_init, &di) || !di.dli_fname)
        return -ENOENT;
    snprintf(path, path_size, "%s", di.dli_fname);
    dl_iterate_phdr(find_note, &ns);
    return ns.rc;
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
