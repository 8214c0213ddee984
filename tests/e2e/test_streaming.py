#!/usr/bin/env python3
"""End-to-end cases of --residency-policy streaming on tinyllama-shaped models.

The planner's floors (a 16 MiB margin, a window of at least one layer) make
a small model pointless here: the cases use the tinyllama preset (about 1.1
GiB in Q8_0, 0.6 GiB in Q4_0), generated for each case in its temporary
folder under the working directory (ctest's: build/tests/e2e, a disk, not
tmpfs): a private, evictable model no other case shares, removed with the
folder however the case ends (pass, fail, skip, an exception or SIGTERM).

  streaming_limit   tokens under streaming are those of `off`, without a limit
                    (nothing pinned) and in a child memory cgroup whose limit
                    the weights exceed (the output tensors and layers pinned:
                    smaps Locked equals the pinned bytes, undone at the
                    after_session boundary; by default the read-ahead window of
                    4 slots computes every streamed tensor, the pinned layers
                    spread between them, token_embd MADV_RANDOM; with
                    --stream-read-ahead 0 the first layers are pinned and no
                    window runs); the report matches the schema
  streaming_repack  Q4_0 with repacking, limited just under its decode working
                    set: no weight read from an anonymous repacked copy is
                    pinned, tokens unchanged
  streaming_mlock_refused
                    as uid 65534 (no CAP_IPC_LOCK) with RLIMIT_MEMLOCK 64 KiB:
                    the refusal is reported with its reason, the run falls back
                    and its tokens are those of `off`
  streaming_read_ahead
                    issue 25's read-ahead window (--stream-read-ahead 2) under
                    0.75x the file: after the prompt the decode computes the
                    streamed tensors from the window's ring (read with
                    O_DIRECT), the tokens are those
                    of `off`, and after the after_session boundary (the pins
                    undone) the verify session runs through the window again
                    with the same tokens; the report says what the window did
                    (and run executed itself again with OMP_WAIT_POLICY=PASSIVE,
                    not with --stream-spin-wait); 3 slots (two reader threads)
                    and the dispatch observer beside the window give the same
                    tokens
  streaming_read_ahead_no_direct
                    the same on a filesystem that refuses O_DIRECT: the model is
                    copied into an uncompressed squashfs image mounted (loop,
                    read-only) under the case's folder, always unmounted; the
                    window reads through the page cache and says why (tmpfs
                    accepts O_DIRECT since Linux 6.6 and is memory: nothing
                    streams there)
  streaming_serve_window
                    serve under the same limit, model evicted: two requests each
                    decode from the host's read-ahead window (the prompt cache
                    set aside while it is installed), tokens those of `off`

Exit 0 pass, 1 fail, 77 skip (no root or no v1 memory cgroup).
"""
import http.client
import json
import re
import os
import resource
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "schema"))
import validate_report  # noqa: E402
from e2e_util import (Skip, asan_build, check, evict, expect_error_lines,  # noqa: E402
                      memory_child_cgroup, run_main, run_ramforge)

PROMPT = "Hello my name is"
N_PREDICT = "4"


def streaming_omp_env():
    """(OMP_WAIT_POLICY, GOMP_SPINCOUNT) that run and serve (when they execute themselves
    again) and exec (for PROGRAM) put in force under streaming, given this environment: a
    policy set leaves both to the user, a GOMP_SPINCOUNT set stands, an empty value is unset."""
    policy = os.environ.get("OMP_WAIT_POLICY")
    return policy or "PASSIVE", os.environ.get("GOMP_SPINCOUNT") or (None if policy else "300")


def check_streaming_omp_env(pid, who):
    """The environment of process pid (/proc/PID/environ) holds streaming_omp_env()."""
    with open(f"/proc/{pid}/environ", "rb") as f:
        env = dict(kv.decode().split("=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
    got = (env.get("OMP_WAIT_POLICY"), env.get("GOMP_SPINCOUNT"))
    check(got == streaming_omp_env(), f"{who}'s OMP_WAIT_POLICY, GOMP_SPINCOUNT: {got}")


class Ctx:
    def __init__(self, args, tmp):
        self.rf = args.ramforge
        self.schema = args.schema
        self.tmp = tmp  # the case's folder, removed at its end: the models too

    def run(self, *argv, check_rc=0, **kw):
        return run_ramforge(self.rf, argv, check_rc, timeout=900, **kw)

    def model(self, wtype):
        """The case's tinyllama model of wtype, generated on first use (about 20 s for Q8_0)."""
        path = os.path.join(self.tmp, f"tinyllama-{wtype}.gguf")
        if not os.path.exists(path):
            self.run("mkmodel", "--preset", "tinyllama", "--type", wtype, "-q", "-o", path)
        return path

    def report(self, name, model, *argv, **kw):
        """A run's report; under a limit (a preexec_fn joins the cgroup) from an evicted model:
        pages cached before the run are charged elsewhere, the limit would not bind them."""
        if "preexec_fn" in kw:
            evict(model)
        path = os.path.join(self.tmp, name + ".json")
        p = self.run("run", "-m", model, "-p", PROMPT, "-n", N_PREDICT, "-t", "2",
                     "--residency-report-json", path, *argv, **kw)
        errors = validate_report.validate(self.schema, path)
        check(not errors, f"{name}: the report does not match the schema: {errors[:3]}")
        with open(path) as f:
            return json.load(f), p


def iec(text):
    """Bytes of "312.48 MiB" (IEC units as ramforge prints them)."""
    value, unit = text.split()
    units = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}
    return float(value) * units[unit]


def skip_asan(c):
    if asan_build(c.rf):
        raise Skip("an ASan build: its shadow memory and quarantine grow the anonymous memory "
                   "past the cgroup limit this test sizes from a run without one")


def tokens(rep):
    return rep["output"]["token_ids"]


def case_streaming_limit(c):
    skip_asan(c)
    model = c.model("q8_0")
    off, _ = c.report("off", model, "--residency-policy", "off")
    free, _ = c.report("free", model, "--residency-policy", "streaming")
    check(tokens(free) == tokens(off), "streaming without a limit changed the tokens")
    check(free["streaming"]["active"] and free["streaming"]["plan"] is None,
          f"no limit, yet a plan: {free['streaming']['plan_reason']}")
    check(free["streaming"]["io"]["major_faults"] is not None, "major faults not measured")
    check(free["streaming"]["prefetch"] is None,
          f"the prefetch is off by default, yet: {free['streaming']['prefetch']}")
    pf2, _ = c.report("pf2", model, "--residency-policy", "streaming",
                      "--stream-prefetch-layers", "2")
    check(tokens(pf2) == tokens(off), "streaming with prefetch changed the tokens")
    pf = pf2["streaming"]["prefetch"]
    check(pf is not None and pf["distance_layers"] == 2 and pf["layers_posted"] > 0 and
          pf["failed_calls"] == 0, f"the layer-ahead prefetch did not run: {pf}")
    obs, _ = c.report("obs", model, "--residency-policy", "streaming", "--observe-dispatch",
                      "--stream-prefetch-layers", "1")
    check(tokens(obs) == tokens(off), "prefetch with the dispatch observer changed the tokens")
    check(obs["streaming"]["prefetch"]["layers_posted"] > 0,
          "the prefetch callback saw no layer under the observer")
    check((obs["residency"]["dispatch"]["events"] or 0) > 0,
          "the dispatch observer recorded nothing under the prefetch callback")
    size = os.path.getsize(model)
    with memory_child_cgroup("ramforge-e2e-stream", size * 3 // 4) as enter:
        lim, p = c.report("limit", model, "--residency-policy", "streaming",
                          "--admission", "enforce", "--residency-report",
                          "--safety-reserve", "1Mi", preexec_fn=enter)
    st = lim["streaming"]
    # an option the policy does not use is warned of once, though run executed itself again
    n_warn = p.stderr.count("--safety-reserve has no effect")
    check(n_warn == 1, f"the --safety-reserve warning {n_warn} times: {p.stderr[:600]}")
    # the human line's W and streamed-per-token figures are the report's
    m = re.search(r"streaming: W (\S+ \S+) read .* ~(\S+ \S+) streamed per token", p.stderr)
    check(m is not None, f"no streaming line in stderr: {p.stderr[-400:]}")
    check(abs(iec(m.group(1)) - st["plan"]["working_set_bytes"]) <=
          st["plan"]["working_set_bytes"] / 200 and
          abs(iec(m.group(2)) - st["plan"]["streamed_bytes_per_token"]) <=
          st["plan"]["streamed_bytes_per_token"] / 200,
          f"stderr {m.group(0)!r} against W {st['plan']['working_set_bytes']}, streamed "
          f"{st['plan']['streamed_bytes_per_token']}")
    check(tokens(lim) == tokens(off), "streaming under a limit changed the tokens")
    check(st["plan"] is not None, f"no plan under a limit: {st['plan_reason']}")
    plan, pin = st["plan"], st["pin"]
    check(plan["fits"] and plan["pinned_bytes"] > 0, f"nothing pinned: {plan['reason']}")
    check(plan["pinned_bytes"] + plan["fixed_bytes"] + plan["window_bytes"] +
          plan["margin_bytes"] <= plan["limit_bytes"], f"over the limit: {plan}")
    check("output.weight" in plan["pinned_tensors"] and
          "token_embd.weight" not in plan["pinned_tensors"],
          f"pinned {plan['pinned_tensors'][:5]}")
    check(pin["pinned"] and pin["locked_bytes"] == plan["pinned_bytes"],
          f"smaps Locked {pin['locked_bytes']} vs pinned {plan['pinned_bytes']}")
    check(pin["unpinned_at"] == "after_session", f"unpinned at {pin['unpinned_at']}")
    # issue 25: the decode's reads and CPU time, measured; by default the read-ahead window
    # (4 slots) reads the streamed tensors, the pinned layers spread between them
    dec = st["decode"]
    check(dec["tokens"] == int(N_PREDICT) - 1 and dec["read_bytes"] is not None and
          dec["read_bandwidth_bytes_per_s"] is not None and dec["user_ns"] is not None,
          f"decode {dec}")
    read_ahead_checks(lim, off, "default", direct=True, slots=4)
    pinned_layers = {int(n.split(".")[1]) for n in plan["pinned_tensors"] if n.startswith("blk.")}
    check(plan["layers_spread"] and pinned_layers != set(range(len(pinned_layers))),
          f"the pinned layers are not spread: {sorted(pinned_layers)}")
    check(pin["rows_random"], "token_embd (read by rows) was not MADV_RANDOM")
    # --stream-read-ahead 0: the page-cache window, the first layers pinned, no overlap measured
    with memory_child_cgroup("ramforge-e2e-stream", size * 3 // 4) as enter:
        plain, _ = c.report("plain", model, "--residency-policy", "streaming",
                            "--stream-read-ahead", "0", preexec_fn=enter)
    pst = plain["streaming"]
    check(tokens(plain) == tokens(off), "streaming without the read-ahead changed the tokens")
    check(pst["read_ahead"] is None and not pst["plan"]["layers_spread"] and
          pst["decode"]["overlapped_fraction"] is None and pst["decode"]["overlapped_reason"],
          f"--stream-read-ahead 0: {pst['read_ahead']}, decode {pst['decode']}")
    plain_layers = {int(n.split(".")[1]) for n in pst["plan"]["pinned_tensors"]
                    if n.startswith("blk.")}
    k = pst["plan"]["layers_pinned"]
    check(set(range(k)) <= plain_layers <= set(range(k + 1)),
          f"without the read-ahead the first layers are pinned: {sorted(plain_layers)}")
    # run executed itself again with OMP_WAIT_POLICY=PASSIVE and GOMP_SPINCOUNT=300 (unless
    # the environment set the policy; a GOMP_SPINCOUNT set stands): the file exceeds its
    # cgroup's limit; without a limit it did not
    got = (dec["omp_wait_policy"], dec["gomp_spincount"])
    check(got == streaming_omp_env(), f"OMP_WAIT_POLICY, GOMP_SPINCOUNT {got}")
    check(free["streaming"]["decode"]["omp_wait_policy"] == os.environ.get("OMP_WAIT_POLICY"),
          f"no limit: OMP_WAIT_POLICY {free['streaming']['decode']['omp_wait_policy']}")
    # MADV_HUGEPAGE on the streamed ranges: accepted wherever the kernel has THP
    check(pin["thp_enabled"] in ("always", "madvise", "never", None),
          f"THP mode {pin['thp_enabled']}")
    check(pin["hugepage"] == (pin["thp_enabled"] is not None),
          f"hugepage {pin['hugepage']} with THP mode {pin['thp_enabled']}")
    check(pin["sequential"], "the streamed ranges were not MADV_SEQUENTIAL")
    check(lim["admission"]["outcome"] == "admitted_with_warning" and
          not lim["admission"]["refused"], f"admission {lim['admission']['outcome']}")
    check("Admitted under --residency-policy streaming" in lim["admission"]["reason"],
          lim["admission"]["reason"][-300:])


def case_streaming_repack(c):
    skip_asan(c)
    model = c.model("q4_0")
    off, _ = c.report("off", model, "--residency-policy", "off")
    # Nearly every weight lives in an anonymous repacked copy (output.weight too); the
    # graph reads from the file only token_embd (by rows) and the norms. A limit just
    # under the decode working set (file-backed weights + anonymous memory, from a run
    # without a limit) makes admission see a thrash; with a 1 MiB window the norms'
    # pages fit the pin budget beside the 16 MiB margin and minimum window.
    free, _ = c.report("free", model, "--residency-policy", "streaming")
    check(tokens(free) == tokens(off), "streaming without a limit changed the tokens")
    limit = free["admission"]["working_set_bytes"] - (2 << 20)
    with memory_child_cgroup("ramforge-e2e-stream", limit) as enter:
        rep, _ = c.report("limit", model, "--residency-policy", "streaming",
                          "--stream-window", "1MiB", preexec_fn=enter)
    check(tokens(rep) == tokens(off), "streaming changed the tokens of a repacked model")
    inv = json.loads(c.run("inspect", "-J", model).stdout)
    access = {t["name"]: t["access"] for t in inv["tensors"]}
    anon = {n for n, a in access.items() if a == "anonymous"}
    if not anon:
        raise Skip("llama.cpp repacked no weight on this CPU (no anonymous copy to avoid)")
    plan = rep["streaming"]["plan"]
    if plan is None or not plan["pinned_tensors"]:
        raise Skip(f"nothing was pinned: {rep['streaming']['plan_reason']} "
                   f"{plan and plan['reason']}")
    pinned = set(plan["pinned_tensors"])
    check(not pinned & anon, f"anonymous copies pinned: {sorted(pinned & anon)[:5]}")
    check(all(access[n] == "file_backed" for n in pinned), "a pin outside the file-backed weights")
    check("token_embd.weight" not in pinned, "token_embd (read by rows) pinned")
    check(rep["streaming"]["pin"]["locked_bytes"] == plan["pinned_bytes"],
          f"smaps Locked {rep['streaming']['pin']['locked_bytes']} vs {plan['pinned_bytes']}")


def case_streaming_mlock_refused(c):
    """As nobody (no CAP_IPC_LOCK): RLIMIT_MEMLOCK 0 refuses every pin (the run falls back
    to plain behaviour with a warning); 64 KiB, below the plan's pins, pins the first
    64 KiB of them and says so (issue 20, fault 13: nothing was pinned before). Tokens are
    those of policy off either way."""
    if os.geteuid() != 0:
        raise Skip("not root: cannot switch to uid 65534")
    model = c.model("q8_0")
    off, _ = c.report("off", model, "--residency-policy", "off")
    os.chmod(c.tmp, 0o777)
    size = os.path.getsize(model)
    reps = {}
    for limit in (0, 64 << 10):
        with memory_child_cgroup("ramforge-e2e-stream", size * 3 // 4) as enter:
            def as_nobody():
                enter()  # as root: cgroup.procs
                resource.setrlimit(resource.RLIMIT_MEMLOCK, (limit, limit))
                os.setgroups([])
                os.setgid(65534)
                os.setuid(65534)  # drops every capability, CAP_IPC_LOCK included

            reps[limit] = c.report(f"memlock-{limit}", model, "--residency-policy",
                                   "streaming", preexec_fn=as_nobody)
    rep, p = reps[0]
    pin = rep["streaming"]["pin"]
    check(pin["attempted"] and not pin["pinned"] and pin["fallback"] and not pin["partial"],
          f"pin {pin}")
    check(pin["error"] and "RLIMIT_MEMLOCK" in (pin["error_reason"] or ""), f"pin {pin}")
    check("streaming:" in p.stderr and "plain behaviour" in p.stderr,
          f"no warning on stderr: {p.stderr[-500:]}")
    check(tokens(rep) == tokens(off), "the fallback changed the tokens")
    rep, p = reps[64 << 10]
    pin = rep["streaming"]["pin"]
    check(pin["pinned"] and pin["partial"] and not pin["fallback"] and
          pin["memlock_limit_bytes"] == 64 << 10 and
          0 < pin["accepted_bytes"] <= 64 << 10 < pin["requested_bytes"], f"partial pin {pin}")
    check(pin["locked_bytes"] == pin["accepted_bytes"], f"smaps Locked vs accepted: {pin}")
    check("RLIMIT_MEMLOCK is below the plan's pins" in p.stderr,
          f"no partial-pin warning on stderr: {p.stderr[-500:]}")
    check(tokens(rep) == tokens(off), "the partial pins changed the tokens")


def read_ahead_checks(rep, off, name, direct, slots=2):
    """The window's report: it ran, every window tensor came from a slot, tokens unchanged."""
    st = rep["streaming"]
    ra, dec = st["read_ahead"], st["decode"]
    check(tokens(rep) == tokens(off), f"{name}: the read-ahead window changed the tokens")
    check(ra is not None and ra["slots"] == slots and ra["units"] > 0, f"{name}: window {ra}")
    check(ra["units_used"] > 0 and ra["units_fallback"] == 0 and ra["first_error"] == 0 and
          ra["units_skipped"] == 0 and ra["tensors_pointed"] == ra["units_used"] and
          ra["tensors_not_mapped"] == 0,
          f"{name}: the decode did not compute from the window: {ra}")
    check(ra["read_bytes"] > 0 and ra["units_read"] >= ra["units_used"], f"{name}: window {ra}")
    check(ra["direct"] == direct and (ra["direct_reason"] is None) == direct,
          f"{name}: direct {ra['direct']} ({ra['direct_reason']}), expected {direct}")
    check(st["plan"]["read_ahead_slots"] == slots and
          st["plan"]["window_bytes"] == st["plan"]["read_ahead_bytes"] == slots * ra["slot_bytes"],
          f"{name}: the ring is not the plan's window: {st['plan']}")
    check(dec["overlapped_fraction"] is not None and 0 <= dec["overlapped_fraction"] <= 1 and
          dec["overlapped_reason"] is None, f"{name}: decode {dec}")


def case_streaming_read_ahead(c):
    skip_asan(c)
    model = c.model("q8_0")
    off, _ = c.report("off", model, "--residency-policy", "off")
    expect_error_lines(c, ["run", "-m", model, "--residency-policy", "streaming",
                           "--stream-read-ahead", "2", "--stream-window", "64MiB"], 2,
                       "--stream-read-ahead with --stream-window")
    expect_error_lines(c, ["run", "-m", model, "--residency-policy", "streaming",
                           "--stream-read-ahead", "1"], 2, "0 (off) or 2..8")
    size = os.path.getsize(model)
    with memory_child_cgroup("ramforge-e2e-stream", size * 3 // 4) as enter:
        rep, _ = c.report("ra2", model, "--residency-policy", "streaming",
                          "--stream-read-ahead", "2", "--verify-session", preexec_fn=enter)
    read_ahead_checks(rep, off, "ra2", direct=True)
    spin, _ = c.report("spin", model, "--residency-policy", "streaming", "--stream-spin-wait")
    check(spin["streaming"]["decode"]["omp_wait_policy"] == os.environ.get("OMP_WAIT_POLICY"),
          f"--stream-spin-wait: OMP_WAIT_POLICY {spin['streaming']['decode']['omp_wait_policy']}")
    check(spin["streaming"]["decode"]["gomp_spincount"] == os.environ.get("GOMP_SPINCOUNT"),
          f"--stream-spin-wait: GOMP_SPINCOUNT {spin['streaming']['decode']['gomp_spincount']}")
    check(tokens(spin) == tokens(off), "--stream-spin-wait changed the tokens")
    # the after_session boundary ran between the two sessions, the window's pointers restored
    check(rep["streaming"]["pin"]["unpinned_at"] == "after_session",
          f"unpinned at {rep['streaming']['pin']['unpinned_at']}")
    vs = rep["output"]["verify_session"]
    check(vs["run"] and vs["tokens_identical"] and vs["token_ids"] == tokens(off),
          f"the verify session after the boundary changed the tokens: {vs}")
    # 3 slots: two reader threads
    with memory_child_cgroup("ramforge-e2e-stream", size * 3 // 4) as enter:
        ra3, _ = c.report("ra3", model, "--residency-policy", "streaming",
                          "--stream-read-ahead", "3", preexec_fn=enter)
    read_ahead_checks(ra3, off, "ra3", direct=True, slots=3)
    # the dispatch observer's callback under the window's: both see every node
    with memory_child_cgroup("ramforge-e2e-stream", size * 3 // 4) as enter:
        obs, _ = c.report("ra-obs", model, "--residency-policy", "streaming",
                          "--stream-read-ahead", "2", "--observe-dispatch", preexec_fn=enter)
    read_ahead_checks(obs, off, "ra-obs", direct=True)
    check((obs["residency"]["dispatch"]["events"] or 0) > 0,
          "the dispatch observer recorded nothing under the read-ahead window")
    ra = rep["streaming"]["read_ahead"]
    # the first decode (the prompt) learns the order from the mapping; every later one, in
    # both sessions (at least one a generated token), computes every window tensor from a slot
    check(ra["units_used"] % ra["units"] == 0 and
          ra["units_used"] >= ra["units"] * (2 * len(tokens(off)) - 1),
          f"both sessions should compute from the window: {ra}")


def case_streaming_serve_window(c):
    """serve --residency-policy streaming under a limit of 0.75x the file, model evicted: the
    host's read-ahead window feeds the request's decode as it feeds run's (issue 32), the
    tokens are those of `off` without a limit, and the prompt cache is not kept meanwhile."""
    skip_asan(c)
    model = c.model("q8_0")
    off, _ = c.report("off", model, "--residency-policy", "off")
    size = os.path.getsize(model)
    with memory_child_cgroup("ramforge-e2e-stream", size * 3 // 4) as enter:
        evict(model)
        proc = subprocess.Popen([c.rf, "serve", "-m", model, "--port", "0", "-t", "2",
                                 "--residency-policy", "streaming", "--prompt-cache"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                preexec_fn=enter)
        try:
            line = proc.stderr.readline()
            check("serving" in line, f"serve did not start: {line!r}")
            port = int(line.rsplit(":", 1)[1].strip().strip("/"))
            # libgomp's wait as run's: the file exceeds serve's cgroup's limit, serve executed
            # itself again
            check_streaming_omp_env(proc.pid, "serve")
            docs = []
            for _ in range(2):  # the second request finds no kept context built on a window
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
                conn.request("POST", "/completion", body=json.dumps(
                    {"prompt": PROMPT, "n_predict": int(N_PREDICT), "temperature": 0}))
                r = conn.getresponse()
                answer = json.loads(r.read())
                check(r.status == 200, f"/completion: {r.status} {answer}")
                conn.request("GET", "/residency")
                docs.append((answer, json.loads(conn.getresponse().read())["operation"]))
                conn.close()
        finally:
            proc.terminate()
            proc.wait(timeout=60)
    for answer, rep in docs:
        check(answer["tokens"] == tokens(off),
              f"serve under the window: {answer['tokens']} against off's {tokens(off)}")
        ra = rep["streaming"]["read_ahead"]
        check(ra is not None and ra["units"] > 0 and ra["units_used"] > 0 and
              ra["units_fallback"] == 0 and ra["first_error"] == 0 and ra["read_bytes"] > 0,
              f"the request's decode did not compute from the window: {ra}")
        check(rep["streaming"]["plan"]["read_ahead_slots"] == 4,
              f"serve's plan has no ring: {rep['streaming']['plan']}")


def case_streaming_read_ahead_no_direct(c):
    skip_asan(c)
    if os.geteuid() != 0:
        raise Skip("not root: cannot mount a squashfs image")
    if not shutil.which("mksquashfs"):
        raise Skip("no mksquashfs (Debian: squashfs-tools) to build a filesystem that refuses "
                   "O_DIRECT")
    src = os.path.join(c.tmp, "sq-src")
    os.mkdir(src)
    os.rename(c.model("q8_0"), os.path.join(src, "tinyllama-q8_0.gguf"))
    image, mnt = os.path.join(c.tmp, "model.sqfs"), os.path.join(c.tmp, "sq-mnt")
    subprocess.run(["mksquashfs", src, image, "-noI", "-noD", "-noF", "-noX", "-quiet",
                    "-no-progress"], check=True, timeout=600)
    os.mkdir(mnt)
    p = subprocess.run(["mount", "-o", "loop,ro", "-t", "squashfs", image, mnt],
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise Skip(f"cannot mount a squashfs image: {p.stderr.strip()}")
    try:
        model = os.path.join(mnt, "tinyllama-q8_0.gguf")
        try:
            os.close(os.open(model, os.O_RDONLY | os.O_DIRECT))
            raise Skip("this kernel's squashfs accepts O_DIRECT")
        except OSError:
            pass
        off, _ = c.report("off", model, "--residency-policy", "off")
        with memory_child_cgroup("ramforge-e2e-stream", os.path.getsize(model) * 3 // 4) as enter:
            rep, _ = c.report("ra2", model, "--residency-policy", "streaming",
                              "--stream-read-ahead", "2", preexec_fn=enter)
        read_ahead_checks(rep, off, "squashfs", direct=False)
        check("O_DIRECT" in rep["streaming"]["read_ahead"]["direct_reason"],
              f"reason {rep['streaming']['read_ahead']['direct_reason']}")
    finally:
        subprocess.run(["umount", mnt], check=False)


CASES = {
    "streaming_limit": case_streaming_limit,
    "streaming_repack": case_streaming_repack,
    "streaming_mlock_refused": case_streaming_mlock_refused,
    "streaming_read_ahead": case_streaming_read_ahead,
    "streaming_serve_window": case_streaming_serve_window,
    "streaming_read_ahead_no_direct": case_streaming_read_ahead_no_direct,
}


if __name__ == "__main__":
    run_main(CASES, Ctx, "ramforge-e2e-stream-", tmp_dir=os.getcwd(), schema_required=True)
