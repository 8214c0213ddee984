"""Shared pieces of the end-to-end test drivers (test_cli.py, test_pages.py, test_bench.py).

Each driver runs one CASE per process (one ctest test each): exit 0 pass,
1 fail, 77 skip. A case fails by raising Failure (through check), skips by
raising Skip or returning SKIP.
"""
import argparse
import contextlib
import errno
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

SKIP = 77


class Failure(Exception):
    pass


class Skip(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Failure(msg)


def wait_for(pred, timeout, what):
    """pred()'s first true value, polled every 20 ms; fails after timeout seconds."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.02)
    raise Failure(f"timed out waiting for {what}")


# No "(null)" (a NULL string given to printf) may ever reach output: every stdout and stderr
# captured through subprocess.run or Popen.communicate by any driver importing this module is
# checked, and so are texts a driver collects otherwise (check_no_null).
NULL_TEXT = "(null)"


def check_no_null(text, what):
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if text and NULL_TEXT in text:
        at = text.index(NULL_TEXT)
        raise Failure(f"{NULL_TEXT} in {what}: ...{text[max(0, at - 300):at + 100]!r}")


def _argv_text(args):
    return " ".join(map(str, args)) if isinstance(args, (list, tuple)) else str(args)


_plain_communicate = subprocess.Popen.communicate


def _checked_communicate(self, *a, **kw):
    out, err = _plain_communicate(self, *a, **kw)
    check_no_null(out, f"the stdout of {_argv_text(self.args)}")
    check_no_null(err, f"the stderr of {_argv_text(self.args)}")
    return out, err


subprocess.Popen.communicate = _checked_communicate  # subprocess.run goes through it too


def run_ramforge(rf, argv, check_rc=0, prefix=(), timeout=300, **kw):
    """Runs `[prefix...] rf argv...`; a crash always fails, check_rc=None accepts any exit."""
    p = subprocess.run([*prefix, rf, *argv], capture_output=True, text=True, timeout=timeout,
                       **kw)
    check("Traceback" not in p.stderr and "Segmentation" not in p.stderr and
          0 <= p.returncode < 128,
          f"ramforge {' '.join(argv)} crashed: {p.returncode}\n{p.stderr[-2000:]}")
    if check_rc is not None and p.returncode != check_rc:
        raise Failure(f"ramforge {' '.join(argv)} exited {p.returncode}, expected "
                      f"{check_rc}\nstdout: {p.stdout[-2000:]}\nstderr: {p.stderr[-2000:]}")
    return p


def asan_build(rf):
    """Whether the binary rf is built with AddressSanitizer (make asan): ldd lists libasan.
    Its allocator keeps freed memory in a quarantine, so RSS flatness means nothing there,
    and everything runs several times slower."""
    p = subprocess.run(["ldd", rf], capture_output=True, text=True)
    return "libasan" in p.stdout


def expect_error_lines(c, argv, rc, needle, n_lines=1):
    """Exit rc with n_lines "ramforge: " lines on stderr, the first containing needle."""
    p = c.run(*argv, check_rc=None)
    check(p.returncode == rc, f"{argv}: exit {p.returncode}, expected {rc}; {p.stderr}")
    lines = [line for line in p.stderr.splitlines() if line.startswith("ramforge: ")]
    check(len(lines) == n_lines, f"{argv}: expected {n_lines} error lines, got {p.stderr!r}")
    check(needle in lines[0], f"{argv}: {lines[0]!r} lacks {needle!r}")
    return p


def evict(path):
    """fsync, then posix_fadvise(DONTNEED) over the whole file: its pages leave the page cache
    (and the cgroup that charged them), so a run under a limit reads them itself."""
    fd = os.open(path, os.O_RDONLY)
    try:
        try:
            os.fsync(fd)
        except OSError as e:  # a read-only filesystem (squashfs: EINVAL) has nothing dirty
            if e.errno not in (errno.EINVAL, errno.EROFS):
                raise
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def memory_cgroup_v1():
    """This process's v1 memory cgroup directory, or raises Skip with the reason."""
    if os.geteuid() != 0:
        raise Skip("not root: cannot create a memory cgroup")
    with open("/proc/self/cgroup") as f:
        paths = [ln.split(":", 2)[2].strip() for ln in f
                 if "memory" in ln.split(":", 2)[1].split(",")]
    point = None
    with open("/proc/self/mountinfo") as f:
        for ln in f:
            fields = ln.split()
            tail = fields[fields.index("-") + 1:]
            if tail[0] == "cgroup" and "memory" in tail[2].split(",") and fields[3] == "/":
                point = fields[4]
    if not paths or not point:
        raise Skip("no cgroup v1 memory controller")
    return point + paths[0].rstrip("/")


@contextlib.contextmanager
def memory_child_cgroup(name, limit_bytes):
    """A child of this process's v1 memory cgroup with a hard limit of limit_bytes (Skip when
    there is none); yields a preexec_fn that moves the child process into it (its .cgroup:
    the directory). Removed at
    exit (retried while the moved processes exit)."""
    child = os.path.join(memory_cgroup_v1(), f"{name}-{os.getpid()}")
    os.mkdir(child)
    try:
        with open(os.path.join(child, "memory.limit_in_bytes"), "w") as f:
            f.write(str(limit_bytes))

        def enter():
            with open(os.path.join(child, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))

        enter.cgroup = child  # the directory
        yield enter
    finally:
        for _ in range(50):
            try:
                os.rmdir(child)
                break
            except OSError:
                time.sleep(0.1)


class ModelCtx:
    """A case's context: the ramforge binary, --schema, the temporary folder, and models
    generated there on first use (fsync'd: written back, so pageout may evict them)."""

    def __init__(self, args, tmp):
        self.rf = args.ramforge
        self.schema = args.schema
        self.tmp = tmp

    def run(self, *argv, check_rc=0, **kw):
        return run_ramforge(self.rf, argv, check_rc, **kw)

    def path(self, name):
        return os.path.join(self.tmp, name)

    def model(self, preset="tiny", wtype="q8_0"):
        path = self.path(f"{preset}-{wtype}.gguf")
        if not os.path.exists(path):
            self.run("mkmodel", "--preset", preset, "--type", wtype, "-o", path)
            with open(path, "rb") as f:
                os.fsync(f.fileno())
        return path


def main(cases, make_ctx, tmp_prefix, tmp_dir=None, schema_required=False):
    """Parses --ramforge/--simple/--schema CASE, runs the case in a fresh temporary folder."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--ramforge", required=True)
    ap.add_argument("--simple", default="")
    ap.add_argument("--schema", required=schema_required, default="")
    ap.add_argument("case", choices=sorted(cases))
    args = ap.parse_args()
    # SIGTERM unwinds like an exception: the temporary folder, child cgroups and children
    # started through subprocess.run are removed as on a failure.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    with tempfile.TemporaryDirectory(prefix=tmp_prefix, dir=tmp_dir) as tmp:
        try:
            rc = cases[args.case](make_ctx(args, tmp))
        except Skip as e:
            print(f"SKIP {args.case}: {e}")
            return SKIP
        except Failure as e:
            print(f"FAIL {args.case}: {e}")
            return 1
    print(f"{'SKIP' if rc == SKIP else 'PASS'} {args.case}")
    return rc or 0


def run_main(cases, make_ctx, tmp_prefix, **kw):
    sys.exit(main(cases, make_ctx, tmp_prefix, **kw))


def check_ledger_metrics(m, entries):
    """m: parsed metrics, (name, labels without model) -> value; entries: the JSON report's
    ledger entries. Each known value is ramforge_ledger_bytes{category,provenance}; each
    unknown one is absent there and ramforge_ledger_unknown{category} is 1. Returns the
    (category -> (provenance, value)) map and the unknown set."""
    ledger = {dict(k[1])["category"]: (dict(k[1])["provenance"], v)
              for k, v in m.items() if k[0] == "ramforge_ledger_bytes"}
    unknown = {dict(k[1])["category"] for k, v in m.items()
               if k[0] == "ramforge_ledger_unknown" and v == 1}
    for e in entries:
        if e["value_bytes"] is None:
            check(e["category"] in unknown and e["category"] not in ledger,
                  f"unknown {e['category']} is absent, with its companion gauge")
        else:
            check(ledger.get(e["category"]) == (e["provenance"], e["value_bytes"]),
                  f"{e['category']}: metrics {ledger.get(e['category'])} vs report {e}")
    return ledger, unknown


@contextlib.contextmanager
def ended_by_sigterm(proc, what):
    """Runs the with-block, then SIGTERM must end proc with exit 0 (killed when the block
    failed)."""
    try:
        yield proc
        proc.send_signal(signal.SIGTERM)
        check(proc.wait(timeout=120) == 0, f"{what} exited {proc.returncode} on SIGTERM")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def load_peak(rf, model, run_args, limit_bytes=8 << 30, name="ramforge-peak"):
    """Runs `rf run -m MODEL -n 8 RUN_ARGS` on MODEL evicted first, in a fresh child memory
    cgroup (memory_child_cgroup, removed also on failure) of limit_bytes. Returns a dict:
    rc, cgroup_peak (memory.max_usage_in_bytes of the child: the load's page cache counts),
    vmhwm (the report's largest process_rss_peak_bytes: VmHWM), text, failcnt, report."""
    evict(model)
    with tempfile.TemporaryDirectory(prefix="rf-peak-") as tmp, \
            memory_child_cgroup(name, limit_bytes) as enter:
        rep = os.path.join(tmp, "report.json")
        p = subprocess.run([rf, "run", "-m", model, "-n", "8", "--residency-report-json", rep]
                           + list(run_args), preexec_fn=enter, capture_output=True, text=True,
                           timeout=600)
        with open(os.path.join(enter.cgroup, "memory.max_usage_in_bytes")) as f:
            peak = int(f.read())
        with open(os.path.join(enter.cgroup, "memory.failcnt")) as f:
            failcnt = int(f.read())
        report = None
        if os.path.exists(rep):
            with open(rep) as f:
                report = json.load(f)
    hwm = max((s.get("process_rss_peak_bytes") or 0
               for s in (report or {}).get("residency", {}).get("samples", [])), default=0)
    return {"rc": p.returncode, "stderr": p.stderr, "cgroup_peak": peak, "vmhwm": hwm,
            "failcnt": failcnt, "report": report,
            "text": report["output"]["text"] if report else None}
