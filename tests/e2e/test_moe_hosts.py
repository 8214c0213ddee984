#!/usr/bin/env python3
"""The routing of a mixture-of-experts model observed where programs run it (issue 33, items 3
and 6, docs/MOE.md): serve's and exec'd llama-server's reports carry residency.experts, the
persisted profile keeps the routing for the next run's admission, and /metrics has its series.

Usage: test_moe_hosts.py --ramforge BIN --schema DIR CASE
Exit 0 pass, 1 fail, 77 skip (llama-server not built, an ASan build).
"""
import json
import os

from e2e_util import Skip, asan_build, check, run_main
from test_moe import LONG_PROMPT, Ctx, half_cache_limit, validate_report  # noqa: I100 (test_moe puts tests/schema on the path)
from test_serve import Server
from test_streaming_exec import (LLAMA_SERVER, bare_answer, completion, free_port, report_of,
                                 server, skip_unless, stop)


def experts_seen(c, rep, what, min_tokens):
    """rep's residency.experts: routed tokens in every layer, k of n each (the schema)."""
    path = c.path("checked.json")
    with open(path, "w") as f:
        json.dump(rep, f)
    errors = validate_report.validate(os.path.join(c.schema, "operation_report.schema.json"),
                                      path)
    check(not errors, f"{what}: the report: {errors[:3]}")
    x = rep["residency"]["experts"]
    check(x["tokens"] is not None and x["tokens"] >= min_tokens and len(x["layers"]) == 4 and
          all(lay["tokens"] > 0 for lay in x["layers"]) and x["bad_ids"] == 0,
          f"{what}: residency.experts {x}")
    return x


def case_moe_serve_routing(c):
    """serve observes the routing of every request (the session's recorder, handed to its
    generation): /residency's operation report has residency.experts, counting what the
    requests since the start routed (the second request adds its tokens to the first's);
    the old serve had tokens null ("not observed")."""
    with Server(c, c.moe()) as sv:
        sv.complete(n=8)
        first = experts_seen(c, sv.ok("GET", "/residency")["operation"], "serve, request 1", 8)
        sv.complete(n=8)
        second = experts_seen(c, sv.ok("GET", "/residency")["operation"], "serve, request 2",
                              first["tokens"] + 8)
    print(f"serve: {first['tokens']} then {second['tokens']} tokens routed, "
          f"LRU at k: {second['lru_hit_rate'][0]['hit_rate']:.2f}")


def case_moe_exec_routing(c):
    """llama-server under exec: the context it makes is decorated with the session's routing
    recorder (chained inside the window's callback, around the program's own), so the
    session report's residency.experts counts the routed tokens of its requests; tokens as
    bare llama-server's."""
    skip_unless(c, LLAMA_SERVER, "llama-server from the pin")
    model = c.moe()
    args = ["-m", model, "--host", "127.0.0.1", "-c", "512", "-t", "2", "-np", "1"]
    want = bare_answer(args, c.path("bare.err"), completion)
    rep = c.path("exec.json")
    port = free_port()
    with open(c.path("exec.err"), "w") as err:
        proc = server([c.rf, "exec", "--idle-seconds", "1", "--residency-report-json", rep, "--",
                       LLAMA_SERVER, *args, "--port", str(port)], port, err)
        try:
            first = report_of(rep, 2)["operation"]["operations"]  # the load's, the warmup's
            got = completion(port)
            after = report_of(rep, first + 1)
        finally:
            stop(proc)
    check(got == want, f"tokens under exec {got} against bare llama-server's {want}")
    x = experts_seen(c, after, "exec llama-server", 8)
    print(f"exec llama-server: {x['tokens']} tokens routed")


def lru_rate(routing, cache):
    """The LRU hit rate of a per-layer cache of `cache` experts over a profile's routing: the
    selections at a reuse distance below it (computed here from the distance histograms)."""
    hits = sum(sum(lay["distance"][:cache]) for lay in routing["layers"])
    sel = sum(sum(lay["distance"]) for lay in routing["layers"])
    return hits / sel


def case_moe_profile_routing(c):
    """The persisted profile keeps the routing: a first run with --profile (and a complete
    dispatch trace, which makes a profile) writes each layer's histogram and reuse distances
    (schema/access_profile.schema.json); a second run reads them: its admission's expected
    hit rate is that routing's LRU rate at its cache ("observed"), not uniform c/n; and it
    keeps its own routing in turn (the latest observed is the profile's)."""
    import jsonschema
    model = c.moe(skew="2")  # skewed: the observed rate differs from c/n
    prof = c.path("moe.profile.json")
    c.run("run", "-m", model, "-n", "16", "-p", LONG_PROMPT, "--profile", prof,
          "--observe-dispatch")
    with open(prof) as f:
        doc = json.load(f)
    with open(os.path.join(c.schema, "access_profile.schema.json")) as f:
        jsonschema.validate(doc, json.load(f))
    r = doc.get("routing")
    check(r and r["n_expert"] == 16 and len(r["layers"]) == 4 and
          all(sum(lay["counts"]) == lay["tokens"] * r["n_expert_used"] and lay["tokens"] > 0
              for lay in r["layers"]), f"the profile's routing: {r}")
    limit = 64 << 20
    rpath = c.path("second.json")
    for _ in range(2):  # the limit that leaves about half the experts, then there
        with open(prof) as f:  # each run keeps its own routing: the next reads that
            r = json.load(f)["routing"]
        c.run("run", "-m", model, "-n", "4", "-p", LONG_PROMPT, "-c", "256", "--profile", prof,
              "--memory-limit", str(limit), "--residency-report-json", rpath)
        with open(rpath) as f:
            a = json.load(f)["admission"]
        x = a["experts"]
        check(x and x["hit_rate_basis"] == "observed", f"the second run's admission: {x}")
        limit = half_cache_limit(limit, a)
    want = lru_rate(r, x["cache_experts"])
    check(abs(x["hit_rate"] - want) < 1e-9 and abs(want - x["cache_experts"] / 16) > 0.01,
          f"expected hit rate {x['hit_rate']} at {x['cache_experts']} experts, the profile's "
          f"LRU rate {want} (uniform {x['cache_experts'] / 16})")
    print(f"profile routing: {x['cache_experts']}/16 experts a layer: observed hit rate "
          f"{x['hit_rate']:.2f} (uniform would say {x['cache_experts'] / 16:.2f})")


def samples(text, name):
    """{labels text: value} of name's samples in a Prometheus text."""
    out = {}
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            key, value = line.rsplit(" ", 1)
            out[key[len(name):]] = float(value)
    return out


def case_moe_metrics(c):
    """The routing's series through the one Prometheus writer, in run's --metrics-file and
    serve's /metrics (promtool check metrics): selections per layer (tokens routed x k, as
    the report's), the LRU hit ratio at the report's cache sizes, and admission's expected
    hit ratio, cache and bytes streamed a token at the budget (as admission.experts)."""
    from prom_util import promtool_check_metrics
    if asan_build(c.rf):
        raise Skip("an ASan build (make asan): its shadow memory and quarantine put the run's "
                   "measured charge over the 32 MiB limit its figures are checked at (the plain "
                   "build runs this case)")
    model = c.moe()
    mpath, rpath = c.path("run.prom"), c.path("run.json")
    c.run("run", "-m", model, "-n", "8", "-p", LONG_PROMPT, "--memory-limit", str(32 << 20),
          "--metrics-file", mpath, "--residency-report-json", rpath)
    with open(mpath) as f:
        text = f.read()
    with open(rpath) as f:
        rep = json.load(f)
    promtool_check_metrics(text)
    x, a = rep["residency"]["experts"], rep["admission"]["experts"]
    sel = samples(text, "ramforge_experts_selections_total")
    check(sorted(sel.values()) == sorted(float(lay["tokens"] * x["n_expert_used"])
                                         for lay in x["layers"]) and len(sel) == 4,
          f"selections {sel} vs the report's {[lay['tokens'] for lay in x['layers']]}")
    lru = samples(text, "ramforge_experts_lru_hit_ratio")
    for h in x["lru_hit_rate"]:
        key = next(k for k in lru if f'cache_experts="{h["cache_experts_per_layer"]}"' in k)
        check(abs(lru[key] - h["hit_rate"]) < 1e-12, f"LRU ratio {lru[key]} vs {h}")
    exp = samples(text, "ramforge_experts_expected_hit_ratio")
    check(a and list(exp.values()) == [a["hit_rate"]] and
          list(samples(text, "ramforge_experts_stream_bytes_per_token").values()) ==
          [float(a["stream_bytes_per_token"])],
          f"expected hit ratio {exp} vs admission's {a}")
    with Server(c, model) as sv:
        sv.complete(n=8)
        body = sv.ok("GET", "/metrics")
    # llama-server's own names ("llamacpp:...", with a colon) fail promtool's lint: ours only
    promtool_check_metrics("".join(ln + "\n" for ln in body.splitlines()
                                   if "llamacpp:" not in ln))
    check(len(samples(body, "ramforge_experts_selections_total")) == 4 and
          samples(body, "ramforge_experts_lru_hit_ratio"), "serve's /metrics has no routing")
    print(f"run: {len(sel)} layers' selections, expected hit ratio {a['hit_rate']:.2f}; "
          "serve's /metrics: the routing series")


CASES = {
    "moe_serve_routing": case_moe_serve_routing,
    "moe_exec_routing": case_moe_exec_routing,
    "moe_profile_routing": case_moe_profile_routing,
    "moe_metrics": case_moe_metrics,
}

if __name__ == "__main__":
    run_main(CASES, Ctx, "rf-moe-hosts-")
