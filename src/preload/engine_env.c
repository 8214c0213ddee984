/*
 * The engine's configuration from the environment ramforge exec sets
 * (preload_internal.h lists the variables): values already checked by
 * exec's parser, read again strictly here since any process can set them.
 */
#include "preload_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ramforge/core/kv_types.h"
#include "ramforge/core/policy.h"
#include "ramforge/core/stream_window.h"

#define EXEC_DEFAULT_HISTORY 64           /* operations a long-lived program's report keeps */
#define EXEC_DEFAULT_BUDGET_QUIET_MS 1000 /* a budget release waits 1 s without a submission */

/* A decimal unsigned value of name (absent: *has false). 0 or -EINVAL. */
static int env_u64(const char *name, uint64_t max, bool *has, uint64_t *out, char *why,
                   size_t why_size)
{
    const char *v = getenv(name);
    char *end = NULL;
    *has = v && v[0];
    if (!*has)
        return 0;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || *end || v[0] == '-' || x > max) {
        snprintf(why, why_size, "%s=%s: not a whole number from 0 to %llu", name, v,
                 (unsigned long long)max);
        return -EINVAL;
    }
    *out = x;
    return 0;
}

/* name's value with %p replaced by the pid into out ("" when absent). */
static int env_path(const char *name, char *out, size_t size, char *why, size_t why_size)
{
    const char *v = getenv(name);
    size_t n = 0;
    out[0] = '\0';
    for (; v && *v; v++) {
        int k = v[0] == '%' && v[1] == 'p' ? snprintf(out + n, size - n, "%ld", (long)getpid())
                                           : snprintf(out + n, size - n, "%c", v[0]);
        v += v[0] == '%' && v[1] == 'p';
        if (k < 0 || (size_t)k >= size - n) {
            snprintf(why, why_size, "%s: the path is too long", name);
            return -EINVAL;
        }
        n += (size_t)k;
    }
    return 0;
}

int exec_config_read(struct exec_config *c, char *why, size_t why_size)
{
    struct rf_session_params *p = &c->params;
    const char *v;
    bool has;
    uint64_t x;
    int rc;

    memset(c, 0, sizeof(*c));
    *p = rf_session_default_params();
    p->history_operations = EXEC_DEFAULT_HISTORY;
    if ((v = getenv(EXEC_ENV_POLICY)) && rf_policy_parse(v, &p->policy) < 0) {
        snprintf(why, why_size, "%s=%s: not a residency policy", EXEC_ENV_POLICY, v);
        return -EINVAL;
    }
    if (p->policy == RF_POLICY_STREAMING) /* the plan's ring, for the read-ahead window */
        p->stream_read_ahead_slots = RF_STREAM_READ_AHEAD_DEFAULT_SLOTS;
    if ((v = getenv(EXEC_ENV_RELEASE_MODE))) {
        if (rf_release_mode_parse(v, &p->release_mode) < 0) {
            snprintf(why, why_size, "%s=%s: not " RF_RELEASE_MODE_NAMES, EXEC_ENV_RELEASE_MODE, v);
            return -EINVAL;
        }
    }
    if ((v = getenv(EXEC_ENV_ADMISSION)) && rf_admission_mode_parse(v, &p->admission_mode) < 0) {
        snprintf(why, why_size, "%s=%s: not enforce, warn or off", EXEC_ENV_ADMISSION, v);
        return -EINVAL;
    }
    if ((rc = env_u64(EXEC_ENV_TARGET, INT64_MAX, &p->has_target, &p->target_bytes, why,
                      why_size)) < 0 ||
        (rc = env_u64(EXEC_ENV_RESERVE, INT64_MAX, &has, &p->reserve_bytes, why, why_size)) < 0 ||
        (rc = env_u64(EXEC_ENV_STAGING, INT64_MAX, &c->has_staging, &c->staging_bytes, why,
                      why_size)) < 0)
        return rc;
    if ((rc = env_u64(EXEC_ENV_IDLE, 86400 * 365, &has, &x, why, why_size)) < 0)
        return rc;
    c->idle_ns = has ? x * 1000000000ull : 0;
    if ((rc = env_u64(EXEC_ENV_CTX, 16777216, &has, &x, why, why_size)) < 0)
        return rc;
    c->n_ctx = has ? (uint32_t)x : 0;
    c->load_request = (struct rf_operation_request){
        .n_ctx = c->n_ctx, .n_prompt = !c->n_ctx, .n_predict = !c->n_ctx, .has_cache_types = true};
    if ((rc = env_u64(EXEC_ENV_CACHE_TYPE_K, UINT32_MAX, &has, &x, why, why_size)) < 0)
        return rc;
    c->load_request.type_k = has ? (uint32_t)x : RF_KV_TYPE_F16;
    if ((rc = env_u64(EXEC_ENV_CACHE_TYPE_V, UINT32_MAX, &has, &x, why, why_size)) < 0)
        return rc;
    c->load_request.type_v = has ? (uint32_t)x : RF_KV_TYPE_F16;
    if ((rc = env_u64(EXEC_ENV_CACHE_RAM, UINT64_MAX / (1024 * 1024), &c->has_cache_ram,
                      &c->cache_ram_mib, why, why_size)) < 0)
        return rc;
    v = getenv(EXEC_ENV_CACHE_STOP);
    c->cache_stop = v && strcmp(v, "1") == 0;
    if ((rc = env_u64(EXEC_ENV_HISTORY, 1000000, &has, &x, why, why_size)) < 0)
        return rc;
    if (has)
        p->history_operations = x;
    if ((rc = env_u64(EXEC_ENV_BUDGET_QUIET, 86400000, &has, &x, why, why_size)) < 0)
        return rc;
    c->budget_quiet_ns = (has && x ? x : EXEC_DEFAULT_BUDGET_QUIET_MS) * 1000000ull;
    v = getenv(EXEC_ENV_VERBOSE);
    c->verbose = v && strcmp(v, "1") == 0;
    if ((rc = env_path(EXEC_ENV_REPORT, c->report, sizeof(c->report), why, why_size)) < 0 ||
        (rc = env_path(EXEC_ENV_METRICS, c->metrics, sizeof(c->metrics), why, why_size)) < 0 ||
        (rc = env_path(EXEC_ENV_SPOOL, c->spool, sizeof(c->spool), why, why_size)) < 0)
        return rc;
    return 0;
}
