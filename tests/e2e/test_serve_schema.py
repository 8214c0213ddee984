"""End-to-end tests of what `ramforge serve` takes from llama.cpp's common library (issue 23).

json_schema and response_format's schemas become a GBNF grammar through common's
json_schema_to_grammar: the text generated (greedy, on a generated model) parses as JSON
and validates against the schema (python3-jsonschema); the converter's refusals are 400s
naming the field. --jinja renders chats with common's Jinja engine: a template
llama_chat_apply_template does not know gives the exact text a Jinja renderer gives, and
a chat completes with it. Skipped, with the reason, in a build without libllama-common.
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_util import Skip, check, run_main  # noqa: E402
from test_serve import Ctx, Server, expect_error  # noqa: E402

PERSON = {"type": "object",
          "properties": {"name": {"type": "string", "maxLength": 6},
                         "age": {"type": "integer", "minimum": 0, "maximum": 150},
                         "tags": {"type": "array", "items": {"enum": ["a", "b"]},
                                  "maxItems": 2}},
          "required": ["name", "age", "tags"], "additionalProperties": False}
MSGS = [{"role": "system", "content": "You are a test."},
        {"role": "user", "content": "Describe a person."}]
# A template llama_chat_apply_template does not recognise: only a Jinja engine renders it.
TEMPLATE = ("{% for m in messages %}[{{ m.role | upper }}] {{ m.content }}\n{% endfor %}"
            "{% if add_generation_prompt %}[ASSISTANT] {% endif %}")


def need_common(c):
    """Skip unless this build has llama.cpp's common library (serve --jinja says)."""
    p = subprocess.run([c.rf, "serve", "--jinja", "--help"], capture_output=True, text=True,
                       timeout=60)
    if p.returncode != 0 and "common library" in p.stderr:
        raise Skip(next(line for line in p.stderr.splitlines() if "common library" in line))
    check(p.returncode == 0 and "--jinja" in p.stdout, f"serve --jinja --help: {p.stderr}")


def valid(text, schema, what):
    import jsonschema
    try:
        doc = json.loads(text)
        jsonschema.validate(doc, schema)
    except (ValueError, jsonschema.ValidationError) as e:
        check(False, f"{what}: {text!r} is not valid against the schema: {e}")
    return doc


def case_json_schema(c):
    need_common(c)
    with Server(c, c.model("small")) as sv:
        doc = sv.ok("POST", "/completion", {"prompt": "A person:", "n_predict": 400,
                                            "temperature": 0, "json_schema": PERSON})
        check(doc["stop_type"] == "eos", f"the grammar ends the JSON with EOS: {doc}")
        valid(doc["content"], PERSON, "/completion json_schema")
        sampled = sv.ok("POST", "/completion", {"prompt": "A person:", "n_predict": 400,
                                                "seed": 7, "json_schema": PERSON})
        valid(sampled["content"], PERSON, "/completion json_schema, sampled")
        for rf, schema in (({"type": "json_schema", "json_schema": {"name": "p", "strict": True,
                                                                     "schema": PERSON}}, PERSON),
                           ({"type": "json_object", "schema": PERSON}, PERSON),
                           ({"type": "json_object"}, {"type": "object"}),
                           ({"type": "json_object", "schema": None}, {"type": "object"})):
            ch = sv.ok("POST", "/v1/chat/completions", {"messages": MSGS, "max_tokens": 400,
                                                        "temperature": 0,
                                                        "response_format": rf})
            check(ch["choices"][0]["finish_reason"] == "stop", f"{rf}: {ch}")
            valid(ch["choices"][0]["message"]["content"], schema, f"response_format {rf}")
        ch = sv.ok("POST", "/chat/completions", {"messages": MSGS, "max_tokens": 16,
                                                 "json_schema": {"const": "42"}})
        check(ch["choices"][0]["message"]["content"] == '"42"', f"const: {ch}")
        # /completion: "grammar" wins over "json_schema", as llama-server
        doc = sv.ok("POST", "/completion", {"prompt": "x", "n_predict": 8, "json_schema": PERSON,
                                            "grammar": 'root ::= "a"{3}'})
        check(doc["content"] == "aaa", f"grammar over json_schema: {doc['content']!r}")
        # the converter's refusals and llama-server's: 400 naming the field
        for path, body, needle in (
                ("/completion", {"prompt": "x", "json_schema": {"type": "hiccup"}},
                 "'json_schema': JSON schema conversion failed"),
                ("/completion", {"prompt": "x", "json_schema": 123}, "'json_schema'"),
                ("/v1/chat/completions", {"messages": MSGS, "response_format":
                                          {"type": "json_object", "schema": {"type": 123}}},
                 "'response_format'"),
                ("/v1/chat/completions", {"messages": MSGS, "json_schema": PERSON,
                                          "grammar": 'root ::= "a"'},
                 "Cannot use both json_schema and grammar"),
                ("/v1/chat/completions", {"messages": MSGS, "grammar": 'root ::= "a"',
                                          "response_format": {"type": "json_object"}},
                 "Cannot use both response_format and grammar"),
                ("/v1/chat/completions", {"messages": MSGS, "response_format": {"type": "xml"}},
                 "but got: xml"),
                ("/v1/chat/completions", {"messages": MSGS, "response_format":
                                          {"type": "json_object", "format": 1}},
                 "'format'"),
                ("/v1/completions", {"prompt": "x", "response_format": {"type": "json_object"}},
                 "'response_format'")):
            expect_error(sv, "POST", path, body, 400, needle)
    return 0


def case_jinja(c):
    need_common(c)
    model = c.model("small")
    want = ("[SYSTEM] You are a test.\n[USER] Describe a person.\n[ASSISTANT] ")
    p = subprocess.run([c.rf, "serve", "-m", model, "--port", "0", "--chat-template", TEMPLATE],
                       capture_output=True, text=True, timeout=120)
    check(p.returncode != 0 and "--jinja" in p.stderr,
          f"without --jinja the template is refused, naming --jinja: {p.stderr}")
    with Server(c, model) as plain, Server(c, model, "--jinja") as jinja:
        a = plain.ok("POST", "/apply-template", {"messages": MSGS})["prompt"]
        b = jinja.ok("POST", "/apply-template", {"messages": MSGS})["prompt"]
        check(a == b and a.startswith("<|im_start|>system\n"),
              f"the model's chatml through both engines: {a!r} vs {b!r}")
    with Server(c, model, "--jinja", "--chat-template", TEMPLATE) as sv:
        got = sv.ok("POST", "/apply-template", {"messages": MSGS})["prompt"]
        check(got == want, f"the Jinja template rendered: {got!r}")
        ref = sv.ok("POST", "/completion", {"prompt": want, "n_predict": 8, "temperature": 0})
        ch = sv.ok("POST", "/v1/chat/completions", {"messages": MSGS, "max_tokens": 8,
                                                    "temperature": 0})
        check(ch["choices"][0]["message"]["content"] == ref["content"] and
              ch["usage"]["prompt_tokens"] == ref["tokens_evaluated"],
              f"the chat generates from the rendered text: {ch} vs {ref}")
        ch = sv.ok("POST", "/v1/chat/completions", {"messages": MSGS, "max_tokens": 8,
                                                    "grammar": 'root ::= "b"{4}'})
        check(ch["choices"][0]["message"]["content"] == "bbbb", f"--jinja with grammar: {ch}")
    p = subprocess.run([c.rf, "serve", "-m", model, "--port", "0", "--jinja",
                        "--chat-template", "{% for %}"], capture_output=True, text=True,
                       timeout=120)
    check(p.returncode != 0 and "--jinja, the chat template" in p.stderr,
          f"a template Jinja cannot parse is refused at start: {p.stderr}")
    return 0


CASES = {"json_schema": case_json_schema, "jinja": case_jinja}

if __name__ == "__main__":
    run_main(CASES, Ctx, "rf-serve-schema-")
