#!/usr/bin/env python3
"""End-to-end cases of the release during the load (issue 36 item 10): a releasing policy
releases the file pages of each repacked (CPU_REPACK) weight from llama.cpp's progress
callback as soon as the load copied it, not at the after_load boundary.

  load_peak   a TinyLlama-shaped Q4_0 model, evicted before each run, run in a fresh child
              memory cgroup with --residency-policy conservative: with --dead-file-pages keep
              (today's load: the file and the copies resident at once) and with the default
              release. The release's cgroup peak (memory.max_usage_in_bytes) and VmHWM are at
              most 0.6 x the kept ones, the tokens identical, every released tensor is one
              the probe sees read from an anonymous copy; then under a limit 8 % over the
              release's peak (far under the kept one) the run completes without reaching the
              limit (before, the load hit it and the decode re-read the file)

Exit 0 pass, 1 fail, 77 skip (no root or no v1 memory cgroup; a CPU without repacking).
"""
import os
import sys

from e2e_util import ModelCtx as Ctx, Skip, check, load_peak, run_main

RATIO = 0.6


def case_load_peak(c):
    model = c.model("tinyllama", "q4_0")
    args = ["--residency-policy", "conservative"]
    kept = load_peak(c.rf, model, args + ["--dead-file-pages", "keep"])
    check(kept["rc"] == 0, f"kept run failed: {kept['stderr'][-800:]}")
    totals = kept["report"]["model"]["inventory"]["totals"]
    if not totals.get("n_anonymous"):
        raise Skip("llama.cpp repacks no weight on this CPU (no CPU_REPACK copy)")
    rel = load_peak(c.rf, model, args)
    check(rel["rc"] == 0, f"releasing run failed: {rel['stderr'][-800:]}")
    print(f"cgroup peak {kept['cgroup_peak'] >> 20} MiB -> {rel['cgroup_peak'] >> 20} MiB, "
          f"VmHWM {kept['vmhwm'] >> 20} MiB -> {rel['vmhwm'] >> 20} MiB")
    check(rel["text"] == kept["text"], f"tokens differ: {rel['text']!r} vs {kept['text']!r}")
    check(rel["cgroup_peak"] <= RATIO * kept["cgroup_peak"],
          f"cgroup peak {rel['cgroup_peak']} > {RATIO} x {kept['cgroup_peak']}")
    check(0 < rel["vmhwm"] <= RATIO * kept["vmhwm"],
          f"VmHWM {rel['vmhwm']} > {RATIO} x {kept['vmhwm']}")
    lr = rel["report"]["model"]["load_release"]
    check(lr["armed"] and lr["stopped"] is None and lr["n_tensors"] >= totals["n_anonymous"],
          f"load release: {lr}")
    # under a limit between the new peak and the old one
    limit = rel["cgroup_peak"] * 108 // 100
    check(limit < kept["cgroup_peak"], f"limit {limit} not under the kept peak")
    lim = load_peak(c.rf, model, args, limit_bytes=limit, name="ramforge-peak-limit")
    check(lim["rc"] == 0, f"run under {limit} failed: {lim['stderr'][-800:]}")
    check(lim["text"] == kept["text"], "tokens differ under the limit")
    verdict = lim["report"]["admission"]["kernel_verdict"]
    check(lim["failcnt"] == 0 and not verdict["hit_limit"],
          f"the run reached its limit of {limit} bytes (failcnt {lim['failcnt']}): {verdict}")
    return 0


CASES = {"load_peak": case_load_peak}

if __name__ == "__main__":
    run_main(CASES, Ctx, "ramforge-e2e-load-release-")
