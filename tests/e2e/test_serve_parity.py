#!/usr/bin/env python3
"""End-to-end cases of serve's llama-server parity items of issue 23 (its suite's tests
test_metrics_disabled, test_server_multiple_addresses, test_sleep.py and
test_n_probs_post_backend_sampling, checked here on serve alone, against llama-server's
answers as the suite reads them).

  metrics_flag     without --metrics /metrics answers 501 in llama-server's error shape
                   and words; with it 200 and the llamacpp: series
  hosts            --host 127.0.0.1,::1 answers on both (IPv6 skipped, with the reason,
                   where the loopback has none), on the same --port 0 port and nowhere
                   else; a bad --host is one line naming it, exit 1, nothing listening
  progress         --batch-size 4 and return_progress: a prompt_progress event before the
                   first batch and after each, timings never going back; the same text as
                   one batch; n_decode_total counts the batches
  prompt_cache     --prompt-cache: the common prefix of the last request's KV cache is
                   reused (timings, tokens_cached, /metrics), the text unchanged; freed
                   before the idle boundary, whose release still runs
  sleep_wake       --sleep-idle-seconds 1: is_sleeping (polled) after the idle release;
                   /health, /props, /models, /metrics leave it asleep and /metrics
                   answers the text of the last awake scrape; /tokenize wakes it and it
                   sleeps again; the Responses and Anthropic token counts answer what
                   /chat/completions/input_tokens answers for the same messages, wake
                   it, and refuse a field they do not implement naming it
  backend_sampling --backend-sampling and the backend_sampling field (llama_set_sampler):
                   the same tokens and n_probs (abs 0.01) as CPU sampling, greedy and
                   sampled; the graph's top_p leaves zero-probability candidates the CPU
                   chain drops (so the backend did sample); a grammar and pre-chain
                   n_probs stay on the CPU, as llama-server; a non-boolean is a 400

Exit 0 pass, 1 fail, 77 skip.
"""
import http.client
import socket
import subprocess
import time

from e2e_util import ModelCtx, Skip, check, run_main
from test_serve import Server, expect_error


def case_metrics_flag(c):
    model = c.model()
    with Server(c, model, metrics=False) as sv:
        expect_error(sv, "GET", "/metrics", None, 501,
                     "This server does not support metrics endpoint. Start it with `--metrics`")
    with Server(c, model) as sv:
        sv.ok("POST", "/completion", {"prompt": "Hello", "n_predict": 2})
        text = sv.ok("GET", "/metrics")
        check("llamacpp:tokens_predicted_total 2\n" in text, f"/metrics: {text[:400]}")


def get_health(host, port):
    conn = http.client.HTTPConnection(host, port, timeout=30)
    try:
        conn.request("GET", "/health")
        return conn.getresponse().status
    finally:
        conn.close()


def case_hosts(c):
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as probe:
            probe.bind(("::1", 0))
    except OSError as e:
        raise Skip(f"IPv6 loopback is unavailable: {e}")
    model = c.model()
    with Server(c, model, "--host", "127.0.0.1,::1") as sv:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(sv.stderr) < 2:
            time.sleep(0.05)  # polled with a deadline: the second address's line
        lines = [ln for ln in sv.stderr if "serving" in ln]
        check(len(lines) == 2 and lines[1].rstrip().endswith(f"http://[::1]:{sv.port}/"),
              f"one line an address, the same port: {lines}")
        check(get_health("127.0.0.1", sv.port) == 200, "/health on 127.0.0.1")
        check(get_health("::1", sv.port) == 200, "/health on ::1")
        # IPv6-only: the ::1 socket does not take IPv4-mapped connections, nothing else listens
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.settimeout(5)
            check(s.connect_ex(("127.0.0.2", sv.port)) != 0, "listening beyond --host")
    for bad in ("localhost", "127.0.0.1,", "::1,banana", ",".join(["127.0.0.1"] * 9)):
        p = subprocess.run([c.rf, "serve", "-m", model, "--port", "0", "--host", bad],
                           capture_output=True, text=True, timeout=120)
        lines = p.stderr.strip().split("\n")
        check(p.returncode == 1 and len(lines) == 1 and f"invalid --host '{bad}'" in lines[0],
              f"--host {bad}: exit {p.returncode}, {p.stderr!r}")


def sleeping(sv):
    return sv.ok("GET", "/props")["is_sleeping"]


def wait_sleep(sv, want=True, deadline_s=60):
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if sleeping(sv) == want:
            return
        time.sleep(0.05)  # polled with a deadline
    check(False, f"is_sleeping did not become {want} in {deadline_s} s: {sv.stderr[-5:]}")


def case_sleep_wake(c):
    model = c.model()
    msgs = [{"role": "system", "content": "Be brief"}, {"role": "user", "content": "Hello world"}]
    with Server(c, model, "--sleep-idle-seconds", "1") as sv:
        sv.ok("POST", "/completion", {"prompt": "Hello", "n_predict": 4})
        check(not sleeping(sv), "asleep right after a request")
        sv.ok("GET", "/metrics")
        awake = sv.ok("GET", "/metrics")
        wait_sleep(sv)
        for path in ("/health", "/props", "/v1/models", "/models"):
            sv.ok("GET", path)
        check(sv.ok("GET", "/metrics") == awake, "/metrics while asleep is the awake scrape's")
        check(sleeping(sv), "/health, /props, /models or /metrics woke the server")
        sv.ok("POST", "/tokenize", {"content": "Hello"})
        check(not sleeping(sv), "/tokenize did not wake the server")
        wait_sleep(sv)
        want = sv.ok("POST", "/chat/completions/input_tokens", {"messages": msgs})["input_tokens"]
        wait_sleep(sv)
        for path, body in (("/v1/responses/input_tokens",
                            {"instructions": "Be brief", "input": "Hello world"}),
                           ("/v1/messages/count_tokens", {"system": "Be brief", "messages": [
                               {"role": "user", "content": [{"type": "text",
                                                             "text": "Hello world"}]}]})):
            got = sv.ok("POST", path, body)
            check(got["input_tokens"] == want and want > 0, f"{path}: {got}, expected {want}")
            check(not sleeping(sv), f"{path} did not wake the server")
            wait_sleep(sv)
            expect_error(sv, "POST", path, {**body, "tools": []}, 400, "'tools'")


def case_progress(c):
    """--batch-size 4: a streamed request with return_progress gets llama-server's
    prompt_progress events (before the first batch, after each), its text is the text of
    one whole-prompt batch, and /metrics counts a llama_decode a batch."""
    import json
    model = c.model()
    body = {"prompt": "Hello my name is John and I like", "n_predict": 4, "temperature": 0}
    with Server(c, model) as sv:
        whole = sv.ok("POST", "/completion", body)
    with Server(c, model, "--batch-size", "4") as sv:
        n = whole["tokens_evaluated"]
        evs = [json.loads(e) for e in sv.stream("/completion", {
            **body, "return_progress": True, "timings_per_token": True})]
        prog = [e for e in evs if "prompt_progress" in e]
        want = list(range(0, n, 4)) + [n]
        check([p["prompt_progress"]["processed"] for p in prog] == want and
              all(p["prompt_progress"]["total"] == n and p["content"] == "" for p in prog),
              f"progress {[p['prompt_progress'] for p in prog]}, expected processed {want}")
        ms = [p["timings"]["prompt_ms"] for p in prog]
        check(ms[0] == 0 and ms == sorted(ms) and prog[0]["timings"]["prompt_n"] == 0,
              f"progress timings {[p['timings'] for p in prog]}")
        check("".join(e["content"] for e in evs) == whole["content"],
              "batches of 4 change the text")
        check("prompt_progress" not in json.dumps(sv.ok("POST", "/completion", {
            **body, "return_progress": True})), "return_progress without stream: no progress")
        m = sv.metrics()
        check(m[("llamacpp:n_decode_total", ())] == 2 * (len(want) - 2 + 4),
              f"n_decode_total {m[('llamacpp:n_decode_total', ())]}: a decode a batch")


def case_prompt_cache(c):
    """--prompt-cache: a repeated prompt decodes only its last token, with the same text as
    without the cache; a shared prefix is reused up to where the prompts differ;
    cache_prompt false and a server without --prompt-cache reuse nothing; /metrics counts
    the cached tokens apart; the idle boundary frees the kept context first, so its release
    still runs (idle_released) and the next request starts from an empty cache."""
    model = c.model()
    body = {"prompt": "Hello my name is John and I like", "n_predict": 6, "temperature": 0}
    with Server(c, model) as sv:
        plain = [sv.ok("POST", "/completion", body) for _ in range(2)]
        check([p["timings"]["cache_n"] for p in plain] == [0, 0], "cached without the option")
    with Server(c, model, "--prompt-cache", "--residency-policy", "memory-bound",
                "--memory-target", "1Mi", "--idle-seconds", "1") as sv:
        a, b = (sv.ok("POST", "/completion", body) for _ in range(2))
        n = a["tokens_evaluated"]
        check(a["timings"]["cache_n"] == 0 and b["timings"]["cache_n"] == n - 1 and
              b["timings"]["prompt_n"] == 1, f"repeated prompt: {a['timings']}, {b['timings']}")
        check(a["content"] == b["content"] == plain[0]["content"],
              "the cache changed the text")
        check(b["tokens_cached"] == n + 5, f"tokens_cached {b['tokens_cached']}")
        ids = sv.ok("POST", "/tokenize", {"content": body["prompt"], "add_special": True})
        other = sv.ok("POST", "/completion", {**body, "prompt": ids["tokens"][:4] + [1000, 1001]})
        check(other["timings"]["cache_n"] == 4, f"shared prefix of 4: {other['timings']}")
        off = sv.ok("POST", "/completion", {**body, "cache_prompt": False})
        check(off["timings"]["cache_n"] == 0, f"cache_prompt false: {off['timings']}")
        m = sv.metrics()
        check(m[("llamacpp:prompt_tokens_cached_total", ())] == n - 1 + 4 and
              m[("llamacpp:prompt_tokens_total", ())] == n + 1 + 2 + n,
              f"/metrics prompt tokens: {m[('llamacpp:prompt_tokens_cached_total', ())]} cached,"
              f" {m[('llamacpp:prompt_tokens_total', ())]} processed")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and \
                sv.ok("GET", "/props")["residency"]["idle_boundaries"] < 1:
            time.sleep(0.05)  # polled with a deadline: the idle boundary ran
        props = sv.ok("GET", "/props")["residency"]
        check(props["state"] == "idle_released", f"the kept context blocked the release: {props}")
        after = sv.ok("POST", "/completion", body)
        check(after["timings"]["cache_n"] == 0 and after["content"] == a["content"],
              f"after the idle boundary: {after['timings']}")


def case_backend_sampling(c):
    """backend sampling as llama-server's test_n_probs_post_backend_sampling checks it, plus
    evidence that the chain ran in the graph: its top_p keeps the candidates it cut, with
    probability 0, where the CPU chain removes them."""
    model = c.model()
    body = {"prompt": "The countries of Europe, in random order, are:", "n_predict": 12,
            "n_probs": 10, "post_sampling_probs": True, "seed": 4242, "top_p": 0.05}

    def zeros(a):
        return sum(t["prob"] == 0 for x in a["completion_probabilities"] for t in x["top_probs"])

    def same(a, b, what):
        check(a["content"] == b["content"] and a["tokens"] == b["tokens"],
              f"{what}: {a['content']!r} and {b['content']!r}")
        for x, y in zip(a["completion_probabilities"], b["completion_probabilities"]):
            xs, ys = ([(t["id"], t["prob"]) for t in z["top_probs"] if t["prob"] > 0]
                      for z in (x, y))
            check(x["id"] == y["id"] and abs(x["prob"] - y["prob"]) <= 0.01 and
                  len(xs) == len(ys) and all(p[0] == q[0] and abs(p[1] - q[1]) <= 0.01
                                             for p, q in zip(xs, ys)),
                  f"{what}: token {x['id']} {xs} and {y['id']} {ys}")

    with Server(c, model, "--backend-sampling") as sv:
        check(sv.ok("GET", "/props")["default_generation_settings"]["params"]
              ["backend_sampling"] is True, "/props: backend_sampling not the default")
        gpu, cpu, dflt = (sv.ok("POST", "/completion", {**body, **f}) for f in (
            {"backend_sampling": True}, {"backend_sampling": False}, {}))
        same(gpu, cpu, "sampled, backend and CPU")
        check(gpu["generation_settings"]["backend_sampling"] is True and
              cpu["generation_settings"]["backend_sampling"] is False, "generation_settings")
        check(zeros(gpu) > 0 and zeros(cpu) == 0,
              f"zero-probability candidates: {zeros(gpu)} backend, {zeros(cpu)} CPU")
        check(dflt["completion_probabilities"] == gpu["completion_probabilities"],
              "--backend-sampling is not the default of a request")
        greedy = [sv.ok("POST", "/completion", {**body, "temperature": 0, "top_p": 0.95,
                                                "backend_sampling": b}) for b in (True, False)]
        same(*greedy, "greedy, backend and CPU")
        pre = [sv.ok("POST", "/completion", {**body, "post_sampling_probs": False,
                                             "backend_sampling": b}) for b in (True, False)]
        check(pre[0]["completion_probabilities"] == pre[1]["completion_probabilities"] and
              pre[0]["content"] == pre[1]["content"], "n_probs before the chain: not on the CPU")
        g = {**body, "grammar": 'root ::= "yes" | "no"', "n_predict": 4}
        gram = [sv.ok("POST", "/completion", {**g, "backend_sampling": b}) for b in (True, False)]
        check(gram[0]["content"] == gram[1]["content"] in ("yes", "no") and zeros(gram[0]) == 0,
              f"grammar: {gram[0]['content']!r}, {gram[1]['content']!r}, not CPU")
        expect_error(sv, "POST", "/completion", {**body, "backend_sampling": "yes"}, 400,
                     "'backend_sampling' must be a boolean")
    with Server(c, model) as sv:
        off, on = (sv.ok("POST", "/completion", {**body, **f})
                   for f in ({}, {"backend_sampling": True}))
        check(zeros(off) == 0 and zeros(on) > 0 and off["content"] == on["content"],
              "without --backend-sampling: CPU unless the request asks")


CASES = {"metrics_flag": case_metrics_flag, "hosts": case_hosts, "sleep_wake": case_sleep_wake,
         "progress": case_progress, "prompt_cache": case_prompt_cache,
         "backend_sampling": case_backend_sampling}

if __name__ == "__main__":
    run_main(CASES, ModelCtx, "rf-e2e-serve-parity-")
