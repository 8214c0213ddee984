/*
 * llama-server's host prompt cache sized to the room (docs/EXEC.md, "The
 * prompt cache sized to the room"): before llama-server runs, exec decides
 * from the model's GGUF header and the binding memory limit (exec's
 * --memory-limit, else the cgroup hierarchy's) what its --cache-ram may be:
 * the room under the limit after the projected charge of the load and of
 * the real context (its -c, else the model's training context), the
 * weights each token reads (resident beside it) and a margin (an eighth of
 * the limit, at least 16 MiB). Without the user's --cache-ram, exec passes
 * that bound (LLAMA_ARG_CACHE_RAM) and says so in one line; the user's own
 * is kept, with a warning when it cannot fit. No limit: nothing to size.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/cli.h"
#include "exec.h"
#include "ramforge/core/prompt_cache.h"
#include "ramforge/forge/forge_pages.h"
#include "ramforge/session/session_ext.h"

#define MIB ((uint64_t)1024 * 1024)
/* Left beside the cache under a limit of l bytes (the requests' buffers, the runtime's
   growth, the heap's freed entries): an eighth of the limit, at least 16 MiB. */
#define EXEC_CACHE_MARGIN_BYTES(l) ((l) / 8 > 16 * MIB ? (l) / 8 : 16 * MIB)

/*
 * The room under the binding limit after the load and the context of path (req's n_ctx 0:
 * the model's training context; its cache types) into *room and that limit into *limit; false: no
 * limit binds, the load cannot fit at all, or the header cannot be read (the preload says each at
 * the load).
 */
static bool room_of(const char *path, struct rf_operation_request req,
                    const struct session_options *s, uint64_t *room, uint64_t *limit,
                    uint32_t *ctx_used)
{
    struct forge_gguf_estimate est;
    char err[FORGE_ERR_MAX];
    struct rf_admission_result *adm = calloc(1, sizeof(*adm));
    bool ok = false;
    if (!adm || forge_gguf_estimate(path, true, &est, err) < 0)
        goto out;
    if (!req.n_ctx)
        req.n_ctx = est.n_ctx_train;
    if (!req.n_ctx || rf_session_fit_check(path, true, rf_session_default_params(), &req,
                                           s->has_memory_limit, s->memory_limit, adm, err) < 0)
        goto out;
    /* over the limit already: admission refuses the load, in its own words */
    ok = adm->has_binding && adm->has_projected_charge && !adm->has_hard_excess;
    if (ok) {
        *limit = adm->cgroups[adm->binding].level.limit.bytes;
        /* the weights each token reads stay resident beside it (else the decode thrashes) */
        uint64_t need = adm->projected_charge_bytes + est.file_working_set_bytes;
        *room = *limit > need ? *limit - need : 0;
        *ctx_used = req.n_ctx;
    }
out:
    free(adm);
    return ok;
}

void exec_cache_fit(int argc, char **argv, const struct session_options *s, bool keep,
                    bool *has_mib, long long *mib)
{
    uint64_t room, limit;
    uint32_t n_ctx;
    if (argc < 1 || !exec_program_is(argv[0], "llama-server"))
        return;
    bool given = exec_program_arg(argc, argv, "-cram", "--cache-ram", "LLAMA_ARG_CACHE_RAM");
    struct rf_operation_request req = {.n_ctx = (uint32_t)exec_program_ctx_size(argc, argv)};
    exec_program_cache_types(argc, argv, &req);
    const char *model = exec_program_arg(argc, argv, "-m", "--model", "LLAMA_ARG_MODEL");
    if ((keep && !given) || !model || !room_of(model, req, s, &room, &limit, &n_ctx))
        return;
    uint64_t fit = rf_prompt_cache_fit_mib(room, EXEC_CACHE_MARGIN_BYTES(limit), UINT64_MAX / MIB);
    if (given) {
        char own[48];
        snprintf(own, sizeof(own), *has_mib ? "%lld MiB" : "-1 (no limit)", *mib);
        if (!*has_mib || (uint64_t)*mib > fit)
            cli_error("exec: warning: llama-server's own --cache-ram %s does not fit: the room "
                      "under the limit of %" PRIu64 " bytes after the model, a context of "
                      "%" PRIu32 " tokens and a %" PRIu64 " bytes margin is %" PRIu64
                      " MiB; the kernel kills llama-server when its prompt cache grows past it "
                      "(yours is kept)",
                      own, limit, n_ctx, EXEC_CACHE_MARGIN_BYTES(limit), fit);
        return;
    }
    *mib = (long long)(fit < EXEC_SERVER_CACHE_RAM_DEFAULT_MIB ? fit
                                                               : EXEC_SERVER_CACHE_RAM_DEFAULT_MIB);
    *has_mib = true;
    char text[32];
    snprintf(text, sizeof(text), "%lld", *mib);
    if (setenv("LLAMA_ARG_CACHE_RAM", text, 1) < 0) {
        *has_mib = false;
        return;
    }
    cli_error("exec: llama-server's --cache-ram set to %lld MiB%s: the room under the limit of "
              "%" PRIu64 " bytes after the model, a context of %" PRIu32 " tokens and a %" PRIu64
              " bytes margin (--keep-cache-ram: llama-server's own)",
              *mib, *mib ? "" : " (the prompt cache off)", limit, n_ctx,
              EXEC_CACHE_MARGIN_BYTES(limit));
}
