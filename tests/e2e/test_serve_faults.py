"""End-to-end tests of `ramforge serve` for issue 20: the per-request report
(fault 10) and the connection limits (fault 12).

A request's report with a releasing policy and --idle-seconds (its release
waits for the idle boundary): every sample is one moment (the end_of_session
sample, its context alive, does not read the mapping; the ledger has a sample
of its own), the ledger warning says what is true, the release section does
not say the policy does not mutate, the context's execution generation is
known and the lifetime counts include the request's execution.

Idle connections (silent sockets, half-sent request heads, keep-alive clients
between requests) must not take every slot: one client address holds at most
--max-connections-per-address, a connection without a whole request head is
closed after --header-timeout (not --timeout), and /health answers another
address at once and this one once the head timeout has freed a slot. Many
addresses each under their cap (issue 36, item 6): beyond --max-connections
the connection that has waited longest for its head is closed for a new one,
so /health and other requests from a new address are answered at once, and a
connection whose head is in is kept. Every wait polls against a deadline.
"""
import os
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_util import Failure, check, run_main  # noqa: E402
from test_serve import Ctx, Server, wait_idle_boundary  # noqa: E402

PARTIAL_HEAD = b"GET /health HTTP/1.1\r\nHost: x\r\n"


def connect(port, source="127.0.0.1"):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(30)
    s.bind((source, 0))
    s.connect(("127.0.0.1", port))
    return s


def closed(s):
    """Whether the server closed s (EOF or reset), without waiting."""
    s.setblocking(False)
    try:
        return s.recv(4096) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True
    finally:
        s.setblocking(True)


def idle_sockets(port, n):
    """n connections from 127.0.0.1: every other one sends half a request head."""
    socks = []
    for i in range(n):
        s = connect(port)
        if i % 2:
            s.sendall(PARTIAL_HEAD)
        socks.append(s)
    return socks


def read_head(s):
    """What s receives until the end of a response head (or the server's close)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
    return data


def health(port, source, deadline_s):
    """/health from source; (status line, seconds), or raises Failure past the deadline."""
    t0 = time.monotonic()
    s = connect(port, source)
    s.settimeout(deadline_s)
    try:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = read_head(s)
    except socket.timeout:
        raise Failure(f"/health from {source} did not answer within {deadline_s} s")
    except OSError as e:
        data = f"closed: {e}".encode()
    finally:
        s.close()
    return data.split(b"\r\n", 1)[0].decode(errors="replace"), time.monotonic() - t0


def busy(port, source="127.0.0.1"):
    """A connection whose request head is in (serve answered its Expect: 100-continue) and
    whose body is not: POST /tokenize, the body's last byte withheld; (socket, rest)."""
    body = b'{"content": "Hello"}'
    s = connect(port, source)
    s.sendall(b"POST /tokenize HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
              b"Content-Type: application/json\r\nExpect: 100-continue\r\n"
              b"Content-Length: %d\r\n\r\n" % len(body))
    data = read_head(s)
    check(data.startswith(b"HTTP/1.1 100"), f"POST with Expect: 100-continue: {data[:80]!r}")
    s.sendall(body[:-1])
    return s, body[-1:]


def answer(s, timeout_s=30):
    """Everything the server sends on s until it closes it (Connection: close)."""
    s.settimeout(timeout_s)
    data = b""
    while True:
        chunk = s.recv(4096)
        if not chunk:
            return data
        data += chunk


def wait_open_at_most(socks, n, deadline_s):
    """Polls until at most n of socks are open; returns how many are."""
    t0 = time.monotonic()
    while True:
        n_open = sum(not closed(s) for s in socks)
        if n_open <= n or time.monotonic() - t0 > deadline_s:
            return n_open
        time.sleep(0.05)


def wait_closed(socks, deadline_s):
    """Polls until every socket is closed; returns how many still are open."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < deadline_s:
        if all(closed(s) for s in socks):
            return 0
        time.sleep(0.05)
    return sum(not closed(s) for s in socks)


LEDGER_WARNING = "the ledger is sampled after the session was dropped"


def case_request_report(c):
    model = c.model("small")
    with Server(c, model, "--residency-policy", "memory-bound", "--memory-target", "4MiB",
                "--idle-seconds", "3") as sv:
        for attempt in range(1, 4):
            sv.complete(n=8)
            wait_idle_boundary(sv, attempt)
            idle = sv.ok("GET", "/residency")["operation"]
            check(not any(LEDGER_WARNING in w for w in idle["warnings"]),
                  f"the idle operation has no context, yet: {idle['warnings']}")
            sv.complete(n=8)
            req = sv.ok("GET", "/residency")["operation"]
            if sv.ok("GET", "/props")["residency"]["idle_boundaries"] == attempt:
                break  # req is the request's operation, not a later idle boundary's
        else:
            raise Failure("an idle boundary ran between every request and its /residency")
        samples = req["residency"]["samples"]
        labels = [s["label"] for s in samples]
        check(len(set(labels)) == len(labels), f"sample labels repeat: {labels}")
        end = [s for s in samples if s["label"] == "end_of_session"]
        check(len(end) == 1 and end[0]["mapping_rss_bytes"] is None and
              end[0]["mapping_pss_bytes"] is None,
              f"end_of_session (context alive) carries mapping figures read later: {end}")
        last = samples[-1]
        check(last["label"] == "end_of_operation" and last["mapping_rss_bytes"] is not None and
              last["process_rss_bytes"] is not None, f"the ledger's own sample: {last}")
        check(any(LEDGER_WARNING in w for w in req["warnings"]),
              f"the ledger is after the context: the warning says so: {req['warnings']}")
        reason = req["application"].get("reason") or ""
        check("does not mutate" not in reason, f"memory-bound release reason: {reason!r}")
        gen = req["native"]["context_execution_generation"]
        check(isinstance(gen, int) and gen > 0, f"context_execution_generation {gen!r}")
        before = idle["lifetime"]["state_counts"].get("Reconciled", 0)
        after = req["lifetime"]["state_counts"].get("Reconciled", 0)
        check(before > 0 and after < before,
              f"Reconciled resources: {before} after the idle release, {after} after a "
              f"request that faulted them back")
    return 0


def case_per_address(c):
    """40 idle connections of one address: all but --max-connections-per-address are
    closed at once, and /health answers another address at once, although the head
    timeout is far away."""
    with Server(c, c.model(), "--max-connections-per-address", "8",
                "--header-timeout", "300") as sv:
        socks = idle_sockets(sv.port, 40)
        try:
            n_open = wait_open_at_most(socks, 8, 20)
            check(n_open <= 8, f"{n_open} of 40 idle connections of one address stay open "
                               f"(limit 8)")
            line, took = health(sv.port, "127.0.0.2", 20)
            check(line.endswith("200 OK"), f"/health from another address: {line!r}")
            line, _ = health(sv.port, "127.0.0.1", 20)
            check(not line.endswith("200 OK"),
                  f"a 9th connection of the full address was served: {line!r}")
        finally:
            for s in socks:
                s.close()
    return 0


def case_header_timeout(c):
    """Silent sockets, half-sent heads and a keep-alive connection between requests are
    closed after --header-timeout although --timeout is 600 s."""
    with Server(c, c.model(), "--header-timeout", "2", "--timeout", "600") as sv:
        keep = connect(sv.port)
        keep.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        first = keep.recv(4096)
        check(first.startswith(b"HTTP/1.1 200"), f"keep-alive /health: {first[:60]!r}")
        socks = idle_sockets(sv.port, 10) + [keep]
        t0 = time.monotonic()
        try:
            left = wait_closed(socks, 60)
            took = time.monotonic() - t0
            check(left == 0, f"{left} of {len(socks)} idle connections still open after 60 s "
                             f"(--header-timeout 2)")
            check(took >= 1.0, f"idle connections closed after {took:.2f} s, before the "
                               f"2 s head timeout")
        finally:
            for s in socks:
                s.close()
        line, _ = health(sv.port, "127.0.0.1", 20)
        check(line.endswith("200 OK"), f"/health after the idle ones: {line!r}")
    return 0


def case_many_addresses(c):
    """40 addresses x 4 unfinished request heads, each address under its cap of 32, against
    --max-connections 64 (the issue's 40 x 30 against 256, scaled down): /health from a new
    address is answered at once, although the head timeout (300 s) is far away, and so is
    another request; the oldest heads were closed for the new ones (a keep-alive connection
    between requests first), the newest are open, and a connection whose head is in (its
    body pending) is kept and answered."""
    with Server(c, c.model(), "--max-connections", "64", "--header-timeout", "300",
                "--timeout", "600") as sv:
        keep = connect(sv.port, "127.0.0.8")
        keep.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        first = read_head(keep)
        while not first.endswith(b'{"status":"ok"}'):
            first += keep.recv(4096)
        check(first.startswith(b"HTTP/1.1 200"), f"keep-alive /health: {first[:60]!r}")
        work, rest = busy(sv.port, "127.0.0.9")
        flood = []
        try:
            for i in range(4):
                for a in range(40):
                    s = connect(sv.port, f"127.0.0.{10 + a}")
                    s.sendall(PARTIAL_HEAD)
                    flood.append(s)
            line, took = health(sv.port, "127.0.0.200", 10)
            check(line.endswith("200 OK"), f"/health from a new address: {line!r}")
            print(f"/health from a new address under 160 unfinished heads: {took:.3f} s")
            s = connect(sv.port, "127.0.0.201")
            s.sendall(b"GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            data = answer(s)
            s.close()
            check(data.startswith(b"HTTP/1.1 200"),
                  f"/v1/models from a new address: {data[:300]!r}")
            n_open = wait_open_at_most(flood, 63, 30)
            check(n_open <= 63, f"{n_open} of 160 unfinished heads open (--max-connections 64, "
                                f"one connection busy)")
            check(closed(keep) and closed(flood[0]) and not closed(flood[-1]),
                  "the connections that waited longest give way, the newest stays")
            check(not closed(work), "the connection whose head is in was closed for another")
            work.sendall(rest)
            data = answer(work)
            check(data.startswith(b"HTTP/1.1 200") and b'"tokens"' in data,
                  f"the busy connection's request: {data[:300]!r}")
        finally:
            keep.close()
            work.close()
            for s in flood:
                s.close()
    return 0


def case_table_full(c):
    """--max-connections connections in a request (heads in, bodies pending) fill the
    table: /health is still answered at once (a reserve beyond the limit is for it alone),
    another request beyond the limit gets 503 with the reason, and the timeouts are far
    away."""
    with Server(c, c.model(), "--max-connections", "16", "--max-connections-per-address", "16",
                "--header-timeout", "300", "--timeout", "600") as sv:
        socks = [busy(sv.port)[0] for _ in range(16)]
        try:
            for source in ("127.0.0.2", "127.0.0.3"):
                line, took = health(sv.port, source, 20)
                check(line.endswith("200 OK"), f"/health with the table full: {line!r}")
            s = connect(sv.port, "127.0.0.2")
            s.sendall(b"GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            data = answer(s)
            s.close()
            check(data.startswith(b"HTTP/1.1 503") and b"--max-connections" in data,
                  f"another request beyond the limit: {data[:300]!r}")
        finally:
            for s in socks:
                s.close()
    return 0


def case_limits_badinput(c):
    model = c.model()
    for argv, needle in ((("--max-connections", "0"), "--max-connections"),
                         (("--max-connections-per-address", "x"),
                          "--max-connections-per-address"),
                         (("--header-timeout", "0"), "--header-timeout")):
        p = subprocess.run([c.rf, "serve", "-m", model, "--port", "0", *argv],
                           capture_output=True, text=True, timeout=120)
        lines = [ln for ln in p.stderr.splitlines() if ln.startswith("ramforge: ")]
        check(p.returncode == 2 and lines and needle in lines[0],
              f"serve {argv}: exit {p.returncode}, {p.stderr!r}")
    p = subprocess.run([c.rf, "serve", "--help"], capture_output=True, text=True, timeout=60)
    for opt in ("--max-connections ", "--max-connections-per-address", "--header-timeout"):
        check(opt in p.stdout, f"serve --help lacks {opt}")
    return 0


CASES = {
    "request_report": case_request_report,
    "per_address": case_per_address,
    "header_timeout": case_header_timeout,
    "many_addresses": case_many_addresses,
    "table_full": case_table_full,
    "limits_badinput": case_limits_badinput,
}

if __name__ == "__main__":
    run_main(CASES, Ctx, "rf-serve-faults-")
