#!/usr/bin/env python3
"""End-to-end tests of mixture-of-experts models (issue 33, docs/MOE.md): mkmodel's MoE
presets and routing skew, token parity with llama.cpp's own examples/simple, inspect's
experts against the GGUF file's own header (read here, not by ramforge), and the fit check
and admission counting a token's read as the dense part + k/n of the routed experts.

Usage: test_moe.py --ramforge BIN [--simple BIN] --schema DIR CASE
Exit 0 pass, 1 fail, 77 skip.
"""
import json
import os
import re
import struct
import subprocess
import sys

import gguf_writer
from e2e_util import SKIP, ModelCtx, check, evict, memory_child_cgroup, run_main

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "schema"))
import validate_inspect  # noqa: E402
import validate_report  # noqa: E402

PROMPT = "Hello my name is"
# A prompt of many different tokens: the routing of a short greedy run is not one loop.
LONG_PROMPT = ("The quick brown fox jumps over the lazy dog while the old man reads a book "
               "about history, science and the stars above the quiet town near the river")
MOE_PRESETS = ("qwen3moe-small", "qwen2moe-small")


class Ctx(ModelCtx):
    def __init__(self, args, tmp):
        super().__init__(args, tmp)
        self.simple = args.simple

    def moe(self, preset="qwen3moe-small", skew=None):
        name = f"{preset}{'' if skew is None else '-skew' + skew}.gguf"
        path = self.path(name)
        if not os.path.exists(path):
            self.run("mkmodel", "-P", preset, "-q", "-o", path,
                     *(() if skew is None else ("--route-skew", skew)))
        return path


def header(path):
    """The file's tensors (gguf_writer.read_layout) and its scalar keys, read here."""
    lay = gguf_writer.read_layout(path)
    buf, pos, kv = lay["kv_bytes"], 0, {}
    for _ in range(lay["n_kv"]):
        (klen,) = struct.unpack_from("<Q", buf, pos)
        key = buf[pos + 8:pos + 8 + klen].decode()
        pos += 8 + klen
        (vtype,) = struct.unpack_from("<I", buf, pos)
        pos += 4
        if vtype in gguf_writer._SCALAR:
            (kv[key],) = struct.unpack_from(gguf_writer._SCALAR[vtype], buf, pos)
        pos = gguf_writer._skip_value(buf, pos, vtype)
    return lay, kv


def expected_read(path):
    """(n, k, routed bytes, dense bytes read per token) from the header: routed = the
    ffn_*_exps tensors, the dense read every other tensor but token_embd (read by rows)."""
    lay, kv = header(path)
    arch = next(k.split(".")[0] for k in kv if k.endswith(".expert_count"))
    n, k = kv[f"{arch}.expert_count"], kv[f"{arch}.expert_used_count"]
    routed = sum(t["nbytes"] for t in lay["tensors"] if t["name"].endswith("_exps.weight"))
    dense = sum(t["nbytes"] for t in lay["tensors"]
                if not t["name"].endswith("_exps.weight") and t["name"] != "token_embd.weight")
    return n, k, routed, dense


def inspect_json(c, model, *argv):
    doc = json.loads(c.run("inspect", "--json", *argv, model).stdout)
    errors = validate_inspect.validate(c.schema, doc)
    check(not errors, f"inspect --json against the schema: {errors[:3]}")
    return doc


def case_moe_mkmodel(c):
    """The MoE presets load in llama.cpp, the same arguments give the same bytes, and
    --route-skew changes the routers alone and is written as ramforge.route_skew; the
    shared expert of qwen2moe-small is there; --route-skew needs a MoE preset."""
    a = c.moe()
    b = c.path("again.gguf")
    c.run("mkmodel", "-P", "qwen3moe-small", "-q", "-o", b)
    with open(a, "rb") as fa, open(b, "rb") as fb:
        check(fa.read() == fb.read(), "the same arguments gave different bytes")
    lay, kv = header(a)
    check(kv["qwen3moe.expert_count"] == 16 and kv["qwen3moe.expert_used_count"] == 4 and
          kv["ramforge.route_skew"] == 0.0, f"keys: {kv}")
    exps = [t for t in lay["tensors"] if t["name"].endswith("_exps.weight")]
    check(len(exps) == 12 and all(len(t["ne"]) == 3 and t["ne"][2] == 16 for t in exps),
          f"routed tensors 3-D with 16 experts outermost: {[t['ne'] for t in exps]}")
    s = c.moe(skew="1.5")
    slay, skv = header(s)
    check(abs(skv["ramforge.route_skew"] - 1.5) < 1e-6, f"skew key {skv}")
    sbuf = slay["buf"]
    diff = [t["name"] for t, u in zip(lay["tensors"], slay["tensors"])
            if lay["buf"][lay["data_offset"] + t["offset"]:][:t["nbytes"]] !=
            sbuf[slay["data_offset"] + u["offset"]:][:u["nbytes"]]]
    check(diff and all(n.endswith("ffn_gate_inp.weight") for n in diff),
          f"the skew changed {diff}, not only the routers")
    q2, _ = header(c.moe("qwen2moe-small"))
    names = {t["name"] for t in q2["tensors"]}
    check({"blk.0.ffn_up_shexp.weight", "blk.0.ffn_gate_inp_shexp.weight",
           "blk.0.attn_q.bias", "blk.0.ffn_down_exps.weight"} <= names, f"qwen2moe: {names}")
    for argv in (("-P", "tiny", "--route-skew", "1"), ("-P", "qwen3moe-small", "--route-skew",
                                                      "-1")):
        p = c.run("mkmodel", *argv, "-o", c.path("bad.gguf"), check_rc=2)
        check("route-skew" in p.stderr and not os.path.exists(c.path("bad.gguf")), p.stderr)
    print(f"{len(exps)} routed tensors; the skew changed {len(diff)} routers")


def case_moe_parity(c):
    """Greedy tokens of the MoE models (uniform and skewed routing, with a shared expert)
    are the same under --residency-policy off and observe, and the text is the one
    llama.cpp's own examples/simple prints."""
    if not c.simple or not os.path.exists(c.simple):
        print("skip: llama.cpp examples/simple was not built (no pinned source)")
        return SKIP
    for model in (c.moe(), c.moe(skew="2"), c.moe("qwen2moe-small")):
        outs = []
        for policy in ("off", "observe"):
            rpath = c.path("r.json")
            p = c.run("run", "-m", model, "-n", "24", "-p", PROMPT, "--residency-policy", policy,
                      "--residency-report-json", rpath)
            with open(rpath) as f:
                outs.append((p.stdout, json.load(f)["output"]["token_ids"]))
        check(outs[0] == outs[1] and len(outs[0][1]) == 24, f"{model}: off {outs[0]} != {outs[1]}")
        s = subprocess.run([c.simple, "-m", model, "-n", "24", PROMPT], capture_output=True,
                           text=True, timeout=300)
        check(s.returncode == 0, f"llama-simple failed: {s.stderr[-1000:]}")
        ours = outs[0][0].rstrip("\n")
        check(ours and s.stdout.rstrip("\n").endswith(ours),
              f"{model}: examples/simple printed {s.stdout!r}, ramforge {ours!r}")
        print(f"{os.path.basename(model)}: 24 tokens identical (off, observe, examples/simple)")


def case_moe_inspect(c):
    """inspect's experts against the header read here: the routed tensors and their slices
    (each at the tensor's offset + e x its bytes / n), routed and dense bytes, what a token
    reads; the text names them beside the file size; a dense model has none."""
    for preset in MOE_PRESETS:
        model = c.moe(preset)
        n, k, routed, _ = expected_read(model)
        lay, _ = header(model)
        doc = inspect_json(c, model)
        x = doc["experts"]
        check(x and x["n_expert"] == n and x["n_expert_used"] == k and
              x["routed_bytes"] == routed and x["file_size_bytes"] == os.path.getsize(model),
              f"{preset}: {x and {key: v for key, v in x.items() if key != 'tensors'}}")
        exps = {t["name"]: t for t in lay["tensors"] if t["name"].endswith("_exps.weight")}
        check(sorted(t["name"] for t in x["tensors"]) == sorted(exps), "the routed tensors")
        for t in x["tensors"]:
            h = exps[t["name"]]
            check(t["slice_bytes"] * h["ne"][2] == h["nbytes"] and
                  t["file_offset_bytes"] == lay["data_offset"] + h["offset"] and
                  len(t["slices"]) == n, f"{t['name']}: {t['slice_bytes']} x {h['ne']}")
        # the routed pages a token reads: k/n of them, rounded up
        check(x["token_read_routed_bytes"] < x["token_read_bytes"] and
              x["token_read_routed_bytes"] * n < (routed + 2 * doc["page_bytes"] * len(exps)) * k
              + n, f"{preset}: a token reads {x['token_read_routed_bytes']} routed bytes of "
                   f"{routed}")
        text = c.run("inspect", model).stdout
        check(f"experts: {n} per MoE layer" in text and "a token reads" in text and
              "(file " in text and "blk.0.ffn_gate_exps.weight" in text.split("experts:")[1],
              text[-1500:])
        np = inspect_json(c, model, "--no-probe")["experts"]
        check(np["token_read_bytes"] is None and "--no-probe" in np["token_read_source"],
              f"--no-probe: {np['token_read_bytes']}")
    dense = c.model("tiny")
    check(inspect_json(c, dense)["experts"] is None, "a dense model has no experts")
    check("experts:" not in c.run("inspect", dense).stdout, "a dense model prints no experts")
    print(f"{len(x['tensors'])} routed tensors x {n} slices checked against the header")


def evicted(path):
    """path written back and dropped from the page cache (e2e_util.evict): a limit binds on
    its pages."""
    evict(path)
    return path


def fit(c, model, limit, check_rc=0):
    doc = json.loads(c.run("inspect", "-J", "-c", "256", "--memory-limit", str(limit),
                           model, check_rc=check_rc).stdout)
    errors = validate_inspect.validate(c.schema, doc)
    check(not errors, f"the fit check's JSON: {errors[:3]}")
    return doc["admission"], {r["name"]: r for r in doc["admission"]["inputs"]}


def case_moe_fit(c):
    """The fit check counts a token's read as the dense weights + k/n of the routed experts
    (the header's own figures): under a limit where that fits but the whole file's weights
    would not, the verdict is not thrash (the old count, every weight, said it would thrash);
    under one where even that does not fit, it says so."""
    model = evicted(c.moe())
    n, k, routed, dense = expected_read(model)
    share = (routed * k + n - 1) // n
    a, rec = fit(c, model, 64 << 30)
    ws = rec["file_working_set"]
    check(ws["bytes"] == dense + share and "k/n of the routed experts" in ws["source"],
          f"read per token {ws} != dense {dense} + {k}/{n} of {routed}")
    lvl = a["cgroups"][0]
    overhead = (64 << 30) - lvl["run_room_bytes"]  # the limit's room is the limit - this
    anon = a["working_set_bytes"] - ws["bytes"]
    every = anon + dense + routed  # the old count: every weight read each token
    mid = overhead + (a["working_set_bytes"] + every) // 2
    a, _ = fit(c, evicted(model), mid)
    check(not a["thrash"] and a["cause"] != "thrash" and a["outcome"] == "admitted",
          f"limit {mid} (a token's read fits, the whole file's does not): {a['outcome']} "
          f"{a['cause']}: {a['reason']}")
    low = overhead + a["working_set_bytes"] - (every - a["working_set_bytes"]) // 2
    b, _ = fit(c, evicted(model), low, check_rc=None)  # may be rejected for its charge too
    check(b["thrash"], f"limit {low}, under a token's read: {b['outcome']} {b['reason']}")
    print(f"read per token {ws['bytes']} of {dense + routed} weights read; at {mid}: "
          f"{a['outcome']}; at {low}: {b['outcome']} ({b['cause']})")


def case_moe_run_limit(c):
    """run under a real cgroup limit below the file (evicted first): admission after the
    load counts a token's read as inspect does (the probe's dense pages + k/n of the routed
    pages, fewer than every weight page), tokens as with no limit."""
    model = evicted(c.moe())
    x = inspect_json(c, model)["experts"]
    free = c.run("run", "-m", model, "-n", "8", "-p", PROMPT).stdout
    limit = 160 << 20
    rpath = c.path("limited.json")
    with memory_child_cgroup("ramforge-moe", limit) as enter:
        p = c.run("run", "-m", evicted(model), "-n", "8", "-p", PROMPT, "-c", "256",
                  "--residency-report-json", rpath, preexec_fn=enter)
    with open(rpath) as f:
        rep = json.load(f)
    rec = {r["name"]: r for r in rep["admission"]["inputs"]}
    ws = rec["file_working_set"]
    # run classifies by placement (estimated), inspect by the probe: the same weights here
    check(ws["bytes"] == x["token_read_bytes"] and "k/n" in ws["source"],
          f"admission's read per token {ws} vs inspect's {x['token_read_bytes']}")
    check(ws["bytes"] < x["token_read_dense_bytes"] + x["routed_bytes"],
          "a token's read counts every routed byte")
    check(not rep["admission"]["thrash"], f"{rep['admission']['outcome']}: "
                                          f"{rep['admission']['reason']}")
    check(p.stdout == free, f"tokens under the limit {p.stdout!r} vs {free!r}")
    print(f"under {limit}: read per token {ws['bytes']}, {rep['admission']['outcome']}")


def run_admission(c, model, limit):
    """run under --memory-limit (a cgroup of its own; the model evicted first): the report's
    admission and run's stderr."""
    rpath = c.path("verdict.json")
    p = c.run("run", "-m", evicted(model), "-n", "4", "-p", PROMPT, "-c", "256",
              "--memory-limit", str(limit), "--residency-report-json", rpath)
    errors = validate_report.validate(os.path.join(c.schema, "operation_report.schema.json"),
                                      rpath)
    check(not errors, f"the report: {errors[:3]}")
    with open(rpath) as f:
        return json.load(f)["admission"], p.stderr


def half_cache_limit(limit, a):
    """The limit at which a's run room leaves the dense part + half the experts beyond the
    anonymous memory (a: an admission at limit)."""
    x = a["experts"]
    lvl = next(g for g in a["cgroups"] if g["checked"] and g["run_room_bytes"] is not None)
    routed = x["routed_bytes"]
    anon = a["working_set_bytes"] - next(r["bytes"] for r in a["inputs"]
                                         if r["name"] == "file_working_set")
    return limit - lvl["run_room_bytes"] + anon + x["dense_bytes"] + routed // 2


def case_moe_verdict(c):
    """Admission's verdict for a MoE model speaks in experts (issue 33, item 4): under a limit
    that leaves the dense part and half the experts, the fit check and run's admission say
    "streams experts: X per token, expected hit rate H at this budget" (H: uniform c/n before
    any routing is observed), text and JSON, and the verdict is not "will thrash" (the refusal
    of what cannot fit: test_core_admission_experts)."""
    model = c.moe()
    a, _ = fit(c, evicted(model), 64 << 30)
    x = a["experts"]
    check(x and x["cache_experts"] == x["n_expert"] and x["hit_rate"] == 1.0,
          f"every expert fits under 64 GiB: {x}")
    limit = half_cache_limit(64 << 30, a)
    a, _ = fit(c, evicted(model), limit)
    x = a["experts"]
    n, k = x["n_expert"], x["n_expert_used"]
    check(a["outcome"] == "admitted" and not a["thrash"] and k <= x["cache_experts"] < n and
          abs(x["hit_rate"] - x["cache_experts"] / n) < 1e-9 and x["hit_rate_basis"] == "uniform"
          and "streams experts: " in a["reason"] and "expected hit rate" in a["reason"],
          f"fit check at {limit}: {a['outcome']}: {x}: {a['reason']}")
    text = c.run("inspect", "-c", "256", "--memory-limit", str(limit), evicted(model)).stdout
    verdict = next(line for line in text.splitlines() if line.startswith("verdict:"))
    # another process: its own size, so its own cache; some of the experts, not all
    check("will thrash" not in verdict and "streams experts: " in verdict and
          re.search(r"expected hit rate 0\.\d\d at this budget", verdict), verdict)
    ra, _ = run_admission(c, model, 64 << 20)
    rlimit = half_cache_limit(64 << 20, ra)
    ra, err = run_admission(c, model, rlimit)
    rx = ra["experts"]
    line = next((ln for ln in err.splitlines() if ln.startswith("  admission: ")), "")
    check(ra["outcome"] == "admitted" and not ra["thrash"] and rx and
          k <= rx["cache_experts"] < n and "streams experts: " in line and
          f"expected hit rate {rx['hit_rate']:.2f} at this budget" in line,
          f"run at {rlimit}: {ra['outcome']}: {rx}: {line!r}")
    print(f"fit check at {limit}: {x['cache_experts']}/{n} experts, hit rate {x['hit_rate']:.2f},"
          f" {x['stream_bytes_per_token']} B streamed a token; run at {rlimit}: "
          f"{rx['cache_experts']}/{n}, {rx['hit_rate']:.2f}")


def routing(c, model, *argv):
    rpath = c.path("routing.json")
    c.run("run", "-m", model, "-n", "32", "-p", LONG_PROMPT, "--residency-report-json", rpath,
          *argv)
    errors = validate_report.validate(os.path.join(c.schema, "operation_report.schema.json"),
                                      rpath)
    check(not errors, f"the report: {errors[:3]}")
    with open(rpath) as f:
        rep = json.load(f)
    return rep, rep["residency"]["experts"]


def case_moe_routing(c):
    """The router's choices observed (residency.experts): every prompt and generated token
    but the last is routed in every layer but the last (which routes the tokens whose logits
    are computed, one a decode), k experts each (validate_report: the counts, the
    reuse distances); random routers route near-uniformly (an LRU cache of k of the n
    experts holds about k/n of the selections), --route-skew concentrates the routing (the
    hit rate rises); --residency-policy off observes nothing, with its reason."""
    rates = {}
    for skew in (None, "2"):
        rep, x = routing(c, c.moe(skew=skew))
        out = rep["output"]
        tokens = out["n_prompt_tokens"] + out["n_generated_tokens"] - 1
        n, k = x["n_expert"], x["n_expert_used"]
        # the last layer routes only the tokens whose logits are computed: one a decode
        check(x["tokens"] == tokens and len(x["layers"]) == 4 and x["bad_ids"] == 0 and
              all(lay["tokens"] == tokens for lay in x["layers"][:-1]) and
              x["layers"][-1]["tokens"] == out["n_generated_tokens"],
              f"{tokens} tokens decoded, routed {[lay['tokens'] for lay in x['layers']]}")
        rates[skew] = next(h["hit_rate"] for h in x["lru_hit_rate"]
                           if h["cache_experts_per_layer"] == k)
    check(abs(rates[None] - k / n) < 0.1, f"uniform: LRU of {k} holds {rates[None]}, not ~{k / n}")
    check(rates["2"] > rates[None] + 0.05, f"skewed {rates['2']} vs uniform {rates[None]}")
    rep, x = routing(c, c.moe(), "--residency-policy", "off")
    check(x["tokens"] is None and "--residency-policy off" in x["reason"], f"off: {x}")
    p = c.run("run", "-m", c.moe(), "-n", "4", "--residency-report")
    check("experts: " in p.stderr + p.stdout and "tokens routed" in p.stderr + p.stdout,
          "--residency-report names the routing")
    print(f"LRU of {k}/{n} experts: uniform {rates[None]:.2f}, skew 2 {rates['2']:.2f}")


if __name__ == "__main__":
    run_main({f.__name__[5:]: f for f in (case_moe_mkmodel, case_moe_parity, case_moe_inspect,
                                           case_moe_fit, case_moe_run_limit, case_moe_routing,
                                           case_moe_verdict)},
             Ctx, "rf-moe-")
