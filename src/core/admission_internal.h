/*
 * Admission's private interface inside core: the projection that
 * admission_estimate.c computes and admission.c decides over.
 */
#ifndef RAMFORGE_CORE_ADMISSION_INTERNAL_H
#define RAMFORGE_CORE_ADMISSION_INTERNAL_H

#include <stdarg.h>

#include "ramforge/core/admission.h"
#include "ramforge/core/streaming.h"

/* The least room for weights that lets a decode progress by evicting and re-reading them:
   the floor of the streaming window's minimum (streaming.h), one layer at least. */
#define RF_ADMIT_MIN_WINDOW_BYTES (RF_STREAM_MIN_WINDOW_BYTES / 2)

/*
 * Adds fmt's text to out->reason whole, as a new sentence (sentence true:
 * the one before ended with a full stop) or glued on as a clause; what
 * does not fit is left out, with every later part, and RF_ADMISSION_CUT
 * ends the reason (reason_cut). Never cuts a part in the middle.
 */
void rf_admission_reason_add(struct rf_admission_result *a, bool sentence, const char *fmt,
                             va_list ap);

/*
 * Rule 5b (admission_text.c): the working set fits out->unbound_level's run
 * room only because that limit cannot bind the model's pages: outcome
 * AdmittedWithWarning, cause not_bound, and the reason saying so.
 */
void rf_admission_not_bound(const struct rf_admission_input *in, struct rf_admission_result *out);

/*
 * A MoE model (in->experts, admission_experts.c): sets out's expert figures
 * (has_experts, the cache the run room of c leaves beyond the dense part
 * and the anonymous memory, its expected hit rate and the bytes streamed
 * per token); nothing for a dense model or a level whose working set was
 * not compared.
 */
void rf_admission_experts_figures(const struct rf_admission_input *in,
                                  struct rf_admission_result *out,
                                  const struct rf_admission_level_check *c);

/* Glues "; streams experts: X bytes per token, expected hit rate H ..." to the reason. */
void rf_admission_experts_note(struct rf_admission_result *out);

/*
 * The verdict when the cache's minimum (k experts per layer) does not fit
 * beside the dense part and the anonymous memory at c: outcome o, cause
 * thrash, a reason naming what cannot fit.
 */
void rf_admission_experts_refuse(const struct rf_admission_input *in,
                                 struct rf_admission_result *out, enum rf_admission_outcome o,
                                 const struct rf_admission_level_check *c);

/* a - b floored at 0. */
static inline uint64_t rf_admission_sat_sub(uint64_t a, uint64_t b)
{
    return a > b ? a - b : 0;
}

/*
 * The request, growth and anonymous projection into out. Returns NULL, or
 * a static phrase naming what is missing (Unknown), or "overflow".
 */
const char *rf_admission_project(const struct rf_admission_input *in,
                                 struct rf_admission_result *out);

/*
 * Checks one level c of out's hierarchy against out's projection. Returns
 * false when a projected figure overflows.
 */
bool rf_admission_check_level(const struct rf_admission_input *in, struct rf_admission_result *out,
                              struct rf_admission_level_check *c);

/*
 * Rule 4b: when no cgroup binds and in->host was read, compares the host
 * (admission_host.c) and fills out's host figures, has_projected_charge
 * and a hard excess. Returns false when the host's figures are unknown
 * (out->host_source then says which); true otherwise.
 */
bool rf_admission_check_host(const struct rf_admission_input *in, struct rf_admission_result *out);

/* Starts the reason of a hard excess at the host (Rejected) or its fit (Admitted). */
void rf_admission_host_sentence(struct rf_admission_result *out, char *buf, size_t size);

#endif
