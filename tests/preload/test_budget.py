#!/usr/bin/env python3
"""ramforge watch --budget end to end (docs/BUDGET.md) with real llama.cpp processes.

exec_hold (tests/preload/exec_hold.c) holds a generated model with a context alive, two under
`ramforge exec` (their control channel answers) and one bare; `watch --budget` runs over them.
The model mappings' Rss is read here from /proc/PID/smaps. Cases:
  order         the least recently active (exec's submissions) is asked first, through its
                gate; the others keep their pages; the budget's /metrics families; A's
                session report lists the release (boundary budget, valid against --schema)
                and exec's metrics time A's first decode after it (the wake)
  keep          --keep PID passes it over: the next one gives
  bare_advice   with both exec'd kept, the bare one gets the advisory release (labelled so)
  gate_busy     a decode running throughout gets no release: the request waits, taken at the
                first idle moment after the decodes stop
  killed        a process killed while its request waits: said once, the watch goes on
  shared        pages another process (outside the watch) maps: the release moves nothing,
                said once, never asked again
  no_cap        a watcher without CAP_SYS_NICE: what it could not do said once, not looped
  replaced      the exec'd model's file replaced on disk: the engine's release fails and says
                so; not asked again
  cgroup        --cgroup DIR watches the processes of that cgroup alone
  quiet         exec's --budget-quiet-ms: the request is taken only after that long without
                a submission
  pid_reused    a watched process with a request waiting is killed and its pid given to
                another process (in a pid namespace of the case's own, ns_last_pid): said
                as a pid given to another process, never taken for the old one
Usage: test_budget.py --ramforge PATH [--schema operation_report.schema.json] CASE
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
from e2e_util import (Skip, asan_build, check, memory_child_cgroup, run_main,  # noqa: E402
                      wait_for, ModelCtx)
from prom_util import promtool_check_metrics  # noqa: E402

PROMPT = "Hello my name is"
MiB = 1 << 20


class Ctx(ModelCtx):
    def __init__(self, args, tmp):
        super().__init__(args, tmp)
        self.hold = os.environ.get("RF_EXEC_HOLD", "")
        if not self.hold:
            raise Skip("exec_hold was not built")
        if asan_build(self.rf):
            raise Skip("an AddressSanitizer build: its runtime cannot be preloaded")
        if os.geteuid() != 0:
            raise Skip("process_madvise of another process needs CAP_SYS_NICE: run as root")
        self.env = dict(os.environ, RAMFORGE_RUNTIME_DIR=self.path("run"))
        self.procs = []

    def seeded(self, seed):
        """A small q8_0 model of its own seed (distinct files: distinct page cache)."""
        path = self.path(f"small-{seed}.gguf")
        if not os.path.exists(path):
            self.run("mkmodel", "--preset", "small", "--type", "q8_0", "--seed", str(seed),
                     "-o", path)
            with open(path, "rb") as f:
                os.fsync(f.fileno())
        return path


def smaps_rss(pid, model):
    """The Rss of pid's mappings of the model file (its inode: a path replaced still names
    what the process maps), bytes; None when the process is gone."""
    st = os.stat(model) if os.path.exists(model) else None
    total = 0
    try:
        with open(f"/proc/{pid}/smaps") as f:
            cur = False
            for line in f:
                parts = line.split()
                if "-" in parts[0] and not parts[0].endswith(":"):
                    cur = len(parts) >= 6 and parts[1] == "r--s" and (
                        " ".join(parts[5:]).startswith(os.path.realpath(model)) or
                        (st is not None and parts[4] == str(st.st_ino)))
                elif cur and parts[0] == "Rss:":
                    total += int(parts[1]) * 1024
    except (FileNotFoundError, ProcessLookupError):
        return None
    return total


class Hold:
    """exec_hold, bare or under exec, driven line by line."""

    def __init__(self, c, model, under_exec, name, n_ctx=256, preexec_fn=None, exec_opts=()):
        self.model = model
        self.err = open(c.path(f"{name}.err"), "w")
        prefix = [c.rf, "exec", "-v", *exec_opts, "--"] if under_exec else []
        self.p = subprocess.Popen(prefix + [c.hold, model, PROMPT, str(n_ctx)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=self.err, text=True, env=c.env, preexec_fn=preexec_fn)
        self.pid = self.p.pid
        c.procs.append(self)

    def send(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()

    def cmd(self, line):
        self.send(line)
        answer = self.p.stdout.readline().strip()
        check(answer and answer != "error", f"exec_hold answered {answer!r} to {line!r}")
        return answer

    def rss(self):
        return smaps_rss(self.pid, self.model)

    def stop(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait(timeout=60)
        self.err.close()


class Watch:
    """ramforge watch --budget, its stderr lines collected by a thread."""

    def __init__(self, c, pids, *opts, prefix=(), n=600):
        argv = [*prefix, c.rf, "watch", "-i", "0.3", "-n", str(n), "--json", *opts,
                *[str(p) for p in pids]]
        self.p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  text=True, env=c.env)
        self.lines = []
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()

    def _read(self):
        for line in self.p.stderr:
            self.lines.append(line.rstrip("\n"))

    def wait_line(self, pattern, timeout=30):
        rx = re.compile(pattern)
        return wait_for(lambda: next((ln for ln in list(self.lines) if rx.search(ln)), None),
                        timeout, f"a watch line matching {pattern!r}; lines: {self.lines}")

    def count(self, pattern):
        rx = re.compile(pattern)
        return sum(1 for ln in list(self.lines) if rx.search(ln))

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGINT)
        rc = self.p.wait(timeout=60)
        self.t.join(timeout=10)
        return rc


def three(c, a_opts=()):
    """A (exec, a_opts its exec options), B (exec), C (bare), each with its model resident;
    A's last decode the oldest, then B's; C's CPU time is watched from the watch's start (the
    most recent)."""
    a = Hold(c, c.seeded(1), True, "a", exec_opts=a_opts)
    b = Hold(c, c.seeded(2), True, "b")
    h = Hold(c, c.seeded(3), False, "c")
    for x in (a, b, h):
        x.cmd("gen 4")
    time.sleep(1.5)
    b.cmd("gen 2")
    for x in (a, b, h):
        wait_for(lambda x=x: x.rss() and x.rss() > 10 * MiB, 30, f"pid {x.pid} resident")
    return a, b, h


def held(*xs):
    return sum(x.rss() for x in xs)


def with_procs(fn):
    def case(c):
        try:
            return fn(c)
        finally:
            for x in c.procs:
                x.stop()
    case.__doc__ = fn.__doc__
    case.__name__ = fn.__name__
    return case


@with_procs
def case_order(c):
    """The least recently active (A, by exec's submissions) gives first, through its gate;
    B and C keep their pages; A's session report lists the release (boundary budget)."""
    rep, a_prom = c.path("a-report.json"), c.path("a.prom")
    a, b, h = three(c, ("--residency-report-json", rep, "--metrics-file", a_prom))
    rss = {x.pid: x.rss() for x in (a, b, h)}
    budget = sum(rss.values()) - rss[a.pid] // 2
    prom = c.path("budget.prom")
    w = Watch(c, [a.pid, b.pid, h.pid], "--budget", str(budget), "--metrics-file", prom)
    first = w.wait_line(r"^ramforge: budget .*: asked pid \d+")
    check(f"asked pid {a.pid} " in first and "through exec's gate" in first and
          "the least recently active: idle" in first and "exec's submissions" in first and
          f"next: pid {b.pid} " in first, f"not A first, through its gate: {first}")
    w.wait_line(rf"pid {a.pid} .*released at its idle moment under its gate")
    wait_for(lambda: a.rss() <= rss[a.pid] - rss[a.pid] // 4, 20, "A's Rss to fall")
    time.sleep(1)
    check(w.count(r"asked pid|advised") == 1, f"one release only: {w.lines}")
    check(b.rss() >= rss[b.pid] * 0.95 and h.rss() >= rss[h.pid] * 0.95,
          f"B or C lost pages: {b.rss()} of {rss[b.pid]}, {h.rss()} of {rss[h.pid]}")
    check(held(a, b, h) <= budget + 64 * 1024, f"held {held(a, b, h)} > budget {budget}")
    text = wait_for(lambda: (lambda t: t if "ramforge_watch_budget_released_bytes_total" in t
                             and re.search(rf'released_bytes_total{{pid="{a.pid}".* [1-9]', t)
                             else None)(open(prom).read() if os.path.exists(prom) else ""),
                    10, "the release in the metrics file")
    check(re.search(rf"^ramforge_watch_budget_bytes {budget}$", text, re.M), "budget gauge")
    heldv = int(re.search(r"^ramforge_watch_budget_held_bytes (\d+)$", text, re.M).group(1))
    head = int(re.search(r"^ramforge_watch_budget_headroom_bytes (-?\d+)$", text, re.M).group(1))
    check(head == budget - heldv, f"headroom {head} != budget {budget} - held {heldv}")
    model_a = os.path.basename(a.model)
    check(re.search(rf'^ramforge_watch_budget_model_held_bytes{{pid="{a.pid}",model="{model_a}",'
                    rf'path="[^"]+",route="gate"}} \d+$', text, re.M), "A's held, route gate")
    check(re.search(rf'^ramforge_watch_budget_model_held_bytes{{pid="{h.pid}",.*route="advice"}}',
                    text, re.M), "C's held, route advice")
    check(re.search(rf'^ramforge_watch_budget_releases_total{{pid="{a.pid}",.*route="gate"}} 1$',
                    text, re.M), "A's one release through the gate")
    check(w.stop() == 0, "watch exit status")
    promtool_check_metrics(text)
    accepted = check_budget_report(c, rep, a)
    check_wake(a, a_prom, accepted)


def check_wake(a, prom, accepted):
    """A's first decode after its release is timed (the wake) in exec's metrics file, with
    the release and the bytes the kernel accepted."""
    def fam(text, name):
        m = re.search(rf"^{name}{{[^}}]*}} (\S+)$", text, re.M)
        return float(m.group(1)) if m else None
    before = open(prom).read()
    check(fam(before, "ramforge_exec_budget_releases_total") == 1 and
          fam(before, "ramforge_exec_budget_accepted_bytes_total") == accepted and
          fam(before, "ramforge_exec_budget_wakes_total") == 0,
          f"exec's budget figures after the release: {before}")
    t0 = time.monotonic()
    a.cmd("gen 2")
    took = time.monotonic() - t0
    text = wait_for(lambda: (lambda t: t if fam(t, "ramforge_exec_budget_wakes_total") == 1
                             else None)(open(prom).read()), 10, "the wake in exec's metrics")
    wake = fam(text, "ramforge_exec_budget_wake_seconds")
    check(wake and 0 < wake <= took, f"the wake {wake} s is not within the request's {took} s")
    print(f"wake after the release: {wake * 1e3:.1f} ms (exec_hold's gen 2: {took * 1e3:.1f} ms)")
    promtool_check_metrics(text)


def check_budget_report(c, rep, a):
    """A's session report (rewritten at its release): the budget's release as an application
    of its own, with what watch asked, what the kernel accepted, the mapping's Rss change and
    who asked; valid against the schema."""
    m = re.search(r"asked (\d+) bytes, the kernel accepted (\d+), the mapping's Rss fell by "
                  r"(\d+) bytes", open(c.path("a.err")).read())
    check(m, "exec's -v line of the release")
    asked, accepted, fell = (int(g) for g in m.groups())
    with open(rep) as f:
        doc = json.load(f)
    got = [x for x in doc["application"].get("boundaries", []) if x["boundary"] == "budget"]
    check(len(got) == 1, f"not one budget release in the report: {doc['application']}")
    x = got[0]
    check(x["attempted"] and x["accepted_bytes"] == accepted and
          x["requested_bytes"] >= accepted and x["observed_mapping_delta_bytes"] == -fell,
          f"the report's release {x} is not exec's (asked {asked}, accepted {accepted}, "
          f"fell by {fell})")
    check(x["requested_by"] and "watch --budget" in x["requested_by"] and
          f"asked {asked} bytes" in x["requested_by"], f"who asked: {x['requested_by']}")
    if c.schema:
        sys.path.insert(0, os.path.join(HERE, "..", "schema"))
        import validate_report
        errors = validate_report.validate(c.schema, rep)
        check(not errors, f"the report does not match the schema: {errors[:3]}")
    return accepted


@with_procs
def case_keep(c):
    """--keep A's pid: A is passed over, B (the next least recently active) gives."""
    a, b, h = three(c)
    rss = {x.pid: x.rss() for x in (a, b, h)}
    budget = sum(rss.values()) - rss[b.pid] // 2
    w = Watch(c, [a.pid, b.pid, h.pid], "--budget", str(budget), "--keep", str(a.pid))
    first = w.wait_line(r"^ramforge: budget .*: asked pid \d+")
    check(f"asked pid {b.pid} " in first, f"not B: {first}")
    w.wait_line(rf"pid {b.pid} .*released at its idle moment")
    time.sleep(1)
    check(a.rss() >= rss[a.pid] * 0.95, f"A (kept) lost pages: {a.rss()} of {rss[a.pid]}")
    check(w.count(rf"pid {a.pid} ") == 0, f"A named: {w.lines}")
    check(w.stop() == 0, "watch exit status")


@with_procs
def case_bare_advice(c):
    """Both exec'd kept (by model name and by pid): the bare one is advised, labelled
    advisory, and its Rss falls."""
    a, b, h = three(c)
    rss = {x.pid: x.rss() for x in (a, b, h)}
    budget = sum(rss.values()) - rss[h.pid] // 2
    w = Watch(c, [a.pid, b.pid, h.pid], "--budget", str(budget), "--keep",
              os.path.basename(a.model), "--keep", str(b.pid))
    line = w.wait_line(r"advised .* of pid \d+")
    check(f"of pid {h.pid} " in line and "advisory" in line and "not under exec" in line,
          f"not C by advice: {line}")
    m = re.search(r"advised (\S+ \S+) of .*the kernel accepted (\S+ \S+)\)", line)
    check(m and m.group(1) == m.group(2), f"the advised and accepted figures differ: {line}")
    check("idle " in line and "by its CPU time" in line, f"no idle time said: {line}")
    idle = float(re.search(r"idle ([0-9.]+) s by its CPU time", line).group(1))
    check(idle >= 1.0, f"a process busy within the last second was advised: {line}")
    wait_for(lambda: h.rss() <= rss[h.pid] - rss[h.pid] // 4, 20, "C's Rss to fall")
    check(a.rss() >= rss[a.pid] * 0.95 and b.rss() >= rss[b.pid] * 0.95, "A or B lost pages")
    check(w.stop() == 0, "watch exit status")


@with_procs
def case_gate_busy(c):
    """B decodes throughout: its request waits (its Rss stays) until the decodes stop, then
    is taken at its idle moment."""
    a = Hold(c, c.seeded(1), True, "a")
    b = Hold(c, c.seeded(2), True, "b", n_ctx=8192)
    for x in (a, b):
        x.cmd("gen 4")
    full = b.rss()
    budget = a.rss() + full // 2
    stop = threading.Event()
    answers = []

    def busy():
        while not stop.is_set() and sum(answers) < 7000:
            answers.append(len(b.cmd("gen 8").split()) - 1)
    t = threading.Thread(target=busy, daemon=True)
    t.start()
    w = Watch(c, [a.pid, b.pid], "--budget", str(budget), "--keep", str(a.pid))
    w.wait_line(rf"asked pid {b.pid} .*through exec's gate")
    t_end = time.monotonic() + 3
    while time.monotonic() < t_end:  # the decodes run: nothing may be released under them
        check(b.rss() >= full * 0.95, f"released during a decode: {b.rss()} of {full}")
        check(w.count(r"released at its idle moment") == 0, f"taken while busy: {w.lines}")
        time.sleep(0.1)
    check(t.is_alive(), f"the decodes stopped early ({sum(answers)} tokens): the case needs "
          "them running for the 3 s checked")
    stop.set()
    t.join(timeout=30)
    stopped = time.monotonic()
    w.wait_line(rf"pid {b.pid} .*released at its idle moment under its gate", timeout=20)
    check(time.monotonic() - stopped >= 0.9, "taken before a quiet second")
    wait_for(lambda: b.rss() <= full * 0.75, 20, "B's Rss to fall")
    check(w.stop() == 0, "watch exit status")


@with_procs
def case_quiet(c):
    """exec --budget-quiet-ms 2500: asked right after A's last decode, the release is taken
    no sooner than 2.5 s after it (the default would take it after 1 s)."""
    a = Hold(c, c.seeded(1), True, "a", exec_opts=("--budget-quiet-ms", "2500"))
    k = Hold(c, c.seeded(2), False, "c")
    for x in (k, a):
        x.cmd("gen 4")
    last = time.monotonic()  # A's last decode ended before its answer
    budget = k.rss() + a.rss() // 2
    w = Watch(c, [a.pid, k.pid], "--budget", str(budget), "--keep", str(k.pid))
    w.wait_line(rf"asked pid {a.pid} .*through exec's gate")
    w.wait_line(rf"pid {a.pid} .*released at its idle moment under its gate", timeout=20)
    took = time.monotonic() - last
    check(took >= 2.5, f"taken {took:.2f} s after the last decode, before the quiet 2.5 s")
    check(w.stop() == 0, "watch exit status")


@with_procs
def case_killed(c):
    """A killed while its gated request waits (a decode running): the watch says it exited
    before its release could be measured, once, and goes on."""
    a = Hold(c, c.seeded(1), True, "a", n_ctx=8192)
    b = Hold(c, c.seeded(2), False, "b")
    for x in (a, b):
        x.cmd("gen 4")
    budget = b.rss() + a.rss() // 2
    a.send("gen 6000")  # busy: the request cannot be taken
    w = Watch(c, [a.pid, b.pid], "--budget", str(budget), "--keep", str(b.pid))
    w.wait_line(rf"asked pid {a.pid} .*through exec's gate")
    os.kill(a.pid, signal.SIGKILL)
    a.p.wait(timeout=30)
    w.wait_line(rf"pid {a.pid} .*exited before its release of .* could be measured")
    time.sleep(1.5)
    check(w.count(rf"pid {a.pid} .*exited") == 1, f"said more than once: {w.lines}")
    check(w.p.poll() is None, "the watch stopped")
    check(w.stop() == 0, "watch exit status")


@with_procs
def case_shared(c):
    """Two bare processes map one file, the watch sees one: every page is mapped twice, the
    kernel's pageout skips them; the release moved nothing: said once, never asked again."""
    model = c.seeded(1)
    a = Hold(c, model, False, "a")
    b = Hold(c, model, False, "b")
    for x in (a, b):
        x.cmd("gen 4")
    full = a.rss()
    w = Watch(c, [a.pid], "--budget", str(full // 2))
    w.wait_line(rf"advised .* of pid {a.pid} ")
    w.wait_line(rf"pid {a.pid} .*moved .*not asked again until it holds more than")
    time.sleep(2)
    check(w.count(rf"advised .* of pid {a.pid} ") == 1, f"asked again: {w.lines}")
    check(w.count(r"not asked again") == 1, f"said more than once: {w.lines}")
    check(a.rss() >= full * 0.95, f"pages mapped twice were released: {a.rss()} of {full}")
    check(w.stop() == 0, "watch exit status")


@with_procs
def case_no_cap(c):
    """A watcher without CAP_SYS_NICE: process_madvise refuses; said once with the reason,
    not looped."""
    setpriv = shutil.which("setpriv")
    if not setpriv:
        raise Skip("setpriv (util-linux) is not installed")
    a = Hold(c, c.seeded(1), False, "a")
    a.cmd("gen 4")
    full = a.rss()
    w = Watch(c, [a.pid], "--budget", str(full // 2),
              prefix=(setpriv, "--inh-caps=-sys_nice", "--bounding-set=-sys_nice"))
    line = w.wait_line(rf"cannot advise pid {a.pid} ")
    check("Operation not permitted" in line and "CAP_SYS_NICE" in line, f"no reason: {line}")
    time.sleep(2)
    check(w.count(rf"cannot advise pid {a.pid} ") == 1, f"said or tried again: {w.lines}")
    check(a.rss() >= full * 0.95, "released without the capability")
    check(w.stop() == 0, "watch exit status")


@with_procs
def case_replaced(c):
    """The exec'd model's file replaced on disk: its engine cannot release (the file at the
    path is not the one mapped) and says so; the watch says it once and does not loop."""
    model = c.seeded(1)
    a = Hold(c, model, True, "a")
    a.cmd("gen 4")
    full = a.rss()
    shutil.copyfile(model, model + ".new")
    os.rename(model + ".new", model)
    w = Watch(c, [a.pid], "--budget", str(full // 2))
    w.wait_line(rf"asked pid {a.pid} .*through exec's gate")
    line = w.wait_line(rf"pid {a.pid} .*request \d+ failed at its idle moment", timeout=20)
    check("Stale file handle" in line, f"not the replaced file's reason: {line}")
    w.wait_line(rf"pid {a.pid} .*not asked again")
    time.sleep(2)
    check(w.count(rf"asked pid {a.pid} ") == 1, f"asked again: {w.lines}")
    check(w.stop() == 0, "watch exit status")


@with_procs
def case_cgroup(c):
    """--cgroup DIR: the process in that cgroup is watched and advised; one outside it, idler
    and larger, is not named."""
    outside = Hold(c, c.seeded(2), False, "outside")
    outside.cmd("gen 4")
    with memory_child_cgroup("rf-budget", 1 << 30) as enter:
        inside = Hold(c, c.seeded(1), False, "inside", preexec_fn=enter)
        inside.cmd("gen 4")
        full = inside.rss()
        w = Watch(c, [], "--cgroup", enter.cgroup, "--budget", str(full // 2))
        line = w.wait_line(r"advised .* of pid \d+")
        check(f"of pid {inside.pid} " in line, f"not the process in the cgroup: {line}")
        check(w.count(rf"pid {outside.pid} ") == 0, f"a process outside named: {w.lines}")
        check(w.stop() == 0, "watch exit status")
        inside.stop()


def in_own_pid_namespace(case):
    """Runs case in a pid namespace of its own (unshare --pid --fork --mount-proc: this
    driver again, as its pid 1), where no other process takes a pid meanwhile and
    /proc/sys/kernel/ns_last_pid chooses the next one."""
    def run(c):
        if os.getpid() == 1:
            return case(c)
        unshare = shutil.which("unshare")
        if not unshare:
            raise Skip("unshare (util-linux) is not installed")
        probe = subprocess.run([unshare, "--pid", "--fork", "--mount-proc", "true"],
                               capture_output=True, text=True)
        if probe.returncode != 0:
            raise Skip(f"cannot make a pid namespace: {probe.stderr.strip()}")
        rc = subprocess.run([unshare, "--pid", "--fork", "--mount-proc", sys.executable,
                             os.path.abspath(__file__), "--ramforge", c.rf,
                             case.__name__[5:]], env=c.env).returncode
        check(rc in (0, 77), f"the case in its pid namespace exited {rc}")
        return rc
    run.__doc__ = case.__doc__
    return run


def spawn_at(pid, fn):
    """fn() (a Popen) started with the pid given, through ns_last_pid (pid namespace's own)."""
    with open("/proc/sys/kernel/ns_last_pid", "w") as f:
        f.write(str(pid - 1))
    x = fn()
    check(x.pid == pid, f"the new process got pid {x.pid}, not {pid}")
    return x


@in_own_pid_namespace
@with_procs
def case_pid_reused(c):
    """A (exec'd, a request waiting behind its decode) is killed and its pid given to B (bare,
    another model, resident) while the watch is stopped: the watch says A gave its pid to
    another process, and never takes B for A (no request of A's looked for in B, B never
    asked or advised; with C kept, the budget is then met)."""
    a = Hold(c, c.seeded(1), True, "a", n_ctx=8192)
    k = Hold(c, c.seeded(2), False, "c")
    model_b = c.seeded(3)  # made now: its mkmodel would take the pid meant for B
    for x in (a, k):
        x.cmd("gen 4")
    budget = k.rss() + a.rss() // 2
    a.send("gen 6000")  # busy: the request waits
    w = Watch(c, [a.pid, k.pid], "--budget", str(budget), "--keep", str(k.pid))
    w.wait_line(rf"asked pid {a.pid} .*through exec's gate")
    w.p.send_signal(signal.SIGSTOP)  # no reading between A's exit and B's start
    pid = a.pid
    a.stop()
    b = spawn_at(pid, lambda: Hold(c, model_b, False, "b"))
    b.cmd("gen 4")
    full = wait_for(lambda: (lambda r: r if r and r > 10 * MiB else None)(b.rss()), 30,
                    "B resident")
    w.p.send_signal(signal.SIGCONT)
    w.wait_line(rf"pid {pid} \(small-1\.gguf\) gave its pid to another process before its "
                r"release of .* could be measured")
    time.sleep(1.5)
    check(w.count(rf"pid {pid} .*exited") == 0, f"said exited: {w.lines}")
    check(w.count(r"gone with its control channel") == 0, f"A's request looked for in B: {w.lines}")
    check(w.count(rf"(asked|advised .* of) pid {pid} ") == 1, f"B asked or advised: {w.lines}")
    check(w.count(r"gave its pid") == 1, f"said more than once: {w.lines}")
    check(b.rss() >= full * 0.95, f"B lost pages: {b.rss()} of {full}")
    check(w.p.poll() is None, "the watch stopped")
    check(w.stop() == 0, "watch exit status")


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith("case_")}

if __name__ == "__main__":
    run_main(CASES, Ctx, "ramforge-budget-")
