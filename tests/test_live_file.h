/*
 * Shared by the live tests of sys and session: a temporary file of n_pages
 * kernel pages in the current directory, unlinked at once, mapped
 * PROT_READ, MAP_SHARED and populated (an r--s mapping of a real file).
 */
#ifndef RAMFORGE_TEST_LIVE_FILE_H
#define RAMFORGE_TEST_LIVE_FILE_H

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Returns the mapping (munmap, then close *fd), or MAP_FAILED; *st is the file's fstat. */
static inline void *live_file_map(uint64_t n_pages, int *fd, struct stat *st)
{
    const uint64_t bytes = n_pages * (uint64_t)sysconf(_SC_PAGESIZE);
    char path[] = "rf-live-XXXXXX";

    *fd = mkstemp(path);
    if (*fd < 0)
        return MAP_FAILED;
    unlink(path);
    if (ftruncate(*fd, (off_t)bytes) != 0 || fstat(*fd, st) != 0) {
        close(*fd);
        return MAP_FAILED;
    }
    void *p = mmap(NULL, bytes, PROT_READ, MAP_SHARED | MAP_POPULATE, *fd, 0);
    if (p == MAP_FAILED)
        close(*fd);
    return p;
}

#endif
