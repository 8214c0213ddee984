/*
 * A MoE model's routing in the persisted access profile (profile.h,
 * routing.h; docs/MOE.md): per layer the tokens routed, each expert's
 * selections (the histogram) and the reuse-distance histogram, from which
 * a later run's admission takes the LRU hit rate of any cache size. The
 * recency lists are not kept (a reloaded routing starts them empty).
 *
 *   "routing": null | {"n_expert": n, "n_expert_used": k,
 *                      "layers": [{"tokens": t, "counts": [n], "distance": [n + 1]}]}
 */
#include "profile_routing.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#include "ramforge/core/json_util.h"

json_t *rf_profile_routing_json(const struct rf_routing *r)
{
    if (!r->n_layer)
        return json_null();
    json_t *o = json_object(), *layers = json_array();
    if (!o || !layers) {
        json_decref(o);
        json_decref(layers);
        return NULL;
    }
    json_object_set_new(o, "n_expert", json_integer(r->n_expert));
    json_object_set_new(o, "n_expert_used", json_integer(r->n_expert_used));
    json_object_set_new(o, "layers", layers);
    for (uint32_t l = 0; l < r->n_layer; l++) {
        json_t *lay = json_object(), *counts = json_array(), *dist = json_array();
        if (!lay || !counts || !dist || json_array_append_new(layers, lay) < 0) {
            json_decref(counts);
            json_decref(dist);
            json_decref(o);
            return NULL;
        }
        json_object_set_new(lay, "tokens", rf_json_u64(true, r->tokens[l]));
        json_object_set_new(lay, "counts", counts);
        json_object_set_new(lay, "distance", dist);
        for (uint32_t e = 0; e < r->n_expert; e++)
            json_array_append_new(counts,
                                  rf_json_u64(true, r->counts[(size_t)l * r->n_expert + e]));
        for (uint32_t d = 0; d <= r->n_expert; d++)
            json_array_append_new(
                dist, rf_json_u64(true, r->distance[(size_t)l * (r->n_expert + 1) + d]));
    }
    return o;
}

__attribute__((format(printf, 3, 4))) static int bad(char *why, size_t why_size, const char *fmt,
                                                     ...)
{
    va_list ap;

    va_start(ap, fmt);
    if (why && why_size)
        vsnprintf(why, why_size, fmt, ap);
    va_end(ap);
    return -EBADMSG;
}

/* n non-negative integers of a into out; false when a is not that. */
static bool u64_array(json_t *a, size_t n, uint64_t *out)
{
    if (!json_is_array(a) || json_array_size(a) != n)
        return false;
    for (size_t i = 0; i < n; i++) {
        json_t *x = json_array_get(a, i);
        if (!json_is_integer(x) || json_integer_value(x) < 0)
            return false;
        out[i] = (uint64_t)json_integer_value(x);
    }
    return true;
}

int rf_profile_routing_parse(json_t *o, struct rf_routing *out, char *why, size_t why_size)
{
    rf_routing_zero(out);
    if (!o || json_is_null(o))
        return 0;
    json_t *n = json_object_get(o, "n_expert"), *k = json_object_get(o, "n_expert_used");
    json_t *layers = json_object_get(o, "layers");
    if (!json_is_object(o) || !json_is_integer(n) || !json_is_integer(k) || !json_is_array(layers))
        return bad(why, why_size, "routing: n_expert, n_expert_used or layers missing");
    json_int_t nv = json_integer_value(n), kv = json_integer_value(k);
    size_t nl = json_array_size(layers);
    if (nv < 1 || nv > RF_PROFILE_ROUTING_MAX_EXPERTS || kv < 1 || kv > nv || nl < 1 ||
        nl > RF_PROFILE_ROUTING_MAX_LAYERS)
        return bad(why, why_size,
                   "routing: %lld experts (%lld used) in %zu layers: out of bounds (1..%u "
                   "experts, 1..%u layers)",
                   (long long)nv, (long long)kv, nl, RF_PROFILE_ROUTING_MAX_EXPERTS,
                   RF_PROFILE_ROUTING_MAX_LAYERS);
    int rc = rf_routing_init(out, (uint32_t)nl, (uint32_t)nv, (uint32_t)kv);
    if (rc < 0)
        return rc;
    for (size_t l = 0; l < nl; l++) {
        json_t *lay = json_array_get(layers, l), *t = json_object_get(lay, "tokens");
        if (!json_is_integer(t) || json_integer_value(t) < 0 ||
            !u64_array(json_object_get(lay, "counts"), (size_t)nv, out->counts + l * (size_t)nv) ||
            !u64_array(json_object_get(lay, "distance"), (size_t)nv + 1,
                       out->distance + l * ((size_t)nv + 1))) {
            rf_routing_free(out);
            return bad(why, why_size,
                       "routing: layer %zu: tokens, counts (%lld) or distance (%lld) malformed", l,
                       (long long)nv, (long long)nv + 1);
        }
        out->tokens[l] = (uint64_t)json_integer_value(t);
    }
    return 0;
}
