#!/usr/bin/env python3
"""The expert policy (issue 33 item 5, docs/MOE.md): --residency-policy streaming on a MoE
model reads the routed expert slices the router chooses into an LRU cache of c experts a
layer, lossless. qwen3moe-small (24.6 MiB, 4 layers of 16 experts, 4 used) runs under a real
child memory cgroup of 32 MiB (the model evicted first), where the plan leaves c < 16:

  moe_policy_run   `run --residency-policy streaming`: tokens as `--residency-policy off`
                   without a limit; the report's streaming.experts: misses and evictions
                   happened, hit_rate = hits / selections, hits + misses = selections,
                   bytes_read = misses x the layer's three slices' outward pages (each slice
                   read once, its page span: slice bytes up to two edge pages more), more than
                   0 and less than every routed byte for every token; the routed weights were
                   pointed at the cache (none left on a repacked copy), O_DIRECT or a reason;
                   admission's verdict is not "will thrash"; the report matches the schema;
                   --metrics-file's ramforge_expert_cache_* series are the report's figures;
                   the ledger's ExpertCache is the cache's resident bytes (exact_measured)
  moe_policy_serve the same under `ramforge serve` (/residency's operation report after a
                   /completion): its content and top-3 log-probabilities as serve's under
                   `off` without a limit
  moe_policy_exec  the same under `ramforge exec -- llama-server` (the pin's): the cache in
                   llama-server's own context (-ub 8: a prompt of three batches in one
                   decode), tokens and top-3 log-probabilities as bare llama-server's

Exit 0 pass, 1 fail, 77 skip (no root or no v1 memory cgroup, an ASan build: its shadow
memory does not fit the limit; llama-server not built).
"""
import http.client
import json
import os

from e2e_util import Skip, asan_build, check, evict, memory_child_cgroup, run_main
from test_moe import Ctx, expected_read, validate_report
from test_serve import Server
from test_streaming_exec import bare_answer, free_port, report_of, server, skip_unless, stop

LIMIT = 32 << 20
# 19 tokens: a longer prompt's graph scratch (estimated before the load) does not fit 32 MiB
PROMPT = "The quick brown fox jumps over the lazy dog while the old man reads a book"
LLAMA_SERVER = os.environ.get("RF_LLAMA_SERVER", "")
PAGE = os.sysconf("SC_PAGE_SIZE")
# The test model's greedy tokens hardly depend on its experts (token_embd is scaled up: the
# residual stream is the token's own): zeroed expert weights keep the tokens, not the
# probabilities. serve and exec compare the top N_PROBS log-probabilities of every token.
N_PROBS = 3


def slice_bytes(model):
    """The routed tensors' slice bytes per layer (the file's own header, read here): the
    three slices of one expert of a layer, summed; n, k."""
    n, k, routed, _ = expected_read(model)
    return routed // n // 4, n, k, routed  # 4 layers, each gate + up + down


def check_experts(c, rep, model, name):
    errors = validate_report.validate(os.path.join(c.schema, "operation_report.schema.json"),
                                      rep) if isinstance(rep, str) else []
    check(not errors, f"{name}: the report: {errors[:3]}")
    if isinstance(rep, str):
        with open(rep) as f:
            rep = json.load(f)
    a = rep["admission"]
    check(not a["thrash"] and "will thrash" not in a["reason"],
          f"{name}: admission {a['outcome']}: {a['reason']}")
    x = rep["streaming"]["experts"]
    check(x is not None, f"{name}: no expert cache ran: {rep['streaming']['plan_reason']}")
    per_expert, n, k, routed = slice_bytes(model)
    check(x["experts_per_layer"] < n and x["cache_slots"] >= n and
          x["cache_budget_bytes"] == x["cache_slots"] * rep["streaming"]["plan"]["expert_bytes"],
          f"{name}: c = {x['experts_per_layer']} of {n}, {x['cache_slots']} held at once, "
          f"budget {x['cache_budget_bytes']}")
    check(x["misses"] > 0 and x["evictions"] > 0 and x["first_error"] == 0,
          f"{name}: no miss or eviction under the limit: {x}")
    check(x["hits"] + x["misses"] == x["selections"] and
          abs(x["hit_rate"] - x["hits"] / x["selections"]) < 1e-9, f"{name}: the rate: {x}")
    lo, hi = x["misses"] * per_expert, x["misses"] * (per_expert + 3 * 2 * PAGE)
    check(lo <= x["bytes_read"] <= hi and x["slices_read"] == 3 * x["misses"],
          f"{name}: bytes_read {x['bytes_read']} not misses x slices ({lo} .. {hi}): {x}")
    check(0 < x["bytes_read"] < routed * x["tokens"], f"{name}: bytes_read: {x}")
    check(x["tensors_pointed"] > 0 and x["tensors_not_mapped"] == 0, f"{name}: pointers: {x}")
    check(x["direct_io"] or x["direct_io_reason"], f"{name}: no O_DIRECT and no reason: {x}")
    led = {e["category"]: e for e in rep["ledger"]["entries"]}["ExpertCache"]
    budget = x["cache_budget_bytes"]  # the slices' spans: the resident pages fit in it
    check(led["value_bytes"] == x["cache_resident_bytes"] and
          led["provenance"] == "exact_measured" and 0 < led["value_bytes"] <= budget,
          f"{name}: the ledger's ExpertCache {led} against the cache's {x}")
    print(f"{name}: c {x['experts_per_layer']} of {n}, hit rate {x['hit_rate']:.2f}, "
          f"{x['bytes_read']} bytes read for {x['tokens']} tokens, direct {x['direct_io']}")


def case_moe_policy_run(c):
    if asan_build(c.rf):
        raise Skip("an AddressSanitizer build: its shadow memory does not fit the 32 MiB limit")
    model = c.moe()
    off = c.run("run", "-m", model, "-n", "16", "-p", PROMPT, "-c", "256",
                "--residency-policy", "off").stdout
    rep = c.path("policy.json")
    with memory_child_cgroup("ramforge-moe-policy", LIMIT) as enter:
        evict(model)
        p = c.run("run", "-m", model, "-n", "16", "-p", PROMPT, "-c", "256",
                  "--residency-policy", "streaming", "--residency-report",
                  "--residency-report-json", rep, "--metrics-file", c.path("policy.prom"),
                  preexec_fn=enter)
    check(p.stdout == off, f"tokens under the expert policy {p.stdout!r} vs off {off!r}")
    check("experts: cache of" in p.stderr, f"no expert cache line: {p.stderr[-1500:]}")
    check_experts(c, rep, model, "run")
    with open(rep) as f:
        x = json.load(f)["streaming"]["experts"]
    with open(c.path("policy.prom")) as f:
        prom = {ln.split("{")[0]: float(ln.split()[-1])
                for ln in f if ln.startswith("ramforge_exp")}
    for name, key in (("hits_total", "hits"), ("misses_total", "misses"),
                      ("read_bytes_total", "bytes_read"),
                      ("resident_bytes", "cache_resident_bytes"),
                      ("experts_per_layer", "experts_per_layer"), ("slots", "cache_slots")):
        check(prom.get("ramforge_expert_cache_" + name) == x[key],
              f"metrics ramforge_expert_cache_{name} {prom.get('ramforge_expert_cache_' + name)} "
              f"against the report's {key} {x[key]}")


def case_moe_policy_no_cache(c):
    """Streaming on a MoE model never drops its expert cache silently: run at limits around
    where the plan's cache minimum stops fitting (32M = 30.5 MiB, below the 32 MiB above,
    left no cache on this host: a token's read fit admission, so the old plan said "the
    working set fits the limit: the plan is not applied" and the decode faulted the experts
    in through the page cache). Each run either ran the cache, or its plan_reason, its
    report's warnings and run's summary say why not; never "fits". With --stream-read-ahead 0
    (no window, so no cache) they say that."""
    if asan_build(c.rf):
        raise Skip("an AddressSanitizer build: its shadow memory does not fit the limits")
    if os.geteuid() != 0:
        raise Skip("--memory-limit makes a child memory cgroup: needs root")
    model = c.moe()
    without = []
    for limit in ("32M", "32500k", "33M"):
        rep = c.path(f"no-cache-{limit}.json")
        evict(model)  # run's own child cgroup of --memory-limit
        p = c.run("run", "-m", model, "-n", "4", "-p", PROMPT, "-c", "256",
                  "--residency-policy", "streaming", "--memory-limit", limit,
                  "--residency-report-json", rep)
        with open(rep) as f:
            doc = json.load(f)
        s = doc["streaming"]
        if s["experts"] is not None:
            continue
        why = s["plan_reason"] or ""
        without.append((limit, why[:60]))
        check("fits the limit" not in why and why, f"{limit}: no cache, plan_reason {why!r}")
        if why.startswith("no expert cache"):
            check(any(w.startswith("streaming: no expert cache") for w in doc["warnings"]) and
                  "streaming: no expert cache" in p.stderr,
                  f"{limit}: no cache, not said: {doc['warnings']}; {p.stderr[-800:]}")
    print(f"runs without a cache, each saying why: {without}")
    # the read-ahead window off turns the cache off with it: said, never "fits" (it said the
    # working set fits the limit, and the ledger's ExpertCache note said the plan applied)
    rep = c.path("no-cache-ra0.json")
    evict(model)
    p = c.run("run", "-m", model, "-n", "4", "-p", PROMPT, "-c", "256",
              "--residency-policy", "streaming", "--memory-limit", "32Mi",
              "--stream-read-ahead", "0", "--residency-report-json", rep)
    with open(rep) as f:
        doc = json.load(f)
    why = doc["streaming"]["plan_reason"] or ""
    check(doc["streaming"]["experts"] is None and
          why.startswith("no expert cache: --stream-read-ahead 0") and
          any(w.startswith("streaming: no expert cache: --stream-read-ahead 0")
              for w in doc["warnings"]) and
          "streaming: no expert cache: --stream-read-ahead 0" in p.stderr,
          f"--stream-read-ahead 0: plan_reason {why!r}, {doc['warnings']}, {p.stderr[-600:]}")


def case_moe_policy_serve(c):
    if asan_build(c.rf):
        raise Skip("an AddressSanitizer build: its shadow memory does not fit the 32 MiB limit")
    model = c.moe()
    body = {"prompt": PROMPT, "n_predict": 16, "temperature": 0, "n_probs": N_PROBS}
    with Server(c, model, "-c", "256", "--residency-policy", "off") as sv:
        want = sv.ok("POST", "/completion", body)
    with memory_child_cgroup("ramforge-moe-policy-serve", LIMIT) as enter:
        evict(model)
        with Server(c, model, "-c", "256", "--residency-policy", "streaming",
                    preexec_fn=enter) as sv:
            got = sv.ok("POST", "/completion", body)
            rep = sv.ok("GET", "/residency")["operation"]
    # the probabilities too: this model's tokens barely depend on its experts (docs/MOE.md)
    for key in ("content", "completion_probabilities"):
        check(got[key] == want[key], f"serve's {key} under the expert policy {got[key]!r} vs "
                                     f"off's {want[key]!r}")
    check_experts(c, rep, model, "serve")


def completion_probs(port):
    """llama-server's greedy tokens and their top N_PROBS log-probabilities for PROMPT."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    conn.request("POST", "/completion", body=json.dumps(
        {"prompt": PROMPT, "n_predict": 16, "temperature": 0, "return_tokens": True,
         "cache_prompt": False, "n_probs": N_PROBS}))
    r = conn.getresponse()
    doc = json.loads(r.read())
    conn.close()
    check(r.status == 200, f"/completion: {r.status} {doc}")
    return doc["tokens"], doc["completion_probabilities"]


def case_moe_policy_exec(c):
    skip_unless(c, LLAMA_SERVER, "llama-server from the pin")
    model = c.moe()
    # -ub 8: the prompt's decode computes three batches, each through the cache (a batch
    # after the first reads its own experts before the layer's weights point at the cache)
    args = ["-m", model, "--host", "127.0.0.1", "-c", "512", "-t", "2", "-np", "1",
            "-ub", "8", "-b", "8"]
    want = bare_answer(args, c.path("bare.err"), completion_probs)
    rep = c.path("exec.json")
    with memory_child_cgroup("ramforge-moe-policy-exec", LIMIT) as enter, \
            open(c.path("exec.err"), "w") as err:
        evict(model)
        port = free_port()
        proc = server([c.rf, "exec", "--residency-policy", "streaming", "--idle-seconds", "1",
                       "--residency-report-json", rep, "--", LLAMA_SERVER, *args, "--port",
                       str(port)], port, err, preexec_fn=enter)
        try:
            first = report_of(rep, 2)["operation"]["operations"]  # the load's, the warmup's
            got = completion_probs(port)
            after = report_of(rep, first + 1)  # its idle boundary
        finally:
            stop(proc)
    check(got == want, f"tokens and probabilities under exec's expert cache {got} against "
                       f"bare llama-server's {want}")
    check_experts(c, after, model, "exec llama-server")
    check_experts(c, rep, model, "exec llama-server (the final report)")


CASES = {
    "moe_policy_no_cache": case_moe_policy_no_cache,
    "moe_policy_run": case_moe_policy_run,
    "moe_policy_serve": case_moe_policy_serve,
    "moe_policy_exec": case_moe_policy_exec,
}


if __name__ == "__main__":
    run_main(CASES, Ctx, "ramforge-e2e-moe-policy-", tmp_dir=os.getcwd(), schema_required=True)
