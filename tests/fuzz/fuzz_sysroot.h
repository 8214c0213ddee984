/*
 * A private sysroot for the fuzz harnesses of the /proc and /sys parsers:
 * the parsers read SYSROOT/proc/... and SYSROOT/sys/..., so a harness
 * writes the fuzz input into files there and calls the public reader, the
 * same path the CLI takes. One directory per process, on tmpfs when
 * /dev/shm is writable, removed at exit.
 */
#ifndef RAMFORGE_FUZZ_SYSROOT_H
#define RAMFORGE_FUZZ_SYSROOT_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char fuzz_root[64];

static inline int fuzz_rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path) < 0 ? -1 : 0;
}

static inline void fuzz_sysroot_remove(void)
{
    if (fuzz_root[0])
        nftw(fuzz_root, fuzz_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* The sysroot directory, created on the first call; aborts when it cannot be. */
static inline const char *fuzz_sysroot(void)
{
    if (!fuzz_root[0]) {
        const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(fuzz_root, sizeof(fuzz_root), "%s/rf-fuzz-XXXXXX", base);
        if (!mkdtemp(fuzz_root)) {
            perror("fuzz: mkdtemp");
            abort();
        }
        atexit(fuzz_sysroot_remove);
    }
    return fuzz_root;
}

/* Creates every directory of rel (relative to the sysroot) up to its last '/'; false on failure. */
static inline bool fuzz_mkdirs(const char *rel)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", fuzz_sysroot(), rel);
    for (char *p = path + strlen(fuzz_root) + 1; (p = strchr(p, '/')) != NULL; p++) {
        *p = '\0';
        if (mkdir(path, 0755) < 0 && errno != EEXIST)
            return false;
        *p = '/';
    }
    return true;
}

/*
 * Writes data[0 .. len) to SYSROOT/rel (rel has no leading '/'), replacing
 * it; false when rel cannot be a file there (a component is a file, rel a
 * directory, a name too long). Other failures (a full tmpfs) abort: the
 * harness is broken.
 */
static inline bool fuzz_write(const char *rel, const void *data, size_t len)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", fuzz_sysroot(), rel);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 && errno == ENOENT && fuzz_mkdirs(rel))
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 && (errno == ENOENT || errno == ENOTDIR || errno == EISDIR || errno == EEXIST ||
                   errno == ENAMETOOLONG))
        return false;
    if (fd < 0) {
        perror("fuzz: open");
        abort();
    }
    const char *p = data;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            perror("fuzz: write");
            abort();
        }
        p += n;
        len -= (size_t)n;
    }
    close(fd);
    return true;
}

/* Empties the sysroot (keeps the directory itself). */
static inline void fuzz_clear(void)
{
    fuzz_sysroot_remove();
    if (mkdir(fuzz_root, 0700) < 0 && errno != EEXIST) {
        perror("fuzz: mkdir");
        abort();
    }
}

/*
 * Writes a tree of files given as one text into the emptied sysroot:
 *
 *     @@ proc/self/cgroup
 *     0::/a
 *     @@ sys/fs/cgroup/a/memory.max
 *     max
 *
 * Each "@@ PATH\n" line starts a file (PATH relative, at most 400 bytes,
 * without a ".." component, an empty component or a leading '/': others
 * are skipped with their content; "@@ DIR/" makes an empty directory);
 * its content runs to the next line
 * starting with "@@ " (the '\n' before it belongs to the content). Text
 * before the first header is ignored. The seeds in tests/fuzz/corpus are
 * fixture trees of tests/data/sys in this form (tests/fuzz/make_seeds.py).
 */
static inline const char *fuzz_tree(const char *data, size_t size)
{
    size_t i = 0;

    fuzz_sysroot();
    fuzz_clear();
    while (i < size) {
        const char *hdr = NULL;
        /* the next header at i (start of data or after '\n') */
        for (; i + 3 <= size; i++) {
            if ((i == 0 || data[i - 1] == '\n') && memcmp(data + i, "@@ ", 3) == 0) {
                hdr = data + i + 3;
                break;
            }
        }
        if (!hdr)
            break;
        const char *eol = memchr(hdr, '\n', size - (size_t)(hdr - data));
        if (!eol)
            break;
        size_t plen = (size_t)(eol - hdr);
        const char *body = eol + 1;
        size_t j = (size_t)(body - data);
        while (j < size &&
               !(data[j - 1] == '\n' && j + 3 <= size && memcmp(data + j, "@@ ", 3) == 0))
            j++;
        i = j;
        char rel[401];
        if (plen == 0 || plen >= sizeof(rel) || memchr(hdr, '\0', plen) || hdr[0] == '/')
            continue;
        memcpy(rel, hdr, plen);
        rel[plen] = '\0';
        if (strstr(rel, "//") || !strcmp(rel, "..") || !strncmp(rel, "../", 3) ||
            strstr(rel, "/../") || (plen >= 3 && !strcmp(rel + plen - 3, "/..")))
            continue;
        if (rel[plen - 1] == '/') {
            (void)fuzz_mkdirs(rel); /* "@@ dir/": an empty directory */
            continue;
        }
        /* a path that cannot be a file here (a/b after a, a after a/b) is skipped */
        (void)fuzz_write(rel, body, j - (size_t)(body - data));
    }
    return fuzz_root;
}

#endif
