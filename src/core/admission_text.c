/*
 * Admission's texts for a person at a terminal: one appended sentence
 * that never glues to the one before, the one-line headline of a decision
 * (the full reason stays in the report and --verbose), and the ways out of
 * a decision with the bytes each would save. Bytes are written as "N
 * bytes" for the CLI to put in IEC units.
 */
#include "admission_internal.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void rf_admission_reason_add(struct rf_admission_result *a, bool sentence, const char *fmt,
                             va_list ap)
{
    static const char cut[] = ". " RF_ADMISSION_CUT;
    char piece[RF_ADMISSION_REASON_MAX];
    size_t len = strnlen(a->reason, sizeof(a->reason) - 1);
    const char *sep = !sentence || !len ? "" : a->reason[len - 1] == '.' ? " " : ". ";

    if (a->reason_cut)
        return;
    int n = vsnprintf(piece, sizeof(piece), fmt, ap);
    if (n < 0)
        return;
    /* What is kept leaves room for the cut note, so the note always fits whole. */
    if ((size_t)n < sizeof(piece) &&
        len + strlen(sep) + (size_t)n < sizeof(a->reason) - sizeof(cut)) {
        snprintf(a->reason + len, sizeof(a->reason) - len, "%s%s", sep, piece);
        return;
    }
    a->reason_cut = true;
    snprintf(a->reason + len, sizeof(a->reason) - len, "%s",
             len && a->reason[len - 1] == '.' ? cut + 1
             : len                            ? cut
                                              : cut + 2);
}

void rf_admission_append(struct rf_admission_result *a, const char *fmt, ...)
{
    va_list ap;

    if (!a || !fmt)
        return;
    va_start(ap, fmt);
    rf_admission_reason_add(a, true, fmt, ap);
    va_end(ap);
}

void rf_admission_not_bound(const struct rf_admission_input *in, struct rf_admission_result *out)
{
    const struct rf_admission_level_check *c = &out->cgroups[out->unbound_level];
    bool loaded = in->phase == RF_ADMISSION_AFTER_LOAD;
    uint64_t held_of = loaded ? in->mapping_rss.bytes : in->model_cached.bytes;
    uint64_t held = rf_admission_sat_sub(held_of, c->unbound_bytes); /* what the level can hold */

    out->outcome = RF_ADMIT_WARNING;
    out->cause = RF_ADMIT_CAUSE_NOT_BOUND;
    out->reason[0] = '\0';
    out->reason_cut = false;
    rf_admission_append(
        out,
        "not bound: %" PRIu64
        " bytes of weights are read from the file each token and only %" PRIu64
        " bytes would fit under the hard limit of %" PRIu64
        " bytes of cgroup %s, but at least %" PRIu64
        " bytes of the model's pages are charged to another cgroup (the model %s: "
        "%" PRIu64 " bytes, more than the %" PRIu64 " bytes of it this cgroup can hold, %s"
        ": the file was cached before the run). The limit cannot evict those pages: they "
        "stay cached, the decode does not thrash, and the limit does not cap the weights. To make "
        "it bind, evict the file from the page cache before the run.",
        in->file_working_set.bytes, rf_admission_sat_sub(c->run_room_bytes, out->anonymous_bytes),
        c->level.limit.bytes, c->level.dir, c->unbound_bytes,
        loaded ? "mapping's RSS" : "file's pages in the page cache", held_of, held,
        held >= c->level.usage.bytes ? "its whole charge"
        : loaded ? "its clean mapped file pages (memory.stat) and the mapping's locked ones"
                 : "its clean file pages, mapped or not (memory.stat)");
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

/*
 * The first clause of the reason (up to "; " or ", so"), for causes without figures here; a
 * clause over 130 characters ends at a word, followed by RF_ADMISSION_HEADLINE_CUT.
 */
static void first_clause(const struct rf_admission_result *a, char *buf, size_t len)
{
    size_t n = strcspn(a->reason, ";");
    const char *so = strstr(a->reason, ", so ");
    bool cut = false;

    if (so && (size_t)(so - a->reason) < n)
        n = (size_t)(so - a->reason);
    if (n > 130) {
        for (n = 130; n > 0 && a->reason[n] != ' '; n--)
            ;
        cut = true;
    }
    snprintf(buf, len, "%.*s%s", (int)n, a->reason, cut ? RF_ADMISSION_HEADLINE_CUT : "");
}

static void headline(const struct rf_admission_result *a, char *buf, size_t len);

/* The headline, and for a MoE model under a limit the experts that stream. */
static void experts_headline(const struct rf_admission_result *a, char *buf, size_t len)
{
    headline(a, buf, len);
    size_t n = strlen(buf);
    if (a->has_experts && a->outcome != RF_ADMIT_REJECTED && a->outcome != RF_ADMIT_UNKNOWN &&
        a->cause != RF_ADMIT_CAUSE_HARD_LIMIT && n < len)
        snprintf(buf + n, len - n,
                 "; streams experts: %" PRIu64 " bytes per token, expected hit rate %.2f at this "
                 "budget",
                 a->expert_stream_bytes, a->expert_hit_rate);
}

void rf_admission_headline(const struct rf_admission_result *a, char *buf, size_t len)
{
    const struct rf_admission_record *ws = a ? record_of(a, "file_working_set") : NULL;

    if (!a || !buf || !len)
        return;
    if (a->has_experts && !a->expert_cache_min && a->cause == RF_ADMIT_CAUSE_THRASH &&
        a->has_thrash_level && ws) {
        snprintf(buf, len,
                 "cannot fit the experts' minimum: the dense part and the %" PRIu32
                 " experts of one layer a prompt batch may select need more than the %" PRIu64
                 " bytes that fit under the limit of %" PRIu64 " bytes (a token reads %" PRIu64
                 " bytes)",
                 a->n_expert, a->working_set_fit_bytes, thrash_limit(a), ws->bytes);
        return;
    }
    experts_headline(a, buf, len);
}

/* The headline of a dense model's verdict (and a MoE model's but its experts' clause). */
static void headline(const struct rf_admission_result *a, char *buf, size_t len)
{
    const struct rf_admission_record *ws = record_of(a, "file_working_set");

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
    } else if (a->cause == RF_ADMIT_CAUSE_NOT_BOUND && a->has_unbound) {
        const struct rf_admission_level_check *c = &a->cgroups[a->unbound_level];
        snprintf(buf, len,
                 "not bound: at least %" PRIu64 " bytes of the model's pages are charged to "
                 "another cgroup: the limit of %" PRIu64 " bytes cannot evict them",
                 c->unbound_bytes, c->level.limit.bytes);
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

/* saved is at least RF_ADMISSION_WAY_MIN_PERCENT percent of need (overflow-safe). */
static bool meaningful(uint64_t saved, uint64_t need)
{
    return saved >= need / 100 * RF_ADMISSION_WAY_MIN_PERCENT +
                        need % 100 * RF_ADMISSION_WAY_MIN_PERCENT / 100;
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

    if (a->cause == RF_ADMIT_CAUSE_NOT_BOUND) {
        way(buf, len, &n,
            "to make the limit bind, evict the model file from the page cache before the run");
        return;
    }
    if (a->has_hard_excess)
        way(buf, len, &n, "a limit larger by %" PRIu64 " bytes (the projected excess)",
            a->hard_excess_bytes);
    else if (thrash && ws->bytes > a->working_set_fit_bytes)
        way(buf, len, &n, "a limit larger by %" PRIu64 " bytes keeps every weight cached",
            ws->bytes - a->working_set_fit_bytes);
    /* The excess a partial way out answers; it is named only when it saves a tenth of it. */
    uint64_t need = a->has_hard_excess ? a->hard_excess_bytes
                    : thrash           ? rf_admission_sat_sub(ws->bytes, a->working_set_fit_bytes)
                    : a->cause == RF_ADMIT_CAUSE_SOFT_LIMIT ? a->high_excess_bytes
                                                            : a->excess_bytes;
    if (rp && rp->bytes && meaningful(rp->bytes, need))
        way(buf, len, &n, "--no-repack saves the %" PRIu64 " bytes of repacked weight copies",
            rp->bytes);
    if (kv && kv->bytes >= 2 && meaningful(kv->bytes / 2, need))
        way(buf, len, &n, "half the context (-c) saves %" PRIu64 " bytes of the KV cache",
            kv->bytes / 2);
    if (!a->streaming && (thrash || (a->has_hard_excess && !a->excess_likely_anonymous)))
        way(buf, len, &n,
            "--residency-policy streaming pins what fits and re-reads the rest from storage");
}
