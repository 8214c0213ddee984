/*
 * What the release during the load did (forge_load_release.h does it): a
 * plain struct the report and the session carry. Types only.
 */
#ifndef RAMFORGE_LOAD_RELEASE_H
#define RAMFORGE_LOAD_RELEASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What a release during one load did (forge_model_info.load_release). */
struct rf_load_release {
    bool armed;               /* the release ran (prepared, the mapping found) */
    const char *stopped;      /* static: why it never ran or stopped early; NULL: it did not */
    size_t n_tensors;         /* file tensors whose pages were released during the load */
    size_t n_kept;            /* of those, read in place (small, between released ones):
                                 dropped with their folios, read back alone at once */
    uint64_t requested_bytes; /* outward pages of the tensors requested, bytes */
    uint64_t released_bytes;  /* of those, the n_tensors' (pages shared with a tensor kept
                                 stay mapped: advise.c's protection) */
    uint64_t n_calls;         /* progress callbacks seen */
    int first_error;          /* negative errno of the first refused or failed range; 0 */
    uint64_t prepare_ns;      /* the metadata-only load of forge_load_release_begin, ns */
};

#endif
