/*
 * Byte-size parsing for every SIZE of the CLI: "512MiB", "2G", "1.5 GiB",
 * "2GB", "4Gi". One rule, Kubernetes' (RF_SIZE_RULE, policy.h): Ki, Mi,
 * Gi, ... and KiB, MiB, GiB, ... are powers of 1024; K, M, G, ... and KB,
 * MB, GB, ... powers of 1000, so a limit copied from a pod spec means what
 * the pod's limit means. Integers only, no floating point: the integer
 * part is multiplied with overflow checks and the fraction is reduced digit by digit, so "0.1KB" is
 * exactly 100 bytes and every result is the exact floor of the decimal value.
 */
#include "ramforge/policy.h"

#include <errno.h>

/* A size suffix and the bytes one unit of it stands for. */
struct size_suffix {
    const char *name; /* matched case-insensitively */
    uint64_t mult;    /* bytes per unit */
};

static const struct size_suffix suffixes[] = {
    {"B", 1},
    {"Ki", 1ULL << 10},
    {"KiB", 1ULL << 10},
    {"Mi", 1ULL << 20},
    {"MiB", 1ULL << 20},
    {"Gi", 1ULL << 30},
    {"GiB", 1ULL << 30},
    {"Ti", 1ULL << 40},
    {"TiB", 1ULL << 40},
    {"Pi", 1ULL << 50},
    {"PiB", 1ULL << 50},
    {"Ei", 1ULL << 60},
    {"EiB", 1ULL << 60},
    {"K", 1000ULL},
    {"KB", 1000ULL},
    {"M", 1000000ULL},
    {"MB", 1000000ULL},
    {"G", 1000000000ULL},
    {"GB", 1000000000ULL},
    {"T", 1000000000000ULL},
    {"TB", 1000000000000ULL},
    {"P", 1000000000000000ULL},
    {"PB", 1000000000000000ULL},
    {"E", 1000000000000000000ULL},
    {"EB", 1000000000000000000ULL},
};

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static char ascii_lower(char c)
{
    return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

/* ASCII-only, so the result does not depend on the caller's locale. */
static bool ascii_equal_nocase(const char *a, const char *b)
{
    for (; *a && *b; a++, b++) {
        if (ascii_lower(*a) != ascii_lower(*b))
            return false;
    }
    return *a == *b;
}

/* The multiplier of suffix s (NUL-terminated, non-empty), or 0 when unknown. */
static uint64_t suffix_mult(const char *s)
{
    size_t i;

    for (i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
        if (ascii_equal_nocase(s, suffixes[i].name))
            return suffixes[i].mult;
    }
    return 0;
}

/*
 * floor(mult * 0.d1 d2 ... dk) for the k fraction digits at frac. From the
 * last digit back, y = floor((d * mult + y) / 10): flooring each step does
 * not change the final floor, y stays below mult, and d * mult + y <
 * 10 * mult <= 10 * 2^60 fits in 64 bits for every suffix in the table.
 */
static uint64_t frac_times(const char *frac, size_t k, uint64_t mult)
{
    uint64_t y = 0;

    while (k-- > 0)
        y = ((uint64_t)(frac[k] - '0') * mult + y) / 10;
    return y;
}

/*
 * Grammar: digits [ "." digits ] [ [" "] suffix ]; a fraction needs a
 * suffix other than B. The syntax is checked in full before any arithmetic.
 */
int rf_parse_size(const char *s, uint64_t *out_bytes)
{
    const char *p, *int_start, *frac = NULL, *suf;
    size_t n_int, n_frac = 0;
    uint64_t mult = 1, v = 0, part;
    size_t i;

    if (!s || !out_bytes)
        return -EINVAL;

    p = int_start = s;
    while (is_digit(*p))
        p++;
    n_int = (size_t)(p - int_start);
    if (n_int == 0)
        return -EINVAL; /* empty, a sign, a leading space or a bare fraction */
    if (*p == '.') {
        frac = ++p;
        while (is_digit(*p))
            p++;
        n_frac = (size_t)(p - frac);
        if (n_frac == 0)
            return -EINVAL; /* "1." */
    }
    suf = p;
    if (*suf == ' ')
        suf++;
    if (*suf != '\0') {
        mult = suffix_mult(suf);
        if (mult == 0)
            return -EINVAL; /* unknown suffix or trailing junk */
    } else if (suf != p) {
        return -EINVAL; /* a space with no suffix after it */
    }
    if (frac && mult == 1)
        return -EINVAL; /* fractions of a byte mean nothing */

    for (i = 0; i < n_int; i++) {
        if (__builtin_mul_overflow(v, 10, &v) ||
            __builtin_add_overflow(v, (uint64_t)(int_start[i] - '0'), &v))
            return -EOVERFLOW;
    }
    if (__builtin_mul_overflow(v, mult, &v))
        return -EOVERFLOW;
    if (frac) {
        part = frac_times(frac, n_frac, mult);
        if (__builtin_add_overflow(v, part, &v))
            return -EOVERFLOW;
    }
    if (v == 0)
        return -EINVAL;
    *out_bytes = v;
    return 0;
}
