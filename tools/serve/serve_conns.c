/*
 * ramforge serve's open connections (serve_http.h): which of them wait for
 * a request head (new, or keep-alive between requests) and since when, so
 * that idle connections give way to work. A request head that arrives
 * beyond --max-connections open connections closes the connections that
 * have waited longest for theirs until the count is back at the limit; a
 * new connection does so beyond the limit and SERVE_HEALTH_RESERVE. So many
 * addresses each under --max-connections-per-address cannot fill the table
 * with heads that never end: /health, or any request, from anyone is
 * answered at once rather than after --header-timeout. A connection with
 * its head in (its body, the queue, the reply) is never closed for another;
 * with --max-connections of them, the reserve's connections get /health
 * alone (others 503).
 *
 * Closing is shutdown(2) of the connection's socket, libmicrohttpd's own way
 * to stop a connection thread from another thread: its poll wakes, reads
 * the end and closes. The socket stays open until libmicrohttpd's cleanup,
 * which calls serve_conn_notify (CLOSED) first, under conns_mu, so a socket
 * in the table is never one closed and reused.
 */
#include "serve_http.h"

#include <stdlib.h>
#include <sys/socket.h>

/* A connection of the table (MHD's socket_context). */
struct serve_conn {
    int fd;
    bool waiting; /* on the waiting list: no request head since it opened or last answered */
    bool evicted; /* closed for another; no longer counted in conns_open */
    struct serve_conn *prev, *next; /* the waiting list, oldest first */
};

static void unlink_waiting(struct serve *sv, struct serve_conn *e)
{
    if (!e->waiting)
        return;
    *(e->prev ? &e->prev->next : &sv->waiting_head) = e->next;
    *(e->next ? &e->next->prev : &sv->waiting_tail) = e->prev;
    e->prev = e->next = NULL;
    e->waiting = false;
}

static void append_waiting(struct serve *sv, struct serve_conn *e)
{
    e->prev = sv->waiting_tail;
    e->next = NULL;
    *(sv->waiting_tail ? &sv->waiting_tail->next : &sv->waiting_head) = e;
    sv->waiting_tail = e;
    e->waiting = true;
}

/* conns_mu held: while more than limit are open, closes the connection waiting longest but keep. */
static void evict_over(struct serve *sv, size_t limit, const struct serve_conn *keep)
{
    struct serve_conn *old;
    while (sv->conns_open > limit && (old = sv->waiting_head) && old != keep) {
        unlink_waiting(sv, old);
        old->evicted = true;
        sv->conns_open--;
        shutdown(old->fd, SHUT_RDWR);
    }
}

static struct serve_conn *conn_of(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

void serve_conn_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                       enum MHD_ConnectionNotificationCode code)
{
    struct serve *sv = cls;
    struct serve_conn *e = *socket_context;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        e = ci ? calloc(1, sizeof(*e)) : NULL;
        if (!e)
            return; /* not in the table: never closed for another, not counted */
        e->fd = ci->connect_fd;
        *socket_context = e;
        pthread_mutex_lock(&sv->conns_mu);
        sv->conns_open++;
        append_waiting(sv, e);
        evict_over(sv, (size_t)sv->o->max_connections + SERVE_HEALTH_RESERVE, e);
        pthread_mutex_unlock(&sv->conns_mu);
        return;
    }
    if (!e)
        return;
    pthread_mutex_lock(&sv->conns_mu);
    unlink_waiting(sv, e);
    if (!e->evicted)
        sv->conns_open--;
    pthread_mutex_unlock(&sv->conns_mu);
    free(e);
    *socket_context = NULL;
}

void serve_conn_head_in(struct serve *sv, struct MHD_Connection *c)
{
    struct serve_conn *e = conn_of(c);
    if (!e)
        return;
    pthread_mutex_lock(&sv->conns_mu);
    unlink_waiting(sv, e);
    if (!e->evicted)
        evict_over(sv, (size_t)sv->o->max_connections, NULL);
    pthread_mutex_unlock(&sv->conns_mu);
}

void serve_conn_head_wait(struct serve *sv, struct MHD_Connection *c)
{
    struct serve_conn *e = conn_of(c);
    if (!e)
        return;
    pthread_mutex_lock(&sv->conns_mu);
    if (!e->evicted && !e->waiting)
        append_waiting(sv, e);
    pthread_mutex_unlock(&sv->conns_mu);
}

bool serve_conns_over_limit(struct serve *sv)
{
    pthread_mutex_lock(&sv->conns_mu);
    bool over = sv->conns_open > (size_t)sv->o->max_connections;
    pthread_mutex_unlock(&sv->conns_mu);
    return over;
}
