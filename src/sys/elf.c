/*
 * ELF facts (ramforge/sys/elf_info.h): GNU build IDs of loaded objects and of
 * files, and the linking and symbols of a program file. Files are read
 * with bounded preads (a header, the program and section headers, one
 * symbol table and its string table at a time), every offset and size
 * checked against the file's size.
 */
#include "ramforge/sys/elf_info.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ELF_TABLE_MAX_BYTES (256u << 20) /* a symbol or string table above 256 MiB is refused */

bool rfsys_build_id_note(const unsigned char *p, const unsigned char *end, char *out, size_t size)
{
    while (p + sizeof(ElfW(Nhdr)) <= end) {
        const ElfW(Nhdr) *n = (const ElfW(Nhdr) *)p;
        const unsigned char *name = p + sizeof(*n);
        const unsigned char *desc = name + ((n->n_namesz + 3) & ~3u);
        if (desc > end || (size_t)(end - desc) < n->n_descsz)
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

/* dl_iterate_phdr's search for the object holding addr. */
struct note_search {
    uintptr_t addr;
    char *path, *id;
    size_t path_size, id_size;
    int rc;
};

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
    if (ns->path)
        snprintf(ns->path, ns->path_size, "%s", info->dlpi_name ? info->dlpi_name : "");
    for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        const unsigned char *p = (const unsigned char *)(info->dlpi_addr + ph->p_vaddr);
        if (ph->p_type == PT_NOTE && rfsys_build_id_note(p, p + ph->p_memsz, ns->id, ns->id_size)) {
            ns->rc = 0;
            break;
        }
    }
    return 1;
}

int rfsys_build_id_at(const void *addr, char *path, size_t path_size, char *id, size_t id_size)
{
    if (!addr || !id || !id_size)
        return -EINVAL;
    id[0] = '\0';
    if (path && path_size)
        path[0] = '\0';
    struct note_search ns = {(uintptr_t)addr, path, id, path_size, id_size, -ENOENT};
    dl_iterate_phdr(find_note, &ns);
    return ns.rc;
}

/* Reads size bytes at off of fd into a new buffer (*out, the caller frees), bounded by file_size.
 */
static int read_at(int fd, uint64_t file_size, uint64_t off, uint64_t size, void **out)
{
    *out = NULL;
    if (off > file_size || size > file_size - off || size > ELF_TABLE_MAX_BYTES)
        return -EBADMSG;
    unsigned char *buf = malloc(size ? size : 1);
    if (!buf)
        return -ENOMEM;
    size_t got = 0;
    while (got < size) {
        ssize_t n = pread(fd, buf + got, size - got, (off_t)(off + got));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            free(buf);
            return n < 0 ? -errno : -EBADMSG;
        }
        got += (size_t)n;
    }
    *out = buf;
    return 0;
}

/* Whether the symbol table sh (strings in section link) defines symbol. */
static int table_defines(int fd, uint64_t file_size, const ElfW(Shdr) * shs, size_t n_sh, size_t i,
                         const char *symbol, bool *found)
{
    const ElfW(Shdr) *sh = &shs[i];
    void *syms = NULL, *strs = NULL;
    int rc;
    if (sh->sh_link >= n_sh || sh->sh_entsize != sizeof(ElfW(Sym)))
        return -EBADMSG;
    rc = read_at(fd, file_size, sh->sh_offset, sh->sh_size, &syms);
    if (rc == 0)
        rc = read_at(fd, file_size, shs[sh->sh_link].sh_offset, shs[sh->sh_link].sh_size, &strs);
    if (rc < 0)
        goto out;
    size_t n_str = shs[sh->sh_link].sh_size, want = strlen(symbol);
    const ElfW(Sym) *s = syms;
    for (size_t k = 0; k < sh->sh_size / sizeof(*s) && !*found; k++) {
        if (s[k].st_shndx == SHN_UNDEF || s[k].st_name >= n_str || n_str - s[k].st_name <= want)
            continue;
        const char *name = (const char *)strs + s[k].st_name;
        *found = memcmp(name, symbol, want + 1) == 0;
    }
out:
    free(syms);
    free(strs);
    return rc;
}

/* The segments of the file: dynamic, interpreter, build ID. */
static int read_segments(int fd, uint64_t file_size, const ElfW(Ehdr) * eh,
                         struct rfsys_elf_info *out)
{
    void *buf = NULL;
    if (eh->e_phnum && eh->e_phentsize != sizeof(ElfW(Phdr)))
        return -EBADMSG;
    int rc = read_at(fd, file_size, eh->e_phoff, (uint64_t)eh->e_phnum * sizeof(ElfW(Phdr)), &buf);
    const ElfW(Phdr) *ph = buf;
    for (size_t i = 0; rc == 0 && i < eh->e_phnum; i++) {
        void *seg = NULL;
        if (ph[i].p_type == PT_DYNAMIC)
            out->dynamic = true;
        if (ph[i].p_type != PT_INTERP && ph[i].p_type != PT_NOTE)
            continue;
        rc = read_at(fd, file_size, ph[i].p_offset, ph[i].p_filesz, &seg);
        if (rc < 0)
            break;
        if (ph[i].p_type == PT_INTERP) {
            out->dynamic = true;
            size_t len =
                ph[i].p_filesz < sizeof(out->interp) ? ph[i].p_filesz : sizeof(out->interp) - 1;
            memcpy(out->interp, seg, len);
            out->interp[len] = '\0';
        } else if (!out->has_build_id) {
            const unsigned char *p = seg;
            out->has_build_id =
                rfsys_build_id_note(p, p + ph[i].p_filesz, out->build_id, sizeof(out->build_id));
        }
        free(seg);
    }
    free(buf);
    return rc;
}

int rfsys_elf_inspect(const char *path, const char *symbol, struct rfsys_elf_info *out)
{
    void *shbuf = NULL;
    struct stat st;
    ElfW(Ehdr) eh;
    int rc = 0;

    if (!path || !out)
        return -EINVAL;
    memset(out, 0, sizeof(*out));
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    if (fstat(fd, &st) < 0) {
        rc = -errno;
        goto out;
    }
    if (st.st_size < (off_t)sizeof(eh) || pread(fd, &eh, sizeof(eh), 0) != (ssize_t)sizeof(eh) ||
        memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64) {
        rc = -ENOEXEC;
        goto out;
    }
    rc = read_segments(fd, (uint64_t)st.st_size, &eh, out);
    if (rc < 0 || !symbol || !eh.e_shnum)
        goto out;
    if (eh.e_shentsize != sizeof(ElfW(Shdr))) {
        rc = -EBADMSG;
        goto out;
    }
    rc = read_at(fd, (uint64_t)st.st_size, eh.e_shoff, (uint64_t)eh.e_shnum * sizeof(ElfW(Shdr)),
                 &shbuf);
    const ElfW(Shdr) *sh = shbuf;
    for (size_t i = 0; rc == 0 && i < eh.e_shnum && !out->defines_symbol; i++)
        if (sh[i].sh_type == SHT_SYMTAB || sh[i].sh_type == SHT_DYNSYM)
            rc = table_defines(fd, (uint64_t)st.st_size, sh, eh.e_shnum, i, symbol,
                               &out->defines_symbol);
out:
    free(shbuf);
    close(fd);
    return rc;
}
