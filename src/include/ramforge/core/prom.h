/*
 * The one Prometheus text writer (exposition format 0.0.4) of run's
 * --metrics-file, serve's /metrics, exec's engine and parent, watch and
 * bench: a growable buffer and a family/sample vocabulary, so the HELP and
 * TYPE lines, the escapes and the numbers are spelled in one place.
 *
 *   struct rf_prom p;
 *   rf_prom_init(&p);
 *   rf_prom_const_label(&p, "pid", "42");        // before every sample's labels
 *   rf_prom_family(&p, "x_bytes", "gauge", "Help.");   // once per name per text
 *   rf_prom_sample(&p, "x_bytes");
 *   rf_prom_label(&p, "model", "m.gguf");
 *   rf_prom_u64(&p, 4096);                       // x_bytes{pid="42",model="m.gguf"} 4096
 *   int rc = rf_prom_take(&p, &text);            // 0 or -ENOMEM; the caller frees text
 *
 * Escapes: a label value's backslash, double quote and newline become \\,
 * \" and \n; HELP text's backslash and newline become \\ and \n. Numbers:
 * integers exactly; other doubles with the fewest digits that read back
 * as the same double (at most 17 significant); NaN, +Inf and -Inf as the
 * format spells them. A sample without labels has no braces.
 *
 * Memory: the first failed allocation is kept (p->error) and every later
 * call does nothing, so a writer checks once, at rf_prom_take.
 */
#ifndef RAMFORGE_PROM_H
#define RAMFORGE_PROM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct rf_prom {
    char *text;             /* the text so far, NUL-terminated once anything is written; owned */
    size_t len;             /* bytes of text, the NUL excluded */
    size_t cap;             /* bytes allocated at text */
    char *const_labels;     /* name="value" pairs joined by ',' written first in every sample */
    char **families;        /* the names whose HELP and TYPE this text has; owned */
    size_t n_families;      /* entries of families */
    unsigned sample_labels; /* labels of the open sample written so far (0: no brace yet) */
    int error;              /* 0, or -ENOMEM: the first failure (later calls do nothing) */
};

/* An empty text, no constant labels. */
void rf_prom_init(struct rf_prom *p);

/* Frees what p holds (its text too); rf_prom_init'ed again. NULL: no-op. */
void rf_prom_free(struct rf_prom *p);

/*
 * Hands the text over: *out a NUL-terminated string the caller frees with
 * free() ("" when nothing was written), p freed. Returns 0, or p->error
 * (-ENOMEM) with *out NULL.
 */
int rf_prom_take(struct rf_prom *p, char **out);

/* Adds name="value" (value escaped; NULL: "") to the labels every later sample starts with.
   Returns 0 or -ENOMEM. */
int rf_prom_const_label(struct rf_prom *p, const char *name, const char *value);

/* Writes "# HELP name help" (help escaped) and "# TYPE name type", unless this text has
   them already for name. */
void rf_prom_family(struct rf_prom *p, const char *name, const char *type, const char *help);

/* Opens a sample of family name: its name and the constant labels. rf_prom_label adds labels;
   rf_prom_u64, rf_prom_i64 or rf_prom_double closes it with its value. */
void rf_prom_sample(struct rf_prom *p, const char *name);

/* Adds name="value" to the open sample, value escaped (NULL: ""). */
void rf_prom_label(struct rf_prom *p, const char *name, const char *value);

/* Closes the open sample with value v and a newline. */
void rf_prom_u64(struct rf_prom *p, uint64_t v);
void rf_prom_i64(struct rf_prom *p, int64_t v);
void rf_prom_double(struct rf_prom *p, double v);

/* Appends n bytes of s as they are: lines another writer already formatted (exec's parent
   merging its children's texts). */
void rf_prom_raw(struct rf_prom *p, const char *s, size_t n);

#ifdef __cplusplus
}
#endif

#endif
