#!/usr/bin/env python3
"""ramforge exec end to end, the whole memory of the program (issue 34, docs/EXEC.md "The
context and the operations"): admission before the load when the program's context is not
known (its smallest counted: a lower bound), admission of the context the program really
creates (in llama_init_from_model, before its KV cache exists), and an operation's admission
that speaks while the program decodes. Each runs in a real child memory cgroup (removed also
on failure). The programs and helpers are test_exec.py's.
Usage: test_exec_memory.py --ramforge PATH --simple PATH --schema PATH CASE
"""
import json
import os
import re

from test_exec import LLAMA_SERVER, PROMPT, Ctx, Hold, free_port, metrics, one, rf_lines, run
import validate_report  # noqa: E402 (test_exec's path)
from e2e_util import Skip, check, evict, memory_child_cgroup, run_main, wait_for  # noqa: E402

MIB = 1 << 20


def simple_argv(c, model, n_predict):
    if not c.simple:
        raise Skip("llama-simple-ref was not built")
    return [c.simple, "-m", model, "-n", str(n_predict), PROMPT]


def refused_report(c, rep):
    errors = validate_report.validate(c.schema, rep)
    check(not errors, f"the report does not match the schema: {errors[:3]}")
    with open(rep) as f:
        return json.load(f)


def case_admission_unknown_ctx(c):
    """examples/simple chooses its context itself: exec cannot know it before the load. The
    smallest context is counted (a lower bound) and the known parts alone exceed a 16 MB
    limit (the 20 MiB model evicted): refused before the load with one line, never loaded
    silently and killed (the old engine: Unknown, no line, the kernel's SIGKILL)."""
    model = c.model("small")
    evict(model)
    rep = c.path("refused.json")
    with memory_child_cgroup("ramforge-exec-ctx", 16 * 1000 * 1000) as enter:
        p = run(c.exec_argv("--residency-report-json", rep) + simple_argv(c, model, 4),
                preexec_fn=enter)
    lines = rf_lines(p.stderr)
    check(p.returncode == 1 and len(lines) == 1 and "admission refused loading" in lines[0],
          f"exit {p.returncode} (1: the program's own failure), ramforge lines {lines}")
    adm = refused_report(c, rep)["admission"]
    check(adm["refused"] and "lower bound" in adm["reason"], f"admission {adm}")


def case_context_refused(c):
    """The load fits a 256 MiB limit, the context the program then asks for does not
    (-n 1048576: a context of a million tokens, 2 GiB of KV cache): llama_init_from_model is
    refused before the KV cache exists (the program's own failure path, one line, the
    report says rejected), never the kernel's kill (the old engine: SIGKILL, no line)."""
    model = c.model("small")
    rep = c.path("ctx.json")
    with memory_child_cgroup("ramforge-exec-ctx", 256 * MIB) as enter:
        p = run(c.exec_argv("--residency-report-json", rep) + simple_argv(c, model, 1048576),
                preexec_fn=enter)
    lines = rf_lines(p.stderr)
    check(p.returncode == 1 and len(lines) == 1 and
          re.search(r"admission refused creating a context of 10485\d\d tokens", lines[0]) and
          "hard limit" in lines[0], f"exit {p.returncode}, ramforge lines {lines}")
    adm = refused_report(c, rep)["admission"]
    check(adm["refused"] and adm["outcome"] == "rejected", f"admission {adm}")


def case_server_ctx_before_load(c):
    """llama-server's own -c (here through LLAMA_ARG_CTX_SIZE, as a container sets it) is
    what exec's admission counts before the load: a context of a million tokens (2 GiB of KV
    cache) under 256 MiB is refused before llama.cpp maps the model, one line (the old
    command passed nothing: the model loaded and its context was killed by the kernel)."""
    if not LLAMA_SERVER or not os.access(LLAMA_SERVER, os.X_OK):
        raise Skip(f"llama-server from the pin is not built (RF_LLAMA_SERVER={LLAMA_SERVER!r})")
    model = c.model("small")
    env = dict(os.environ, LLAMA_ARG_CTX_SIZE="1048576")
    with memory_child_cgroup("ramforge-exec-srv", 256 * MIB) as enter:
        p = run(c.exec_argv() + [LLAMA_SERVER, "-m", model, "--host", "127.0.0.1", "--port",
                                 str(free_port()), "--no-webui"], preexec_fn=enter, env=env)
    lines = rf_lines(p.stderr)
    check(p.returncode != 0 and len(lines) == 1 and "admission refused loading" in lines[0] and
          "lower bound" not in lines[0], f"exit {p.returncode}, ramforge lines {lines}")


def unreclaimable(cgroup):
    """The cgroup's usage less its inactive file cache (what admission counts as room)."""
    with open(os.path.join(cgroup, "memory.usage_in_bytes")) as f:
        used = int(f.read())
    with open(os.path.join(cgroup, "memory.stat")) as f:
        stat = dict(ln.split() for ln in f)
    return used - int(stat["total_inactive_file"])


def case_operation_rejection_said(c):
    """An operation's admission that rejects while the program decodes (the limit lowered
    under the running program to its usage but its inactive file cache and 256 KiB, less than
    an operation's projected growth: a batch's 256 KV cells alone are 512 KiB) is said: one warning on stderr with what is over and by how much, however many
    operations follow, the report's warning and the metrics (rejections counted, the bytes
    over); the decodes go on and answer as before (the old engine: recorded, silent)."""
    model = c.model("small")
    rep, prom = c.path("op.json"), c.path("op.prom")
    ops = "ramforge_exec_operations_total"
    with memory_child_cgroup("ramforge-exec-op", 512 * MIB) as enter:
        h = Hold(c, model, c.exec_argv("--idle-seconds", "1", "--residency-report-json", rep,
                                        "--metrics-file", prom), "op", preexec=enter)
        try:
            first = h.cmd("gen 4")
            wait_for(lambda: os.path.exists(prom) and one(metrics(prom), ops) >= 2, 30,
                     "the first operation's idle boundary")
            with open(os.path.join(enter.cgroup, "memory.limit_in_bytes"), "w") as f:
                f.write(str(unreclaimable(enter.cgroup) + MIB // 4))
            answers = []
            for n in range(3, 8):  # until two operations were decided (a submission that
                answers.append(h.cmd("gen 2"))  # finds a boundary running skips admission)
                wait_for(lambda: one(metrics(prom), ops) >= n, 30, f"operation {n}'s end")
                if one(metrics(prom), "ramforge_exec_operation_rejections_total") >= 2:
                    break
        finally:
            h.close()
        with open(h.err.name) as f:
            lines = rf_lines(f.read())
    said = [ln for ln in lines if "admission of an operation while the program decodes" in ln]
    print("\n".join(lines))
    check(len(said) == 1 and "rejected" in said[0] and " by " in said[0] and
          "the decode goes on" in said[0], f"ramforge lines {lines}")
    check(first.startswith("tokens ") and all(a.startswith("tokens ") for a in answers),
          f"answers {first!r} {answers!r}")
    ms = metrics(prom)
    check(one(ms, "ramforge_exec_operation_rejections_total") >= 2 and
          one(ms, "ramforge_exec_operation_over_bytes") > 0,
          f"the metrics {[(k, v) for k, v in ms.items() if k.startswith('ramforge_exec_op')]}")
    with open(rep) as f:
        doc = json.load(f)
    check(any("cannot stop a decode" in w for w in doc["warnings"]), f"warnings {doc['warnings']}")


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith("case_")}

if __name__ == "__main__":
    run_main(CASES, Ctx, "ramforge-exec-", schema_required=True)
