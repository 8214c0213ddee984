#!/usr/bin/env python3
"""ramforge exec --residency-policy streaming: the read-ahead window in a program's own contexts.

A tinyllama-shaped Q8_0 model (generated in the case's folder, as test_streaming.py's cases do)
runs under a child memory cgroup of 0.75x its file, evicted first, under
`ramforge exec --residency-policy streaming`:

  exec_streaming_llama_server
                    llama-server from the pin, two /completion requests an idle boundary
                    apart (--idle-seconds 1): each is an operation whose start installs the
                    window in llama-server's context (made once, at its start) and whose end
                    removes it; the report after each says the decode computed from the ring
                    (read_ahead.units_used > 0, nothing fell back to the mapping), and the
                    tokens are bare llama-server's without a limit
  exec_streaming_two_contexts
                    exec_two_contexts (tests/preload): two contexts of one model, each with an
                    eval callback of its own, decode at once on two threads from their first
                    submission (one starts the operation, the other waits for its pins and
                    window): the window serves both one decode at a time, the tokens are those
                    of the bare program without a limit and its callbacks saw as many nodes as
                    without ramforge; the operation's admission (the plan's fixed part) counts
                    both contexts' KV caches in the RssAnon it reads at its start and both
                    contexts' compute buffers

Exit 0 pass, 1 fail, 77 skip (no root or no v1 memory cgroup, an ASan build, llama-server or
the test program not built).
"""
import http.client
import json
import os
import subprocess
import sys
import time

from e2e_util import (Failure, Skip, asan_build, check, evict, memory_child_cgroup, run_main,
                      wait_for)
from test_streaming import PROMPT, Ctx, check_streaming_omp_env, validate_report

N_PREDICT = 8
LLAMA_SERVER = os.environ.get("RF_LLAMA_SERVER", "")
TWO_CONTEXTS = os.environ.get("RF_EXEC_TWO_CONTEXTS", "")


def skip_unless(c, program, what):
    if asan_build(c.rf):
        raise Skip("an AddressSanitizer build: its runtime must come first in a process, so it "
                   "cannot be preloaded into an uninstrumented program")
    if not program or not os.access(program, os.X_OK):
        raise Skip(f"{what} is not built ({program!r})")


def free_port():
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
    from serve_idle import free_port as free
    return free()


def completion(port):
    """llama-server's greedy tokens for PROMPT (no prompt cache)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    conn.request("POST", "/completion", body=json.dumps(
        {"prompt": PROMPT, "n_predict": N_PREDICT, "temperature": 0, "return_tokens": True,
         "cache_prompt": False}))
    r = conn.getresponse()
    doc = json.loads(r.read())
    conn.close()
    check(r.status == 200, f"/completion: {r.status} {doc}")
    return doc["tokens"]


def server(argv, port, err, **kw):
    """Starts argv (llama-server, maybe under exec) and waits for its /health."""
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, **kw)

    def up():
        if proc.poll() is not None:
            raise Failure(f"{argv[0]} exited {proc.returncode}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/health")
            return conn.getresponse().status == 200
        except OSError:
            return False
    wait_for(up, 300, "llama-server to answer /health")
    return proc


def stop(proc):
    proc.terminate()
    check(proc.wait(timeout=120) == 0, f"exit {proc.returncode} after SIGTERM")


def bare_answer(args, err_path, ask):
    """Bare llama-server (the pin's) with args on a free port: ask(port), then stopped;
    its stderr in err_path."""
    port = free_port()
    with open(err_path, "w") as err:
        bare = server([LLAMA_SERVER, *args, "--port", str(port)], port, err)
        try:
            return ask(port)
        finally:
            stop(bare)


def report_of(path, operations):
    """The session report once it holds that many operations (rewritten at each boundary)."""
    def read():
        try:
            with open(path) as f:
                doc = json.load(f)
        except (OSError, ValueError):
            return None
        return doc if doc["operation"]["operations"] >= operations else None
    return wait_for(read, 120, f"the report of {operations} operations")


def program_pid(pid, exe):
    """The process at or below pid whose executable is named exe."""
    for p in [pid] + [int(d) for d in os.listdir("/proc") if d.isdigit()]:
        try:
            if os.path.basename(os.readlink(f"/proc/{p}/exe")) != exe:
                continue
            q = p
            while q > 1 and q != pid:  # is pid an ancestor (or itself)?
                with open(f"/proc/{q}/stat") as f:
                    q = int(f.read().rsplit(")", 1)[1].split()[1])
            if q == pid:
                return p
        except (OSError, ValueError):
            continue
    raise Failure(f"no {exe} process at or below {pid}")


def window_used(rep, name):
    ra = rep["streaming"]["read_ahead"]
    check(ra is not None and ra["units"] > 0 and ra["units_used"] > 0 and
          ra["units_fallback"] == 0 and ra["first_error"] == 0 and ra["read_bytes"] > 0 and
          ra["tensors_not_mapped"] == 0,
          f"{name}: the decode did not compute from the window: {ra}")
    check(rep["streaming"]["plan"]["read_ahead_slots"] == 4, f"{name}: the plan has no ring")


def case_exec_streaming_llama_server(c):
    skip_unless(c, LLAMA_SERVER, "llama-server from the pin")
    model = c.model("q8_0")
    args = ["-m", model, "--host", "127.0.0.1", "-c", "512", "-t", "2", "-np", "1"]
    want = bare_answer(args, os.path.join(c.tmp, "bare.err"), completion)
    rep = os.path.join(c.tmp, "exec.json")
    limit = os.path.getsize(model) * 3 // 4
    with memory_child_cgroup("ramforge-e2e-exec-stream", limit) as enter, \
            open(os.path.join(c.tmp, "exec.err"), "w") as err:
        evict(model)
        port = free_port()
        proc = server([c.rf, "exec", "--residency-policy", "streaming", "--idle-seconds", "1",
                       "--residency-report-json", rep, "--", LLAMA_SERVER, *args, "--port",
                       str(port)], port, err, preexec_fn=enter)
        try:
            first = report_of(rep, 2)["operation"]["operations"]  # the load's, llama's warmup
            got = completion(port)
            # exec gave PROGRAM libgomp's wait: PASSIVE after a short spin
            check_streaming_omp_env(program_pid(proc.pid, os.path.basename(LLAMA_SERVER)),
                                    "llama-server under exec")
            after_first = report_of(rep, first + 1)  # its idle boundary
            second = completion(port)
        finally:
            stop(proc)
    check(got == want and second == want,
          f"tokens under exec's window {got}, {second} against bare llama-server's {want}")
    window_used(after_first, "the first request's operation")
    window_used(report_of(rep, first + 2), "the second request's operation")
    errors = validate_report.validate(c.schema, rep)
    check(not errors, f"the report does not match the schema: {errors[:3]}")


def case_exec_streaming_two_contexts(c):
    skip_unless(c, TWO_CONTEXTS, "exec_two_contexts")
    model = c.model("q8_0")
    argv = [TWO_CONTEXTS, model, PROMPT, str(N_PREDICT)]
    bare = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    check(bare.returncode == 0, f"bare: exit {bare.returncode}: {bare.stderr[-800:]}")
    rep = os.path.join(c.tmp, "two.json")
    with memory_child_cgroup("ramforge-e2e-exec-two", os.path.getsize(model) * 3 // 4) as enter:
        evict(model)
        t0 = time.monotonic()
        p = subprocess.run([c.rf, "exec", "--residency-policy", "streaming",
                            "--residency-report-json", rep, "--", *argv], capture_output=True,
                           text=True, timeout=600, preexec_fn=enter)
    check(p.returncode == 0, f"under exec: exit {p.returncode} after "
          f"{time.monotonic() - t0:.1f} s: {p.stderr[-800:]}")
    check(p.stdout == bare.stdout and p.stdout.count("tokens ") == 2,
          f"two contexts under the window:\n{p.stdout}against bare:\n{bare.stdout}")
    with open(rep) as f:
        doc = json.load(f)
    window_used(doc, "two contexts")
    # the plan's fixed part holds both contexts: their KV caches, made before the operation, in
    # the RssAnon read at its start, and the compute buffers of both as its growth (the old
    # engine read the load's sample, 8 MB without the 11 MB of KV caches, and counted one
    # context's buffers: 16 MB more pinned, the program OOM-killed 2 runs in 3)
    inputs = {r["name"]: r["bytes"] for r in doc["admission"]["inputs"]}
    ledger = {e["category"]: e["value_bytes"] for e in doc["ledger"]["entries"]}
    check(inputs["anonymous"] > ledger["KvCache"] and
          inputs["graph_scratch"] == ledger["GraphScratch"],
          f"the operation's admission counted RssAnon {inputs['anonymous']} and graph scratch "
          f"{inputs['graph_scratch']}, against KV caches of {ledger['KvCache']} and compute "
          f"buffers of {ledger['GraphScratch']}: the streaming plan's fixed part "
          f"{doc['streaming']['plan']['fixed_bytes']} leaves them out")


CASES = {
    "exec_streaming_llama_server": case_exec_streaming_llama_server,
    "exec_streaming_two_contexts": case_exec_streaming_two_contexts,
}


if __name__ == "__main__":
    run_main(CASES, Ctx, "ramforge-e2e-exec-stream-", tmp_dir=os.getcwd(), schema_required=True)
