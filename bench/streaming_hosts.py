#!/usr/bin/env python3
"""Streaming in every host, side by side (issue 32): decode tok/s of one model under a memory
limit that is a fraction of its file, model evicted before every run, as

  run      ramforge run --residency-policy streaming --memory-limit L (its own child cgroup)
  serve    ramforge serve --residency-policy streaming --memory-limit L, one /completion
  serve-off the same serve with --residency-policy off (the page cache alone)
  exec     ramforge exec --residency-policy streaming --memory-limit L -- llama-server (the
           pinned build's, --llama-server), one /completion
  bare     the same llama-server alone in a child cgroup of limit L (the page cache alone)

rounds alternating (run, serve, serve-off, exec, bare, run, ...), then one line per host: the
median tok/s, its ratio to run's, to serve-off's and to bare's, and whether every run's tokens
were identical (greedy). Without --llama-server the last two rows are left out.

  bench/streaming_hosts.py -m MODEL [--fraction 0.75] [-n 16] [-t 2] [-r 3] \\
      [--llama-server "$(scripts/build-llama-server.sh)"]

Needs root (memory cgroups). Quote it from a quiet host, with the load average it prints.
"""
import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_util import evict, memory_child_cgroup  # noqa: E402
from serve_idle import free_port, llama_server_port  # noqa: E402

PROMPT = "Hello my name is"


def run_once(a, limit, tmp):
    """run's decode tok/s and tokens from its report."""
    evict(a.model)
    path = os.path.join(tmp, "run.json")
    subprocess.run([a.ramforge, "run", "-m", a.model, "-p", PROMPT, "-n", str(a.n), "-t",
                    str(a.t), "-q", "--residency-policy", "streaming", "--memory-limit",
                    str(limit), "--residency-report-json", path], check=True,
                   stdout=subprocess.DEVNULL)
    with open(path) as f:
        rep = json.load(f)
    ids = rep["output"]["token_ids"]
    return (len(ids) - 1) * 1e9 / rep["timing"]["decode_ns"], ids


def serve_once(a, limit, policy):
    """serve's decode tok/s (its timings) and tokens for one /completion."""
    evict(a.model)
    proc = subprocess.Popen([a.ramforge, "serve", "-m", a.model, "--port", "0", "-t", str(a.t),
                             "-q", "--residency-policy", policy, "--memory-limit", str(limit)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stderr.readline()
        if "serving" not in line:
            raise SystemExit(f"streaming_hosts: serve did not start: {line!r}")
        port = int(line.rsplit(":", 1)[1].strip().strip("/"))
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        conn.request("POST", "/completion", body=json.dumps(
            {"prompt": PROMPT, "n_predict": a.n, "temperature": 0}))
        doc = json.loads(conn.getresponse().read())
        conn.close()
    finally:
        proc.terminate()
        proc.wait(timeout=120)
    return doc["timings"]["predicted_per_second"], doc["tokens"]


def completion(port, n, timeout=600):
    """llama-server's answer to one greedy /completion of PROMPT, n tokens (their ids
    returned, no prompt cache)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    conn.request("POST", "/completion", body=json.dumps(
        {"prompt": PROMPT, "n_predict": n, "temperature": 0, "return_tokens": True,
         "cache_prompt": False}))
    doc = json.loads(conn.getresponse().read())
    conn.close()
    return doc


def llama_server_once(a, limit, exec_policy):
    """llama-server's decode tok/s (its timings) and tokens for one /completion, under exec with
    exec_policy and --memory-limit, or (None) alone in a child cgroup of the same limit."""
    evict(a.model)
    port = free_port()
    argv = [a.llama_server, "-m", a.model, "--host", "127.0.0.1", "--port", str(port), "-c",
            "512", "-t", str(a.t), "-np", "1"]
    with memory_child_cgroup("rf-bench-hosts", limit) as enter:
        if exec_policy:
            argv = [a.ramforge, "exec", "--residency-policy", exec_policy, "--memory-limit",
                    str(limit), "--"] + argv
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                preexec_fn=None if exec_policy else enter)
        try:
            llama_server_port(port)(proc)  # its load and warmup
            doc = completion(port, a.n)
        finally:
            proc.terminate()
            proc.wait(timeout=120)
    if "timings" not in doc:
        raise SystemExit(f"streaming_hosts: llama-server answered {doc}")
    return doc["timings"]["predicted_per_second"], doc["tokens"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--ramforge", default="build/ramforge")
    ap.add_argument("--fraction", type=float, default=0.75)
    ap.add_argument("-n", type=int, default=16)
    ap.add_argument("-t", type=int, default=2)
    ap.add_argument("-r", type=int, default=3)
    ap.add_argument("--llama-server", default="", help="llama-server: the exec and bare rows")
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("streaming_hosts: needs root (memory cgroups)", file=sys.stderr)
        return 77
    limit = int(os.path.getsize(a.model) * a.fraction)
    hosts = [("run", lambda: run_once(a, limit, tmp)),
             ("serve", lambda: serve_once(a, limit, "streaming")),
             ("serve-off", lambda: serve_once(a, limit, "off"))]
    if a.llama_server:
        hosts += [("exec", lambda: llama_server_once(a, limit, "streaming")),
                  ("bare", lambda: llama_server_once(a, limit, None))]
    rows = {host: [] for host, _ in hosts}
    tokens = {k: set() for k in rows}
    with tempfile.TemporaryDirectory(prefix="rf-hosts-") as tmp:
        for _ in range(a.r):
            for host, fn in hosts:
                tps, ids = fn()
                rows[host].append(tps)
                tokens[host].add(tuple(ids))
    all_ids = set().union(*tokens.values())
    print(f"model {a.model}, limit {limit} bytes ({a.fraction}x the file), {a.n} tokens, "
          f"{a.t} threads, {a.r} rounds; load average {os.getloadavg()[0]:.2f}")
    med = {k: statistics.median(v) for k, v in rows.items()}
    for host, v in rows.items():
        bare = f", x bare {med[host] / med['bare']:.2f}" if "bare" in med else ""
        print(f"{host:10s} {med[host]:7.2f} tok/s (runs {', '.join(f'{x:.2f}' for x in v)}), "
              f"x run {med[host] / med['run']:.2f}, x serve-off {med[host] / med['serve-off']:.2f}"
              f"{bare}")
    print(f"tokens identical across every run: {'yes' if len(all_ids) == 1 else 'NO'}")
    return 0 if len(all_ids) == 1 else 1


if __name__ == "__main__":
    sys.exit(main())
