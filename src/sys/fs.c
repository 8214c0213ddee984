/*
 * The filesystem type of an open file (fstatfs f_type), the key of the
 * table in core/fs_profile.c.
 */
#include "ramforge/sys/pages.h"

#include <errno.h>
#include <sys/vfs.h>

int rfsys_fs_magic(int fd, uint64_t *magic)
{
    struct statfs sfs;

    if (!magic)
        return -EINVAL;
    *magic = 0;
    while (fstatfs(fd, &sfs) != 0) {
        if (errno != EINTR)
            return -errno;
    }
    /* f_type is a signed word on some ABIs: keep its 32 low bits, as the magics are */
    *magic = (uint64_t)(uint32_t)sfs.f_type;
    return 0;
}

int rfsys_fs_magic_path(const char *path, uint64_t *magic)
{
    struct statfs sfs;

    if (!magic)
        return -EINVAL;
    *magic = 0;
    if (!path)
        return -EINVAL;
    while (statfs(path, &sfs) != 0) {
        if (errno != EINTR)
            return -errno;
    }
    *magic = (uint64_t)(uint32_t)sfs.f_type;
    return 0;
}
