#!/usr/bin/env python3
"""A sweep of `ramforge run --memory-limit` from 0.3x to 1.2x of the model file (issue 36's
Done-when): TinyLlama-shaped Q8_0 and Q4_0, the default policy and streaming, each run from an
evicted copy, with --admission warn and --residency-report-json. Prints one row per run
(admission's outcome, the exit, whether the kernel's OOM killer killed it, the cgroup's peak,
who wrote the report) and fails (exit 1) when a run admission let start was OOM-killed, or when
a run left no valid report. Needs root and a memory cgroup controller (exit 77 otherwise); the
rf-run-* cgroups are --memory-limit's own, removed by ramforge.

  bench/admission_sweep.py [--ramforge build/ramforge] [--models DIR] [--types q8_0,q4_0]
                           [--policies default,streaming] [--factors 0.3,0.4,...] [-n 4]

The models are generated under --models (mkmodel --preset tinyllama --seed 42) when absent.
Takes a few minutes: every run reads its model from storage.
"""
import argparse
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e"))
from e2e_util import evict  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
FACTORS = "0.3,0.4,0.5,0.6,0.7,0.8,0.9,0.95,0.97,0.99,1.0,1.05,1.1,1.2"


def model(rf, folder, wtype):
    path = os.path.join(folder, f"tinyllama-{wtype}.gguf")
    if not os.path.exists(path):
        os.makedirs(folder, exist_ok=True)
        subprocess.run([rf, "mkmodel", "--preset", "tinyllama", "--type", wtype, "--seed", "42",
                        "-o", path], check=True)
    return path


def outcome(doc):
    """The decision that let the run go or stopped it: after the load, else before it."""
    adm = doc.get("admission") or {}
    if adm.get("outcome"):
        return adm["outcome"]
    before = adm.get("before_load") or {}
    return before.get("outcome") or "none"


def one(args, path, policy, factor, report):
    limit = int(os.path.getsize(path) * factor)
    evict(path)
    if os.path.exists(report):
        os.unlink(report)
    argv = [args.ramforge, "run", "-m", path, "-p", "hi", "-n", str(args.n), "-c", "256",
            "--admission", "warn", "--memory-limit", str(limit), "--residency-report-json", report]
    if policy != "default":
        argv += ["--residency-policy", policy]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=1800)
    killed = "OOM killer killed the run" in p.stderr
    peak = re.findall(r"peak ([\d.]+ \w+)", p.stderr)  # the cgroup's: the last line
    row = {"policy": policy, "factor": factor, "limit_mib": limit / 2**20, "exit": p.returncode,
           "killed": killed, "peak": peak[-1] if peak else "?", "refused": "refused" in p.stderr,
           "outcome": "-", "report": "none"}
    try:
        with open(report) as f:
            doc = json.load(f)
        row["outcome"] = outcome(doc)
        row["report"] = ("parent" if any("supervised it" in w for w in doc.get("warnings", []))
                         else "run")
    except (OSError, ValueError):
        pass
    if killed and policy == "streaming" and "or --residency-policy streaming" in p.stderr:
        row["bad_hint"] = True
    row["stderr"] = p.stderr[-1500:]
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ramforge", default=os.path.join(ROOT, "build", "ramforge"))
    ap.add_argument("--models", default=os.path.join(ROOT, "build", "models"))
    ap.add_argument("--types", default="q8_0,q4_0")
    ap.add_argument("--policies", default="default,streaming")
    ap.add_argument("--factors", default=FACTORS)
    ap.add_argument("-n", type=int, default=4)
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("admission_sweep: needs root (--memory-limit makes a cgroup)", file=sys.stderr)
        return 77
    report = os.path.join(args.models, f"admission-sweep-{os.getpid()}.json")
    bad = 0
    print(f"{'model':<19} {'policy':<10} {'x file':>6} {'limit':>11} {'admission':<22} "
          f"{'exit':>4} {'OOM kill':<8} {'peak':>11} report")
    for wtype in args.types.split(","):
        path = model(args.ramforge, args.models, wtype)
        for policy in args.policies.split(","):
            for factor in (float(x) for x in args.factors.split(",")):
                r = one(args, path, policy, factor, report)
                fault = []
                if r["killed"] and not r["refused"]:
                    fault.append("admitted, then OOM-killed")
                if r["report"] == "none":
                    fault.append("no report")
                if r.get("bad_hint"):
                    fault.append("the kill message suggests the policy in use")
                print(f"{os.path.basename(path):<19} {policy:<10} {factor:>6.3f} "
                      f"{r['limit_mib']:>7.2f} MiB {r['outcome']:<22} {r['exit']:>4} "
                      f"{'yes' if r['killed'] else 'no':<8} {r['peak']:>11} {r['report']}"
                      f"{'  FAULT: ' + ', '.join(fault) if fault else ''}", flush=True)
                if fault:
                    bad += 1
                    print(r["stderr"], file=sys.stderr)
    if os.path.exists(report):
        os.unlink(report)
    print(f"{bad} fault(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
