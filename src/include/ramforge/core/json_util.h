/*
 * The JSON value helpers every report writer uses (jansson), private to
 * the project: part of core's internal interface (src/include/, never
 * installed; docs/CONVENTIONS.md). A figure that could not be measured is
 * JSON null, never 0; text that is not valid UTF-8 (from the model or a
 * file) goes in with its bad bytes replaced (ramforge/core/utf8.h), never
 * failing the document.
 */
#ifndef RAMFORGE_CORE_JSON_UTIL_H
#define RAMFORGE_CORE_JSON_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "ramforge/core/utf8.h"

/*
 * v as a JSON integer when has and it fits one (v <= INT64_MAX); JSON null
 * otherwise (not measured, or too large). A new reference; NULL on -ENOMEM.
 */
static inline json_t *rf_json_u64(bool has, uint64_t v)
{
    return has && v <= (uint64_t)INT64_MAX ? json_integer((json_int_t)v) : json_null();
}

/*
 * s[0..n) as a JSON string, every ill-formed UTF-8 subsequence replaced by
 * U+FFFD (rf_utf8_sanitize); *valid (may be NULL) says whether s was valid
 * UTF-8. A new reference; NULL only when out of memory (or for a text
 * over SIZE_MAX / 3 bytes).
 */
static inline json_t *rf_json_text(const char *s, size_t n, bool *valid)
{
    char *clean;
    size_t len;
    json_t *j;

    if (rf_utf8_sanitize(s, n, &clean, &len, valid) < 0)
        return NULL;
    j = json_stringn_nocheck(clean, len);
    free(clean);
    return j;
}

/* s as a JSON string (rf_json_text); JSON null for NULL. A new reference; NULL on -ENOMEM. */
static inline json_t *rf_json_str(const char *s)
{
    return s ? rf_json_text(s, strlen(s), NULL) : json_null();
}

#endif
