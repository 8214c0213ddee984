#!/usr/bin/env python3
"""What `ramforge watch` costs the process it watches and the CPU it runs on, side by side.

One server (llama-server from the pin with --llama-server PATH, else `ramforge
serve`) on MODEL; then -r rounds, each one greedy request of -n tokens without a
watcher and one with `ramforge watch -i 1 --json PID` running (the order
alternates between rounds, so a drift of the machine falls on both sides). Per
request: decode tok/s (the server's timings.predicted_per_second). Per watched
request: the watcher's CPU time (utime + stime of /proc/WPID/stat) over the
wall time from its first reading to the end of the request. Prints both ratios:

    decode cost  = 1 - median(tok/s watched) / median(tok/s unwatched)
    watcher CPU  = median(watcher CPU seconds / wall seconds), of one CPU

On a shared, noisy machine a single pair means little: quote the medians and
the spread this prints, with the command line.

    bench/watch_cost.py --ramforge build/ramforge -m build/models/tinyllama-q8_0.gguf \\
        --llama-server /var/cache/ramforge/llama-v0.5.0-0746b68f9b2a/bin/llama-server -r 7
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_idle import PROMPT, free_port  # noqa: E402


def get(url, body=None, timeout=600):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def healthy(url):
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ramforge", required=True)
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--llama-server", default="")
    ap.add_argument("-r", "--rounds", type=int, default=7)
    ap.add_argument("-n", "--tokens", type=int, default=32)
    ap.add_argument("-t", "--threads", type=int, default=1)
    a = ap.parse_args()

    port = free_port()
    if a.llama_server:
        argv = [a.llama_server, "-m", a.model, "--host", "127.0.0.1", "--port", str(port),
                "-c", "512", "-t", str(a.threads)]
        kind = "llama-server"
    else:
        argv = [a.ramforge, "serve", "-m", a.model, "--port", str(port), "-t", str(a.threads)]
        kind = "ramforge serve"
    srv = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    off, on, cpu = [], [], []
    try:
        deadline = time.monotonic() + 300
        while not healthy(f"{base}/health"):
            if srv.poll() is not None or time.monotonic() > deadline:
                sys.exit(f"watch_cost: {kind} did not start")
            time.sleep(0.2)
        body = {"prompt": PROMPT, "n_predict": a.tokens, "temperature": 0, "cache_prompt": False}
        get(f"{base}/completion", body)  # warm: every weight page read once
        for r in range(a.rounds):
            for watched in ((False, True) if r % 2 == 0 else (True, False)):
                if not watched:
                    off.append(get(f"{base}/completion", body)["timings"]["predicted_per_second"])
                    continue
                out = tempfile.TemporaryFile()
                w = subprocess.Popen([a.ramforge, "watch", "-i", "1", "--json", str(srv.pid)],
                                     stdout=out, stderr=subprocess.DEVNULL)
                try:
                    deadline = time.monotonic() + 60
                    while os.fstat(out.fileno()).st_size == 0:  # the first reading is out
                        if w.poll() is not None or time.monotonic() > deadline:
                            sys.exit("watch_cost: the watcher gave no reading")
                        time.sleep(0.02)
                    c0, t0 = cpu_seconds(w.pid), time.monotonic()
                    on.append(get(f"{base}/completion", body)["timings"]["predicted_per_second"])
                    cpu.append((cpu_seconds(w.pid) - c0) / (time.monotonic() - t0))
                finally:
                    w.terminate()
                    w.wait(30)
                    out.close()
    finally:
        srv.terminate()
        srv.wait()

    def spread(v):
        return f"median {statistics.median(v):.3f} (min {min(v):.3f}, max {max(v):.3f})"
    size = os.path.getsize(a.model)
    print(f"watch_cost: {kind}, {a.model} ({size / 2**30:.2f} GiB), {a.rounds} rounds of "
          f"{a.tokens} tokens, -t {a.threads}, watch -i 1")
    print(f"  decode tok/s unwatched  {spread(off)}")
    print(f"  decode tok/s watched    {spread(on)}")
    print(f"  watcher CPU / wall      {spread(cpu)}")
    cost = 1 - statistics.median(on) / statistics.median(off)
    print(f"  decode cost  {cost * 100:+.2f}%   (1 - median watched / median unwatched)")
    print(f"  watcher CPU  {statistics.median(cpu) * 100:.2f}% of one CPU (median)")
    print("  a shared, noisy machine: medians of alternating rounds, spread above")


if __name__ == "__main__":
    main()
