/*
 * The load's mapping, for the release during the load (load_release.c):
 * the model file's r--s VMAs before the load, and, at its first progress
 * callback, the one the load added (forge_internal.h: forge_file_vma_starts,
 * forge_bind_new_mapping). One read of /proc/self/maps each.
 */
#include "forge_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>

#include "ramforge/sys/sys.h"

/* Whether VMA v is an r--s mapping of m's file (dev+inode of its header's stat). */
static bool file_vma(const struct forge_model *m, const struct rfsys_mapping *v)
{
    return strcmp(v->perms, "r--s") == 0 && v->inode == (uint64_t)m->file_st.st_ino &&
           v->dev_major == major(m->file_st.st_dev) && v->dev_minor == minor(m->file_st.st_dev);
}

int forge_file_vma_starts(const struct forge_model *m, uint64_t **starts, size_t *n)
{
    struct rfsys_maps maps;
    int rc;

    rfsys_maps_init(&maps);
    rc = rfsys_read_maps(NULL, "self", &maps);
    *starts = NULL;
    *n = 0;
    if (rc == 0 && maps.n) {
        *starts = calloc(maps.n, sizeof(**starts));
        if (!*starts)
            rc = -ENOMEM;
    }
    for (size_t i = 0; rc == 0 && i < maps.n; i++)
        if (file_vma(m, &maps.v[i]))
            (*starts)[(*n)++] = maps.v[i].start_addr;
    rfsys_maps_free(&maps);
    return rc;
}

static bool was_before(const uint64_t *before, size_t n_before, uint64_t start)
{
    for (size_t i = 0; i < n_before; i++)
        if (before[i] == start)
            return true;
    return false;
}

bool forge_bind_new_mapping(struct forge_model *m, const uint64_t *before, size_t n_before)
{
    struct rf_mapping_meta *mm = &m->mapping;
    uint64_t start = 0, end = 0;
    size_t found = 0;
    struct rfsys_maps maps;

    rfsys_maps_init(&maps);
    if (rfsys_read_maps(NULL, "self", &maps) < 0) {
        rfsys_maps_free(&maps);
        return false;
    }
    for (size_t i = 0; i < maps.n; i++) {
        const struct rfsys_mapping *v = &maps.v[i];

        if (!file_vma(m, v))
            continue;
        if (found && v->start_addr == end && v->offset_bytes == end - start) {
            end = v->end_addr; /* a continuation of the one found */
        } else if (v->offset_bytes == 0 && !was_before(before, n_before, v->start_addr)) {
            found++;
            start = v->start_addr;
            end = v->end_addr;
        }
    }
    rfsys_maps_free(&maps);
    if (found != 1)
        return false;
    snprintf(mm->path, sizeof(mm->path), "%s", m->info.path);
    mm->file_size_bytes = (uint64_t)m->file_st.st_size;
    mm->dev_major = major(m->file_st.st_dev);
    mm->dev_minor = minor(m->file_st.st_dev);
    mm->inode = (uint64_t)m->file_st.st_ino;
    mm->map_offset_bytes = 0;
    mm->map_length_bytes = end - start;
    mm->validated = true;
    m->map_start = (uintptr_t)start;
    m->map_end = (uintptr_t)end;
    return true;
}
