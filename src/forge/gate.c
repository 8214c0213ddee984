/* The model-scoped execution gate (see gate.h for the states and invariant). */
#include "gate.h"

#include <assert.h>
#include <errno.h>

static inline bool gate_invariant(const struct forge_gate *g)
{
    return !(g->in_flight > 0 && g->releasing);
}

void forge_gate_init(struct forge_gate *g)
{
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    g->in_flight = 0;
    g->active = 0;
    g->releasing = false;
    g->execution_generation = 0;
}

void forge_gate_destroy(struct forge_gate *g)
{
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
}

void forge_gate_context_opened(struct forge_gate *g)
{
    pthread_mutex_lock(&g->mu);
    g->active++;
    pthread_mutex_unlock(&g->mu);
}

void forge_gate_context_closed(struct forge_gate *g)
{
    pthread_mutex_lock(&g->mu);
    assert(g->active > 0);
    g->active--;
    pthread_mutex_unlock(&g->mu);
}

void forge_gate_submit(struct forge_gate *g)
{
    pthread_mutex_lock(&g->mu);
    while (g->releasing)
        pthread_cond_wait(&g->cv, &g->mu);
    g->in_flight++;
    assert(gate_invariant(g));
    pthread_mutex_unlock(&g->mu);
}

void forge_gate_complete(struct forge_gate *g)
{
    pthread_mutex_lock(&g->mu);
    assert(g->in_flight > 0);
    g->in_flight--;
    g->execution_generation++;
    pthread_mutex_unlock(&g->mu);
}

int forge_gate_try_release(struct forge_gate *g)
{
    int rc = 0;

    pthread_mutex_lock(&g->mu);
    if (g->in_flight > 0 || g->releasing)
        rc = -EBUSY;
    else
        g->releasing = true;
    assert(gate_invariant(g));
    pthread_mutex_unlock(&g->mu);
    return rc;
}

void forge_gate_end_release(struct forge_gate *g)
{
    pthread_mutex_lock(&g->mu);
    assert(g->releasing);
    g->releasing = false;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

void forge_gate_snapshot(struct forge_gate *g, uint32_t *in_flight, uint32_t *active,
                         uint64_t *execution_generation)
{
    pthread_mutex_lock(&g->mu);
    *in_flight = g->in_flight;
    *active = g->active;
    *execution_generation = g->execution_generation;
    pthread_mutex_unlock(&g->mu);
}
