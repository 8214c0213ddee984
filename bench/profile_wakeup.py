#!/usr/bin/env python3
"""Wake-up after an idle pageout release: hot-first staging from a persisted profile vs
file-order staging vs no staging, side by side in one run.

`ramforge serve` on a private, fsynced copy of the model, reuse-aware to a target of
--target-pct of the file, --release-mode pageout, --idle-seconds 2, --profile (so every
request runs the dispatch observer in all three conditions: the observer's cost is the
same everywhere). Per repetition and condition, interleaved (hot, file, none, hot, ...):

  hot   --profile COPY-OF-A-PERSISTED-PROFILE --staging-budget B: staging in the
        profile's first-use order;
  file  --profile NEW-FILE --staging-budget B: no loaded profile, staging in file order;
  none  --profile NEW-FILE, no staging.

One warm request, the idle release (pageout), the model file's page cache (fincore),
then the wake-up request, streamed: client-side time to the first token (request sent to
the first SSE event: includes the staging, which the server's TTFT excludes) and the
server's prompt_ms. With --profile the staging skips tensors whose pages were all resident
when the request's operation opened (mincore). At shutdown the profile is saved; its last history entry is the
wake-up request's prediction: selected, hit, miss, wasted and unknown bytes (see
docs/PREDICTION.md for what they mean and do not). Medians of -r repetitions.

    bench/profile_wakeup.py --ramforge build/ramforge -m build/models/tinyllama-q8_0.gguf \\
        -t 2 -r 3 --staging-pct 25 --target-pct 10
"""
import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_idle import Proc, page_cache, ramforge_port, stream_request  # noqa: E402


def one(args, copy, tmp, name, profile_src, idx):
    prof = os.path.join(tmp, f"{name}-{idx}.json")
    if profile_src:
        shutil.copyfile(profile_src, prof)
    size = os.path.getsize(copy)
    argv = [args.ramforge, "serve", "-m", copy, "--port", "0", "-t", str(args.threads),
            "--residency-policy", "reuse-aware",
            "--memory-target", str(size * args.target_pct // 100),
            "--release-mode", "pageout", "--idle-seconds", str(args.idle_seconds),
            "--profile", prof, "--profile-history", "8"]
    if name != "none":
        argv += ["--staging-budget", str(size * args.staging_pct // 100)]
    proc = Proc(argv, ramforge_port)
    try:
        stream_request(proc.port, args.n)  # warm
        time.sleep(args.idle_seconds + 2)
        m = {"cache_before": page_cache(copy)}
        t0 = time.monotonic()
        m["ttft"], tokens, _ = stream_request(proc.port, args.n)
        m["request_s"] = time.monotonic() - t0
        m["tokens"] = tuple(tokens)
    finally:
        proc.stop()
    with open(prof) as f:
        doc = json.load(f)
    h = doc["history"][-1] if doc["history"] else {}
    pb = h.get("page_bytes") or 0
    for k in ("hit", "miss", "wasted", "unknown", "used", "resident_staged"):
        v = h.get(f"{k}_pages")
        m[k] = v * pb if v is not None else None
    m["selected"] = h.get("selected_bytes")
    return m, prof


def med(runs, k):
    vals = [r[k] for r in runs if r.get(k) is not None]
    return statistics.median(vals) if vals else None


def mib(v):
    return f"{v / 2**20:8.1f}" if v is not None else "       -"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ramforge", default="build/ramforge")
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("-n", type=int, default=4)
    ap.add_argument("-r", "--repetitions", type=int, default=3)
    ap.add_argument("--idle-seconds", type=int, default=2)
    ap.add_argument("--staging-pct", type=int, default=25)
    ap.add_argument("--target-pct", type=int, default=10)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="rf-profile-wakeup-")
    try:
        copy = os.path.join(tmp, os.path.basename(args.model))
        shutil.copyfile(args.model, copy)  # pageout must not evict the caller's file
        with open(copy, "rb+") as f:
            os.fsync(f.fileno())
        # The persisted profile: one serve run with the observer, saved at shutdown.
        _, persisted = one(args, copy, tmp, "seed", None, 0)
        names = ["hot", "file", "none"]
        runs = {n: [] for n in names}
        for i in range(args.repetitions):
            for n in names:
                m, _ = one(args, copy, tmp, n, persisted if n == "hot" else None, i + 1)
                runs[n].append(m)
                print(f"  run {i + 1} {n:4}: TTFT {m['ttft'] * 1e3:8.1f} ms, request "
                      f"{m['request_s'] * 1e3:8.1f} ms", flush=True)
        size = os.path.getsize(copy)
        print(f"{os.path.basename(args.model)}: {size / 2**20:.1f} MiB, target "
              f"{args.target_pct}%, staging budget {args.staging_pct}% "
              f"({size * args.staging_pct // 100 / 2**20:.1f} MiB), -n {args.n}, "
              f"-t {args.threads}, medians of {args.repetitions}")
        print(f"{'staging':6} {'cache MiB':>9} {'TTFT ms':>8} {'req ms':>8} {'sel MiB':>8} "
              f"{'hit MiB':>8} {'miss MiB':>8} {'waste MiB':>9} {'unk MiB':>8} {'used MiB':>8} "
              f"{'res.st MiB':>10}")
        for n in names:
            r = runs[n]
            print(f"{n:6} {mib(med(r, 'cache_before')):>9} {med(r, 'ttft') * 1e3:8.1f} "
                  f"{med(r, 'request_s') * 1e3:8.1f} {mib(med(r, 'selected'))} "
                  f"{mib(med(r, 'hit'))} {mib(med(r, 'miss'))} {mib(med(r, 'wasted')):>9} "
                  f"{mib(med(r, 'unknown'))} {mib(med(r, 'used'))} "
                  f"{mib(med(r, 'resident_staged')):>10}")
        base = med(runs["none"], "ttft")
        for n in ("hot", "file"):
            print(f"TTFT {n}/none: {med(runs[n], 'ttft') / base:.2f}")
        print(f"TTFT hot/file: {med(runs['hot'], 'ttft') / med(runs['file'], 'ttft'):.2f}")
        toks = {r["tokens"] for n in names for r in runs[n]}
        print(f"wake-up tokens identical across all runs: {len(toks) == 1}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
