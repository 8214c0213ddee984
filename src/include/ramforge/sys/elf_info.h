/*
 * ELF facts ramforge needs about a program and the libllama it runs: the
 * GNU build ID (of a loaded object, read from its PT_NOTE segment in
 * memory, or of a file on disk), and whether a program file is dynamically
 * linked and defines a given symbol (llama.cpp linked in statically).
 * Expected workload: a few calls per process (the libllama check before
 * llama.cpp's internals, `ramforge exec`'s check of PROGRAM, the preload's
 * check at the first model load); files are read with bounded preads.
 */
#ifndef RAMFORGE_ELF_INFO_H
#define RAMFORGE_ELF_INFO_H

#include <stdbool.h>
#include <stddef.h>

#define RFSYS_BUILD_ID_MAX 129 /* hex of a build ID note of up to 64 bytes, with the NUL */

/*
 * The hex of the NT_GNU_BUILD_ID note among the notes [p, end) (a PT_NOTE
 * segment) into out (size bytes, NUL-terminated). Returns whether one was
 * found (false too when out is too small).
 */
bool rfsys_build_id_note(const unsigned char *p, const unsigned char *end, char *out, size_t size);

/*
 * The loaded object (dl_iterate_phdr) whose PT_LOAD segments hold addr: its
 * file name into path (may be NULL) and its GNU build ID as hex into id.
 * Returns 0, -ENOENT (no object holds addr, or it carries no build ID
 * note; path is still filled in the second case), -EINVAL (NULL addr or
 * id).
 */
int rfsys_build_id_at(const void *addr, char *path, size_t path_size, char *id, size_t id_size);

/* What rfsys_elf_inspect found in a program file. */
struct rfsys_elf_info {
    bool dynamic;        /* has a PT_INTERP or PT_DYNAMIC segment */
    bool defines_symbol; /* .symtab or .dynsym defines the symbol asked for */
    bool has_build_id;   /* build_id holds the GNU build ID */
    char build_id[RFSYS_BUILD_ID_MAX];
    char interp[256]; /* PT_INTERP's path; "" when none */
};

/*
 * Reads the ELF file at path (64-bit, the host's byte order): its segments
 * (dynamic or static, the interpreter, the build ID) and whether its
 * symbol tables define symbol (may be NULL: not looked for). Returns 0,
 * -ENOEXEC (not an ELF file of this machine's class), -EBADMSG (a header
 * pointing outside the file), -errno of open/pread, -EINVAL, -ENOMEM.
 */
int rfsys_elf_inspect(const char *path, const char *symbol, struct rfsys_elf_info *out);

#endif
