#!/usr/bin/env python3
"""The MoE curve of issue 33: decode speed of the generated Qwen3-30B-A3B-shaped model under
memory limits of 1/1.5, 1/2 and 1/4 of its file, uniform and skewed routing, stock llama.cpp
beside ramforge's expert policy, each point against its bound.

Rows per (routing, limit), rounds alternating, each run from the evicted file (fsync +
posix_fadvise DONTNEED) in a fresh child memory cgroup of that limit (removed at the end, also
on failure, SIGINT and SIGTERM):
  off    ramforge run --residency-policy off --memory-limit L (stock llama.cpp's mmap)
  bare   the pinned llama-server alone in a child cgroup of limit L, one /completion (greedy)
  run    ramforge run --residency-policy streaming --memory-limit L (the expert policy)
  exec   ramforge exec --residency-policy streaming --memory-limit L -- llama-server
Columns: decode tok/s (median), its range over the runs, ms/token; c, the expert cache's
experts a layer (the report's experts_per_layer, median); the cache's bytes read per token and hit
rate (the report's streaming.experts; "no expert cache" when absent); /proc read_bytes per
decoded token (run: the report's streaming.decode, from /proc/self/io between the first token
and the last; llama-server: /proc/PID/io around the request, its prompt included); the time
per token / the bound; / off's; exec / run's; tokens equal to off's (a warm unlimited
`run --residency-policy off`, every run of every row).

The bound per (routing, limit) = t_c + missed bytes / B per token: t_c a warm unlimited off
run's decode time per token (the least of R); B the disk's sequential O_DIRECT read rate (the
evicted file read in 4 MiB requests), the faster of two probes just before and just after the
limit's rows (a shared disk's rate moves by tens of percent over minutes); missed bytes = the dense bytes that
do not fit (admission's dense part + its projected anonymous memory - L) + the routed bytes an
LRU expert cache of admission's size at L misses per token, at the hit rate of the routing a
warm `observe` run recorded (reuse distances; uniform c/n without one). The figures used are
printed. "x own B" is the median over a row's runs of each run's time per token against the
bound at the B of its own moment: the faster of the probes just before and just after that
run (one probe follows every run). The goals' checks come last, on both. --json PATH writes
every run.

    bench/moe_curve.py [--cache-dir /var/tmp/ramforge-moe] [-r 3] [-n 16] [-t 2] \\
        [--rows off,bare,run,exec] [--llama-server build/llama-server] [--quick]

The models (`mkmodel -P qwen3moe-a3b`, uniform and --route-skew 1.2) are generated into the
cache directory once and reused. --quick: qwen3moe-small, uniform, one limit (4/3 of the
file: the small model's dense part and process do not fit below it), R=1, 8 tokens (a smoke
test; exit 77 without llama-server or in an AddressSanitizer build; at that limit exec's plan
may not apply, "no cache", and its row is then no measure of the policy). Needs root (memory
cgroups; exit 77 otherwise). Exit 1 when a run failed or tokens
differ; the goals are printed, not enforced. Quote figures from a quiet host only.
"""
import argparse
import json
import mmap
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "e2e"))
sys.path.insert(0, HERE)
from e2e_util import Skip, asan_build, evict, memory_child_cgroup, memory_cgroup_v1  # noqa: E402
from serve_idle import free_port, llama_server_port  # noqa: E402
from streaming_hosts import PROMPT, completion  # noqa: E402

ROWS = ("off", "bare", "run", "exec")  # the table's order
MIB = 1 << 20
DIRECT_CHUNK_BYTES = 4 * MIB  # one O_DIRECT request of the bandwidth probe
DIRECT_MAX_BYTES = 1 << 30  # the probe reads at most this much of the file


class RunFailed(Exception):
    pass


def sh(argv):
    """Runs argv, its stderr kept for the failure's message. Interrupted, it stops the child
    with SIGTERM and waits: `ramforge run --memory-limit` then removes its cgroup (SIGKILL, as
    subprocess.run sends, would leave the cgroup and the run inside it)."""
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        _, err = p.communicate()
    except BaseException:
        p.terminate()
        p.wait(timeout=60)
        raise
    if p.returncode != 0:
        tail = err.strip().splitlines()[-1:] or [""]
        raise RunFailed(f"{os.path.basename(argv[0])} {argv[1]} exited {p.returncode}: {tail[0]}")


def ensure_model(a, preset, skew):
    """The cached model of preset and routing skew, generated once (mkmodel renames at the end,
    so a file present is complete)."""
    name = f"{preset}.gguf" if skew == 0 else f"{preset}-skew{skew:g}.gguf"
    path = os.path.join(a.cache_dir, name)
    if not os.path.exists(path):
        os.makedirs(a.cache_dir, exist_ok=True)
        print(f"moe_curve: generating {path}", file=sys.stderr)
        argv = [a.ramforge, "mkmodel", "-P", preset, "-q", "-o", path]
        sh(argv + (["--route-skew", f"{skew:g}"] if skew else []))
    return path


def direct_read_rate(path):
    """Bytes/s of a sequential O_DIRECT read of the evicted file, 4 MiB requests, at most
    DIRECT_MAX_BYTES."""
    evict(path)
    buf = mmap.mmap(-1, DIRECT_CHUNK_BYTES)  # page-aligned, as O_DIRECT asks
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    try:
        done, t0 = 0, time.monotonic()
        while done < DIRECT_MAX_BYTES:
            got = os.preadv(fd, [buf], done)
            if got <= 0:
                break
            done += got
        return done / (time.monotonic() - t0)
    finally:
        os.close(fd)
        buf.close()


def run_report(a, model, policy, limit, tmp):
    """ramforge run's report (limit None: no limit, the file left as it is)."""
    path = os.path.join(tmp, "run.json")
    if os.path.exists(path):
        os.unlink(path)
    argv = [a.ramforge, "run", "-m", model, "-p", PROMPT, "-n", str(a.n), "-t", str(a.t), "-q",
            "--residency-policy", policy, "--residency-report-json", path]
    if limit is not None:
        evict(model)
        argv += ["--memory-limit", str(limit)]
    sh(argv)
    with open(path) as f:
        return json.load(f)


def run_row(a, model, policy, limit, tmp):
    """One run of run under a limit: tok/s, tokens, the report's figures."""
    rep = run_report(a, model, policy, limit, tmp)
    ids = rep["output"]["token_ids"]
    stream = rep.get("streaming") or {}
    dec = stream.get("decode") or {}
    return {"tps": (len(ids) - 1) * 1e9 / rep["timing"]["decode_ns"], "tokens": ids,
            "read_per_token": dec.get("read_bytes_per_token"),
            "experts": stream.get("experts")}


def descendants(pid):
    """pid and every process below it."""
    parent = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    parent[int(d)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += [c for c, pp in parent.items() if pp == p]
    return out


def server_pid(pid):
    """The llama-server process at or below pid (under exec --memory-limit, exec's child)."""
    for p in descendants(pid):
        try:
            if os.path.basename(os.readlink(f"/proc/{p}/exe")) == "llama-server":
                return p
        except OSError:
            continue
    raise RunFailed(f"no llama-server process below {pid}")


def proc_read_bytes(pid):
    with open(f"/proc/{pid}/io") as f:
        for line in f:
            if line.startswith("read_bytes:"):
                return int(line.split()[1])
    raise RunFailed(f"no read_bytes in /proc/{pid}/io")


def server_row(a, model, limit, under_exec, tmp):
    """One /completion of llama-server alone in a child cgroup of limit, or under `ramforge exec
    --residency-policy streaming --memory-limit limit`: tok/s (its timings), tokens, /proc
    read_bytes of the server around the request per decoded token, exec's report's experts."""
    evict(model)
    port = free_port()
    report = os.path.join(tmp, "exec.json")
    if os.path.exists(report):
        os.unlink(report)
    argv = [a.llama_server, "-m", model, "--host", "127.0.0.1", "--port", str(port), "-c", "512",
            "-t", str(a.t), "-np", "1"]
    if under_exec:
        argv = [a.ramforge, "exec", "--residency-policy", "streaming", "--memory-limit",
                str(limit), "--residency-report-json", report, "--"] + argv
    log = os.path.join(tmp, "llama-server.log")
    with memory_child_cgroup("rf-moe-curve", limit) as enter, open(log, "w") as err:
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err,
                                preexec_fn=None if under_exec else enter)
        try:
            try:
                llama_server_port(port)(proc)  # its load and warmup
            except RuntimeError as e:
                with open(log, errors="replace") as f:
                    tail = " | ".join(f.read().strip().splitlines()[-3:])
                raise RunFailed(f"llama-server{' under exec' if under_exec else ''}: {e}: {tail}")
            pid = server_pid(proc.pid)
            before = proc_read_bytes(pid)
            doc = completion(port, a.n, timeout=3600)
            read = proc_read_bytes(pid) - before
        finally:
            proc.terminate()
            proc.wait(timeout=120)
    if "timings" not in doc:
        raise RunFailed(f"llama-server answered {str(doc)[:200]}")
    experts = None
    if under_exec and os.path.exists(report):
        with open(report) as f:
            experts = (json.load(f).get("streaming") or {}).get("experts")
    tm = doc["timings"]
    return {"tps": tm["predicted_per_second"], "tokens": doc["tokens"],
            "read_per_token": read / max(1, tm["predicted_n"]), "experts": experts}


def fit_check(a, model, limit):
    """inspect's fit check at limit: (admission.experts, the binding cgroup's projected
    bytes)."""
    p = subprocess.run([a.ramforge, "inspect", "-c", "512", "--memory-limit", str(limit),
                        "--json", model], capture_output=True, text=True)
    if not p.stdout:
        raise RunFailed(f"inspect --memory-limit {limit}: {p.stderr.strip()[:200]}")
    adm = json.loads(p.stdout)["admission"]
    binding = [c for c in adm.get("cgroups") or [] if c.get("binding")]
    return adm.get("experts"), (binding[0].get("projected_bytes") if binding else None) or 0


def lru_hit_rate(routing, cache):
    """The share of the observed selections a per-layer LRU cache of cache experts holds (reuse
    distance below cache), or None."""
    rd = (routing or {}).get("reuse_distance")
    if not rd or not sum(rd):
        return None
    return sum(rd[:cache]) / sum(rd)


def bound_of(fit, projected, limit, routing, share, t_c_ns, bw):
    """The bound's figures at one limit (ns per token and what went into it)."""
    if fit is None:
        return None
    dense_missed = max(0, fit["dense_bytes"] + projected - limit)
    hit = lru_hit_rate(routing, fit["cache_experts"])
    basis = "observed LRU"
    if hit is None:
        hit, basis = fit["cache_experts"] / fit["n_expert"], "uniform c/n"
    routed = (1 - min(1.0, hit)) * share
    return {"t_c_ns": t_c_ns, "B": bw, "dense_missed": dense_missed, "cache": fit["cache_experts"],
            "hit": hit, "basis": basis, "routed_missed": routed,
            "ns": t_c_ns + (dense_missed + routed) / bw * 1e9}


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x, spec=".2f", none="-"):
    return none if x is None else format(x, spec)


def summarize(runs, ref_tokens):
    """Medians of one row's runs (those that completed)."""
    ok = [r for r in runs if "tps" in r]
    exp = [r["experts"] for r in ok if r.get("experts")]
    return {"runs": len(runs), "ok": len(ok), "tps": med([r["tps"] for r in ok]),
            "range": (min(r["tps"] for r in ok), max(r["tps"] for r in ok)) if ok else None,
            "read": med([r["read_per_token"] for r in ok]),
            "exp_read": med([e.get("bytes_read_per_token") for e in exp]),
            "hit": med([e.get("hit_rate") for e in exp]), "has_cache": bool(exp),
            "cache": med([e.get("experts_per_layer") for e in exp]),
            "x_bound_own_B": med([r.get("x_bound_own_B") for r in ok]),
            "tokens_equal": bool(ok) and all(r["tokens"] == ref_tokens for r in ok),
            "errors": [r["error"] for r in runs if "error" in r]}


def measure(a, routing_name, model, tmp, results):
    """Every row at every limit of one model; appends to results and prints its table."""
    warm = [run_report(a, model, "off", None, tmp) for _ in range(a.r + 1)][1:]
    ref = warm[0]["output"]["token_ids"]
    # the least of R: a floor, and a busy host's preempted runs (spinning OpenMP threads lose
    # whole time slices) say nothing of the compute
    t_c = min(w["timing"]["decode_ns"] / max(1, len(w["output"]["token_ids"]) - 1)
              for w in warm)
    warm_same = all(w["output"]["token_ids"] == ref for w in warm)
    obs = run_report(a, model, "observe", None, tmp)
    routing = (obs.get("residency") or {}).get("experts")
    inv = json.loads(subprocess.run([a.ramforge, "inspect", "--json", "--no-probe", model],
                                    capture_output=True, text=True, check=True).stdout)["experts"]
    size = os.path.getsize(model)
    share = inv["token_routed_share_bytes"]
    print(f"\n== {routing_name}: {model} ({size / 2**30:.2f} GiB; {inv['n_expert_used']} of "
          f"{inv['n_expert']} experts, a token's share of the routed {share / MIB:.1f} MiB); "
          f"t_c {t_c / 1e6:.1f} ms/token (warm, unlimited, off, least of {a.r}; tokens stable: "
          f"{'yes' if warm_same else 'NO'}); routing observed: "
          f"{'yes' if routing and routing.get('reuse_distance') else 'no'}")
    rows = [r for r in a.rows.split(",") if r]
    for div in a.limits:
        limit = int(size / div)
        fit, projected = fit_check(a, model, limit)
        bw_before = probe = direct_read_rate(model)
        runs = {r: [] for r in rows}
        for _ in range(a.r):
            for r in rows:
                try:
                    if r in ("off", "run"):
                        got = run_row(a, model, "off" if r == "off" else "streaming", limit, tmp)
                    else:
                        got = server_row(a, model, limit, r == "exec", tmp)
                except (RunFailed, subprocess.SubprocessError, OSError) as e:
                    got = {"error": str(e)}
                    print(f"moe_curve: {routing_name} 1/{div:g} {r}: {e}", file=sys.stderr)
                # the disk's rate around this run: the probes just before and just after it
                after = direct_read_rate(model)
                got["B_around"] = (probe, after)
                probe = after
                runs[r].append(got)
        probes = (bw_before, probe)
        b = bound_of(fit, projected, limit, routing, share, t_c, max(probes))
        if b:
            b["B_probes"] = probes
            for row in runs.values():  # each run against the bound at its own moment's B
                for got in row:
                    if "tps" in got and "B_around" in got:
                        nb = bound_of(fit, projected, limit, routing, share, t_c,
                                      max(got["B_around"]))["ns"]
                        got["x_bound_own_B"] = (1e9 / got["tps"]) / nb
        for prev in a.reuse:  # an earlier invocation's rows this one did not run
            if (prev["routing"], prev["divisor"], prev["limit"], prev.get("n"), prev.get("t")) \
                    == (routing_name, div, limit, a.n, a.t):
                runs.update({r: v for r, v in prev["runs"].items() if r not in runs})
        s = {r: summarize(runs[r], ref) for r in ROWS if r in runs}
        results.append({"routing": routing_name, "model": model, "divisor": div, "limit": limit,
                        "n": a.n, "t": a.t, "bound": b, "rows": s, "runs": runs})
        print_limit(routing_name, div, limit, b, s)


def print_limit(routing, div, limit, b, s):
    if b:
        print(f"-- 1/{div:g} = {limit / MIB:.0f} MiB: bound {b['ns'] / 1e6:.1f} ms/token = t_c "
              f"{b['t_c_ns'] / 1e6:.1f} ms + (dense missed {b['dense_missed'] / MIB:.1f} MiB + "
              f"routed missed {b['routed_missed'] / MIB:.1f} MiB: LRU cache of {b['cache']} "
              f"experts/layer, hit rate {b['hit']:.3f} {b['basis']}) / B {b['B'] / 1e9:.2f} GB/s "
              f"(probes before and after the rows: "
              f"{', '.join(f'{x / 1e9:.2f}' for x in b['B_probes'])})")
    else:
        print(f"-- 1/{div:g} = {limit / MIB:.0f} MiB: no bound (admission gave no experts)")
    print(f"{'row':<5} {'runs':>5} {'tok/s':>7} {'range':>11} {'ms/tok':>8} {'c':>3} "
          f"{'cache MB/tok':>12} {'hit':>5} {'read MB/tok':>11} {'x bound':>7} {'x own B':>7} "
          f"{'x off':>6} {'x run':>6} tokens")
    off, run = s.get("off", {}).get("tps"), s.get("run", {}).get("tps")
    for r, v in s.items():
        tps = v["tps"]
        ms = 1e3 / tps if tps else None
        xb = ms * 1e6 / b["ns"] if ms and b else None
        cache = fmt(v["exp_read"] and v["exp_read"] / 1e6, ".1f") if v["has_cache"] else "no cache"
        read = fmt(v["read"] and v["read"] / 1e6, ".1f")
        rng = f"{v['range'][0]:.3g}-{v['range'][1]:.3g}" if v["range"] else "-"
        print(f"{r:<5} {v['ok']:>2}/{v['runs']:<2} {fmt(tps):>7} {rng:>11} {fmt(ms, '.1f'):>8} "
              f"{fmt(v['cache'], 'g'):>3} {cache:>12} {fmt(v['hit']):>5} {read:>11} "
              f"{fmt(xb):>7} {fmt(v.get('x_bound_own_B')):>7} "
              f"{fmt(tps / off if tps and off else None):>6} "
              f"{fmt(tps / run if r == 'exec' and tps and run else None):>6} "
              f"{'equal' if v['tokens_equal'] else 'DIFFER' if v['ok'] else '-'}")


def check(ok, text):
    print(f"  [{'met' if ok else 'NOT MET' if ok is not None else 'n/a'}] {text}")


def goals(results):
    """The goals of issue 33, checked on the medians."""
    print("\nGoals (issue 33):")
    for res in results:
        s, b, div = res["rows"], res["bound"], res["divisor"]
        where = f"{res['routing']} 1/{div:g}"
        tps = {r: v["tps"] for r, v in s.items()}
        xb = {r: (1e9 / t) / b["ns"] for r, t in tps.items() if t and b}
        for r in ("run", "exec"):
            if r in s:
                own = s[r].get("x_bound_own_B")
                check(xb[r] <= 1.3 if r in xb else None,
                      f"{where} {r}: {fmt(xb.get(r))}x its bound (<= 1.3)")
                check(own <= 1.3 if own else None,
                      f"{where} {r}: {fmt(own)}x its bound at each run's own B (<= 1.3; the "
                      f"median of the runs' ratios)")
        want = {2.0: 3, 4.0: 10}.get(div)
        if want and "run" in s and "off" in s:
            ratio = tps["run"] / tps["off"] if tps["run"] and tps["off"] else None
            check(ratio >= want if ratio else None,
                  f"{where} run {fmt(ratio)}x stock off (>= {want}); stock off is "
                  f"{fmt(xb.get('off'))}x its bound, bare {fmt(xb.get('bare'))}x")
        if "exec" in s and "run" in s:
            ratio = tps["exec"] / tps["run"] if tps["exec"] and tps["run"] else None
            check(ratio >= 0.9 if ratio else None, f"{where} exec {fmt(ratio)}x run (>= 0.9)")
        check(all(v["tokens_equal"] for v in s.values()),
              f"{where} tokens equal to off's in every run: "
              + ", ".join(f"{r} {'yes' if v['tokens_equal'] else 'NO'}" for r, v in s.items()))


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cache-dir", default="/var/tmp/ramforge-moe", help="the models, kept")
    ap.add_argument("--ramforge", default="build/ramforge")
    ap.add_argument("--llama-server", default="build/llama-server")
    ap.add_argument("--preset", default="qwen3moe-a3b")
    ap.add_argument("--skew", type=float, default=1.2, help="the skewed model's --route-skew")
    ap.add_argument("--routings", default="uniform,skewed")
    ap.add_argument("--limits", default="1.5,2,4", help="divisors of the file size")
    ap.add_argument("--rows", default="off,bare,run,exec")
    ap.add_argument("-r", type=int, default=3)
    ap.add_argument("-n", type=int, default=16)
    ap.add_argument("-t", type=int, default=2)
    ap.add_argument("--json", default="", help="write every run and the medians here")
    ap.add_argument("--reuse", default="", help="an earlier --json: its rows of the same "
                    "routing, limit, -n and -t that --rows leaves out join the table (the slow "
                    "stock rows measured once)")
    ap.add_argument("--quick", action="store_true",
                    help="smoke test: qwen3moe-small, uniform, 4/3 of the file, R=1, 8 tokens")
    a = ap.parse_args()
    if a.quick:
        a.preset, a.routings, a.limits, a.r, a.n = "qwen3moe-small", "uniform", "0.75", 1, 8
    a.limits = [float(x) for x in a.limits.split(",")]
    a.reuse = json.load(open(a.reuse)) if a.reuse else []
    unknown = set(a.rows.split(",")) - set(ROWS)
    if unknown:
        ap.error(f"--rows: unknown {','.join(sorted(unknown))} (rows: {','.join(ROWS)})")
    return a


def main():
    # SIGTERM as Ctrl-C: the cgroups' finally blocks run
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    a = parse_args()
    try:
        memory_cgroup_v1()
    except Skip as e:
        print(f"moe_curve: {e}", file=sys.stderr)
        return 77
    if any(r in a.rows for r in ("bare", "exec")) and not os.access(a.llama_server, os.X_OK):
        print(f"moe_curve: {a.llama_server}: no llama-server (make llama-server, or "
              "--llama-server PATH; or --rows off,run)", file=sys.stderr)
        return 77 if a.quick else 2
    if a.quick and asan_build(a.ramforge):
        print("moe_curve: an AddressSanitizer build: exec does not run llama-server under it "
              "and its speeds mean nothing", file=sys.stderr)
        return 77
    models = {"uniform": ensure_model(a, a.preset, 0)}
    if "skewed" in a.routings:
        models["skewed"] = ensure_model(a, a.preset, a.skew)
    bw = direct_read_rate(models["uniform"])
    print(f"moe_curve: {a.n} tokens, {a.t} threads, medians of {a.r}; B at the start "
          f"{bw / 1e9:.2f} GB/s "
          f"(O_DIRECT, {DIRECT_CHUNK_BYTES // MIB} MiB requests); load average "
          f"{os.getloadavg()[0]:.2f} (speed figures only mean something on a quiet host)")
    results = []
    with tempfile.TemporaryDirectory(prefix="rf-moe-curve-") as tmp:
        for name in a.routings.split(","):
            measure(a, name, models[name], tmp, results)
    goals(results)
    print(f"load average at the end {os.getloadavg()[0]:.2f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    bad = any(v["ok"] < v["runs"] or not v["tokens_equal"]
              for res in results for v in res["rows"].values())
    return 1 if bad else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # the cgroups and children are gone: the finally blocks ran
        print("moe_curve: interrupted", file=sys.stderr)
        sys.exit(130)
