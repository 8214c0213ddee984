// forge_common.h over llama.cpp's common library (libllama-common.so of the pinned
// prefix, headers from share/ramforge/llama-common-headers, the same source):
// json_schema_to_grammar and the Jinja chat templates. C++ exceptions end here: every
// call catches them and hands C a -errno and the exception's text.
#include "ramforge/forge/forge_common.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include <chat.h> // llama.cpp's common library: a system include dir, not ours
#include <json-schema-to-grammar.h>
#include <log.h>

#include "forge_internal.h"

// A std::string into a malloc'd C string.
static int c_string(const std::string &s, char **out)
{
    *out = static_cast<char *>(malloc(s.size() + 1));
    if (!*out)
        return -ENOMEM;
    memcpy(*out, s.c_str(), s.size() + 1);
    return 0;
}

extern "C" bool forge_common_available(void)
{
    return true;
}

extern "C" void forge_common_log(bool show)
{
    common_log_set_verbosity_thold(show ? LOG_DEFAULT_LLAMA : LOG_LEVEL_OUTPUT);
}

extern "C" int forge_json_schema_grammar(const char *schema_json, char **grammar,
                                         char err[FORGE_ERR_MAX])
{
    if (!schema_json || !grammar)
        return -EINVAL;
    *grammar = nullptr;
    try {
        return c_string(json_schema_to_grammar(common_json::parse(schema_json)), grammar);
    } catch (const std::bad_alloc &) {
        return -ENOMEM;
    } catch (const std::exception &e) {
        snprintf(err, FORGE_ERR_MAX, "%s", e.what());
        return -EINVAL;
    }
}

// common_chat_templates_init rethrows a template's parse error as a plain std::exception
// (its text logged): parse src again for the parser's own words.
static std::string parse_error(const std::string &src, const char *fallback)
{
    try {
        jinja::lexer lexer;
        jinja::parse_from_tokens(lexer.tokenize(src));
    } catch (const std::exception &e) {
        return e.what();
    }
    return fallback;
}

static common_chat_templates_ptr templates_init(const llama_model *model, const char *tmpl)
{
    try {
        return common_chat_templates_init(model, tmpl ? tmpl : "");
    } catch (const std::bad_alloc &) {
        throw;
    } catch (const std::exception &e) {
        const char *own = tmpl ? tmpl : llama_model_chat_template(model, nullptr);
        throw std::runtime_error(parse_error(own ? own : "", e.what()));
    }
}

struct forge_chat_templates {
    common_chat_templates_ptr t;
};

extern "C" int forge_chat_templates_open(struct forge_model *m, const char *tmpl,
                                         struct forge_chat_templates **out, char err[FORGE_ERR_MAX])
{
    if (!m || !m->model || !out)
        return -EINVAL;
    *out = nullptr;
    try {
        *out = new forge_chat_templates{templates_init(m->model, tmpl)};
        return 0;
    } catch (const std::bad_alloc &) {
        return -ENOMEM;
    } catch (const std::exception &e) {
        snprintf(err, FORGE_ERR_MAX, "%s", e.what());
        return -EINVAL;
    }
}

extern "C" int forge_chat_templates_apply(const struct forge_chat_templates *t,
                                          const struct forge_chat_message *msgs, size_t n,
                                          bool add_assistant, char **text, char err[FORGE_ERR_MAX])
{
    if (!t || (!msgs && n) || !text)
        return -EINVAL;
    *text = nullptr;
    try {
        common_chat_templates_inputs in;
        for (size_t i = 0; i < n; i++) {
            common_chat_msg msg;
            msg.role = msgs[i].role;
            msg.content = msgs[i].content;
            in.messages.push_back(std::move(msg));
        }
        in.add_generation_prompt = add_assistant;
        in.use_jinja = true;
        return c_string(common_chat_templates_apply(t->t.get(), in).prompt, text);
    } catch (const std::bad_alloc &) {
        return -ENOMEM;
    } catch (const std::exception &e) {
        snprintf(err, FORGE_ERR_MAX, "%s", e.what());
        return -EINVAL;
    }
}

extern "C" void forge_chat_templates_free(struct forge_chat_templates *t)
{
    delete t;
}
