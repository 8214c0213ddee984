#!/usr/bin/env python3
"""One byte budget against llama-server's count-limited router (issue 35, docs/BUDGET.md).

Three generated models (two Q8_0, one Q4_0, distinct seeds) in the pinned llama-server's
router mode (--models-dir, a child per model), under a request pattern that cycles the models
with idle gaps, in four setups:

  unlimited  llama-server --models-max 0, no budget (the answers every other setup must give)
  budget     ramforge exec -- llama-server --models-max 0, and ramforge watch --cgroup over its
             processes with --budget = 1.5 x the mean model file (about one and a half models)
  count-1    llama-server --models-max 1 (a model evicted whole at each switch)
  count-2    llama-server --models-max 2

Before each switch request of count-1 and count-2 the model file is evicted from the page
cache (posix_fadvise DONTNEED: the reload reads the disk, as the budget's released pages do).
One row per setup: the median wake TTFT of the first request after a switch (the request's wall
time less its decode time after the first token), whether every answer equals unlimited's, the
budget's largest excess over a reading (bytes held - budget, from watch's metrics file, from the
first reading under the budget on: the models were loaded before the watch began; against one
release step: the largest model), and the OOM kills of the setup's cgroup.

  bench/budget_router.py --ramforge build/ramforge --llama-server PATH [--preset small]
                         [--rounds 3] [--gap 3] [-n 8]

Needs root (a memory cgroup per setup; cgroup v1). Quote it from a quiet host, with the load
average it prints; the goal (the issue): the budget's wake TTFT <= 0.5 x count-1's.
"""
import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e"))
from e2e_util import evict  # noqa: E402

PROMPT = "Hello my name is"
CGROOT = "/sys/fs/cgroup/memory"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(port, path, body=None, timeout=600):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}",
                                 data=json.dumps(body).encode() if body else None,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def models(a, tmp):
    d = os.path.join(tmp, "models")
    os.makedirs(d, exist_ok=True)
    out = []
    for name, wtype, seed in (("ma", "q8_0", 1), ("mb", "q8_0", 2), ("mc", "q4_0", 3)):
        path = os.path.join(d, f"{name}.gguf")
        subprocess.run([a.ramforge, "mkmodel", "--preset", a.preset, "--type", wtype, "--seed",
                        str(seed), "-o", path], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        out.append((name, path))
    return d, out


def oom_kills(cg):
    try:
        with open(os.path.join(cg, "memory.oom_control")) as f:
            m = re.search(r"oom_kill (\d+)", f.read())
            return int(m.group(1)) if m else 0
    except OSError:
        return None


class Setup:
    """A router in its own memory cgroup (no limit: the budget, or the count, is what holds)."""

    def __init__(self, a, tmp, name, models_dir, models_max, under_exec):
        self.cg = os.path.join(CGROOT, f"rf-bench-budget-{os.getpid()}-{name}")
        os.mkdir(self.cg)
        self.port = free_port()
        argv = [a.llama_server, "--models-dir", models_dir, "--models-max", str(models_max),
                "--port", str(self.port), "-c", "512", "-t", str(a.t)]
        if under_exec:
            argv = [a.ramforge, "exec", "--"] + argv
        cg = self.cg
        env = dict(os.environ, RAMFORGE_RUNTIME_DIR=os.path.join(tmp, f"run-{name}"))
        self.log = open(os.path.join(tmp, f"{name}.log"), "w")
        self.proc = subprocess.Popen(
            argv, stdout=self.log, stderr=self.log, env=env,
            preexec_fn=lambda: open(os.path.join(cg, "cgroup.procs"), "w").write(
                str(os.getpid())))
        end = time.monotonic() + 120
        while time.monotonic() < end:
            try:
                http(self.port, "/models", timeout=5)
                return
            except OSError:
                time.sleep(0.2)
        raise SystemExit(f"budget_router: the {name} router did not start (see {self.log.name})")

    def ask(self, model, n):
        t0 = time.monotonic()
        doc = http(self.port, "/v1/completions", {"model": model, "prompt": PROMPT,
                                                  "max_tokens": n, "temperature": 0})
        wall = time.monotonic() - t0
        t = doc.get("timings", {})
        decode_s = t.get("predicted_ms", 0) / 1e3 * (n - 1) / max(n, 1)
        return doc["choices"][0]["text"], wall - decode_s

    def close(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        end = time.monotonic() + 30
        while time.monotonic() < end:
            with open(os.path.join(self.cg, "cgroup.procs")) as f:
                pids = [int(x) for x in f.read().split()]
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, 9)
                except ProcessLookupError:
                    pass
            time.sleep(0.1)
        self.log.close()
        os.rmdir(self.cg)


class BudgetWatch:
    """ramforge watch --cgroup --budget, its metrics file read at each reading."""

    def __init__(self, a, tmp, cg, budget):
        self.metrics = os.path.join(tmp, "budget.prom")
        self.err = open(os.path.join(tmp, "watch.err"), "w")
        self.proc = subprocess.Popen([a.ramforge, "watch", "--cgroup", cg, "-i", "0.5", "--json",
                                      "--budget", str(budget), "--metrics-file", self.metrics],
                                     stdout=subprocess.DEVNULL, stderr=self.err)
        self.excess = []
        self.stop_ev = threading.Event()
        self.t = threading.Thread(target=self._poll, daemon=True)
        self.t.start()

    def _poll(self):
        while not self.stop_ev.wait(0.5):
            try:
                with open(self.metrics) as f:
                    text = f.read()
            except OSError:
                continue
            m = re.search(r"^ramforge_watch_budget_headroom_bytes (-?\d+)", text, re.M)
            if m and (self.excess or int(m.group(1)) >= 0):  # from the first reading under it
                self.excess.append(-int(m.group(1)))

    def close(self):
        self.stop_ev.set()
        self.t.join()
        self.proc.terminate()
        self.proc.wait(timeout=30)
        self.err.close()


def run_setup(a, tmp, name, models_dir, ms, sizes):
    models_max = {"unlimited": 0, "budget": 0, "count-1": 1, "count-2": 2}[name]
    s = Setup(a, tmp, name, models_dir, models_max, name == "budget")
    w = None
    try:
        budget = int(1.5 * statistics.mean(sizes.values()))
        for m, _ in ms:  # every model loaded once before the pattern
            s.ask(m, a.n)
        if name == "budget":
            w = BudgetWatch(a, tmp, s.cg, budget)
        answers, wakes = {}, []
        for r in range(a.rounds):
            for m, path in ms:
                time.sleep(a.gap)  # the idle gap: the others' idle moments, the budget's release
                if name.startswith("count"):
                    evict(path)
                text, ttft = s.ask(m, a.n)
                answers.setdefault(m, set()).add(text)
                wakes.append(ttft)
        excess = max(w.excess) if w and w.excess else None
        return {"setup": name, "answers": answers, "ttft": statistics.median(wakes),
                "excess": excess, "budget": budget if w else None,
                "oom": oom_kills(s.cg), "readings": len(w.excess) if w else 0}
    finally:
        if w:
            w.close()
        s.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ramforge", required=True)
    ap.add_argument("--llama-server", required=True)
    ap.add_argument("--preset", default="small", help="mkmodel preset: small, tinyllama")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--gap", type=float, default=3.0, help="idle seconds before each request")
    ap.add_argument("-n", type=int, default=8, help="tokens per answer")
    ap.add_argument("-t", type=int, default=2, help="threads")
    a = ap.parse_args()
    if os.geteuid() != 0 or not os.path.isdir(CGROOT):
        raise SystemExit("budget_router: needs root and the cgroup v1 memory controller")
    with tempfile.TemporaryDirectory(prefix="rf-budget-router-") as tmp:
        models_dir, ms = models(a, tmp)
        sizes = {m: os.path.getsize(p) for m, p in ms}
        step = max(sizes.values())
        rows = [run_setup(a, tmp, name, models_dir, ms, sizes)
                for name in ("unlimited", "budget", "count-1", "count-2")]
    base = rows[0]["answers"]
    count1 = next(r["ttft"] for r in rows if r["setup"] == "count-1")
    print(f"# load average {os.getloadavg()[0]:.2f} (busy host unless quiet); preset {a.preset}; "
          f"{a.rounds} rounds, gap {a.gap} s, {a.n} tokens; one release step {step} bytes")
    print("setup\twake_ttft_median_s\tx_count1\tidentical\tmax_excess_bytes\treadings\toom_kills")
    for r in rows:
        same = all(r["answers"].get(m) == base[m] and len(base[m]) == 1 for m in base)
        exc = "-" if r["excess"] is None else str(r["excess"])
        print(f"{r['setup']}\t{r['ttft']:.3f}\t{r['ttft'] / count1:.2f}\t"
              f"{'yes' if same else 'NO'}\t{exc}\t{r['readings']}\t{r['oom']}")
    b = next(r for r in rows if r["setup"] == "budget")
    if b["excess"] is not None:
        print(f"# budget {b['budget']} bytes: the largest excess at a reading "
              f"{'<=' if b['excess'] <= step else '>'} one release step")


if __name__ == "__main__":
    main()
