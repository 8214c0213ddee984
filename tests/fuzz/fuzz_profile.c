/*
 * Fuzz harness: the persisted access profile reader (rf_profile_parse,
 * src/core/profile.c), which reads a file a previous run wrote and that
 * anything may have changed since. The input is the whole document. On
 * acceptance the parsed profile must keep its invariants (bounds, names
 * NUL-terminated, sorted and unique, history of its own identity and
 * within the bound), and its text must be a fixed point: written, read
 * back and written again it gives the same bytes.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ramforge/core/profile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A small history bound, so dropping the oldest entries is exercised. */
#define FUZZ_HISTORY 3

static void check(const struct rf_profile *p)
{
    if (p->format_version != RF_PROFILE_FORMAT_VERSION || p->n_tensors > RF_PROFILE_MAX_TENSORS ||
        p->n_history > p->max_history || p->max_history != FUZZ_HISTORY ||
        strncmp(p->identity, "sha256:", 7) != 0 || strlen(p->identity) != 71)
        abort();
    for (size_t i = 0; i < p->n_tensors; i++) {
        if (!memchr(p->tensors[i].name, '\0', sizeof(p->tensors[i].name)))
            abort();
        if (i > 0 && strcmp(p->tensors[i - 1].name, p->tensors[i].name) >= 0)
            abort();
    }
    for (size_t i = 0; i < p->n_history; i++)
        if (strcmp(p->history[i].identity, p->identity) != 0)
            abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct rf_profile p, q;
    char why[256], *t1 = NULL, *t2 = NULL;

    int rc = rf_profile_parse((const char *)data, size, FUZZ_HISTORY, &p, why, sizeof(why));
    if (rc < 0) {
        /* a rejection says why, on one line, and leaves an empty profile */
        if (rc == -ENOMEM)
            return 0;
        if ((rc != -EBADMSG && rc != -EPROTO && rc != -E2BIG && rc != -EFBIG) || why[0] == '\0' ||
            strchr(why, '\n') || p.tensors || p.history || p.n_tensors || p.n_history)
            abort();
        return 0;
    }
    check(&p);
    if (rf_profile_to_text(&p, &t1) < 0)
        abort();
    rc = rf_profile_parse(t1, strlen(t1), FUZZ_HISTORY, &q, why, sizeof(why));
    if (rc < 0 || q.n_tensors != p.n_tensors || q.n_history != p.n_history)
        abort();
    check(&q);
    if (rf_profile_to_text(&q, &t2) < 0 || strcmp(t1, t2) != 0)
        abort();
    free(t1);
    free(t2);
    rf_profile_free(&q);
    rf_profile_free(&p);
    return 0;
}
