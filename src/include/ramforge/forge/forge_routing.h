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
struct forge_routing_link;
struct llama_context_params;

/*
 * A recorder for m (a MoE model: info.n_expert > 0), freed with
 * forge_routing_free. Errors: -EINVAL (NULL, a dense model), -ENOMEM.
 */
int forge_routing_create(const struct forge_model *m, struct forge_routing **out);

/* NULL is a no-op. */
void forge_routing_free(struct forge_routing *r);

/* Installs the recorder's cb_eval in p, chaining the one p holds (may be none). */
void forge_routing_context_params(struct forge_routing *r, struct forge_context_params *p);

/*
 * A context an application creates itself (exec'd programs: one recorder,
 * many contexts, decoding at once): installs the recorder's cb_eval in p
 * through a link of that context's, chaining the callback p holds. Free
 * the link with forge_routing_link_free after the context. Errors:
 * -EINVAL (NULL), -ENOMEM (p untouched).
 */
int forge_routing_link(struct forge_routing *r, struct llama_context_params *p,
                       struct forge_routing_link **out);

/* NULL is a no-op. */
void forge_routing_link_free(struct forge_routing_link *l);

/*
 * What was observed so far (borrowed: valid until the recorder is freed;
 * read it only while no context of the recorder decodes); NULL for NULL.
 */
const struct rf_routing *forge_routing_stats(const struct forge_routing *r);

/* A deep copy of what was observed so far, taken under the recorder's lock
   (rf_routing_copy: dst zeroed first). -EINVAL, -ENOMEM. */
int forge_routing_copy(struct forge_routing *r, struct rf_routing *dst);

#endif
