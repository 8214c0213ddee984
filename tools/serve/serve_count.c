/*
 * ramforge serve's token counting of the Responses and Anthropic APIs
 * (serve_http.h): POST /v1/responses/input_tokens ({"input", "instructions"})
 * and /v1/messages/count_tokens ({"messages", "system"}) turned into chat
 * "messages", as llama-server converts them, then counted as
 * /chat/completions/input_tokens counts (the chat template, then the
 * tokenizer; its answer, without the "object" llama-server adds for the
 * Responses API). Text content only; any other field is refused naming it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve_fields.h"
#include "serve_http.h"

/*
 * A content of either API as chat's: a string, or an array of text parts
 * ({"type": "text"|"input_text", "text"}) as {"type":"text"} parts. NULL
 * with msg when it is neither (what names it).
 */
static json_t *text_content(json_t *c, const char *what, char *msg, size_t len)
{
    if (json_is_string(c))
        return json_incref(c);
    json_t *out = json_is_array(c) ? json_array() : NULL, *part;
    size_t i;
    json_array_foreach(c, i, part)
    {
        const char *type = json_string_value(json_object_get(part, "type"));
        json_t *text = json_object_get(part, "text");
        if (!out || !type || (strcmp(type, "text") && strcmp(type, "input_text")) ||
            !json_is_string(text)) {
            json_decref(out);
            out = NULL;
            break;
        }
        json_array_append_new(out, json_pack("{s:s,s:O}", "type", "text", "text", text));
    }
    if (!out)
        snprintf(msg, len,
                 "'%s' must be a string or an array of text parts (other content is not "
                 "implemented by ramforge serve)",
                 what);
    return out;
}

/* Appends {"role", "content"} (c converted) to msgs; false with msg. */
static bool add_message(json_t *msgs, const char *role, json_t *c, const char *what, char *msg,
                        size_t len)
{
    json_t *content = text_content(c, what, msg, len);
    if (!content)
        return false;
    json_array_append_new(msgs, json_pack("{s:s,s:o}", "role", role, "content", content));
    return true;
}

/* Appends the {"role","content"} items of array in (what names it) to msgs; false with msg. */
static bool add_messages(json_t *msgs, json_t *in, const char *what, char *msg, size_t len)
{
    json_t *m;
    size_t i;
    char where[64];
    json_array_foreach(in, i, m)
    {
        const char *role = json_string_value(json_object_get(m, "role"));
        snprintf(where, sizeof(where), "%s[%zu].content", what, i);
        if (!role) {
            snprintf(msg, len, "'%s[%zu]' must have a string 'role' and a 'content'", what, i);
            return false;
        }
        if (!add_message(msgs, role, json_object_get(m, "content"), where, msg, len))
            return false;
    }
    return true;
}

/*
 * The messages of a body: Responses' "instructions" then "input" (a string
 * or messages), or Anthropic's "system" then "messages"; false with msg.
 */
static bool body_messages(json_t *body, bool anthropic, json_t *msgs, char *msg, size_t len)
{
    const char *sys_key = anthropic ? "system" : "instructions";
    const char *list_key = anthropic ? "messages" : "input";
    const char *const known[] = {list_key, sys_key, "model", NULL};
    json_t *in = json_object_get(body, list_key), *sys = json_object_get(body, sys_key);
    if (!serve_keys_in(body, known,
                       anthropic ? "/v1/messages/count_tokens" : "/v1/responses/input_tokens", msg,
                       len))
        return false;
    if (sys && !json_is_null(sys) && !add_message(msgs, "system", sys, sys_key, msg, len))
        return false;
    if (!anthropic && json_is_string(in))
        return add_message(msgs, "user", in, list_key, msg, len);
    if (!json_is_array(in)) {
        snprintf(msg, len, "'%s' must be %san array of {\"role\", \"content\"}", list_key,
                 anthropic ? "" : "a string or ");
        return false;
    }
    return add_messages(msgs, in, list_key, msg, len);
}

enum MHD_Result serve_handle_count_tokens(struct serve *sv, struct MHD_Connection *c, json_t *body,
                                          bool anthropic)
{
    char msg[512];
    json_t *msgs = json_array();
    if (!msgs)
        return serve_reply_error(c, 500, "out of memory");
    if (!body_messages(body, anthropic, msgs, msg, sizeof(msg))) {
        json_decref(msgs);
        return serve_reply_error(c, 400, "%s", msg);
    }
    json_t *chat = json_pack("{s:o}", "messages", msgs);
    if (!chat)
        return serve_reply_error(c, 500, "out of memory");
    /* counted as /chat/completions/input_tokens counts the same messages */
    enum MHD_Result ret = serve_handle_input_tokens(sv, c, chat);
    json_decref(chat);
    return ret;
}
