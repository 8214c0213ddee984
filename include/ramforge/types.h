/*
 * The few types the installed interface shares with the library's inside:
 * the RF_API marker of an exported call and the enums a session's params
 * and accessors name (policy profile, release mode, admission mode and
 * outcome). Installed with session.h and error.h; everything else of
 * ramforge stays inside the library (src/include/ramforge/, not installed).
 *
 * Plain C, no other header of the project: the core layer includes it too
 * (its policy and admission headers use these enums), so a value means the
 * same thing in the session's params, the planner and the report.
 */
#ifndef RAMFORGE_TYPES_H
#define RAMFORGE_TYPES_H

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Marks a call of the installed interface: libramforge.so is built with
 * -fvisibility=hidden, so only RF_API calls are exported (as llama.h does
 * with LLAMA_API). In a program that includes the header it changes nothing.
 */
#if defined(__GNUC__) || defined(__clang__)
#define RF_API __attribute__((visibility("default")))
#else
#define RF_API
#endif

/*
 * The specification's policy profiles. Plans: all but off. Mutates (after a
 * safe boundary): conservative, memory-bound, reuse-aware, active. Needs a
 * target: memory-bound, active.
 */
enum rf_policy_profile {
    RF_POLICY_OFF = 0,      /* no policy action */
    RF_POLICY_OBSERVE,      /* memory-bound plan for inspection only */
    RF_POLICY_CONSERVATIVE, /* only tensors with zero shared page bytes */
    RF_POLICY_MEMORY_BOUND, /* large candidates until the soft target is met */
    RF_POLICY_REUSE_AWARE,  /* memory-bound, cold-first by an access profile */
    RF_POLICY_ACTIVE,       /* compatibility alias for memory-bound */
    RF_POLICY_STREAMING,    /* observe, and for a model over the limit pin a resident set
                               (mlock) while the rest streams; never releases */
};

/* How a mutating policy releases the file pages of the weights it selected. */
enum rf_release_mode {
    RF_RELEASE_DONTNEED = 0, /* MADV_DONTNEED: drops mapping RSS; page cache stays */
    RF_RELEASE_PAGEOUT = 1,  /* MADV_PAGEOUT: reclaims the pages (Linux 5.4+) */
};

/* The verdict of an admission decision. */
enum rf_admission_outcome {
    RF_ADMIT_ADMITTED = 0, /* fits every limit and the soft target */
    RF_ADMIT_WARNING,      /* AdmittedWithWarning: a soft bound, or thrashing outside enforce */
    RF_ADMIT_REJECTED,     /* over a hard limit, or arithmetic overflow */
    RF_ADMIT_UNKNOWN,      /* a figure the decision needs is unknown */
};

/* What the caller does with an outcome (whether it is refused). */
enum rf_admission_mode {
    RF_ADMISSION_WARN = 0, /* default: report; refuse only a charge over a hard limit */
    RF_ADMISSION_ENFORCE,  /* refuse Rejected and Unknown */
    RF_ADMISSION_OFF,      /* never refuse */
};

#ifdef __cplusplus
}
#endif

#endif
