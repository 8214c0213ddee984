#!/usr/bin/env python3
"""What an idle llama.cpp server costs, side by side in one run: llama-server bare and
with its sleep, under `ramforge exec`, and `ramforge serve`.

For each model, the rows (configurations):
  llama-server        the pinned llama-server (scripts/build-llama-server.sh), always
                      resident                                   [--llama-server PATH]
  llama-server-sleep  the same with --sleep-idle-seconds        [--llama-server PATH]
  exec-dontneed       ramforge exec, memory-bound to 25% of the file, idle release with
  exec-pageout        dontneed / pageout        [--llama-server PATH and `ramforge exec`]
  serve-resident      ramforge serve (observe), for reference
  serve-dontneed      ramforge serve, the same idle release as exec's rows
  serve-pageout
A row that cannot run is printed as skipped with the reason. Each run: start the server
on a private copy of the model, one warm request, wait idle, then measure the idle
process (VmRSS), the model file's page cache (fincore), the cgroup charge (memory.current
or memory.usage_in_bytes of the server's cgroup: cgroup-wide), then the first request
after idle: client-side TTFT (to the first SSE event), decode tok/s (the server's
timings) and token identity with the first row. For the sleep and the pageout rows, a
second series of runs evicts the model file from the page cache while idle (what memory
pressure reclaims first: POSIX_FADV_DONTNEED drops the file's pages no process maps)
and measures the wake TTFT after that ("evicted"). Medians of -r runs.

    bench/serve_idle.py --ramforge build/ramforge -m build/models/tinyllama-q8_0.gguf \\
        -m build/models/tinyllama-q4_0.gguf -t 2 -r 3 \\
        --llama-server "$(scripts/build-llama-server.sh)"
"""
import argparse
import http.client
import json
import os
import shutil
import signal
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
        try:
            self.port = port_from_stderr(self.p)
        except BaseException:  # not started, or SIGTERM while starting: no orphan
            self.stop()
            raise

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
    """Waits for llama-server's /health (it loads the model before answering 200); a piped
    stderr is drained meanwhile."""
    def wait(p):
        if p.stderr is not None:
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


def evict(path):
    """Drops the file's page-cache pages that no process maps (memory pressure's first)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def one_run(args, model, argv, llama, evicted):
    """The idle figures and the wake request of one server start; with evicted, only the
    wake TTFT after the file was evicted while idle."""
    if llama:
        port = free_port()
        proc = Proc(argv + ["--port", str(port)], llama_server_port(port))
    else:
        proc = Proc(argv, ramforge_port)
    try:
        stream_request(proc.port, args.n)  # warm
        time.sleep(args.idle_seconds + 2)
        if evicted:
            evict(model)
            return {"evicted": stream_request(proc.port, args.n)[0]}
        m = {"rss": rss_of(proc.p.pid), "cache": page_cache(model),
             "cgroup": cgroup_charge(proc.p.pid)}
        m["ttft"], m["tokens"], m["tps"] = stream_request(proc.port, args.n)
        return m
    finally:
        proc.stop()


def mib(v):
    return f"{v / 2**20:8.1f}" if v is not None else "       -"


def ms(v):
    return f"{v * 1e3:8.1f}" if v is not None else "       -"


def has_exec(rf):
    return subprocess.run([rf, "exec", "--help"], capture_output=True).returncode == 0


def configs(args, copy, target):
    """[(row, argv or None, is llama-server, skip reason, measure evicted)]."""
    idle = ["--idle-seconds", str(args.idle_seconds)]
    release = lambda mode: ["--residency-policy", "memory-bound", "--memory-target",
                            str(target), "--release-mode", mode]
    serve = [args.ramforge, "serve", "-m", copy, "--port", "0", "-t", str(args.threads)]
    ls = [args.llama_server, "-m", copy, "--host", "127.0.0.1", "-t", str(args.threads),
          "--no-webui"]
    no_ls = "" if args.llama_server else "no --llama-server PATH (scripts/build-llama-server.sh)"
    no_exec = no_ls or ("" if has_exec(args.ramforge) else
                        f"{args.ramforge} has no exec command (issue 21, items 1-8)")
    rows = [("llama-server", ls, True, no_ls, False),
            ("llama-server-sleep", ls + ["--sleep-idle-seconds", str(args.idle_seconds)],
             True, no_ls, True)]
    for mode in ("dontneed", "pageout"):
        rows.append((f"exec-{mode}", [args.ramforge, "exec"] + idle + release(mode) +
                     ["--"] + ls, True, no_exec, mode == "pageout"))
    rows.append(("serve-resident", serve + ["--residency-policy", "observe"], False, "",
                 False))
    for mode in ("dontneed", "pageout"):
        rows.append((f"serve-{mode}", serve + idle + release(mode), False, "",
                     mode == "pageout"))
    return rows


def median(runs, k):
    vals = [r[k] for r in runs if r.get(k) is not None]
    return statistics.median(vals) if vals else None


def bench_model(args, src, tmp):
    copy = os.path.join(tmp, os.path.basename(src))
    shutil.copyfile(src, copy)  # pageout and the eviction must not evict the caller's file
    with open(copy, "rb+") as f:
        os.fsync(f.fileno())
    size = os.path.getsize(copy)
    target = size // 4
    print(f"\n{os.path.basename(src)}: {size / 2**20:.1f} MiB, target "
          f"{target / 2**20:.1f} MiB (25%), -n {args.n}, -t {args.threads}, "
          f"idle {args.idle_seconds} s, medians of {args.repetitions}")
    print(f"{'config':18} {'idle RSS':>9} {'cache':>9} {'cgroup':>9} {'TTFT ms':>8} "
          f"{'evicted':>8} {'tok/s':>7}  tokens")
    ref, rows = None, {}
    for name, argv, llama, why, with_evicted in configs(args, copy, target):
        if why:
            print(f"{name:18} skipped: {why}")
            continue
        runs = [one_run(args, copy, argv, llama, False) for _ in range(args.repetitions)]
        ev = [one_run(args, copy, argv, llama, True)
              for _ in range(args.repetitions if with_evicted else 0)]
        med = {k: median(runs, k) for k in ("rss", "cache", "cgroup", "ttft", "tps")}
        med["evicted"] = median(ev, "evicted")
        if ref is None:
            ref = runs[0]["tokens"]
        same = all(r["tokens"] == ref for r in runs)
        rows[name] = med
        tps = f"{med['tps']:7.2f}" if med["tps"] is not None else "      -"
        print(f"{name:18} {mib(med['rss'])} {mib(med['cache'])} {mib(med['cgroup'])} "
              f"{ms(med['ttft'])} {ms(med['evicted'])} {tps}  "
              f"{'identical' if same else 'DIFFER'}")
    return rows


def ratios(rows):
    """The goals of issue 21 as ratios, where both rows ran."""
    def ratio(a, ka, b, kb):
        x, y = rows.get(a, {}).get(ka), rows.get(b, {}).get(kb)
        return f"{x / y:.2f}" if x and y else "-"
    print(f"exec-dontneed tok/s / llama-server: "
          f"{ratio('exec-dontneed', 'tps', 'llama-server', 'tps')}")
    print(f"exec-dontneed wake TTFT / llama-server-sleep wake: "
          f"{ratio('exec-dontneed', 'ttft', 'llama-server-sleep', 'ttft')}")
    print(f"exec-pageout evicted wake / llama-server-sleep evicted wake: "
          f"{ratio('exec-pageout', 'evicted', 'llama-server-sleep', 'evicted')}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ramforge", default="build/ramforge")
    ap.add_argument("-m", "--model", action="append", required=True)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("-n", type=int, default=16)
    ap.add_argument("-r", "--repetitions", type=int, default=3)
    ap.add_argument("--idle-seconds", type=int, default=2)
    ap.add_argument("--llama-server", default="",
                    help="the pinned llama-server (scripts/build-llama-server.sh prints it)")
    args = ap.parse_args()
    # SIGTERM unwinds like ^C: the running server is stopped and the copies removed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    tmp = tempfile.mkdtemp(prefix="rf-serve-idle-")
    try:
        for src in args.model:
            ratios(bench_model(args, src, tmp))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
