/*
 * The routing of a mixture-of-experts model observed while it decodes
 * (docs/MOE.md): llama.cpp's graph names the router's choice
 * ffn_moe_topk-<layer> (build_moe_ffn), an i32 tensor of k expert ids per
 * token. The recorder's cb_eval asks for that node in the ask phase (a
 * split after it, one per MoE layer), reads the ids once it is computed
 * (before the expert matmuls) and adds them to an rf_routing (routing.h).
 * It wraps the callback it finds in the context parameters (the dispatch
 * observer's), as the read-ahead window wraps it in turn.
 */
#ifndef RAMFORGE_FORGE_ROUTING_H
#define RAMFORGE_FORGE_ROUTING_H

#include "ramforge/core/routing.h"
#include "ramforge/forge/forge.h"

struct forge_routing;

/*
 * A recorder for m (a MoE model: info.n_expert > 0), freed with
 * forge_routing_free. Errors: -EINVAL (NULL, a dense model), -ENOMEM.
 */
int forge_routing_create(const struct forge_model *m, struct forge_routing **out);

/* NULL is a no-op. */
void forge_routing_free(struct forge_routing *r);

/* Installs the recorder's cb_eval in p, chaining the one p holds (may be none). */
void forge_routing_context_params(struct forge_routing *r, struct forge_context_params *p);

/* What was observed so far (borrowed: valid until the recorder is freed); NULL for NULL. */
const struct rf_routing *forge_routing_stats(const struct forge_routing *r);

#endif
