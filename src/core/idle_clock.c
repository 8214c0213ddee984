/*
 * The idle clock of a long-running program (ramforge/core/idle_clock.h): plain
 * counters and monotonic times, guarded by the caller's lock.
 */
#include "ramforge/core/idle_clock.h"

void rf_idle_clock_init(struct rf_idle_clock *c, uint64_t idle_ns, uint64_t now_ns)
{
    *c = (struct rf_idle_clock){.idle_ns = idle_ns, .last_activity_ns = now_ns};
}

void rf_idle_clock_submit(struct rf_idle_clock *c, uint64_t now_ns)
{
    c->submits++;
    c->in_flight++;
    if (now_ns > c->last_activity_ns)
        c->last_activity_ns = now_ns;
}

void rf_idle_clock_finish(struct rf_idle_clock *c, uint64_t now_ns)
{
    if (c->in_flight > 0)
        c->in_flight--;
    if (now_ns > c->last_activity_ns)
        c->last_activity_ns = now_ns;
}

void rf_idle_clock_touch(struct rf_idle_clock *c, uint64_t now_ns)
{
    rf_idle_clock_submit(c, now_ns);
    rf_idle_clock_finish(c, now_ns);
}

bool rf_idle_clock_pending(const struct rf_idle_clock *c)
{
    return c->submits > c->submits_closed;
}

enum rf_idle_due rf_idle_clock_due(const struct rf_idle_clock *c, uint64_t now_ns, uint64_t *due_ns)
{
    if (c->idle_ns == 0 || c->in_flight > 0 || !rf_idle_clock_pending(c))
        return RF_IDLE_QUIET;
    uint64_t due;
    if (__builtin_add_overflow(c->last_activity_ns, c->idle_ns, &due))
        return RF_IDLE_QUIET; /* never in this process's life */
    if (now_ns >= due)
        return RF_IDLE_DUE;
    if (due_ns)
        *due_ns = due;
    return RF_IDLE_NOT_DUE;
}

void rf_idle_clock_closed(struct rf_idle_clock *c, uint64_t submits)
{
    if (submits > c->submits_closed && submits <= c->submits)
        c->submits_closed = submits;
}

struct timespec rf_deadline_realtime(uint64_t deadline_ns, uint64_t now_ns)
{
    struct timespec ts;
    uint64_t wait = deadline_ns > now_ns ? deadline_ns - now_ns : 0;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += (time_t)(wait / 1000000000ull);
    ts.tv_nsec += (long)(wait % 1000000000ull);
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}
