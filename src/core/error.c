/* Error strings and the log sink shared by every ramforge layer. */
#include "ramforge/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static rf_log_fn log_fn;
static void *log_user_data;

const char *rf_strerror(int err)
{
    switch (-err) {
    case 0:
        return "Success";
    case RF_EBADMODEL:
        return "not a usable GGUF model";
    case RF_ESTALE:
        return "inventory generation is out of date";
    default:
        return strerror(-err);
    }
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
