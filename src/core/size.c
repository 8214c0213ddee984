/*
 * Byte-size parsing for every SIZE of the CLI, by one rule, Kubernetes'
 * for a memory quantity (RF_SIZE_RULE, policy.h): "512Mi", "2G", "1.5Gi",
 * "1e9", "2k". Ki, Mi, Gi, Ti, Pi, Ei are powers of 1024 (KiB ... EiB
 * too, ramforge's one addition); k, M, G, T, P, E powers of 1000; a
 * decimal exponent ("e9", "E-3"); suffixes are case-sensitive as in
 * Kubernetes. A fraction or exponent is exact (integers, no floating
 * point) and must give whole bytes. What Kubernetes refuses or reads
 * otherwise ("2GB", "512K", "300m", "1 Gi") is refused, and
 * rf_size_hint names the spelling to use. And the other way: bytes
 * formatted for a person (rf_size_format, rf_size_text), the one rule of
 * the CLI and of exec's engine.
 */
#include "ramforge/core/policy.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SIGNIFICANT 38 /* digits of the number that fit an unsigned __int128 */
#define MAX_EXPONENT 1000  /* |exponent| beyond which the result overflows or is not whole */

/* A suffix and the bytes one unit stands for, as 2^two x 5^five. */
struct size_suffix {
    const char *name; /* matched exactly (case-sensitive) */
    unsigned two, five;
};

static const struct size_suffix suffixes[] = {
    {"Ki", 10, 0},  {"Mi", 20, 0},  {"Gi", 30, 0},  {"Ti", 40, 0},  {"Pi", 50, 0},  {"Ei", 60, 0},
    {"KiB", 10, 0}, {"MiB", 20, 0}, {"GiB", 30, 0}, {"TiB", 40, 0}, {"PiB", 50, 0}, {"EiB", 60, 0},
    {"k", 3, 3},    {"M", 6, 6},    {"G", 9, 9},    {"T", 12, 12},  {"P", 15, 15},  {"E", 18, 18},
};

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* The parsed syntax of a size: the number's digits and what scales them. */
struct size_syntax {
    const char *digits; /* the number as written, with its '.' */
    size_t n_digits;    /* characters of it */
    long scale;         /* the exponent minus the fraction's digits */
    unsigned two, five; /* the suffix's 2^two x 5^five (0, 0: none) */
};

/* Reads "[+-]digits" at p into *e (capped at MAX_EXPONENT); the end, or NULL. */
static const char *exponent(const char *p, long *e)
{
    bool neg = *p == '-';

    if (*p == '+' || *p == '-')
        p++;
    if (!is_digit(*p))
        return NULL;
    for (*e = 0; is_digit(*p); p++)
        if (*e <= MAX_EXPONENT)
            *e = *e * 10 + (*p - '0');
    if (neg)
        *e = -*e;
    return p;
}

/* The grammar: number [suffix | ("e" | "E") [sign] digits], number = d[.[d]] | .d. */
static bool parse_syntax(const char *s, struct size_syntax *x)
{
    const char *p = s;
    size_t n_int = 0, n_frac = 0;
    long e = 0;

    memset(x, 0, sizeof(*x));
    x->digits = s;
    for (; is_digit(*p); p++)
        n_int++;
    if (*p == '.')
        for (p++; is_digit(*p); p++)
            n_frac++;
    if (n_int + n_frac == 0)
        return false; /* empty, a sign, a space, "." */
    x->n_digits = (size_t)(p - s);
    if ((*p == 'e' || *p == 'E') &&
        (is_digit(p[1]) || ((p[1] == '+' || p[1] == '-') && is_digit(p[2])))) {
        p = exponent(p + 1, &e);
        if (!p || *p)
            return false;
    } else if (*p) {
        size_t i;
        for (i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++)
            if (strcmp(p, suffixes[i].name) == 0)
                break;
        if (i == sizeof(suffixes) / sizeof(suffixes[0]))
            return false;
        x->two = suffixes[i].two;
        x->five = suffixes[i].five;
    }
    x->scale = e - (long)n_frac;
    return true;
}

/* v / p^k when it divides exactly (true), for k >= 0. */
static bool divide_out(unsigned __int128 *v, unsigned p, long k)
{
    for (; k > 0; k--) {
        if (*v % p)
            return false;
        *v /= p;
    }
    return true;
}

/* v * p^k into v, false when it passes UINT64_MAX (v <= UINT64_MAX on entry). */
static bool multiply(unsigned __int128 *v, unsigned p, long k)
{
    for (; k > 0; k--) {
        *v *= p;
        if (*v > UINT64_MAX)
            return false;
    }
    return true;
}

int rf_parse_size(const char *s, uint64_t *out_bytes)
{
    struct size_syntax x;
    unsigned __int128 v = 0;
    size_t sig = 0;
    long trailing = 0;

    if (!s || !out_bytes || !parse_syntax(s, &x))
        return -EINVAL;
    /* The significant digits: no leading zeros; trailing zeros move into the scale. */
    for (size_t i = 0; i < x.n_digits; i++) {
        char c = x.digits[i];
        if (c == '.' || (c == '0' && sig == 0))
            continue;
        if (c == '0') {
            trailing++;
            continue;
        }
        sig += (size_t)trailing + 1;
        if (sig > MAX_SIGNIFICANT)
            return -EOVERFLOW;
        for (; trailing > 0; trailing--)
            v *= 10;
        v = v * 10 + (unsigned)(c - '0');
    }
    if (v == 0)
        return -EINVAL; /* zero bytes */
    long two = (long)x.two + x.scale + trailing, five = (long)x.five + x.scale + trailing;
    /* 2^-two and 5^-five must divide the digits: whole bytes */
    if (two < -4 * MAX_EXPONENT || five < -4 * MAX_EXPONENT || !divide_out(&v, 2, -two) ||
        !divide_out(&v, 5, -five))
        return -EDOM;
    if (v > UINT64_MAX || !multiply(&v, 2, two) || !multiply(&v, 5, five))
        return -EOVERFLOW;
    *out_bytes = (uint64_t)v;
    return 0;
}

/* Upper-cased c (ASCII). */
static char upper(char c)
{
    return c >= 'a' && c <= 'z' ? (char)(c - 'a' + 'A') : c;
}

bool rf_size_hint(const char *s, char *buf, size_t len)
{
    struct size_syntax x;
    char num[48], fix[8] = "", alt[8] = "";
    const char *why;
    size_t n = 0;

    if (!s || !buf || !len)
        return false;
    buf[0] = '\0';
    while (is_digit(s[n]) || s[n] == '.')
        n++;
    if (n == 0 || n >= sizeof(num))
        return false;
    memcpy(num, s, n);
    num[n] = '\0';
    if (!parse_syntax(num, &x))
        return false; /* the number itself is not one */
    bool space = s[n] == ' ';
    const char *u = s + n + space, *r = *u ? u + 1 : u;
    char d = upper(u[0]), dec = d == 'K' ? 'k' : d;
    if (!*u) {
        why = "no space";
    } else if ((u[0] == 'B' || u[0] == 'b') && !u[1]) {
        why = "a number alone is bytes";
    } else if (u[0] == 'm' && !u[1]) {
        snprintf(buf, len,
                 "m is milli (thousandths of a byte) in Kubernetes: write %sM (decimal) or %sMi "
                 "(binary)",
                 num, num);
        return true;
    } else if (d && strchr("KMGTPE", d) && (!*r || ((*r == 'B' || *r == 'b') && !r[1]))) {
        fix[0] = dec;
        if (!*r && u[0] == dec) {
            why = "no space";
        } else {
            alt[0] = d;
            alt[1] = 'i';
            why = "as Kubernetes writes them";
        }
    } else if (d && strchr("KMGTPE", d) && (*r == 'i' || *r == 'I') &&
               (!r[1] || ((r[1] == 'B' || r[1] == 'b') && !r[2]))) {
        snprintf(fix, sizeof(fix), "%ci%s", d, r[1] ? "B" : "");
        why = strcmp(fix, u) == 0 ? "no space" : "suffixes are case-sensitive, as in Kubernetes";
    } else {
        return false;
    }
    if (!space && strcmp(why, "no space") == 0)
        return false; /* valid as written: no hint */
    if (alt[0])
        snprintf(buf, len, "write %s%s (decimal) or %s%s (binary), %s", num, fix, num, alt, why);
    else
        snprintf(buf, len, "write %s%s (%s)", num, fix, why);
    return true;
}

const char *rf_size_format(uint64_t bytes, char *buf, size_t len)
{
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double v = (double)bytes;
    int u = 0;

    if (bytes < 1024) {
        snprintf(buf, len, "%" PRIu64 " B", bytes);
        return buf;
    }
    while (v >= 1024.0 && u < 6) {
        v /= 1024.0;
        u++;
    }
    snprintf(buf, len, "%.2f %s", v, units[u]);
    return buf;
}

const char *rf_size_text(const char *in, char *buf, size_t len)
{
    static const char unit[] = " bytes";
    size_t o = 0;

    if (len == 0)
        return buf;
    for (const char *p = in; *p && o + 1 < len;) {
        const char *q = p;
        while (*q >= '0' && *q <= '9')
            q++;
        bool word_start = p == in || !(isalnum((unsigned char)p[-1]) || p[-1] == '.');
        if (q > p && q - p <= 19 && word_start && strncmp(q, unit, sizeof(unit) - 1) == 0) {
            char num[21], fmt[32];
            snprintf(num, sizeof(num), "%.*s", (int)(q - p), p);
            rf_size_format(strtoull(num, NULL, 10), fmt, sizeof(fmt));
            int w = snprintf(buf + o, len - o, "%s", fmt);
            o = w < 0 || (size_t)w >= len - o ? len - 1 : o + (size_t)w;
            p = q + sizeof(unit) - 1;
        } else {
            /* copy the digits (or one other character) as they are */
            const char *end = q > p ? q : p + 1;
            while (p < end && o + 1 < len)
                buf[o++] = *p++;
        }
    }
    buf[o] = '\0';
    return buf;
}
