/*
 * The one UTF-8 sanitizer of the project (core's internal interface, never
 * installed): text from the model (a byte-fallback token, a multi-byte
 * character cut by -n) or from a file (a GGUF tensor name, a path) made
 * into valid UTF-8 before it goes into a JSON document, as llama-server
 * (nlohmann::json's error_handler_t::replace) and Python's
 * bytes.decode("utf-8", "replace") do.
 */
#ifndef RAMFORGE_CORE_UTF8_H
#define RAMFORGE_CORE_UTF8_H

#include <stdbool.h>
#include <stddef.h>

/*
 * s[0..n) with every maximal ill-formed subsequence (Unicode 15, 3.9,
 * "U+FFFD Substitution of Maximal Subparts": a byte that cannot start a
 * sequence, an overlong or surrogate form, a sequence cut short, also at
 * the end) replaced by one U+FFFD (EF BF BD). A NUL byte is valid UTF-8
 * (U+0000) and is kept. *out is a new buffer of *out_len bytes plus a NUL
 * (the caller frees); *valid (may be NULL) is true when s[0..n) was valid
 * UTF-8, *out then an exact copy. s may be NULL when n is 0. Errors:
 * -EINVAL (NULL out or out_len, NULL s with n > 0), -EOVERFLOW (n too
 * large for the worst case, 3 bytes per input byte), -ENOMEM; out and
 * out_len are NULL and 0, *valid false, on every error.
 */
int rf_utf8_sanitize(const char *s, size_t n, char **out, size_t *out_len, bool *valid);

#endif
