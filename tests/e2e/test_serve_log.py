#!/usr/bin/env python3
"""End-to-end cases of serve's log and its --memory-limit (issue 24 items 2 and 7).

  serve_log           one stderr line per request (status, tokens, first token, tok/s)
                      and per idle release (bytes requested, accepted, observed); with
                      -q neither
  serve_live_metrics  /metrics' ramforge_live_* gauges are read at scrape time (VmRSS
                      against /proc/PID/status beside the scrape)
  serve_memory_limit  serve in a child memory cgroup rf-serve-<pid> of its own (root, a
                      v1 memory cgroup): requests answered there; SIGTERM stops it
                      gracefully (exit 0, the session report written) and the cgroup is
                      gone

Exit 0 pass, 1 fail, 77 skip.
"""
import glob
import os
import re
import signal
import time

from e2e_util import ModelCtx, check, memory_cgroup_v1, run_main
from test_serve import Server


def wait_for(sv, text, deadline_s=60):
    """Polls the server's stderr lines for text until a deadline; the matching line."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        for line in list(sv.stderr):
            if text in line:
                return line
        time.sleep(0.05)  # polled with a deadline
    return None


def complete(sv, n=4):
    return sv.ok("POST", "/completion", {"prompt": "Hello my name is", "n_predict": n})


def case_serve_log(c):
    model = c.model()
    args = ("--residency-policy", "memory-bound", "--memory-target", "1Mi", "--idle-seconds",
            "1")
    with Server(c, model, *args) as sv:
        complete(sv)
        line = wait_for(sv, "serve: request:")
        check(line is not None and ": 200, " in line and "generated tokens" in line and
              "tok/s" in line and "first token after" in line, f"request line: {line!r}")
        line = wait_for(sv, "serve: idle release:")
        # a change reads as a change, with the figure it reached (never "RSS -858.17 MiB")
        check(line is not None and "requested" in line and "accepted" in line and
              re.search(r"; mapping RSS (fell by|rose by|did not change)[^;]*, (to|at) \d+(\.\d+)? "
                        r"[KMGT]?i?B$", line.rstrip()) and not re.search(r"[-+]\d", line),
              f"idle line: {line!r} in {sv.stderr[-5:]}")
    with Server(c, model, "-q", *args) as sv:
        complete(sv)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and \
                "ramforge_idle_boundaries_total 1" not in sv.ok("GET", "/metrics"):
            time.sleep(0.05)  # polled with a deadline: the idle boundary ran
        complete(sv)  # answered after the first request's line and the idle line, if any
        check(not [ln for ln in sv.stderr if " serve: request:" in ln or " serve: idle" in ln],
              f"-q: {sv.stderr}")


def case_serve_memory_limit(c):
    parent = memory_cgroup_v1()
    model = c.model()
    report = c.path("session.json")
    with Server(c, model, "--memory-limit", "2Gi", "--residency-report-json", report) as sv:
        mine = os.path.join(parent, f"rf-serve-{sv.proc.pid}")
        check(os.path.isdir(mine), f"no cgroup {mine}")
        with open(os.path.join(mine, "memory.limit_in_bytes")) as f:
            check(int(f.read()) == 2 << 30, "the cgroup's limit is not 2 GiB")
        complete(sv)
        sv.proc.send_signal(signal.SIGTERM)
        rc = sv.proc.wait(timeout=120)
        check(rc == 0, f"serve under --memory-limit exited {rc} on SIGTERM: {sv.stderr[-5:]}")
        check(os.path.exists(report), "no session report after SIGTERM")
        check(not os.path.exists(mine), f"{mine} left behind")
    check(not glob.glob(os.path.join(parent, "rf-serve-*")), "serve cgroups left behind")


def case_serve_live_metrics(c):
    """The live gauges are read at scrape time: VmRSS within 10% of /proc/PID/status's read
    beside each of two scrapes; the cgroup's usage positive where there is a controller."""
    model = c.model()
    with Server(c, model) as sv:
        complete(sv)
        for _ in range(2):
            m = sv.metrics()
            with open(f"/proc/{sv.proc.pid}/status") as f:
                rss = int(re.search(r"^VmRSS:\s+(\d+) kB", f.read(), re.M).group(1)) * 1024
            live = m.get(("ramforge_live_process_rss_bytes", ()))
            check(live is not None and abs(live - rss) <= rss // 10,
                  f"live VmRSS {live} against /proc's {rss}")
        cur = m.get(("ramforge_live_cgroup_current_bytes", ()))
        check(cur is None or cur > 0, f"cgroup current {cur}")


CASES = {"serve_log": case_serve_log, "serve_memory_limit": case_serve_memory_limit,
         "serve_live_metrics": case_serve_live_metrics}

if __name__ == "__main__":
    run_main(CASES, ModelCtx, "rf-serve-log-")
