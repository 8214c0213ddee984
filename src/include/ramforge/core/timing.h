/*
 * Execution timing (spec: "Execution timing"): separate timers for model
 * load, observation, planning, staging, inference (prompt processing and
 * decode), explicit synchronization, time to first token and end-to-end.
 *
 * All values are nanoseconds of CLOCK_MONOTONIC. Nested timers are never
 * summed to invent another: end-to-end is measured from command entry to
 * the end of the work (setup, staging, inference, synchronization), not
 * added up, and excludes report serialization. TTFT excludes staging.
 */
#ifndef RAMFORGE_TIMING_H
#define RAMFORGE_TIMING_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* CLOCK_MONOTONIC now, nanoseconds. */
uint64_t rf_now_ns(void);

enum rf_timer {
    RF_TIMER_MODEL_LOAD = 0, /* llama_model_load_from_file + tensor table + mapping */
    RF_TIMER_PROFILE_LOAD,   /* reading a persisted access profile */
    RF_TIMER_HISTORY_LOAD,   /* reading prediction history */
    RF_TIMER_PREDICTION,
    RF_TIMER_PLANNING,        /* inventory build and policy plan */
    RF_TIMER_STAGING,         /* prefetch hints before inference */
    RF_TIMER_OBSERVATION,     /* access probe, smaps/status/cgroup reads */
    RF_TIMER_CONTEXT_INIT,    /* llama_init_from_model for the session */
    RF_TIMER_INFERENCE,       /* prompt processing start to the last token */
    RF_TIMER_PROMPT,          /* the prompt's llama_decode */
    RF_TIMER_DECODE,          /* first sampled token to the last */
    RF_TIMER_SYNCHRONIZATION, /* explicit llama_synchronize, summed over calls */
    RF_TIMER_TTFT,            /* inference start to the first sampled token */
    RF_TIMER_END_TO_END,      /* command entry to the end of the work */
    RF_TIMER_N
};

struct rf_timing {
    bool has[RF_TIMER_N];
    uint64_t ns[RF_TIMER_N]; /* meaningful where has[] */
};

/* All timers absent. */
void rf_timing_init(struct rf_timing *t);

/* Records a measured duration for timer k (replacing any earlier one). */
void rf_timing_set(struct rf_timing *t, enum rf_timer k, uint64_t ns);

/* Adds ns to timer k (for a stage run in pieces); -EOVERFLOW on overflow. */
int rf_timing_add(struct rf_timing *t, enum rf_timer k, uint64_t ns);

/* Report key: "model_load_ns", "ttft_ns", ...; NULL for a bad value. */
const char *rf_timer_name(enum rf_timer k);

#ifdef __cplusplus
}
#endif

#endif
