/*
 * The UTF-8 sanitizer (ramforge/core/utf8.h): a validating pass over the bytes
 * (RFC 3629's well-formed sequences, Unicode table 3-7), copying each
 * well-formed sequence and writing one U+FFFD for each maximal ill-formed
 * subsequence, the substitution Python and llama-server's JSON writer make.
 */
#include "ramforge/core/utf8.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char replacement[] = "\xEF\xBF\xBD"; /* U+FFFD */

/*
 * The length of the well-formed sequence at s[0..n) (1 to 4), or 0 when
 * there is none; *bad then says how many bytes its maximal ill-formed
 * subpart takes (at least 1): the lead byte and the continuation bytes
 * that were still allowed after it.
 */
static size_t sequence_len(const unsigned char *s, size_t n, size_t *bad)
{
    unsigned char c = s[0], lo = 0x80, hi = 0xBF;
    size_t need, k;

    *bad = 1;
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF) {
        need = 1;
    } else if (c >= 0xE0 && c <= 0xEF) {
        need = 2;
        lo = c == 0xE0 ? 0xA0 : 0x80; /* E0 80..9F: overlong */
        hi = c == 0xED ? 0x9F : 0xBF; /* ED A0..BF: surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 3;
        lo = c == 0xF0 ? 0x90 : 0x80; /* F0 80..8F: overlong */
        hi = c == 0xF4 ? 0x8F : 0xBF; /* F4 90..: above U+10FFFF */
    } else {
        return 0; /* a continuation byte, C0, C1 (overlong) or F5..FF */
    }
    for (k = 0; k < need; k++) {
        if (1 + k >= n || s[1 + k] < lo || s[1 + k] > hi) {
            *bad = 1 + k;
            return 0;
        }
        lo = 0x80;
        hi = 0xBF;
    }
    return 1 + need;
}

int rf_utf8_sanitize(const char *s, size_t n, char **out, size_t *out_len, bool *valid)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t o = 0, cap;
    bool ok = true;
    char *buf;

    if (valid)
        *valid = false;
    if (out)
        *out = NULL;
    if (out_len)
        *out_len = 0;
    if (!out || !out_len || (!s && n > 0))
        return -EINVAL;
    if (n > (SIZE_MAX - 1) / 3)
        return -EOVERFLOW;
    cap = 3 * n + 1;
    buf = malloc(cap);
    if (!buf)
        return -ENOMEM;
    for (size_t i = 0; i < n;) {
        size_t bad, len = sequence_len(u + i, n - i, &bad);
        if (len) {
            memcpy(buf + o, s + i, len);
            o += len;
            i += len;
        } else {
            memcpy(buf + o, replacement, 3);
            o += 3;
            i += bad;
            ok = false;
        }
    }
    buf[o] = '\0';
    *out = buf;
    *out_len = o;
    if (valid)
        *valid = ok;
    return 0;
}
