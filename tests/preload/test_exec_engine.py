#!/usr/bin/env python3
"""ramforge exec end to end, the engine's edges (docs/EXEC.md): what it says of llama-server's
memory-fit probe, the idle boundary's -v line in the specification's words, the lease of a
program that samples on the backend, the after_session boundary after the last context's
buffers are gone, a context the engine cannot record, and a libllama of another build.
The programs and helpers are test_exec.py's (exec_hold, ExecServer, metrics).
Usage: test_exec_engine.py --ramforge PATH --simple PATH --schema PATH CASE
"""
import json
import os
import re

from test_exec import (PROMPT, Ctx, ExecServer, Hold, free_port, http, metrics, one,
                       rf_lines, run)
from e2e_util import Skip, check, run_main, wait_for  # noqa: E402 (test_exec's path)

IDLE_ALIVE = "ramforge_exec_idle_alive_boundaries_total"


def idle_alive_count(prom):
    """The idle boundaries with contexts alive the metrics file at prom counts (0: none yet)."""
    return os.path.exists(prom) and metrics(prom).get(IDLE_ALIVE, [({}, 0)])[0][1]


def size_text(n):
    """rf_size_format's words: under 1 KiB "N B", else two decimals of the largest IEC unit."""
    units = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"]
    if n < 1024:
        return f"{n} B"
    i = 0
    while i + 1 < len(units) and n >= 1024 ** (i + 2):
        i += 1
    return f"{n / 1024 ** (i + 1):.2f} {units[i]}"


def case_fit_probe_verbose(c):
    """llama-server's default --fit loads the model without allocating (no_alloc) before its
    load: with -v the probe is named as what it is, once, never "not managed"; then the
    model is managed."""
    model = c.model("small")
    with ExecServer(c, model, "-v", "--metrics-listen", str(free_port())) as s:
        # /health answers before llama-server handles SIGTERM; a request answered, it does
        http(f"http://127.0.0.1:{s.port}/completion", {"prompt": PROMPT, "n_predict": 1})
        rc = s.stop()
        err = s.stderr()
    lines = rf_lines(err)
    check(not [ln for ln in lines if "not managed" in ln or "no model was managed" in ln],
          f"a load said unmanaged: {lines}")
    probe = [ln for ln in lines if "memory-fit probe" in ln]
    check(len(probe) == 1 and model in probe[0], f"the probe: {probe}")
    check(len([ln for ln in lines if ln.startswith(f"ramforge: exec: managing {model} ")]) == 1,
          f"managing: {lines}")
    check(rc == 0, f"exec exited {rc}: {err[-1500:]}")


def case_idle_verbose_words(c):
    """-v's idle line in the specification's words: the release requested, what the kernel
    accepted (madvise), the mapping's Rss measured; each figure the report's."""
    model = c.model("small")
    rep, prom = c.path("idle.json"), c.path("idle.prom")
    h = Hold(c, model, c.exec_argv("--residency-policy", "memory-bound", "--memory-target", "5M",
                                   "--idle-seconds", "1", "--residency-report-json", rep,
                                   "--metrics-file", prom, "-v"), "exec")
    try:
        h.cmd("gen 4")
        wait_for(lambda: idle_alive_count(prom) >= 1, 30, "the idle boundary")
    finally:
        h.close()
    with open(c.path("exec.err")) as f:
        idle = [ln for ln in rf_lines(f.read()) if "idle boundary" in ln]
    with open(rep) as f:
        apps = [a for a in json.load(f)["application"]["boundaries"]
                if a["boundary"] == "idle_alive"]
    check(len(idle) == 1 and apps, f"idle lines {idle}, boundaries {apps}")
    requested = sum(a["requested_bytes"] for a in apps)
    accepted = sum(a["accepted_bytes"] for a in apps)
    check(accepted > 0 and " released" not in idle[0] and
          f"release requested {size_text(requested)}, the kernel accepted "
          f"{size_text(accepted)} (madvise), the mapping's Rss measured: " in idle[0],
          f"the idle line {idle[0]!r}: requested {requested}, accepted {accepted}")
    print(idle[0])


def case_backend_sampling(c):
    """A program that reads its tokens with llama_get_sampled_token_ith alone (the backend
    sampler): each read observes the decode's completion, so the idle boundary comes; tokens
    identical to the same program bare."""
    model = c.model("small")
    bare = Hold(c, model, [], "bare", "backend")
    expect = bare.cmd("sampled 6")
    bare.close()
    check(re.fullmatch(r"tokens( \d+){6}", expect), f"bare backend sampling: {expect!r}")
    prom = c.path("b.prom")
    h = Hold(c, model, c.exec_argv("--residency-policy", "memory-bound", "--memory-target", "5M",
                                   "--idle-seconds", "1", "--metrics-file", prom), "exec",
             "backend")
    try:
        got = h.cmd("sampled 6")
        wait_for(lambda: idle_alive_count(prom) >= 1, 30,
                 "the idle boundary after backend-sampled decodes (the lease ended)")
    finally:
        h.close()
    check(got == expect, f"tokens differ: bare {expect}, exec {got}")


def status_kib(pid, field):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(rf"^{field}:\s+(\d+) kB", f.read(), re.M).group(1)) * 1024


def case_after_session_freed(c):
    """The after_session boundary runs after the last context's real llama_free: its sample
    no longer holds the context's KV cache (64 MiB here: the process's VmRSS there is below
    what the test read with the context alive by at least half of it), and the report says
    no context alive there, as is then true."""
    model, n_ctx = c.model("small"), 32768  # the small model's KV: 2 KiB a cell
    kv = 2048 * n_ctx
    rep, prom = c.path("s.json"), c.path("s.prom")
    h = Hold(c, model, c.exec_argv("--residency-report-json", rep, "--metrics-file", prom),
             "exec", n_ctx=n_ctx)
    try:
        h.cmd("gen 2")
        alive = status_kib(h.p.pid, "VmRSS")
    finally:
        h.close()
    with open(rep) as f:
        doc = json.load(f)
    ends = [s for s in doc["residency"]["samples"] if s["label"] == "after_session"]
    check(ends and ends[-1]["process_rss_bytes"] is not None, f"after_session samples {ends}")
    check(doc["native"]["observed_at"] == "after_session" and
          doc["native"]["active_contexts"] == 0, f"native {doc['native']}")
    freed = alive - ends[-1]["process_rss_bytes"]
    print(f"VmRSS with the context {alive} B, at after_session "
          f"{ends[-1]['process_rss_bytes']} B (KV cache {kv} B)")
    check(freed >= kv // 2, f"the after_session sample still holds the context's buffers: "
          f"{freed} B freed of a {kv} B KV cache")
    check(one(metrics(prom), "ramforge_exec_contexts_alive") == 0, "no context at the end")


def case_context_oom(c):
    """A context the engine cannot record (its table's reallocarray fails: the test engine,
    exec_fail_alloc.c) would decode without a lease: its creation fails instead, one line
    says why, and the program takes its own out-of-memory path."""
    engine = os.environ.get("RF_EXEC_OOM_ENGINE", "")
    if not engine or not c.hold:
        raise Skip("exec_oom_engine or exec_hold was not built")
    shim = os.path.join(os.path.dirname(c.rf), "libramforge-preload.so")
    env = dict(os.environ, LD_PRELOAD=shim, RAMFORGE_EXEC_ENGINE=engine,
               RAMFORGE_EXEC_POLICY="observe", RF_TEST_FAIL_REALLOCARRAY="1")
    p = run([c.hold, c.model("small"), PROMPT, "64"], env=env, input="gen 2\nquit\n")
    lines = rf_lines(p.stderr)
    check(p.returncode == 1 and "exec_hold: cannot create a context" in p.stderr and
          len(lines) == 1 and "out of memory: cannot record a context" in lines[0],
          f"exit {p.returncode}, stdout {p.stdout!r}, lines {lines}")
    env.pop("RF_TEST_FAIL_REALLOCARRAY")
    p = run([c.hold, c.model("small"), PROMPT, "64"], env=env, input="gen 2\nquit\n")
    check(p.returncode == 0 and p.stdout.startswith("tokens "),
          f"without the failure: exit {p.returncode} {rf_lines(p.stderr)}")


def other_libllama(c, prog):
    """A copy of the libllama prog links (ldd), its GNU build ID changed (one byte flipped), in
    a folder of the case with its ggml beside it: (folder, built ID, other ID). As
    tests/install's other_llama makes it: no second llama.cpp build needed."""
    so = re.search(r"libllama\S* => (\S+)", run(["ldd", prog]).stdout)
    check(so, f"{prog} does not link libllama")
    so = os.path.realpath(so.group(1))
    note = run(["readelf", "-n", so]).stdout
    bid, soname = (re.search(r"Build ID: ([0-9a-f]+)", note),
                   re.search(r"\(SONAME\).*\[(.+)\]", run(["readelf", "-d", so]).stdout))
    check(bid and soname, f"{so}: no GNU build ID or SONAME")
    with open(so, "rb") as f:
        data = f.read()
    built = bytes.fromhex(bid.group(1))
    check(data.count(built) == 1, f"the build ID of {so} is not in the file once")
    other = built[:-1] + bytes([built[-1] ^ 0xFF])
    folder = c.path("other-llama")
    os.makedirs(folder)
    with open(os.path.join(folder, soname.group(1)), "wb") as f:
        f.write(data.replace(built, other))
    for name in os.listdir(os.path.dirname(so)):  # its ggml (RUNPATH $ORIGIN): the pin's
        if name.startswith("libggml") and ".so" in name:
            os.symlink(os.path.join(os.path.dirname(so), name), os.path.join(folder, name))
    return folder, built.hex(), other.hex()


def case_mismatched_llama(c):
    """A program whose loader finds another libllama build (a copy of the pin's with its
    build ID changed, first on LD_LIBRARY_PATH) is refused, naming both builds; through a
    script (not checked before it runs) the preload's own check at its load: one line, the
    model loaded unmanaged, no report."""
    prog = os.environ.get("RF_EXEC_OTHER", "")
    if not prog:
        raise Skip("exec_other_llama was not built")
    folder, built, other = other_libllama(c, prog)
    env = dict(os.environ, LD_LIBRARY_PATH=folder)
    check(run([prog], env=env).stdout == "ran\n", "exec_other_llama runs bare")
    check(f"{folder}/" in run(["ldd", prog], env=env).stdout, "the copy is not the one loaded")
    p = run(c.exec_argv() + [prog], env=env)
    lines = rf_lines(p.stderr)
    check(p.returncode == 1 and not p.stdout and len(lines) == 1, f"exit {p.returncode} {lines}")
    ids = re.findall(r"build ID ([0-9a-f]+)", lines[0])
    check(f"{folder}/libllama" in lines[0] and ids == [other, built],
          f"names both builds ({other}, {built}): {lines[0]}")
    script = c.path("other.sh")
    with open(script, "w") as f:
        f.write(f'#!/bin/sh\nexec {prog} "$@"\n')
    os.chmod(script, 0o755)
    p = run(c.exec_argv("--residency-report-json", c.path("r.json")) +
            [script, c.model("small")], env=env)
    lines = rf_lines(p.stderr)
    check(p.returncode == 0 and p.stdout == "loaded\n" and len(lines) == 1 and
          other in lines[0] and built in lines[0] and "not managed" in lines[0] and
          not os.path.exists(c.path("r.json")), f"the script: exit {p.returncode}, {lines}")


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith("case_")}

if __name__ == "__main__":
    run_main(CASES, Ctx, "ramforge-exec-", schema_required=True)
