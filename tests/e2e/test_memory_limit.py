#!/usr/bin/env python3
"""End-to-end cases of `ramforge run --memory-limit SIZE` (issue 24 item 2): the run in a
fresh child memory cgroup of its own, a cap the kernel holds, never left behind. As root on
cgroup v1 here (the v2 path logic is tests/sys's rfsys_cgroup_child_* on fixture trees).

  limit_streaming_cold  a tinyllama Q8_0 copy evicted from the page cache, run under
                        0.75 x its size with --residency-policy streaming: admitted, run
                        in rf-run-<pid> (the report's binding cgroup), reads from storage
                        (/proc/self/io), the report matches the schema, no cgroup is left
                        and then, the file cached (charged to the parent cgroup): the
                        summary says the limit could not bind its pages and gives the
                        eviction command; the admission says "not bound", not "will thrash"
  limit_signal          SIGTERM to the command while the run holds the model (--hold):
                        the cgroup is gone once the command ended, as on SIGINT; and
                        with its output's reader gone (`2>&1 | head -1`): no SIGPIPE
                        kills the command before it removed the cgroup
  limit_cold_default    fixadm defects 1-4: the same evicted copy under 300 MiB with the
                        default policy: admitted with "will thrash" (never "the kernel
                        would kill the run"; rejected before fixadm), in warn and off
                        alike; the summary splits the reclaimable figure, says what the
                        read figure covers and does not blame the model's pages for the
                        RSS above the limit
  limit_no_root         as uid 65534: one line naming the cgroup and "needs root", exit 1
  limit_killed_report   issue 36: the small Q8_0, evicted, streaming with --admission off
                        under 6 MiB: the kernel kills the run; the kill line does not suggest
                        --residency-policy streaming (in use) and the supervising parent
                        writes the report the run could not (valid, saying what ended it)
  limit_cached_small    issue 36 item 2: the small Q8_0 cached before the run (by the test's
                        cgroup), under 12 MiB: the cgroup's charge is the run's anonymous
                        memory, not the model's pages: admitted with "not bound", it runs
                        (it was rejected: "the kernel would kill the run")
  limit_warm_not_bound  a small F32 model cached before the run, under a limit below its
                        size: the verdict says the limit cannot bind it (never "will
                        thrash"), the summary labels charge and room and explains the RSS
                        above the limit; evicted, the verdict is "will thrash"

Exit 0 pass, 1 fail, 77 skip (no root or no v1 memory cgroup).
"""
import glob
import json
import os
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "schema"))
import validate_report  # noqa: E402
from e2e_util import (Skip, asan_build, check, evict, memory_cgroup_v1, run_main,  # noqa
                      run_ramforge)

PROMPT = "Hello my name is"


class Ctx:
    def __init__(self, args, tmp):
        self.rf = args.ramforge
        self.schema = args.schema
        self.tmp = tmp  # under ctest's working directory (a disk): evictable

    def run(self, *argv, check_rc=0, **kw):
        return run_ramforge(self.rf, argv, check_rc, timeout=900, **kw)

    def model(self, preset="tinyllama", wtype="q8_0"):
        path = os.path.join(self.tmp, f"{preset}-{wtype}.gguf")
        if not os.path.exists(path):
            self.run("mkmodel", "--preset", preset, "--type", wtype, "-q", "-o", path)
            with open(path, "rb") as f:
                os.fsync(f.fileno())
        return path


def leftovers(parent):
    return glob.glob(os.path.join(parent, "rf-run-*"))


def case_limit_streaming_cold(c):
    if asan_build(c.rf):
        raise Skip("an ASan build: its shadow memory is charged to the cgroup the test sizes")
    parent = memory_cgroup_v1()
    model = c.model()
    evict(model)
    limit = os.path.getsize(model) * 3 // 4 // 4096 * 4096  # v1 rounds to pages
    js = os.path.join(c.tmp, "cold.json")
    p = c.run("run", "-m", model, "-p", PROMPT, "-n", "4", "-t", "2", "--memory-limit",
              str(limit), "--residency-policy", "streaming", "--residency-report-json", js)
    with open(js) as f:
        doc = json.load(f)
    adm = doc["admission"]
    cg = [g for g in adm["cgroups"] if g["binding"]][0]
    check(os.path.basename(cg["dir"]).startswith("rf-run-") and cg["limit"]["bytes"] == limit,
          f"not run in its own cgroup of {limit} bytes: {cg['dir']} {cg['limit']}")
    check(not adm["refused"], adm["reason"][-300:])
    check(doc["output"]["n_generated_tokens"] == 4, f"{doc['output']['n_generated_tokens']} tokens")
    read = doc["streaming"]["io"]["read_bytes"]
    check(read is not None and read > limit // 4, f"read {read} bytes from storage")
    check("streams:" in p.stderr and "will thrash" not in p.stderr and
          "smaller model" not in p.stderr, f"the admission line: {p.stderr[:600]}")
    long = [ln for ln in p.stderr.splitlines() if ln.startswith("ramforge: warning")
            and len(ln) > 160]
    check(not long, f"warning lines over 160 characters: {long}")
    check(f"limit {limit / 2**20:.2f} MiB ({limit} bytes)" in p.stderr, p.stderr[-600:])
    # the tokens line gives the decode's own reads (streaming.decode), not the operation's
    dec_read = doc["streaming"]["decode"]["read_bytes"]
    check(dec_read is not None and
          f", {iec(dec_read)} read from storage during the decode;" in p.stderr,
          f"the tokens line against decode.read_bytes {dec_read}: {p.stderr[-600:]}")
    check("the model mapping's own unlocked pages and the libraries' charged to this cgroup "
          "(memory.stat clean mapped file pages - smaps Locked" in p.stderr, p.stderr[-1500:])
    check(not leftovers(parent), f"cgroups left behind: {leftovers(parent)}")
    errors = validate_report.validate(c.schema, js)
    check(not errors, f"the report does not match the schema: {errors[:3]}")
    # now cached (the removed cgroup's charges moved to its parent): the limit cannot bind
    p = c.run("run", "-m", model, "-p", PROMPT, "-n", "2", "-t", "2", "--memory-limit",
              str(limit), check_rc=None)
    check("not bound: the model mapping held" in p.stderr and "iflag=nocache" in p.stderr,
          f"no note that the limit could not bind: {p.stderr[-800:]}")
    # the limit cannot bind the cached pages: no "will thrash" verdict (s24read item 3)
    check("warning: admission: not bound: at least" in p.stderr and
          "will thrash" not in p.stderr, p.stderr[:800])
    long = [ln for ln in p.stderr.splitlines() if ln.startswith("ramforge: warning")
            and len(ln) > 160]
    check(not long, f"warning lines over 160 characters: {long}")
    check(not leftovers(parent), f"cgroups left behind: {leftovers(parent)}")


def iec(n):
    """Bytes as the CLI prints them: "512 B", "1.50 MiB"."""
    units, v, u = ["B", "KiB", "MiB", "GiB", "TiB"], float(n), 0
    while v >= 1024.0 and u < 4:
        v /= 1024.0
        u += 1
    return f"{n} B" if u == 0 else f"{v:.2f} {units[u]}"


def case_limit_warm_not_bound(c):
    """A small F32 model (74 MiB of weights) under a 60 MiB limit. Cached before the run
    (charged to the test's cgroup): the verdict says the limit cannot bind its pages, never
    "will thrash" (JSON cause not_bound, the report matches the schema); the summary says
    what the cgroup's charge and the room are, and why the process RSS is above the limit
    (with the cgroup's own charge). Evicted first, the same run's verdict is "will thrash":
    the pages are charged to the run's cgroup and the limit binds them."""
    if asan_build(c.rf):
        raise Skip("an ASan build: its shadow memory is charged to the cgroup the test sizes")
    parent = memory_cgroup_v1()
    model = c.model("small", "f32")
    limit = 60 << 20
    with open(model, "rb") as f:
        while f.read(1 << 20):
            pass
    js = os.path.join(c.tmp, "warm.json")
    p = c.run("run", "-m", model, "-p", PROMPT, "-n", "4", "-t", "1", "--memory-limit",
              str(limit), "--residency-report-json", js)
    with open(js) as f:
        doc = json.load(f)
    adm = doc["admission"]
    check(adm["cause"] == "not_bound" and adm["outcome"] == "admitted_with_warning" and
          not adm["thrash"], f"{adm['outcome']} {adm['cause']}: {adm['reason'][:400]}")
    check("warning: admission: not bound: at least" in p.stderr and
          "will thrash" not in p.stderr, p.stderr[:600])
    errors = validate_report.validate(c.schema, js)
    check(not errors, f"the report does not match the schema: {errors[:3]}")
    check(re.search(r"binding limit 60\.00 MiB: the cgroup's charge at admission [\d.]+ \w+, "
                    r"[\d.]+ \w+ of it reclaimable; room [\d.]+ \w+ = the limit - the "
                    r"charge the kernel cannot reclaim\n    reclaimable: [\d.]+ \w+ clean unmapped "
                    r"page cache \(memory.stat\) \+ [\d.]+ \w+ the model mapping's own unlocked "
                    r"pages and the libraries' charged to this cgroup \(memory.stat clean mapped "
                    r"file pages - smaps Locked", p.stderr), p.stderr[-1200:])
    check("usage " not in p.stderr, "an unlabelled usage figure")
    led = {e["category"]: e["value_bytes"] for e in doc["ledger"]["entries"]}
    above = [ln for ln in p.stderr.splitlines() if "is above the 60.00 MiB limit:" in ln]
    check(len(above) == 1 and "charged to another cgroup" in above[0] and
          f"own charge, {iec(led['CgroupCurrent'])} at the end" in above[0],
          f"{above} with CgroupCurrent {led.get('CgroupCurrent')}")
    evict(model)
    p = c.run("run", "-m", model, "-p", PROMPT, "-n", "4", "-t", "1", "--memory-limit",
              str(limit), check_rc=None)
    check("warning: admission: will thrash:" in p.stderr and "not bound: at least" not in
          p.stderr, p.stderr[:600])
    check(not leftovers(parent), f"cgroups left behind: {leftovers(parent)}")


def case_limit_signal(c):
    parent = memory_cgroup_v1()
    model = c.model("tiny")
    for sig in (signal.SIGTERM, signal.SIGINT):
        proc = subprocess.Popen([c.rf, "run", "-m", model, "-n", "2", "--memory-limit", "2Gi",
                                 "--hold"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        mine = os.path.join(parent, f"rf-run-{proc.pid}")
        deadline = time.monotonic() + 120
        held = False
        while time.monotonic() < deadline and proc.poll() is None and not held:
            try:
                with open(os.path.join(mine, "cgroup.procs")) as f:
                    held = bool(f.read().split())
            except OSError:
                pass
            if not held:
                time.sleep(0.05)  # polled with a deadline
        check(held, f"the run never joined {mine}")
        # wait for --hold's line: the model is loaded
        line = ""
        while time.monotonic() < deadline and "holding pid" not in line:
            line = proc.stderr.readline()
            check(line or proc.poll() is None, "the run ended before holding")
        proc.send_signal(sig)
        proc.wait(timeout=60)
        proc.stdin.close()
        proc.stdout.close()
        proc.stderr.close()
        check(proc.returncode == -sig, f"{sig!r}: exit {proc.returncode}")
        check(not os.path.exists(mine), f"{mine} left behind after {sig!r}")
    # The reader of stdout and stderr goes away while the run holds the model, as `| head`
    # does: what the command writes afterwards (its cgroup's line) meets a closed pipe.
    proc = subprocess.Popen([c.rf, "run", "-m", model, "-n", "2", "--memory-limit", "2Gi",
                             "--hold"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    mine = os.path.join(parent, f"rf-run-{proc.pid}")
    deadline = time.monotonic() + 120
    line = ""
    while time.monotonic() < deadline and "holding pid" not in line:
        line = proc.stdout.readline()
        check(line or proc.poll() is None, "the run ended before holding")
    proc.stdout.close()
    proc.stdin.close()
    proc.wait(timeout=60)
    check(proc.returncode in (0, -signal.SIGPIPE), f"closed pipe: exit {proc.returncode}")
    check(not os.path.exists(mine), f"{mine} left behind after its reader closed the pipe")


def case_limit_cold_default(c):
    if asan_build(c.rf):
        raise Skip("an ASan build: its shadow memory is charged to the cgroup the test sizes")
    parent = memory_cgroup_v1()
    model = c.model()
    js = os.path.join(c.tmp, "cold-default.json")
    for mode in ("warn", "off"):
        evict(model)
        p = c.run("run", "-m", model, "-p", PROMPT, "-n", "2", "-t", "2", "--memory-limit",
                  "300Mi", "--admission", mode, "--residency-report-json", js)
        with open(js) as f:
            doc = json.load(f)
        adm = doc["admission"]
        cg = [g for g in adm["cgroups"] if g["binding"]][0]
        check(adm["outcome"] == "admitted_with_warning" and adm["cause"] == "thrash" and
              not adm["refused"], f"{mode}: {adm['outcome']} {adm['cause']}: {adm['reason'][:300]}")
        check("kill" not in adm["reason"] and "would kill" not in p.stderr, p.stderr[:800])
        inputs = {i["name"]: i["bytes"] for i in adm["inputs"]}
        # nothing locked: the level's clean mapped file pages, the model's and the libraries'
        # charged here (issue 36), so bounded by mapped_file, not by the model mapping's Rss
        mapped = cg["mapped_file"]["bytes"]
        check(inputs["locked"] == 0 and mapped is not None and
              0 < cg["mapping_reclaimable_bytes"] <= mapped,
              f"mapping_reclaimable_bytes {cg['mapping_reclaimable_bytes']} of {mapped} mapped "
              f"file bytes ({inputs.get('mapping_rss')} the model's resident), "
              f"{inputs.get('locked')} locked")
        check(doc["output"]["n_generated_tokens"] == 2, f"{doc['output']['n_generated_tokens']}")
        check("admission: admitted_with_warning" in p.stderr and
              "admission: rejected" not in p.stderr, p.stderr[-1500:])
        check(re.search(r"\n    reclaimable: [\d.]+ \w+ clean unmapped page cache \(memory.stat\) "
                        r"\+ [\d.]+ \w+ the model mapping's own unlocked pages", p.stderr),
              p.stderr[-1500:])
        above = [ln for ln in p.stderr.splitlines() if "is above the 300.00 MiB limit:" in ln]
        check(all("model file's pages charged to another cgroup" not in ln for ln in above),
              f"a cold file blamed for the RSS: {above}")
        errors = validate_report.validate(c.schema, js)
        check(not errors, f"the report does not match the schema: {errors[:3]}")
    check(not leftovers(parent), f"cgroups left behind: {leftovers(parent)}")


def case_limit_no_root(c):
    memory_cgroup_v1()
    model = c.model("tiny")
    os.chmod(c.tmp, 0o755)
    p = c.run("run", "-m", model, "-n", "2", "--memory-limit", "1Gi", check_rc=1,
              preexec_fn=lambda: (os.setgid(65534), os.setuid(65534)))
    lines = p.stderr.strip().splitlines()
    check(len(lines) == 1 and "--memory-limit: cannot create the cgroup" in lines[0] and
          "needs root" in lines[0], f"stderr: {p.stderr}")


def case_limit_killed_report(c):
    if asan_build(c.rf):
        raise Skip("an ASan build: its shadow memory is charged to the cgroup the test sizes")
    parent = memory_cgroup_v1()
    model = c.model("small", "q8_0")
    evict(model)
    js = os.path.join(c.tmp, "killed.json")
    p = c.run("run", "-m", model, "-p", PROMPT, "-n", "4", "-t", "1", "--admission", "off",
              "--residency-policy", "streaming", "--memory-limit", "6MiB",
              "--residency-report-json", js, check_rc=1)
    check("OOM killer killed the run" in p.stderr, p.stderr[-1500:])
    check("or --residency-policy streaming" not in p.stderr and "it streams already" in p.stderr,
          f"the kill line suggests the policy in use: {p.stderr[-800:]}")
    check(os.path.exists(js), f"no report was written: {p.stderr[-800:]}")
    with open(js) as f:
        doc = json.load(f)
    check(any("supervised it" in w and "OOM killer" in w for w in doc["warnings"]),
          f"{doc['warnings']}")
    check("OOM killer" in doc["ledger"]["reason"], doc["ledger"]["reason"])
    errors = validate_report.validate(c.schema, js)
    check(not errors, f"the report does not match the schema: {errors[:3]}")
    check(not leftovers(parent), f"cgroups left behind: {leftovers(parent)}")


def case_limit_cached_small(c):
    if asan_build(c.rf):
        raise Skip("an ASan build: its shadow memory is charged to the cgroup the test sizes")
    parent = memory_cgroup_v1()
    model = c.model("small", "q8_0")
    with open(model, "rb") as f:  # cached by this (the test's) cgroup
        while f.read(1 << 20):
            pass
    js = os.path.join(c.tmp, "cached.json")
    p = c.run("run", "-m", model, "-p", PROMPT, "-n", "4", "-t", "1", "--memory-limit",
              "12MiB", "--residency-report-json", js, check_rc=None)
    check(p.returncode == 0 and "refused" not in p.stderr and
          "would kill" not in p.stderr, f"exit {p.returncode}: {p.stderr[-1500:]}")
    with open(js) as f:
        doc = json.load(f)
    adm = doc["admission"]
    check(adm["outcome"] == "admitted_with_warning" and adm["cause"] == "not_bound",
          f"{adm['outcome']} {adm['cause']}: {adm['reason'][:400]}")
    check(doc["output"]["n_generated_tokens"] == 4, f"{doc['output']['n_generated_tokens']}")
    check(not leftovers(parent), f"cgroups left behind: {leftovers(parent)}")


CASES = {"limit_streaming_cold": case_limit_streaming_cold, "limit_signal": case_limit_signal,
         "limit_killed_report": case_limit_killed_report,
         "limit_cached_small": case_limit_cached_small,
         "limit_warm_not_bound": case_limit_warm_not_bound,
         "limit_cold_default": case_limit_cold_default, "limit_no_root": case_limit_no_root}

if __name__ == "__main__":
    run_main(CASES, Ctx, "ramforge-limit-", tmp_dir=os.getcwd())
