/*
 * The persisted profile's routing (profile_routing.c): a MoE model's
 * observed routing as JSON and back, for profile.c.
 */
#ifndef RAMFORGE_CORE_PROFILE_ROUTING_H
#define RAMFORGE_CORE_PROFILE_ROUTING_H

#include <stddef.h>

#include <jansson.h>

#include "ramforge/core/routing.h"

#define RF_PROFILE_ROUTING_MAX_LAYERS 4096u  /* MoE layers a profile's routing may hold */
#define RF_PROFILE_ROUTING_MAX_EXPERTS 4096u /* experts per layer */

/* r as the profile's "routing" (null when r has no layer); NULL: out of memory. */
json_t *rf_profile_routing_json(const struct rf_routing *r);

/*
 * Parses o (NULL or null: no routing, *out empty) into *out (free with
 * rf_routing_free). Errors: -EBADMSG (why says what), -ENOMEM; *out empty.
 */
int rf_profile_routing_parse(json_t *o, struct rf_routing *out, char *why, size_t why_size);

#endif
