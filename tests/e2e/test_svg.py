#!/usr/bin/env python3
"""End-to-end tests of the residency picture (--residency-svg of run and inspect --page-cache).

The SVG is parsed as XML; each cell's data-* figures are compared with the
per-resource figures of the JSON report (run) or of inspect --json (the same
snapshot), summed per (row, kind) by this file's own placement of the GGUF
names; and rsvg-convert (Debian librsvg2-bin) must render it to a PNG.
Usage: test_svg.py --ramforge PATH CASE
"""
import json
import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET

from e2e_util import ModelCtx as Ctx, Skip, check, expect_error_lines, run_main

SVG = "{http://www.w3.org/2000/svg}"
KINDS = ["attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"]


def place(name):
    """(row, kind) of a GGUF tensor name, as the picture's legend describes it."""
    m = re.match(r"blk\.(\d+)\.([^.]+)", name)
    if m and int(m.group(1)) <= 65535:
        kind = m.group(2)
        return f"blk.{int(m.group(1))}", ("norms" if "norm" in kind else
                                          kind if kind in KINDS else "other")
    stem = name.split(".")[0]
    if name.startswith(("token_embd", "position_embd", "token_types")):
        row = "embeddings"
    elif name.startswith("output"):
        row = "output"
    else:
        return "other", "other"
    return row, "norms" if "norm" in stem else "other"


def expected_cells(names, resources):
    """(row, kind) -> [tensors, pages, resident, nonresident, unknown] from per-resource
    figures (resources: index -> (pages, resident, nonresident, unknown))."""
    cells = {}
    for index, name in names.items():
        c = cells.setdefault(place(name), [0, 0, 0, 0, 0])
        c[0] += 1
        for i, v in enumerate(resources[index]):
            c[1 + i] += v
    return cells


def read_svg(path):
    """boundary -> {(row, kind): [tensors, pages, resident, nonresident, unknown]}, and the
    panels' (boundary, source) in order."""
    root = ET.parse(path).getroot()
    check(root.tag == SVG + "svg", f"root element {root.tag}")
    panels, cells = [], {}
    for g in root.iter(SVG + "g"):
        if g.get("class") == "panel":
            panels.append((g.get("data-boundary"), g.get("data-source")))
    for r in root.iter(SVG + "rect"):
        b = r.get("data-boundary")
        if b is None:
            continue
        key = (r.get("data-row"), r.get("data-kind"))
        per = cells.setdefault(b, {})
        check(key not in per, f"cell {b} {key} drawn twice")
        per[key] = [int(r.get(a)) for a in ("data-tensors", "data-pages", "data-resident-pages",
                                            "data-nonresident-pages", "data-unknown-pages")]
        title = r.find(SVG + "title")
        check(title is not None and key[0] in title.text, f"cell {b} {key} has no title")
    return panels, cells


def render_png(svg):
    """rsvg-convert renders the file: a PNG with a non-empty image."""
    exe = shutil.which("rsvg-convert")
    if not exe:
        raise Skip("rsvg-convert is not installed (Debian librsvg2-bin; scripts/install-deps.sh)")
    png = svg + ".png"
    p = subprocess.run([exe, "-o", png, svg], capture_output=True, text=True, timeout=60)
    check(p.returncode == 0, f"rsvg-convert failed: {p.stderr}")
    with open(png, "rb") as f:
        head = f.read(24)
    check(head[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG")
    w, h = int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
    check(w >= 600 and h >= 200, f"PNG {w}x{h}")
    return w, h


def tensor_names(c, model):
    doc = json.loads(c.run("inspect", "--page-cache", "--json", model).stdout)
    return {t["index"]: t["name"] for t in doc["tensors"]}


def case_run_svg(c):
    """run --residency-svg on a memory-bound run with pageout: three panels (after_load,
    end_of_session, the report's last sample); the last panel's cells are the JSON report's
    per-resource page snapshot summed per (row, kind); every panel covers the same pages."""
    model = c.model("small", "q4_0")
    names = tensor_names(c, model)
    svg, js = c.path("run.svg"), c.path("run.json")
    c.run("run", "-m", model, "-n", "4", "--residency-policy", "memory-bound",
          "--memory-target", "1MiB", "--release-mode", "pageout", "--residency-svg", svg,
          "--residency-report-json", js)
    check(not [f for f in os.listdir(c.tmp) if ".tmp." in f], "a temporary file left behind")
    check(os.stat(svg).st_mode & 0o777 == 0o644, "mode 0644")
    with open(js) as f:
        doc = json.load(f)
    panels, cells = read_svg(svg)
    last = doc["residency"]["samples"][-1]["label"]
    # the after_load boundary released the repacked weights' file pages before the snapshot
    check([p[0] for p in panels] == ["after_load_release", "end_of_session", last],
          f"panels {panels}")
    snap = doc["residency"]["page_snapshot"]
    check(all(p[1] == snap["source"] for p in panels), f"sources {panels} vs {snap['source']}")
    res = {r["index"]: ((r["end_page"] - r["first_page"]) if r["mapping_index"] is not None
                        else 0, r["resident_pages"], r["nonresident_pages"], r["unknown_pages"])
           for r in snap["resources"]}
    check(set(res) == set(names), "the report's resources are the model's tensors")
    want = expected_cells(names, res)
    got = cells[last]
    check(set(got) == set(want), f"cells {sorted(set(got) ^ set(want))} differ")
    for key, v in want.items():
        check(got[key] == v, f"{last} {key}: svg {got[key]} report {v}")
    for b in ("after_load_release", "end_of_session"):
        check({k: v[:2] for k, v in cells[b].items()} == {k: v[:2] for k, v in want.items()},
              f"{b}: tensors and pages per cell differ from the report's")
        for k, v in cells[b].items():
            check(v[2] + v[3] + v[4] == v[1], f"{b} {k}: {v} does not add up")
    rows = {k[0] for k in want}
    check({"embeddings", "output", "blk.0"} <= rows, f"rows {sorted(rows)}")
    before = sum(v[2] for v in cells["end_of_session"].values())
    after = sum(v[2] for v in got.values())
    w, h = render_png(svg)
    print(f"{len(want)} cells in {len(rows)} rows; resident pages {before} at end_of_session, "
          f"{after} at {last}; PNG {w}x{h}")


def case_inspect_svg(c):
    """inspect --page-cache --json --residency-svg: one panel whose cells are the JSON's
    per-tensor page-cache figures (the same snapshot) summed per (row, kind)."""
    model = c.model("tiny", "q8_0")
    svg = c.path("inspect.svg")
    doc = json.loads(c.run("inspect", "--page-cache", "--json", "--residency-svg", svg,
                           model).stdout)
    names = {t["index"]: t["name"] for t in doc["tensors"]}
    res = {t["index"]: ((t["end_page"] - t["first_page"]) if t["first_page"] is not None else 0,
                        t["page_cache_resident_pages"], t["page_cache_nonresident_pages"],
                        t["page_cache_unknown_pages"]) for t in doc["tensors"]}
    panels, cells = read_svg(svg)
    check([p[0] for p in panels] == ["inspect --page-cache"], f"panels {panels}")
    want = expected_cells(names, res)
    got = cells["inspect --page-cache"]
    check(got == {k: v for k, v in want.items()}, f"cells differ: svg {got} json {want}")
    render_png(svg)
    print(f"{len(got)} cells")


def case_svg_badinput(c):
    """Refusals: policy off (nothing to draw), inspect without --page-cache, a directory."""
    model = c.model("tiny", "q8_0")
    svg = c.path("x.svg")
    expect_error_lines(c, ["run", "-m", model, "--residency-policy", "off", "--residency-svg",
                           svg], 2, "--residency-svg needs a residency policy")
    expect_error_lines(c, ["inspect", "--residency-svg", svg, model], 2,
                       "--residency-svg needs --page-cache")
    expect_error_lines(c, ["run", "-m", model, "-n", "1", "--residency-svg", c.tmp], 1,
                       "not a file name" if c.tmp.endswith("/") else "is not a regular file")
    expect_error_lines(c, ["inspect", "--page-cache", "--residency-svg", c.tmp, model], 1,
                       "is not a regular file")
    check(not os.path.exists(svg), "no picture was written")


CASES = {"run_svg": case_run_svg, "inspect_svg": case_inspect_svg,
         "svg_badinput": case_svg_badinput}

if __name__ == "__main__":
    run_main(CASES, Ctx, "ramforge-svg-")
