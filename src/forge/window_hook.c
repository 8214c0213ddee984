/*
 * The read-ahead window for contexts an application creates itself
 * (forge_window.h): a hook per model, the window installed now (one an
 * operation), and each context's decoration, the eval callback that
 * reaches the window of the decode in progress.
 *
 * Locking: the hook's rwlock. A decode holds it shared while no window is
 * installed (decodes of several contexts run together, as without ramforge)
 * and exclusive while one is (the window's pointer swap and its slots are
 * one decode's); installing or removing a window takes it exclusive, so it
 * never changes under a decode. Writers are preferred: a stream of
 * windowless decodes does not hold off an operation's window.
 */
#include "forge_internal.h"

#include "ramforge/forge/forge_routing.h"
#include "ramforge/forge/forge_window.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "llama.h"

struct forge_window_hook {
    pthread_rwlock_t lock;       /* above */
    struct forge_window *window; /* installed (written under lock, exclusive) */
};

struct forge_window_decoration {
    struct forge_window_hook *h;     /* NULL: no window, the routing's link alone */
    struct forge_routing_link *link; /* the MoE routing's, wrapping the application's */
    struct forge_eval_chain app;     /* the application's cb_eval and user data (or the link's) */
    struct forge_window *active;     /* the window of the decode in progress; NULL: none */
    bool held;                       /* the decode in progress holds h->lock */
};

int forge_window_hook_create(struct forge_window_hook **out)
{
    if (!out)
        return -EINVAL;
    struct forge_window_hook *h = calloc(1, sizeof(*h));
    pthread_rwlockattr_t a;
    if (!h)
        return -ENOMEM;
    pthread_rwlockattr_init(&a);
    pthread_rwlockattr_setkind_np(&a, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    int rc = -pthread_rwlock_init(&h->lock, &a);
    pthread_rwlockattr_destroy(&a);
    if (rc < 0) {
        free(h);
        return rc;
    }
    *out = h;
    return 0;
}

void forge_window_hook_free(struct forge_window_hook *h)
{
    if (!h)
        return;
    pthread_rwlock_destroy(&h->lock);
    free(h);
}

struct forge_window *forge_window_hook_set(struct forge_window_hook *h, struct forge_window *w)
{
    pthread_rwlock_wrlock(&h->lock);
    struct forge_window *old = h->window;
    h->window = w;
    pthread_rwlock_unlock(&h->lock);
    return old;
}

/* The decorated cb_eval: the window's (chaining the application's) during a windowed decode,
   else the application's alone; none: every node computed at once (ask false). */
static bool decorated_eval(struct ggml_tensor *t, bool ask, void *ud)
{
    struct forge_window_decoration *d = ud;
    if (d->active)
        return forge_window_eval(d->active, t, ask, &d->app);
    return d->app.cb ? d->app.cb(t, ask, d->app.ud) : !ask;
}

int forge_window_decorate(struct forge_window_hook *h, struct llama_context_params *p,
                          struct forge_window_decoration **out)
{
    if (!h) {
        if (out)
            *out = NULL;
        return -EINVAL;
    }
    return forge_window_decorate_routed(h, NULL, p, out);
}

int forge_window_decorate_routed(struct forge_window_hook *h, struct forge_routing *routing,
                                 struct llama_context_params *p,
                                 struct forge_window_decoration **out)
{
    if (!out)
        return -EINVAL;
    *out = NULL;
    if ((!h && !routing) || !p)
        return -EINVAL;
    struct forge_window_decoration *d = calloc(1, sizeof(*d));
    if (!d)
        return -ENOMEM;
    struct llama_context_params saved = *p;
    int rc = routing ? forge_routing_link(routing, p, &d->link) : 0; /* the app's inside */
    if (rc < 0) {
        free(d);
        *p = saved;
        return rc;
    }
    d->h = h;
    d->app = (struct forge_eval_chain){.cb = p->cb_eval, .ud = p->cb_eval_user_data};
    p->cb_eval = decorated_eval;
    p->cb_eval_user_data = d;
    *out = d;
    return 0;
}

void forge_window_decoration_free(struct forge_window_decoration *d)
{
    if (d)
        forge_routing_link_free(d->link);
    free(d);
}

void forge_window_hook_decode_begin(struct forge_window_decoration *d)
{
    if (!d || !d->h)
        return;
    struct forge_window_hook *h = d->h;
    pthread_rwlock_rdlock(&h->lock);
    if (h->window) { /* one decode at a time through the window: exclusive */
        pthread_rwlock_unlock(&h->lock);
        pthread_rwlock_wrlock(&h->lock);
    }
    d->active = h->window; /* NULL: removed meanwhile (held exclusive all the same) */
    d->held = true;
}

void forge_window_hook_decode_end(struct forge_window_decoration *d)
{
    if (!d || !d->held)
        return;
    forge_window_decode_end(d->active); /* NULL: no-op */
    d->active = NULL;
    d->held = false;
    pthread_rwlock_unlock(&d->h->lock);
}
