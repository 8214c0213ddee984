#!/usr/bin/env python3
"""End-to-end tests of the ramforge CLI on generated models.

Usage: test_cli.py --ramforge BIN [--simple BIN] --schema FILE CASE

Each CASE is one ctest test. Expected values come from sources other than
the code under test: /proc/<pid>/smaps read here, llama.cpp's own
examples/simple, `inspect --json` against `run`'s report, the GGUF file
bytes. Exit 0 pass, 1 fail, 77 skip.
"""
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "schema"))
import validate_report  # noqa: E402
import gguf_writer  # noqa: E402
from e2e_util import (SKIP, Failure, Skip, asan_build, check, check_ledger_metrics,  # noqa: E402
                      check_no_null, expect_error_lines, memory_child_cgroup, run_main,
                      run_ramforge)

LEDGER_CATEGORIES = [
    "FileBackedLogical", "FileBackedResident", "AnonymousWeights", "MappingPss",
    "ProcessRss", "ProcessRssPeak", "CgroupCurrent", "CgroupPeak",
    "StagingRequested", "StagingAccepted", "KvCache", "GraphScratch", "Runtime",
    "PromptCache",  # a program's host prompt cache (ramforge exec); unknown under run
    "ExpertCache",  # a MoE model's expert cache under streaming (docs/MOE.md)
]
TOP_LEVEL_KEYS = [
    "schema_version", "kind", "ramforge_version", "llama_cpp_version", "model", "policy",
    "admission", "plan", "ledger", "staging", "application", "native", "lifetime",
    "profile", "residency", "timing", "output", "warnings",
]
PROMPT = "Hello my name is"


class Ctx:
    def __init__(self, args, tmp):
        self.rf = args.ramforge
        self.simple = args.simple
        self.schema = args.schema
        self.tmp = tmp
        self.models = {}

    def run(self, *argv, check_rc=0, **kw):
        return run_ramforge(self.rf, argv, check_rc, **kw)

    def copy_of(self, path):
        """A private copy (pageout must not evict the shared test model)."""
        dst = os.path.join(self.tmp, "copy-" + os.path.basename(path))
        with open(path, "rb") as fi, open(dst, "wb") as fo:
            fo.write(fi.read())
            fo.flush()
            os.fsync(fo.fileno())  # clean pages: MADV_PAGEOUT skips dirty ones
        return dst

    def model(self, preset="tiny", wtype="q8_0", seed=42):
        key = (preset, wtype, seed)
        if key not in self.models:
            path = os.path.join(self.tmp, f"{preset}-{wtype}-{seed}.gguf")
            self.run("mkmodel", "--preset", preset, "--type", wtype, "--seed", str(seed),
                     "-o", path)
            self.models[key] = path
        return self.models[key]

    def report(self, model, *extra, n=16):
        path = os.path.join(self.tmp, f"report-{len(os.listdir(self.tmp))}.json")
        p = self.run("run", "-m", model, "-p", PROMPT, "-n", str(n),
                     "--residency-report-json", path, *extra)
        self.last_report = path
        with open(path) as f:
            text = f.read()
        check_no_null(text, f"the JSON report {path}")
        return json.loads(text), p


def ledger_map(doc):
    return {e["category"]: e for e in doc["ledger"]["entries"]}


def case_report(c):
    model = c.model()
    doc, _ = c.report(model)
    errors = validate_report.validate(c.schema, c.last_report)
    check(not errors, f"report does not match the schema: {errors[:3]}")
    for k in TOP_LEVEL_KEYS:
        check(k in doc, f"missing top-level key {k}")
    check(doc["schema_version"] == 1, "schema_version")
    check(doc["kind"] == "ramforge.residency.operation_report", "kind")
    cats = [e["category"] for e in doc["ledger"]["entries"]]
    check(cats == LEDGER_CATEGORIES, f"ledger categories {cats}")
    led = ledger_map(doc)
    check(led["Runtime"]["value_bytes"] is None and led["Runtime"]["provenance"] == "unknown"
          and led["Runtime"]["note"], "Runtime must be unknown with a reason")
    check(led["PromptCache"]["value_bytes"] is None and
          led["PromptCache"]["provenance"] == "unknown" and "exec" in led["PromptCache"]["note"],
          "PromptCache must be unknown under run, saying where it is measured")
    for cat in ("KvCache", "GraphScratch"):
        e = led[cat]
        check((e["provenance"] == "native_logical" and e["value_bytes"] > 0) or
              (e["provenance"] in ("estimated", "unknown") and e["note"]),
              f"{cat}: {e}")
    check(doc["admission"]["hard_limit"]["cgroup_version"] in ("v1", "v2", "none"), "cgroup")
    check_admission_redone(c, doc)
    # FileBackedLogical equals the file-backed tensor bytes of `inspect --json`.
    inv = json.loads(c.run("inspect", "--json", model).stdout)
    fb = sum(t["logical_bytes"] for t in inv["tensors"] if t["file_backed"])
    check(led["FileBackedLogical"]["value_bytes"] == fb,
          f"FileBackedLogical {led['FileBackedLogical']['value_bytes']} != inventory {fb}")
    check(led["FileBackedLogical"]["provenance"] == "native_logical", "FileBackedLogical provenance")
    # ... and the GGUF payload sizes add up to no more than the file.
    check(0 < fb <= os.path.getsize(model), "file-backed bytes within the file")
    rec = doc["ledger"]["reconciliation"]
    rss, mres = led["ProcessRss"]["value_bytes"], led["FileBackedResident"]["value_bytes"]
    check(rec["rss_minus_mapping_resident_bytes"] == rss - mres, "reconciliation difference")
    check(doc["output"]["n_generated_tokens"] == len(doc["output"]["token_ids"]) > 0, "tokens")
    keys = set(doc["ledger"]) | set(doc["ledger"]["reconciliation"]) | \
        {k for e in doc["ledger"]["entries"] for k in e}
    check(not [k for k in keys if "total" in k], f"the ledger must not carry a total: {keys}")
    # policy off: no inventory or ledger, each with its reason, and still valid.
    off, _ = c.report(model, "--residency-policy", "off")
    errors = validate_report.validate(c.schema, c.last_report)
    check(not errors, f"policy-off report does not match the schema: {errors[:3]}")
    check(off["ledger"]["entries"] is None and off["ledger"]["reason"], "off: ledger absent")
    # the human report goes to stderr, bounded.
    p = c.run("run", "-m", model, "-n", "4", "--residency-report")
    check("FileBackedResident" in p.stderr and len(p.stderr.splitlines()) < 60, "human report")


def check_admission_redone(c, doc):
    """The validator redoes the admission arithmetic: a checked cgroup built from this
    report's inputs passes, and one wrong figure or a wrong binding is caught."""
    adm = doc["admission"]
    rss = next(i["bytes"] for i in adm["inputs"] if i["name"] == "process_rss")
    growth, gib = adm["growth_bytes"], 1 << 30
    usage, inactive, limit = 2 * gib, 100 << 20, 8 * gib
    inputs = {i["name"]: i["bytes"] for i in adm["inputs"]}
    # after the load, the model mapping's resident unlocked pages are reclaimable too
    own = 0
    if adm.get("phase") != "pre_load" and isinstance(inputs.get("mapping_rss"), int) and \
            isinstance(inputs.get("locked"), int):
        own = min(max(0, inputs["mapping_rss"] - inputs["locked"]), usage - inactive)
    base = usage - inactive - own
    fig = {"source": "fixture", "error": None}
    adm["cgroups"] = [{
        "dir": "/sys/fs/cgroup/memory/e2e", "binding": True, "enforced": True, "checked": True,
        "limit": dict(fig, bytes=limit, unlimited=False),
        "high": {"bytes": None, "unlimited": None, "source": "", "error": "absent"},
        "usage": dict(fig, bytes=usage), "inactive_file": dict(fig, bytes=inactive),
        "reclaimable_file": dict(fig, bytes=inactive),
        "reclaimable_bytes": inactive + own, "mapping_reclaimable_bytes": own,
        "room_bytes": limit - base,
        "projected_bytes": base + growth, "fits": True,
        "run_room_bytes": limit - max(0, usage - inactive - rss), "working_set_fits": None,
        "high_fits": None}]
    if isinstance(adm.get("host"), dict):
        adm["host"].update(binding=False, room_bytes=None, projected_bytes=None)
    adm.update(binding_cgroup="/sys/fs/cgroup/memory/e2e", binding_level="cgroup",
               hard_limit_checked=True,
               projected_charge_bytes=base + growth, hard_excess_bytes=None)
    path = os.path.join(c.tmp, "redone.json")

    def errors_of(d):
        with open(path, "w") as f:
            json.dump(d, f)
        return validate_report.validate(c.schema, path)

    check(not errors_of(doc), f"a consistent admission is refused: {errors_of(doc)[:3]}")
    adm["cgroups"][0]["projected_bytes"] += 1
    errs = errors_of(doc)
    check(any("projected_bytes" in e for e in errs), f"a wrong projection passes: {errs}")
    adm["cgroups"][0]["projected_bytes"] -= 1
    adm["cgroups"][0]["binding"] = False
    errs = errors_of(doc)
    check(any("binding" in e for e in errs), f"a wrong binding passes: {errs}")


def case_admission_rejected(c):
    """A run whose KV cache cannot fit a child cgroup's hard limit is refused before the
    session, with the excess named anonymous, a valid report and no "(null)" anywhere."""
    model = c.model("small")  # KV: 4 layers * 2 * 128 * 2 bytes = 2 KiB per cell
    with memory_child_cgroup("ramforge-e2e", 256 << 20) as enter:
        path = os.path.join(c.tmp, "rejected.json")
        p = c.run("run", "-m", model, "-p", PROMPT, "-n", "4", "-c", "1048576",
                  "--residency-report", "--residency-report-json", path, check_rc=1,
                  preexec_fn=enter)
        check("admission refused the run" in p.stderr and "(rejected" in p.stderr, f"no rejection: {p.stderr[-800:]}")
        check("(null)" not in p.stderr + p.stdout, f"(null) in the output: {p.stderr}")
        errors = validate_report.validate(c.schema, path)
        check(not errors, f"rejected report does not match the schema: {errors[:3]}")
        with open(path) as f:
            adm = json.load(f)["admission"]
        check(adm["outcome"] == "rejected" and adm["refused"], f"outcome {adm['outcome']}")
        check(adm["excess_over"] == "hard_limit" and adm["excess_likely_anonymous"],
              f"excess {adm['excess_over']} anonymous {adm['excess_likely_anonymous']}")
        check(adm["binding_cgroup"] and adm["binding_cgroup"].endswith(os.path.basename(enter.cgroup)),
              f"binding {adm['binding_cgroup']}")


def smaps_model_rss(pid, model):
    """Sums Rss of the r--s mappings of the model file, read here from /proc/PID/smaps."""
    real = os.path.realpath(model)
    total, cur = 0, False
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            parts = line.split()
            if "-" in parts[0] and len(parts) >= 5 and not parts[0].endswith(":"):
                cur = parts[1] == "r--s" and len(parts) >= 6 and " ".join(parts[5:]) == real
            elif cur and parts[0] == "Rss:":
                total += int(parts[1]) * 1024
    return total


def held_run(c, model, *argv):
    """Runs `ramforge run --hold`, reads /proc/PID/smaps once the report exists.

    Returns (report, model mapping Rss from smaps, pid)."""
    path = os.path.join(c.tmp, f"held-{len(os.listdir(c.tmp))}.json")
    p = subprocess.Popen([c.rf, "run", "-m", model, *argv, "--residency-report-json", path,
                          "--hold"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 120
        while not os.path.exists(path):
            if p.poll() is not None:
                raise Failure(f"ramforge exited early: {p.stderr.read()}")
            check(time.time() < deadline, "no report within 120 s")
            time.sleep(0.05)
        measured = smaps_model_rss(p.pid, model)
        with open(path) as f:
            doc = json.load(f)
    finally:
        p.stdin.close()
        p.wait(timeout=60)
    return doc, measured, p.pid


def case_smaps(c):
    model = c.model("small")
    doc, measured, pid = held_run(c, model, "-n", "8")
    reported = ledger_map(doc)["FileBackedResident"]["value_bytes"]
    check(measured > 0, "the model mapping is in smaps")
    check(abs(reported - measured) <= 0.01 * measured,
          f"FileBackedResident {reported} vs /proc/{pid}/smaps {measured}")
    print(f"FileBackedResident {reported} B, smaps {measured} B")


def case_parity(c):
    model = c.model("small")
    off, p_off = c.report(model, "--residency-policy", "off", n=24)
    obs, p_obs = c.report(model, "--residency-policy", "observe", n=24)
    ids_off, ids_obs = off["output"]["token_ids"], obs["output"]["token_ids"]
    check(len(ids_off) > 0, "tokens generated")
    check(ids_off == ids_obs, f"off {ids_off} != observe {ids_obs}")
    check(off["output"]["token_fingerprint"] == obs["output"]["token_fingerprint"], "fingerprint")
    check(p_off.stdout == p_obs.stdout, "printed text differs")
    if not c.simple or not os.path.exists(c.simple):
        print("skip: llama.cpp examples/simple was not built (no pinned source)")
        return SKIP
    s = subprocess.run([c.simple, "-m", model, "-n", "24", PROMPT], capture_output=True,
                       text=True, timeout=300)
    check(s.returncode == 0, f"llama-simple failed: {s.stderr[-1000:]}")
    ours = p_obs.stdout.rstrip("\n")
    check(len(ours) > 0 and s.stdout.rstrip("\n").endswith(ours),
          f"examples/simple printed {s.stdout!r}, ramforge {ours!r}")
    print(f"{len(ids_obs)} tokens identical across off, observe and examples/simple")


def case_repack(c):
    model = c.model("tiny", "q4_0")
    inv = json.loads(c.run("inspect", "--json", model).stdout)
    anon = [t for t in inv["tensors"] if t["access"] == "anonymous"]
    check(anon, "no repacked weights seen on a Q4_0 model")
    for t in inv["tensors"]:
        repackable = t["type"] == "q4_0" and t["name"] != "token_embd.weight"
        if repackable:
            check(t["access"] == "anonymous", f"{t['name']} should be repacked: {t['access']}")
        else:
            check(t["access"] == "file_backed", f"{t['name']} should be file-backed: {t['access']}")
    for t in anon:
        if t["file_backed"]:
            check(t["eligibility"] == "eligible_dead_file_pages", f"{t['name']} eligibility")
    check(inv["totals"]["n_anonymous"] == len(anon), "n_anonymous")
    # Without extra buffer types nothing is repacked.
    inv2 = json.loads(c.run("inspect", "--json", "--no-repack", model).stdout)
    check(all(t["access"] == "file_backed" for t in inv2["tensors"]), "--no-repack")
    # The report's AnonymousWeights is the GGUF size of the repacked weights.
    doc, _ = c.report(model, n=4)
    check(ledger_map(doc)["AnonymousWeights"]["value_bytes"] ==
          sum(t["logical_bytes"] for t in anon), "AnonymousWeights")
    # Reading the repacked copies gives the tokens the file-backed weights give.
    doc2, _ = c.report(model, "--no-repack", n=4)
    check(doc["output"]["token_ids"] == doc2["output"]["token_ids"],
          f"repack {doc['output']['token_ids']} != no-repack {doc2['output']['token_ids']}")
    print(f"{len(anon)} repacked weights; tokens equal with and without repack")


def expect_error(c, argv, rc, needle, outputs=()):
    expect_error_lines(c, argv, rc, needle)
    for out in outputs:
        d = os.path.dirname(out) or "."
        left = [f for f in os.listdir(d) if f.startswith(os.path.basename(out))] \
            if os.path.isdir(d) else []
        check(not left, f"{argv}: left {left} behind")


def case_badinput(c):
    model = c.model()
    t = c.tmp
    rj = os.path.join(t, "bad-report.json")
    size = os.path.getsize(model)
    with open(model, "rb") as f:
        data = f.read()
    notgguf = os.path.join(t, "notgguf.gguf")
    with open(notgguf, "w") as f:
        f.write("this is not a model\n")
    trunc_header = os.path.join(t, "trunc-header.gguf")
    with open(trunc_header, "wb") as f:
        f.write(data[:1000])
    trunc_data = os.path.join(t, "trunc-data.gguf")
    with open(trunc_data, "wb") as f:
        f.write(data[:size - 100])
    missing = os.path.join(t, "missing.gguf")

    expect_error(c, ["run", "-m", missing, "--residency-report-json", rj], 1,
                 f"cannot open {missing}: No such file or directory", [rj])
    expect_error(c, ["run", "-m", notgguf, "--residency-report-json", rj], 1,
                 "not a GGUF file", [rj])
    expect_error(c, ["run", "-m", trunc_header, "--residency-report-json", rj], 1,
                 "truncated or corrupt GGUF header", [rj])
    expect_error(c, ["run", "-m", trunc_data, "--residency-report-json", rj], 1,
                 "past the end of the file", [rj])
    expect_error(c, ["inspect", trunc_data], 1, "past the end of the file")
    expect_error(c, ["inspect", missing], 1, "No such file or directory")
    expect_error(c, ["run", "-m", model, "--bogus"], 2, "unrecognized option")
    expect_error(c, ["run", "-m", model, "-n", "abc"], 2, "invalid token count (-n) 'abc'")
    expect_error(c, ["run", "-m", model, "-n", "0"], 2, "must be between")
    expect_error(c, ["run", "-m", model, "-n", "99999999999999999999999"], 2, "must be between")
    # A number out of range is a usage error like any other: the --help hint of its command.
    for cmd, argv in [("run", ["-m", model, "-n", "0"]), ("inspect", ["-c", "0", model]),
                      ("serve", ["-m", model, "--port", "x"]), ("bench", ["-r", "0", model])]:
        p = expect_error_lines(c, [cmd, *argv], 2, "invalid")
        check(f"Try 'ramforge {cmd} --help' for more information." in p.stderr.splitlines(),
              f"{cmd} {argv}: no --help hint in {p.stderr!r}")
    # run and serve parse the options they share once (tools/common/session_options.c): the same bad
    # value gets the same message and status, each with its own command's --help hint.
    # (-n's range differs: serve also takes -1, up to the context; its 0 is refused below)
    for argv in (["-n", "x"], ["-t", "x"], ["-c", "0"], ["--residency-policy", "bogus"],
                 ["--memory-target", "0"], ["--safety-reserve", "x"], ["--release-mode", "x"],
                 ["--staging-budget", "0"], ["--profile-history", "0"], ["--memory-target"]):
        r = c.run("run", "-m", model, *argv, check_rc=2)
        s = c.run("serve", "-m", model, *argv, check_rc=2)
        check("Try 'ramforge run --help'" in r.stderr and
              r.stderr.replace("'ramforge run --help'", "'ramforge serve --help'") == s.stderr,
              f"{argv}: run said {r.stderr!r}, serve {s.stderr!r}")
    expect_error(c, ["run", "-m", model, "-n", "0"], 2, "must be between 1 and 1000000")
    expect_error(c, ["serve", "-m", model, "-n", "0"], 2, "expected -1 (up to the context)")
    expect_error(c, ["run", "-m", model, "-n", "-1"], 2, "must be between 1 and 1000000")
    expect_error(c, ["run", "-m", model, "-t", "-3"], 2, "invalid thread count")
    expect_error(c, ["run", "-m", model, "--residency-policy", "bogus"], 2,
                 "unknown residency policy 'bogus'")
    expect_error(c, ["run"], 2, "missing -m/--model")
    expect_error(c, ["frobnicate"], 2, "unknown command 'frobnicate'")
    unwritable = os.path.join(model, "r.json")  # a path under a regular file: ENOTDIR
    expect_error(c, ["run", "-m", model, "--residency-report-json", unwritable], 1,
                 f"cannot write {unwritable}")
    nodir = os.path.join(t, "no-such-dir", "r.json")
    expect_error(c, ["run", "-m", model, "--residency-report-json", nodir], 1,
                 "No such file or directory")
    expect_error(c, ["mkmodel", "-o", os.path.join(t, "no-such-dir", "m.gguf")], 1,
                 "cannot create")
    # said before the generation: with -v, nothing of llama.cpp's model build precedes it
    p = c.run("mkmodel", "-v", "-o", os.path.join(t, "no-such-dir", "m.gguf"), check_rc=1)
    check(p.stderr.count("\n") == 1 and "cannot create" in p.stderr,
          f"mkmodel -v into a missing directory: {p.stderr[:300]}")
    expect_error(c, ["mkmodel", "-o", os.path.join(t, "x.gguf"), "--type", "q5_k"], 2,
                 "unknown type 'q5_k'")
    expect_error(c, ["mkmodel", "-o", os.path.join(t, "x.gguf"), "--seed", "-1"], 2,
                 "invalid seed")
    check(not os.path.exists(os.path.join(t, "x.gguf")), "mkmodel left a file")
    # Typos get the closest name; a prefix of several long options is ambiguous.
    expect_error(c, ["rnu"], 2, "unknown command 'rnu'; did you mean 'run'?")
    expect_error(c, ["inpsect", model], 2, "did you mean 'inspect'?")
    expect_error(c, ["run", "-m", model, "--memroy-target", "1G"], 2,
                 "unrecognized option '--memroy-target'; did you mean --memory-target?")
    expect_error(c, ["serve", "-m", model, "--prot=8080"], 2, "did you mean --port?")
    expect_error(c, ["bench", "-m", model, "--repetitons", "2"], 2, "did you mean --repetitions?")
    expect_error(c, ["run", "-m", model, "--res", "x"], 2,
                 "option '--res' is ambiguous; possibilities: --residency-policy, ")
    p = c.run("run", "-m", model, "--zzzzzzzzzz", check_rc=2)
    check("did you mean" not in p.stderr, f"a suggestion for a word near nothing: {p.stderr}")
    # Kubernetes-style Ki/Mi/Gi sizes are sizes.
    p = c.run("run", "-m", model, "--residency-policy", "observe", "--memory-target", "64Gi",
              "--safety-reserve", "1Mi", "-n", "1", "--residency-page-budget", "0")
    # mkmodel says what it wrote and does not replace a file without --force.
    out = os.path.join(t, "force.gguf")
    p = c.run("mkmodel", "-o", out)
    size = os.path.getsize(out)
    check(f"wrote {out} (" in p.stderr and "MiB)" in p.stderr, f"mkmodel said {p.stderr!r}")
    with open(out, "wb") as f:
        f.write(b"keep me")
    expect_error(c, ["mkmodel", "-o", out], 1, "file exists (--force replaces it)")
    with open(out, "rb") as f:
        check(f.read() == b"keep me", "mkmodel replaced a file without --force")
    p = c.run("mkmodel", "-o", out, "--force", "-q")
    check(os.path.getsize(out) == size and p.stderr == "", f"--force -q: {p.stderr!r}")


def case_mkmodel(c):
    a = c.model("tiny", "q8_0", 7)
    b = os.path.join(c.tmp, "again.gguf")
    c.run("mkmodel", "--preset", "tiny", "--type", "q8_0", "--seed", "7", "-o", b)
    with open(a, "rb") as fa, open(b, "rb") as fb:
        check(fa.read() == fb.read(), "same arguments must give a byte-identical file")
    d = c.model("tiny", "q8_0", 8)
    with open(a, "rb") as fa, open(d, "rb") as fd:
        check(fa.read() != fd.read(), "another seed must give another file")
    for wtype in ("f32", "f16", "q8_0", "q4_0"):
        m = c.model("tiny", wtype)
        inv = json.loads(c.run("inspect", "--json", "--no-probe", m).stdout)
        names = [t["name"] for t in inv["tensors"]]
        check(len(names) == 3 + 2 * 9, f"{wtype}: {len(names)} tensors, expected 21")
        types = {t["name"]: t["type"] for t in inv["tensors"]}
        check(types["blk.0.attn_q.weight"] == wtype and types["output_norm.weight"] == "f32",
              f"{wtype}: tensor types {types}")
        check(all(t["access"] == "unknown" for t in inv["tensors"]), "--no-probe")
    with open(c.model("tiny"), "rb") as f:
        check(f.read(4) == b"GGUF", "GGUF magic")


def app_boundary(doc, name):
    for b in doc["application"].get("boundaries") or []:
        if b["boundary"] == name:
            return b
    return None


def sample(doc, label):
    for smp in doc["residency"]["samples"]:
        if smp["label"] == label:
            return smp
    return None


def case_memory_bound(c):
    model = c.model("small")
    page = os.sysconf("SC_PAGE_SIZE")
    target, reserve = 8 << 20, 1 << 20
    soft = target - reserve
    base, _ = c.report(model, "--residency-policy", "off", n=12)
    doc, _ = c.report(model, "--residency-policy", "memory-bound", "--memory-target",
                      "8MiB", "--safety-reserve", "1MiB", "--verify-session", n=12)
    errors = validate_report.validate(c.schema, c.last_report)
    check(not errors, f"report does not match the schema: {errors[:3]}")
    check(doc["policy"]["soft_target_bytes"] == soft, "soft target = target - reserve")
    b = app_boundary(doc, "after_session")
    check(b and b["attempted"], f"no release after the session: {doc['application']}")
    check(b["requested_bytes"] > 0 and b["accepted_bytes"] == b["requested_bytes"],
          f"requested {b['requested_bytes']} accepted {b['accepted_bytes']}")
    check(b["observed_mapping_delta_bytes"] < 0, "the mapping RSS did not drop")
    after = sample(doc, "after_release")
    check(after["mapping_rss_bytes"] <= soft + page,
          f"mapping RSS after release {after['mapping_rss_bytes']} > soft target {soft} + a page")
    check(doc["plan"]["target_met"] is True, "plan says target not met")
    # Tokens: the session before release, the verify session after it and a policy-off run.
    check(doc["output"]["verify_session"]["tokens_identical"] is True, "verify tokens differ")
    check(doc["output"]["verify_session"]["token_ids"] == doc["output"]["token_ids"] ==
          base["output"]["token_ids"], "tokens differ from the policy-off run")
    led = ledger_map(doc)
    check(led["FileBackedResident"]["value_bytes"] == after["mapping_rss_bytes"],
          "ledger FileBackedResident is the last sample before the verify session")
    # Independent check: /proc/<pid>/smaps of a held process after release.
    _, measured, pid = held_run(c, model, "-n", "12", "--residency-policy", "memory-bound",
                                "--memory-target", "8MiB", "--safety-reserve", "1MiB")
    check(measured <= soft + page, f"/proc/{pid}/smaps shows {measured} > {soft} + a page")
    print(f"after release: mapping RSS {after['mapping_rss_bytes']} B (smaps {measured} B), "
          f"soft target {soft} B; requested {b['requested_bytes']} B, "
          f"delta {b['observed_mapping_delta_bytes']} B")


def case_conservative(c):
    # A model whose page sharing is known by construction (gguf_writer.relayout): the
    # tensors of whole pages first, from a page-aligned data section, so none of them shares
    # a page; the others after them, packed. Which tensors share a page is computed here from
    # the written offsets, not from the writer's accidents of layout nor from inspect.
    src = c.model("small")
    lay = gguf_writer.read_layout(src)
    page = os.sysconf("SC_PAGE_SIZE")
    whole = {t["name"] for t in lay["tensors"] if t["nbytes"] % page == 0}
    model = os.path.join(c.tmp, "small-known-sharing.gguf")
    extents = gguf_writer.relayout(src, model, lambda name: name in whole, page)
    shared = gguf_writer.shared_page_tensors(extents, page)
    check(shared and whole and not (shared & whole),
          f"layout: {len(whole)} tensors of whole pages, {len(shared)} sharing a page")
    inv = json.loads(c.run("inspect", "--json", model).stdout)
    check({t["name"] for t in inv["tensors"] if t["shared_page_bytes"] > 0} == shared,
          "inspect's shared tensors differ from the written layout's")
    doc, _ = c.report(model, "--residency-policy", "conservative", "--memory-target", "4MiB",
                      "--verify-session", n=8)
    sel = doc["plan"]["selected"]
    check(sel, "conservative selected nothing")
    check(not (set(sel) & shared), f"conservative selected shared tensors {set(sel) & shared}")
    check(set(sel) <= whole, f"conservative selected {set(sel) - whole}, not of whole pages")
    check(doc["output"]["verify_session"]["tokens_identical"] is True, "verify tokens differ")
    base, _ = c.report(src, "--residency-policy", "off", n=8)
    check(doc["output"]["token_ids"] == base["output"]["token_ids"],
          "the re-laid-out model generates other tokens than its source")
    # The released pages are those of the selected tensors only: the rest stays resident.
    b = app_boundary(doc, "after_session")
    check(b["attempted"] and b["accepted_bytes"] > 0, "nothing released")
    sel_bytes = sum(extents[name][1] for name in sel)
    check(b["requested_bytes"] <= sel_bytes, "released more than the selected tensors' pages")

    # Repacked weights (Q4_0): the after-load release of their dead file pages takes those
    # that share pages too, an exception to the zero-shared rule the report states.
    q4, _ = c.report(c.model("small", "q4_0"), "--residency-policy", "conservative", n=2)
    load = app_boundary(q4, "after_load")
    waived = [w for w in q4["warnings"] if "exception to its zero-shared rule" in w]
    check(load and load["attempted"] and load["accepted_bytes"] > 0 and len(waived) == 1,
          f"conservative's after-load exception unsaid: {load}, {q4['warnings']}")

def case_repack_release(c):
    model = c.model("small", "q4_0")
    base, _ = c.report(model, "--residency-policy", "off", n=12)
    doc, _ = c.report(model, "--residency-policy", "memory-bound", "--memory-target", "1MiB",
                      "--verify-session", n=12)
    early = app_boundary(doc, "after_load")
    check(early and early["attempted"] and early["accepted_bytes"] > 0,
          f"the dead file pages of repacked weights were not released after load: {early}")
    check(doc["output"]["token_ids"] == base["output"]["token_ids"],
          "tokens after releasing dead pages differ from policy off")
    check(doc["output"]["verify_session"]["tokens_identical"] is True, "verify tokens differ")
    print(f"after_load released {early['accepted_bytes']} B of dead file pages, mapping delta "
          f"{early['observed_mapping_delta_bytes']} B")


def case_policy_badinput(c):
    model = c.model()
    # 9EiB parses but exceeds INT64_MAX: a report could not carry it as a JSON integer.
    for size in ("-1MiB", "0", "0MiB", "abc", "12XB", "99999999999999999999999", "16EiB", "9EiB",
                 ""):
        expect_error(c, ["run", "-m", model, "--residency-policy", "memory-bound",
                         "--memory-target", size], 2, "invalid size for --memory-target")
    expect_error(c, ["run", "-m", model, "--residency-policy", "memory-bound"], 2,
                 "needs --memory-target")
    expect_error(c, ["run", "-m", model, "--residency-policy", "active"], 2,
                 "needs --memory-target")
    expect_error(c, ["run", "-m", model, "--memory-target", "1MiB", "--safety-reserve", "2MiB"],
                 2, "must be below --memory-target")
    expect_error(c, ["run", "-m", model, "--release-mode", "evict"], 2,
                 "unknown release mode 'evict'")
    expect_error(c, ["run", "-m", model, "--dead-file-pages", "drop"], 2,
                 "unknown --dead-file-pages 'drop'")
    # llama.cpp's flags ramforge does not take: said so, never misparsed (-ngl as -n "gl").
    for flag in (["-ngl", "0"], ["--no-mmap"], ["-b", "512"], ["--predict", "4"]):
        expect_error(c, ["run", "-m", model] + flag, 2, f"llama.cpp's {flag[0]} is not supported")
    # ...but an option's value may look like one: a prompt "-b".
    c.run("run", "-m", model, "-p", "-b", "-n", "2", "--residency-policy", "off")
    # A locked mapping: the kernel refuses MADV_DONTNEED; recorded as ReleaseFailed.
    if asan_build(c.rf):
        print("skip: AddressSanitizer's interceptor makes llama.cpp's mlock a no-op (make asan): "
              "nothing would be locked")
        return SKIP
    doc, p = c.report(model, "--residency-policy", "memory-bound", "--memory-target", "1MiB",
                      "--mlock", n=4)
    b = app_boundary(doc, "after_session")
    if b and b["attempted"] and b["failed_ranges"] == 0:
        print("skip: this kernel let MADV_DONTNEED through on an mlocked mapping")
        return SKIP
    check(b and b["attempted"] and b["failed_ranges"] > 0 and b["error"], f"mlock: {b}")
    check(doc["lifetime"]["state_counts"]["ReleaseFailed"] > 0 or
          doc["lifetime"]["release_failed"], "no ReleaseFailed resources")
    check(b["accepted_bytes"] < b["requested_bytes"], "a refused range counted as accepted")


def case_mlock_admission(c):
    """run --mlock as root (issue 20, fault 5): the lock is held, and admission says so. Its
    input `locked` is the model mapping's smaps Locked, read (the after-load sample reads the
    mapping through PAGEMAP_SCAN, which has no Locked): every byte of the mapping, the
    mapping's length and its smaps Rss at the last sample; no note that the kernel refused
    the lock; and under a releasing policy the reclaimable estimate leaves the locked mapping
    out (0: the model's one mapping is locked)."""
    if os.geteuid() != 0:
        raise Skip("not root: the kernel may refuse --mlock (RLIMIT_MEMLOCK, no CAP_IPC_LOCK)")
    if asan_build(c.rf):
        raise Skip("AddressSanitizer's interceptor makes llama.cpp's mlock a no-op (make asan)")
    model = c.model("small")
    for policy in (("--residency-policy", "observe"),
                   ("--residency-policy", "memory-bound", "--memory-target", "1MiB")):
        doc, p = c.report(model, *policy, "--mlock", n=4)
        adm = doc["admission"]
        inputs = {i["name"]: i for i in adm["inputs"]}
        mapping = doc["model"]["inventory"]["mappings"][0]
        last = doc["residency"]["samples"][-1]
        locked = inputs["locked"]
        check("no page of the model mapping is locked" not in p.stderr and
              not adm.get("lock_note"), f"{policy}: the lock reported refused: "
              f"{adm.get('lock_note')!r} {p.stderr[-500:]!r}")
        check(locked["provenance"] == "exact_measured" and "Locked" in locked["source"],
              f"{policy}: locked input {locked}")
        check(locked["bytes"] == mapping["map_length_bytes"] > 0,
              f"{policy}: locked {locked['bytes']} != the mapping's {mapping['map_length_bytes']}")
        check(last["mapping_source"] == "smaps" and last["mapping_rss_bytes"] == locked["bytes"],
              f"{policy}: smaps Rss {last} != locked {locked['bytes']}")
        if "memory-bound" in policy:
            rec = inputs["reclaimable"]
            check(rec["bytes"] == 0 and adm["reclaimable_bytes"] == 0,
                  f"the locked mapping counted as reclaimable: {rec}, {adm['reclaimable_bytes']}")
    return 0


def case_run_snapshot(c):
    model = c.copy_of(c.model("small"))
    # dontneed: the mapping drops, the page cache keeps the pages (mincore: resident).
    doc, _ = c.report(model, "--residency-policy", "memory-bound", "--memory-target", "8MiB",
                      n=8)
    errors = validate_report.validate(c.schema, c.last_report)
    check(not errors, f"report does not match the schema: {errors[:3]}")
    snap = doc["residency"]["page_snapshot"]
    t = snap["coverage"]["targeted"]
    check(snap["source"] == "mincore" and t["available_pages"] > 0, f"snapshot {snap['source']}")
    check(t["resident_pages"] == t["available_pages"],
          "after MADV_DONTNEED the page cache still holds the released pages")
    check(sample(doc, "after_release")["mapping_rss_bytes"] <
          sample(doc, "after_session")["mapping_rss_bytes"], "the mapping RSS dropped")
    # pageout: the released pages leave the page cache too.
    doc, _ = c.report(model, "--residency-policy", "memory-bound", "--memory-target", "8MiB",
                      "--release-mode", "pageout", n=8)
    t = doc["residency"]["page_snapshot"]["coverage"]["targeted"]
    check(t["nonresident_pages"] > 0, f"MADV_PAGEOUT left every released page cached: {t}")
    # A budget of zero: every page unknown, never nonresident.
    doc, _ = c.report(model, "--residency-page-budget", "0", n=4)
    cov = doc["residency"]["page_snapshot"]["coverage"]
    check(cov["general"]["unknown_pages"] == cov["general"]["available_pages"] > 0 and
          cov["general"]["nonresident_pages"] == 0, f"budget 0: {cov}")
    expect_error(c, ["run", "-m", model, "--residency-page-budget", "-5"], 2,
                 "invalid page budget")
    expect_error(c, ["run", "-m", model, "--residency-page-budget", "lots"], 2,
                 "invalid page budget")


def case_dispatch(c):
    model = c.model("small")
    plain, _ = c.report(model, n=8)
    check(plain["residency"]["dispatch"]["events"] is None, "observer off: no events")
    doc, _ = c.report(model, "--observe-dispatch", n=8)
    errors = validate_report.validate(c.schema, c.last_report)
    check(not errors, f"report does not match the schema: {errors[:3]}")
    d = doc["residency"]["dispatch"]
    check(d["events"] > 0 and d["complete"] and d["dropped_events"] == 0, f"dispatch {d}")
    check(d["weight_refs"] > 0 and d["unattributed_weight_refs"] == 0, "weights attributed")
    check(d["first_use"][0] == "token_embd.weight", f"graph order starts {d['first_use'][:2]}")
    check("dispatch-start evidence only" in d["caveat"], "caveat")
    check(doc["output"]["token_ids"] == plain["output"]["token_ids"],
          "tokens differ with the observer")
    # A buffer too small: dropped events counted, the trace is incomplete, no profile.
    small, _ = c.report(model, "--observe-dispatch", "--dispatch-events", "10", n=4)
    ds = small["residency"]["dispatch"]
    check(ds["events"] == 10 and ds["dropped_events"] > 0 and not ds["complete"], f"{ds}")
    # reuse-aware orders by the trace when it is complete.
    ra, _ = c.report(model, "--residency-policy", "reuse-aware", "--memory-target", "12MiB",
                     "--observe-dispatch", n=4)
    check(ra["plan"]["profile_used"] is True and ra["profile"]["complete"], "profile used")
    nra, _ = c.report(model, "--residency-policy", "reuse-aware", "--memory-target", "12MiB",
                      n=4)
    check(nra["plan"]["profile_used"] is False, "no profile without the observer")
    expect_error(c, ["run", "-m", model, "--dispatch-events", "0"], 2, "invalid event count")


def case_staging(c):
    model = c.model("small")
    base, _ = c.report(model, n=6)
    for budget, budget_bytes in (("4MiB", 4 << 20), ("1GiB", 1 << 30)):
        doc, _ = c.report(model, "--staging-budget", budget, n=6)
        errors = validate_report.validate(c.schema, c.last_report)
        check(not errors, f"report does not match the schema: {errors[:3]}")
        st = doc["staging"]
        check(st["attempted"] and 0 < st["selected_bytes"] <= budget_bytes,
              f"budget {budget}: selected {st['selected_bytes']}")
        check(st["accepted_bytes"] <= st["selected_bytes"], "accepted <= requested")
        check(st["selected_bytes"] + st["overlap_bytes_avoided"] + st["skipped_bytes"] ==
              st["candidate_bytes"], f"staging bytes do not add up: {st}")
        led = ledger_map(doc)
        check(led["StagingRequested"]["value_bytes"] == st["selected_bytes"] and
              led["StagingRequested"]["provenance"] == "requested", "StagingRequested")
        check(led["StagingAccepted"]["value_bytes"] == st["accepted_bytes"] and
              led["StagingAccepted"]["provenance"] == "native_accepted", "StagingAccepted")
        check(doc["timing"]["staging_ns"] is not None, "staging timer")
        check(doc["output"]["token_ids"] == base["output"]["token_ids"], "tokens changed")
    # The whole model fits 1 GiB: nothing skipped; 4 MiB is a strict maximum: some skipped.
    check(st["skipped_bytes"] == 0, "1GiB skipped bytes")
    expect_error(c, ["run", "-m", model, "--staging-budget", "0"], 2,
                 "invalid size for --staging-budget")


def case_observe_cost(c):
    """What observe reads by default, and the opt-ins that read more.

    observe classifies weights by placement (no decode) and reads the
    mapping's resident bytes with PAGEMAP_SCAN; only the ledger's sample
    reads smaps (Rss and Pss). Placement is checked against the graph probe
    of `inspect --json` (an independent classification) on a repacked Q4_0
    model; the ledger's Rss against /proc/PID/smaps read here."""
    model = c.model("tiny", "q4_0")
    inv = json.loads(c.run("inspect", "--json", model).stdout)
    n_anon = sum(t["access"] == "anonymous" for t in inv["tensors"])
    check(n_anon > 0, "no repacked weights seen on a Q4_0 model")
    doc, _ = c.report(model, n=4)
    check(not validate_report.validate(c.schema, c.last_report), "observe report vs schema")
    m = doc["model"]
    check(m["access_basis"] == "placement" and m["access_probed"] is False, f"basis {m}")
    check("--access-probe" in m["access_note"], "the note names the opt-in")
    # Every total the access decides (anonymous, eligible, reclaimable) as the probe found it.
    check(doc["model"]["inventory"]["totals"] == inv["totals"],
          f"placement totals {doc['model']['inventory']['totals']} != probe {inv['totals']}")
    check(doc["lifetime"]["state_counts"] is not None, "lifetime counts")
    samples = doc["residency"]["samples"]
    last = samples[-1]
    check(last["mapping_source"] == "smaps" and last["mapping_pss_bytes"] is not None,
          f"the ledger's sample reads smaps: {last}")
    led = ledger_map(doc)
    check(led["MappingPss"]["value_bytes"] == last["mapping_pss_bytes"] and
          led["FileBackedResident"]["value_bytes"] == last["mapping_rss_bytes"], "ledger sample")
    first = samples[0]
    if first["mapping_source"] == "smaps":
        print("note: no PAGEMAP_SCAN on this kernel (Linux < 6.7): every sample reads smaps")
    else:
        check(first["mapping_source"] == "pagemap_scan" and first["mapping_pss_bytes"] is None
              and "--sample-smaps" in first["mapping_reason"], f"after_load {first}")
        check(first["mapping_rss_bytes"] > 0, "after_load resident bytes")
    end = [s for s in samples if s["label"] == "end_of_session"]
    check(len(end) == 1 and end[0]["mapping_source"] is None and end[0]["mapping_rss_bytes"] is None
          and "not read" in end[0]["mapping_reason"] and end[0]["process_rss_bytes"] > 0,
          f"end_of_session reads the process only: {end}")
    # --sample-smaps: every sample with Pss; --access-probe: the graph probe's basis.
    full, _ = c.report(model, "--sample-smaps", "--access-probe", n=4)
    check(not validate_report.validate(c.schema, c.last_report), "opt-in report vs schema")
    check(all(s["mapping_source"] == "smaps" and s["mapping_pss_bytes"] is not None
              for s in full["residency"]["samples"]), "--sample-smaps")
    check(full["model"]["access_basis"] == "graph_probe" and full["model"]["access_probed"],
          "--access-probe")
    check(full["output"]["token_ids"] == doc["output"]["token_ids"], "tokens changed")
    # A releasing policy keeps the graph probe by default; off classifies nothing.
    mb, _ = c.report(model, "--residency-policy", "conservative", n=4)
    check(mb["model"]["access_basis"] == "graph_probe", "conservative probes")
    off, _ = c.report(model, "--residency-policy", "off", n=4)
    check(off["model"]["access_basis"] == "none", "off classifies nothing")
    # The ledger's smaps figure against /proc/PID/smaps read here.
    held, measured, pid = held_run(c, model, "-n", "4")
    reported = ledger_map(held)["FileBackedResident"]["value_bytes"]
    check(abs(reported - measured) <= 0.01 * measured,
          f"FileBackedResident {reported} vs /proc/{pid}/smaps {measured}")


def case_metrics_file(c):
    """run --metrics-file: the file prometheus_client's parser reads, every series labelled
    with the model file's name and canonical path (a quote and a backslash in them, escaped;
    issue 24: one model, one series, however -m spells it), its figures those
    of the JSON report of the same run; an unknown ledger value absent and flagged."""
    try:
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError:
        print("skip: python3-prometheus-client is not installed")
        return SKIP
    model = os.path.join(c.tmp, 'm "q\\x".gguf')
    os.link(c.model("small"), model)  # a name of its own: the labels name the canonical path
    prom = os.path.join(c.tmp, "run.prom")
    doc, _ = c.report(model, "--residency-policy", "memory-bound", "--memory-target", "8MiB",
                      "--staging-budget", "4MiB", "--metrics-file", prom, n=6)
    check(os.stat(prom).st_mode & 0o777 == 0o644, "metrics file mode 0644")
    check(not [f for f in os.listdir(c.tmp) if ".tmp." in f], "a temporary file left behind")
    with open(prom) as f:
        text = f.read()
    m = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            check(s.labels.get("model") == os.path.basename(os.path.realpath(model)) and
                  s.labels.get("path") == os.path.realpath(model),
                  f"{s.name}: model and path labels {s.labels}")
            labels = tuple(sorted((k, v) for k, v in s.labels.items()
                                  if k not in ("model", "path")))
            m[(s.name, labels)] = s.value
    ledger, unknown = check_ledger_metrics(m, doc["ledger"]["entries"])
    check(len(ledger) + len(unknown) == len(doc["ledger"]["entries"]), "one series per category")
    last = doc["residency"]["samples"][-1]
    check(m[("ramforge_mapping_rss_bytes", ())] == last["mapping_rss_bytes"],
          f"mapping RSS at {last['label']}")
    check(m[("ramforge_process_rss_bytes", ())] == last["process_rss_bytes"],
          f"process RSS at {last['label']}")
    check(m[("ramforge_operation_last_sample_info", (("sample", last["label"]),))] == 1,
          f"the last sample's name {last['label']} (issue 24: not a label of the gauges)")
    adm = doc["admission"]
    outcomes = {dict(k[1])["outcome"]: v for k, v in m.items()
                if k[0] == "ramforge_operation_admission"}
    check(outcomes[adm["outcome"]] == 1 and sum(outcomes.values()) == 1,
          f"admission {adm['outcome']}: {outcomes}")
    check(m[("ramforge_operation_admission_refused", ())] == int(adm["refused"]), "refused")
    st = doc["staging"]
    check(m[("ramforge_operation_staging_selected_bytes", ())] == st["selected_bytes"] > 0 and
          m[("ramforge_operation_staging_accepted_bytes", ())] == st["accepted_bytes"],
          f"staging {st['selected_bytes']} {st['accepted_bytes']}")
    apps = [b for b in doc["application"]["boundaries"] if b["attempted"]]
    check(apps, "the memory-bound run released")
    check(m[("ramforge_release_applications_total", ())] == len(apps), "applications")
    check(m[("ramforge_release_requested_bytes_total", ())] ==
          sum(b["requested_bytes"] for b in apps) == doc["application"]["requested_bytes"],
          "requested bytes")
    check(m[("ramforge_release_accepted_bytes_total", ())] ==
          sum(b["accepted_bytes"] for b in apps), "accepted bytes")
    check(m[("ramforge_release_observed_delta_bytes", (("measure", "mapping_rss"),))] ==
          sum(b["observed_mapping_delta_bytes"] for b in apps) < 0, "mapping delta")
    # The path is checked before the load, as the JSON report's is.
    expect_error(c, ["run", "-m", model, "-n", "1", "--metrics-file", c.tmp], 1,
                 "is not a regular file")
    expect_error(c, ["run", "-m", model, "-n", "1", "--metrics-file", model], 1,
                 "it is the model file")
    print(f"{len(m)} series; ledger {len(ledger)} known, {len(unknown)} unknown")


def case_stdout_error(c):
    """Text that cannot reach standard output (a full device, a closed descriptor) fails
    the command with one line naming the reason, never exit 0 or a silent exit 1."""
    model = c.model()
    commands = [["inspect", "--json", model], ["inspect", model], ["inspect", "-c", "512", model],
                ["inspect", "--page-cache", model], ["run", "-m", model, "-n", "2"],
                ["run", "--help"], ["--version"]]
    cases = [("/dev/full", "No space left on device"), ("closed", "Bad file descriptor")]
    for argv in commands:
        for where, reason in cases:
            if where == "closed":
                p = subprocess.run([c.rf, *argv], stderr=subprocess.PIPE, text=True,
                                   preexec_fn=lambda: os.close(1), timeout=300)
            else:
                with open(where, "w") as out:
                    p = subprocess.run([c.rf, *argv], stdout=out, stderr=subprocess.PIPE,
                                       text=True, timeout=300)
            lines = [ln for ln in p.stderr.splitlines() if ln.startswith("ramforge: ")]
            check(p.returncode == 1, f"{argv} > {where}: exit {p.returncode}, expected 1")
            check(lines == [f"ramforge: cannot write standard output: {reason}"],
                  f"{argv} > {where}: stderr {p.stderr!r}")
    print(f"{len(commands)} commands x {len(cases)} broken outputs: exit 1, one line each")


CASES = {
    "observe_cost": case_observe_cost,
    "report": case_report, "smaps": case_smaps, "parity": case_parity,
    "repack": case_repack, "badinput": case_badinput, "mkmodel": case_mkmodel,
    "memory_bound": case_memory_bound, "conservative": case_conservative,
    "repack_release": case_repack_release, "policy_badinput": case_policy_badinput,
    "mlock_admission": case_mlock_admission,
    "run_snapshot": case_run_snapshot, "dispatch": case_dispatch, "staging": case_staging,
    "admission_rejected": case_admission_rejected, "metrics_file": case_metrics_file,
    "stdout_error": case_stdout_error,
}


if __name__ == "__main__":
    run_main(CASES, Ctx, "ramforge-e2e-", schema_required=True)
