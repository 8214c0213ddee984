#!/usr/bin/env python3
"""What an idle `ramforge serve` costs, side by side in one run.

For each model: (a) always resident (observe), (b) idle release to a target of
25% of the file with dontneed and with pageout, (c) llama-server built
from the same pinned source (scripts/build-llama-server.sh) with
--sleep-idle-seconds, when --llama-server PATH is given (skipped otherwise,
with the reason). Each configuration: start the server on a private copy of the
model, one warm request, wait idle, then measure the idle process (VmRSS), the
model file's page cache (fincore), the cgroup charge (memory.current or
memory.usage_in_bytes of the server's cgroup: cgroup-wide), then the first
request after idle: client-side TTFT (to the first SSE event), decode tok/s
(the server's timings) and token identity with (a). Medians of -r runs.

    bench/serve_idle.py --ramforge build/ramforge -m build/models/tinyllama-q8_0.gguf \\
        -m build/models/tinyllama-q4_0.gguf -t 2 -r 3 \\
        --llama-server "$(scripts/build-llama-server.sh)"
"""
import argparse
import http.client
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

PROMPT = "Hello my name is"


def rss_of(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return None


def cgroup_charge(pid):
    with open(f"/proc/{pid}/cgroup") as f:
        lines = [ln.strip().split(":", 2) for ln in f]
    for hid, ctrl, path in lines:
        if hid == "0":
            p = f"/sys/fs/cgroup{path}/memory.current"
            if os.path.exists(p):
                return int(open(p).read())
        elif "memory" in ctrl.split(","):
            p = f"/sys/fs/cgroup/memory{path}/memory.usage_in_bytes"
            if os.path.exists(p):
                return int(open(p).read())
    return None


def page_cache(path):
    p = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES", path],
                       capture_output=True, text=True)
    return int(p.stdout.split()[0]) if p.returncode == 0 and p.stdout.split() else None


class Proc:
    def __init__(self, argv, port_from_stderr):
        self.p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  text=True)
        self.port = port_from_stderr(self.p)

    def stop(self):
        self.p.terminate()
        try:
            self.p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()


def ramforge_port(p):
    line = p.stderr.readline()
    if "serving" not in line:
        raise RuntimeError(f"serve did not start: {line}{p.stderr.read()[-500:]}")
    # drain stderr in the background so the server never blocks on it
    subprocess.Popen(["cat"], stdin=p.stderr, stdout=subprocess.DEVNULL)
    return int(line.rsplit(":", 1)[1].strip().strip("/"))


def stream_request(port, n):
    """(ttft seconds, tokens, predicted tok/s) of one streamed greedy request."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    t0 = time.monotonic()
    conn.request("POST", "/completion", body=json.dumps(
        {"prompt": PROMPT, "n_predict": n, "temperature": 0, "stream": True,
         "return_tokens": True}))
    r = conn.getresponse()
    ttft, tokens, tps = None, [], None
    while True:
        line = r.readline()
        if not line:
            break
        if not line.startswith(b"data: "):
            continue
        if ttft is None:
            ttft = time.monotonic() - t0
        ev = json.loads(line[6:])
        tokens += ev.get("tokens", [])
        if ev.get("stop"):
            tps = ev.get("timings", {}).get("predicted_per_second")
            break
    conn.close()
    return ttft, tokens, tps


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def llama_server_port(port):
    """Waits for llama-server's /health (it loads the model before answering 200)."""
    def wait(p):
        subprocess.Popen(["cat"], stdin=p.stderr, stdout=subprocess.DEVNULL)
        for _ in range(600):
            if p.poll() is not None:
                raise RuntimeError(f"llama-server exited {p.returncode}")
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                conn.request("GET", "/health")
                if conn.getresponse().status == 200:
                    return port
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError("llama-server did not become healthy")
    return wait


def one_run(args, model, name, argv, idle):
    if name == "llama-server":
        port = free_port()
        proc = Proc(argv + ["--port", str(port)], llama_server_port(port))
    else:
        proc = Proc(argv, ramforge_port)
    try:
        stream_request(proc.port, args.n)  # warm
        time.sleep(idle + 2)
        m = {"rss": rss_of(proc.p.pid), "cache": page_cache(model),
             "cgroup": cgroup_charge(proc.p.pid)}
        m["ttft"], m["tokens"], m["tps"] = stream_request(proc.port, args.n)
        return m
    finally:
        proc.stop()


def mib(v):
    return f"{v / 2**20:8.1f}" if v is not None else "       -"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ramforge", default="build/ramforge")
    ap.add_argument("-m", "--model", action="append", required=True)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("-n", type=int, default=16)
    ap.add_argument("-r", "--repetitions", type=int, default=3)
    ap.add_argument("--idle-seconds", type=int, default=2)
    ap.add_argument("--llama-server", default="", help="llama-server binary for (c)")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="rf-serve-idle-")
    try:
        for src in args.model:
            copy = os.path.join(tmp, os.path.basename(src))
            shutil.copyfile(src, copy)  # pageout must not evict the caller's file
            with open(copy, "rb+") as f:
                os.fsync(f.fileno())
            size = os.path.getsize(copy)
            target = size // 4
            base = [args.ramforge, "serve", "-m", copy, "--port", "0", "-t", str(args.threads)]
            idle = ["--idle-seconds", str(args.idle_seconds)]
            configs = [
                ("resident", base + ["--residency-policy", "observe"]),
                ("idle-dontneed", base + idle + ["--residency-policy", "memory-bound",
                                                 "--memory-target", str(target),
                                                 "--release-mode", "dontneed"]),
                ("idle-pageout", base + idle + ["--residency-policy", "memory-bound",
                                                "--memory-target", str(target),
                                                "--release-mode", "pageout"]),
            ]
            if args.llama_server:
                configs.append(("llama-server", [args.llama_server, "-m", copy, "--host",
                                                 "127.0.0.1", "-t", str(args.threads),
                                                 "--no-webui", "--sleep-idle-seconds",
                                                 str(args.idle_seconds)]))
            print(f"\n{os.path.basename(src)}: {size / 2**20:.1f} MiB, target "
                  f"{target / 2**20:.1f} MiB (25%), -n {args.n}, -t {args.threads}, "
                  f"medians of {args.repetitions}")
            print(f"{'config':14} {'idle RSS':>9} {'cache':>9} {'cgroup':>9} "
                  f"{'TTFT ms':>8} {'tok/s':>7}  tokens")
            ref, rows = None, {}
            for name, argv in configs:
                runs = [one_run(args, copy, name, argv, args.idle_seconds)
                        for _ in range(args.repetitions)]
                med = {k: statistics.median(r[k] for r in runs if r[k] is not None)
                       if any(r[k] is not None for r in runs) else None
                       for k in ("rss", "cache", "cgroup", "ttft", "tps")}
                if ref is None:
                    ref = runs[0]["tokens"]
                same = all(r["tokens"] == ref for r in runs)
                rows[name] = med
                print(f"{name:14} {mib(med['rss'])} {mib(med['cache'])} {mib(med['cgroup'])} "
                      f"{med['ttft'] * 1e3:8.1f} {med['tps']:7.2f}  "
                      f"{'identical' if same else 'DIFFER'}")
            if "llama-server" in rows:
                ls = rows["llama-server"]
                for name in ("resident", "idle-dontneed", "idle-pageout"):
                    r = rows[name]
                    ratio = [f"{k} {r[k] / ls[k]:.2f}" if r[k] and ls[k] else f"{k} -"
                             for k in ("rss", "cache", "ttft", "tps")]
                    print(f"ratio {name} / llama-server: {', '.join(ratio)}")
            else:
                print("llama-server    skipped: no --llama-server PATH given (build it from "
                      "the pin: DESIGN.md, -DLLAMA_BUILD_SERVER=ON, target llama-server)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
