/*
 * ramforge serve's chat (serve_http.h): OpenAI's "messages" into the
 * prompt text through the model's chat template (llama.cpp's
 * llama_chat_apply_template, forge_chat_apply: the templates it
 * recognises, chatml for a model without one, as llama-server; with
 * --jinja, llama.cpp's Jinja engine from its common library,
 * forge_chat_templates, parsed once at start), for /v1/chat/completions and /apply-template. What
 * neither does (tool calls, multimodal parts, a prefill) is refused with
 * 400, never approximated.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cli.h"
#include "ramforge/error.h"
#include "serve_fields.h"
#include "serve_http.h"

/* A message's content: a string, or an array of {"type":"text","text"} parts (joined). */
static int content_text(json_t *c, size_t i, char **out, char *msg, size_t len)
{
    if (json_is_string(c)) {
        *out = strdup(json_string_value(c));
        return *out ? 0 : 500;
    }
    if (!json_is_array(c)) {
        snprintf(msg, len, "'messages[%zu].content' must be a string or an array of text parts", i);
        return 400;
    }
    size_t k, total = 1;
    json_t *part;
    json_array_foreach(c, k, part)
    {
        json_t *t = json_object_get(part, "type");
        if (!json_is_string(t) || strcmp(json_string_value(t), "text") ||
            !json_is_string(json_object_get(part, "text"))) {
            snprintf(msg, len,
                     "'messages[%zu].content[%zu]': only {\"type\":\"text\",\"text\"} parts "
                     "are implemented by ramforge serve",
                     i, k);
            return 400;
        }
        total += json_string_length(json_object_get(part, "text"));
    }
    char *s = calloc(1, total);
    if (!s)
        return 500;
    json_array_foreach(c, k, part) strcat(s, json_string_value(json_object_get(part, "text")));
    *out = s;
    return 0;
}

/* The prompt text of msgs through the chat template: llama.cpp's Jinja engine with --jinja. */
static int apply_template(struct serve *sv, const struct forge_chat_message *msgs, size_t n,
                          char **text, char *msg, size_t len)
{
    char err[RF_ERR_MAX] = "";
    int rc = sv->o->jinja ? forge_chat_templates_apply(sv->templates, msgs, n, true, text, err)
                          : forge_chat_apply(sv->model, sv->o->chat_template, msgs, n, true, text);
    if (rc == -ENOMEM)
        snprintf(msg, len, "out of memory");
    else if (rc < 0 && sv->o->jinja)
        snprintf(msg, len, "the chat template (Jinja): %s", err);
    else if (rc < 0)
        snprintf(msg, len,
                 "the model's chat template is not one llama.cpp's llama_chat_apply_template "
                 "recognises: give --jinja (llama.cpp's Jinja engine) or --chat-template");
    return rc == -ENOMEM ? 500 : rc < 0 ? 400 : 0;
}

int serve_chat_prompt(struct serve *sv, json_t *body, char **text, char *msg, size_t len)
{
    json_t *msgs = json_object_get(body, "messages"), *m;
    size_t n = json_array_size(msgs), i;
    struct forge_chat_message *fm = NULL;
    char **contents = NULL;
    int st = 0;
    *text = NULL;
    if (!json_is_array(msgs) || n == 0) {
        snprintf(msg, len, "'messages' must be a non-empty array of {\"role\", \"content\"}");
        return 400;
    }
    fm = calloc(n, sizeof(*fm));
    contents = calloc(n, sizeof(*contents));
    if (!fm || !contents) {
        st = 500;
        goto out;
    }
    json_array_foreach(msgs, i, m)
    {
        json_t *role = json_object_get(m, "role");
        const char *key;
        json_t *v;
        json_object_foreach(m, key, v) if (strcmp(key, "role") && strcmp(key, "content"))
        {
            snprintf(msg, len, "'messages[%zu].%s' is not implemented by ramforge serve", i, key);
            st = 400;
            goto out;
        }
        if (!json_is_string(role) || !json_object_get(m, "content")) {
            snprintf(msg, len, "'messages[%zu]' must have a string 'role' and a 'content'", i);
            st = 400;
            goto out;
        }
        if ((st = content_text(json_object_get(m, "content"), i, &contents[i], msg, len)))
            goto out;
        fm[i] = (struct forge_chat_message){json_string_value(role), contents[i]};
    }
    if (!strcmp(fm[n - 1].role, "assistant")) {
        snprintf(msg, len,
                 "a final assistant message (a prefill to continue) is not "
                 "implemented by ramforge serve");
        st = 400;
        goto out;
    }
    st = apply_template(sv, fm, n, text, msg, len);
out:
    if (st == 500)
        snprintf(msg, len, "out of memory");
    for (i = 0; contents && i < n; i++)
        free(contents[i]);
    free(contents);
    free(fm);
    return st;
}

/* The prompt text of a body holding "messages" only (what: the endpoint); 0, 400 or 500. */
static int messages_only(struct serve *sv, json_t *body, const char *what, char **text, char *msg,
                         size_t len)
{
    static const char *const known[] = {"messages", NULL};
    *text = NULL;
    if (!serve_keys_in(body, known, what, msg, len))
        return 400;
    return serve_chat_prompt(sv, body, text, msg, len);
}

enum MHD_Result serve_handle_apply_template(struct serve *sv, struct MHD_Connection *c,
                                            json_t *body)
{
    char msg[512], *text = NULL;
    int st = messages_only(sv, body, "/apply-template", &text, msg, sizeof(msg));
    if (st)
        return serve_reply_error(c, (unsigned)st, "%s", msg);
    json_t *o = json_pack("{s:o}", "prompt", rf_json_str(text));
    free(text);
    return serve_reply_json(c, 200, o);
}

bool serve_chat_template_check(struct serve *sv)
{
    const struct forge_chat_message hi = {"user", "hi"};
    char *text = NULL, err[RF_ERR_MAX] = "";
    forge_common_log(sv->o->sess.verbose); /* its reasons reach the answers; its log with -v */
    if (!sv->o->chat_template && !sv->o->jinja)
        return true;
    int rc = sv->o->jinja
                 ? forge_chat_templates_open(sv->model, sv->o->chat_template, &sv->templates, err)
                 : 0;
    if (rc == 0)
        rc = sv->o->jinja ? forge_chat_templates_apply(sv->templates, &hi, 1, true, &text, err)
                          : forge_chat_apply(sv->model, sv->o->chat_template, &hi, 1, true, &text);
    free(text);
    if (rc < 0)
        cli_error("%s '%s': %s", sv->o->jinja ? "--jinja, the chat template" : "--chat-template",
                  sv->o->chat_template ? sv->o->chat_template : "of the model",
                  rc == -ENOMEM ? "out of memory"
                  : sv->o->jinja
                      ? err
                      : "not a template llama.cpp's llama_chat_apply_template recognises (a "
                        "built-in name such as chatml or llama3, or one of their templates; "
                        "--jinja runs any Jinja template)");
    return rc == 0;
}

enum MHD_Result serve_handle_input_tokens(struct serve *sv, struct MHD_Connection *c, json_t *body)
{
    char msg[512], *text = NULL;
    int32_t *t = NULL;
    size_t n = 0;
    int st = messages_only(sv, body, "/chat/completions/input_tokens", &text, msg, sizeof(msg));
    if (st)
        return serve_reply_error(c, (unsigned)st, "%s", msg);
    int rc = forge_tokenize(sv->model, text, true, true, &t, &n);
    free(text);
    free(t);
    if (rc < 0)
        return serve_reply_error(c, rc == -ENOMEM ? 500 : 400, "cannot tokenize the chat: %s",
                                 rf_strerror(rc));
    return serve_reply_json(c, 200, json_pack("{s:I}", "input_tokens", (json_int_t)n));
}
