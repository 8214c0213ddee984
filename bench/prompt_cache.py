#!/usr/bin/env python3
"""llama-server's host prompt cache under a memory limit, bare and under `ramforge exec`
(issue 34): the OOM kill of llama.cpp #25740 and its absence.

Each mode runs the pinned llama-server on the model in a fresh child memory cgroup (cgroup
v1 or v2, removed at the end, also on failure) whose limit holds the weights and the KV
cache but not llama-server's default 8 GiB prompt cache, and sends a bounded series of
distinct long prompts (greedy, a few tokens each), one after another:
  bare   llama-server as it is (--cache-ram 8192 by default): killed by the kernel's OOM
         killer once enough prompts are cached, or held at the limit (the row says which,
         with the cgroup's oom_kill count)
  exec   the same under `ramforge exec --idle-seconds 1`: exec sizes --cache-ram to the room
         (said on stderr); never killed, every request answered, the answers equal bare's
         wherever bare answered; after each request (the operation's idle boundary) the
         ledger's PromptCache (--metrics-file) is compared with the anonymous memory it
         explains: /proc/PID/smaps_rollup Anonymous now minus Anonymous after the first
         request (no prompt cached yet)
  control  exec again with --cache-ram 0 (llama-server's cache off, all else the same): the
         anonymous memory the program gains without a cache. Its growth is not the cache's:
         the HTTP threads' malloc arenas and stacks on their first requests (~0.4 MiB) and
         the main heap's high-water mark of a request's transient buffers, which rises with
         the longest prompt so far (~0.4 MiB); measured, docs/EXEC.md "The prompt cache"
Rows: mode, requests answered, killed (how), oom_kill, the cgroup's peak, the last
PromptCache, the anonymous growth, what the cache explains (exec's Anonymous minus the
control's at the same request; "-" without the control), the worst and the last
|PromptCache - explained| / explained over the boundaries (1 MiB or more; without the
control, against the growth), answers equal to bare's. --json PATH writes them. Figures of a
busy host are labelled so by whoever quotes them.

    bench/prompt_cache.py --ramforge build/ramforge \\
        --llama-server "$(scripts/build-llama-server.sh)" -m build/models/small-q8_0.gguf \\
        --limit 64Mi --prompts 40 --words 150 -c 1024
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "e2e"))
from e2e_util import Failure, evict, wait_for  # noqa: E402
from serve_idle import free_port  # noqa: E402

MIB = 1 << 20


def size(text):
    m = re.fullmatch(r"(\d+)(Ki|Mi|Gi)?", text)
    if not m:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (N, NKi, NMi, NGi)")
    return int(m.group(1)) << {None: 0, "Ki": 10, "Mi": 20, "Gi": 30}[m.group(2)]


def memory_root():
    """(the directory of this process's memory cgroup, v2?)."""
    with open("/proc/self/cgroup") as f:
        lines = [ln.rstrip("\n").split(":", 2) for ln in f]
    for hid, ctrl, path in lines:
        if "memory" in ctrl.split(","):
            return "/sys/fs/cgroup/memory" + path.rstrip("/"), False
    for hid, ctrl, path in lines:
        if hid == "0" and os.path.exists(f"/sys/fs/cgroup{path}/cgroup.controllers"):
            return "/sys/fs/cgroup" + path.rstrip("/"), True
    raise SystemExit("prompt_cache.py: no memory cgroup (v1 memory controller or v2)")


class Cgroup:
    """A child memory cgroup of this process's with a hard limit; removed by close()."""

    def __init__(self, name, limit):
        root, self.v2 = memory_root()
        self.dir = os.path.join(root, f"{name}-{os.getpid()}")
        os.mkdir(self.dir)
        self.write("memory.max" if self.v2 else "memory.limit_in_bytes", str(limit))
        if self.v2:
            self.write("memory.swap.max", "0")
        elif os.path.exists(os.path.join(self.dir, "memory.memsw.limit_in_bytes")):
            self.write("memory.memsw.limit_in_bytes", str(limit))

    def write(self, name, value):
        with open(os.path.join(self.dir, name), "w") as f:
            f.write(value)

    def read(self, name):
        with open(os.path.join(self.dir, name)) as f:
            return f.read()

    def enter(self):
        self.write("cgroup.procs", str(os.getpid()))

    def oom_kills(self):
        text = self.read("memory.events" if self.v2 else "memory.oom_control")
        m = re.search(r"^oom_kill (\d+)", text, re.M)
        return int(m.group(1)) if m else None

    def peak(self):
        name = "memory.peak" if self.v2 else "memory.max_usage_in_bytes"
        return int(self.read(name)) if os.path.exists(os.path.join(self.dir, name)) else None

    def close(self):
        """Every process left SIGKILLed, then the directory removed (polled, 30 s)."""
        end = time.monotonic() + 30
        while time.monotonic() < end:
            pids = self.read("cgroup.procs").split()
            for pid in pids:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except ProcessLookupError:
                    pass
            try:
                os.rmdir(self.dir)
                return
            except OSError:
                time.sleep(0.05)
        print(f"prompt_cache.py: cannot remove {self.dir}", file=sys.stderr)


def post(port, path, body, timeout):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.load(r)


def healthy(port):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
            return r.status == 200
    except (OSError, urllib.error.URLError):
        return False


def anonymous(pid):
    """Anonymous of /proc/PID/smaps_rollup, bytes (None: gone)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            m = re.search(r"^Anonymous:\s+(\d+) kB", f.read(), re.M)
        return int(m.group(1)) * 1024 if m else None
    except OSError:
        return None


def prom_value(path, name, labels=""):
    """The first sample of name (whose labels contain labels) in the text file, else None."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(name + "{") and labels in line:
                    return float(line.rsplit(" ", 1)[1])
    except OSError:
        pass
    return None


def wait(pred, timeout):
    """pred()'s first true value within timeout seconds, else None."""
    try:
        return wait_for(pred, timeout, "")
    except Failure:
        return None


def prompts(n, words):
    """n prompts that share no prefix (about 6 tokens a word)."""
    return [" ".join(f"p{i}w{k}" for k in range(words)) for i in range(n)]


def run_mode(a, mode, tmp):
    """One mode's row."""
    rep, prom = os.path.join(tmp, f"{mode}.json"), os.path.join(tmp, f"{mode}.prom")
    port, err = free_port(), open(os.path.join(tmp, f"{mode}.err"), "w")
    server = [a.llama_server, "-m", a.model, "--host", "127.0.0.1", "--port", str(port),
              "--no-webui", "-np", "1", "-c", str(a.ctx), "-t", str(a.threads)]
    if mode == "control":
        server = server + ["--cache-ram", "0"]
    argv = server if mode == "bare" else (
        [a.ramforge, "exec", "--idle-seconds", "1", "--residency-report-json", rep,
         "--metrics-file", prom, "--"] + server)
    row = {"mode": mode, "answered": 0, "requests": a.prompts, "killed": None,
           "answers": [], "boundaries": []}
    evict(a.model)
    cg = Cgroup(f"rf-prompt-cache-{mode}", a.limit)
    proc = None
    try:
        env = dict(os.environ)
        env.pop("LLAMA_ARG_CACHE_RAM", None)
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, env=env,
                                preexec_fn=cg.enter)
        if not wait(lambda: proc.poll() is not None or healthy(port), 300) or proc.poll():
            row["killed"] = f"did not start (exit {proc.returncode})"
            return row
        base = None
        for i, p in enumerate(prompts(a.prompts, a.words)):
            ops = prom_value(prom, "ramforge_exec_operations_total")
            try:
                r = post(port, "/completion", {"prompt": p, "n_predict": a.n_predict,
                                               "temperature": 0, "seed": 1}, 300)
            except urllib.error.HTTPError as e:  # an answer, not a kill
                row["killed"] = f"request {i}: HTTP {e.code}: {e.read()[:200]!r}"
                break
            except (OSError, urllib.error.URLError) as e:
                rc = proc.wait(timeout=30) if wait(lambda: proc.poll() is not None, 5) else None
                row["killed"] = (f"SIGKILL (exit {rc})" if rc == -signal.SIGKILL
                                 else f"request {i} failed: {e} (exit {rc})")
                break
            row["answered"] += 1
            row["answers"].append(r.get("content"))
            if mode != "bare":  # the operation's idle boundary wrote the ledger
                wait(lambda: (prom_value(prom, "ramforge_exec_operations_total") or 0) >
                     (ops or 0), 30)
            anon = anonymous(proc.pid)
            base = anon if i == 0 else base
            b = {"request": i, "anonymous_bytes": anon,
                 "growth_bytes": anon - base if anon is not None and base is not None else None,
                 "prompt_cache_bytes": prom_value(prom, "ramforge_ledger_bytes",
                                                  'category="PromptCache"')}
            row["boundaries"].append(b)
        if row["killed"] is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
    finally:
        if proc and proc.poll() is None:
            proc.kill()
            proc.wait()
        row["oom_kill"], row["peak_bytes"] = cg.oom_kills(), cg.peak()
        cg.close()
        err.close()
    with open(os.path.join(tmp, f"{mode}.err")) as f:
        row["ramforge_lines"] = [ln.rstrip() for ln in f if ln.startswith("ramforge: ")]
    return row


def explain(row, control):
    """Each boundary's explained_bytes: Anonymous minus the control's at the same request."""
    ctl = {b["request"]: b["anonymous_bytes"] for b in control["boundaries"]} if control else {}
    for b in row["boundaries"]:
        c = ctl.get(b["request"])
        b["explained_bytes"] = (b["anonymous_bytes"] - c if c is not None and
                                b["anonymous_bytes"] is not None else None)


def errors(row, min_bytes, key):
    """|PromptCache - b[key]| / b[key] at each boundary whose b[key] is at least min_bytes."""
    return [abs(b["prompt_cache_bytes"] - b[key]) / b[key]
            for b in row["boundaries"] if b["prompt_cache_bytes"] is not None and
            b.get(key) is not None and b[key] >= min_bytes]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ramforge", required=True)
    ap.add_argument("--llama-server", required=True)
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--limit", type=size, default=64 * MIB, help="the cgroup's hard limit")
    ap.add_argument("--prompts", type=int, default=40)
    ap.add_argument("--words", type=int, default=150, help="words a prompt (~6 tokens each)")
    ap.add_argument("-c", "--ctx", type=int, default=1024)
    ap.add_argument("-n", "--n-predict", type=int, default=4)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--modes", default="bare,exec,control")
    ap.add_argument("--json", help="write the rows there")
    a = ap.parse_args()
    for path in (a.ramforge, a.llama_server):
        if not shutil.which(path):
            raise SystemExit(f"prompt_cache.py: {path}: not an executable")
    rows = []
    with tempfile.TemporaryDirectory(prefix="rf-prompt-cache-") as tmp:
        copy = os.path.join(tmp, os.path.basename(a.model))  # a private copy to evict
        shutil.copyfile(a.model, copy)
        a.model = copy
        for mode in a.modes.split(","):
            rows.append(run_mode(a, mode, tmp))
    bare = next((r for r in rows if r["mode"] == "bare"), None)
    control = next((r for r in rows if r["mode"] == "control"), None)
    print(f"limit {a.limit // MIB} MiB, {a.prompts} prompts of {a.words} words, -c {a.ctx}")
    print(f"{'mode':7} {'answered':>9} {'killed':24} {'oom_kill':>8} {'peak MiB':>9} "
          f"{'PromptCache MiB':>15} {'anon growth MiB':>15} {'explained MiB':>13} "
          f"{'worst err':>9} {'last err':>8} {'= bare':>6}")
    for r in rows:
        last = r["boundaries"][-1] if r["boundaries"] else {}
        explain(r, control if r is not control else None)
        errs = errors(r, MIB, "explained_bytes" if control else "growth_bytes")
        r["worst_error"], r["last_error"] = (max(errs), errs[-1]) if errs else (None, None)
        growth_errs = errors(r, MIB, "growth_bytes")  # the program's own growth included
        r["worst_growth_error"] = max(growth_errs) if growth_errs else None
        n = min(len(r["answers"]), len(bare["answers"])) if bare else 0
        r["equal_to_bare"] = bare is not None and r["answers"][:n] == bare["answers"][:n]

        def mib(v):
            return f"{v / MIB:.1f}" if v is not None else "-"
        def pct(v):
            return f"{100 * v:.1f}%" if v is not None else "-"
        print(f"{r['mode']:7} {r['answered']:>4}/{r['requests']:<4} "
              f"{(r['killed'] or 'no')[:24]:24} {str(r['oom_kill']):>8} "
              f"{mib(r['peak_bytes']):>9} {mib(last.get('prompt_cache_bytes')):>15} "
              f"{mib(last.get('growth_bytes')):>15} {mib(last.get('explained_bytes')):>13} "
              f"{pct(r['worst_error']):>9} {pct(r['last_error']):>8} "
              f"{str(r['equal_to_bare']):>6}")
        if control and r["worst_growth_error"] is not None:
            print(f"        against the growth since request 0 (the program's own included): "
                  f"worst {pct(r['worst_growth_error'])}")
        for line in r["ramforge_lines"]:
            print(f"        {line}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"limit_bytes": a.limit, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
