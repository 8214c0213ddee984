#!/usr/bin/env python3
"""Observation that must not change what it observes, filesystems where the figures mean
something else, and warnings said once (issue 13, faults 2, 3 and 4).

  fs_own_reads  inspect --page-cache on an evicted copy reports what was cached before it
                looked (fincore before), and the pages its own header read brought in
                (fincore after - before); no readahead past the header.
  fs_local      the build tree's filesystem (ext4 here) is named as `stat -f` names it, in
                inspect and in the run report; a release there frees memory.
  fs_tmpfs      a copy in /dev/shm: named tmpfs, cold read impossible, and a mutating policy
                does not attempt a release (it would free nothing), saying why, once.
  fs_bench_tmpfs  bench with its isolated copy on tmpfs: the physical limit is not measured,
                since no read of a file in RAM is cold; it says so instead of "read cold (warm)".
  fs_overlayfs  a model seen through an overlay mount: cachestat on the overlay descriptor
                answers 0 pages, so that figure is unknown with the reason, while mincore
                (through the mapping of the real file) agrees with fincore on the lower file.
  warnings_once   no warning twice on stderr or in the report's warnings.
  fs_header_direct  inspect --page-cache reads the header with O_DIRECT where the filesystem
                allows it: nothing of an evicted copy enters the page cache (fincore after ==
                before); on tmpfs it says why not (issue 20, fault 13).
"""
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "schema"))
import validate_report  # noqa: E402
from e2e_util import Skip, check, evict, run_main  # noqa: E402
from test_pages import PAGE, Ctx, fincore_res, libc_mincore  # noqa: E402

# `stat -f -c %T` names (coreutils) -> the names ramforge gives the same statfs f_type
STAT_NAMES = {"ext2/ext3": "ext4", "xfs": "xfs", "btrfs": "btrfs", "tmpfs": "tmpfs",
              "overlayfs": "overlayfs"}


def fs_of(doc):
    check("filesystem" in doc, f"no filesystem in {sorted(doc)}")
    return doc["filesystem"]


def stat_fs_name(path):
    """The filesystem type of path as coreutils `stat -f` names it (an independent oracle)."""
    p = subprocess.run(["stat", "-f", "-c", "%T", path], capture_output=True, text=True,
                       timeout=30)
    check(p.returncode == 0, f"stat -f failed: {p.stderr}")
    return p.stdout.strip()


def validate(c, path):
    errors = validate_report.validate(c.schema, path)
    check(not errors, f"report does not match the schema: {errors[:3]}")


def report(c, model, *argv, check_schema=True):
    """(report JSON, stderr) of a short run with the human report on stderr."""
    path = os.path.join(c.tmp, f"report-{len(os.listdir(c.tmp))}.json")
    p = c.run("run", "-m", model, "-n", "4", "--residency-report",
              "--residency-report-json", path, *argv)
    with open(path) as f:
        doc = json.load(f)
    if check_schema:
        validate(c, path)
    c.last_report = path
    return doc, p.stderr


class FsCtx(Ctx):
    def __init__(self, args, tmp):
        super().__init__(args, tmp)
        self.schema = args.schema


def case_fs_own_reads(c):
    path = c.copy("evicted.gguf")
    evict(path)
    before_bytes, before = fincore_res(path)
    total = -(-os.path.getsize(path) // PAGE)
    if before > total // 10:
        raise Skip(f"posix_fadvise(DONTNEED) did not evict ({before} of {total} pages kept)")
    doc = c.page_cache(path)
    _, after = fincore_res(path)
    pc, f = doc["page_cache"], doc["page_cache"]["file"]
    # the figures are the page cache as it was before ramforge looked
    check(f["resident_pages"] == before,
          f"ramforge reports {f['resident_pages']} pages cached, fincore saw {before} before it")
    check("own_reads" in pc, "the report says what ramforge's own reads did")
    own = pc["own_reads"]
    check(pc["tensor_pages"]["resident_pages"] <= before, f"tensor pages {pc['tensor_pages']}")
    if pc["file_cachestat"] is not None:
        check(pc["file_cachestat"]["cached_bytes"] == before_bytes,
              f"cachestat {pc['file_cachestat']} != fincore before {before_bytes}")
    # what it then changed, it says: fincore after = before + the pages its read brought in
    check(after == before + own["brought_in_pages"],
          f"fincore after {after} != before {before} + brought in {own['brought_in_pages']}")
    check(own["brought_in_bytes"] == own["brought_in_pages"] * PAGE, "brought-in bytes")
    check(own["header_pages"] == -(-own["header_read_bytes"] // PAGE), "header pages")
    check(0 < own["header_read_bytes"] < os.path.getsize(path), f"header bytes {own}")
    check(own["unobserved_pages"] == 0, f"every header page observed before the read: {own}")
    # no readahead: nothing past the header's pages came in
    check(after - before <= own["header_pages"],
          f"{after - before} pages came in, the header spans {own['header_pages']}")
    now = libc_mincore(path)
    check(sum(now[own["header_pages"]:]) == 0,
          f"{sum(now[own['header_pages']:])} pages past the header are cached after inspect")
    for t in doc["tensors"]:
        check(t["page_cache_resident_pages"] == 0 or before > 0,
              f"{t['name']}: {t['page_cache_resident_pages']} pages reported resident of an "
              f"evicted file")
    # the table says so, and --help no longer claims that nothing is read
    evict(path)
    p = c.run("inspect", "--page-cache", path)
    check("ramforge's own reads: the GGUF header" in p.stdout, f"table: {p.stdout[-600:]}")
    h = c.run("inspect", "--help").stdout
    check("Nothing is read" not in h and "without readahead" in h, "help says what is read")
    print(f"evicted copy: fincore before {before}, after {after} pages; ramforge reported "
          f"{f['resident_pages']} and {own['brought_in_pages']} brought in by its "
          f"{own['header_read_bytes']}-byte header read")


def case_fs_header_direct(c):
    path = c.copy("direct.gguf")
    evict(path)
    _, before = fincore_res(path)
    doc = c.page_cache(path)
    _, after = fincore_res(path)
    own = doc["page_cache"]["own_reads"]
    fs = stat_fs_name(path)
    if not own["direct_io"]:
        raise Skip(f"the build tree's filesystem ({fs}) refuses O_DIRECT: "
                   f"{own['direct_io_reason']}")
    check(own["direct_io_reason"] is None and own["brought_in_pages"] == 0 and after == before,
          f"O_DIRECT header read on {fs}: fincore {before} -> {after} pages, own reads {own}")
    check(0 < own["header_read_bytes"] < os.path.getsize(path), f"header bytes {own}")
    check(doc["page_cache"]["file"]["resident_pages"] == before, "figures before the read")
    p = c.run("inspect", "--page-cache", path)
    check("read with O_DIRECT" in p.stdout, f"table: {p.stdout[-600:]}")
    with shm_dir() as d:
        shm = os.path.join(d, "model.gguf")
        shutil.copyfile(path, shm)
        own = c.page_cache(shm)["page_cache"]["own_reads"]
        check(not own["direct_io"] and "tmpfs" in (own["direct_io_reason"] or ""),
              f"tmpfs: {own}")
    print(f"{fs}: evicted copy, fincore {before} -> {after} pages around inspect's O_DIRECT "
          f"header read of {own['header_read_bytes']} bytes")


def case_fs_local(c):
    path = c.copy("local.gguf")
    want = STAT_NAMES.get(stat_fs_name(path))
    if want is None:
        raise Skip(f"the build tree is on {stat_fs_name(path)}, not a filesystem named here")
    doc = c.page_cache(path)
    fs = fs_of(doc)
    check(fs["type"] == want, f"inspect names {fs['type']}, stat -f names {want}")
    check(fs["release"] == "frees" and fs["cachestat_valid"] and fs["cold_read_possible"],
          f"a local disk filesystem: {fs}")
    check(doc["page_cache"]["file_cachestat"] is not None, "cachestat figure known")
    rep, err = report(c, path)
    check(fs_of(rep["model"])["type"] == want, f"report: {rep['model']['filesystem']}")
    check(f"filesystem: {want}" in err, f"human report: {err[:600]}")
    print(f"{path}: {want}")


@contextlib.contextmanager
def shm_dir():
    if not os.path.isdir("/dev/shm") or stat_fs_name("/dev/shm") != "tmpfs":
        raise Skip("no tmpfs at /dev/shm")
    d = tempfile.mkdtemp(prefix="ramforge-e2e-fs-", dir="/dev/shm")
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def case_fs_tmpfs(c):
    with shm_dir() as d:
        path = os.path.join(d, "model.gguf")
        shutil.copyfile(c.model(), path)
        doc = c.page_cache(path)
        fs = fs_of(doc)
        check(fs["type"] == "tmpfs", f"filesystem {fs}")
        check(fs["release"] == "frees nothing" and "free" in (fs["release_note"] or ""),
              f"release on tmpfs: {fs}")
        check(not fs["cold_read_possible"], "a cold read is impossible on tmpfs")
        p = c.run("inspect", "--page-cache", path)
        check("release on this filesystem: frees nothing" in p.stdout, p.stdout[-600:])
        # a mutating policy with a target below the model: the plan selects tensors, and
        # the release is not attempted, with the reason
        rep, err = report(c, path, "--residency-policy", "memory-bound", "--memory-target",
                          "1MiB")
        check(fs_of(rep["model"])["type"] == "tmpfs", "report names tmpfs")
        check(rep["plan"]["selected_count"] > 0, f"the plan selects tensors: {rep['plan']}")
        app = rep["application"]
        check(not app["accepted_bytes"], f"nothing may be released on tmpfs: {app}")
        check("free no memory" in app["reason"], f"the reason says why: {app['reason']}")
        w = [x for x in rep["warnings"] if "release not attempted" in x]
        check(len(w) == 1, f"one warning says the release was not attempted: {rep['warnings']}")
        check(err.count("warning: release not attempted") == 1, f"stderr: {err[-1500:]}")
        check("filesystem: tmpfs" in err, "human report names tmpfs")
        # issue 20, fault 8: the pages are memory: no working set compared, no thrash verdict
        adm = rep["admission"]
        check("pages are memory (tmpfs, ramfs)" in (adm["file_in_memory"] or "") and
              adm["working_set_bytes"] is None and not adm["thrash"],
              f"admission on tmpfs: {adm.get('file_in_memory')!r}, {adm.get('working_set_bytes')}")
    # control: the same run on the local disk releases
    local = c.copy("control.gguf")
    rep, _ = report(c, local, "--residency-policy", "memory-bound", "--memory-target", "1MiB")
    check(rep["application"]["accepted_bytes"], f"control releases: {rep['application']}")
    check(rep["admission"]["file_in_memory"] is None and
          rep["admission"]["working_set_bytes"] is not None, "the local disk's admission")


def case_fs_bench_tmpfs(c):
    """bench with its isolated copy on tmpfs: no cold read is possible, and it says so."""
    with shm_dir() as d:
        out = os.path.join(c.tmp, "bench-out")
        p = c.run("bench", "-m", c.model(), "-o", out, "-n", "2", "-r", "1", "--policies",
                  "off", "--conditions", "isolated-nonresident", "--copy-dir", d, "-q")
        check("read cold (warm)" not in p.stdout, f"a warm read called cold: {p.stdout}")
        with open(os.path.join(out, "summary.json")) as f:
            pl = json.load(f)["physical_limit"]
        check(pl["limit_seconds"] is None and "cold read is impossible" in (pl["reason"] or ""),
              f"physical limit on tmpfs: {pl}")
        check("tmpfs" in pl["reason"], f"the reason names the filesystem: {pl['reason']}")
        check("physical limit: not measured (a cold read is impossible" in p.stdout,
              f"stdout: {p.stdout[-600:]}")


def case_fs_overlayfs(c):
    if os.geteuid() != 0:
        raise Skip("not root: cannot mount an overlay")
    base = tempfile.mkdtemp(prefix="ovl-", dir=c.tmp)
    dirs = {k: os.path.join(base, k) for k in ("lower", "upper", "work", "merged")}
    for d in dirs.values():
        os.mkdir(d)
    shutil.copyfile(c.model("tiny"), os.path.join(dirs["lower"], "model.gguf"))
    opts = f"lowerdir={dirs['lower']},upperdir={dirs['upper']},workdir={dirs['work']}"
    m = subprocess.run(["mount", "-t", "overlay", "overlay", "-o", opts, dirs["merged"]],
                       capture_output=True, text=True, timeout=60)
    if m.returncode != 0:
        raise Skip(f"cannot mount an overlay here: {m.stderr.strip()}")
    try:
        path = os.path.join(dirs["merged"], "model.gguf")
        check(stat_fs_name(path) == "overlayfs", f"stat -f: {stat_fs_name(path)}")
        with open(path, "rb") as f:  # every page cached (the lower file's cache)
            while f.read(1 << 20):
                pass
        lower_bytes, lower_pages = fincore_res(os.path.join(dirs["lower"], "model.gguf"))
        doc = c.page_cache(path)
        pc, f = doc["page_cache"], doc["page_cache"]["file"]
        check(pc["file_cachestat"] is None,
              f"cachestat on the overlay answers {pc['file_cachestat']}: must be unknown")
        check(fs_of(doc)["type"] == "overlayfs", f"filesystem {doc['filesystem']}")
        check("overlay" in (pc["file_cachestat_reason"] or ""),
              f"reason {pc['file_cachestat_reason']}")
        check(f["resident_pages"] == lower_pages,
              f"mincore through the overlay {f['resident_pages']} != fincore lower {lower_pages}")
        p = c.run("inspect", "--page-cache", path)
        check("whole file, cachestat: unknown: overlayfs" in p.stdout, p.stdout[-800:])
        rep, err = report(c, path)
        fpc = rep["residency"]["file_page_cache"]
        check(fs_of(rep["model"])["type"] == "overlayfs", "report names overlayfs")
        check(fpc["cached_pages"] is None or fpc["cached_pages"] == lower_pages,
              f"whole-file figure {fpc} vs fincore lower {lower_pages}")
        print(f"overlay: lower file {lower_pages} pages cached; ramforge mincore "
              f"{f['resident_pages']}, cachestat unknown: {pc['file_cachestat_reason'][:60]}")
    finally:
        subprocess.run(["umount", dirs["merged"]], capture_output=True, timeout=60)


def case_warnings_once(c):
    """Each warning reaches the user once: no warning line twice on stderr, none said twice
    in two wordings (the mapping RSS above the soft target), no duplicate in the report."""
    model = c.copy("warn.gguf")
    # conservative releases only tensors that share no page: the target stays out of reach
    rep, err = report(c, model, "--residency-policy", "conservative", "--memory-target",
                      "1MiB", check_schema=False)
    path = c.last_report
    lines = [ln.removeprefix("ramforge: ") for ln in err.splitlines()
             if ln.removeprefix("ramforge: ").startswith("warning: ")]
    dup = sorted({ln for ln in lines if lines.count(ln) > 1})
    check(not dup, f"warnings printed twice: {dup}")
    above = [ln for ln in lines if "above the soft target" in ln]
    check(len(above) == 1, f"the mapping RSS above the soft target said {len(above)} times: "
                           f"{above}")
    w = rep["warnings"]
    check(len(w) == len(set(w)), f"duplicate warnings in the report: {w}")
    check(any("above the soft target" in x for x in w), f"the report keeps the warning: {w}")
    validate(c, path)
    # without the human report, stderr still says it once
    p = c.run("run", "-m", model, "-n", "4", "--residency-policy", "conservative",
              "--memory-target", "1MiB")
    check(p.stderr.count("above the soft target") == 1, f"stderr: {p.stderr[-800:]}")


CASES = {
    "fs_own_reads": case_fs_own_reads,
    "fs_local": case_fs_local,
    "fs_tmpfs": case_fs_tmpfs,
    "fs_bench_tmpfs": case_fs_bench_tmpfs,
    "fs_overlayfs": case_fs_overlayfs,
    "warnings_once": case_warnings_once,
    "fs_header_direct": case_fs_header_direct,
}


if __name__ == "__main__":
    # in the build tree, not /tmp: pages of a tmpfs cannot be evicted with fadvise
    run_main(CASES, FsCtx, "ramforge-e2e-fs-", tmp_dir=os.getcwd())
