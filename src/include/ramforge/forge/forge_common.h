/*
 * What ramforge takes from llama.cpp's common library (libllama-common,
 * built with llama-server from the same pin): JSON schema to GBNF grammar
 * and the Jinja chat templates, through a C ABI (src/forge/llama_common.cpp;
 * llama_common_none.c where the library or its headers are missing). Not in
 * libramforge: only the CLI (serve) links it, in the library rfforge_common.
 */
#ifndef RAMFORGE_FORGE_COMMON_H
#define RAMFORGE_FORGE_COMMON_H

#include <stdbool.h>
#include <stddef.h>

#include "ramforge/forge/forge.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Whether this build has llama.cpp's common library (else the calls below give -ENOSYS). */
bool forge_common_available(void);

/*
 * Whether the common library's own log (its errors and warnings on stderr)
 * is shown; it is by default. Call before the calls below, from one thread.
 * The reasons the calls below fail reach the caller through err either way.
 */
void forge_common_log(bool show);

/*
 * A JSON schema (schema_json, JSON text) into a GBNF grammar with start
 * rule "root" (common's json_schema_to_grammar, as llama-server's
 * json_schema field): *grammar NUL-terminated, the caller frees. Any
 * thread. Returns 0, -EINVAL (NULL argument, text that is not JSON, a
 * schema the converter refuses: err says why, in the converter's words),
 * -ENOMEM, -ENOSYS (no common library: err says so).
 */
int forge_json_schema_grammar(const char *schema_json, char **grammar, char err[FORGE_ERR_MAX]);

/* Chat templates parsed by llama.cpp's Jinja engine (common_chat_templates). */
struct forge_chat_templates;

/*
 * Parses m's chat template (chatml when it has none), or tmpl (a Jinja
 * template or "chatml"; borrowed) instead, with llama.cpp's Jinja engine
 * (common_chat_templates_init, as llama-server --jinja) into *out, which
 * forge_chat_templates_free frees; m may be freed after. Returns 0,
 * -EINVAL (NULL argument, a template that does not parse: err says why in
 * the parser's words), -ENOMEM, -ENOSYS (no common library: err says so).
 */
int forge_chat_templates_open(struct forge_model *m, const char *tmpl,
                              struct forge_chat_templates **out, char err[FORGE_ERR_MAX]);

/*
 * msgs rendered by t (common_chat_templates_apply), with the assistant's
 * opening when add_assistant: *text NUL-terminated, the caller frees. Any
 * thread, concurrently (t is only read, as llama-server's HTTP threads
 * share theirs). Returns 0, -EINVAL (NULL argument, a template that fails
 * to render these messages: err says why), -ENOMEM, -ENOSYS.
 */
int forge_chat_templates_apply(const struct forge_chat_templates *t,
                               const struct forge_chat_message *msgs, size_t n, bool add_assistant,
                               char **text, char err[FORGE_ERR_MAX]);

/* Frees t (NULL: nothing). */
void forge_chat_templates_free(struct forge_chat_templates *t);

#ifdef __cplusplus
}
#endif

#endif
