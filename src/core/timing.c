/* Execution timers: named, optional nanosecond durations (see timing.h). */
#include "ramforge/core/timing.h"

#include <errno.h>
#include <string.h>
#include <time.h>

uint64_t rf_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void rf_timing_init(struct rf_timing *t)
{
    memset(t, 0, sizeof(*t));
}

void rf_timing_set(struct rf_timing *t, enum rf_timer k, uint64_t ns)
{
    if ((unsigned)k >= RF_TIMER_N)
        return;
    t->has[k] = true;
    t->ns[k] = ns;
}

int rf_timing_add(struct rf_timing *t, enum rf_timer k, uint64_t ns)
{
    uint64_t sum;

    if ((unsigned)k >= RF_TIMER_N)
        return -EINVAL;
    if (__builtin_add_overflow(t->has[k] ? t->ns[k] : 0, ns, &sum))
        return -EOVERFLOW;
    t->has[k] = true;
    t->ns[k] = sum;
    return 0;
}

const char *rf_timer_name(enum rf_timer k)
{
    static const char *names[RF_TIMER_N] = {
        [RF_TIMER_MODEL_LOAD] = "model_load_ns",
        [RF_TIMER_PROFILE_LOAD] = "profile_load_ns",
        [RF_TIMER_HISTORY_LOAD] = "history_load_ns",
        [RF_TIMER_PREDICTION] = "prediction_ns",
        [RF_TIMER_PLANNING] = "planning_ns",
        [RF_TIMER_STAGING] = "staging_ns",
        [RF_TIMER_OBSERVATION] = "observation_ns",
        [RF_TIMER_CONTEXT_INIT] = "context_init_ns",
        [RF_TIMER_INFERENCE] = "inference_ns",
        [RF_TIMER_PROMPT] = "prompt_ns",
        [RF_TIMER_DECODE] = "decode_ns",
        [RF_TIMER_SYNCHRONIZATION] = "synchronization_ns",
        [RF_TIMER_TTFT] = "ttft_ns",
        [RF_TIMER_END_TO_END] = "end_to_end_ns",
    };
    return (unsigned)k < RF_TIMER_N ? names[k] : NULL;
}
