#!/usr/bin/env python3
"""End-to-end tests of `ramforge bench` on a generated `small` model.

Usage: test_bench.py --ramforge BIN [--schema FILE] CASE

Each CASE is one ctest test. Expected values are recomputed here from
sources other than the code under test: the medians and ratios from
results.tsv, the label counts from the rows, the source model's bytes
(sha256) and page-cache state (util-linux fincore). Exit 0 pass, 1 fail,
77 skip.
"""
import csv
import glob
import hashlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "schema"))
import validate_report  # noqa: E402
from e2e_util import (Failure, Skip, check, expect_error_lines, memory_cgroup_v1,  # noqa: E402
                      run_main, run_ramforge, wait_for)

COLUMNS = [
    "condition", "label", "policy", "residency_policy", "repetition", "run_status",
    "load_ns", "staging_ns", "ttft_ns", "decode_tokens_per_s", "end_to_end_ns", "process_ns",
    "peak_rss_bytes", "rusage_maxrss_bytes", "mapping_rss_bytes", "cgroup_current_bytes",
    "cgroup_peak_bytes", "major_faults", "read_bytes", "run_cgroup_limit_bytes",
    "run_cgroup_failcnt", "run_cgroup_events_high", "run_cgroup_events_max",
    "run_cgroup_events_oom", "run_cgroup_oom_kill", "run_cgroup_peak_bytes",
    "token_fingerprint", "prep_method", "prep_resident_pages",
    "prep_nonresident_pages", "prep_unknown_pages", "report", "failure_reason",
]
METRICS = COLUMNS[6:26]
RUN_CGROUP = [m for m in METRICS if m.startswith("run_cgroup_")]
# Counters that are legitimately 0 (no limit hit, no fault, all from the page cache).
ZERO_OK = ["major_faults", "read_bytes"] + RUN_CGROUP
LABELS = ["controlled", "warm", "partial", "unknown", "failed"]
OWN_LABEL = {"warm": "warm", "isolated-nonresident": "controlled"}
LEDGER_METRICS = ["peak_rss_bytes", "mapping_rss_bytes", "cgroup_current_bytes",
                  "cgroup_peak_bytes"]


class Ctx:
    def __init__(self, args, tmp):
        self.rf = args.ramforge
        self.schema = args.schema
        self.tmp = tmp
        self._model = None

    def run(self, *argv, check_rc=0):
        return run_ramforge(self.rf, argv, check_rc, timeout=600)

    def model(self):
        if self._model is None:
            path = os.path.join(self.tmp, "small-q8_0.gguf")
            self.run("mkmodel", "-P", "small", "-T", "q8_0", "--seed", "42", "-q", "-o", path)
            self._model = path
        return self._model


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def drop_cache(c, path, attempts=5):
    """Drops the test's own file from the page cache (it owns it: no privilege).

    A drop right after the file was written may leave pages the kernel was
    still handling; a few attempts take them. Returns the resident pages left.
    """
    for _ in range(attempts):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
        left = resident_pages(c, path)
        if left == 0:
            break
    return left


def resident_pages(c, path):
    """Pages of path in the page cache, from util-linux fincore (mincore; reads nothing).

    Not `inspect --page-cache`: it reads the GGUF header, which brings those pages in.
    """
    try:
        p = subprocess.run(["fincore", "--raw", "--noheadings", "--output", "PAGES", path],
                           capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        raise Skip("util-linux fincore is not installed")
    check(p.returncode == 0, f"fincore {path}: {p.stderr}")
    return int(p.stdout.strip())


def read_tsv(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f, delimiter="\t"))
    check(rows and rows[0] == COLUMNS, f"results.tsv columns {rows[0] if rows else None}")
    for r in rows[1:]:
        check(len(r) == len(COLUMNS), f"row with {len(r)} cells: {r}")
    return [dict(zip(COLUMNS, r)) for r in rows[1:]]


def num(s):
    return float(s) if "." in s else int(s)


def close(a, b):
    return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))


expect_error = expect_error_lines


def check_summary_against_rows(summary, rows, policies, conditions):
    """Label counts, medians and ratios of summary.json recomputed from results.tsv."""
    groups = {(g["condition"], g["policy"]): g for g in summary["groups"]}
    check(sorted(groups) == sorted((cd, p) for cd in conditions for p in policies),
          f"groups {sorted(groups)}")
    for (cond, pol), g in groups.items():
        mine = [r for r in rows if r["condition"] == cond and r["policy"] == pol]
        counts = {lab: sum(r["label"] == lab for r in mine) for lab in LABELS}
        check(g["labels"] == counts, f"{cond}/{pol} labels {g['labels']} != {counts}")
        check(g["runs"] == len(mine), f"{cond}/{pol} runs")
        check(g["completed"] == sum(r["run_status"] == "0" for r in mine), f"{cond}/{pol} done")
        used = [r for r in mine if r["run_status"] == "0" and r["label"] == OWN_LABEL[cond]]
        check(g["median_runs"] == len(used), f"{cond}/{pol} median_runs")
        for m in METRICS:
            vals = [num(r[m]) for r in used if r[m] != ""]
            want = statistics.median(vals) if vals else None
            got = g["median"][m]
            check((want is None and got is None) or
                  (want is not None and got is not None and close(got, want)),
                  f"{cond}/{pol} median {m}: summary {got}, results.tsv {want}")
    for cond in conditions:
        off = groups.get((cond, "off"))
        for pol in policies:
            g = groups[(cond, pol)]
            for key, metric in (("end_to_end", "end_to_end_ns"), ("ttft", "ttft_ns"),
                                ("decode_tokens_per_s", "decode_tokens_per_s")):
                got = g["ratio_to_off"][key]
                if off is None or off["median"][metric] is None or g["median"][metric] is None:
                    check(got is None, f"{cond}/{pol} ratio {key} {got} without a baseline")
                    continue
                want = g["median"][metric] / off["median"][metric]
                check(got is not None and close(got, want), f"{cond}/{pol} {key} {got} != {want}")
                if pol == "off":
                    check(got == 1.0, f"{cond}/off ratio {key} is {got}, not 1.0")


def case_bench_small(c):
    model = c.model()
    digest = sha256(model)

    # 1. Preparing the isolated copy leaves the source's page cache alone.
    if drop_cache(c, model) != 0:
        raise Skip("the file system keeps the model in the page cache after "
                   "POSIX_FADV_DONTNEED (tmpfs?)")
    out1 = os.path.join(c.tmp, "iso")
    c.run("bench", "-m", model, "-o", out1, "-n", "4", "-r", "1", "-q",
          "--conditions", "isolated-nonresident", "--policies", "off")
    check(resident_pages(c, model) == 0, "preparing the copy brought source pages into the cache")
    check(not os.path.exists(os.path.join(out1, "isolated-" + os.path.basename(model))),
          "the copy was not removed (no --keep-copy)")

    # 2. The full matrix: 2 policies x 2 conditions x 3 repetitions.
    out = os.path.join(c.tmp, "bench")
    policies, conditions, reps = ["off", "observe"], ["warm", "isolated-nonresident"], 3
    p = c.run("bench", "-m", model, "-o", out, "-n", "8", "-r", str(reps),
              "--policies", ",".join(policies), "--conditions", ",".join(conditions))
    check(sha256(model) == digest, "the source model was modified")
    rows = read_tsv(os.path.join(out, "results.tsv"))
    check(len(rows) == len(policies) * len(conditions) * reps, f"{len(rows)} rows")
    iso = [r for r in rows if r["condition"] == "isolated-nonresident"]
    if all(r["label"] == "warm" for r in iso):
        raise Skip("the copy stays in the page cache after POSIX_FADV_DONTNEED (tmpfs?)")
    check(all(r["label"] == "controlled" for r in iso),
          f"isolated labels {[r['label'] for r in iso]}")
    for r in iso:
        check(r["prep_resident_pages"] == "0" and r["prep_unknown_pages"] == "0" and
              int(r["prep_nonresident_pages"]) > 0, f"controlled without evidence: {r}")
    warm = [r for r in rows if r["condition"] == "warm"]
    check(all(r["label"] == "warm" and r["prep_nonresident_pages"] == "0" for r in warm),
          f"warm labels {[r['label'] for r in warm]}")
    for r in rows:
        check(r["run_status"] == "0", f"run failed: {r}")
        for m in ("load_ns", "ttft_ns", "end_to_end_ns", "process_ns", "decode_tokens_per_s",
                  "rusage_maxrss_bytes"):
            check(r[m] != "" and num(r[m]) > 0, f"{m} missing in {r}")
        for m in METRICS:
            check(r[m] != "0" or m in ZERO_OK, f"{m} is 0 (unknown must be empty): {r}")
        check(all(r[m] == "" for m in RUN_CGROUP), f"run cgroup figures without a limit: {r}")
        check(r["major_faults"] != "" and r["read_bytes"] != "", f"rusage figures: {r}")
        check(int(r["end_to_end_ns"]) < int(r["process_ns"]), "end-to-end within the process")
        check(r["token_fingerprint"].startswith("fnv1a64:"), "fingerprint")
        rep = os.path.join(out, r["report"])
        check(os.path.isfile(rep), f"report {rep} kept")
        if r["policy"] == "off":
            check(all(r[m] == "" for m in LEDGER_METRICS), f"off keeps no ledger: {r}")
        else:
            check(all(r[m] != "" for m in LEDGER_METRICS), f"ledger figures missing: {r}")
    check(len({r["token_fingerprint"] for r in rows}) == 1, "tokens differ between runs")
    if c.schema:
        errors = validate_report.validate(c.schema, os.path.join(out, rows[-1]["report"]))
        check(not errors, f"a run report does not match the schema: {errors[:3]}")

    with open(os.path.join(out, "summary.json")) as f:
        summary = json.load(f)
    check(summary["kind"] == "ramforge.bench.summary" and summary["schema_version"] == 1, "kind")
    check(summary["runs_total"] == len(rows) and summary["runs_completed"] == len(rows), "counts")
    check(summary["conditions"] == conditions, "conditions")
    check([x["name"] for x in summary["policies"]] == policies, "policies")
    check_summary_against_rows(summary, rows, policies, conditions)
    pl = summary["physical_limit"]
    size = os.path.getsize(model)
    check(pl["bytes"] == size and pl["read_seconds"] > 0 and pl["label"] == "controlled",
          f"physical limit {pl}")
    check(close(pl["read_mb_per_s"], size / 1e6 / pl["read_seconds"]), "MB/s")
    check(close(pl["limit_seconds"], size / (pl["read_mb_per_s"] * 1e6)), "limit seconds")
    cp = summary["isolated_copy"]
    check(cp["made"] and cp["bytes"] == size and cp["error"] is None, f"copy {cp}")
    check("physical limit" in p.stdout and "isolated-nonresident" in p.stdout, "table on stdout")
    # The printed bandwidth in MiB/s and, per isolated policy, the verdict on the load alone
    # (docs/guide/bench.md's rule: median cold load against the physical limit), both from summary.json.
    mib_s = f"= {size / pl['read_seconds'] / 2**20:.1f} MiB/s"
    check(mib_s in p.stdout, f"{mib_s!r} not in {p.stdout!r}")
    for g in summary["groups"]:
        if g["condition"] != "isolated-nonresident" or g["median"]["load_ns"] is None:
            continue
        x = g["median"]["load_ns"] / 1e9 / pl["limit_seconds"]
        line = [ln for ln in p.stdout.splitlines() if ln.startswith(f"{g['policy']}: cold load")]
        check(len(line) == 1 and f"{x:.2f}x the physical read limit" in line[0] and
              ("not disk-bound" in line[0]) == (x > 1.5), f"verdict {line} for {x:.2f}x")

    # 3. Named entries of one policy, with their own run arguments; no 'off' -> ratios
    # null; a run that fails (a context too small) is kept with its status, not a median.
    out3 = os.path.join(c.tmp, "named")
    p3 = c.run("bench", "-m", model, "-o", out3, "-n", "4", "-r", "1", "-q",
               "--conditions", "warm", "--policies", "observe,mb=memory-bound,tiny=observe",
               "--policy-args", "mb=--memory-target 1MiB --verify-session",
               "--policy-args", "tiny=-c 2")
    rows3 = read_tsv(os.path.join(out3, "results.tsv"))
    check([(r["policy"], r["residency_policy"]) for r in rows3] ==
          [("observe", "observe"), ("mb", "memory-bound"), ("tiny", "observe")], f"{rows3}")
    check(rows3[2]["run_status"] == "1" and rows3[2]["report"] == "" and
          rows3[2]["ttft_ns"] == "" and rows3[2]["label"] == "warm", f"failed run {rows3[2]}")
    check("exited with status 1" in p3.stderr and "too small" in p3.stderr, p3.stderr)
    with open(os.path.join(out3, rows3[1]["report"])) as f:
        doc = json.load(f)
    check(doc["policy"]["profile"] == "memory-bound" and doc["output"]["verify_session"]["run"],
          "the entry's run arguments reached its run")
    with open(os.path.join(out3, "summary.json")) as f:
        s3 = json.load(f)
    check_summary_against_rows(s3, rows3, ["observe", "mb", "tiny"], ["warm"])
    check(s3["physical_limit"]["limit_seconds"] is None and s3["physical_limit"]["reason"],
          "no physical limit without the isolated condition")


def case_bench_unwritable(c):
    model = c.model()
    blocker = os.path.join(c.tmp, "a-regular-file")
    with open(blocker, "w") as f:
        f.write("x\n")
    # The output directory under a regular file: nothing can run.
    bad = os.path.join(blocker, "out")
    expect_error(c, ["bench", "-m", model, "-o", bad, "-r", "1"], 1,
                 f"cannot write the output directory {bad}: Not a directory")

    # The copy cannot be made: isolated runs are labeled failed, warm runs still run.
    out = os.path.join(c.tmp, "out")
    copy_dir = os.path.join(blocker, "copies")
    p = expect_error(c, ["bench", "-m", model, "-o", out, "-r", "2", "-n", "4", "-q",
                         "--copy-dir", copy_dir], 0,
                     f"cannot create directory {copy_dir}: Not a directory")
    rows = read_tsv(os.path.join(out, "results.tsv"))
    check(len(rows) == 2 * 2 * 2, f"{len(rows)} rows")
    for r in rows:
        if r["condition"] == "isolated-nonresident":
            check(r["label"] == "failed" and r["run_status"] == "" and r["report"] == "" and
                  all(r[m] == "" for m in METRICS), f"failed row {r}")
        else:
            check(r["label"] == "warm" and r["run_status"] == "0", f"warm row {r}")
    with open(os.path.join(out, "summary.json")) as f:
        summary = json.load(f)
    check_summary_against_rows(summary, rows, ["off", "observe"],
                               ["warm", "isolated-nonresident"])
    for g in summary["groups"]:
        if g["condition"] == "isolated-nonresident":
            check(g["labels"]["failed"] == 2 and g["completed"] == 0 and
                  g["median"]["end_to_end_ns"] is None and
                  g["ratio_to_off"]["end_to_end"] is None, f"failed group {g}")
    check(summary["isolated_copy"]["made"] is False and
          "Not a directory" in summary["isolated_copy"]["error"], "copy error recorded")
    check(summary["physical_limit"]["limit_seconds"] is None, "no limit without a copy")
    check(p.returncode == 0, "warm runs completed")

    # Only the isolated condition and no copy: nothing could run -> exit 1, outputs kept.
    out2 = os.path.join(c.tmp, "out2")
    expect_error(c, ["bench", "-m", model, "-o", out2, "-r", "1", "-q", "--copy-dir", copy_dir,
                     "--conditions", "isolated-nonresident"], 1,
                 f"cannot create directory {copy_dir}", n_lines=2)
    rows2 = read_tsv(os.path.join(out2, "results.tsv"))
    check([r["label"] for r in rows2] == ["failed", "failed"], f"{rows2}")
    check(os.path.isfile(os.path.join(out2, "summary.json")), "summary written")


def case_bench_badinput(c):
    model = c.model()
    out = os.path.join(c.tmp, "out")
    base = ["bench", "-m", model, "-o", out]
    expect_error(c, base + ["--policies", "off,bogus"], 2, "unknown policy 'bogus'")
    expect_error(c, base + ["--conditions", "warm,cold"], 2, "unknown condition 'cold'")
    expect_error(c, base + ["--policies", "off,off"], 2, "listed twice")
    expect_error(c, base + ["--conditions", "warm,warm"], 2, "listed twice")
    expect_error(c, base + ["--policies", "off,,observe"], 2, "an entry is empty")
    expect_error(c, base + ["--policies", "a/b=off"], 2, "invalid policy name 'a/b'")
    expect_error(c, base + ["--policies", "memory-bound"], 2, "needs a target")
    expect_error(c, base + ["--policy-args", "nope=--verify-session"], 2, "no entry named 'nope'")
    expect_error(c, base + ["--policy-args", "observe"], 2, "expected NAME=ARGS")
    expect_error(c, base + ["--run-args", "-m other.gguf"], 2, "'-m' is set by bench")
    expect_error(c, base + ["--run-args", "--residency-policy=off"], 2, "is set by bench")
    expect_error(c, base + ["--run-args", "--hold"], 2, "--hold would never end")
    expect_error(c, base + ["-r", "0"], 2, "invalid repetition count (-r) '0'")
    expect_error(c, base + ["-n", "x"], 2, "invalid token count (-n) 'x'")
    expect_error(c, base + ["--bogus"], 2, "unrecognized option '--bogus'")
    expect_error(c, base + ["extra"], 2, "unexpected argument 'extra'")
    expect_error(c, ["bench", "-o", out], 2, "missing -m/--model")
    expect_error(c, ["bench", "-m", model], 2, "missing -o/--output")
    check(not os.path.exists(out), "a bad command line created the output directory")
    missing = os.path.join(c.tmp, "missing.gguf")
    expect_error(c, ["bench", "-m", missing, "-o", out], 1,
                 f"cannot open {missing}: No such file or directory")
    # Arguments `run` itself rejects stop the bench with its message, exit 2.
    expect_error(c, base + ["-r", "1", "-q", "--conditions", "warm",
                            "--policy-args", "observe=--bogus"], 2,
                 "'run' rejected the arguments of policy 'observe': unrecognized option")
    check(not os.path.exists(os.path.join(out, "summary.json")), "no summary after exit 2")
    runs = os.path.join(out, "runs")
    left = [f for f in (os.listdir(runs) if os.path.isdir(runs) else []) if "observe" in f]
    check(not left, f"the rejected run left {left} behind")
    h = c.run("bench", "--help")
    for word in ("isolated-nonresident", "controlled", "--policies", "--policy-args",
                 "--run-args", "--conditions", "--repetitions", "results.tsv", "summary.json",
                 "physical_limit", "ratio_to_off", "POSIX_FADV_DONTNEED"):
        check(word in h.stdout, f"--help lacks {word}")
    check("bench" in c.run("--help").stdout, "ramforge --help lists bench")


def case_bench_metrics(c):
    """bench --metrics-file: prometheus_client's parser reads it; every median, ratio and
    run count of summary.json is a sample with the same value and a null one is absent;
    the path is checked before any run."""
    try:
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError:
        raise Skip("python3-prometheus-client is not installed")
    model = c.model()
    out, prom = os.path.join(c.tmp, "bm"), os.path.join(c.tmp, "bench.prom")
    c.run("bench", "-m", model, "-o", out, "-n", "4", "-r", "1", "-q", "--conditions", "warm",
          "--policies", "off,observe", "--metrics-file", prom)
    with open(os.path.join(out, "summary.json")) as f:
        summary = json.load(f)
    with open(prom) as f:
        fams = list(text_string_to_metric_families(f.read()))
    m = {}
    for fam in fams:
        for s in fam.samples:
            check(s.labels.pop("model") == os.path.basename(model) and
                  s.labels.pop("path") == os.path.realpath(model), f"{s.name}: model, path labels")
            m[(s.name, tuple(sorted(s.labels.items())))] = s.value
    expected = {}
    for g in summary["groups"]:
        key = (("condition", g["condition"]), ("policy", g["policy"]),
               ("residency_policy", g["residency_policy"]))
        for k in ("runs", "completed", "median_runs"):
            expected[("ramforge_bench_" + k, key)] = g[k]
        for k, v in g["median"].items():
            if v is not None:
                expected[("ramforge_bench_median_" + k, key)] = v
        for k, v in g["ratio_to_off"].items():
            if v is not None:
                expected[("ramforge_bench_ratio_to_off",
                          tuple(sorted(key + (("measure", k),))))] = v
    check(m == expected, f"metrics differ from summary.json: "
          f"{sorted(set(m.items()) ^ set(expected.items()))[:4]}")
    off = next(g for g in summary["groups"] if g["policy"] == "off")
    check(off["median"]["peak_rss_bytes"] is None, "policy off keeps no ledger: null peak")
    check(("ramforge_bench_ratio_to_off", (("condition", "warm"), ("measure", "end_to_end"),
                                           ("policy", "off"), ("residency_policy", "off")))
          in m, "the baseline's ratio (1)")
    expect_error(c, ["bench", "-m", model, "-o", os.path.join(c.tmp, "bm2"), "-n", "4", "-r",
                     "1", "-q", "--metrics-file", c.tmp], 1, "is not a regular file")
    check(not os.path.exists(os.path.join(c.tmp, "bm2")), "runs before the path was checked")
    print(f"{len(m)} series, equal to summary.json")


def rf_bench_cgroups(parent, pid):
    """The cgroups bench process pid made below parent (the test's own memory cgroup):
    rf-bench-PID-RUN (other benches on the machine have their own pid)."""
    return sorted(glob.glob(os.path.join(parent, f"rf-bench-{pid}-*")))


def run_bench(c, argv, rc):
    """`ramforge argv` to its end, exit status rc; returns (pid, stdout, stderr)."""
    p = subprocess.Popen([c.rf, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    out, err = p.communicate(timeout=600)
    check(p.returncode == rc, f"{argv}: exit {p.returncode}, expected {rc}: {err[-2000:]}")
    return p.pid, out, err


def ledger_value(doc, category):
    for e in doc["ledger"]["entries"]:
        if e["category"] == category:
            return e["value_bytes"]
    raise Failure(f"no ledger entry {category}")


def case_bench_memlimit(c):
    """--memory-limit: each run in a child cgroup of bench's own (v1 here), read back from
    the cgroup; a limit too small to run gets the OOM kill recorded as its reason; the
    bound recomputed from the calibration report and the physical limit; no rf-bench-*
    cgroup is left."""
    parent = memory_cgroup_v1()
    model = c.model()

    # A limit of 4 MiB: the run process cannot even load; the bench completes nothing.
    out = os.path.join(c.tmp, "tiny-limit")
    pid, _, err = run_bench(c, ["bench", "-m", model, "-o", out, "-n", "4", "-r", "1",
                                "--conditions", "isolated-nonresident", "--policies", "off",
                                "--memory-limit", "4MiB"], 1)
    rows = read_tsv(os.path.join(out, "results.tsv"))
    check(len(rows) == 1, f"{rows}")
    r = rows[0]
    check(r["run_status"] not in ("", "0") and r["report"] == "", f"the run did not fail: {r}")
    check(r["run_cgroup_limit_bytes"] == str(4 << 20), f"limit read back: {r}")
    check(r["run_cgroup_oom_kill"] != "" and int(r["run_cgroup_oom_kill"]) >= 1 and
          r["failure_reason"].startswith("oom-killed"), f"OOM kill not recorded: {r}")
    check(int(r["run_cgroup_peak_bytes"]) <= 4 << 20, f"peak above the limit: {r}")
    check("oom-killed" in err, err)
    check(not rf_bench_cgroups(parent, pid), f"left behind: {rf_bench_cgroups(parent, pid)}")

    # A limit well above the model: runs complete inside it; the bound from its inputs.
    limit = 1 << 30
    out2 = os.path.join(c.tmp, "limit")
    pid, stdout, _ = run_bench(c, ["bench", "-m", model, "-o", out2, "-n", "8", "-r", "1",
                                   "--conditions", "isolated-nonresident", "--policies",
                                   "off,observe", "--memory-limit", "1GiB"], 0)
    check(not rf_bench_cgroups(parent, pid), f"left behind: {rf_bench_cgroups(parent, pid)}")
    rows2 = read_tsv(os.path.join(out2, "results.tsv"))
    for r in rows2:
        check(r["run_status"] == "0" and r["label"] == "controlled", f"{r}")
        check(r["run_cgroup_limit_bytes"] == str(limit) and r["run_cgroup_failcnt"] == "0" and
              r["run_cgroup_oom_kill"] == "0", f"cgroup figures {r}")
        # The run read the model from storage: its cgroup was charged for at least the
        # pages it read (the page cache of the evicted copy), and the process read them.
        peak = int(r["run_cgroup_peak_bytes"])
        check(0 < peak <= limit, f"peak {peak}")
        check(int(r["read_bytes"]) > 0, f"the run read nothing from storage: {r}")
        if r["policy"] == "observe":
            check(peak >= int(r["mapping_rss_bytes"]), f"peak below the mapping RSS: {r}")
    with open(os.path.join(out2, "summary.json")) as f:
        summary = json.load(f)
    check_summary_against_rows(summary, rows2, ["off", "observe"], ["isolated-nonresident"])
    ml = summary["memory_limit"]
    cal = ml["calibration"]
    check(ml["limit_bytes"] == limit and cal["completed"] and cal["policy"] == "observe", f"{ml}")
    with open(os.path.join(out2, cal["report"])) as f:
        doc = json.load(f)
    gen, dec = doc["output"]["n_generated_tokens"], doc["timing"]["decode_ns"]
    tc = dec / (gen - 1)
    w = doc["model"]["inventory"]["totals"]["file_backed_logical_bytes"]
    rt = ledger_value(doc, "Runtime")
    used = sum(ledger_value(doc, k) for k in ("AnonymousWeights", "KvCache", "GraphScratch"))
    used += rt or 0
    rr = max(0, limit - used)
    pl = summary["physical_limit"]
    bw = pl["bytes"] / pl["read_seconds"]
    want = tc + max(0, w - rr) / bw * 1e9
    for g in summary["groups"]:
        b = g["bound"]
        check(b["w_bytes"] == w and b["r_bytes"] == rr, f"W, R {b} != {w}, {rr}")
        check(abs(b["t_c_ns"] - tc) <= 1e-3 * tc, f"t_c {b['t_c_ns']} != {tc}")
        check(abs(b["bound_ns_per_token"] - want) <= 1e-3 * want, f"bound {b} != {want}")
        tps = g["median"]["decode_tokens_per_s"]
        check(close(b["ratio_to_bound"], 1e9 / tps / b["bound_ns_per_token"]), f"ratio {b}")
    check("x bound" in stdout and "the bound per token" in stdout, stdout)


def interrupt_bench(c, argv, sig, before):
    """Starts `ramforge argv`, calls before(pid) (which waits for the moment and returns
    what it saw), sends sig, and returns (pid, that); bench must die of sig."""
    p = subprocess.Popen([c.rf, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        seen = before(p.pid)
        p.send_signal(sig)
        p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    check(p.returncode == -sig, f"bench exited {p.returncode}, not by signal {sig}")
    return p.pid, seen


def case_bench_memlimit_sigterm(c):
    """SIGTERM to bench while a run is in its cgroup: the run process is killed and reaped,
    the cgroup and the isolated copy are removed, bench dies of SIGTERM."""
    parent = memory_cgroup_v1()
    model = c.model()
    out = os.path.join(c.tmp, "term")
    copy = os.path.join(out, "isolated-" + os.path.basename(model))

    def in_flight(pid):
        cg = wait_for(lambda: rf_bench_cgroups(parent, pid), 300, "the run's cgroup")[0]
        procs = wait_for(lambda: open(os.path.join(cg, "cgroup.procs")).read().split(), 60,
                         "a process in the run's cgroup")
        check(os.path.exists(copy), "no isolated copy while a run is going")
        return procs

    pid, procs = interrupt_bench(c, ["bench", "-m", model, "-o", out, "-n", "400", "-r", "1", "-q",
                                "--conditions", "isolated-nonresident", "--policies", "off",
                                "--memory-limit", "1GiB"], signal.SIGTERM, in_flight)
    check(not rf_bench_cgroups(parent, pid), f"left behind: {rf_bench_cgroups(parent, pid)}")
    for run_pid in procs:
        check(not os.path.exists(f"/proc/{run_pid}"), f"run process {run_pid} still exists")
    check(not os.path.exists(copy), "the isolated copy was left behind")


def case_bench_sigint_copy(c):
    """Ctrl-C (SIGINT) while bench makes or uses its isolated copy: the copy is removed and
    bench dies of SIGINT (no root needed)."""
    model = c.model()
    out = os.path.join(c.tmp, "int")
    copy = os.path.join(out, "isolated-" + os.path.basename(model))
    interrupt_bench(c, ["bench", "-m", model, "-o", out, "-n", "1000", "-r", "1", "-q",
                        "--conditions", "isolated-nonresident", "--policies", "off"],
                    signal.SIGINT,
                    lambda pid: wait_for(lambda: os.path.exists(copy), 120, "the isolated copy"))
    check(not os.path.exists(copy), "the isolated copy was left behind")
    left = subprocess.run(["pgrep", "-f", copy], capture_output=True, text=True).stdout.split()
    check(not left, f"run processes on the copy still exist: {left}")


def case_bench_memlimit_noroot(c):
    """--memory-limit without the right to make a cgroup (uid 65534 via setpriv): every run
    is labelled failed with the reason, nothing is left behind, exit 1."""
    parent = memory_cgroup_v1()
    if not shutil.which("setpriv"):
        raise Skip("util-linux setpriv is not installed")
    model = c.model()
    os.chmod(c.tmp, 0o755)
    os.chmod(model, 0o644)
    out = os.path.join(c.tmp, "nobody")
    os.mkdir(out, 0o777)
    os.chmod(out, 0o777)
    p = subprocess.Popen(["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups",
                          c.rf, "bench", "-m", model, "-o", out, "-n", "4", "-r", "2", "-q",
                          "--conditions", "warm", "--policies", "off,observe",
                          "--memory-limit", "1GiB"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    _, err = p.communicate(timeout=600)
    check(p.returncode == 1, f"exit {p.returncode}: {err}")
    rows = read_tsv(os.path.join(out, "results.tsv"))
    check(len(rows) == 4, f"{len(rows)} rows")
    for r in rows:
        check(r["label"] == "failed" and r["run_status"] == "" and
              "needs root" in r["failure_reason"] and r["report"] == "", f"row {r}")
    check(not rf_bench_cgroups(parent, p.pid), "a cgroup was made without the right to")
    with open(os.path.join(out, "summary.json")) as f:
        summary = json.load(f)
    check(all(g["labels"]["failed"] == 2 and g["completed"] == 0 for g in summary["groups"]),
          "summary counts")


def case_bench_badmodel(c):
    """A file that is not a usable GGUF model stops bench with the header check's one line,
    exit 1, before the output directory, the isolated copy or any run exists."""
    with open(c.model(), "rb") as f:
        data = f.read()
    bad = {"not-gguf.gguf": (b"this is not a model\n", "not a GGUF file (bad magic)"),
           "trunc-header.gguf": (data[:1000], "truncated or corrupt GGUF header"),
           "trunc-data.gguf": (data[:len(data) - 100], "past the end of the file")}
    for i, (name, (content, needle)) in enumerate(bad.items()):
        path = os.path.join(c.tmp, name)
        with open(path, "wb") as f:
            f.write(content)
        out, copies = os.path.join(c.tmp, f"out{i}"), os.path.join(c.tmp, f"copies{i}")
        p = expect_error(c, ["bench", "-m", path, "-o", out, "-r", "1", "-n", "2", "--copy-dir",
                             copies, "--conditions", "warm,isolated-nonresident"], 1, f"{path}: ")
        check(needle in p.stderr, f"{name}: {p.stderr!r} lacks {needle!r}")
        check(not os.path.exists(out), f"{name}: the output directory was made")
        check(not os.path.exists(copies), f"{name}: the copy directory was made")


CASES = {
    "bench_small": case_bench_small,
    "bench_unwritable": case_bench_unwritable,
    "bench_badinput": case_bench_badinput,
    "bench_badmodel": case_bench_badmodel,
    "bench_metrics": case_bench_metrics,
    "bench_memlimit": case_bench_memlimit,
    "bench_memlimit_sigterm": case_bench_memlimit_sigterm,
    "bench_sigint_copy": case_bench_sigint_copy,
    "bench_memlimit_noroot": case_bench_memlimit_noroot,
}


if __name__ == "__main__":
    run_main(CASES, Ctx, "ramforge-bench-")
