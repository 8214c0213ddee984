/*
 * Shared set-up of the forge tests: a model generated with the pinned
 * tokenizer vocab (the test is skipped, exit 77, without it) and loaded
 * through forge.
 */
#ifndef RAMFORGE_FORGE_TEST_UTIL_H
#define RAMFORGE_FORGE_TEST_UTIL_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "ramforge/forge/forge.h"
#include "ramforge/forge/forge_mkmodel.h"

/* Writes a PRESET/TYPE model with seed to path. Returns 0, or -1 with a message. */
static inline int forge_test_mkmodel(const char *path, enum forge_mkmodel_preset preset,
                                     const char *type, uint64_t seed)
{
    char err[FORGE_ERR_MAX];

    if (access(RAMFORGE_DEFAULT_VOCAB, R_OK) != 0) {
        fprintf(stderr, "skip: no tokenizer vocab at %s\n", RAMFORGE_DEFAULT_VOCAB);
        exit(77);
    }
    forge_init(false);
    struct forge_mkmodel_params mp = {
        .preset = preset,
        .type = type,
        .seed = seed,
        .vocab_path = RAMFORGE_DEFAULT_VOCAB,
        .out_path = path,
    };
    if (forge_mkmodel(&mp, err) < 0) {
        fprintf(stderr, "mkmodel: %s\n", err);
        return -1;
    }
    return 0;
}

/* Loads path (with the access probe when probe). Returns 0, or -1 with a message. */
static inline int forge_test_load(const char *path, bool probe, struct forge_model **out)
{
    char err[FORGE_ERR_MAX];
    struct forge_model_params p = forge_model_default_params();

    p.probe_access = probe;
    if (forge_model_load(path, &p, out, err) < 0) {
        fprintf(stderr, "load: %s\n", err);
        return -1;
    }
    return 0;
}

/*
 * A tiny q8_0 model of seed at /tmp/ramforge-test-NAME-PID.gguf (path, len
 * bytes) loaded without the probe (a test's setup). Returns 0 or -1.
 */
static inline int forge_test_tiny(char *path, size_t len, const char *name, uint64_t seed,
                                  struct forge_model **out)
{
    snprintf(path, len, "/tmp/ramforge-test-%s-%ld.gguf", name, (long)getpid());
    return forge_test_mkmodel(path, FORGE_PRESET_TINY, "q8_0", seed) < 0 ||
                   forge_test_load(path, false, out) < 0
               ? -1
               : 0;
}

/* Frees m and removes the model file at path (a test's teardown). */
static inline void forge_test_unload(struct forge_model *m, const char *path)
{
    forge_model_free(m);
    unlink(path);
}

#endif
