#!/usr/bin/env python3
"""End-to-end tests of persisted access profiles (run --profile): the round trip and the
cold-first release order from the profile, a copy of the model accepted, another model
refused, a format-version mismatch, truncated / corrupt / oversized files rejected and
left untouched, saves into a read-only or full filesystem failing with the old file
intact, kill -9 during runs leaving the old or the new file, the history bounded at N.

Usage: test_profile.py --ramforge BIN --schema SCHEMA CASE
"""
import hashlib
import json
import os
import random
import shutil
import signal
import stat
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "schema"))
from e2e_util import SKIP, Skip, check, run_main, run_ramforge, wait_for  # noqa: E402
import validate_report  # noqa: E402

PROMPT = "Hello my name is"


class Ctx:
    def __init__(self, args, tmp):
        self.rf = args.ramforge
        self.schema = args.schema
        self.profile_schema = os.path.join(os.path.dirname(args.schema),
                                           "access_profile.schema.json")
        self.tmp = tmp
        self.models = {}
        self.n = 0

    def run(self, *argv, check_rc=0, **kw):
        return run_ramforge(self.rf, argv, check_rc, **kw)

    def model(self, preset="tiny", seed=42):
        key = (preset, seed)
        if key not in self.models:
            path = os.path.join(self.tmp, f"{preset}-{seed}.gguf")
            self.run("mkmodel", "--preset", preset, "--type", "q8_0", "--seed", str(seed),
                     "-o", path)
            self.models[key] = path
        return self.models[key]

    def profiled(self, model, profile, *extra, check_rc=0):
        """run with --profile; returns (report, process)."""
        self.n += 1
        path = os.path.join(self.tmp, f"report-{self.n}.json")
        p = self.run("run", "-m", model, "-p", PROMPT, "-n", "4", "--residency-policy",
                     "reuse-aware", "--memory-target", "2MiB", "--observe-dispatch",
                     "--staging-budget", "1MiB", "--profile", profile,
                     "--residency-report-json", path, *extra, check_rc=check_rc)
        errors = validate_report.validate(self.schema, path)
        check(not errors, f"report does not match the schema: {errors[:3]}")
        with open(path) as f:
            return json.load(f), p

    def check_profile_file(self, path):
        try:
            import jsonschema
        except ImportError:
            raise Skip("python3-jsonschema is not installed")
        with open(path) as f:
            doc = json.load(f)
        with open(self.profile_schema) as f:
            jsonschema.validate(doc, json.load(f))
        return doc


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def warning_lines(p):
    return [ln for ln in p.stderr.splitlines() if "profile" in ln and ln.startswith("ramforge:")]


def case_round_trip(c):
    """Twice: the second report uses the persisted profile (source, identity), its release
    order is the profile's cold-first order, the prediction counters are there; the file
    round-trips through the schema; --profile-history 2 keeps two entries."""
    model, prof = c.model("small"), os.path.join(c.tmp, "p.json")
    first, _ = c.profiled(model, prof, "--profile-history", "2")
    pers = first["profile"]["persisted"]
    check(not pers["used"] and "does not exist" in pers["reason"] and pers["saved"],
          f"first run: {pers}")
    ident = pers["identity"]
    check(ident and ident.startswith("sha256:"), f"identity {ident}")
    doc = c.check_profile_file(prof)
    check(doc["identity"] == ident and doc["operations"] == 1, "saved profile")
    check(doc["file_size_bytes"] == os.path.getsize(model), "file size in the profile")
    second, _ = c.profiled(model, prof, "--profile-history", "2")
    p2 = second["profile"]
    check(p2["persisted"]["used"] and p2["profile_used"] is True, f"second run: {p2}")
    check(p2["source"].startswith("persisted profile") and ident in p2["source"],
          f"source {p2['source']}")
    check(p2["persisted"]["identity"] == ident, "identity")
    # Release order: cold first. The tensors the profile never saw used come first, then by
    # latest first use; the report's access_names are that order.
    never = [t["name"] for t in doc["tensors"] if t["first_rank"] is None or t["accesses"] == 0]
    used = sorted((t for t in doc["tensors"] if t["first_rank"] is not None and t["accesses"]),
                  key=lambda t: -t["first_rank"])
    names = p2["access_names"]
    check(set(names[:len(never)]) == set(never[:len(names)]),
          f"never-used tensors first: {names[:len(never)]} vs {never}")
    rest = names[len(never):]
    check(rest == [t["name"] for t in used][:len(rest)], f"then latest first use: {rest[:5]}")
    sel = second["plan"]["selected"]
    check(sel and second["plan"]["profile_used"], f"plan: {second['plan']['reason']}")
    pred = second["prediction"]
    check(pred["release_authorized"] is False and pred["reason"] is None, f"prediction {pred}")
    # llama.cpp's load faulted every page in: the staging skips wholly resident tensors, so
    # it has no candidate and selects nothing; the counters still add up.
    sb = pred["selected_bytes"]["value"]
    check(second["staging"]["candidate_count"] == 0 and sb == 0,
          f"staging after a load should skip the resident tensors: {second['staging']}")
    check(pred["hit_bytes"]["value"] + pred["wasted_bytes"]["value"] == sb,
          f"hit + wasted == selected: {pred}")
    check(pred["hit_bytes"]["value"] + pred["miss_bytes"]["value"] +
          pred["unknown_bytes"]["value"] <= pred["used_bytes"]["value"], "used bounds")
    for k in ("profile_load_ns", "history_load_ns", "prediction_ns"):
        check(second["timing"][k] is not None, f"timer {k} not set")
    c.profiled(model, prof, "--profile-history", "2")
    doc = c.check_profile_file(prof)
    check(len(doc["history"]) == 2 and doc["operations"] == 3,
          f"history bounded at 2: {len(doc['history'])}, operations {doc['operations']}")
    check([h["operation"] for h in doc["history"]] == [2, 3], "the newest entries kept")


def case_copy_and_other_model(c):
    """The same file copied elsewhere keeps its identity (accepted); another model (another
    tensor table) is refused with the reason and its profile is left byte for byte."""
    model, prof = c.model("small"), os.path.join(c.tmp, "p.json")
    c.profiled(model, prof)
    os.mkdir(os.path.join(c.tmp, "elsewhere"))
    copy = os.path.join(c.tmp, "elsewhere", "renamed.gguf")
    shutil.copyfile(model, copy)
    doc, _ = c.profiled(copy, prof)
    check(doc["profile"]["persisted"]["used"], f"copy refused: {doc['profile']['persisted']}")
    before = digest(prof)
    other, p = c.profiled(c.model("tiny"), prof)
    pers = other["profile"]["persisted"]
    check(not pers["used"] and "another model" in pers["reason"], f"other model: {pers}")
    check(other["profile"]["profile_used"] is not True or
          not other["profile"]["source"].startswith("persisted"), "not used")
    check(not pers["saved"] and digest(prof) == before, "another model's profile overwritten")
    lines = warning_lines(p)
    check(len(lines) >= 1 and "another model" in lines[0], f"one clear line: {p.stderr}")


def case_rejected_files(c):
    """A format-version mismatch, a truncated, a corrupt and an oversized file: rejected with
    one line, the run goes on without it, the file is left as it was."""
    model, prof = c.model("tiny"), os.path.join(c.tmp, "p.json")
    c.profiled(model, prof)
    with open(prof) as f:
        good = f.read()
    doc = json.loads(good)
    doc["format_version"] = 2
    variants = {
        "format version 2": json.dumps(doc),
        "not a JSON document": good[:len(good) // 2],
        "not a JSON document ": "\x00\x01garbage{",
        "larger than": " " * (16 * 1024 * 1024 + 1),
    }
    for needle, text in variants.items():
        with open(prof, "w") as f:
            f.write(text)
        before = digest(prof)
        rep, p = c.profiled(model, prof)
        pers = rep["profile"]["persisted"]
        check(not pers["used"] and needle.strip() in pers["reason"], f"{needle}: {pers}")
        check(digest(prof) == before, f"{needle}: the file was changed")
        lines = warning_lines(p)
        check(len(lines) == 2 and needle.strip() in lines[0] and "not saved" in lines[1],
              f"{needle}: expected the rejection line and the not-saved line: {lines}")


def sh(*argv):
    return subprocess.run(argv, capture_output=True, text=True)


def case_save_fails(c):
    """Saving into a full tiny tmpfs and into a read-only one fails (exit 1, one line) and
    leaves the old file intact. Needs root (mount); always unmounts."""
    if os.geteuid() != 0:
        raise Skip("not root: cannot mount a tmpfs")
    model = c.model("tiny")
    mnt = os.path.join(c.tmp, "mnt")
    os.mkdir(mnt)
    r = sh("mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", mnt)
    if r.returncode != 0:
        raise Skip(f"mount tmpfs failed: {r.stderr.strip()}")
    try:
        prof = os.path.join(mnt, "p.json")
        c.profiled(model, prof)
        before = digest(prof)
        filler = os.path.join(mnt, "filler")
        fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o644)  # fill the filesystem
        try:
            while os.write(fd, b"\0" * 4096) > 0:
                pass
        except OSError:
            pass
        finally:
            os.close(fd)
        rep, p = c.profiled(model, prof, check_rc=1)
        check(digest(prof) == before, "full filesystem: the old file changed")
        check(not rep["profile"]["persisted"]["saved"] and
              "previous file is left" in rep["profile"]["persisted"]["save_reason"],
              f"full: {rep['profile']['persisted']}")
        check(any("cannot save profile" in ln and "No space" in ln for ln in p.stderr.splitlines()),
              f"full: {p.stderr}")
        os.unlink(filler)
        r = sh("mount", "-o", "remount,ro", mnt)
        check(r.returncode == 0, f"remount ro: {r.stderr}")
        rep, p = c.profiled(model, prof, check_rc=1)
        check(digest(prof) == before, "read-only: the old file changed")
        check(any("cannot save profile" in ln and "Read-only" in ln
                  for ln in p.stderr.splitlines()), f"read-only: {p.stderr}")
    finally:
        for _ in range(20):
            if sh("umount", mnt).returncode == 0:
                break
            time.sleep(0.2)


def case_kill9(c):
    """kill -9 at random points of runs that save the profile: the file is always the old or
    a new complete document (it parses, matches the schema), never a mix. The save window
    is short, so most kills land elsewhere; every outcome is checked."""
    model, prof = c.model("tiny"), os.path.join(c.tmp, "p.json")
    c.profiled(model, prof)
    t0 = time.monotonic()
    c.profiled(model, prof)
    dur = time.monotonic() - t0
    rng = random.Random(7)
    seen = set()
    for i in range(12):
        before = open(prof, "rb").read()
        argv = [c.rf, "run", "-m", model, "-p", PROMPT, "-n", "4", "--residency-policy",
                "reuse-aware", "--memory-target", "2MiB", "--observe-dispatch", "--profile", prof]
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.5, 1.0) * dur)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        after = open(prof, "rb").read()
        doc = c.check_profile_file(prof)  # parses and matches the schema: not a mix
        seen.add("old" if after == before else "new")
        check(after == before or doc["operations"] == json.loads(before)["operations"] + 1,
              "a new file must be the next complete save")
    print(f"kill -9 outcomes: {sorted(seen)}")


def idle_boundaries(port):
    """serve's count of idle boundaries run, from its /props."""
    import http.client
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("GET", "/props")
    r = conn.getresponse()
    check(r.status == 200, f"/props: {r.status}")
    props = json.loads(r.read())["residency"]
    conn.close()
    return props["idle_boundaries"]


def case_serve_wakeup(c):
    """serve --profile: the persisted profile is used, the idle release (pageout) and the
    wake-up staging run, every request's trace updates it and its prediction joins the
    history; saved at SIGTERM. The wake-up entry's page counters add up."""
    import http.client
    model = c.model("small")
    copy = os.path.join(c.tmp, "copy.gguf")
    shutil.copyfile(model, copy)
    with open(copy, "rb+") as f:
        os.fsync(f.fileno())  # clean pages: pageout skips dirty ones
    prof = os.path.join(c.tmp, "p.json")
    c.profiled(copy, prof)
    ops0 = c.check_profile_file(prof)["operations"]
    proc = subprocess.Popen([c.rf, "serve", "-m", copy, "--port", "0", "--residency-policy",
                             "reuse-aware", "--memory-target", "2MiB", "--release-mode",
                             "pageout", "--idle-seconds", "1", "--staging-budget", "4MiB",
                             "--profile", prof, "--profile-save-every", "1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stderr.readline()
        check("serving" in line, f"serve did not start: {line}")
        port = int(line.rsplit(":", 1)[1].strip().strip("/"))
        for i in range(2):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            conn.request("POST", "/completion", body=json.dumps(
                {"prompt": PROMPT, "n_predict": 4, "temperature": 0}))
            check(conn.getresponse().status == 200, "request failed")
            conn.close()
            if i == 0:
                # the idle boundary: cold-first release, pageout
                wait_for(lambda: idle_boundaries(port) >= 1, 30, "an idle boundary of serve")
            doc = c.check_profile_file(prof)  # saved after every request
            check(doc["operations"] == ops0 + i + 1, f"request {i}: {doc['operations']}")
    finally:
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=60)
        err = proc.stderr.read()
    check(rc == 0, f"serve exited {rc}: {err[-1000:]}")
    doc = c.check_profile_file(prof)
    h = doc["history"][-1]
    staged = h["hit_pages"] + h["wasted_pages"]
    check(h["selected_bytes"] > 0 and staged * h["page_bytes"] == h["selected_bytes"],
          f"the wake-up staged: {h}")
    check(h["resident_staged_pages"] <= staged and
          h["hit_pages"] + h["miss_pages"] + h["unknown_pages"] <= h["used_pages"],
          f"counters: {h}")
    check(h["accepted_bytes"] is not None, f"the prefetch ran: {h}")


def case_fifo(c):
    """--profile naming a FIFO (or a directory): refused with one line at once, without
    waiting in open(2) for a writer; the run goes on and the path is left as it is."""
    model = c.model("tiny")
    fifo, d = os.path.join(c.tmp, "p.fifo"), os.path.join(c.tmp, "pdir")
    os.mkfifo(fifo)
    os.mkdir(d)
    for path in (fifo, d):
        rep, p = c.profiled(model, path)  # run_ramforge's timeout: a blocked open fails
        pers = rep["profile"]["persisted"]
        check(not pers["used"] and "not a regular file" in pers["reason"], f"{path}: {pers}")
        lines = warning_lines(p)
        check(len(lines) == 2 and "not a regular file" in lines[0] and "not saved" in lines[1],
              f"{path}: expected the rejection line and the not-saved line: {lines}")
    check(stat.S_ISFIFO(os.stat(fifo).st_mode) and os.path.isdir(d), "left as they were")


def case_concurrent(c):
    """Runs sharing one profile at the same time lose no update: the saves re-read the file
    under a lock and merge (operations and history entries add up)."""
    model, prof = c.model("tiny"), os.path.join(c.tmp, "p.json")
    c.profiled(model, prof)
    doc = c.check_profile_file(prof)
    check(doc["operations"] == 1 and len(doc["history"]) == 1, f"first run: {doc}")
    n = 3
    procs = []
    for i in range(n):
        rep = os.path.join(c.tmp, f"conc-{i}.json")
        procs.append(subprocess.Popen(
            [c.rf, "run", "-m", model, "-p", PROMPT, "-n", "4", "--residency-policy",
             "reuse-aware", "--memory-target", "2MiB", "--observe-dispatch",
             "--staging-budget", "1MiB", "--profile", prof, "--residency-report-json", rep],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    for p in procs:
        out, err = p.communicate(timeout=300)
        check(p.returncode == 0, f"concurrent run exited {p.returncode}: {err[-2000:]}")
    doc = c.check_profile_file(prof)
    check(doc["operations"] == 1 + n and len(doc["history"]) == 1 + n,
          f"{n} concurrent runs: operations {doc['operations']}, history "
          f"{len(doc['history'])} (expected {1 + n} each: updates lost)")


CASES = {
    "fifo": case_fifo,
    "concurrent": case_concurrent,
    "round_trip": case_round_trip,
    "copy_and_other_model": case_copy_and_other_model,
    "rejected_files": case_rejected_files,
    "save_fails": case_save_fails,
    "kill9": case_kill9,
    "serve_wakeup": case_serve_wakeup,
}

if __name__ == "__main__":
    run_main(CASES, Ctx, "ramforge-profile-", schema_required=True)
