/*
 * ramforge serve's sleep (serve.h): /props is_sleeping and what a request
 * does to it. serve's sleep is the idle release (the model stays loaded,
 * its weight pages released); with --sleep-idle-seconds it behaves as
 * llama-server's sleep does for its clients: /health, /props, /models and
 * /metrics are answered without waking it, /metrics with ramforge's part
 * as it was before the sleep (llama-server answers from a snapshot taken
 * on entering it); a request that uses the model (a generation, a
 * tokenization, a chat template, a token count) wakes it and the idle
 * time starts again, so the next idle boundary puts it back to sleep.
 */
#include <stdlib.h>

#include "ramforge/core/timing.h"
#include "serve.h"

void serve_sleep_enter(struct serve *sv)
{
    if (!sv->o->sleep)
        return;
    pthread_mutex_lock(&sv->mu);
    bool have = sv->metrics_kept != NULL;
    pthread_mutex_unlock(&sv->mu);
    char *text = have ? NULL : serve_metrics_ramforge_text(sv);
    pthread_mutex_lock(&sv->mu);
    if (text && !sv->metrics_kept) {
        sv->metrics_kept = text;
        text = NULL;
    }
    pthread_mutex_unlock(&sv->mu);
    free(text);
}

void serve_sleep_entered(struct serve *sv, enum serve_residency state)
{
    pthread_mutex_lock(&sv->mu);
    /* --sleep-idle-seconds: asleep once the weights are released to the target, also when
       nothing was left to release (a wake without a generation faults nothing back) */
    sv->sleeping =
        state == SERVE_IDLE_RELEASED || (sv->o->sleep && state != SERVE_IDLE_RELEASE_REFUSED);
    pthread_mutex_unlock(&sv->mu);
}

void serve_wake_locked(struct serve *sv)
{
    sv->sleeping = false;
    free(sv->metrics_kept);
    sv->metrics_kept = NULL;
    if (!sv->o->sleep)
        return;
    rf_idle_clock_touch(&sv->idle, rf_now_ns()); /* a wake: idle again later */
    pthread_cond_broadcast(&sv->cv);
}

void serve_wake(struct serve *sv)
{
    if (!sv->o->sleep)
        return;
    pthread_mutex_lock(&sv->mu);
    serve_wake_locked(sv);
    pthread_mutex_unlock(&sv->mu);
}
