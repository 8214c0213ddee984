/*
 * The fake native layer the session's unit tests share: the gate, the
 * scripted samples and the page sampler (fake_native.h says how a test
 * adds its own operations).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fake_native.h"

void fake_native_sample(void *ud, const char *label, enum rf_measure_mapping what,
                        struct rf_residency_sample *out, struct rfsys_cgroup_memory *cg)
{
    struct fake_native *n = ud;
    (void)what; /* the fake measures the mapping at every sample */
    n->samples++;
    out->has_mapping = out->has_mapping_pss = true;
    out->mapping_rss_bytes = out->mapping_pss_bytes = n->resident_bytes;
    out->mapping_source = "smaps";
    out->has_process_rss = true;
    out->process_rss_bytes =
        n->resident_bytes + n->anon_bytes + n->other_rss_bytes + n->samples * n->rss_step_bytes;
    if (n->has_anon) {
        out->has_anon = true;
        out->anon_bytes = n->anon_bytes;
    }
    memset(cg, 0, sizeof(*cg));
    cg->version = RFSYS_CGROUP_NONE;
    if (n->on_sample)
        n->on_sample(n, label);
}

void fake_native_sample_mapping(void *ud, enum rf_measure_mapping what,
                                struct rf_residency_sample *out)
{
    struct fake_native *n = ud;
    (void)what;
    out->has_mapping = out->has_mapping_pss = true;
    out->has_mapping_locked = !n->no_locked;
    out->mapping_rss_bytes = out->mapping_pss_bytes = n->resident_bytes;
    out->mapping_locked_bytes = n->locked_bytes;
    out->mapping_source = "smaps";
}

void fake_native_lifetime(void *ud, struct rf_native_lifetime *out)
{
    struct fake_native *n = ud;
    *out = (struct rf_native_lifetime){
        .has_contract = true,
        .contract_version = RF_CONTRACT_VERSION,
        .instance_id = FAKE_NATIVE_INSTANCE,
        .quiescent = n->in_flight == 0 && n->alive == 0,
        .in_flight_contexts = n->in_flight,
        .active_contexts = n->alive,
        .execution_generation = n->generation,
    };
}

void fake_native_lease_begin(void *ud)
{
    ((struct fake_native *)ud)->in_flight++;
}

void fake_native_lease_end(void *ud)
{
    struct fake_native *n = ud;
    n->in_flight--;
    n->generation++;
    if (n->on_lease_end)
        n->on_lease_end(n);
}

void fake_native_context_opened(void *ud)
{
    ((struct fake_native *)ud)->alive++;
}

void fake_native_context_closed(void *ud)
{
    ((struct fake_native *)ud)->alive--;
}

int fake_native_page_source(void *ud, struct forge_page_source *out)
{
    struct fake_native *n = ud;
    memset(out, 0, sizeof(*out));
    snprintf(out->source, sizeof(out->source), "mincore");
    snprintf(out->file_cache_source, sizeof(out->file_cache_source), "unknown: fake layer");
    out->file_cache_error = -ENOSYS;
    out->page_bytes = n->page_bytes;
    return 0;
}

int fake_native_sampler(void *ud, int32_t mapping, uint64_t first, uint64_t n, uint8_t *states)
{
    (void)ud;
    (void)mapping;
    (void)first;
    memset(states, RF_PAGE_RESIDENT, n);
    return 0;
}

void *fake_native_page_pass_begin(void *ud)
{
    return ud;
}

void fake_native_page_pass_end(void *pass)
{
    (void)pass;
}

struct rf_session_model fake_native_model(const struct rf_tensor_meta *tensors, size_t n,
                                          const struct rf_mapping_meta *mapping, int32_t n_layer,
                                          uint64_t page_bytes)
{
    struct rf_session_model m = {0};
    m.tensors = tensors;
    m.n_tensors = n;
    m.mappings = mapping;
    m.n_mappings = 1;
    snprintf(m.info.path, sizeof(m.info.path), "%s", mapping->path);
    m.info.file_size_bytes = mapping->file_size_bytes;
    m.info.n_layer = n_layer;
    m.info.n_embd = 64;
    m.info.n_head = 4;
    m.info.n_head_kv = 4;
    m.info.access_probed = true;
    m.instance_id = FAKE_NATIVE_INSTANCE;
    m.page_bytes = page_bytes;
    return m;
}

json_t *fake_report(struct rf_session *s, enum rf_report_scope scope)
{
    char *text = NULL;
    assert_int_equal(rf_session_report_json(s, scope, &text), 0);
    json_t *doc = json_loads(text, 0, NULL);
    free(text);
    assert_non_null(doc);
    return doc;
}

size_t fake_report_warnings(json_t *doc, const char *text)
{
    json_t *w;
    size_t i, n = 0;
    json_array_foreach(json_object_get(doc, "warnings"), i, w) n +=
        strstr(json_string_value(w), text) != NULL;
    return n;
}
