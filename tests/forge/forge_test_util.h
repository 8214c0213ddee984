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

#include "ramforge/forge.h"

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

#endif
