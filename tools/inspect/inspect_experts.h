/*
 * ramforge inspect on a mixture-of-experts model: its experts (the routed
 * expert tensors and their per-expert slices) and what one token reads
 * (the dense part + k/n of the routed experts) beside the file size, as
 * text after the inventory table and as the inventory document's
 * "experts" object (inspect_experts.c).
 */
#ifndef RAMFORGE_TOOLS_INSPECT_EXPERTS_H
#define RAMFORGE_TOOLS_INSPECT_EXPERTS_H

#include <jansson.h>
#include <stdbool.h>

#include "ramforge/core/inventory.h"
#include "ramforge/forge/forge.h"

/*
 * Prints the experts of the model described by info over inv: nothing for
 * a dense model. Returns 0 or a negative errno (the map could not be built).
 */
int inspect_experts_print(const struct rf_inventory *inv, const struct forge_model_info *info,
                          bool raw);

/*
 * Sets doc's "experts": null for a dense model, else the object described
 * in schema/inspect.schema.json (every slice of every routed tensor).
 * Returns 0 or a negative errno.
 */
int inspect_experts_json(const struct rf_inventory *inv, const struct forge_model_info *info,
                         json_t *doc);

#endif
