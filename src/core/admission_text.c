/*
 * Admission's texts for a person at a terminal: one appended sentence
 * that never glues to the one before, the one-line headline of a decision
 * (the full reason stays in the report and --verbose), and the ways out of
 * a decision with the bytes each would save. Bytes are written as "N
 * bytes" for the CLI to put in IEC units.
 */
#include "ramforge/admission.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void rf_admission_append(struct rf_admission_result *a, const char *fmt, ...)
{
    va_list ap;

    if (!a || !fmt)
        return;
    size_t len = strnlen(a->reason, sizeof(a->reason) - 1);
    if (len && a->reason[len - 1] != '.' && len + 2 < sizeof(a->reason))
        a->reason[len++] = '.';
    if (len && len + 2 < sizeof(a->reason))
        a->reason[len++] = ' ';
    a->reason[len] = '\0';
    va_start(ap, fmt);
    vsnprintf(a->reason + len, sizeof(a->reason) - len, fmt, ap);
    va_end(ap);
}

static const struct rf_admission_record *record_of(const struct rf_admission_result *a,
                                                   const char *name)
{
    for (size_t i = 0; i < a->n_records; i++)
        if (a->records[i].has && strcmp(a->records[i].name, name) == 0)
            return &a->records[i];
    return NULL;
}

/* The limit compared at the thrash level: the hard limit, else memory.high. */
static uint64_t thrash_limit(const struct rf_admission_result *a)
{
    const struct rf_cgroup_level *l = &a->cgroups[a->thrash_level].level;

    return l->limit.has ? l->limit.bytes : l->high.bytes;
}

/* The first clause of the reason (up to "; " or ", so"), for causes without figures here. */
static void first_clause(const struct rf_admission_result *a, char *buf, size_t len)
{
    size_t n = strcspn(a->reason, ";");
    const char *so = strstr(a->reason, ", so ");

    if (so && (size_t)(so - a->reason) < n)
        n = (size_t)(so - a->reason);
    if (n > 150)
        n = 150;
    snprintf(buf, len, "%.*s", (int)n, a->reason);
}

void rf_admission_headline(const struct rf_admission_result *a, char *buf, size_t len)
{
    const struct rf_admission_record *ws = a ? record_of(a, "file_working_set") : NULL;

    if (!a || !buf || !len)
        return;
    if (a->cause == RF_ADMIT_CAUSE_THRASH && a->has_thrash_level && ws) {
        if (a->streaming)
            snprintf(buf, len,
                     "streams: %" PRIu64 " bytes of weights read per token, %" PRIu64
                     " bytes stay cached under the limit of %" PRIu64 " bytes, the rest re-read",
                     ws->bytes, a->working_set_fit_bytes, thrash_limit(a));
        else
            snprintf(buf, len,
                     "will thrash: %" PRIu64 " bytes of weights read per token, only %" PRIu64
                     " bytes fit under the limit of %" PRIu64 " bytes",
                     ws->bytes, a->working_set_fit_bytes, thrash_limit(a));
    } else if (a->cause == RF_ADMIT_CAUSE_HARD_LIMIT && a->has_hard_excess && a->has_binding) {
        const struct rf_admission_level_check *c = &a->cgroups[a->binding];
        snprintf(buf, len,
                 "the projected charge of %" PRIu64 " bytes exceeds the hard limit of %" PRIu64
                 " bytes by %" PRIu64 " bytes: the kernel would kill the run",
                 c->projected_bytes, c->level.limit.bytes, a->hard_excess_bytes);
    } else if (a->cause == RF_ADMIT_CAUSE_HARD_LIMIT && a->has_hard_excess) {
        snprintf(buf, len,
                 "the projected memory of %" PRIu64 " bytes exceeds the %" PRIu64
                 " bytes the host can give by %" PRIu64 " bytes",
                 a->host_projected_bytes, a->host_room_bytes, a->hard_excess_bytes);
    } else if (a->cause == RF_ADMIT_CAUSE_HARD_LIMIT && a->has_thrash_level) {
        snprintf(buf, len,
                 "less than a minimum window of weights fits beside %" PRIu64
                 " bytes of anonymous memory under the limit of %" PRIu64
                 " bytes: the kernel would kill the run",
                 a->anonymous_bytes, thrash_limit(a));
    } else if (a->cause == RF_ADMIT_CAUSE_SOFT_LIMIT && a->has_high_excess) {
        snprintf(buf, len,
                 "the projected charge exceeds memory.high by %" PRIu64
                 " bytes: the kernel throttles and reclaims above it",
                 a->high_excess_bytes);
    } else if (a->cause == RF_ADMIT_CAUSE_SOFT_TARGET && a->has_excess) {
        snprintf(buf, len,
                 "the projected process memory of %" PRIu64 " bytes exceeds the soft target of "
                 "%" PRIu64 " bytes by %" PRIu64 " bytes",
                 a->request_bytes, a->soft_target_bytes, a->excess_bytes);
    } else if (a->cause == RF_ADMIT_CAUSE_FITS && a->has_binding) {
        const struct rf_admission_level_check *c = &a->cgroups[a->binding];
        snprintf(buf, len,
                 "the projected charge of %" PRIu64 " bytes fits the hard limit of %" PRIu64
                 " bytes (room %" PRIu64 " bytes)",
                 c->projected_bytes, c->level.limit.bytes, c->room_bytes);
    } else {
        first_clause(a, buf, len);
    }
}

/* Appends one line to buf (its length at *n) when there is room for all of it. */
__attribute__((format(printf, 4, 5))) static void way(char *buf, size_t len, size_t *n,
                                                      const char *fmt, ...)
{
    char line[256];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    size_t l = strlen(line);
    if (*n + (*n ? 1 : 0) + l + 1 > len)
        return;
    if (*n)
        buf[(*n)++] = '\n';
    memcpy(buf + *n, line, l + 1);
    *n += l;
}

void rf_admission_ways_out(const struct rf_admission_result *a, char *buf, size_t len)
{
    size_t n = 0;

    if (!buf || !len)
        return;
    buf[0] = '\0';
    if (!a || a->outcome == RF_ADMIT_ADMITTED || a->cause == RF_ADMIT_CAUSE_UNKNOWN ||
        a->cause == RF_ADMIT_CAUSE_OVERFLOW)
        return;
    const struct rf_admission_record *rp = record_of(a, "repacked_weights"),
                                     *kv = record_of(a, "kv_cache"),
                                     *ws = record_of(a, "file_working_set");
    bool thrash = a->cause == RF_ADMIT_CAUSE_THRASH && a->has_working_set_fit && ws;

    if (a->has_hard_excess)
        way(buf, len, &n, "a limit larger by %" PRIu64 " bytes (the projected excess)",
            a->hard_excess_bytes);
    else if (thrash && ws->bytes > a->working_set_fit_bytes)
        way(buf, len, &n, "a limit larger by %" PRIu64 " bytes keeps every weight cached",
            ws->bytes - a->working_set_fit_bytes);
    if (rp && rp->bytes)
        way(buf, len, &n, "--no-repack saves the %" PRIu64 " bytes of repacked weight copies",
            rp->bytes);
    if (kv && kv->bytes >= 2)
        way(buf, len, &n, "half the context (-c) saves %" PRIu64 " bytes of the KV cache",
            kv->bytes / 2);
    if (!a->streaming && (thrash || (a->has_hard_excess && !a->excess_likely_anonymous)))
        way(buf, len, &n,
            "--residency-policy streaming pins what fits and re-reads the rest from storage");
}
