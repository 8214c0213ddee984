/*
 * A mixture-of-experts model's figures from its metadata, read through
 * llama.cpp after the load: the experts per layer and the experts each
 * token selects ("<arch>.expert_count", "<arch>.expert_used_count"), and
 * the routing skew a generated model was made with (ramforge.route_skew).
 */
#include "forge_internal.h"

#include <stdio.h>
#include <stdlib.h>

#include "llama.h"

/* The metadata value of key as an unsigned number; 0 when absent or not a number. */
static uint32_t meta_u32(const struct llama_model *model, const char *key)
{
    char buf[32], *end = NULL;
    if (llama_model_meta_val_str(model, key, buf, sizeof(buf)) <= 0)
        return 0;
    unsigned long v = strtoul(buf, &end, 10);
    return end != buf && *end == '\0' && v <= UINT32_MAX ? (uint32_t)v : 0;
}

void forge_moe_info(const struct llama_model *model, struct forge_model_info *info)
{
    char arch[64], key[128], buf[32], *end = NULL;

    info->n_expert = info->n_expert_used = 0;
    info->has_route_skew = false;
    if (llama_model_meta_val_str(model, "general.architecture", arch, sizeof(arch)) <= 0)
        return;
    snprintf(key, sizeof(key), "%s.expert_count", arch);
    info->n_expert = meta_u32(model, key);
    snprintf(key, sizeof(key), "%s.expert_used_count", arch);
    info->n_expert_used = meta_u32(model, key);
    if (info->n_expert_used > info->n_expert) /* not a model a token can route in */
        info->n_expert = info->n_expert_used = 0;
    if (llama_model_meta_val_str(model, FORGE_KEY_ROUTE_SKEW, buf, sizeof(buf)) > 0) {
        info->route_skew = strtof(buf, &end);
        info->has_route_skew = end != buf && *end == '\0';
    }
}
