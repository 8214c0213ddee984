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
  exec_load_peak  the same model under `ramforge exec --residency-policy conservative` running
              llama.cpp's examples/simple: the cgroup peak at most 0.6 x observe's (the
              program's load, not wrapped), the same text, the session report's
              model.load_release armed

Exit 0 pass, 1 fail, 77 skip (no root or no v1 memory cgroup; a CPU without repacking).
"""
import json
import os
import subprocess

from e2e_util import ModelCtx as Ctx, Skip, asan_build, check, evict, load_peak, \
    memory_child_cgroup, run_main

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
    lr = rel["report"]["model"]["load_release"]
    check(lr["armed"] and lr["stopped"] is None and lr["n_tensors"] >= totals["n_anonymous"],
          f"load release: {lr}")
    if asan_build(c.rf):
        # The sanitizer's shadow pages and quarantine are charged beside the program's own
        # memory on both sides: the ratio is the plain build's (the release ran, checked above).
        print("AddressSanitizer build: the peaks' ratio is checked on the plain build")
        return 0
    check(rel["cgroup_peak"] <= RATIO * kept["cgroup_peak"],
          f"cgroup peak {rel['cgroup_peak']} > {RATIO} x {kept['cgroup_peak']}")
    check(0 < rel["vmhwm"] <= RATIO * kept["vmhwm"],
          f"VmHWM {rel['vmhwm']} > {RATIO} x {kept['vmhwm']}")
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


def exec_peak(c, model, policy):
    """`ramforge exec --residency-policy POLICY -- simple -m MODEL -n 8` on MODEL evicted, in a
    fresh child memory cgroup: (rc, stdout, cgroup peak, the session report)."""
    evict(model)
    rep = c.path(f"exec-{policy}.json")
    with memory_child_cgroup("ramforge-peak-exec", 8 << 30) as enter:
        p = subprocess.run([c.rf, "exec", "--residency-policy", policy, "--residency-report-json",
                            rep, "--", c.simple, "-m", model, "-n", "8", "Hello my name is"],
                           preexec_fn=enter, capture_output=True, text=True, timeout=600)
        with open(os.path.join(enter.cgroup, "memory.max_usage_in_bytes")) as f:
            peak = int(f.read())
    check(p.returncode == 0, f"exec {policy}: {p.stderr[-800:]}")
    with open(rep) as f:
        return p.stdout, peak, json.load(f)


def case_exec_load_peak(c):
    if not c.simple:
        raise Skip("no llama-simple-ref (the pinned llama.cpp's examples/simple)")
    if asan_build(c.rf):
        raise Skip("an AddressSanitizer build: its runtime must come first in a process, "
                   "so it cannot be preloaded into an uninstrumented program")
    model = c.model("tinyllama", "q4_0")
    out_kept, kept, rep = exec_peak(c, model, "observe")
    if not rep["model"]["inventory"]["totals"].get("n_anonymous"):
        raise Skip("llama.cpp repacks no weight on this CPU (no CPU_REPACK copy)")
    check(rep["model"]["load_release"] is None, "observe released during the load")
    out, peak, rep = exec_peak(c, model, "conservative")
    print(f"exec cgroup peak {kept >> 20} MiB -> {peak >> 20} MiB")
    check(out == out_kept, f"text differs: {out!r} vs {out_kept!r}")
    lr = rep["model"]["load_release"]
    check(lr and lr["armed"] and lr["stopped"] is None, f"load release: {lr}")
    check(peak <= RATIO * kept, f"exec cgroup peak {peak} > {RATIO} x {kept}")
    return 0


class ExecCtx(Ctx):
    def __init__(self, args, tmp):
        super().__init__(args, tmp)
        self.simple = args.simple


CASES = {"load_peak": case_load_peak, "exec_load_peak": case_exec_load_peak}

if __name__ == "__main__":
    run_main(CASES, ExecCtx, "ramforge-e2e-load-release-")
