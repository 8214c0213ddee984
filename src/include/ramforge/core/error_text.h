/*
 * The one mechanism that turns an error code into text (core's internal
 * interface, never installed): a table of what a code means in one
 * context, over rf_strerror (error.h) for every code the table does not
 * name. rf_strerror itself is the empty context plus ramforge's own codes.
 */
#ifndef RAMFORGE_CORE_ERROR_TEXT_H
#define RAMFORGE_CORE_ERROR_TEXT_H

#include <stddef.h>

#include "ramforge/error.h"

/* What one error code means in a context. */
struct rf_err_text {
    int err;          /* 0, a negative errno or a negative ramforge code */
    const char *text; /* static, one line (NULL allowed: "no text") */
};

/*
 * The text of err in the context table[0..n): the first entry for err;
 * otherwise fallback when not NULL, else rf_strerror(err). Static text.
 */
const char *rf_strerror_in(const struct rf_err_text *table, size_t n, int err,
                           const char *fallback);

#define RF_ERR_TEXTS(table) (table), (sizeof(table) / sizeof((table)[0]))

#endif
