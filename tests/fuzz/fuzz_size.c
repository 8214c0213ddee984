/*
 * Fuzz harness: the byte-size syntax of --memory-target, --reserve, ...
 * (rf_parse_size, src/core/size.c, and the CLI's cli_parse_size). A
 * result is compared with a reference computed here in 128-bit integers
 * for inputs of at most 18 digits and exponents of at most 20: the exact
 * (int.frac) * unit * 10^exp, which must be whole bytes (else -EDOM).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/cli.h"
#include "ramforge/core/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The unit of a suffix (case-sensitive, as Kubernetes reads them), 0 when refused. */
static unsigned __int128 unit(const char *s)
{
    static const char bin[] = "KMGTPE", dec[] = "kMGTPE";
    for (int i = 0; i < 6; i++) {
        char b2[3] = {bin[i], 'i', 0}, b3[4] = {bin[i], 'i', 'B', 0}, d1[2] = {dec[i], 0};
        if (!strcmp(s, b2) || !strcmp(s, b3))
            return (unsigned __int128)1 << (10 * (i + 1));
        if (!strcmp(s, d1)) {
            unsigned __int128 u = 1;
            for (int k = 0; k <= i; k++)
                u *= 1000;
            return u;
        }
    }
    return 0;
}

/*
 * Reference: number [suffix | (e|E)[sign]digits], number = d[.[d]] | .d, at
 * most 18 digits and an exponent of at most 20. Returns 1 with *v the exact
 * value, 2 when it is not whole bytes, 0 for a syntax the reference rejects,
 * -1 when it does not judge.
 */
static int reference(const char *s, unsigned __int128 *v)
{
    const char *p = s;
    unsigned __int128 num = 0, den = 1, u = 1;
    int digits = 0;
    for (; *p >= '0' && *p <= '9'; p++) {
        num = num * 10 + (unsigned)(*p - '0');
        if (++digits > 18)
            return -1;
    }
    if (*p == '.')
        for (p++; *p >= '0' && *p <= '9'; p++) {
            num = num * 10 + (unsigned)(*p - '0');
            den *= 10;
            if (++digits > 18)
                return -1;
        }
    if (digits == 0)
        return 0;
    const char *q = p + 1 + (p[1] == '+' || p[1] == '-');
    if ((*p == 'e' || *p == 'E') && *q >= '0' && *q <= '9') {
        int e = 0;
        for (; *q >= '0' && *q <= '9'; q++) {
            e = e * 10 + (*q - '0');
            if (e > 20)
                return -1;
        }
        if (*q)
            return 0;
        for (; e > 0; e--) {
            if (p[1] == '-')
                den *= 10;
            else
                num *= 10;
        }
    } else if (*p) {
        u = unit(p);
        if (u == 0)
            return 0;
    }
    num *= u;
    if (num % den)
        return num ? 2 : 0;
    *v = num / den;
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
    if (r == 2 && rc != -EDOM)
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
