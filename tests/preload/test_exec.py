#!/usr/bin/env python3
"""ramforge exec end to end (docs/EXEC.md): the preload in unmodified llama.cpp programs.

llama.cpp's examples/simple (llama-simple-ref) and exec_hold (a context kept alive between
commands, exec_hold.c) run bare and under `ramforge exec`; tokens compared, the session
report and the metrics file read, the model mapping's Rss read here from /proc/PID/smaps.
Paths of the test programs come from the environment (tests/preload/CMakeLists.txt).
Usage: test_exec.py --ramforge PATH --simple PATH --schema PATH CASE
"""
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
sys.path.insert(0, os.path.join(HERE, "..", "schema"))
import validate_report  # noqa: E402
from e2e_util import (SKIP, Failure, Skip, asan_build, check, ended_by_sigterm,  # noqa: E402
                      memory_cgroup_v1, memory_child_cgroup, run_main, wait_for, ModelCtx)
from prom_util import prometheus_query, promtool_check_metrics  # noqa: E402

PROMPT = "Hello my name is"
LLAMA_SERVER = os.environ.get("RF_LLAMA_SERVER", "")
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


def metrics_text(text):
    """name -> (labels dict, value) of each sample of the Prometheus text."""
    out = {}
    for line in text.splitlines():
        m = re.match(r'^(\w+)\{(.*)\} (\S+)$', line.strip())
        if m:
            labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2)))
            out.setdefault(m.group(1), []).append((labels, float(m.group(3))))
    return out


def metrics(path):
    """metrics_text of the file at path."""
    with open(path) as f:
        return metrics_text(f.read())


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


def case_streaming(c):
    """--residency-policy streaming under exec: tokens unchanged, the report's streaming
    section (without a limit: active, no plan, so no pins) as `ramforge run` writes it."""
    model = c.model("small")
    bare = simple(c, model).stdout
    rep = c.path("stream.json")
    p = simple(c, model, "--residency-policy", "streaming", "--residency-report-json", rep)
    check(p.stdout == bare, "streaming under exec changed the tokens")
    with open(rep) as f:
        st = json.load(f)["streaming"]
    check(st["active"] and st["plan"] is None and st["plan_reason"], f"streaming {st}")


def case_report_metrics(c):
    """The session report (valid against the schema, the load's operation and the run's) and
    the textfile (every sample labelled pid, model and path, as watch's)."""
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
            # model is the file's name, path its canonical path (one series per model)
            check(labels.get("pid") == str(p.pid) and
                  labels.get("model") == os.path.basename(model) and
                  labels.get("path", os.path.realpath(model)) == os.path.realpath(model),
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

    def __init__(self, c, model, prefix, name, *extra, n_ctx=256, preexec=None):
        if not c.hold:
            raise Skip("exec_hold was not built")
        self.err = open(c.path(f"{name}.err"), "w")
        self.p = subprocess.Popen(prefix + [c.hold, model, PROMPT, str(n_ctx), *extra],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=self.err, text=True, preexec_fn=preexec)

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
    ms = metrics(prom)
    wait_max = one(ms, "ramforge_exec_gate_wait_max_seconds")
    book_max = one(ms, "ramforge_exec_bookkeeping_max_seconds")
    med = sorted(bare_ns)[len(bare_ns) // 2]
    print(f"mapping Rss after the idle release {rss} B (target {target} B, {n_maps} mappings); "
          f"sweep decode ns: bare median {med} max {max(bare_ns)}, exec median "
          f"{sorted(exec_ns)[len(exec_ns) // 2]} max {max(exec_ns)}; "
          f"longest wait in the gate {wait_max * 1e3:.3f} ms, longest bookkeeping "
          f"{book_max * 1e3:.3f} ms")
    check(wait_max < 1.0, f"a submission waited {wait_max} s in the gate")


def case_staging_after_idle(c):
    """--staging-budget: the first decode after an idle release (context alive) stages the
    weights the graph reads, within the budget, before it runs."""
    model = c.model("small")
    rep, prom = c.path("st.json"), c.path("st.prom")
    h = Hold(c, model, c.exec_argv("--residency-policy", "memory-bound", "--memory-target", "5M",
                                   "--idle-seconds", "1", "--staging-budget", "100Mi",
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


def free_port():
    sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
    from serve_idle import free_port as free
    return free()


def http(url, body=None):
    """The body of GET url (POST with the JSON body), or None when nothing answers."""
    data = json.dumps(body).encode() if body is not None else None
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data=data), timeout=120) as r:
            return r.read().decode()
    except OSError:
        return None


class ExecServer:
    """llama-server from the pin under `ramforge exec OPTS` on 127.0.0.1 (TMPDIR: the case's
    folder, where --metrics-listen's spool goes): .proc is ramforge (the parent, which stays),
    .pid llama-server's pid, .port its port; args: more of llama-server's own. Killed at exit
    if still running."""

    def __init__(self, c, model, *opts, args=()):
        if not LLAMA_SERVER or not os.access(LLAMA_SERVER, os.X_OK):
            raise Skip(f"llama-server from the pin is not built (RF_LLAMA_SERVER="
                       f"{LLAMA_SERVER!r}; scripts/build-llama-server.sh builds it)")
        self.port, self.errpath = free_port(), c.path("exec-server.err")
        self.err = open(self.errpath, "w")
        self.proc = subprocess.Popen(
            c.exec_argv(*opts) + [LLAMA_SERVER, "-m", model, "--host", "127.0.0.1", "--port",
                                  str(self.port), "-c", "512", "-t", "1", *args],
            stdout=subprocess.DEVNULL, stderr=self.err, env=dict(os.environ, TMPDIR=c.tmp))

        def up():
            if self.proc.poll() is not None:
                raise Failure(f"exec exited {self.proc.returncode}: {self.stderr()[-1500:]}")
            return http(f"http://127.0.0.1:{self.port}/health") is not None
        wait_for(up, 120, "llama-server under exec to answer /health")
        with open(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children") as f:
            kids = f.read().split()
        check(len(kids) == 1, f"exec's children: {kids}")
        self.pid = int(kids[0])

    def stderr(self):
        with open(self.errpath) as f:
            return f.read()

    def stop(self, sig=signal.SIGTERM):
        self.proc.send_signal(sig)
        return self.proc.wait(timeout=120)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.proc.poll() is None:  # a failed case: stopped as a user would (no cgroup left)
            self.proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=60)
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.err.close()


def case_metrics_listen(c):
    """--metrics-listen PORT (127.0.0.1): llama-server's figures as ramforge reads them, served
    by exec's parent: the engine's families with model (the file's name), path and pid
    labels (watch's), the live mapping Rss equal to /proc/PID/smaps read here right after the scrape,
    promtool's check, a real Prometheus scraping it; the spool and the port gone at exit."""
    model, real = c.model("small"), os.path.realpath(c.model("small"))
    with socket.socket() as taken:  # a port in use: one line, exit 1, nothing run or left
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        p = run(c.exec_argv("--metrics-listen", str(port)) + ["/bin/echo", "ran"],
                env=dict(os.environ, TMPDIR=c.tmp))
        check(p.returncode == 1 and not p.stdout and
              f"--metrics-listen: cannot listen on 127.0.0.1:{port}" in rf_lines(p.stderr)[-1],
              f"port in use: exit {p.returncode}, {p.stdout!r}, {rf_lines(p.stderr)}")
    mport = free_port()
    url = f"http://127.0.0.1:{mport}/metrics"
    with ExecServer(c, model, "--metrics-listen", str(mport), "--idle-seconds", "1") as s:
        http(f"http://127.0.0.1:{s.port}/completion", {"prompt": PROMPT, "n_predict": 4})
        body = wait_for(lambda: (t := http(url)) and 'sample="idle_alive"' in t and t, 60,
                        "the idle boundary's figures on /metrics")
        here, _ = smaps_rss(s.pid, model)
        ms = metrics_text(body)
        labels = {"pid": str(s.pid), "model": os.path.basename(model), "path": real}
        live = ms.get("ramforge_live_mapping_rss_bytes", [])
        check(len(live) == 1 and live[0][0] == labels and live[0][1] == here,
              f"live mapping Rss {live}, smaps here {here}")
        vm = ms.get("ramforge_live_process_rss_bytes", [])
        check(len(vm) == 1 and vm[0][0] == {"pid": str(s.pid)} and vm[0][1] >= here,
              f"live VmRSS {vm}")
        for name in ("ramforge_ledger_bytes", "ramforge_mapping_rss_bytes",
                     "ramforge_exec_submissions_total", "ramforge_release_applications_total"):
            check(name in ms and all({k: v for k, v in lab.items() if k in labels} == labels
                                     for lab, _ in ms[name]), f"{name}: {ms.get(name)}")
        check(one(ms, "ramforge_exec_submissions_total") >= 1, "the program's decodes counted")
        check(body.count("# TYPE ramforge_ledger_bytes ") == 1, "one TYPE per family")
        promtool_check_metrics(body)
        res = prometheus_query(c.tmp, f"127.0.0.1:{mport}",
                               f'ramforge_live_mapping_rss_bytes{{path="{real}"}}')
        check(int(res[0]["value"][1]) > 0, f"prometheus: {res}")
        print(f"prometheus: ramforge_live_mapping_rss_bytes = {res[0]['value'][1]}")
        rc = s.stop()
        check(rc == 0, f"exec exited {rc} after SIGTERM: {s.stderr()[-1500:]}")
    check(http(url) is None, "/metrics still answers after exec ended")
    left = [n for n in os.listdir(c.tmp) if n.startswith("rf-exec-metrics-")]
    check(not left, f"spool left behind: {left}")


# A program without libllama whose two children each load a model (exec_hold); on SIGTERM it
# tells both to quit and exits with their status.
TWO_HOLDS = r"""
import signal, subprocess, sys
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
hold, models = sys.argv[1], sys.argv[2:]
ps = [subprocess.Popen([hold, m, "Hello", "256"], stdin=subprocess.PIPE,
                       stdout=subprocess.DEVNULL) for m in models]
signal.sigwait({signal.SIGTERM})
for p in ps:
    p.stdin.write(b"quit\n")
    p.stdin.close()
sys.exit(max(p.wait() for p in ps))
"""


def children(pid):
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return [int(x) for x in f.read().split()]


def case_metrics_listen_children(c):
    """--metrics-listen with two processes loading a model each (children of the program):
    one HELP and TYPE per family, the samples of both under it, told apart by pid; the
    live mapping Rss of each for its own file; promtool's check; nothing left at exit."""
    if not c.hold:
        raise Skip("exec_hold was not built")
    models = [c.model("tiny"), c.model("small")]
    mport = free_port()
    url = f"http://127.0.0.1:{mport}/metrics"
    err = open(c.path("two-holds.err"), "w")  # llama.cpp's log: a file, never a full pipe
    proc = subprocess.Popen(c.exec_argv("--metrics-listen", str(mport)) +
                            [sys.executable, "-c", TWO_HOLDS, c.hold, *models],
                            stdout=subprocess.DEVNULL, stderr=err,
                            env=dict(os.environ, TMPDIR=c.tmp))
    with ended_by_sigterm(proc, "exec"):
        body = wait_for(lambda: proc.poll() is None and (t := http(url)) and
                        t.count("ramforge_exec_contexts_alive{") == 2 and t, 120,
                        "both processes' figures on /metrics")
        holds = children(children(proc.pid)[0])
        ms = metrics_text(body)
        for name in ("ramforge_ledger_bytes", "ramforge_exec_contexts_alive",
                     "ramforge_live_mapping_rss_bytes"):
            check(body.count(f"# HELP {name} ") == 1 and body.count(f"# TYPE {name} ") == 1,
                  f"{name}: one HELP and TYPE")
            check({int(lab["pid"]) for lab, _ in ms[name]} == set(holds),
                  f"{name}: processes {[lab['pid'] for lab, _ in ms[name]]}, holds {holds}")
        for lab, v in ms["ramforge_live_mapping_rss_bytes"]:
            here, _ = smaps_rss(int(lab["pid"]), lab["path"])
            check(lab["path"] in map(os.path.realpath, models) and v == here,
                  f"live mapping Rss {lab} {v}, smaps here {here}")
        promtool_check_metrics(body)
    err.close()
    left = [n for n in os.listdir(c.tmp) if n.startswith("rf-exec-metrics-")]
    check(not left, f"spool left behind: {left}")


def case_memory_limit(c):
    """--memory-limit: llama-server runs in rf-exec-<exec's pid> with that hard limit (its
    cgroup.procs, memory.limit_in_bytes, /metrics' live limit, the admission's binding limit),
    removed after SIGTERM; a load the limit cannot hold is refused by admission; no cgroup
    is left behind; without root, one line."""
    parent = memory_cgroup_v1()
    before = {n for n in os.listdir(parent) if n.startswith("rf-exec-")}
    model, limit = c.model("small"), 256 << 20
    mport = free_port()
    with ExecServer(c, model, "--memory-limit", "256Mi", "--metrics-listen",
                    f"127.0.0.1:{mport}", "--idle-seconds", "1") as s:
        mine = os.path.join(parent, f"rf-exec-{s.proc.pid}")
        with open(os.path.join(mine, "cgroup.procs")) as f:
            check(str(s.pid) in f.read().split(), f"llama-server is not in {mine}")
        with open(os.path.join(mine, "memory.limit_in_bytes")) as f:
            check(int(f.read()) == limit, f"{mine}: limit")
        url = f"http://127.0.0.1:{mport}/metrics"
        http(f"http://127.0.0.1:{s.port}/completion", {"prompt": PROMPT, "n_predict": 4})
        ms = metrics_text(wait_for(lambda: (t := http(url)) and 'sample="idle_alive"' in t
                                   and t, 60, "the idle boundary's figures on /metrics"))
        check(one(ms, "ramforge_live_cgroup_limit_bytes") == limit, "the live limit")
        check(one(ms, "ramforge_cgroup_limit_bytes") == limit, "admission's binding limit")
        rc = s.stop()
        check(rc == 0, f"exec exited {rc} after SIGTERM: {s.stderr()[-1500:]}")
    check(not os.path.exists(mine), f"{mine} left behind")
    # -c 1048576: a 2 GiB KV cache for the small model, under 128 MiB: refused before the load
    p = run(c.exec_argv("--memory-limit", "128Mi", "--ctx-size", "1048576") +
            [LLAMA_SERVER, "-m", model, "-c", "1048576", "--host", "127.0.0.1", "--port",
             str(free_port()), "-t", "1"])
    check(p.returncode != 0 and "admission refused loading" in p.stderr,
          f"exit {p.returncode}: {rf_lines(p.stderr)}")
    # llama-server asks twice (its --fit pass, then its load): said once, sizes as run says them
    said = [ln for ln in rf_lines(p.stderr) if "admission refused loading" in ln]
    check(len(said) == 1 and "GiB" in said[0] and not re.search(r"\d bytes", said[0]) and
          "way out: " in p.stderr, f"the refusal: {said}")
    left = {n for n in os.listdir(parent) if n.startswith("rf-exec-")} - before
    check(not left, f"cgroups left behind: {left}")
    os.chmod(c.tmp, 0o755)
    p = run(c.exec_argv("--memory-limit", "1Gi") + ["/bin/true"],
            preexec_fn=lambda: (os.setgid(65534), os.setuid(65534)))
    lines = rf_lines(p.stderr)
    check(p.returncode == 1 and "--memory-limit: cannot create the cgroup" in lines[-1] and
          "needs root" in lines[-1],
          f"not root: exit {p.returncode}, {lines}")


def case_not_gguf(c):
    """A file that is not GGUF: one ramforge line naming it and the reason as run says it
    ("PATH: not a GGUF file (bad magic)"), though llama-server asks twice; the program fails
    as it does bare."""
    bad = c.path("not-a-model.gguf")
    with open(bad, "wb") as f:
        f.write(b"\0" * 65536)
    want = f"{bad}: not a GGUF file (bad magic)"
    check(want in c.run("run", "-m", bad, "-n", "1", check_rc=None).stderr, "run's words")
    progs = [[c.simple, "-m", bad, "-n", "1", PROMPT]] if c.simple else []
    if LLAMA_SERVER and os.access(LLAMA_SERVER, os.X_OK):
        progs.append([LLAMA_SERVER, "-m", bad, "--host", "127.0.0.1", "--port",
                      str(free_port()), "-t", "1"])
    if not progs:
        raise Skip("neither llama-simple-ref nor llama-server was built")
    for argv in progs:
        p = run(c.exec_argv() + argv)
        lines = rf_lines(p.stderr)
        check(p.returncode != 0 and lines == [f"ramforge: exec: {want}"],
              f"{os.path.basename(argv[0])}: exit {p.returncode}, lines {lines}")


def case_symlinked_program(c):
    """A link to the pin's llama-server (its RUNPATH $ORIGIN/../lib resolved from the link's
    target, as the kernel runs it: docs/deploy/Dockerfile's /usr/local/bin/llama-server) passes
    exec's check of its libllama and runs."""
    if not LLAMA_SERVER or not os.access(LLAMA_SERVER, os.X_OK):
        raise Skip(f"llama-server from the pin is not built (RF_LLAMA_SERVER={LLAMA_SERVER!r})")
    link = c.path("llama-server")
    os.symlink(LLAMA_SERVER, link)
    check(run([link, "--version"]).returncode == 0, "the link runs bare")
    p = run(c.exec_argv() + [link, "--version"])
    check(p.returncode == 0 and not rf_lines(p.stderr),
          f"exit {p.returncode}: {rf_lines(p.stderr)}")


def case_cli_badinput(c):
    """Bad command lines: one line each, exit 2 (1 for a missing program)."""
    for argv, rc, needle in (
            (["exec", "/bin/true"], 2, "unexpected argument"),
            (["exec", "--"], 2, "missing -- PROGRAM"),
            (["exec", "--metrics-listen", "nohost:9", "--", "/bin/true"], 2, "--metrics-listen"),
            (["exec", "--metrics-listen", "70000", "--", "/bin/true"], 2, "--metrics-listen"),
            (["exec", "--memory-limit", "lots", "--", "/bin/true"], 2, "--memory-limit"),
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
