#!/usr/bin/env python3
"""The load peak with and without the release during the load, side by side.

For -r rounds, MODEL is evicted from the page cache (fsync + posix_fadvise DONTNEED)
and `ramforge run -m MODEL -n 8 --residency-policy POLICY` runs in a fresh child memory
cgroup (v1, root; removed also on failure), once with `--dead-file-pages keep` (the
load holds the file and the repacked copies at once, as before the release during the
load) and once with the default release (each repacked weight's file pages released as
soon as the load copied it); the order alternates between rounds. Per run: the cgroup's
peak (memory.max_usage_in_bytes: the page cache the load brought in counts) and the
process's VmHWM (the report's residency samples), and the generated text, which must be
the same. Prints the medians and the ratio release / keep.

    bench/load_peak.py --ramforge build/ramforge -m build/models/tinyllama-q4_0.gguf -r 3
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e"))
from e2e_util import Skip, load_peak  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ramforge", required=True)
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("-r", "--rounds", type=int, default=3)
    ap.add_argument("--policy", default="conservative")
    a = ap.parse_args()
    sides = {"keep": ["--dead-file-pages", "keep"], "release": []}
    runs = {k: [] for k in sides}
    texts = set()
    try:
        for i in range(a.rounds):
            for side in (("keep", "release") if i % 2 == 0 else ("release", "keep")):
                r = load_peak(a.ramforge, a.model,
                              ["--residency-policy", a.policy] + sides[side])
                if r["rc"] != 0:
                    sys.exit(f"load_peak: {side} run failed: {r['stderr'][-800:]}")
                runs[side].append(r)
                texts.add(r["text"])
                print(f"round {i + 1} {side:7}: cgroup peak {r['cgroup_peak'] / 2**20:8.1f} MiB, "
                      f"VmHWM {r['vmhwm'] / 2**20:8.1f} MiB", flush=True)
    except Skip as e:
        sys.exit(f"load_peak: {e}")
    print(f"\n{'':14}{'keep (before)':>16}{'release (now)':>16}{'ratio':>8}")
    for key, label in (("cgroup_peak", "cgroup peak"), ("vmhwm", "VmHWM")):
        k = statistics.median(r[key] for r in runs["keep"])
        n = statistics.median(r[key] for r in runs["release"])
        print(f"{label:14}{k / 2**20:12.1f} MiB{n / 2**20:12.1f} MiB{n / k:8.3f}")
    lr = runs["release"][-1]["report"]["model"]["load_release"]
    print(f"released during the load: {lr['n_tensors']} tensors "
          f"({lr['n_kept']} kept ones read back), {lr['released_bytes'] / 2**20:.1f} MiB; "
          f"metadata-only load {lr['prepare_ns'] / 1e6:.0f} ms")
    print("tokens identical" if len(texts) == 1 else f"TOKENS DIFFER: {texts}")
    return 0 if len(texts) == 1 else 1


if __name__ == "__main__":
    sys.exit(main())
