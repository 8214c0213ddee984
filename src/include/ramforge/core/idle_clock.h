/*
 * The idle clock of a long-running program (serve's worker, exec's engine):
 * "no submission for idle_ns and none in flight" on CLOCK_MONOTONIC, and
 * the one conversion of a monotonic deadline to the CLOCK_REALTIME
 * timespec that pthread_cond_timedwait takes (a condition variable
 * initialized statically waits on CLOCK_REALTIME).
 *
 * Plain state, no lock of its own: the caller keeps the clock under the
 * one lock that also guards its submissions (serve: sv->mu; exec:
 * table_mu) and reads rf_idle_clock_due under that lock. A submission
 * counts from its start (rf_idle_clock_submit) to its end
 * (rf_idle_clock_finish); the clock runs from the later of the two, so a
 * long decode is never followed at once by an idle boundary. An idle
 * boundary is due once per quiet period: after the operation it ended
 * (rf_idle_clock_closed), the clock waits for the next submission.
 */
#ifndef RAMFORGE_IDLE_CLOCK_H
#define RAMFORGE_IDLE_CLOCK_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

struct rf_idle_clock {
    uint64_t idle_ns;          /* quiet time before the idle boundary; 0: never due */
    uint64_t last_activity_ns; /* CLOCK_MONOTONIC: the last submission's start or end */
    uint64_t submits;          /* submissions started so far */
    uint64_t submits_closed;   /* submits when the last operation ended */
    uint32_t in_flight;        /* submissions started and not finished */
};

enum rf_idle_due {
    RF_IDLE_NOT_DUE = 0, /* submissions pending: due at *due_ns */
    RF_IDLE_DUE,         /* run the idle boundary now */
    RF_IDLE_QUIET,       /* nothing to end: no submission since the last operation
                            ended, one in flight, or idle_ns 0 (wait for a signal) */
};

/* A clock of idle_ns (0: never due), started at now_ns with nothing pending. */
void rf_idle_clock_init(struct rf_idle_clock *c, uint64_t idle_ns, uint64_t now_ns);

/* A submission starts at now_ns (one more in flight). */
void rf_idle_clock_submit(struct rf_idle_clock *c, uint64_t now_ns);

/* A submission started with rf_idle_clock_submit ends at now_ns. */
void rf_idle_clock_finish(struct rf_idle_clock *c, uint64_t now_ns);

/* Activity that starts and ends at now_ns (a load, a wake): pending, the clock restarted. */
void rf_idle_clock_touch(struct rf_idle_clock *c, uint64_t now_ns);

/* Whether submissions started since the last operation ended (the operation is open). */
bool rf_idle_clock_pending(const struct rf_idle_clock *c);

/*
 * Whether the idle boundary is due at now_ns; with RF_IDLE_NOT_DUE,
 * *due_ns (may be NULL) is the monotonic time it will be, if nothing is
 * submitted before.
 */
enum rf_idle_due rf_idle_clock_due(const struct rf_idle_clock *c, uint64_t now_ns,
                                   uint64_t *due_ns);

/*
 * The operation that covered the first `submits` submissions ended (the
 * caller read c->submits before the boundary; any submitted meanwhile stay
 * pending).
 */
void rf_idle_clock_closed(struct rf_idle_clock *c, uint64_t submits);

/*
 * The CLOCK_REALTIME time, for pthread_cond_timedwait, that lies
 * deadline_ns - now_ns from now (deadline and now monotonic; a deadline
 * already past is now).
 */
struct timespec rf_deadline_realtime(uint64_t deadline_ns, uint64_t now_ns);

#ifdef __cplusplus
}
#endif

#endif
