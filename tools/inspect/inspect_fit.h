/* ramforge inspect -c N: the fit check without loading the model (inspect_fit.c). */
#ifndef RAMFORGE_TOOLS_INSPECT_FIT_H
#define RAMFORGE_TOOLS_INSPECT_FIT_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "ramforge/core/admission.h"

struct fit_options {
    const char *model;
    long long n_ctx;             /* -c: context cells asked for (padded to 256) */
    bool has_limit;              /* --memory-limit given */
    uint64_t limit_bytes;        /* the hypothetical hard limit */
    enum rf_admission_mode mode; /* --admission (default warn) */
    bool repack;                 /* false with --no-repack: no CPU_REPACK copies counted */
    bool json;
    bool raw; /* -b: bytes */
};

/* Prints the decision (table or JSON); returns the exit status: 0 admitted, 1 refused or
   failed. */
int inspect_fit(const struct fit_options *f);

/* Prints doc (a new reference, released; NULL: out of memory, said) on stdout, indented. */
bool inspect_print_json(json_t *doc);

#endif
