/*
 * Error strings, one mechanism (error_text.h: a context's table over
 * rf_strerror), and the log sink shared by every ramforge layer.
 */
#include "ramforge/error.h"
#include "ramforge/core/error_text.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static rf_log_fn log_fn;
static void *log_user_data;

/* The entry of table[0..n) for err; NULL when there is none. */
static const struct rf_err_text *find(const struct rf_err_text *table, size_t n, int err)
{
    for (size_t i = 0; i < n; i++)
        if (table[i].err == err)
            return &table[i];
    return NULL;
}

const char *rf_strerror_in(const struct rf_err_text *table, size_t n, int err, const char *fallback)
{
    const struct rf_err_text *e = find(table, n, err);
    if (e)
        return e->text;
    return fallback ? fallback : rf_strerror(err);
}

const char *rf_strerror(int err)
{
    static const struct rf_err_text own[] = {
        {0, "Success"},
        {-RF_EBADMODEL, "not a usable GGUF model"},
        {-RF_ESTALE, "inventory generation is out of date"},
        {-RF_EJSON, "a report value could not be encoded as JSON"},
    };
    const struct rf_err_text *e = find(RF_ERR_TEXTS(own), err);
    return e ? e->text : strerror(-err);
}

void rf_log_set(rf_log_fn fn, void *user_data)
{
    log_fn = fn;
    log_user_data = user_data;
}

void rf_log(enum rf_log_level level, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;

    if (!log_fn)
        return;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    log_fn(level, buf, log_user_data);
}
