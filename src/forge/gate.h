/*
 * The model-scoped execution gate (contract version 1), private to forge.
 *
 * A context holds a shared lease from graph submission (llama_decode) until
 * llama_synchronize or context destruction observes completion. Page
 * release takes the exclusive side without blocking: with any lease held it
 * fails with -EBUSY and changes nothing; while a release holds the gate,
 * new submissions wait until it ends, so the gate covers the whole madvise
 * call, not only a check before it.
 *
 * States of the gate (mutex-protected):
 *   open        in_flight == 0, releasing == false   submit or release may start
 *   executing   in_flight  > 0, releasing == false   submit may start, release -> EBUSY
 *   releasing   in_flight == 0, releasing == true    submit waits, release -> EBUSY
 * Invariant: never in_flight > 0 and releasing at once.
 */
#ifndef RAMFORGE_FORGE_GATE_H
#define RAMFORGE_FORGE_GATE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct forge_gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint32_t in_flight;            /* contexts between submission and completion */
    uint32_t active;               /* contexts alive */
    bool releasing;                /* a release holds the exclusive side */
    uint64_t execution_generation; /* completed executions, model-wide */
};

void forge_gate_init(struct forge_gate *g);
void forge_gate_destroy(struct forge_gate *g);

/* A context was created / destroyed. */
void forge_gate_context_opened(struct forge_gate *g);
void forge_gate_context_closed(struct forge_gate *g);

/* Takes a shared lease for one submission; waits while a release runs. */
void forge_gate_submit(struct forge_gate *g);

/* Ends the lease taken by forge_gate_submit (completion observed). */
void forge_gate_complete(struct forge_gate *g);

/* Takes the exclusive side without blocking: 0, or -EBUSY with a lease held. */
int forge_gate_try_release(struct forge_gate *g);

/* Ends the exclusive side and wakes waiting submissions. */
void forge_gate_end_release(struct forge_gate *g);

/* A consistent copy of the counters. */
void forge_gate_snapshot(struct forge_gate *g, uint32_t *in_flight, uint32_t *active,
                         uint64_t *execution_generation);

#endif
