/*
 * ramforge error codes and logging.
 *
 * Every library function returns 0 on success or a negative errno value
 * (-ENOENT, -EINVAL, -EOVERFLOW, ...) on failure. The library never exits,
 * aborts or prints: diagnostics go through the log callback set here, and
 * only the CLI writes to the terminal.
 */
#ifndef RAMFORGE_ERROR_H
#define RAMFORGE_ERROR_H

#include "ramforge/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Size of every buffer that carries one line of reason or error text from
 * a layer to the report or the caller, including the NUL: a longer text is
 * cut, never overrun (docs/CONVENTIONS.md). The one exception is the
 * admission decision's reason (several sentences, RF_ADMISSION_REASON_MAX).
 */
#define RF_ERR_MAX 512

/* ramforge-specific codes, below the errno range Linux uses (< 4096). */
#define RF_EBADMODEL 5001 /* the file is not a usable GGUF model */
#define RF_ESTALE 5002    /* an inventory generation or plan is out of date */
#define RF_EJSON 5003     /* a JSON document could not be built: a value it refused */

/*
 * Returns a static, human-readable description of a negative error code
 * returned by any ramforge function ("No such file or directory",
 * "Value too large for defined data type", ...). Never NULL.
 */
RF_API const char *rf_strerror(int err);

enum rf_log_level {
    RF_LOG_DEBUG = 0,
    RF_LOG_INFO = 1,
    RF_LOG_WARN = 2,
    RF_LOG_ERROR = 3,
};

/* A log sink: msg is NUL-terminated, without a trailing newline. */
typedef void (*rf_log_fn)(enum rf_log_level level, const char *msg, void *user_data);

/*
 * Installs the process-wide log sink (NULL drops every message, the
 * default). Not thread-safe against concurrent rf_log calls: set it once at
 * start-up.
 */
RF_API void rf_log_set(rf_log_fn fn, void *user_data);

/* Formats a message and hands it to the log sink; a no-op without one. */
RF_API void rf_log(enum rf_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#ifdef __cplusplus
}
#endif

#endif
