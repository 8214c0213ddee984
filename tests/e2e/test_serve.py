"""End-to-end tests of `ramforge serve` with real clients (curl, http.client).

Each case starts the server on a free port (--port 0; the bound port is read
from its first stderr line) on a generated model, and always kills it.
"""
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "schema"))
import validate_report  # noqa: E402
from e2e_util import (Failure, Skip, asan_build, check, check_ledger_metrics,  # noqa: E402
                      check_no_null,
                      memory_child_cgroup, run_main)

PROMPT = "Hello my name is"
PAGE = os.sysconf("SC_PAGE_SIZE")


class Server:
    """A running `ramforge serve`; use as a context manager (killed on exit)."""

    def __init__(self, c, model, *argv, preexec_fn=None, metrics=True):
        self.model = model
        # --metrics: /metrics answers (501 without, as llama-server's)
        self.proc = subprocess.Popen([c.rf, "serve", "-m", model, "--port", "0",
                                      *(["--metrics"] if metrics else []), *argv],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     preexec_fn=preexec_fn)
        self.stderr = []
        line = self.proc.stderr.readline()
        self.stderr.append(line)
        if "serving" not in line:
            self.proc.kill()
            rest = self.proc.stderr.read()
            raise Failure(f"serve did not start: {line!r} {rest[-2000:]!r}")
        self.port = int(line.rsplit(":", 1)[1].strip().strip("/"))
        self.drain = threading.Thread(target=self._drain, daemon=True)
        self.drain.start()

    def _drain(self):
        for line in self.proc.stderr:
            self.stderr.append(line)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)
        if exc[0] is None:
            self.drain.join(timeout=30)
            check_no_null("".join(self.stderr), "serve's stderr")

    def request(self, method, path, body=None, headers=None, timeout=120):
        """(status, parsed JSON or text, headers) over http.client."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        data = body if isinstance(body, (bytes, str)) or body is None else json.dumps(body)
        conn.request(method, path, body=data, headers=headers or {})
        r = conn.getresponse()
        raw = r.read().decode("utf-8")
        conn.close()
        check_no_null(raw, f"the response to {method} {path}")
        ctype = r.getheader("Content-Type", "")
        return r.status, json.loads(raw) if "json" in ctype else raw, r

    def ok(self, method, path, body=None, headers=None):
        st, doc, _ = self.request(method, path, body, headers)
        check(st == 200, f"{method} {path}: status {st}: {doc}")
        return doc

    def complete(self, prompt=PROMPT, n=8, **kw):
        return self.ok("POST", "/completion",
                       {"prompt": prompt, "n_predict": n, "temperature": 0, **kw})

    def stream(self, path, body):
        """The data: payloads of a server-sent event stream."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        conn.request("POST", path, body=json.dumps({**body, "stream": True}))
        r = conn.getresponse()
        check(r.status == 200, f"stream {path}: status {r.status}")
        check(r.getheader("Content-Type", "").startswith("text/event-stream"), "SSE content type")
        events = []
        for line in r.read().decode("utf-8").split("\n"):
            if line.startswith("data: "):
                events.append(line[6:])
            else:
                check(line == "", f"unexpected SSE line {line!r}")
        conn.close()
        return events

    def metrics(self):
        """/metrics parsed: (name, labels but model and path) -> value. The report's series
        (ramforge_ledger_*, ramforge_release_*, ...) carry model=the file's name and
        path=its canonical path; the server's
        own counters carry no model label."""
        from prometheus_client.parser import text_string_to_metric_families
        text = self.ok("GET", "/metrics")
        samples = {}
        for fam in text_string_to_metric_families(text):
            for s in fam.samples:
                own = s.name.startswith(("llamacpp:", "ramforge_requests", "ramforge_admission_",
                                         "ramforge_idle", "ramforge_staging_",
                                         "ramforge_residency_state", "ramforge_operations_",
                                         "ramforge_live_"))
                canon = os.path.realpath(self.model)
                check(s.labels.get("model") == (None if own else os.path.basename(canon))
                      and s.labels.get("path") == (None if own else canon),
                      f"{s.name}{s.labels}: model and path labels")
                labels = tuple(sorted((k, v) for k, v in s.labels.items()
                                      if k not in ("model", "path")))
                samples[(s.name, labels)] = s.value
        return samples

    def rss(self):
        if self.proc.poll() is not None:
            self.drain.join(timeout=5)
            raise Failure(f"serve exited {self.proc.returncode}: "
                          f"{''.join(self.stderr)[-3000:]}")
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        raise Failure("no VmRSS")

    def terminate(self, timeout=30):
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=timeout)


class Ctx:
    def __init__(self, args, tmp):
        self.rf = args.ramforge
        self.schema = args.schema
        self.tmp = tmp
        self.models = {}

    def model(self, preset="tiny", wtype="q8_0"):
        if preset not in self.models:
            path = os.path.join(self.tmp, f"{preset}-{wtype}.gguf")
            p = subprocess.run([self.rf, "mkmodel", "--preset", preset, "--type", wtype,
                                "--seed", "42", "-o", path], capture_output=True, text=True)
            if p.returncode != 0 and "vocab" in p.stderr:
                raise Skip(f"cannot generate a model: {p.stderr.strip()}")
            check(p.returncode == 0, f"mkmodel: {p.stderr}")
            self.models[preset] = path
        return self.models[preset]

    def run_tokens(self, model, prompt, n):
        path = os.path.join(self.tmp, f"run-{time.monotonic_ns()}.json")
        p = subprocess.run([self.rf, "run", "-m", model, "-p", prompt, "-n", str(n),
                            "--residency-report-json", path], capture_output=True, text=True)
        check(p.returncode == 0, f"ramforge run: {p.stderr}")
        with open(path) as f:
            out = json.load(f)["output"]
        return out["token_ids"], p.stdout.rstrip("\n")


def expect_error(sv, method, path, body, status, needle, headers=None):
    st, doc, _ = sv.request(method, path, body, headers)
    check(st == status, f"{method} {path} {str(body)[:80]}: status {st}, expected {status}: {doc}")
    check(isinstance(doc, dict) and set(doc) == {"error"} and
          set(doc["error"]) == {"code", "message", "type"} and doc["error"]["code"] == status,
          f"llama-server's error shape: {doc}")
    check(needle.lower() in doc["error"]["message"].lower(),
          f"{doc['error']['message']!r} lacks {needle!r}")
    return doc


def case_endpoints(c):
    model = c.model()
    with Server(c, model) as sv:
        check(sv.ok("GET", "/health") == {"status": "ok"}, "/health")
        props = sv.ok("GET", "/props")
        check(props["total_slots"] == 1 and props["model_path"] == model, f"/props {props}")
        check(props["default_generation_settings"]["n_ctx"] > 0, "n_ctx in /props")
        check(props["residency"]["state"] == "resident", f"residency state {props['residency']}")
        for path in ("/v1/models", "/models"):
            m = sv.ok("GET", path)
            check(m["object"] == "list" and m["data"][0]["id"] == model, f"{path}: {m}")
            check(m["data"][0]["meta"]["n_vocab"] == 32000, f"{path}: the vocab of the model")
        tok = sv.ok("POST", "/tokenize", {"content": PROMPT})
        check(len(tok["tokens"]) == 4 and all(isinstance(t, int) for t in tok["tokens"]),
              f"/tokenize {tok}")
        with_bos = sv.ok("POST", "/tokenize", {"content": PROMPT, "add_special": True})
        check(with_bos["tokens"] == [1] + tok["tokens"], f"add_special adds BOS: {with_bos}")
        pieces = sv.ok("POST", "/tokenize", {"content": PROMPT, "with_pieces": True})
        check([p["id"] for p in pieces["tokens"]] == tok["tokens"], "with_pieces ids")
        check("".join(p["piece"] for p in pieces["tokens"]).replace(" ", "") ==
              PROMPT.replace(" ", ""), f"pieces spell the prompt: {pieces}")
        detok = sv.ok("POST", "/detokenize", {"tokens": tok["tokens"]})
        check(detok["content"].strip() == PROMPT, f"/detokenize {detok}")
        # curl, as a user would.
        p = subprocess.run(["curl", "-s", f"http://127.0.0.1:{sv.port}/completion", "-d",
                            json.dumps({"prompt": PROMPT, "n_predict": 4, "temperature": 0})],
                           capture_output=True, text=True, timeout=60)
        doc = json.loads(p.stdout)
        check(doc["stop"] is True and len(doc["tokens"]) == doc["tokens_predicted"] <= 4,
              f"curl /completion: {doc}")
        check(doc["tokens_evaluated"] == 5, "the prompt with BOS is 5 tokens")
        res = sv.ok("GET", "/residency")
        check(res["operation"]["kind"] == res["session"]["kind"], "/residency has two reports")
        check(res["operation"]["output"]["token_ids"] == doc["tokens"],
              "the last operation's report holds the request's tokens")
        expect_error(sv, "GET", "/nowhere", None, 404, "not found")
        expect_error(sv, "POST", "/health", "{}", 405, "not allowed")
        expect_error(sv, "GET", "/completion", None, 405, "not allowed")
    return 0


def case_greedy_parity(c):
    model = c.model("small")
    tokens, text = c.run_tokens(model, PROMPT, 16)
    with Server(c, model) as sv:
        doc = sv.complete(n=16)
        check(doc["tokens"] == tokens, f"/completion {doc['tokens']} != run's {tokens}")
        check(doc["content"] == text, f"content {doc['content']!r} != run's {text!r}")
        # The prompt as token ids (with BOS, as tokenized for generation) gives the same.
        ids = sv.ok("POST", "/tokenize", {"content": PROMPT, "add_special": True})["tokens"]
        check(sv.complete(prompt=ids, n=16)["tokens"] == tokens, "a token-array prompt")
        oai = sv.ok("POST", "/v1/completions", {"prompt": PROMPT, "max_tokens": 16,
                                                "temperature": 0})
        check(oai["object"] == "text_completion" and oai["choices"][0]["text"] == text,
              f"/v1/completions {oai}")
        check(oai["usage"] == {"prompt_tokens": 5, "completion_tokens": len(tokens),
                               "total_tokens": 5 + len(tokens)}, f"usage {oai['usage']}")
        check(oai["choices"][0]["finish_reason"] == "length", "finish_reason")
        # Sampling: the same seed gives the same tokens; every id is in the vocabulary.
        body = {"prompt": PROMPT, "n_predict": 16, "temperature": 1.0, "seed": 7, "top_k": 40,
                "top_p": 0.95, "min_p": 0.05}
        a, b = sv.ok("POST", "/completion", body), sv.ok("POST", "/completion", body)
        check(a["tokens"] == b["tokens"], f"seeded sampling is repeatable: {a} {b}")
        check(all(0 <= t < 32000 for t in a["tokens"]), "sampled ids in the vocabulary")
        check(a["generation_settings"]["seed"] == 7 and
              a["generation_settings"]["temperature"] == 1.0, "settings echoed")
    return 0


def case_streaming(c):
    model = c.model("small")
    with Server(c, model) as sv:
        full = sv.complete(n=12)
        events = [json.loads(e) for e in sv.stream("/completion", {"prompt": PROMPT,
                                                                   "n_predict": 12,
                                                                   "temperature": 0})]
        check(len(events) >= 2 and events[-1]["stop"] and not any(e["stop"] for e in events[:-1]),
              f"events end with one stop event: {events}")
        check("".join(e["content"] for e in events) == full["content"], "streamed content")
        check([t for e in events for t in e["tokens"]] == full["tokens"], "streamed tokens")
        check(events[-1]["stop_type"] == "limit" and "timings" in events[-1], "final event")
        raw = sv.stream("/v1/completions", {"prompt": PROMPT, "max_tokens": 12,
                                            "temperature": 0})
        check(raw[-1] == "[DONE]", f"OpenAI stream ends with [DONE]: {raw[-2:]}")
        chunks = [json.loads(e) for e in raw[:-1]]
        check("".join(ch["choices"][0]["text"] for ch in chunks) == full["content"],
              "OpenAI streamed text")
        check(chunks[-1]["choices"][0]["finish_reason"] == "length" and
              all(ch["choices"][0]["finish_reason"] is None for ch in chunks[:-1]),
              "finish_reason only on the last chunk")
        # curl -N reads the same stream.
        p = subprocess.run(["curl", "-sN", f"http://127.0.0.1:{sv.port}/completion", "-d",
                            json.dumps({"prompt": PROMPT, "n_predict": 12, "temperature": 0,
                                        "stream": True})],
                           capture_output=True, text=True, timeout=60)
        data = [json.loads(line[6:]) for line in p.stdout.split("\n") if line.startswith("data: ")]
        check("".join(e["content"] for e in data) == full["content"], "curl stream")
    return 0


def case_metrics(c):
    model = c.model()
    with Server(c, model) as sv:
        before = sv.metrics()
        check(before[("llamacpp:prompt_tokens_total", ())] == 0, "no prompt tokens yet")
        docs = [sv.complete(n=n) for n in (3, 5)]
        m = sv.metrics()
        check(m[("llamacpp:prompt_tokens_total", ())] == 10, "two prompts of 5 tokens")
        check(m[("llamacpp:tokens_predicted_total", ())] ==
              sum(d["tokens_predicted"] for d in docs), "predicted tokens")
        check(m[("llamacpp:requests_processing", ())] == 0, "nothing processing")
        check(m[("ramforge_admission_total", (("outcome", "admitted"),))] +
              m[("ramforge_admission_total", (("outcome", "admitted_with_warning"),))] == 2,
              "two admissions")
        rep = sv.ok("GET", "/residency")["operation"]["ledger"]["entries"]
        ledger, _ = check_ledger_metrics(m, rep)
        check(ledger["FileBackedResident"][0] == "exact_measured", "FileBackedResident measured")
    return 0


def idle_case(c, mode):
    model = c.model("small")
    copy = os.path.join(c.tmp, "copy.gguf")  # pageout must not evict the shared model
    with open(model, "rb") as fi, open(copy, "wb") as fo:
        fo.write(fi.read())
        fo.flush()
        os.fsync(fo.fileno())
    target = 4 << 20
    tokens, _ = c.run_tokens(copy, PROMPT, 8)
    with Server(c, copy, "--residency-policy", "memory-bound", "--memory-target", str(target),
                "--release-mode", mode, "--idle-seconds", "1",
                "--staging-budget", "64MiB") as sv:
        check(sv.complete(n=8)["tokens"] == tokens, "tokens before the idle release")
        before = sv.ok("GET", "/residency")["operation"]["residency"]["samples"][-1]
        check(before["mapping_rss_bytes"] > target,
              f"a request leaves its pages resident until the idle boundary: {before}")
        props = wait_idle_boundary(sv)
        check(props["state"] == "idle_released" and props["idle_boundaries"] >= 1,
              f"/props after idle: {props}")
        res = sv.ok("GET", "/residency")["operation"]
        samples = res["residency"]["samples"]
        check(samples[-1]["label"] == "idle_release", f"last sample {samples[-1]}")
        n_maps = 1  # one GGUF file: one r--s mapping
        rss = samples[-1]["mapping_rss_bytes"]
        check(rss is not None and rss <= target + PAGE * n_maps,
              f"mapping RSS {rss} after idle > target {target} + one page per mapping")
        m = sv.metrics()
        fbr = m[("ramforge_ledger_bytes", (("category", "FileBackedResident"),
                                           ("provenance", "exact_measured")))]
        check(fbr <= target + PAGE * n_maps, f"/metrics FileBackedResident {fbr} > target")
        check(m[("ramforge_idle_boundaries_total", ())] >= 1, "idle boundary counted")
        # the last request's figures stay through the idle release's operation (not blank)
        for name in ("ramforge_operation_decode_tokens_per_second",
                     "ramforge_operation_ttft_seconds", "ramforge_operation_model_load_seconds",
                     "ramforge_operation_admission_refused"):
            check((name, ()) in m, f"{name} gone after the idle release")
        check(m[("ramforge_operation_tokens_generated", ())] == 8, "the request's 8 tokens")
        check(sv.complete(n=8)["tokens"] == tokens, "tokens after the idle release")
        check(sv.ok("GET", "/props")["residency"]["state"] == "resident", "resident again")
        m = sv.metrics()
        check(m[("ramforge_staging_requested_bytes_total", ())] > 0,
              "the request after the idle release staged")
    return 0


def wait_idle_boundary(sv, n=1, limit=30):
    """/props residency once the server has run n idle boundaries."""
    t0 = time.monotonic()
    while True:
        props = sv.ok("GET", "/props")["residency"]
        if props["idle_boundaries"] >= n:
            return props
        check(time.monotonic() - t0 < limit, f"no idle boundary within {limit} s: {props}")
        time.sleep(0.2)


def residency_states(sv):
    """ramforge_residency_state from /metrics: state -> value."""
    return {dict(labels)["state"]: v for (name, labels), v in sv.metrics().items()
            if name == "ramforge_residency_state"}


def case_idle_not_released(c):
    """An idle boundary that releases nothing never says idle_released. A model on tmpfs
    (/dev/shm, where a release frees nothing: docs/FILESYSTEMS.md) under memory-bound with a
    target below the model: the plan selects pages, the release is not attempted, and the
    state is idle_release_refused with the reason, in /props and /metrics; the next request
    does not stage (nothing was released) and the server is resident again. Under observe
    the idle boundary releases nothing by policy: the state stays resident."""
    from test_fs import shm_dir  # noqa: E402  (a folder in /dev/shm, removed after)
    target = 4 << 20
    with shm_dir() as d:
        model = os.path.join(d, "model.gguf")
        with open(c.model("small"), "rb") as fi, open(model, "wb") as fo:
            fo.write(fi.read())
        with Server(c, model, "--residency-policy", "memory-bound", "--memory-target",
                    str(target), "--idle-seconds", "1", "--staging-budget", "64MiB") as sv:
            sv.complete(n=4)
            props = wait_idle_boundary(sv)
            check(props["state"] == "idle_release_refused" and
                  "free no memory" in (props["idle_release_reason"] or ""),
                  f"/props after an idle boundary on tmpfs: {props}")
            op = sv.ok("GET", "/residency")["operation"]
            check(op["plan"]["selected_count"] > 0, f"the idle plan selected nothing: {op}")
            check("boundaries" not in op["application"], f"advised: {op['application']}")
            states = residency_states(sv)
            check(states == {"resident": 0, "idle_released": 0, "idle_release_refused": 1,
                             "staging": 0}, f"/metrics ramforge_residency_state {states}")
            sv.complete(n=4)
            check(sv.metrics()[("ramforge_staging_requested_bytes_total", ())] == 0,
                  "a request after a refused idle release staged")
            check(sv.ok("GET", "/props")["residency"]["state"] == "resident", "resident again")
    with Server(c, c.model("small"), "--residency-policy", "observe", "--idle-seconds",
                "1") as sv:
        sv.complete(n=4)
        props = wait_idle_boundary(sv)
        check(props["state"] == "resident" and
              props["idle_release_reason"] == "the policy does not mutate",
              f"/props after an observe idle boundary: {props}")
        check(residency_states(sv)["resident"] == 1, "resident in /metrics")
    return 0


def model_changed(c, change, after=None):
    """The model file changes between a request and the idle release boundary (the server's
    own pause, 3 s here): change(path, stat at load) changes it at once and returns the
    difference the report must name. Nothing is advised, the operation report warns, and the
    server keeps running (no SIGBUS in ramforge's sampling and release paths on a truncated
    mapping). Returns the idle operation's report and the tokens of the request."""
    copy = os.path.join(c.tmp, "changing.gguf")
    with open(c.model("small"), "rb") as fi, open(copy, "wb") as fo:
        fo.write(fi.read())
    target = 4 << 20
    loaded = os.stat(copy)
    with Server(c, copy, "--residency-policy", "memory-bound", "--memory-target", str(target),
                "--idle-seconds", "3") as sv:
        tokens = sv.complete(n=8)["tokens"]
        difference = change(copy, loaded)
        check(sv.ok("GET", "/props")["residency"]["idle_boundaries"] == 0,
              "the idle boundary ran before the change (a machine this slow needs a longer "
              "--idle-seconds here)")
        props = wait_idle_boundary(sv)
        check(sv.proc.poll() is None, f"serve died: {''.join(sv.stderr)[-2000:]}")
        check(props["state"] != "idle_released", f"nothing released, yet {props}")
        op = sv.ok("GET", "/residency")["operation"]
        app = op["application"]
        check(not any(b["attempted"] for b in app.get("boundaries") or []), f"advised: {app}")
        check(any("the model file changed since the load (" in w and difference in w
                  for w in op["warnings"]), f"warnings {op['warnings']}, expected {difference!r}")
        if after:
            after(sv, tokens, op)
    return 0


def case_model_replaced(c):
    new = os.path.join(c.tmp, "other.gguf")
    p = subprocess.run([c.rf, "mkmodel", "--preset", "small", "--type", "q8_0", "--seed", "43",
                        "-o", new], capture_output=True, text=True)
    check(p.returncode == 0, f"mkmodel: {p.stderr}")

    def replace(path, loaded):
        # Another model (other weights) renamed over the path: the mapping keeps the old inode.
        os.replace(new, path)
        return f"inode {loaded.st_ino} -> {os.stat(path).st_ino}"

    def refused_and_still_serving(sv, tokens, op):
        # The pages stay resident, so the boundary plans, and the release is refused.
        app = op["application"]
        check("boundaries" not in app and
              app["reason"].startswith("idle: the model file changed since the load (inode "),
              f"application {app}")
        check(op["plan"]["selected_count"] > 0, f"the boundary planned nothing: {op['plan']}")
        props = sv.ok("GET", "/props")["residency"]
        check(props["state"] == "idle_release_refused" and
              "the model file changed since the load" in props["idle_release_reason"],
              f"/props after the refused idle release: {props}")
        rss = op["residency"]["samples"][-1]["mapping_rss_bytes"]
        check(rss > 4 << 20, f"mapping RSS {rss} at or under the target: something was released")
        # The old file is still mapped: requests still decode it, with the same tokens.
        check(sv.complete(n=8)["tokens"] == tokens, "tokens after the rename")
    return model_changed(c, replace, refused_and_still_serving)


def case_model_truncated(c):
    def truncate(path, loaded):
        os.truncate(path, PAGE)
        return f"size {loaded.st_size} -> {PAGE} bytes"
    # Truncation itself drops the pages past the end from the mapping, so the plan may select
    # nothing; no request follows: llama.cpp's own reads of the weights would fault.
    return model_changed(c, truncate)


def case_idle_release(c):
    return idle_case(c, "dontneed")


def case_idle_pageout(c):
    return idle_case(c, "pageout")


def concurrent(c, policy, rss_bound):
    """Four rounds of 8 clients x 50 requests (a connection each), all correct; process RSS
    after each round after the first: it must not grow by more than rss_bound (a fraction;
    None: printed only) in all of the last three rounds, as memory kept per request would.
    The first round warms up: each connection is a thread, and glibc gives concurrent
    threads their own malloc arenas (RSS climbs over the first ~200 requests, then stays
    flat to the KiB, but an arena can still take a late step of ~0.5 MiB: a fresh clone's
    `make check` saw +3.9% then +2.3% over the second and third rounds, then flat runs)."""
    model = c.model()
    n_clients, per_client = 8, 50
    if asan_build(c.rf):
        # Memory errors need the concurrency, not the volume; ASan's quarantine grows RSS.
        per_client, rss_bound = 10, None
    with Server(c, model, "--queue", "16", "--residency-policy", policy) as sv:
        expect = sv.complete(n=4)["tokens"]
        failures = []
        lock = threading.Lock()

        def client():
            for _ in range(per_client):
                try:
                    st, doc, _ = sv.request("POST", "/completion",
                                            {"prompt": PROMPT, "n_predict": 4,
                                             "temperature": 0})
                    ok = st == 200 and doc["tokens"] == expect
                except Exception as e:  # noqa: BLE001 - reported below
                    ok, doc = False, repr(e)
                if not ok:
                    with lock:
                        failures.append(doc)

        marks = []
        for _ in range(4):
            threads = [threading.Thread(target=client) for _ in range(n_clients)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            marks.append(sv.rss())
        check(not failures, f"{len(failures)} requests failed: {failures[:3]}")
        m = sv.metrics()
        check(m[("ramforge_requests_total", ())] == 4 * n_clients * per_client + 1,
              "all counted")
        per_round = n_clients * per_client
        growth = [(b - a) / a for a, b in zip(marks, marks[1:])]
        print(f"policy {policy}: process RSS after {per_round}, {2 * per_round}, "
              f"{3 * per_round} and {4 * per_round} requests: {marks} "
              f"({', '.join(f'{g:+.2%}' for g in growth)})")
        # a round that did not grow (or shrank) answers it: growth in every round is a leak
        check(rss_bound is None or min(growth) <= rss_bound,
              f"process RSS grew {marks} (more than {rss_bound} in each round) over the requests")
    return 0


def case_concurrent(c):
    # The server's own memory per request (queue, jobs, contexts) is flat...
    return concurrent(c, "off", 0.02)


def case_concurrent_observe(c):
    # ...and so is the session's: its cumulative report keeps the last --history operations
    # (default 64) and counts the older ones as dropped.
    return concurrent(c, "observe", 0.02)


def case_queue_full(c):
    model = c.model("small")
    with Server(c, model, "--queue", "1") as sv:
        results = []

        def long_request():
            # 1000 tokens (about 1.3 s here, the most the small model's 1024-token context
            # takes): long enough for the polls below to see it running on a loaded host
            results.append(sv.request("POST", "/completion",
                                      {"prompt": PROMPT, "n_predict": 1000, "temperature": 0}))

        def wait_gauge(name, value):
            # the server's own gauges, not fixed sleeps: a loaded host delays any thread
            t0 = time.monotonic()
            while time.monotonic() - t0 < 60:
                if sv.metrics().get((name, ())) == value:
                    return True
                time.sleep(0.01)
            return False

        threads = [threading.Thread(target=long_request) for _ in range(4)]
        threads[0].start()
        busy = wait_gauge("llamacpp:requests_processing", 1)
        threads[1].start()
        busy = busy and wait_gauge("llamacpp:requests_deferred", 1)
        for t in threads[2:]:
            t.start()
        for t in threads:
            t.join()
        codes = sorted(r[0] for r in results)
        check(busy, f"the queue never held one request behind a running one: {codes}")
        check(codes.count(200) >= 2 and 503 in codes, f"statuses {codes}")
        refused = [r[1] for r in results if r[0] == 503][0]
        check(refused["error"]["type"] == "unavailable_error" and
              "queue is full" in refused["error"]["message"], f"503 body {refused}")
    return 0


def case_disconnect(c):
    model = c.model("small")
    n = 800
    with Server(c, model) as sv:
        conn = http.client.HTTPConnection("127.0.0.1", sv.port, timeout=60)
        conn.request("POST", "/completion", body=json.dumps(
            {"prompt": PROMPT, "n_predict": n, "temperature": 0, "stream": True}))
        r = conn.getresponse()
        check(r.status == 200, "stream started")
        first = r.readline()
        check(first.startswith(b"data: "), f"first event {first!r}")
        conn.sock.shutdown(2)
        conn.close()
        t0 = time.monotonic()
        while time.monotonic() - t0 < 30:
            m = sv.metrics()
            if m[("ramforge_requests_cancelled_total", ())] == 1:
                break
            time.sleep(0.05)
        check(m[("ramforge_requests_cancelled_total", ())] == 1, "the generation was cancelled")
        predicted = m[("llamacpp:tokens_predicted_total", ())]
        check(predicted < n, f"{predicted} tokens predicted of {n}: not stopped")
        check(m[("llamacpp:requests_processing", ())] == 0, "nothing processing after")
        # The context was freed and the next request runs normally.
        check(len(sv.complete(n=4)["tokens"]) == 4, "a request after the disconnect")
    return 0


def case_bad_bodies(c):
    model = c.model()
    with Server(c, model, "-c", "64") as sv:
        expect_error(sv, "POST", "/completion", "{not json", 400, "malformed JSON")
        expect_error(sv, "POST", "/completion", "[1,2]", 400, "JSON object")
        expect_error(sv, "POST", "/completion", {"n_predict": 4}, 400, "prompt")
        expect_error(sv, "POST", "/completion", {"prompt": ""}, 400, "empty")
        expect_error(sv, "POST", "/completion", {"prompt": PROMPT, "n_predict": "4"}, 400,
                     "must be an integer")
        expect_error(sv, "POST", "/completion", {"prompt": PROMPT, "temperature": "hot"}, 400,
                     "must be a number")
        expect_error(sv, "POST", "/completion", {"prompt": PROMPT, "stream": 1}, 400,
                     "must be a boolean")
        expect_error(sv, "POST", "/completion", {"prompt": PROMPT, "n_predict": -5}, 400,
                     "n_predict")
        expect_error(sv, "POST", "/completion", {"prompt": PROMPT, "n_predict": 10 ** 12}, 400,
                     "n_predict")
        expect_error(sv, "POST", "/completion", {"prompt": PROMPT, "n_predict": 100}, 400,
                     "context")
        # llama-server's exceed_context_size_error: its type and two figures besides (issue 23)
        st, doc, _ = sv.request("POST", "/completion", {"prompt": "word " * 200})
        check(st == 400 and doc["error"]["type"] == "exceed_context_size_error" and
              doc["error"]["n_ctx"] == 64 and doc["error"]["n_prompt_tokens"] > 64 and
              "does not fit the context" in doc["error"]["message"], f"too long: {doc}")
        expect_error(sv, "POST", "/completion", {"prompt": [1, 99999999]}, 400, "token 1")
        expect_error(sv, "POST", "/completion", {"prompt": [1, 2.5]}, 400, "token 1")
        expect_error(sv, "POST", "/v1/completions", {"prompt": PROMPT, "max_tokens": 0}, 400,
                     "n_predict")
        expect_error(sv, "POST", "/tokenize", {"content": 5}, 400, "content")
        expect_error(sv, "POST", "/detokenize", {"tokens": [-1]}, 400, "token 0")
        expect_error(sv, "POST", "/detokenize", {"tokens": "abc"}, 400, "tokens")
        big = json.dumps({"prompt": "x" * (1 << 20)})
        expect_error(sv, "POST", "/completion", big, 413, "larger than")
        # n_predict -1: up to the context limit.
        doc = sv.complete(n=-1)
        check(doc["tokens_predicted"] <= 64 - 5, "n_predict -1 stays within -c")
        check(sv.ok("GET", "/health") == {"status": "ok"}, "alive after bad bodies")
    return 0


def case_api_key(c):
    model = c.model()
    key = "s3cret"
    with Server(c, model, "--api-key", key) as sv:
        check(sv.ok("GET", "/health") == {"status": "ok"}, "/health needs no key")
        expect_error(sv, "POST", "/completion", {"prompt": PROMPT, "n_predict": 2}, 401,
                     "Invalid API Key")
        expect_error(sv, "GET", "/metrics", None, 401, "Invalid API Key")
        expect_error(sv, "POST", "/completion", {"prompt": PROMPT, "n_predict": 2}, 401,
                     "Invalid API Key", headers={"Authorization": "Bearer wrong"})
        sv.ok("POST", "/completion", {"prompt": PROMPT, "n_predict": 2},
              headers={"Authorization": f"Bearer {key}"})
        sv.ok("POST", "/tokenize", {"content": PROMPT}, headers={"X-Api-Key": key})
    return 0


def case_sigterm(c):
    model = c.model("small")
    report = os.path.join(c.tmp, "session.json")
    with Server(c, model, "--residency-report-json", report) as sv:
        sv.complete(n=4)
        # A long stream in flight: SIGTERM cancels it after its current token.
        conn = http.client.HTTPConnection("127.0.0.1", sv.port, timeout=60)
        conn.request("POST", "/completion", body=json.dumps(
            {"prompt": PROMPT, "n_predict": 900, "temperature": 0, "stream": True}))
        r = conn.getresponse()
        r.readline()
        t0 = time.monotonic()
        rc = sv.terminate()
        elapsed = time.monotonic() - t0
        try:
            rest = r.read().decode("utf-8", "replace")
        except http.client.IncompleteRead as e:
            raise Failure(f"the stream was cut at exit: {e.partial[-200:]!r}")
        conn.close()
        check(rc == 0, f"exit status {rc} after SIGTERM: {''.join(sv.stderr)[-2000:]}")
        check(elapsed < 10, f"SIGTERM took {elapsed:.1f} s")
        check('"stop":true' in rest, "the stream ends with its final event")
    with open(report) as f:
        doc = json.load(f)
    check(doc["operation"]["scope"] == "session", f"a session report: {doc['operation']}")
    check(doc["operation"]["operations"] >= 3, "the load and two requests at least")
    check(len(doc["output"]["token_ids"]) >= 1, "the report holds the last generation")
    if c.schema:
        errors = validate_report.validate(c.schema, report)
        check(not errors, f"the session report does not match the schema: {errors[:3]}")
    return 0


def case_session_report_bounded(c):
    """After more operations than one report lists samples of (32, the schema's bound), the
    session report (GET /residency and the file written at exit) lists the newest 32 samples,
    counts the older ones in samples_dropped, and still matches the schema."""
    model = c.model()
    report = os.path.join(c.tmp, "session.json")
    n = 40
    with Server(c, model, "--residency-policy", "observe", "--residency-report-json",
                report) as sv:
        for _ in range(n):
            sv.complete(n=2)
        live = sv.ok("GET", "/residency")
        rc = sv.terminate()
    check(rc == 0, f"exit status {rc} after SIGTERM")
    live_path = os.path.join(c.tmp, "live-session.json")
    with open(live_path, "w") as f:
        json.dump(live["session"], f)
    for path in (live_path, report):
        with open(path) as f:
            doc = json.load(f)
        ops, res = doc["operation"], doc["residency"]
        check(ops["scope"] == "session" and ops["operations"] >= n + 1,
              f"{path}: a session report of the load and {n} requests: {ops}")
        # every request takes at least one sample, so more than 32 were taken
        check(len(res["samples"]) == 32 and res["samples_dropped"] >= ops["operations"] - 32,
              f"{path}: {len(res['samples'])} samples listed, {res['samples_dropped']} dropped")
        if c.schema:
            errors = validate_report.validate(c.schema, path)
            check(not errors, f"{path} does not match the schema: {errors[:3]}")
    return 0


def case_session_report_releases_bounded(c):
    """A releasing policy without --idle-seconds ends every request with the after_session
    boundary, each a release application: after more requests than one report lists
    boundaries of (32, the schema's bound), the session report lists the newest 32, counts
    the older ones in application.boundaries_dropped, its totals cover them too (at least
    the listed sums), and it matches the schema."""
    model = c.model()
    report = os.path.join(c.tmp, "session.json")
    n = 40
    with Server(c, model, "--residency-policy", "memory-bound", "--memory-target", "4KiB",
                "--residency-report-json", report) as sv:
        for _ in range(n):
            sv.complete(n=2)
        rc = sv.terminate()
    check(rc == 0, f"exit status {rc} after SIGTERM")
    with open(report) as f:
        doc = json.load(f)
    app = doc["application"]
    ops = doc["operation"]
    check(ops["scope"] == "session" and ops["operations"] >= n + 1,
          f"a session report of the load and {n} requests: {ops}")
    # the load's after_load boundary and one after_session boundary per request, at least
    bounds = app.get("boundaries")
    check(isinstance(bounds, list) and len(bounds) == 32 and
          app["boundaries_dropped"] >= n + 1 - 32,
          f"{len(bounds or [])} boundaries listed, {app.get('boundaries_dropped')} dropped")
    tried = [b for b in bounds if b["attempted"]]
    check(tried, "a request's release was attempted (the tiny target is never met)")
    listed = sum(b["accepted_bytes"] for b in tried)
    check(app["accepted_bytes"] >= listed, f"total {app['accepted_bytes']} < listed {listed}")
    if c.schema:
        errors = validate_report.validate(c.schema, report)
        check(not errors, f"the session report does not match the schema: {errors[:3]}")
    return 0


RELEASE_COUNTERS = ("ramforge_release_applications_total",
                    "ramforge_release_requested_bytes_total",
                    "ramforge_release_accepted_bytes_total")


def case_release_counters(c):
    """/metrics' ramforge_release_*_total are the session's counters, never the last
    operation's (issue 20, fault 9). A releasing policy (a 4 KiB target, never met) releases
    at every request's after_session boundary: over several requests each counter never
    decreases and equals the session report's sums (attempted boundaries, requested and
    accepted bytes, from GET /residency); with a history cap (--history 2) smaller than the
    requests, the dropped operations' releases still count, so no counter falls either."""
    model = c.model()
    for history in (None, 2):
        extra = ("--history", str(history)) if history else ()
        with Server(c, model, "--residency-policy", "memory-bound", "--memory-target", "4KiB",
                    *extra) as sv:
            prev = None
            for i in range(6):
                sv.complete(n=2)
                m = sv.metrics()
                now = [m[(name, ())] for name in RELEASE_COUNTERS]
                if prev is not None:
                    check(all(a >= b for a, b in zip(now, prev)),
                          f"history {history}, request {i + 1}: a counter fell: "
                          f"{dict(zip(RELEASE_COUNTERS, prev))} -> "
                          f"{dict(zip(RELEASE_COUNTERS, now))}")
                    check(now[0] > prev[0] and now[2] > prev[2],
                          f"history {history}, request {i + 1}: the request's release "
                          f"is counted: {prev} -> {now}")
                prev = now
                if history is None:
                    app = sv.ok("GET", "/residency")["session"]["application"]
                    tried = [b for b in app["boundaries"] if b["attempted"]]
                    check(app["boundaries_dropped"] == 0, f"every boundary listed: {app}")
                    want = [len(tried), app["requested_bytes"], app["accepted_bytes"]]
                    check(now == want, f"request {i + 1}: metrics {now} != the session "
                          f"report's sums {want}")
    return 0


def case_admission_refused(c):
    """A request whose KV cache cannot fit a child cgroup's hard limit answers 503 with the
    admission's reason, never an OOM kill; the server keeps serving."""
    model = c.model("small")  # KV: 4 layers * 2 * 128 * 2 bytes = 2 KiB per cell
    with memory_child_cgroup("ramforge-serve", 256 << 20) as enter:
        with Server(c, model, "-c", "1048576", preexec_fn=enter) as sv:
            doc = expect_error(sv, "POST", "/completion",
                               {"prompt": PROMPT, "n_predict": 1000000, "temperature": 0}, 503,
                               "admission refused the request (rejected")
            check(doc["error"]["type"] == "unavailable_error", f"type {doc}")
            m = sv.metrics()
            check(m[("ramforge_admission_refused_total", ())] == 1 and
                  m[("ramforge_admission_total", (("outcome", "rejected"),))] == 1,
                  "the refusal is counted")
            res = sv.ok("GET", "/residency")["operation"]
            check(res["admission"]["outcome"] == "rejected" and res["admission"]["refused"],
                  f"the operation report holds the refusal: {res['admission']['outcome']}")
            check(len(sv.complete(n=4)["tokens"]) == 4, "a small request still runs")
    return 0


def case_slow_client(c):
    """A connection that sends half a request and stalls is closed after --timeout."""
    model = c.model()
    with Server(c, model, "--timeout", "1") as sv:
        s = socket.create_connection(("127.0.0.1", sv.port), timeout=10)
        s.sendall(b"POST /completion HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
        t0 = time.monotonic()
        try:
            data = s.recv(4096)
        except socket.timeout:
            data = None
        elapsed = time.monotonic() - t0
        s.close()
        check(data == b"" and elapsed < 5,
              f"the stalled connection was not closed: {data!r} after {elapsed:.1f} s")
        check(sv.ok("GET", "/health") == {"status": "ok"}, "still serving")
    return 0


def case_cli_badinput(c):
    """The command line: usage errors exit 2, start-up failures exit 1, each with one
    "ramforge: " line; --help exits 0."""
    model = c.model()

    def run(*argv):
        return subprocess.run([c.rf, "serve", *argv], capture_output=True, text=True,
                              timeout=120)

    p = run("--help")
    check(p.returncode == 0 and "--idle-seconds" in p.stdout, "serve --help")
    for argv, rc, needle in (
            ((), 2, "missing -m/--model"),
            (("-m", model, "--residency-policy", "memory-bound"), 2, "needs --memory-target"),
            (("-m", model, "--release-mode", "evict"), 2, "unknown release mode"),
            (("-m", model, "--residency-policy", "eager"), 2, "unknown residency policy"),
            (("-m", model, "--port", "70000"), 2, "invalid port"),
            (("-m", model, "--queue", "0"), 2, "invalid queue length"),
            (("-m", model, "--host", "localhost", "--port", "0"), 1, "invalid --host"),
            (("-m", os.path.join(c.tmp, "absent.gguf"), "--port", "0"), 1, "absent.gguf")):
        p = run(*argv)
        lines = [ln for ln in p.stderr.splitlines() if ln.startswith("ramforge: ")]
        check(p.returncode == rc and lines and needle in lines[0],
              f"serve {argv}: exit {p.returncode} (expected {rc}), {p.stderr!r} lacks {needle!r}")
    with Server(c, model) as sv:
        p = run("-m", model, "--port", str(sv.port))
        check(p.returncode == 1 and "cannot listen" in p.stderr, f"port in use: {p.stderr!r}")
    return 0


CASES = {
    "endpoints": case_endpoints,
    "greedy_parity": case_greedy_parity,
    "streaming": case_streaming,
    "metrics": case_metrics,
    "idle_release": case_idle_release,
    "idle_pageout": case_idle_pageout,
    "idle_not_released": case_idle_not_released,
    "model_replaced": case_model_replaced,
    "model_truncated": case_model_truncated,
    "concurrent": case_concurrent,
    "concurrent_observe": case_concurrent_observe,
    "queue_full": case_queue_full,
    "disconnect": case_disconnect,
    "bad_bodies": case_bad_bodies,
    "api_key": case_api_key,
    "sigterm": case_sigterm,
    "session_report_bounded": case_session_report_bounded,
    "session_report_releases_bounded": case_session_report_releases_bounded,
    "release_counters": case_release_counters,
    "admission_refused": case_admission_refused,
    "slow_client": case_slow_client,
    "cli_badinput": case_cli_badinput,
}

if __name__ == "__main__":
    run_main(CASES, Ctx, "rf-serve-")
