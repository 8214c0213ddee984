/*
 * The Prometheus text writer (ramforge/core/prom.h): a buffer grown by doubling,
 * the escapes of exposition format 0.0.4, and one number format. Expected
 * workload: a few KiB of text per scrape or metrics file, a few dozen
 * families, so the family names are searched linearly.
 */
#include "ramforge/core/prom.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROM_FIRST_CAP 4096 /* bytes: one model's families fit */

void rf_prom_init(struct rf_prom *p)
{
    memset(p, 0, sizeof(*p));
}

void rf_prom_free(struct rf_prom *p)
{
    if (!p)
        return;
    free(p->text);
    free(p->const_labels);
    for (size_t i = 0; i < p->n_families; i++)
        free(p->families[i]);
    free(p->families);
    rf_prom_init(p);
}

int rf_prom_take(struct rf_prom *p, char **out)
{
    int rc = p->error;
    *out = NULL;
    if (rc == 0) {
        *out = p->text ? p->text : strdup("");
        p->text = NULL;
        if (!*out)
            rc = -ENOMEM;
    }
    rf_prom_free(p);
    return rc;
}

/* Room for n more bytes and the NUL; false (p->error set) when it cannot be had. */
static bool reserve(struct rf_prom *p, size_t n)
{
    if (p->error)
        return false;
    if (p->len + n < p->cap)
        return true;
    size_t cap = p->cap ? p->cap : PROM_FIRST_CAP;
    while (cap <= p->len + n)
        if (__builtin_mul_overflow(cap, 2, &cap)) {
            p->error = -ENOMEM;
            return false;
        }
    char *text = realloc(p->text, cap);
    if (!text) {
        p->error = -ENOMEM;
        return false;
    }
    p->text = text;
    p->cap = cap;
    return true;
}

void rf_prom_raw(struct rf_prom *p, const char *s, size_t n)
{
    if (!reserve(p, n))
        return;
    memcpy(p->text + p->len, s, n);
    p->len += n;
    p->text[p->len] = '\0';
}

static void put(struct rf_prom *p, const char *s)
{
    rf_prom_raw(p, s, strlen(s));
}

/* s with each character of special preceded by a backslash, a newline as \n. */
static void escaped(struct rf_prom *p, const char *s, const char *special)
{
    for (const char *run = s ? s : ""; *run;) {
        size_t n = strcspn(run, special);
        rf_prom_raw(p, run, n);
        run += n;
        if (*run) {
            put(p, *run == '\n' ? "\\n" : *run == '\\' ? "\\\\" : "\\\"");
            run++;
        }
    }
}

/* name="value" (the value escaped) at the end of p. */
static void pair(struct rf_prom *p, const char *name, const char *value)
{
    put(p, name);
    put(p, "=\"");
    escaped(p, value, "\\\"\n");
    put(p, "\"");
}

int rf_prom_const_label(struct rf_prom *p, const char *name, const char *value)
{
    struct rf_prom one;
    rf_prom_init(&one);
    if (p->const_labels) {
        put(&one, p->const_labels);
        put(&one, ",");
    }
    pair(&one, name, value);
    char *labels = NULL;
    int rc = rf_prom_take(&one, &labels);
    if (rc < 0) {
        p->error = rc;
        return rc;
    }
    free(p->const_labels);
    p->const_labels = labels;
    return 0;
}

void rf_prom_family(struct rf_prom *p, const char *name, const char *type, const char *help)
{
    for (size_t i = 0; i < p->n_families; i++)
        if (!strcmp(p->families[i], name))
            return;
    if (p->error)
        return;
    char **families = realloc(p->families, (p->n_families + 1) * sizeof(*families));
    if (!families || !(families[p->n_families] = strdup(name))) {
        if (families)
            p->families = families;
        p->error = -ENOMEM;
        return;
    }
    p->families = families;
    p->n_families++;
    put(p, "# HELP ");
    put(p, name);
    put(p, " ");
    escaped(p, help, "\\\n");
    put(p, "\n# TYPE ");
    put(p, name);
    put(p, " ");
    put(p, type);
    put(p, "\n");
}

void rf_prom_sample(struct rf_prom *p, const char *name)
{
    put(p, name);
    p->sample_labels = 0;
    if (p->const_labels) {
        put(p, "{");
        put(p, p->const_labels);
        p->sample_labels = 1;
    }
}

void rf_prom_label(struct rf_prom *p, const char *name, const char *value)
{
    put(p, p->sample_labels++ ? "," : "{");
    pair(p, name, value);
}

/* Closes the open sample with the value's text. */
static void close_sample(struct rf_prom *p, const char *value)
{
    put(p, p->sample_labels ? "} " : " ");
    put(p, value);
    put(p, "\n");
    p->sample_labels = 0;
}

void rf_prom_u64(struct rf_prom *p, uint64_t v)
{
    char text[24];
    snprintf(text, sizeof(text), "%" PRIu64, v);
    close_sample(p, text);
}

void rf_prom_i64(struct rf_prom *p, int64_t v)
{
    char text[24];
    snprintf(text, sizeof(text), "%" PRId64, v);
    close_sample(p, text);
}

#define PROM_EXACT_LIMIT 9007199254740992.0 /* 2^53: every integer below is a double */

void rf_prom_double(struct rf_prom *p, double v)
{
    char text[32];
    if (isnan(v))
        snprintf(text, sizeof(text), "NaN");
    else if (isinf(v))
        snprintf(text, sizeof(text), v > 0 ? "+Inf" : "-Inf");
    else if (v == trunc(v) && fabs(v) < PROM_EXACT_LIMIT)
        snprintf(text, sizeof(text), "%.0f", v == 0 ? 0.0 : v); /* no "-0" */
    else /* the fewest digits that read back as v */
        for (int digits = 15; digits <= 17; digits++)
            if (snprintf(text, sizeof(text), "%.*g", digits, v) > 0 && strtod(text, NULL) == v)
                break;
    close_sample(p, text);
}
