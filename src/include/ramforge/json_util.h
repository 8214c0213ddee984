/*
 * The two JSON value helpers every report writer uses (jansson), private
 * to the project: part of core's internal interface (src/include/,
 * never installed; docs/CONVENTIONS.md). A figure that could not be
 * measured is JSON null, never 0.
 */
#ifndef RAMFORGE_CORE_JSON_UTIL_H
#define RAMFORGE_CORE_JSON_UTIL_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

/*
 * v as a JSON integer when has and it fits one (v <= INT64_MAX); JSON null
 * otherwise (not measured, or too large). A new reference; NULL on -ENOMEM.
 */
static inline json_t *rf_json_u64(bool has, uint64_t v)
{
    return has && v <= (uint64_t)INT64_MAX ? json_integer((json_int_t)v) : json_null();
}

/* s as a JSON string; JSON null for NULL. A new reference; NULL on -ENOMEM or bad UTF-8. */
static inline json_t *rf_json_str(const char *s)
{
    return s ? json_string(s) : json_null();
}

#endif
