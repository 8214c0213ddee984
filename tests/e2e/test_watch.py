"""End-to-end tests of `ramforge watch`: running processes read from outside.

The watched processes are `ramforge serve`, llama-server built from the pin
(RF_LLAMA_SERVER; cases that need it skip with the reason when it is absent)
and small Python helpers that map a generated GGUF file as llama.cpp does
(PROT_READ, MAP_SHARED: an r--s mapping). Every figure the watcher prints is
checked against the kernel's own files read by the test (/proc/PID/smaps) or
util-linux's fincore, to the page. Every child is killed at the end.
"""
import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_util import (Failure, ModelCtx, Skip, check, check_no_null,  # noqa: E402
                      memory_child_cgroup, run_main, wait_for)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
from watch_cost import free_port, get as http_json, healthy as http_ok  # noqa: E402
from prom_util import prometheus_query, promtool_check_metrics  # noqa: E402

PAGE = os.sysconf("SC_PAGE_SIZE")
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
LLAMA_SERVER = os.environ.get("RF_LLAMA_SERVER", "")

# A process that maps the model read-only and shared, touches every page of the first
# TOUCH pages of its data (argv[2]), prints "ready" and waits for stdin to close.
MAPPER = r"""
import mmap, os, sys
path, touch, how = sys.argv[1], int(sys.argv[2]), sys.argv[3]
fd = os.open(path, os.O_RDONLY)
if how == "header":
    mm = mmap.mmap(fd, 4096, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
else:
    mm = mmap.mmap(fd, 0, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
s = sum(mm[i * 4096] for i in range(min(touch, len(mm) // 4096)))
print("ready", flush=True)
sys.stdin.read()
"""


@contextlib.contextmanager
def child(argv, ready, **kw):
    """A child process, waited for by ready(proc) (polled), always killed."""
    p = subprocess.Popen(argv, **kw)
    try:
        wait_for(lambda: p.poll() is not None or ready(p), 120, f"{argv[0]} to start")
        check(p.poll() is None, f"{argv} exited with {p.returncode}")
        yield p
    finally:
        if p.poll() is None:
            p.kill()
        p.wait()


def rf_serve(c, model):
    port = free_port()
    return port, child([c.rf, "serve", "-m", model, "--port", str(port), "-t", "1"],
                       lambda p: http_ok(f"http://127.0.0.1:{port}/health"),
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def llama_server(model):
    if not LLAMA_SERVER or not os.access(LLAMA_SERVER, os.X_OK):
        raise Skip(f"llama-server from the pin is not built (RF_LLAMA_SERVER={LLAMA_SERVER!r}; "
                   "scripts/build-llama-server.sh builds it)")
    port = free_port()
    return port, child([LLAMA_SERVER, "-m", model, "--host", "127.0.0.1", "--port", str(port),
                        "-c", "512", "-t", "1"],
                       lambda p: http_ok(f"http://127.0.0.1:{port}/health"),
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def mapper(path, touch, how="whole", **kw):
    return child([sys.executable, "-c", MAPPER, path, str(touch), how],
                 lambda p: p.stdout.readline().strip() == "ready",
                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, **kw)


def watch(c, *argv, rc=0, prefix=()):
    p = subprocess.run([*prefix, c.rf, "watch", *argv], capture_output=True, text=True,
                       timeout=300)
    check_no_null(p.stdout + p.stderr, "watch output")
    check(p.returncode == rc, f"watch {argv}: exit {p.returncode}, want {rc}: {p.stderr}")
    return p


def lines(c, p):
    docs = [json.loads(line) for line in p.stdout.splitlines()]
    if c.schema:
        import jsonschema
        with open(c.schema) as f:
            schema = json.load(f)
        for d in docs:
            jsonschema.validate(d, schema)
    return docs


def smaps_rss(pid, inode):
    """Rss of the pid's mappings of inode, from /proc/PID/smaps, bytes."""
    total, mine = 0, False
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            head = line.split()
            if len(head) >= 5 and "-" in head[0] and ":" in head[3]:
                mine = head[4] == str(inode)
            elif mine and line.startswith("Rss:"):
                total += int(head[1]) * 1024
    return total


def fincore_bytes(path):
    if not shutil.which("fincore"):
        raise Skip("fincore (util-linux) is not installed")
    out = subprocess.run(["fincore", "--bytes", "--noheadings", "--raw", "--output", "RES", path],
                         capture_output=True, text=True, check=True).stdout
    return int(out.split()[0])


def check_process(doc, model_path):
    """The line's model mapping Rss against smaps and its page cache against fincore."""
    check(doc["state"] == "running", f"pid {doc['pid']} running: {doc['state']} {doc['reason']}")
    models = [m for m in doc["models"] if os.path.realpath(m["path"]) == os.path.realpath(model_path)]
    check(len(models) == 1, f"pid {doc['pid']}: one model mapping of {model_path}: {doc['models']}")
    m = models[0]
    rss = smaps_rss(doc["pid"], m["inode"])
    check(m["mapping"]["rss_bytes"] == rss,
          f"pid {doc['pid']}: watch Rss {m['mapping']['rss_bytes']} vs smaps {rss}")
    check(m["mapped"]["resident_bytes"] is not None and m["mapped"]["provenance"] in ("pagemap_scan", "pagemap"),
          f"pagemap figure: {m['mapped']}")
    fc = fincore_bytes(model_path)
    check(m["file_page_cache"]["resident_bytes"] == fc,
          f"pid {doc['pid']}: watch page cache {m['file_page_cache']} vs fincore {fc}")
    check(sum(t["logical_bytes"] for t in m["tensors"]) == m["logical_bytes"], "tensor table sum")
    check(m["layers"] and m["layers"][-1]["layer"] == "other", f"layers: {m['layers'][:2]}")
    check(doc["anonymous"]["bytes"] is not None and "not split" in doc["anonymous"]["label"],
          "one anonymous figure, labelled")
    return m


def watch_all_json(c, want):
    """--all --once --json until every pid in want is listed idle; the figures to the page."""
    for attempt in range(3):  # a page may come or go between the two reads: read again
        docs = lines(c, watch(c, "--all", "--once", "--json"))
        check(docs[-1]["kind"] == "watch_all" and docs[-1]["processes"] == len(docs) - 1,
              f"--all's reading line last: {docs[-1]}")
        by_pid = {d["pid"]: d for d in docs[:-1]}
        for pid in want:
            check(pid in by_pid, f"--all lists pid {pid}: {sorted(by_pid)}")
        try:
            return [check_process(by_pid[pid], path) for pid, path in want.items()]
        except Failure:
            if attempt == 2:
                raise
    return None


def case_all_serve(c):
    model = c.model("small")
    port, srv = rf_serve(c, model)
    with srv as s:
        http_json(f"http://127.0.0.1:{port}/completion", {"prompt": "Hello", "n_predict": 4})
        watch_all_json(c, {s.pid: model})
        text = watch(c, "--once", str(s.pid)).stdout
        check("MODEL RSS" in text and "layer" in text and "not split" in text, text)


def case_all_llama_server(c):
    model = c.model("small")
    lport, ls = llama_server(model)
    port, srv = rf_serve(c, model)
    with ls as l, srv as s:
        http_json(f"http://127.0.0.1:{lport}/completion",
                  {"prompt": "Hello", "n_predict": 4, "temperature": 0})
        http_json(f"http://127.0.0.1:{port}/completion", {"prompt": "Hello", "n_predict": 4})
        watch_all_json(c, {l.pid: model, s.pid: model})


def case_prometheus(c):
    model = c.model("small")
    port, srv = rf_serve(c, model)
    wport = free_port()
    with srv as s:
        w = subprocess.Popen([c.rf, "watch", "--listen", f"127.0.0.1:{wport}", "-i", "0.5",
                              "--json", str(s.pid)], stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
        try:
            url = f"http://127.0.0.1:{wport}/metrics"
            wait_for(lambda: w.poll() is not None or http_ok(url), 60, "watch --listen")
            if w.poll() is not None:
                raise Failure(f"watch --listen exited: {w.stderr.read()}")
            body = wait_for(lambda: (t := urllib.request.urlopen(url, timeout=10).read().decode())
                            and "ramforge_watch_up{" in t and t, 60, "a reading on /metrics")
            # exec's and run's label convention: pid, model the file's name, path its path
            labels = f'pid="{s.pid}",model="{os.path.basename(model)}",' \
                     f'path="{os.path.realpath(model)}"'
            for name in ("ramforge_ledger_bytes", "ramforge_watch_up", "ramforge_watch_bytes"):
                check(f'{name}{{{labels}' in body, f"{name} without {{{labels}: {body[:800]}")
            # Pss and Locked are of the last smaps read (every 10 s): its age is beside them
            check(f'ramforge_watch_smaps_age_seconds{{{labels}}} ' in body,
                  f"no smaps age: {body[:800]}")
            promtool_check_metrics(body)
            res = prometheus_query(c.tmp, f"127.0.0.1:{wport}",
                                   f'ramforge_ledger_bytes{{category="FileBackedResident",'
                                   f'pid="{s.pid}"}}')
            check(int(res[0]["value"][1]) > 0, f"query result: {res}")
            print(f"prometheus: {res[0]['metric']['__name__']} = {res[0]['value'][1]}")
        finally:
            w.terminate()
            w.wait(30)


def case_release_idle(c):
    model = c.model("small")
    try:
        port, srv = llama_server(model)
        kind = "llama-server"
    except Skip as e:
        print(f"note: {e}; the release is checked on ramforge serve instead")
        port, srv = rf_serve(c, model)
        kind = "ramforge serve"
    body = {"prompt": "Hello my name is", "n_predict": 8, "temperature": 0, "cache_prompt": False}
    with srv as s:
        before = http_json(f"http://127.0.0.1:{port}/completion", body)["content"]
        target = 2 << 20
        docs = lines(c, watch(c, "--json", "-i", "0.25", "-n", "40", "--release-idle", "0.5",
                              "--memory-target", str(target), str(s.pid)))
        rel = [d["release"] for d in docs if d["release"]]
        check(rel, f"{kind}: no release in {len(docs)} readings")
        r = rel[0]
        check(r["accepted_bytes"] > 0 and r["requested_bytes"] >= r["accepted_bytes"], str(r))
        check("no gate" in r["guarantee"], r["guarantee"])
        inode = docs[-1]["models"][0]["inode"]
        rss = smaps_rss(s.pid, inode)
        check(rss <= target, f"{kind}: model mapping Rss {rss} above the target {target}: {rel}")
        after = http_json(f"http://127.0.0.1:{port}/completion", body)["content"]
        check(after == before, f"{kind}: tokens changed: {before!r} vs {after!r}")
        print(f"{kind}: Rss {r['rss_before_bytes']} -> {rss} (target {target}); requested "
              f"{r['requested_bytes']}, accepted {r['accepted_bytes']}, observed "
              f"{r['observed_delta_bytes']}; tokens identical")


def case_robust(c):
    model = c.model("small")
    with mapper(model, 64) as a, mapper(model, 16) as b:
        w = subprocess.Popen([c.rf, "watch", "--json", "-i", "0.2", "-n", "200", str(a.pid),
                              str(b.pid)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
        try:
            first = json.loads(w.stdout.readline())
            check(first["state"] == "running" and first["models"], str(first)[:300])
            a.kill()
            a.wait()
            seen = {}

            def gone():
                d = json.loads(w.stdout.readline())
                seen[d["pid"]] = d
                return seen.get(a.pid, {}).get("state") == "exited" and \
                    seen.get(b.pid, {}).get("reading", 0) > seen[a.pid]["reading"]
            wait_for(gone, 60, "the exited process's line, then the other's next reading")
            check(seen[b.pid]["state"] == "running", "the rest go on")
        finally:
            w.kill()
            w.wait()


# Run as pid 1 of a new pid namespace (unshare --pid --fork --mount-proc): the watched
# process is killed and its pid given to a new one (ns_last_pid) between two readings.
REUSE = r"""
import json, subprocess, sys
rf, model, mapper = sys.argv[1], sys.argv[2], sys.argv[3]
def start():
    p = subprocess.Popen([sys.executable, "-c", mapper, model, "4", "whole"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    return p
a = start()
w = subprocess.Popen([rf, "watch", "--json", "-i", "2", "-n", "3", str(a.pid)],
                     stdout=subprocess.PIPE, text=True)
first = json.loads(w.stdout.readline())
a.kill()
a.wait()
with open("/proc/sys/kernel/ns_last_pid", "w") as f:
    f.write(str(a.pid - 1))
b = start()
out = [first] + [json.loads(line) for line in w.stdout]
w.wait()
print(json.dumps({"a": a.pid, "b": b.pid, "lines": out}))
b.kill()
"""


def case_pid_reused(c):
    if os.geteuid() != 0 or not shutil.which("unshare"):
        raise Skip("needs root and unshare (util-linux): a pid namespace to reuse a pid in")
    model = c.model("small")
    p = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c",
                        REUSE, c.rf, model, MAPPER], capture_output=True, text=True, timeout=120)
    if p.returncode != 0 and "unshare failed" in p.stderr:
        raise Skip(f"cannot create a pid namespace: {p.stderr.strip()}")
    check(p.returncode == 0, f"pid reuse driver: {p.stderr}")
    r = json.loads(p.stdout)
    check(r["a"] == r["b"], f"the pid was not reused: {r['a']} then {r['b']}")
    states = [d["state"] for d in r["lines"]]
    check(states[0] == "running" and states[1] == "pid_reused" and len(states) == 2,
          f"readings: {states}")
    check(r["lines"][1]["models"] == [] and "start time" in r["lines"][1]["reason"],
          str(r["lines"][1])[:300])


def case_no_mmap(c):
    model = c.model("small")
    with mapper(model, 1, "header") as m:
        doc = lines(c, watch(c, "--once", "--json", str(m.pid)))[0]
        check(len(doc["models"]) == 1, str(doc["models"])[:300])
        mm = doc["models"][0]
        check(mm["mapped"]["resident_bytes"] is None and "not mmap'd" in mm["mapped"]["reason"],
              f"weights not mapped: {mm['mapped']}")


def case_replaced(c):
    model = c.model("small")
    path = os.path.join(c.tmp, "replaced.gguf")
    shutil.copyfile(model, path)
    with mapper(path, 32) as m:
        other = path + ".new"
        shutil.copyfile(model, other)
        os.replace(other, path)
        doc = lines(c, watch(c, "--once", "--json", str(m.pid)))[0]
        mm = doc["models"][0]
        check(mm["replaced_on_disk"] and not mm["deleted"] or mm["deleted"], str(mm)[:300])
        rss = smaps_rss(m.pid, mm["inode"])
        check(mm["mapping"]["rss_bytes"] == rss and mm["mapped"]["resident_bytes"] is not None,
              f"figures of the mapped file: {mm['mapping']} {mm['mapped']} (smaps {rss})")


def case_nonroot(c):
    if os.geteuid() != 0:
        raise Skip("needs root: the watched process must belong to another user")
    if not shutil.which("setpriv"):
        raise Skip("setpriv (util-linux) is not installed")
    model = c.model("small")
    with mapper(model, 8) as m:
        p = subprocess.run([*NOBODY, c.rf, "watch", "--once", "--json", str(m.pid)],
                           capture_output=True, text=True)
        if p.returncode != 0 and "ermission" in p.stderr and not p.stdout:
            raise Skip(f"uid 65534 cannot run {c.rf}: {p.stderr.strip()}")
        check(p.returncode == 0, p.stderr)
        doc = json.loads(p.stdout.splitlines()[0])
        check(doc["maps_reason"] and doc["models"] == [],
              f"another user's mappings: unknown with the reason: {doc['maps_reason']}")
        text = watch(c, "--once", str(m.pid), prefix=NOBODY).stdout
        check(" ? " in text or "denied" in text.lower(), text)


def case_cgroup(c):
    """A process in a child cgroup with a hard limit: that level binds, and the room before its
    OOM kill is limit - usage + reclaimable cache there, named by its directory."""
    model = c.model("small")
    limit = 512 << 20
    with memory_child_cgroup("rf-watch", limit) as enter, mapper(model, 64,
                                                                   preexec_fn=enter) as m:
        doc = lines(c, watch(c, "--once", "--json", str(m.pid)))[0]
        cg = doc["cgroup"]
        check(cg["levels"] and cg["levels"][0]["dir"].endswith(os.path.basename(enter.cgroup)),
              f"the process's own cgroup first: {cg['levels'][:1]}")
        own = cg["levels"][0]
        check(own["limit_bytes"] == limit and not own["unlimited"], str(own))
        with open(os.path.join(enter.cgroup, "memory.usage_in_bytes")) as f:
            usage = int(f.read())
        check(abs(own["usage_bytes"] - usage) <= 1 << 20, f"usage {own} vs {usage}")
        check(cg["binding"] == own["dir"], f"binding {cg['binding']}")
        check(cg["room_before_oom_bytes"] ==
              limit - own["usage_bytes"] + own["reclaimable_bytes"], str(cg))
        check(own["oom_kill"] == 0, str(own))


def case_badinput(c):
    for argv, needle in [((), "no PID"), (("--all", "1"), "--all takes no PID"),
                         (("-i", "0", "1"), "--interval"), (("x1",), "PID"),
                         (("--release-idle", "1", "1"), "--memory-target"),
                         (("--memory-target", "1M", "1"), "--release-idle"),
                         (("--release-idle", "1", "--memory-target", "1M", "--once", "1"),
                          "more than one reading"),
                         (("--release-mode", "x", "1"), "--release-mode"),
                         (("--listen", "nohost", "1"), "--listen")]:
        p = watch(c, *argv, rc=2)
        check(needle in p.stderr and p.stderr.count("\n") == 2 and not p.stdout,
              f"{argv}: {p.stderr!r}")
    p = watch(c, "--once", "4194304", rc=1)
    check("no process 4194304" in p.stderr, p.stderr)


def metric_value(text, series):
    """The value of the series (its name and labels, exactly as written) in text, or None."""
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line.split()[-1])
    return None


def case_metrics_file_fault(c):
    """The textfile directory removed (a redeploy, a full disk): one warning, the failures
    counted, the reading and the endpoint go on, the file written again when it can be."""
    model = c.model("small")
    d = c.path("textfile")
    os.mkdir(d)
    path = os.path.join(d, "ramforge.prom")
    wport = free_port()
    url = f"http://127.0.0.1:{wport}/metrics"
    errors = "ramforge_watch_metrics_file_errors_total"
    with mapper(model, 8) as m:
        w = subprocess.Popen([c.rf, "watch", "-i", "0.2", "--json", "--metrics-file", path,
                              "--listen", f"127.0.0.1:{wport}", str(m.pid)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            wait_for(lambda: w.poll() is not None or os.path.exists(path), 60, "the first file")
            if w.poll() is not None:
                raise Failure(f"watch exited {w.returncode}: {w.stderr.read()}")
            with open(path) as f:
                first = f.read()
            shutil.rmtree(d)

            def failed_often():
                try:
                    body = urllib.request.urlopen(url, timeout=10).read().decode()
                except OSError as e:
                    try:
                        w.wait(10)  # the endpoint went away: has the watch exited?
                    except subprocess.TimeoutExpired:
                        raise Failure(f"/metrics unanswered while the watch runs: {e}")
                    body = ""
                if w.poll() is not None:
                    raise Failure(f"watch exited {w.returncode} at a failed write: "
                                  f"{w.stderr.read()}")
                v = metric_value(body, errors)
                return v is not None and v >= 5 and body
            body = wait_for(failed_often, 60, "five failed writes counted on /metrics")
            check(f'ramforge_watch_up{{pid="{m.pid}"' in body, "the readings go on")
            os.mkdir(d)
            wait_for(lambda: os.path.exists(path), 60, "the file written again")
            with open(path) as f:
                text = f.read()
            check(metric_value(first, errors) == 0, f"{errors} 0 in the first file")
            check(metric_value(text, errors) >= 5, f"the file counts the failures: {text[-300:]}")
        finally:
            w.terminate()
            w.wait(30)
        err = w.stderr.read()
        check(w.returncode == 0, f"watch after SIGTERM: exit {w.returncode}: {err}")
        warn = [line for line in err.splitlines() if "cannot write" in line]
        check(len(warn) == 1 and warn[0].startswith("ramforge: warning: cannot write " + path),
              f"one warning for the whole outage, not one per reading: {err!r}")
        again = [line for line in err.splitlines() if "written again" in line]
        check(len(again) == 1 and again[0].endswith(
            f"written again after {metric_value(text, errors):.0f} failed writes"),
            f"one line when written again, the outage's failures counted: {err!r}")
        print(f"{warn[0]}\n{errors} in the file written again: {metric_value(text, errors):.0f}")


def nobody_dir(c):
    """A folder in c.tmp that uid 65534 may write."""
    os.chmod(c.tmp, 0o755)
    d = c.path("nobody")
    os.mkdir(d)
    os.chmod(d, 0o777)
    return d


def case_all_unreadable(c):
    """--all as an unprivileged user: the processes it could not read are counted with the
    reason (text, JSON, metrics), not left out as if none mapped a model."""
    if os.geteuid() != 0:
        raise Skip("needs root: the processes must belong to another user")
    if not shutil.which("setpriv"):
        raise Skip("setpriv (util-linux) is not installed")
    model = c.model("small")
    prom = os.path.join(nobody_dir(c), "watch.prom")
    with mapper(model, 8) as m:
        p = subprocess.run([*NOBODY, c.rf, "watch", "--all", "--once"], capture_output=True,
                           text=True)
        if p.returncode != 0 and "ermission" in p.stderr and not p.stdout:
            raise Skip(f"uid 65534 cannot run {c.rf}: {p.stderr.strip()}")
        check(p.returncode == 0, p.stderr)
        text = p.stdout
        check(f"\n{m.pid:7d} " not in text, "root's mapper is not readable by uid 65534")
        head = text.splitlines()[1]
        check(head.startswith("not read: ") and "(Permission denied: " in head and
              "another user's processes need root" in head, f"the view says it: {text}")
        n = int(head.split()[2])
        docs = lines(c, watch(c, "--all", "--once", "--json", prefix=NOBODY))
        a = docs[-1]
        check(a["kind"] == "watch_all" and a["unreadable_processes"] >= 1 and
              a["unreadable"][0]["reason"] == "Permission denied" and a["note"],
              f"the JSON says it: {a}")
        watch(c, "--all", "--once", "--metrics-file", prom, prefix=NOBODY)
        with open(prom) as f:
            body = f.read()
        v = metric_value(body, 'ramforge_watch_unreadable_processes{reason="Permission denied"}')
        check(v is not None and v >= 1, f"the metric says it: {body[-600:]}")
        promtool_check_metrics(body)
        print(f"{head}\nJSON unreadable_processes {a['unreadable_processes']}, metric {v:.0f}"
              f" (view {n})")


# A process that maps the model, touches TOUCH pages, prints "ready" and keeps a CPU busy.
BUSY = MAPPER.replace("sys.stdin.read()", "while True:\n    s += 1")

# Run in a mount namespace of its own (unshare --mount): after the first reading, the watched
# process's /proc/PID/stat is covered by a file that cannot be parsed (as a kernel or a
# security module that refuses it would leave it unreadable).
STAT_HIDDEN = r"""
import json, subprocess, sys
rf, pid, garbage = sys.argv[1:4]
w = subprocess.Popen([rf, "watch", "--json", "-i", "0.2", "-n", "20", "--release-idle", "0.6",
                      "--memory-target", "4096", pid], stdout=subprocess.PIPE, text=True)
first = json.loads(w.stdout.readline())
subprocess.run(["mount", "--bind", garbage, f"/proc/{pid}/stat"], check=True)
out = [first] + [json.loads(line) for line in w.stdout]
w.wait()
print(json.dumps({"rc": w.returncode, "lines": out}))
"""


def case_stat_unreadable(c):
    """A busy process whose /proc/PID/stat cannot be read: its idle state is unknown, never
    idle, so --release-idle advises nothing."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        raise Skip("needs root and unshare (util-linux): a mount namespace to cover "
                   "/proc/PID/stat in")
    model = c.model("small")
    garbage = c.path("stat")
    with open(garbage, "w") as f:
        f.write("not a stat line\n")
    with child([sys.executable, "-c", BUSY, model, "64", "whole"],
               lambda p: p.stdout.readline().strip() == "ready",
               stdout=subprocess.PIPE, text=True) as b:
        p = subprocess.run(["unshare", "--mount", "--propagation", "private", sys.executable,
                            "-c", STAT_HIDDEN, c.rf, str(b.pid), garbage],
                           capture_output=True, text=True, timeout=120)
        if p.returncode != 0 and "unshare failed" in p.stderr:
            raise Skip(f"cannot create a mount namespace: {p.stderr.strip()}")
        check(p.returncode == 0, f"driver: {p.stderr}")
        r = json.loads(p.stdout)
        docs = r["lines"]
        check(r["rc"] == 0 and len(docs) == 20, f"watch exit {r['rc']}, {len(docs)} lines")
        released = [d["reading"] for d in docs if d["release"]]
        check(not released, f"a busy process was advised at readings {released}")
        check(docs[0].get("idle_seconds") is not None, f"first reading: {docs[0]}")
        # from the first reading after the mount on, idle is unknown with the reason
        after = [i for i, d in enumerate(docs) if d["idle_seconds"] is None]
        check(len(after) >= 5 and after == list(range(after[0], len(docs))) and
              all(d["state"] == "running" and "/stat: " in d["idle_reason"]
                  for d in docs[after[0]:]),
              f"idle unknown once stat is unreadable: {[d['idle_seconds'] for d in docs]} "
              f"{docs[-1]['idle_reason']}")
        print(f"{len(docs)} readings, none advised; {docs[-1]['idle_reason']}")


def case_deleted(c):
    """A model file unlinked while mapped: the view and the Prometheus labels say deleted."""
    model = c.model("small")
    path = c.path("deleted.gguf")
    shutil.copyfile(model, path)
    with mapper(path, 16) as m:
        os.unlink(path)
        text = watch(c, "--once", str(m.pid)).stdout
        check(f"{path} (deleted)\n" in text, f"the view: {text}")
        prom = c.path("deleted.prom")
        watch(c, "--once", "--metrics-file", prom, str(m.pid))
        with open(prom) as f:
            body = f.read()
        check(f'ramforge_watch_up{{pid="{m.pid}",model="deleted.gguf",path="{path}",'
              f'deleted="true"}} 1' in body, f"the labels: {body[:600]}")
        doc = lines(c, watch(c, "--once", "--json", str(m.pid)))[0]
        check(doc["models"][0]["deleted"], "the JSON")

CASES = {"watch_all_serve": case_all_serve, "watch_all_llama_server": case_all_llama_server,
         "watch_prometheus": case_prometheus, "watch_release_idle": case_release_idle,
         "watch_robust": case_robust, "watch_no_mmap": case_no_mmap,
         "watch_replaced": case_replaced, "watch_nonroot": case_nonroot,
         "watch_cgroup": case_cgroup, "watch_pid_reused": case_pid_reused,
         "watch_badinput": case_badinput, "watch_metrics_file_fault": case_metrics_file_fault,
         "watch_all_unreadable": case_all_unreadable,
         "watch_stat_unreadable": case_stat_unreadable, "watch_deleted": case_deleted}

if __name__ == "__main__":
    run_main(CASES, ModelCtx, "rf-watch-")
