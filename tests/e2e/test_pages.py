#!/usr/bin/env python3
"""End-to-end tests of `ramforge inspect --page-cache` (page-cache residency).

Usage: test_pages.py --ramforge BIN [--simple BIN] --schema FILE CASE

(The same arguments as test_cli.py; --simple and --schema are not used here.)
Expected values come from tools no one here wrote: util-linux `fincore`,
`vmtouch`, and the C library's mincore called through ctypes on a mapping
made here. Models are generated (`mkmodel`), copied, read fully, and then
part of the copy is evicted with posix_fadvise(POSIX_FADV_DONTNEED).
Exit 0 pass, 1 fail, 77 skip.
"""
import ctypes
import json
import os
import shutil
import subprocess

from e2e_util import Failure, Skip, check, expect_error_lines, run_main, run_ramforge

PAGE = os.sysconf("SC_PAGE_SIZE")
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


class Ctx:
    def __init__(self, args, tmp):
        self.rf = args.ramforge
        self.tmp = tmp
        self.models = {}

    def run(self, *argv, check_rc=0, prefix=(), **kw):
        return run_ramforge(self.rf, argv, check_rc, prefix, **kw)

    def model(self, preset="small", wtype="q8_0", seed=42):
        key = (preset, wtype, seed)
        if key not in self.models:
            path = os.path.join(self.tmp, f"gen-{preset}-{wtype}-{seed}.gguf")
            self.run("mkmodel", "--preset", preset, "--type", wtype, "--seed", str(seed),
                     "-o", path)
            self.models[key] = path
        return self.models[key]

    def copy(self, name, preset="small"):
        """A fresh copy of a generated model, fully read into the page cache."""
        dst = os.path.join(self.tmp, name)
        shutil.copyfile(self.model(preset), dst)
        with open(dst, "rb") as f:
            os.fdatasync(f.fileno())
            while f.read(1 << 20):
                pass
        return dst

    def page_cache(self, path, *extra, prefix=()):
        p = self.run("inspect", "--page-cache", "--json", *extra, path, prefix=prefix)
        return json.loads(p.stdout)


def evict(path, first_frac=1 / 3, len_frac=1 / 3):
    """posix_fadvise DONTNEED on a middle range of the file; returns (offset, length)."""
    size = os.path.getsize(path)
    off = int(size * first_frac) // PAGE * PAGE
    length = int(size * len_frac) // PAGE * PAGE
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, off, length, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    return off, length


def fincore_res(path, prefix=()):
    p = subprocess.run([*prefix, "fincore", "--bytes", "--json", path], capture_output=True,
                       text=True, timeout=60)
    check(p.returncode == 0, f"fincore failed: {p.stderr}")
    rows = json.loads(p.stdout)["fincore"]
    check(len(rows) == 1, f"fincore rows {rows}")
    return int(rows[0]["res"]), int(rows[0]["pages"])


def vmtouch_pages(path, prefix=()):
    """(resident pages, total pages) from `vmtouch -v`."""
    p = subprocess.run([*prefix, "vmtouch", "-v", path], capture_output=True, text=True,
                       timeout=60)
    check(p.returncode == 0, f"vmtouch failed: {p.stderr}")
    for line in p.stdout.splitlines():
        line = line.strip()
        if line.startswith("Resident Pages:"):
            res, total = line.split()[2].split("/")
            return int(res), int(total)
    raise Failure(f"no 'Resident Pages' in vmtouch output: {p.stdout!r}")


def libc_mincore(path):
    """Per-page 0/1 of the file, by the C library's mincore on a mapping made here."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    size = os.path.getsize(path)
    pages = (size + PAGE - 1) // PAGE
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = libc.mmap(None, size, 1, 1, fd, 0)  # PROT_READ, MAP_SHARED
        check(addr not in (None, ctypes.c_void_p(-1).value), "mmap failed")
        vec = ctypes.create_string_buffer(pages)
        rc = libc.mincore(addr, size, vec)
        libc.munmap(addr, size)
        check(rc == 0, f"mincore failed: errno {ctypes.get_errno()}")
        return [b & 1 for b in vec.raw[:pages]]
    finally:
        os.close(fd)


def check_tensor_ranges(doc):
    """Each tensor's pages are its bytes rounded outward; counts add up to the range."""
    pb = doc["model"]["page_bytes"]
    for t in doc["tensors"]:
        first = t["file_offset_bytes"] // pb
        end = -(-(t["file_offset_bytes"] + t["logical_bytes"]) // pb)
        if t["logical_bytes"] == 0:
            end = first
        check((t["first_page"], t["end_page"]) == (first, end),
              f"{t['name']}: pages {t['first_page']},{t['end_page']} != {first},{end}")
        n = end - first
        check(t["page_cache_resident_pages"] + t["page_cache_nonresident_pages"] +
              t["page_cache_unknown_pages"] == n, f"{t['name']}: counts do not add up")
        check(t["page_cache_resident_bytes"] == t["page_cache_resident_pages"] * pb,
              f"{t['name']}: resident bytes")


def case_page_cache_crosscheck(c):
    path = c.copy("crosscheck copy.gguf")  # a space in the path on purpose
    off, length = evict(path)
    before = fincore_res(path)
    doc = c.page_cache(path)
    after = fincore_res(path)
    vt_res, vt_total = vmtouch_pages(path)
    vec = libc_mincore(path)
    check(before == after, f"the page cache changed while ramforge looked: {before} -> {after}")
    res_bytes, res_pages = after
    pc, f = doc["page_cache"], doc["page_cache"]["file"]
    if f["nonresident_pages"] == 0 and res_pages * PAGE == os.path.getsize(path):
        raise Skip("posix_fadvise(DONTNEED) evicted nothing here (kernel kept the pages)")
    check(pc["source"] == "mincore", f"source {pc['source']}")
    check(pc["mincore_trustworthy"], "we own the file: mincore is trustworthy")
    check(doc["model"]["path"] == path, "path with a space")
    # the whole file: ramforge == fincore == vmtouch == libc mincore, exactly
    check(f["resident_bytes"] == res_bytes,
          f"ramforge resident bytes {f['resident_bytes']} != fincore RES {res_bytes}")
    check(f["resident_pages"] == res_pages == vt_res == sum(vec),
          f"resident pages: ramforge {f['resident_pages']}, fincore {res_pages}, "
          f"vmtouch {vt_res}, libc mincore {sum(vec)}")
    check(f["pages"] == vt_total == len(vec), f"file pages {f['pages']} vs vmtouch {vt_total}")
    check(f["unknown_pages"] == 0 and f["inspected_pages"] == f["pages"], "whole file inspected")
    # (large folios that straddle the range edges stay cached: no exact count here)
    check(f["nonresident_pages"] > 0, f"asked to evict {length // PAGE} pages, none seen")
    if pc["file_cachestat"] is not None:
        check(pc["file_cachestat"]["cached_bytes"] == res_bytes,
              f"cachestat {pc['file_cachestat']['cached_bytes']} != fincore {res_bytes}")
    # per tensor: the libc mincore bits over each reported range
    check_tensor_ranges(doc)
    union = set()
    for t in doc["tensors"]:
        want = sum(vec[t["first_page"]:t["end_page"]])
        check(t["page_cache_resident_pages"] == want,
              f"{t['name']}: ramforge {t['page_cache_resident_pages']} resident, libc {want}")
        check(t["page_cache_unknown_pages"] == 0, f"{t['name']}: unknown pages")
        check(t["sampled"] in ("full", "no_pages"), f"{t['name']}: sampled {t['sampled']}")
        union.update(range(t["first_page"], t["end_page"]))
    tp = pc["tensor_pages"]
    check(tp["available_pages"] == len(union), "tensor pages are the union of the ranges")
    check(tp["resident_pages"] == sum(vec[p] for p in union), "tensor pages resident")
    check(tp["coverage_bp"] == 10000, f"coverage {tp['coverage_bp']}")
    check(tp["resident_pages"] <= f["resident_pages"], "tensor pages within the file")
    check(pc["snapshot"]["coverage"]["sampling_complete"], "sampling complete")
    # the table says the same, with its source
    p = c.run("inspect", "--page-cache", "--bytes", path)
    check("source: mincore" in p.stdout, "table source")
    check(f"whole file: {f['pages']} pages, in page cache {f['resident_pages']} "
          f"({f['resident_bytes']})" in p.stdout, f"table whole-file line: {p.stdout[-800:]}")
    check("smaps Rss" in p.stdout, "the table says page cache is not smaps Rss")
    again = fincore_res(path)
    check(again == after, f"the table run changed the page cache: fincore (bytes, pages) "
          f"{after} before it, {again} after")
    print(f"file {f['pages']} pages: {f['resident_pages']} in page cache "
          f"(fincore {res_pages}, vmtouch {vt_res}), {f['nonresident_pages']} evicted")


def case_page_cache_fake_residency(c):
    if os.geteuid() != 0:
        raise Skip("needs root: the file must be owned by root and read by uid 65534")
    if not shutil.which("setpriv"):
        raise Skip("setpriv (util-linux) is not installed")
    p = subprocess.run([*NOBODY, c.rf, "--version"], capture_output=True, text=True)
    if p.returncode != 0:
        raise Skip(f"uid 65534 cannot run {c.rf}: {p.stderr.strip()}")
    os.chmod(c.tmp, 0o755)
    path = c.copy("root-owned.gguf")
    os.chown(path, 0, 0)
    os.chmod(path, 0o444)
    evict(path)
    res_bytes, res_pages = fincore_res(path)  # as root: real figures
    check(res_pages * PAGE < os.path.getsize(path), "part of the file must be evicted")
    # the kernel really fakes it: vmtouch (mincore) as uid 65534 sees every page resident
    vt_res, vt_total = vmtouch_pages(path, prefix=NOBODY)
    faked = vt_res == vt_total
    doc = c.page_cache(path, prefix=NOBODY)
    pc, f = doc["page_cache"], doc["page_cache"]["file"]
    check(not pc["mincore_trustworthy"], "mincore must not be trusted for this file")
    check("can_do_mincore" in pc["mincore_reason"], f"reason {pc['mincore_reason']}")
    check(f["resident_pages"] < f["pages"], "must not report 100% resident")
    check_tensor_ranges(doc)
    if pc["source"] == "cachestat":
        # a kernel that lets cachestat answer: the real page-cache figures, with the source
        check(f["source"] == "cachestat", "file figure source")
        check(f["resident_bytes"] == res_bytes, f"cachestat {f['resident_bytes']} != {res_bytes}")
        check(f["unknown_pages"] == 0, "cachestat leaves no page unknown")
    else:
        check(pc["source"].startswith("unknown: "), f"source {pc['source']}")
        check(f["resident_pages"] == 0 and f["nonresident_pages"] == 0 and
              f["unknown_pages"] == f["pages"], f"whole file must be unknown: {f}")
        check(pc["tensor_pages"]["unknown_pages"] == pc["tensor_pages"]["available_pages"],
              "tensor pages must be unknown")
        check(pc["tensor_pages"]["coverage_bp"] == 0, "coverage 0")
        for t in doc["tensors"]:
            check(t["page_cache_resident_pages"] == 0 and
                  t["page_cache_unknown_pages"] == t["end_page"] - t["first_page"],
                  f"{t['name']} must be all unknown")
        check(pc["file_cachestat"] is None and pc["file_cachestat_reason"],
              "cachestat figure absent with a reason")
    # control: the owner (root) gets the real figures from mincore
    own = c.page_cache(path)
    check(own["page_cache"]["source"] == "mincore", "root owns the file: mincore")
    check(own["page_cache"]["file"]["resident_bytes"] == res_bytes, "owner figure == fincore")
    print(f"as uid 65534: source {pc['source'][:60]!r}; vmtouch as uid 65534 "
          f"{'fakes 100%' if faked else f'sees {vt_res}/{vt_total}'}; real {res_pages} pages")


def case_page_cache_budget(c):
    path = c.copy("budget.gguf", preset="tiny")
    doc = c.page_cache(path, "--residency-page-budget", "0")
    pc, f = doc["page_cache"], doc["page_cache"]["file"]
    check(pc["page_budget_pages"] == 0, "budget echoed")
    check(f["inspected_pages"] == 0 and f["resident_pages"] == 0 and
          f["nonresident_pages"] == 0 and f["unknown_pages"] == f["pages"],
          f"budget 0: whole file unknown: {f}")
    tp = pc["tensor_pages"]
    check(tp["sampled_pages"] == 0 and tp["unknown_pages"] == tp["available_pages"] > 0,
          f"budget 0: tensor pages unknown: {tp}")
    check(tp["coverage_bp"] == 0, "coverage 0")
    cov = pc["snapshot"]["coverage"]
    check(cov["budget_used_pages"] == 0 and cov["budget_exhausted"] and
          not cov["sampling_complete"], f"coverage block {cov}")
    check(pc["snapshot"]["sampler"]["calls"] == 0, "no sampler call with budget 0")
    for t in doc["tensors"]:
        check(t["page_cache_resident_pages"] == t["page_cache_nonresident_pages"] == 0 and
              t["sampled"] in ("none", "no_pages"), f"{t['name']}: {t}")
    check_tensor_ranges(doc)
    # a small budget: exactly that many pages observed, the rest unknown (never nonresident)
    doc = c.page_cache(path, "--residency-page-budget", "10")
    tp = doc["page_cache"]["tensor_pages"]
    check(tp["sampled_pages"] == 10, f"budget 10: sampled {tp['sampled_pages']}")
    check(tp["resident_pages"] + tp["nonresident_pages"] == 10, "10 pages known")
    check(tp["unknown_pages"] == tp["available_pages"] - 10, "the rest unknown")
    check(tp["coverage_bp"] == 10 * 10000 // tp["available_pages"], "basis points")
    check(any(t["sampled"] == "partial" for t in doc["tensors"]) or
          sum(t["sampled"] == "full" for t in doc["tensors"]) > 0, "something observed")
    f = doc["page_cache"]["file"]
    check(f["inspected_pages"] == 10 and f["unknown_pages"] == f["pages"] - 10,
          f"whole-file pass bounded by the budget: {f}")
    p = c.run("inspect", "--page-cache", "--residency-page-budget", "0", path)
    check("budget exhausted" in p.stdout, "the table says the budget ran out")


def expect_error(c, argv, rc, needle):
    p = expect_error_lines(c, argv, rc, needle)
    check(p.stdout == "", f"{argv}: no output expected, got {p.stdout[:200]!r}")


def case_page_cache_badinput(c):
    model = c.model("tiny")
    t = c.tmp
    for bad in ("-1", "abc", "", "1e3", "99999999999999999999999", "12pages"):
        expect_error(c, ["inspect", "--page-cache", "--residency-page-budget", bad, model], 2,
                     "page budget")
    expect_error(c, ["inspect", "--residency-page-budget", "5", model], 2,
                 "--residency-page-budget needs --page-cache")
    expect_error(c, ["inspect", "--page-cache", "--residency-page-budget"], 2,
                 "requires an argument")
    missing = os.path.join(t, "missing.gguf")
    expect_error(c, ["inspect", "--page-cache", missing], 1,
                 f"cannot open {missing}: No such file or directory")
    notgguf = os.path.join(t, "notgguf.gguf")
    with open(notgguf, "w") as f:
        f.write("this is not a model\n")
    expect_error(c, ["inspect", "--page-cache", notgguf], 1, "not a GGUF file")
    with open(model, "rb") as f:
        data = f.read()
    trunc = os.path.join(t, "trunc-data.gguf")
    with open(trunc, "wb") as f:
        f.write(data[:len(data) - 100])
    expect_error(c, ["inspect", "--page-cache", trunc], 1, "past the end of the file")
    expect_error(c, ["inspect", "--page-cache", t], 1, "not a regular file")
    # a path with spaces and " (deleted)" in its name is just a name
    odd = os.path.join(t, "my model (deleted).gguf")
    shutil.copyfile(model, odd)
    doc = c.page_cache(odd)
    check(doc["model"]["path"] == odd, "odd path")
    p = c.run("inspect", "--help")
    check("--page-cache" in p.stdout and "--residency-page-budget" in p.stdout, "help")


CASES = {
    "page_cache_crosscheck": case_page_cache_crosscheck,
    "page_cache_fake_residency": case_page_cache_fake_residency,
    "page_cache_budget": case_page_cache_budget,
    "page_cache_badinput": case_page_cache_badinput,
}


if __name__ == "__main__":
    # in the build tree, not /tmp: pages of a tmpfs cannot be evicted with fadvise
    run_main(CASES, Ctx, "ramforge-e2e-pages-", tmp_dir=os.getcwd())
