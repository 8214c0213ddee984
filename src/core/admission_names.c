/*
 * Admission's names and parsing: the static names the report and the CLI
 * use for outcomes, modes, causes, bounds and phases (NULL for a value
 * outside its enum), the --admission parser, and rf_admission_figure_of.
 */
#include "ramforge/core/admission.h"

#include <errno.h>
#include <string.h>

static const char *const outcome_names[] = {
    [RF_ADMIT_ADMITTED] = "admitted",
    [RF_ADMIT_WARNING] = "admitted_with_warning",
    [RF_ADMIT_REJECTED] = "rejected",
    [RF_ADMIT_UNKNOWN] = "unknown",
};

static const char *const mode_names[] = {
    [RF_ADMISSION_WARN] = "warn",
    [RF_ADMISSION_ENFORCE] = "enforce",
    [RF_ADMISSION_OFF] = "off",
};

static const char *const cause_names[] = {
    [RF_ADMIT_CAUSE_FITS] = "fits",
    [RF_ADMIT_CAUSE_UNKNOWN] = "unknown",
    [RF_ADMIT_CAUSE_OVERFLOW] = "overflow",
    [RF_ADMIT_CAUSE_HARD_LIMIT] = "hard_limit",
    [RF_ADMIT_CAUSE_THRASH] = "thrash",
    [RF_ADMIT_CAUSE_SOFT_LIMIT] = "soft_limit",
    [RF_ADMIT_CAUSE_SOFT_TARGET] = "soft_target",
    [RF_ADMIT_CAUSE_NOT_BOUND] = "not_bound",
};

static const char *const bound_names[] = {
    [RF_ADMIT_BOUND_NONE] = "none",
    [RF_ADMIT_BOUND_HARD_LIMIT] = "hard_limit",
    [RF_ADMIT_BOUND_SOFT_LIMIT] = "soft_limit",
    [RF_ADMIT_BOUND_SOFT_TARGET] = "soft_target",
};

static const char *const phase_names[] = {
    [RF_ADMISSION_AFTER_LOAD] = "after_load",
    [RF_ADMISSION_PRE_LOAD] = "pre_load",
};

#define NAME_OF(table, v)                                                                          \
    ((unsigned)(v) < sizeof(table) / sizeof((table)[0]) ? (table)[(unsigned)(v)] : NULL)

const char *rf_admission_outcome_name(enum rf_admission_outcome o)
{
    return NAME_OF(outcome_names, o);
}

const char *rf_admission_mode_name(enum rf_admission_mode m)
{
    return NAME_OF(mode_names, m);
}

const char *rf_admission_cause_name(enum rf_admission_cause c)
{
    return NAME_OF(cause_names, c);
}

const char *rf_admission_bound_name(enum rf_admission_bound b)
{
    return NAME_OF(bound_names, b);
}

const char *rf_admission_phase_name(enum rf_admission_phase p)
{
    return NAME_OF(phase_names, p);
}

int rf_admission_mode_parse(const char *s, enum rf_admission_mode *out)
{
    if (!s || !out)
        return -EINVAL;
    for (size_t i = 0; i < sizeof(mode_names) / sizeof(mode_names[0]); i++) {
        if (strcmp(s, mode_names[i]) == 0) {
            *out = (enum rf_admission_mode)i;
            return 0;
        }
    }
    return -EINVAL;
}

struct rf_admission_figure rf_admission_figure_of(uint64_t bytes, enum rf_provenance provenance,
                                                  const char *source)
{
    struct rf_admission_figure f = {true, bytes, provenance, source};

    return f;
}
