/*
 * The fake native layer the session's unit tests share (no llama.cpp, no
 * /proc): the execution gate (leases and the generation they complete),
 * point-in-time samples of a scripted process with one model mapping, and
 * a page sampler that sees every page resident.
 *
 * A test embeds struct fake_native as the first member of its own state,
 * passes that state as the session's user data, and builds its table as
 *
 *     static const struct rf_session_native ops = {FAKE_NATIVE_OPS, .release = f_release};
 *
 * Its own operations (release, lock, cgroup_tree, ...) cast the user data
 * back to its state; FAKE_NATIVE_OPS's cast it to struct fake_native. The
 * figures a test checks come from the script it sets here, never from the
 * code under test.
 */
#ifndef RAMFORGE_TEST_FAKE_NATIVE_H
#define RAMFORGE_TEST_FAKE_NATIVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "../../src/session/session_internal.h"

/* The instance id of the fake's gate and of fake_native_model's model. */
#define FAKE_NATIVE_INSTANCE 7u

struct fake_native {
    /* the script */
    uint64_t page_bytes;      /* page size of the page source */
    uint64_t resident_bytes;  /* mapping RSS (and PSS) every sample reports */
    uint64_t locked_bytes;    /* smaps Locked of the mapping, on the re-read (sample_mapping) */
    bool no_locked;           /* the re-read cannot read Locked (the samples never do) */
    uint64_t anon_bytes;      /* RssAnon, in the samples when has_anon */
    bool has_anon;            /* the samples report RssAnon */
    uint64_t other_rss_bytes; /* process RSS besides the mapping and RssAnon */
    uint64_t rss_step_bytes;  /* process RSS added per sample taken (each sample its own value) */
    /* hooks; NULL: none */
    void (*on_sample)(struct fake_native *n, const char *label); /* a sample was taken */
    void (*on_lease_end)(struct fake_native *n);                 /* an execution ended */
    /* what the layer saw */
    uint64_t samples;    /* samples taken */
    uint32_t in_flight;  /* leases held now */
    uint32_t alive;      /* contexts alive (rf_session_context_alive) */
    uint64_t generation; /* executions completed */
};

/*
 * The sample of the script: mapping RSS = PSS = resident_bytes from
 * "smaps"; process RSS = resident_bytes + anon_bytes + other_rss_bytes +
 * samples * rss_step_bytes (samples counting this one); no cgroup.
 */
void fake_native_sample(void *ud, const char *label, enum rf_measure_mapping what,
                        struct rf_residency_sample *out, struct rfsys_cgroup_memory *cg);
/* The re-read: RSS = PSS = resident_bytes, Locked = locked_bytes, from "smaps". */
void fake_native_sample_mapping(void *ud, enum rf_measure_mapping what,
                                struct rf_residency_sample *out);
/* Quiescent while no lease is held; the generation counts the leases ended. */
void fake_native_lifetime(void *ud, struct rf_native_lifetime *out);
void fake_native_lease_begin(void *ud);
void fake_native_lease_end(void *ud);
void fake_native_context_opened(void *ud);
void fake_native_context_closed(void *ud);
/* "mincore" pages of page_bytes; the file cache is unknown. */
int fake_native_page_source(void *ud, struct forge_page_source *out);
/* Every page resident. */
int fake_native_sampler(void *ud, int32_t mapping, uint64_t first, uint64_t n, uint8_t *states);
void *fake_native_page_pass_begin(void *ud);
void fake_native_page_pass_end(void *pass);

/* The operations every fake table holds; a test adds its own after them. */
#define FAKE_NATIVE_OPS                                                                            \
    .lifetime = fake_native_lifetime, .sample = fake_native_sample,                                \
    .sample_mapping = fake_native_sample_mapping, .page_source = fake_native_page_source,          \
    .page_pass_begin = fake_native_page_pass_begin, .page_sampler = fake_native_sampler,           \
    .page_pass_end = fake_native_page_pass_end, .lease_begin = fake_native_lease_begin,            \
    .lease_end = fake_native_lease_end, .context_opened = fake_native_context_opened,              \
    .context_closed = fake_native_context_closed

/*
 * A model over n tensors in one mapping (both borrowed), with n_layer
 * layers of 64-wide embeddings and 4 heads (4 KV heads), its access
 * probed, pages of page_bytes, instance FAKE_NATIVE_INSTANCE; path and
 * file size are the mapping's.
 */
struct rf_session_model fake_native_model(const struct rf_tensor_meta *tensors, size_t n,
                                          const struct rf_mapping_meta *mapping, int32_t n_layer,
                                          uint64_t page_bytes);

/* The session's JSON report of scope, parsed (cmocka-asserted; the caller json_decrefs). */
json_t *fake_report(struct rf_session *s, enum rf_report_scope scope);
/* How many of the report's warnings contain text. */
size_t fake_report_warnings(json_t *doc, const char *text);

#endif
