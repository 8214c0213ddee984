/*
 * Fuzz harness: the byte-size syntax of --memory-target, --reserve, ...
 * (rf_parse_size, src/core/size.c, and the CLI's cli_parse_size). A
 * result is compared with a reference computed here in 128-bit integers
 * for inputs of at most 18 digits: floor((int.frac) * unit).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "ramforge/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The unit of a suffix (case-insensitive), 0 when unknown. */
static unsigned __int128 unit(const char *s)
{
    static const char *iec[] = {"k", "m", "g", "t", "p", "e"};
    char l[4] = {0};
    size_t n = strlen(s);
    if (n == 0 || n > 3)
        return 0;
    for (size_t i = 0; i < n; i++)
        l[i] = (char)(s[i] >= 'A' && s[i] <= 'Z' ? s[i] - 'A' + 'a' : s[i]);
    if (!strcmp(l, "b"))
        return 1;
    for (int i = 0; i < 6; i++) {
        if (l[0] != iec[i][0])
            continue;
        if ((n == 2 && l[1] == 'i') || (n == 3 && l[1] == 'i' && l[2] == 'b'))
            return (unsigned __int128)1 << (10 * (i + 1));
        if (n == 1 || (n == 2 && l[1] == 'b')) {
            unsigned __int128 u = 1;
            for (int k = 0; k <= i; k++)
                u *= 1000;
            return u;
        }
    }
    return 0;
}

/*
 * Reference: digits[.digits][ ][suffix], at most 18 digits in all. Returns
 * 1 with *v the exact floor, 0 for a syntax the reference rejects, -1 when
 * it does not judge (too many digits).
 */
static int reference(const char *s, unsigned __int128 *v)
{
    const char *p = s;
    unsigned __int128 num = 0, den = 1;
    int digits = 0, frac = 0;
    while (*p >= '0' && *p <= '9') {
        num = num * 10 + (unsigned)(*p++ - '0');
        digits++;
        if (digits > 18)
            return -1;
    }
    if (digits == 0)
        return 0;
    if (*p == '.') {
        p++;
        while (*p >= '0' && *p <= '9') {
            num = num * 10 + (unsigned)(*p++ - '0');
            den *= 10;
            frac++;
            if (++digits > 18)
                return -1;
        }
        if (frac == 0)
            return 0;
    }
    unsigned __int128 u = 1;
    if (*p == ' ' || *p) {
        if (*p == ' ')
            p++;
        u = unit(p);
        if (u == 0)
            return 0;
    }
    if (frac && u == 1)
        return 0;
    *v = num * u / den;
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char s[64];
    uint64_t bytes = 12345;

    if (size >= sizeof(s) || memchr(data, '\0', size))
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    int rc = rf_parse_size(s, &bytes);
    unsigned __int128 ref;
    int r = reference(s, &ref);
    if (rc < 0 && bytes != 12345)
        abort(); /* unchanged on error */
    if (r == 0 && rc != -EINVAL)
        abort();
    if (r == 1) {
        if (ref == 0 && rc != -EINVAL)
            abort();
        if (ref > UINT64_MAX && rc != -EOVERFLOW)
            abort();
        if (ref > 0 && ref <= UINT64_MAX && (rc != 0 || bytes != (uint64_t)ref))
            abort();
    }
    if (rc == 0) {
        /* the CLI's wrapper: the same value, or a usage error above INT64_MAX */
        uint64_t cli = 0;
        bool ok = cli_parse_size("--size", s, false, &cli);
        if (ok != (bytes <= (uint64_t)INT64_MAX) || (ok && cli != bytes))
            abort();
    }
    return 0;
}
