/*
 * One execution gate per llama_model instance. Each forge model carries the
 * gate its leases and releases go through (gate.h); two forge models bound
 * to the same llama_model (two sessions wrapping one model) would bring two
 * gates, and one session would release pages while the other held a lease.
 * So a forge model claims its llama_model here, in a process-wide list, and
 * a second claim of the same instance is refused with -EBUSY until the
 * first forge model is freed. Claims are few (one per loaded model): a
 * linked list under one mutex.
 */
#include "forge_internal.h"

#include <errno.h>
#include <pthread.h>

static pthread_mutex_t claim_mu = PTHREAD_MUTEX_INITIALIZER;
static struct forge_model *claimed; /* linked through next_claim */

int forge_model_claim(struct forge_model *m)
{
    int rc = 0;

    pthread_mutex_lock(&claim_mu);
    for (const struct forge_model *p = claimed; p; p = p->next_claim)
        if (p->model == m->model) {
            rc = -EBUSY;
            goto out;
        }
    m->next_claim = claimed;
    claimed = m;
    m->claimed = true;
out:
    pthread_mutex_unlock(&claim_mu);
    return rc;
}

void forge_model_unclaim(struct forge_model *m)
{
    if (!m->claimed)
        return;
    pthread_mutex_lock(&claim_mu);
    for (struct forge_model **pp = &claimed; *pp; pp = &(*pp)->next_claim)
        if (*pp == m) {
            *pp = m->next_claim;
            break;
        }
    m->claimed = false;
    pthread_mutex_unlock(&claim_mu);
}
