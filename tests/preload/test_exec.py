#!/usr/bin/env python3
"""ramforge exec end to end (docs/EXEC.md): the preload in unmodified llama.cpp programs.

llama.cpp's examples/simple (llama-simple-ref) and exec_hold (a context kept alive between
commands, exec_hold.c) run bare and under `ramforge exec`; tokens compared, the session
report and the metrics file read, the model mapping's Rss read here from /proc/PID/smaps.
Paths of the test programs come from the environment (tests/preload/CMakeLists.txt).
Usage: test_exec.py --ramforge PATH --simple PATH --schema PATH CASE
"""
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
sys.path.insert(0, os.path.join(HERE, "..", "schema"))
import validate_report  # noqa: E402
from e2e_util import (SKIP, Failure, Skip, asan_build, check, memory_child_cgroup,  # noqa: E402
                      run_main, wait_for, ModelCtx)

PROMPT = "Hello my name is"
N_PREDICT = 16
PAGE = 4096


class Ctx(ModelCtx):
    def __init__(self, args, tmp):
        super().__init__(args, tmp)
        self.simple = args.simple
        self.hold = os.environ.get("RF_EXEC_HOLD", "")
        self.static = os.environ.get("RF_EXEC_STATIC", "")
        if asan_build(self.rf):
            raise Skip("an AddressSanitizer build: its runtime must come first in a process, "
                       "so it cannot be preloaded into an uninstrumented program")

    def exec_argv(self, *opts):
        return [self.rf, "exec", *opts, "--"]


def run(argv, **kw):
    p = subprocess.run(argv, capture_output=True, text=True, timeout=300, **kw)
    check(0 <= p.returncode < 128 and "Segmentation" not in p.stderr,
          f"{argv[:4]} crashed: {p.returncode}\n{p.stderr[-1500:]}")
    return p


def rf_lines(text):
    return [ln for ln in text.splitlines() if ln.startswith("ramforge: ")]


def metrics(path):
    """name -> (labels dict, value) of each sample of the Prometheus text at path."""
    out = {}
    with open(path) as f:
        for line in f:
            m = re.match(r'^(\w+)\{(.*)\} (\S+)$', line.strip())
            if m:
                labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2)))
                out.setdefault(m.group(1), []).append((labels, float(m.group(3))))
    return out


def one(ms, name):
    check(name in ms and len(ms[name]) == 1, f"{name}: {ms.get(name)}")
    return ms[name][0][1]


def simple(c, model, *exec_opts):
    """llama-simple-ref's stdout and stderr, bare (exec_opts None) or under exec."""
    if not c.simple:
        raise Skip("llama-simple-ref was not built (no simple.cpp in llama.cpp's share dir)")
    argv = [c.simple, "-m", model, "-n", str(N_PREDICT), PROMPT]
    p = run((c.exec_argv(*exec_opts) if exec_opts is not None else []) + argv)
    check(p.returncode == 0, f"exit {p.returncode}: {p.stderr[-1500:]}")
    return p


def case_simple_parity(c):
    """Tokens identical bare, under exec (observe) and under exec with a releasing policy."""
    model = c.model("small")
    bare = simple(c, model).stdout
    for opts in ((), ("--residency-policy", "memory-bound", "--memory-target", "5M")):
        p = simple(c, model, *opts)
        check(p.stdout == bare, f"{opts}: tokens differ:\n{bare!r}\n{p.stdout!r}")
        check(not rf_lines(p.stderr), f"{opts}: ramforge spoke: {rf_lines(p.stderr)}")


def case_probe_no_recursion(c):
    """The engine's own llama_* calls (the access probe's context and decode inside
    rf_session_wrap) reach libllama, not the interposers: the submissions counted are the
    program's alone and the gate saw exactly one execution more (the probe), no lease twice."""
    model = c.model("small")
    counts = {}
    for policy in ("observe", "memory-bound"):
        rep, prom = c.path(f"{policy}.json"), c.path(f"{policy}.prom")
        opts = ["--residency-policy", policy, "--residency-report-json", rep,
                "--metrics-file", prom]
        if policy == "memory-bound":
            opts += ["--memory-target", "5M"]
        simple(c, model, *opts)
        with open(rep) as f:
            native = json.load(f)["native"]
        counts[policy] = (one(metrics(prom), "ramforge_exec_submissions_total"),
                          native["execution_generation"])
    n = counts["observe"][0]
    check(n >= N_PREDICT - 1 and counts["observe"][1] == n,
          f"observe: submissions and executions {counts['observe']}")
    check(counts["memory-bound"] == (n, n + 1),
          f"memory-bound: {counts['memory-bound']}, expected ({n}, {n + 1}) (the probe once)")


def case_report_metrics(c):
    """The session report (valid against the schema, the load's operation and the run's) and
    the textfile (every sample labelled with the process and the model)."""
    model = c.model("small")
    rep, prom = c.path("r.json"), c.path("m.prom")
    p = subprocess.Popen(c.exec_argv("--residency-report-json", rep, "--metrics-file", prom) +
                         [c.simple, "-m", model, "-n", str(N_PREDICT), PROMPT],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = p.communicate(timeout=300)
    check(p.returncode == 0, f"exit {p.returncode}: {err[-1500:]}")
    errors = validate_report.validate(c.schema, rep)
    check(not errors, f"the report does not match the schema: {errors[:3]}")
    with open(rep) as f:
        doc = json.load(f)
    check(doc["operation"]["scope"] == "session" and doc["operation"]["operations"] == 2,
          f"operations: {doc['operation']}")
    ms = metrics(prom)
    for name, samples in ms.items():
        for labels, _ in samples:
            check(labels.get("process") == str(p.pid) and labels.get("model") == model,
                  f"{name}: labels {labels}")
    check(one(ms, "ramforge_exec_operations_total") == 2, "two operations counted")
    check(one(ms, "ramforge_exec_contexts_alive") == 0, "no context at the end")


def case_admission_refused(c):
    """A load the child cgroup's hard limit cannot hold is refused before llama.cpp maps it:
    the program fails as for a bad file, with one ramforge line and the refused report."""
    model = c.model("small")  # KV: 2 KiB per cell; -c 1048576 is 2 GiB
    if not c.simple:
        raise Skip("llama-simple-ref was not built")
    rep = c.path("refused.json")
    with memory_child_cgroup("ramforge-exec", 256 << 20) as enter:
        p = run(c.exec_argv("--ctx-size", "1048576", "--residency-report-json", rep) +
                [c.simple, "-m", model, "-n", "4", PROMPT], preexec_fn=enter)
    check(p.returncode == 1, f"exit {p.returncode} (the program's own failure expected)")
    lines = rf_lines(p.stderr)
    check(len(lines) == 1 and "admission refused loading" in lines[0] and "(rejected" in lines[0],
          f"ramforge lines: {lines}")
    errors = validate_report.validate(c.schema, rep)
    check(not errors, f"the refused report does not match the schema: {errors[:3]}")
    with open(rep) as f:
        adm = json.load(f)["admission"]
    check(adm["refused"] and adm["outcome"] == "rejected", f"admission {adm['outcome']}")


def smaps_rss(pid, model):
    """(Rss, mappings) of the model file's r--s mappings in /proc/PID/smaps."""
    real, total, n, cur = os.path.realpath(model), 0, 0, False
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            parts = line.split()
            if "-" in parts[0] and not parts[0].endswith(":"):
                cur = len(parts) >= 6 and parts[1] == "r--s" and " ".join(parts[5:]) == real
                n += cur
            elif cur and parts[0] == "Rss:":
                total += int(parts[1]) * 1024
    return total, n


class Hold:
    """exec_hold, bare or under exec, driven line by line (stderr to a file)."""

    def __init__(self, c, model, prefix, name):
        if not c.hold:
            raise Skip("exec_hold was not built")
        self.err = open(c.path(f"{name}.err"), "w")
        self.p = subprocess.Popen(prefix + [c.hold, model, PROMPT, "256"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=self.err, text=True)

    def cmd(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        answer = self.p.stdout.readline().strip()
        check(answer and answer != "error", f"exec_hold answered {answer!r} to {line!r}")
        return answer

    def close(self):
        self.p.stdin.write("quit\n")
        self.p.stdin.close()
        rc = self.p.wait(timeout=120)
        self.err.close()
        check(rc == 0, f"exec_hold exited {rc}")


def sweep(h):
    """Single-token decodes started 1000..1036 ms after the last one: their times (ns).
    With --idle-seconds 1 each lands before, during or after that gap's idle release."""
    return [int(h.cmd(f"decode_at {d}").split()[1]) for d in range(1000, 1040, 4)]


def case_idle_alive(c):
    """The idle boundary with the context alive: the model mapping's Rss (smaps) at the
    target, the report says contexts were alive, tokens identical to bare; decodes arriving
    around the release measured against the same sweep bare."""
    model = c.model("small")
    target = 5 << 20
    bare = Hold(c, model, [], "bare")
    expect = [bare.cmd("gen 8"), bare.cmd("gen 8")]
    bare_ns = sweep(bare)
    bare.close()
    rep, prom = c.path("idle.json"), c.path("idle.prom")
    h = Hold(c, model, c.exec_argv("--residency-policy", "memory-bound", "--memory-target",
                                   str(target), "--idle-seconds", "1", "--residency-report-json",
                                   rep, "--metrics-file", prom, "-v"), "exec")
    try:
        got = [h.cmd("gen 8")]
        wait_for(lambda: os.path.exists(prom) and metrics(prom).get(
            "ramforge_exec_idle_alive_boundaries_total", [({}, 0)])[0][1] >= 1, 30,
            "the idle boundary with the context alive")
        rss, n_maps = smaps_rss(h.p.pid, model)
        with open(rep) as f:
            doc = json.load(f)
        got.append(h.cmd("gen 8"))
        exec_ns = sweep(h)
    finally:
        h.close()
    check(got == expect, f"tokens differ: bare {expect}, exec {got}")
    check(rss <= target + PAGE * n_maps, f"mapping Rss {rss} above the target {target}")
    native = doc["native"]
    check(native["observed_at"] == "idle_alive" and native["active_contexts"] >= 1,
          f"native {native}")
    bounds = [b for b in doc["application"]["boundaries"] if b["boundary"] == "idle_alive"]
    check(bounds and bounds[-1]["accepted_bytes"] > 0, f"idle_alive boundaries {bounds}")
    wait_max = one(metrics(prom), "ramforge_exec_submit_wait_max_seconds")
    med = sorted(bare_ns)[len(bare_ns) // 2]
    print(f"mapping Rss after the idle release {rss} B (target {target} B, {n_maps} mappings); "
          f"sweep decode ns: bare median {med} max {max(bare_ns)}, exec median "
          f"{sorted(exec_ns)[len(exec_ns) // 2]} max {max(exec_ns)}; "
          f"longest wait in ramforge {wait_max * 1e3:.3f} ms")
    check(wait_max < 1.0, f"a submission waited {wait_max} s in ramforge")


def case_staging_after_idle(c):
    """--staging-budget: the first decode after an idle release (context alive) stages the
    weights the graph reads, within the budget, before it runs."""
    model = c.model("small")
    rep, prom = c.path("st.json"), c.path("st.prom")
    h = Hold(c, model, c.exec_argv("--residency-policy", "memory-bound", "--memory-target", "5M",
                                   "--idle-seconds", "1", "--staging-budget", "100M",
                                   "--residency-report-json", rep, "--metrics-file", prom),
             "staging")
    try:
        h.cmd("gen 4")
        wait_for(lambda: os.path.exists(prom) and metrics(prom).get(
            "ramforge_exec_idle_alive_boundaries_total", [({}, 0)])[0][1] >= 1, 30,
            "the idle boundary")
        h.cmd("gen 4")
    finally:
        h.close()
    with open(rep) as f:
        doc = json.load(f)
    st = doc["staging"]
    check(st["attempted"] and 0 < st["accepted_bytes"] <= st["budget_bytes"] == 100 << 20,
          f"staging {st}")
    check(doc["operation"]["operations"] == 3, f"load, the first and the staged operation: "
          f"{doc['operation']}")


def case_no_libllama(c):
    """A program without libllama runs; exec says in one line the preload does nothing."""
    p = run(c.exec_argv() + ["/bin/true"])
    lines = rf_lines(p.stderr)
    check(p.returncode == 0 and len(lines) == 1 and "does not link libllama" in lines[0],
          f"exit {p.returncode}, lines {lines}")


def case_static_llama(c):
    """A program that defines llama.cpp's entry itself is refused, pointing to watch."""
    if not c.static:
        raise Skip("exec_static_llama was not built")
    p = run(c.exec_argv() + [c.static])
    lines = rf_lines(p.stderr)
    check(p.returncode == 1 and not p.stdout and len(lines) == 1 and
          "statically" in lines[0] and "ramforge watch" in lines[0],
          f"exit {p.returncode}, stdout {p.stdout!r}, lines {lines}")


def case_mismatched_llama(c):
    """A program whose loader finds another libllama build is refused, naming both."""
    prog = os.environ.get("RF_EXEC_OLD", "")
    if not prog:
        raise Skip("no other libllama build to link exec_old_llama against (RF_LLAMA_OLD)")
    check(run([prog]).stdout == "ran\n", "exec_old_llama runs bare")
    p = run(c.exec_argv() + [prog])
    lines = rf_lines(p.stderr)
    check(p.returncode == 1 and not p.stdout and len(lines) == 1, f"exit {p.returncode} {lines}")
    ids = re.findall(r"build ID ([0-9a-f]+)", lines[0])
    check("libllama.so" in lines[0] and len(ids) == 2 and ids[0] != ids[1],
          f"names both builds: {lines[0]}")


def case_cli_badinput(c):
    """Bad command lines: one line each, exit 2 (1 for a missing program)."""
    for argv, rc, needle in (
            (["exec", "/bin/true"], 2, "unexpected argument"),
            (["exec", "--"], 2, "missing -- PROGRAM"),
            (["exec", "--metrics-listen", "127.0.0.1:9", "--", "/bin/true"], 2, "metrics-listen"),
            (["exec", "--residency-policy", "memory-bound", "--", "/bin/true"], 2,
             "--memory-target"),
            (["exec", "-m", "x.gguf", "--", "/bin/true"], 2, "-m"),
            (["exec", "--idle-seconds", "-1", "--", "/bin/true"], 2, "--idle-seconds"),
            (["exec", "--", "/nonexistent/program"], 1, "/nonexistent/program")):
        p = c.run(*argv, check_rc=None)
        lines = rf_lines(p.stderr)
        check(p.returncode == rc and lines and needle in lines[0],
              f"{argv}: exit {p.returncode}, lines {lines}")


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith("case_")}

if __name__ == "__main__":
    run_main(CASES, Ctx, "ramforge-exec-", schema_required=True)
