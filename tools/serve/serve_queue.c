/*
 * ramforge serve's job queue (serve_queue.h): the jobs, their references,
 * and the FIFO between the HTTP threads and the worker.
 */
#include "serve_queue.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "serve.h"
#include "serve_request.h"

struct serve_job *serve_job_new(void)
{
    struct serve_job *j = calloc(1, sizeof(*j));
    if (!j)
        return NULL;
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    atomic_init(&j->cancelled, false);
    j->refs = 1;
    j->stop_type = "none";
    j->stopping_word = "";
    j->return_tokens = true;
    return j;
}

void serve_job_put(struct serve_job *j)
{
    if (!j)
        return;
    pthread_mutex_lock(&j->mu);
    bool last = --j->refs == 0;
    pthread_mutex_unlock(&j->mu);
    if (!last)
        return;
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->cv);
    serve_request_free(j);
    free(j->text);
    free(j->tokens);
    free(j->ends);
    free(j->probs);
    free(j->top_ids);
    free(j->top_p_of);
    free(j->top_n);
    free(j->progress_done);
    free(j->progress_ns);
    free(j);
}

void serve_job_finish(struct serve_job *j, int status, const char *fmt, ...)
{
    pthread_mutex_lock(&j->mu);
    j->status = status;
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(j->message, sizeof(j->message), fmt, ap);
        va_end(ap);
    }
    j->done = true;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

bool serve_enqueue(struct serve *sv, struct serve_job *j, char *why, size_t why_len)
{
    struct serve_queue *q = &sv->queue;
    bool ok = false;
    pthread_mutex_lock(&sv->mu);
    if (atomic_load(&sv->stopping)) {
        snprintf(why, why_len, "the server is shutting down");
    } else if (q->n >= (size_t)sv->o->queue) {
        snprintf(why, why_len, "the request queue is full (%zu waiting, --queue %lld)", q->n,
                 sv->o->queue);
        sv->rejected_queue_full++;
    } else {
        pthread_mutex_lock(&j->mu);
        j->refs++;
        pthread_mutex_unlock(&j->mu);
        j->next = NULL;
        if (q->tail)
            q->tail->next = j;
        else
            q->head = j;
        q->tail = j;
        q->n++;
        pthread_cond_broadcast(&sv->cv);
        ok = true;
    }
    pthread_mutex_unlock(&sv->mu);
    return ok;
}

struct serve_job *serve_dequeue(struct serve *sv)
{
    struct serve_queue *q = &sv->queue;
    struct serve_job *j = q->head;
    if (!j)
        return NULL;
    q->head = j->next;
    if (!q->head)
        q->tail = NULL;
    q->n--;
    return j;
}

void serve_queue_drain(struct serve *sv)
{
    struct serve_job *j;
    while ((j = serve_dequeue(sv))) {
        serve_job_finish(j, 503, "the server is shutting down");
        serve_job_put(j);
    }
}
