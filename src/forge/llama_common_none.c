/* forge_common.h without llama.cpp's common library: every call is -ENOSYS, saying why. */
#include "ramforge/forge/forge_common.h"

#include <errno.h>
#include <stdio.h>

#define NO_COMMON                                                                                  \
    "ramforge was built without llama.cpp's common library (libllama-common and its headers, "     \
    "installed into the pinned prefix by scripts/build-llama-server.sh)"

bool forge_common_available(void)
{
    return false;
}

void forge_common_log(bool show)
{
    (void)show;
}

int forge_json_schema_grammar(const char *schema_json, char **grammar, char err[FORGE_ERR_MAX])
{
    (void)schema_json;
    if (grammar)
        *grammar = NULL;
    snprintf(err, FORGE_ERR_MAX, "%s", NO_COMMON);
    return -ENOSYS;
}

int forge_chat_templates_open(struct forge_model *m, const char *tmpl,
                              struct forge_chat_templates **out, char err[FORGE_ERR_MAX])
{
    (void)m;
    (void)tmpl;
    if (out)
        *out = NULL;
    snprintf(err, FORGE_ERR_MAX, "%s", NO_COMMON);
    return -ENOSYS;
}

int forge_chat_templates_apply(const struct forge_chat_templates *t,
                               const struct forge_chat_message *msgs, size_t n, bool add_assistant,
                               char **text, char err[FORGE_ERR_MAX])
{
    (void)t;
    (void)msgs;
    (void)n;
    (void)add_assistant;
    if (text)
        *text = NULL;
    snprintf(err, FORGE_ERR_MAX, "%s", NO_COMMON);
    return -ENOSYS;
}

void forge_chat_templates_free(struct forge_chat_templates *t)
{
    (void)t;
}
