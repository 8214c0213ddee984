#!/usr/bin/env python3
"""exec's parent (--metrics-listen, --memory-limit; tools/common/limit_cgroup.c, the supervisor of
run and serve --memory-limit too) with fake PROGRAMs in place of llama-server (issue 36).

  terminal_interrupt    Ctrl-C on a terminal (a pty) reaches PROGRAM once: the parent does
                        not pass on the SIGINT the kernel sent the whole process group (it
                        did: llama-server took the second one for "terminate now"); a SIGINT
                        sent to the parent with kill is still passed on, once
  limit_leftovers       a PROGRAM that starts two processes in the background and exits:
                        both ended (SIGTERM; SIGKILL 5 s later for the one ignoring SIGTERM),
                        said, the cgroup removed, exit 0 (it said "cannot remove the cgroup",
                        left both and exited 0); a cgroup that cannot be removed (PROGRAM
                        made a cgroup inside it) is said with its reason and exit 1
  limit_parent_killed   exec's parent killed with SIGKILL: PROGRAM dies with it (it stayed,
                        orphaned); the next --memory-limit command removes the empty cgroup
                        left behind and says so

Waits poll with a deadline. The limit cases need root and a cgroup v1 memory controller
(exit 77 otherwise). Usage: test_exec_parent.py --ramforge PATH CASE
"""
import contextlib
import os
import pty
import select
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
from e2e_util import (Skip, asan_build, check, memory_cgroup_v1,  # noqa: E402
                      memory_child_cgroup, run_main, wait_for)
from test_exec import free_port, rf_lines  # noqa: E402

# Counts its SIGINTs, each said on stdout; SIGTERM ends it with exit status 10 + the count.
COUNTER = r"""
import signal, sys
n = 0
def on_int(sig, frame):
    global n
    n += 1
    print(f"got {n}", flush=True)
signal.signal(signal.SIGINT, on_int)
signal.signal(signal.SIGTERM, lambda sig, frame: sys.exit(10 + n))
print("ready", flush=True)
while True:
    signal.pause()
"""


class Ctx:
    def __init__(self, args, tmp):
        self.rf = args.ramforge
        self.tmp = tmp
        if asan_build(self.rf):
            raise Skip("an AddressSanitizer build: exec's preload cannot run under it")

    def path(self, name):
        return os.path.join(self.tmp, name)


class Terminal:
    """ramforge exec ... -- COUNTER on a pseudo-terminal of its own (its session leader, its
    process group the terminal's foreground one, PROGRAM in it)."""

    def __init__(self, c, opts):
        argv = [c.rf, "exec", *opts, "--", sys.executable, "-c", COUNTER]
        self.pid, self.master = pty.fork()
        if self.pid == 0:
            try:
                os.execv(c.rf, argv)
            finally:
                os._exit(127)
        self.text = ""
        self.status = None

    def wait_text(self, needle, timeout=60):
        end = time.monotonic() + timeout
        while needle not in self.text:
            left = end - time.monotonic()
            check(left > 0, f"timed out waiting for {needle!r} on the terminal: {self.text!r}")
            if select.select([self.master], [], [], left)[0]:
                try:
                    data = os.read(self.master, 4096)
                except OSError:  # EIO: every process of the terminal closed it
                    data = b""
                check(data, f"the terminal closed before {needle!r}: {self.text!r}")
                self.text += data.decode(errors="replace")

    def state(self):
        with open(f"/proc/{self.pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]

    def exit_status(self, timeout=60):
        """exec's exit status (a signal: its negative), the terminal's output read meanwhile."""
        end = time.monotonic() + timeout
        while self.status is None:
            check(time.monotonic() < end, f"exec did not end: {self.text!r}")
            pid, st = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = os.waitstatus_to_exitcode(st)
            elif select.select([self.master], [], [], 0.02)[0]:
                with contextlib.suppress(OSError):
                    self.text += os.read(self.master, 4096).decode(errors="replace")
        return self.status

    def close(self):
        if self.status is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        os.close(self.master)


def case_terminal_interrupt(c):
    optsets = [["--metrics-listen", str(free_port())]]
    try:
        memory_cgroup_v1()
        optsets.append(["--memory-limit", "256Mi"])
    except Skip as e:
        print(f"--memory-limit not tried: {e}")
    for opts in optsets:
        t = Terminal(c, opts)
        try:
            t.wait_text("ready")
            # exec's parent stopped while the terminal's SIGINT reaches PROGRAM: its own copy
            # waits, and is handled after PROGRAM counted the first (standard signals do not
            # queue: two at once would count as one)
            os.kill(t.pid, signal.SIGSTOP)
            wait_for(lambda: t.state() == "T", 30, "exec's parent stopped")
            os.write(t.master, b"\x03")
            t.wait_text("got 1")
            # its SIGINT (SI_KERNEL) comes before this SIGTERM (signal 2 before 15): had it
            # been passed on, PROGRAM would count 2 before SIGTERM ends it
            os.kill(t.pid, signal.SIGTERM)
            os.kill(t.pid, signal.SIGCONT)
            rc = t.exit_status()
            check(rc == 11 and "got 2" not in t.text,
                  f"{opts}: Ctrl-C reached PROGRAM {rc - 10} times (exit {rc}): {t.text!r}")
        finally:
            t.close()
        t = Terminal(c, opts)
        try:  # a SIGINT sent to exec's parent (SI_USER) is passed on, once
            t.wait_text("ready")
            os.kill(t.pid, signal.SIGINT)
            t.wait_text("got 1")
            os.kill(t.pid, signal.SIGTERM)
            rc = t.exit_status()
            check(rc == 11, f"{opts}: kill -INT: exit {rc}: {t.text!r}")
        finally:
            t.close()


def alive(pid):
    """Whether pid runs (a zombie does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def remove_cgroup(path):
    """rmdir of path and what is below it (a failed case's leftovers), retried while busy."""
    for sub in (os.path.join(path, "sub"), path):
        for _ in range(100):
            try:
                os.rmdir(sub)
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.05)  # its processes exiting; bounded


# Two processes in the background, their pids in $1; the first ignores SIGTERM. PROGRAM ends
# once the first says so ($1.ready; polled for 10 s at most): a SIGTERM sent before the
# subshell's trap ran ended it, and the SIGKILL was never needed (1 run in 6 failed so).
LEAVER = """
(trap '' TERM; : > "$1.ready"; exec sleep 600) </dev/null >/dev/null 2>&1 &
echo $! > "$1"
sleep 600 </dev/null >/dev/null 2>&1 &
echo $! >> "$1"
i=0
while [ ! -e "$1.ready" ] && [ $i -lt 1000 ]; do sleep 0.01; i=$((i + 1)); done
"""

# A cgroup inside PROGRAM's own ($1: the memory cgroup exec runs in; $PPID: exec's parent):
# the parent's rmdir fails with EBUSY.
NESTER = 'mkdir "$1/rf-exec-$PPID/sub"'


def exec_limited(c, program, *args):
    """exec --memory-limit 64Mi -- /bin/sh -c program sh args: its Popen (ended), stderr and
    the cgroup it made."""
    parent = memory_cgroup_v1()
    err = open(c.path("exec.err"), "w+")
    proc = subprocess.Popen([c.rf, "exec", "--memory-limit", "64Mi", "--", "/bin/sh", "-c",
                             program, "sh", *args], stdout=subprocess.DEVNULL, stderr=err)
    try:
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    err.seek(0)
    return proc, err.read(), os.path.join(parent, f"rf-exec-{proc.pid}")


def case_limit_leftovers(c):
    pidfile = c.path("pids")
    proc, err, mine = exec_limited(c, LEAVER, pidfile)
    with open(pidfile) as f:
        pids = [int(x) for x in f.read().split()]
    try:
        lines = rf_lines(err)
        check(len(pids) == 2, f"the program's background pids: {pids}")
        check(proc.returncode == 0, f"exit {proc.returncode}: {lines}")
        check(any("left 2 processes in the cgroup" in ln and "sent SIGTERM" in ln
                  for ln in lines), f"the leftovers not said: {lines}")
        check(any("1 process still in the cgroup" in ln and "5 seconds after SIGTERM" in ln and
                  "sent SIGKILL" in ln for ln in lines), f"the SIGKILL not said: {lines}")
        check(not any("cannot remove" in ln for ln in lines), f"{lines}")
        check(not [p for p in pids if alive(p)], f"left running: {[p for p in pids if alive(p)]}")
        check(not os.path.exists(mine), f"{mine} left behind")
    finally:
        for p in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, signal.SIGKILL)
        remove_cgroup(mine)
    proc, err, mine = exec_limited(c, NESTER, memory_cgroup_v1())
    try:
        lines = rf_lines(err)
        check(os.path.isdir(os.path.join(mine, "sub")), f"the program made no cgroup: {lines}")
        check(proc.returncode == 1 and
              any(f"cannot remove the cgroup {mine}: Device or resource busy" in ln
                  for ln in lines), f"a cgroup left: exit {proc.returncode}, {lines}")
    finally:
        remove_cgroup(mine)


def case_limit_parent_killed(c):
    # in a cgroup of this test's own: no other command sweeps it meanwhile
    with memory_child_cgroup("rf-test-killed", 1 << 30) as enter:
        parent_killed(c, enter)


def parent_killed(c, enter):
    err = open(c.path("exec.err"), "w")
    proc = subprocess.Popen([c.rf, "exec", "--memory-limit", "64Mi", "--", "/bin/sleep", "600"],
                            stdout=subprocess.DEVNULL, stderr=err, preexec_fn=enter)
    mine = os.path.join(enter.cgroup, f"rf-exec-{proc.pid}")
    child = None

    def sleeping():
        with contextlib.suppress(OSError, IndexError):
            with open(os.path.join(mine, "cgroup.procs")) as f:
                pids = f.read().split()
            with open(f"/proc/{pids[0]}/comm") as f:
                return f.read().strip() == "sleep" and int(pids[0])
        return None

    try:
        child = wait_for(sleeping, 60, f"/bin/sleep running in {mine}")
        proc.kill()
        proc.wait()
        wait_for(lambda: not alive(child), 30, "PROGRAM to die with exec's parent")
        check(os.path.isdir(mine), f"{mine}: gone before the next command")
        p = subprocess.run([c.rf, "exec", "--memory-limit", "64Mi", "--", "/bin/true"],
                           capture_output=True, text=True, timeout=120, preexec_fn=enter)
        lines = rf_lines(p.stderr)
        check(p.returncode == 0 and
              "ramforge: --memory-limit: removed 1 empty cgroup left by ramforge processes that "
              "no longer exist" in lines, f"exit {p.returncode}: {lines}")
        check(not os.path.exists(mine), f"{mine} left behind")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if child:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)
        remove_cgroup(mine)
        err.close()


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith("case_")}

if __name__ == "__main__":
    run_main(CASES, Ctx, "ramforge-exec-parent-")
