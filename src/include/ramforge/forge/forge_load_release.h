/*
 * Release during the load: the file pages of each weight llama.cpp copies
 * out of the model's mapping (a CPU_REPACK buffer, a device's buffer) are
 * released as soon as its copy is made, from the load's progress callback,
 * instead of waiting for the after_load boundary. Without it a repacked
 * model's load holds the whole file and the copies at once: about twice
 * the steady state (docs/ARCHITECTURE.md, "Release during the load").
 *
 * How the callback knows which copies are made. llama.cpp calls the
 * progress callback before each tensor it loads (fraction of bytes done),
 * and once more (1.0) after the last. Before the load,
 * forge_load_release_begin loads the same model with no_alloc and without
 * mmap (metadata only: no tensor data read, no mapping): its tensor map
 * lists the tensors in the order the real load visits them, each in the
 * buffer type llama.cpp chose. At the callback's k-th call the first k
 * tensors of that order are loaded; the fraction llama.cpp passes is
 * checked against their bytes, and any difference stops the release for
 * that load (nothing is guessed). A tensor outside the CPU's default
 * buffer type is copied; one inside it stays in the mapping.
 *
 * What is released, and how. At each call, the outward file pages of
 * every file tensor whose copies are all made and that no loaded tensor
 * reads from the mapping, under the validation of every release
 * (advise.c: wholly inside r--s VMAs of the model file at the offsets
 * claimed; an anonymous copy is never touched) and its protection of
 * pages shared with a tensor outside the request; the mapping is the r--s
 * one of the file that appeared since forge_load_release_begin, at file
 * offset 0. Whatever the session's --release-mode, the pages leave the
 * page cache, as a lower load peak needs (the cgroup charges the cache):
 * MADV_PAGEOUT (it splits a large folio the range holds part of, a folio
 * holding a kept tensor's page too, and reclaims that part; the kernel
 * pages out a file only for its owner or a writer), then MADV_DONTNEED
 * (unmaps what is left), then posix_fadvise(DONTNEED) over each run of
 * pages released so far that holds pages released now (a large folio
 * leaves the cache only when the range holds all of it; a page still
 * mapped anywhere is not dropped). Pages are only ever dropped, never
 * changed: a page released too early is read again from the file.
 */
#ifndef RAMFORGE_FORGE_LOAD_RELEASE_H
#define RAMFORGE_FORGE_LOAD_RELEASE_H

#include "ramforge/core/load_release.h"

#ifdef __cplusplus
extern "C" {
#endif

struct llama_model_params;
struct forge_load_release;

/*
 * Prepares the release for loading PATH with *mp (the caller's params,
 * borrowed until forge_load_release_end): the metadata-only load, the
 * file tensors' table, the file's r--s mappings now; then decorates *mp:
 * its progress callback becomes the release's, which calls the one *mp
 * had (with its user data) after each release and returns its answer
 * (none: true).
 * Returns 0 with *out set, and *mp decorated unless the release cannot
 * run (*out's result says why: a load with mlock or without mmap, no
 * weight to copy, the metadata-only load failed); -EINVAL, -ENOMEM
 * (*out NULL, *mp untouched).
 */
int forge_load_release_begin(const char *path, struct llama_model_params *mp,
                             struct forge_load_release **out);

/*
 * After the load returned (a model or NULL): writes what the release did
 * to *out (may be NULL) and frees lr. lr NULL: *out zeroed.
 */
void forge_load_release_end(struct forge_load_release *lr, struct rf_load_release *out);

#ifdef __cplusplus
}
#endif

#endif
