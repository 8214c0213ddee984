#!/usr/bin/env python3
"""The figures docs/guide/benchmarks.md ("ramforge exec against bare llama-server") quotes, measured on this machine.

Usage: exec_figures.py --ramforge BUILD/ramforge --server LLAMA_SERVER --hold BUILD/exec_hold
                       --model MODEL [--speed-model MODEL] [--rounds 3] [--requests 4]
                       [--n-predict 32]

1. decode tok/s (on --speed-model, default --model): llama-server bare and under
   `ramforge exec` (observe), started alternately
   --rounds times, --requests greedy /completion requests each after one warm-up; the medians
   of timings.predicted_per_second and their ratio; tokens compared.
2. idle: `ramforge exec --residency-policy memory-bound --memory-target 25% --idle-seconds 2`
   with dontneed and pageout: the model mapping's Rss (/proc/PID/smaps) after the idle
   release against the target, and the first request after it (prompt_ms, tokens).
3. a decode arriving during the release: exec_hold's single-token decodes started 1000..1196
   ms after the last (--idle-seconds 1, memory-bound at 25%), bare and under exec: the
   slowest against the bare median, ramforge_exec_gate_wait_max_seconds (the longest wait in
   the gate: a release's madvise pass) and ramforge_exec_bookkeeping_max_seconds.
4. what the interposers add to a call: exec_hold's `calls 200000` (llama_synchronize and
   llama_get_logits_ith, the calls that end a lease), this thread's CPU time per pair, bare
   and under exec (CPU time: robust to the other processes of a loaded machine).
Prints one line per figure; exits 1 when tokens differ.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import tempfile
import time
import urllib.request


def smaps_rss(pid, model):
    real, total, cur = os.path.realpath(model), 0, False
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            parts = line.split()
            if "-" in parts[0] and not parts[0].endswith(":"):
                cur = len(parts) >= 6 and parts[1] == "r--s" and " ".join(parts[5:]) == real
            elif cur and parts[0] == "Rss:":
                total += int(parts[1]) * 1024
    return total


def metric(path, name):
    try:
        with open(path) as f:
            m = re.search(re.escape(name) + r"\{[^}]*\} (\S+)", f.read())
    except FileNotFoundError:
        return None
    return float(m.group(1)) if m else None


class Server:
    def __init__(self, a, prefix, port, log, model=None):
        self.port = port
        self.log = open(log, "w")
        self.p = subprocess.Popen(prefix + [a.server, "-m", model or a.model, "--host", "127.0.0.1",
                                            "--port", str(port), "-c", "1024", "-np", "1"],
                                  stdout=self.log, stderr=self.log)
        end = time.time() + 300
        while True:
            try:
                if self.get("/health").get("status") == "ok":
                    break
            except OSError:
                pass
            if time.time() > end or self.p.poll() is not None:
                raise SystemExit(f"llama-server did not come up (see {log})")
            time.sleep(0.2)

    def get(self, path, body=None):
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}",
                                     data=json.dumps(body).encode() if body else None,
                                     headers={"Content-Type": "application/json"})
        return json.loads(urllib.request.urlopen(req, timeout=600).read())

    def complete(self, n):
        return self.get("/completion", {"prompt": "Hello my name is", "n_predict": n,
                                        "temperature": 0, "cache_prompt": False,
                                        "return_tokens": True})

    def close(self):
        self.p.terminate()
        self.p.wait(timeout=120)
        self.log.close()


def tok_s(a, tmp):
    rates = {"bare": [], "exec": []}
    tokens = {}
    for r in range(a.rounds):
        for mode in ("bare", "exec"):
            prefix = [a.ramforge, "exec", "--"] if mode == "exec" else []
            s = Server(a, prefix, 18600 + r * 2 + (mode == "exec"), f"{tmp}/{mode}{r}.log",
                       a.speed_model)
            try:
                s.complete(4)
                for _ in range(a.requests):
                    res = s.complete(a.n_predict)
                    rates[mode].append(res["timings"]["predicted_per_second"])
                    tokens.setdefault(mode, res["tokens"])
            finally:
                s.close()
    mb, me = statistics.median(rates["bare"]), statistics.median(rates["exec"])
    same = tokens["bare"] == tokens["exec"]
    print(f"decode ({os.path.basename(a.speed_model)}): bare median {mb:.2f} tok/s, exec median {me:.2f} tok/s, exec/bare "
          f"{me / mb:.3f} ({len(rates['bare'])} requests each, {a.rounds} alternating rounds); "
          f"tokens identical: {same}")
    return same, tokens["bare"]


def idle(a, tmp, bare_tokens):
    target = os.path.getsize(a.model) // 4
    ok = True
    for mode in ("dontneed", "pageout"):
        prom = f"{tmp}/idle-{mode}.prom"
        s = Server(a, [a.ramforge, "exec", "--residency-policy", "memory-bound",
                       "--memory-target", str(target), "--release-mode", mode,
                       "--idle-seconds", "2", "--metrics-file", prom, "--"],
                   18650 + (mode == "pageout"), f"{tmp}/idle-{mode}.log")
        try:
            s.complete(a.n_predict)
            before = smaps_rss(s.p.pid, a.model)
            end = time.time() + 300
            while (metric(prom, "ramforge_exec_idle_alive_boundaries_total") or 0) < 1:
                if time.time() > end:
                    raise SystemExit("no idle boundary within 300 s")
                time.sleep(0.1)
            after = smaps_rss(s.p.pid, a.model)
            res = s.complete(a.n_predict)
        finally:
            s.close()
        if bare_tokens is None:  # another model than the speed run's: its own bare request
            b = Server(a, [], 18652, f"{tmp}/idle-bare.log")
            try:
                bare_tokens = b.complete(a.n_predict)["tokens"]
            finally:
                b.close()
        same = res["tokens"] == bare_tokens
        ok &= same
        print(f"idle ({mode}): model mapping Rss {before} B before, {after} B after the idle "
              f"release, target {target} B ({'at or under' if after <= target + 4096 else 'ABOVE'}"
              f"); first request after it: prompt {res['timings']['prompt_ms']:.0f} ms, tokens "
              f"identical: {same}")
    return ok


def during_release(a, tmp):
    target = os.path.getsize(a.model) // 4
    offsets = range(1000, 1200, 4)
    out = {}
    prom = f"{tmp}/sweep.prom"
    for mode, prefix in (("bare", []), ("exec", [a.ramforge, "exec", "--residency-policy",
                                                 "memory-bound", "--memory-target", str(target),
                                                 "--idle-seconds", "1", "--metrics-file", prom,
                                                 "--"])):
        with open(f"{tmp}/sweep-{mode}.log", "w") as log:
            p = subprocess.Popen(prefix + [a.hold, a.model, "Hello my name is", "2048"],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                 text=True)
            ns = []

            def cmd(line):
                p.stdin.write(line + "\n")
                p.stdin.flush()
                return p.stdout.readline().split()

            cmd("gen 4")
            for d in offsets:
                ns.append(int(cmd(f"decode_at {d}")[1]))
            p.stdin.write("quit\n")
            p.stdin.close()
            p.wait(timeout=300)
        out[mode] = ns
    med = statistics.median(out["bare"])
    wait = metric(prom, "ramforge_exec_gate_wait_max_seconds") or 0
    book = metric(prom, "ramforge_exec_bookkeeping_max_seconds") or 0
    print(f"a decode arriving around the idle release ({len(offsets)} single-token decodes "
          f"1000..{offsets[-1]} ms after the last): bare median {med / 1e6:.1f} ms, max "
          f"{max(out['bare']) / 1e6:.1f} ms; exec max {max(out['exec']) / 1e6:.1f} ms; the "
          f"longest wait in the gate (a release's madvise pass) {wait * 1e3:.2f} ms, the "
          f"longest operation bookkeeping {book * 1e3:.2f} ms")


def call_cost(a):
    ns = {}
    for mode, prefix in (("bare", []), ("exec", [a.ramforge, "exec", "--"])):
        p = subprocess.Popen(prefix + [a.hold, a.speed_model, "Hello my name is", "256"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True)
        p.stdin.write("gen 1\ncalls 200000\ncalls 200000\ncalls 200000\nquit\n")
        p.stdin.close()
        lines = p.stdout.read().split("\n")
        p.wait(timeout=300)
        ns[mode] = statistics.median(int(x.split()[1]) for x in lines if x.startswith("call_"))
    print(f"a synchronize + get_logits pair: {ns['bare']:.0f} ns bare, {ns['exec']:.0f} ns under "
          f"exec (thread CPU time, median of 3 x 200000): {ns['exec'] - ns['bare']:.0f} ns added")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ramforge", required=True)
    ap.add_argument("--server", required=True)
    ap.add_argument("--hold", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--speed-model")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=4)
    ap.add_argument("--n-predict", type=int, default=32)
    a = ap.parse_args()
    a.speed_model = a.speed_model or a.model
    with tempfile.TemporaryDirectory(prefix="ramforge-exec-figures-") as tmp:
        same, tokens = tok_s(a, tmp)
        same &= idle(a, tmp, tokens if a.speed_model == a.model else None)
        during_release(a, tmp)
        call_cost(a)
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
