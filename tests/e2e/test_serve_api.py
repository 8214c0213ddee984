"""End-to-end tests of the llama-server API `ramforge serve` implements (issue 23).

Each case starts the server on a generated model (test_serve.py's Server) and checks a
part of the API against what llama-server answers: fields it does not implement are
refused with 400 naming them, stop strings, the samplers of llama.cpp's C API (logit
bias, penalties, grammar, ignore_eos), token probabilities, mixed and several prompts,
chat through the model's template, CORS, /slots, /props, /tokenize's pieces, one token
a streamed event, --seed and llama-server's metric names.
"""
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_util import check, run_main  # noqa: E402
from test_serve import PROMPT, Ctx, Server, expect_error, wait_idle_boundary  # noqa: E402

# llama-server fields serve does not implement: each must be refused, never ignored.
UNIMPLEMENTED = {
    "mirostat": 1, "mirostat_tau": 5.0, "typical_p": 0.5, "samplers": ["top_k"],
    "n_keep": 4, "dry_multiplier": 0.8, "xtc_probability": 0.5, "lora": [],
    "id_slot": 0, "n_indent": 2, "t_max_predict_ms": 10,
    "dynatemp_range": 0.5, "top_n_sigma": 1.0, "min_keep": 1,
    "dry_sequence_breakers": ["\n"], "grammar_lazy": True, "no_such_field": 1,
}


def greedy(sv, n=16, prompt=PROMPT, path="/completion", **kw):
    return sv.ok("POST", path, {"prompt": prompt, "n_predict": n, "temperature": 0, **kw})


def case_unimplemented_fields(c):
    with Server(c, c.model()) as sv:
        for key, value in UNIMPLEMENTED.items():
            for path in ("/completion", "/v1/completions"):
                expect_error(sv, "POST", path, {"prompt": PROMPT, key: value}, 400, f"'{key}'")
            expect_error(sv, "POST", "/v1/chat/completions",
                         {"messages": [{"role": "user", "content": "hi"}], key: value}, 400,
                         f"'{key}'")
        # out of range or not finite: 400 naming the field, never a 200 without settings
        for key, value in (("top_p", 1e300), ("min_p", -1), ("temperature", 1e300),
                           ("top_p", 2), ("repeat_penalty", 0), ("seed", 2 ** 40),
                           ("n_probs", 10 ** 6), ("n_cmpl", 2),
                           ("logit_bias", [[1]]), ("logit_bias", [[99999999, 1.0]]),
                           ("stop", [1]), ("response_fields", "content"),
                           ("stream_options", {"include_obfuscation": True})):
            expect_error(sv, "POST", "/completion", {"prompt": PROMPT, key: value}, 400,
                         f"'{key}")
        # n (n_cmpl's alias) above the one slot: llama-server's words, naming the field given
        # (tools/server/server-schema.cpp: "n_cmpl" first, "n" when it is absent or null)
        for fields, name in (({"n": 2}, "n"), ({"n_cmpl": 2}, "n_cmpl"),
                             ({"n_cmpl": None, "n": 3}, "n"), ({"n_cmpl": 2, "n": 1}, "n_cmpl")):
            want = f"Field '{name}': Value must be between 1 <= value <= 1, but got {fields[name]}"
            doc = expect_error(sv, "POST", "/completion", {"prompt": PROMPT, **fields}, 400, want)
            check(doc["error"]["message"] == want, f"{fields}: {doc['error']['message']!r}")
        expect_error(sv, "POST", "/completion", {"prompt": PROMPT, "grammar": "root ::= ("}, 400,
                     "'grammar'")
        # fields whose absence changes nothing are accepted (docs/guide/serve.md: one slot, one model)
        doc = sv.ok("POST", "/completion", {"prompt": PROMPT, "n_predict": 4, "n": 1,
                                            "cache_prompt": False, "model": "anything"})
        check(doc["tokens_cached"] == 0, f"nothing cached: {doc}")
    return 0


def case_stop(c):
    with Server(c, c.model("small")) as sv:
        full = greedy(sv)
        text = full["content"]
        word = text[len(text) // 2:len(text) // 2 + 3]
        cut = text.index(word)
        doc = greedy(sv, stop=[word, "never-seen"])
        check(doc["content"] == text[:cut] and doc["stop_type"] == "word" and
              doc["stopping_word"] == word, f"stop {word!r}: {doc['content']!r} of {text!r}")
        check(doc["generation_settings"]["stop"] == [word, "never-seen"], "stop echoed")
        events = [json.loads(e) for e in sv.stream("/completion", {
            "prompt": PROMPT, "n_predict": 16, "temperature": 0, "stop": [word]})]
        check("".join(e["content"] for e in events) == text[:cut], "streamed text stops too")
        check(events[-1]["stop_type"] == "word", "streamed stop_type")
        oai = sv.ok("POST", "/v1/completions", {"prompt": PROMPT, "max_tokens": 16,
                                                "temperature": 0, "stop": word})
        check(oai["choices"][0]["text"] == text[:cut] and
              oai["choices"][0]["finish_reason"] == "stop", f"OpenAI stop: {oai}")
        check(greedy(sv, stop="never-seen")["content"] == text, "an absent stop changes nothing")
    return 0


def case_samplers(c):
    with Server(c, c.model("small")) as sv:
        base = greedy(sv)["tokens"]
        first = base[0]
        for bias in ([[first, False]], {str(first): -1e9}, [[first, -1e9]]):
            doc = greedy(sv, logit_bias=bias)
            check(doc["tokens"][0] != first and first not in doc["tokens"],
                  f"logit_bias {bias} bans {first}: {doc['tokens']}")
        boosted = greedy(sv, logit_bias=[[1000, 100.0]])["tokens"]
        check(boosted == [1000] * 16, f"a +100 bias wins every step: {boosted}")
        # EOS (id 2) forced, then ignored: ignore_eos biases every end-of-generation token away
        eos = greedy(sv, logit_bias=[[2, 100.0]])
        check(eos["stop_type"] == "eos" and eos["tokens"] == [], f"forced EOS: {eos}")
        ign = greedy(sv, logit_bias=[[2, 100.0]], ignore_eos=True)
        check(ign["stop_type"] == "limit" and len(ign["tokens"]) == 16 and 2 not in ign["tokens"],
              f"ignore_eos: {ign}")
        check(len(set(base)) < len(base), f"greedy repeats itself here: {base}")
        pen = greedy(sv, repeat_penalty=100.0, repeat_last_n=64)["tokens"]
        check(len(set(pen)) == len(pen), f"repeat_penalty 100 never repeats: {pen}")
        pres = greedy(sv, presence_penalty=100.0)["tokens"]
        check(len(set(pres)) == len(pres), f"presence_penalty 100 never repeats: {pres}")
        g = greedy(sv, grammar='root ::= ("yes" | "no" | " ")+')
        check(re.fullmatch(r"(yes|no| )+", g["content"]), f"grammar: {g['content']!r}")
    return 0


def case_probs(c):
    with Server(c, c.model("small")) as sv:
        doc = greedy(sv, 6, n_probs=5)
        probs = doc["completion_probabilities"]
        check(len(probs) == len(doc["tokens"]), "one entry a token")
        for tok, p in zip(doc["tokens"], probs):
            top = p["top_logprobs"]
            check(p["id"] == tok and len(top) == 5 and top[0]["id"] == tok,
                  f"greedy: the token is the most probable: {p}")
            lps = [t["logprob"] for t in top]
            check(lps == sorted(lps, reverse=True) and all(x <= 0 for x in lps),
                  f"log-probabilities sorted, <= 0: {lps}")
            check(bytes(p["bytes"]).decode("utf-8", "replace").startswith(p["token"][:1]),
                  f"bytes spell the token: {p}")
        post = greedy(sv, 6, n_probs=3, post_sampling_probs=True, temperature=1.0, seed=3,
                      top_k=3)["completion_probabilities"]
        for p in post:
            top = p["top_probs"]
            check(len(top) <= 3 and abs(sum(t["prob"] for t in top) - 1.0) < 1e-3,
                  f"after top_k 3 the three left share the probability: {p}")
            check(p["id"] in [t["id"] for t in top], f"the sampled token is among them: {p}")
        oai = sv.ok("POST", "/v1/completions", {"prompt": PROMPT, "max_tokens": 3,
                                                "temperature": 0, "logprobs": 2})
        content = oai["choices"][0]["logprobs"]["content"]
        check(len(content) == 3 and all(len(e["top_logprobs"]) == 2 for e in content),
              f"OpenAI logprobs: {oai}")
        events = [json.loads(e) for e in sv.stream("/completion", {
            "prompt": PROMPT, "n_predict": 4, "temperature": 0, "n_probs": 2})]
        streamed = [p for e in events[:-1] for p in e["completion_probabilities"]]
        check([p["id"] for p in streamed] == doc["tokens"][:4], "streamed probabilities")
    return 0


def case_prompts(c):
    with Server(c, c.model("small")) as sv:
        a = greedy(sv, 8, prompt="Hello")
        b = greedy(sv, 8, prompt="Goodbye")
        ids = sv.ok("POST", "/tokenize", {"content": "Hello", "add_special": True})["tokens"]
        mixed = greedy(sv, 8, prompt=ids[:1] + ["Hello"])
        check(mixed["tokens"] == a["tokens"], "BOS id then text: the text's tokens")
        check(greedy(sv, 8, prompt=["Hello", 29892])["tokens_evaluated"] == len(ids) + 1,
              "text then an id: one mixed prompt")
        many = sv.ok("POST", "/completion", {"prompt": ["Hello", "Goodbye"], "n_predict": 8,
                                             "temperature": 0})
        check(isinstance(many, list) and [m["index"] for m in many] == [0, 1] and
              [m["content"] for m in many] == [a["content"], b["content"]],
              f"two prompts, two answers: {many}")
        oai = sv.ok("POST", "/v1/completions", {"prompt": ["Hello", [1, 15043]],
                                                "max_tokens": 8, "temperature": 0})
        ch = oai["choices"]
        check([x["index"] for x in ch] == [0, 1] and ch[0]["text"] == a["content"] and
              ch[1]["text"] == a["content"], f"OpenAI: a choice a prompt: {oai}")
        check(oai["usage"]["prompt_tokens"] == 2 * len(ids), "usage summed")
        # several prompts streamed (issue 23, s23suite; was 400): one after the other in one
        # stream, each event with its prompt's index, as llama-server's (which runs them in
        # parallel slots, so its events interleave)
        evs = [json.loads(e) for e in sv.stream("/completion", {
            "prompt": ["Hello", "Goodbye"], "n_predict": 8, "temperature": 0})]
        check([e["index"] for e in evs] == sorted(e["index"] for e in evs) and
              ["".join(e["content"] for e in evs if e["index"] == i) for i in (0, 1)] ==
              [a["content"], b["content"]] and
              [e["index"] for e in evs if e["stop"]] == [0, 1], f"two prompts streamed: {evs}")
        evs = sv.stream("/v1/completions", {"prompt": ["Hello", "Goodbye"], "max_tokens": 8,
                                            "temperature": 0})
        check(evs[-1] == "[DONE]" and evs.count("[DONE]") == 1 and
              "".join(json.loads(e)["choices"][0]["text"] for e in evs[:-1]
                      if json.loads(e)["choices"][0]["index"] == 1) == b["content"],
              f"OpenAI: two prompts streamed: {evs}")
        expect_error(sv, "POST", "/completion", {"prompt": ["a", [1, 10 ** 9]], "stream": True},
                     400, "'prompt': token 1")
        sel = greedy(sv, 4, response_fields=["content", "generation_settings/n_predict"])
        check(set(sel) == {"content", "generation_settings/n_predict"} and
              sel["generation_settings/n_predict"] == 4, f"response_fields: {sel}")
        check(greedy(sv, 4, return_tokens=False)["tokens"] == [], "return_tokens false")
    return 0


def case_chat(c):
    model = c.model("small")
    msgs = [{"role": "system", "content": "You are a test."},
            {"role": "user", "content": "Say something."}]
    with Server(c, model, "--alias", "zz-other,ramforge-test", "--tags", "chat,small") as sv:
        tmpl = sv.ok("POST", "/apply-template", {"messages": msgs})["prompt"]
        check(tmpl == "<|im_start|>system\nYou are a test.<|im_end|>\n<|im_start|>user\n"
              "Say something.<|im_end|>\n<|im_start|>assistant\n", f"chatml: {tmpl!r}")
        ref = greedy(sv, 12, prompt=tmpl)
        for path in ("/v1/chat/completions", "/chat/completions"):
            doc = sv.ok("POST", path, {"messages": msgs, "max_tokens": 12, "temperature": 0})
            ch = doc["choices"][0]
            check(doc["object"] == "chat.completion" and ch["message"] ==
                  {"role": "assistant", "content": ref["content"]}, f"{path}: {doc}")
            check(doc["model"] == "ramforge-test" and doc["system_fingerprint"], "model, fp")
            check(doc["usage"]["prompt_tokens"] == ref["tokens_evaluated"], "usage")
        parts = sv.ok("POST", "/v1/chat/completions", {
            "messages": [msgs[0], {"role": "user", "content": [
                {"type": "text", "text": "Say "}, {"type": "text", "text": "something."}]}],
            "max_tokens": 12, "temperature": 0})
        check(parts["choices"][0]["message"]["content"] == ref["content"], "text parts joined")
        raw = sv.stream("/v1/chat/completions", {"messages": msgs, "max_tokens": 12,
                                                 "temperature": 0,
                                                 "stream_options": {"include_usage": True}})
        check(raw[-1] == "[DONE]", "[DONE]")
        chunks = [json.loads(e) for e in raw[:-1]]
        check(chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": None},
              f"the opening chunk: {chunks[0]}")
        text = "".join(ch["choices"][0]["delta"].get("content") or ""
                       for ch in chunks if ch["choices"])
        check(text == ref["content"], f"streamed chat {text!r} != {ref['content']!r}")
        check(chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] ==
              len(ref["tokens"]), f"usage chunk: {chunks[-1]}")
        check(chunks[-2]["choices"][0]["finish_reason"] == "length", "finish_reason")
        for body, needle in (
                ({"messages": msgs, "response_format": {"type": "sound"}},
                 "response_format"),
                ({"messages": msgs + [{"role": "assistant", "content": "Sure"}]}, "assistant"),
                ({"messages": [{"role": "user", "content": "x", "name": "n"}]}, "name"),
                ({"messages": []}, "messages"),
                ({"messages": msgs, "prompt": "x"}, "'prompt'"),
                ({"messages": msgs, "tools": []}, "'tools'"),
                ({"messages": msgs, "top_logprobs": 2}, "requires 'logprobs'")):
            expect_error(sv, "POST", "/v1/chat/completions", body, 400, needle)
        n_in = sv.ok("POST", "/chat/completions/input_tokens", {"messages": msgs})
        check(n_in == {"input_tokens": ref["tokens_evaluated"]}, f"input_tokens: {n_in}")
        verbose = sv.ok("POST", "/v1/chat/completions", {"messages": msgs, "max_tokens": 2,
                                                         "verbose": True})
        check(verbose["__verbose"]["prompt"] == "<s> " + tmpl, f"__verbose: {verbose}")
        check("__verbose" not in sv.ok("POST", "/v1/chat/completions",
                                       {"messages": msgs, "max_tokens": 2}), "not asked")
        lp = sv.ok("POST", "/v1/chat/completions", {"messages": msgs, "max_tokens": 3,
                                                    "temperature": 0, "logprobs": True,
                                                    "top_logprobs": 2})
        check(len(lp["choices"][0]["logprobs"]["content"]) == 3, f"chat logprobs: {lp}")
        m = sv.ok("GET", "/v1/models")["data"][0]
        check(m["id"] == "ramforge-test" and m["aliases"] == ["ramforge-test", "zz-other"] and
              m["tags"] == ["chat", "small"], f"aliases: the first in order names it: {m}")
        props = sv.ok("GET", "/props")
        check(props["model_alias"] == "ramforge-test" and "im_start" in props["chat_template"],
              f"/props: {props}")
    with Server(c, model, "--chat-template", "llama3") as sv:
        p = sv.ok("POST", "/apply-template", {"messages": msgs})["prompt"]
        check(p == "<|start_header_id|>system<|end_header_id|>\n\nYou are a test.<|eot_id|>"
              "<|start_header_id|>user<|end_header_id|>\n\nSay something.<|eot_id|>"
              "<|start_header_id|>assistant<|end_header_id|>\n\n", f"--chat-template llama3: {p!r}")
        st, doc, _ = sv.request("POST", "/v1/chat/completions", {"messages": msgs * 100})
        check(st == 400 and doc["error"]["type"] == "exceed_context_size_error", f"{doc}")
    p = subprocess.run([c.rf, "serve", "-m", model, "--port", "0", "--chat-template", "bogus"],
                       capture_output=True, text=True, timeout=120)
    check(p.returncode == 1 and "--chat-template 'bogus'" in p.stderr, f"bogus: {p.stderr}")
    return 0


def case_cors_slots(c):
    model = c.model()
    with Server(c, model, "--api-key", "k", "--cors-origins",
                "http://a.example,http://b.example") as sv:
        st, _, r = sv.request("OPTIONS", "/completions", headers={
            "Origin": "http://b.example", "Access-Control-Request-Method": "POST"})
        check(st == 200 and r.getheader("Access-Control-Allow-Origin") == "http://b.example" and
              r.getheader("Access-Control-Allow-Credentials") == "true" and
              r.getheader("Access-Control-Allow-Methods") == "GET, POST, DELETE, OPTIONS" and
              r.getheader("Access-Control-Allow-Headers") == "*",
              f"preflight before the key: {st} {r.getheaders()}")
        st, _, r = sv.request("OPTIONS", "/completion", headers={"Origin": "http://c.example"})
        check(st == 200 and r.getheader("Access-Control-Allow-Origin") is None,
              "an origin not listed gets no CORS header")
        st, doc, r = sv.request("GET", "/slots", headers={"Authorization": "Bearer k",
                                                          "Origin": "http://a.example"})
        check(st == 200 and doc[0]["id"] == 0 and doc[0]["is_processing"] is False and
              r.getheader("Access-Control-Allow-Origin") == "http://a.example", f"/slots {doc}")
        check(int(r.getheader("Process-Start-Time-Unix")) > 0, "Process-Start-Time-Unix")
        expect_error(sv, "POST", "/slots/0?action=save", {"filename": "x"}, 501, "slots action",
                     headers={"Authorization": "Bearer k"})
        expect_error(sv, "GET", "/slots", None, 401, "API Key")
    with Server(c, model, "--cors-origins", "localhost", "--no-slots") as sv:
        expect_error(sv, "GET", "/slots", None, 501, "does not support slots endpoint")
        for origin, ok in (("http://localhost:8080", True), ("http://[::1]", True),
                           ("http://127.0.0.1:3000", True), ("http://localhost.evil.com", False),
                           ("http://evil.com", False)):
            _, _, r = sv.request("OPTIONS", "/completions", headers={"Origin": origin})
            check(r.getheader("Access-Control-Allow-Origin") == (origin if ok else None),
                  f"--cors-origins localhost and {origin}")
    # is_sleeping: true while the idle boundary has released the weights
    with Server(c, c.model("small"), "--residency-policy", "memory-bound", "--memory-target",
                str(4 << 20), "--idle-seconds", "1") as sv:
        greedy(sv, 4)
        check(sv.ok("GET", "/props")["is_sleeping"] is False, "awake after a request")
        wait_idle_boundary(sv)
        props = sv.ok("GET", "/props")
        check(props["is_sleeping"] is (props["residency"]["state"] == "idle_released"),
              f"is_sleeping follows idle_released: {props['residency']}")
    return 0


def case_tokenize_pieces(c):
    with Server(c, c.model()) as sv:
        text = "Hello \U0001F600 world"
        doc = sv.ok("POST", "/tokenize", {"content": text, "with_pieces": True})
        pieces = doc["tokens"]
        check(pieces[0]["piece"] == " Hello", f"the leading space kept: {pieces[0]}")
        raw = b"".join(p["piece"].encode() if isinstance(p["piece"], str) else bytes(p["piece"])
                       for p in pieces)
        check(raw == (" " + text).encode(), f"pieces spell the text byte for byte: {raw!r}")
        check(any(isinstance(p["piece"], list) for p in pieces),
              f"byte tokens as byte arrays, as llama-server: {pieces}")
    return 0


def case_stream_one_token(c):
    with Server(c, c.model("small")) as sv:
        full = greedy(sv, 12)
        events = [json.loads(e) for e in sv.stream("/completion", {
            "prompt": PROMPT, "n_predict": 12, "temperature": 0, "timings_per_token": True})]
        check(len(events) == len(full["tokens"]) + 1, f"an event a token, then the last: "
              f"{len(events)} for {len(full['tokens'])}")
        check(all(len(e["tokens"]) == 1 and "timings" in e for e in events[:-1]),
              "one token an event, with timings_per_token")
        chunks = [json.loads(e) for e in sv.stream("/v1/completions", {
            "prompt": PROMPT, "max_tokens": 12, "temperature": 0})[:-1]]
        check(len(chunks) == len(full["tokens"]) + 1, "OpenAI: a chunk a token, then the last")
    return 0


def case_seed_metrics(c):
    with Server(c, c.model("small"), "--seed", "7", "-n", "-1", "-c", "64") as sv:
        doc = sv.ok("POST", "/completion", {"prompt": PROMPT, "ignore_eos": True})
        check(doc["tokens_predicted"] == 64 - 5, f"-n -1: up to the context: {doc}")
        body = {"prompt": PROMPT, "n_predict": 8, "temperature": 1.0}
        a, b = sv.ok("POST", "/completion", body), sv.ok("POST", "/completion", body)
        check(a["tokens"] == b["tokens"] and a["generation_settings"]["seed"] == 7,
              f"--seed 7: {a['generation_settings']}")
        check(sv.ok("POST", "/completion", {**body, "seed": 7})["tokens"] == a["tokens"],
              "the request's seed 7 is the server's")
        params = sv.ok("GET", "/props")["default_generation_settings"]["params"]
        check(params["seed"] == 7 and abs(params["temperature"] - 0.8) < 1e-6 and
              params["top_k"] == 40,
              f"/props: the defaults a request without fields gets: {params}")
        text = sv.ok("GET", "/metrics")
        for name, kind in (("llamacpp:prompt_tokens_total", "counter"),
                           ("llamacpp:prompt_tokens_cached_total", "counter"),
                           ("llamacpp:prompt_seconds_total", "counter"),
                           ("llamacpp:tokens_predicted_total", "counter"),
                           ("llamacpp:tokens_predicted_seconds_total", "counter"),
                           ("llamacpp:n_decode_total", "counter"),
                           ("llamacpp:n_tokens_max", "counter"),
                           ("llamacpp:prompt_tokens_seconds", "gauge"),
                           ("llamacpp:predicted_tokens_seconds", "gauge"),
                           ("llamacpp:requests_processing", "gauge"),
                           ("llamacpp:requests_deferred", "gauge"),
                           ("llamacpp:n_busy_slots_per_decode", "gauge")):
            check(f"# TYPE {name} {kind}\n" in text and f"# HELP {name} " in text,
                  f"{name} {kind}")
        m = sv.metrics()
        check(m[("llamacpp:n_decode_total", ())] == 59 + 24, "a decode a sampled token: 59 + 3 x 8")
        # a counter without _total: prometheus_client's parser names its sample with one
        check(m[("llamacpp:n_tokens_max_total", ())] == 64, "prompt + generated, at most")
    return 0


CASES = {
    "unimplemented_fields": case_unimplemented_fields,
    "stop": case_stop,
    "samplers": case_samplers,
    "probs": case_probs,
    "prompts": case_prompts,
    "chat": case_chat,
    "cors_slots": case_cors_slots,
    "tokenize_pieces": case_tokenize_pieces,
    "stream_one_token": case_stream_one_token,
    "seed_metrics": case_seed_metrics,
}

if __name__ == "__main__":
    run_main(CASES, Ctx, "rf-serve-api-")
