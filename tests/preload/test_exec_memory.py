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
import subprocess
import sys

from test_exec import (LLAMA_SERVER, PROMPT, Ctx, ExecServer, Failure, Hold, free_port, http,
                       metrics, one, rf_lines, run)
import validate_report  # noqa: E402 (test_exec's path)
from e2e_util import (Skip, check, evict, memory_cgroup_v1, memory_child_cgroup,  # noqa: E402
                      run_main, wait_for)

HERE = os.path.dirname(os.path.abspath(__file__))

MIB = 1 << 20


def simple_argv(c, model, n_predict):
    if not c.simple:
        raise Skip("llama-simple-ref was not built")
    return [c.simple, "-m", model, "-n", str(n_predict), PROMPT]


def refused_report(c, rep):
    """The report at rep, checked against the schema."""
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
    """An operation's admission that rejects while the program decodes is said: exec's
    memory-bound policy under an 8 MiB target released the weights after the first
    operation, then the limit is lowered under the running program to its usage but its
    inactive file cache and 256 KiB, where the weights the next operation reads cannot come
    back: one warning on stderr with what is over, however many operations follow, the
    report's warning and the metrics (rejections counted, the bytes over); the decodes go on
    and answer as before (the old engine: recorded, silent). A context that decoded before
    adds nothing (its KV cache and buffers are in the RSS: case server_ops_in_context), so
    the rejection is the weights'."""
    model = c.model("small")
    rep, prom = c.path("op.json"), c.path("op.prom")
    ops = "ramforge_exec_operations_total"
    with memory_child_cgroup("ramforge-exec-op", 512 * MIB) as enter:
        h = Hold(c, model, c.exec_argv("--idle-seconds", "1", "--residency-report-json", rep,
                                        "--metrics-file", prom, "--residency-policy",
                                        "memory-bound", "--memory-target", "8Mi"),
                 "op", preexec=enter)
        try:
            first = h.cmd("gen 4")
            wait_for(lambda: os.path.exists(prom) and one(metrics(prom), ops) >= 2, 30,
                     "the first operation's idle boundary")
            with open(os.path.join(enter.cgroup, "memory.limit_in_bytes"), "w") as f:
                f.write(str(unreclaimable(enter.cgroup) + MIB // 4))
            answers = []
            for n in range(3, 6):
                answers.append(h.cmd("gen 8"))
                wait_for(lambda: one(metrics(prom), ops) >= n, 30, f"operation {n}'s end")
        finally:
            h.close()
        with open(h.err.name) as f:
            lines = rf_lines(f.read())
    said = [ln for ln in lines if "admission of an operation while the program decodes" in ln]
    print("\n".join(lines))
    check(len(said) == 1 and "rejected" in said[0] and "limit" in said[0] and
          "the decode goes on" in said[0], f"ramforge lines {lines}")
    check(first.startswith("tokens ") and all(a.startswith("tokens ") for a in answers),
          f"answers {first!r} {answers!r}")
    ms = metrics(prom)
    check(one(ms, "ramforge_exec_operation_rejections_total") >= 2,
          f"ramforge lines {lines}, the metrics {[(k, v) for k, v in ms.items() if k.startswith('ramforge_exec_op')]}")
    with open(rep) as f:
        doc = json.load(f)
    check(any("cannot stop a decode" in w for w in doc["warnings"]), f"warnings {doc['warnings']}")


def distinct_prompt(i, words=40):
    """A prompt no other shares a prefix with (about 2.5 tokens a word)."""
    return " ".join(f"q{i}w{k}" for k in range(words))


def completion(port, prompt):
    body = http(f"http://127.0.0.1:{port}/completion",
                {"prompt": prompt, "n_predict": 4, "temperature": 0, "seed": 1})
    check(body is not None, "a completion did not answer")
    return json.loads(body)["content"]


def case_server_prompt_cache_ledger(c):
    """llama-server's host prompt cache in the ledger: the sequence states it saves through
    llama_state_seq_get_data_ext are PromptCache (estimated, under the server's rule with its
    --cache-ram 1 MiB, which evicts here), in the report (schema) and the metrics with the
    bound beside it (the old engine: no such category, the cache unexplained in "other")."""
    model = c.model("small")
    rep, prom = c.path("pc.json"), c.path("pc.prom")
    with ExecServer(c, model, "--memory-limit", "1Gi", "--residency-report-json", rep,
                    "--metrics-file", prom, args=("-np", "1", "--cache-ram", "1")) as srv:
        for i in range(10):
            completion(srv.port, distinct_prompt(i))
        check(srv.stop() == 0, "exec's exit")
    doc = refused_report(c, rep)
    pc = [e for e in doc["ledger"]["entries"] if e["category"] == "PromptCache"]
    check(len(pc) == 1 and pc[0]["provenance"] == "estimated" and
          0 < pc[0]["value_bytes"] <= MIB and "--cache-ram 1 MiB" in pc[0]["source"] and
          "RssAnon grew by" in pc[0]["note"], f"PromptCache {pc}")
    ms = metrics(prom)
    check(one(ms, "ramforge_exec_prompt_cache_limit_bytes") == MIB and
          one(ms, "ramforge_exec_prompt_cache_saves_total") >= 9 and
          one(ms, "ramforge_exec_prompt_cache_evictions_total") >= 1, "the cache's series")
    ledger = [v for labels, v in ms["ramforge_ledger_bytes"]
              if labels.get("category") == "PromptCache"]
    check(ledger == [pc[0]["value_bytes"]], f"the ledger's series {ledger}")


def case_server_cache_sized(c):
    """Under a 256 MiB limit llama-server without --cache-ram gets the room after the model,
    its -c 512 context and a 32 MiB margin (an eighth), said in one line, and the bound is the one the
    engine models (its series); the user's own --cache-ram 4096 is kept, with one warning;
    --keep-cache-ram leaves llama-server's default, silently (the old command: its 8192 MiB,
    not a word)."""
    model = c.model("small")
    cases = (((), (), r"--cache-ram set to (\d+) MiB: the room under the limit of 256\.00 MiB"),
             ((), ("--cache-ram", "4096"), r"own --cache-ram 4096 MiB does not fit.*is (\d+) MiB"),
             (("--keep-cache-ram",), (), None))
    for own, args, said in cases:
        prom = c.path("sized.prom")
        opts = ["--memory-limit", "256Mi", "--metrics-file", prom, *own]
        with ExecServer(c, model, *opts, args=("-np", "1", *args)) as srv:
            for i in range(2):
                completion(srv.port, distinct_prompt(i))
            check(srv.stop() == 0, "exec's exit")
            lines = rf_lines(srv.stderr())
        found = [m for m in (re.search(said, ln) for ln in lines) if m] if said else []
        check(len(found) == len(lines) == (1 if said else 0), f"{opts} {args}: lines {lines}")
        fit = int(found[0].group(1)) if said else None
        check(fit is None or 96 < fit < 224, f"the room: {fit} MiB")
        limit = one(metrics(prom), "ramforge_exec_prompt_cache_limit_bytes")
        want = 4096 if args else fit if said else 8192
        check(limit == want * MIB, f"{opts} {args}: the bound {limit}, {want} MiB expected")


def case_server_kv_types(c):
    """llama-server's -ctk/-ctv q8_0 cache counted as q8_0, not f16: a context of 131072 tokens
    (the `small` model: 256 MiB of KV cache in f16, 136 MiB in q8_0) under a 256 MiB limit
    loads, creates its context and answers; in f16 the same context is refused (one line).
    The old engine counted f16 in both: the q8_0 server was refused too."""
    model = c.model("small")
    ctx = ("-c", "131072", "-np", "1", "-fa", "on")
    with ExecServer(c, model, "--memory-limit", "256Mi",
                    args=(*ctx, "-ctk", "q8_0", "-ctv", "q8_0")) as srv:
        completion(srv.port, distinct_prompt(0))
        check(srv.stop() == 0, "exec's exit")
        lines = rf_lines(srv.stderr())
    check(all("refused" not in ln for ln in lines), f"q8_0: ramforge lines {lines}")
    f16 = subprocess.Popen(c.exec_argv("--memory-limit", "256Mi") +
                           [LLAMA_SERVER, "-m", model, "--host", "127.0.0.1", "--port",
                            str(free_port()), *ctx], stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True)
    try:
        _, err = f16.communicate(timeout=120)  # refused: it ends at once
    except subprocess.TimeoutExpired:
        f16.terminate()
        f16.communicate()
        raise Failure("f16: llama-server was not refused (it started)")
    lines = rf_lines(err)
    check(f16.returncode != 0 and [ln for ln in lines if "admission refused" in ln],
          f"f16: exit {f16.returncode}, ramforge lines {lines}")


def case_server_ops_in_context(c):
    """bench/prompt_cache.py's setting, a few prompts: llama-server (-c 1024) under a 64 MiB
    limit it fits. Its operations' admission counts the context's KV cache and (after its
    first operation) its compute buffers as inside the measured RSS, not again as growth: no
    warning, no rejection (the old engine projected 88 MiB, warned and counted a rejection
    for nearly every request)."""
    model = c.model("small")
    prom = c.path("ops.prom")
    with ExecServer(c, model, "--memory-limit", "64Mi", "--idle-seconds", "1",
                    "--metrics-file", prom, args=("-c", "1024", "-np", "1", "-t", "2")) as srv:
        ops = "ramforge_exec_operations_total"
        for i in range(4):
            wait_for(lambda: os.path.exists(prom), 30, "the metrics file")
            before = one(metrics(prom), ops)
            completion(srv.port, distinct_prompt(i, 150))
            wait_for(lambda: one(metrics(prom), ops) > before, 30, f"request {i}'s idle boundary")
        check(srv.stop() == 0, "exec's exit")
        lines = rf_lines(srv.stderr())
    said = [ln for ln in lines if "admission of an operation" in ln]
    rejections = one(metrics(prom), "ramforge_exec_operation_rejections_total")
    check(not said and rejections == 0, f"rejections {rejections}, ramforge lines {lines}")


def case_server_context_figures(c):
    """llama-server's context (-c 1024, -ctk/-ctv q8_0) in exec's figures: the admission of
    its first decode (llama-server's warmup, operation 2) counts the context's own compute
    buffers (llama's memory breakdown) as its graph scratch, and every operation's ledger has
    the KV cache and compute buffers of the contexts it ran in: 1024 cells in q8_0, also in
    the report written at exit, after the context was freed. The old engine estimated the
    warmup's scratch from its batch of a few tokens and left the ledger's KvCache and
    GraphScratch unknown."""
    model = c.model("small")
    rep, prom = c.path("ctx.json"), c.path("ctx.prom")
    q8_kv = 1024 * 1088  # the small model: 1088 bytes a cell in q8_0 (2048 in f16)

    def entry(doc, name):
        return next(e for e in doc["ledger"]["entries"] if e["category"] == name)
    with ExecServer(c, model, "--memory-limit", "1Gi", "--idle-seconds", "1",
                    "--residency-report-json", rep, "--metrics-file", prom,
                    args=("-c", "1024", "-np", "1", "-fa", "on", "-ctk", "q8_0", "-ctv",
                          "q8_0")) as srv:
        ops = "ramforge_exec_operations_total"
        wait_for(lambda: os.path.exists(prom) and
                 any(v >= 2 for _, v in metrics(prom).get(ops, ())), 30,
                 "the warmup's operation to end")
        with open(rep) as f:
            doc = json.load(f)
        scratch = next(r for r in doc["admission"]["inputs"] if r["name"] == "graph_scratch")
        compute = entry(doc, "GraphScratch")
        check(compute["provenance"] == "native_logical" and compute["value_bytes"] and
              scratch["provenance"] == "native_logical" and
              scratch["bytes"] == compute["value_bytes"],
              f"the warmup's graph scratch {scratch}, the ledger's {compute}")
        check(entry(doc, "KvCache")["value_bytes"] == q8_kv, f"KvCache {entry(doc, 'KvCache')}")
        completion(srv.port, distinct_prompt(0))
        check(srv.stop() == 0, "exec's exit")
    doc = refused_report(c, rep)
    check(entry(doc, "KvCache")["value_bytes"] == q8_kv and
          entry(doc, "GraphScratch")["value_bytes"] == compute["value_bytes"],
          f"at exit: KvCache {entry(doc, 'KvCache')}")


def memory_cgroup_of(pid):
    """The directory of pid's cgroup v1 memory controller."""
    with open(f"/proc/{pid}/cgroup") as f:
        for hid, ctrl, path in (ln.rstrip("\n").split(":", 2) for ln in f):
            if "memory" in ctrl.split(","):
                return "/sys/fs/cgroup/memory" + path.rstrip("/")
    raise Skip("no cgroup v1 memory controller for the program")


def case_server_cache_stop(c):
    """llama-server's prompt cache stops growing while an operation is over the hard limit:
    exec's memory-bound policy (8 MiB target) releases the weights at each idle boundary,
    then the limit is lowered under the running server to its usage but its inactive file
    cache and 4 MiB, where the weights the next operation reads cannot come back (its
    admission is over the hard limit). The saves after that operation are given a size over
    --cache-ram, which llama-server skips without allocating ("exceeds cache size limit"):
    one warning, the stops counted, no save more, and every answer equal to bare
    llama-server's (the old engine: the cache kept growing)."""
    if not LLAMA_SERVER or not os.access(LLAMA_SERVER, os.X_OK):
        raise Skip(f"llama-server from the pin is not built (RF_LLAMA_SERVER={LLAMA_SERVER!r})")
    memory_cgroup_v1()
    model = c.model("small")
    args = ("-c", "1024", "-np", "1", "--cache-ram", "64")
    prompts = [distinct_prompt(i, 150) for i in range(6)]
    bare_port = free_port()
    bare = subprocess.Popen([LLAMA_SERVER, "-m", model, "--host", "127.0.0.1", "--port",
                             str(bare_port), "-t", "1", *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: bare.poll() is not None or
                 http(f"http://127.0.0.1:{bare_port}/health") is not None, 120,
                 "bare llama-server to answer /health")
        expected = [completion(bare_port, p) for p in prompts]
    finally:
        bare.terminate()
        bare.wait(timeout=60)
    prom = c.path("stop.prom")
    ops, saves = "ramforge_exec_operations_total", "ramforge_exec_prompt_cache_saves_total"
    with ExecServer(c, model, "--memory-limit", "256Mi", "--residency-policy", "memory-bound",
                    "--memory-target", "8Mi", "--idle-seconds", "1", "--metrics-file", prom,
                    args=args) as srv:
        answers = []
        for i, p in enumerate(prompts):
            if i == 3:
                cg = memory_cgroup_of(srv.pid)
                saved = one(metrics(prom), saves)
                with open(os.path.join(cg, "memory.limit_in_bytes"), "w") as f:
                    f.write(str(unreclaimable(cg) + 4 * MIB))
            wait_for(lambda: os.path.exists(prom), 30, "the metrics file")
            before = one(metrics(prom), ops)
            answers.append(completion(srv.port, p))
            wait_for(lambda: one(metrics(prom), ops) > before, 60, f"request {i}'s boundary")
        check(srv.stop() == 0, "exec's exit")
        server_log = srv.stderr()
    ms = metrics(prom)
    lines = rf_lines(server_log)
    # (anywhere in a line: llama-server's log thread may have written a line's timestamp
    # just before it, from another thread)
    said = [ln for ln in server_log.splitlines()
            if "ramforge: exec: warning:" in ln and "prompt cache stops growing" in ln]
    print("\n".join(lines))
    check(len(said) == 1, f"ramforge lines {lines}")
    check(one(ms, "ramforge_exec_prompt_cache_stops_total") >= 2 and
          one(ms, saves) <= saved + 1 and "exceeds cache size limit" in server_log,
          f"stops {ms.get('ramforge_exec_prompt_cache_stops_total')}, saves {saved} then "
          f"{one(ms, saves)}")
    check(answers == expected, f"answers {answers} != bare {expected}")


def case_prompt_cache_kill(c):
    """bench/prompt_cache.py, small: the `small` model in a 64 MiB child cgroup, 28 distinct
    prompts of about 900 tokens (1.6 MB of KV state each). Bare llama-server (--cache-ram
    8192) is killed by the OOM killer or held at the limit (the row's reason); under exec
    (--cache-ram sized to the room) it answers every request, never killed, the same
    answers as bare wherever bare answered."""
    if not LLAMA_SERVER or not os.access(LLAMA_SERVER, os.X_OK):
        raise Skip(f"llama-server from the pin is not built (RF_LLAMA_SERVER={LLAMA_SERVER!r})")
    try:
        memory_cgroup_v1()
    except Skip:  # the bench takes cgroup v2 too
        if not os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
            raise
    out = c.path("bench.json")
    bench = os.path.join(HERE, "..", "..", "bench", "prompt_cache.py")
    p = subprocess.run([sys.executable, bench, "--ramforge", c.rf, "--llama-server",
                        LLAMA_SERVER, "-m", c.model("small"), "--limit", "64Mi", "--prompts",
                        "28", "--words", "150", "-c", "1024", "--modes", "bare,exec",
                        "--json", out],
                       capture_output=True, text=True, timeout=560)
    print(p.stdout)
    check(p.returncode == 0, f"the bench: exit {p.returncode}: {p.stderr[-1500:]}")
    with open(out) as f:
        bare, under = json.load(f)["rows"]
    held = bare["peak_bytes"] is not None and bare["peak_bytes"] >= 64 * MIB - MIB
    check(bare["killed"] or held, f"bare was neither killed nor held at the limit: {bare}")
    check(under["answered"] == under["requests"] and not under["killed"] and
          under["oom_kill"] == 0, f"under exec: {under['killed']}, {under['answered']} answered")
    check(under["equal_to_bare"], "the answers differ from bare's")
    check(any("--cache-ram set to" in ln for ln in under["ramforge_lines"]),
          f"exec did not size the cache: {under['ramforge_lines']}")


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith("case_")}

if __name__ == "__main__":
    run_main(CASES, Ctx, "ramforge-exec-", schema_required=True)
