#!/usr/bin/python3
"""End-to-end tests of ramforge's scriptable output on generated models.

Usage: test_scripting.py --ramforge PATH --schema SCHEMA_DIR CASE

  prompt_file        run -f FILE / -f - give the tokens -p gives (one trailing
                     newline dropped, as llama.cpp's -f); -p with -f refused
  report_stdout      --residency-report-json - : stdout is the report alone
                     (valid against the schema), the text goes to stderr
  inspect_json       inspect --json documents (inventory, page cache, several
                     files) carry the envelope and validate against
                     schema/inspect.schema.json
  iec_units          the human report and messages give sizes in IEC units
  page_cache_columns inspect --page-cache -o/-n/--by-layer and several files:
                     the table's figures are the JSON document's
Exit 0 pass, 1 fail, 77 skip.
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "schema"))
from e2e_util import check, expect_error_lines, run_main, run_ramforge  # noqa: E402
import validate_inspect  # noqa: E402
import validate_report  # noqa: E402

PROMPT = "Hello my name is"


class Ctx:
    def __init__(self, args, tmp):
        self.rf = args.ramforge
        self.schema_dir = args.schema
        self.tmp = tmp
        self._model = None

    def run(self, *argv, check_rc=0, **kw):
        return run_ramforge(self.rf, argv, check_rc, **kw)

    def model(self):
        if not self._model:
            self._model = os.path.join(self.tmp, "tiny-q8_0.gguf")
            self.run("mkmodel", "--preset", "tiny", "--type", "q8_0", "-q", "-o", self._model)
        return self._model

    def valid_inspect(self, text, kind):
        doc = json.loads(text)
        errors = validate_inspect.validate(self.schema_dir, doc)
        check(not errors, f"{kind}: {errors[:3]}")
        check(doc["kind"] == kind and doc["schema_version"] == 1, f"envelope {doc['kind']}")
        return doc


def case_prompt_file(c):
    m = c.model()
    want = c.run("run", "-m", m, "-p", PROMPT, "-n", "8", "--residency-policy", "off").stdout
    path = os.path.join(c.tmp, "prompt.txt")
    with open(path, "w") as f:
        f.write(PROMPT + "\n")
    got = c.run("run", "-m", m, "-f", path, "-n", "8", "--residency-policy", "off").stdout
    check(got == want, f"-f gave {got!r}, -p {want!r}")
    got = c.run("run", "-m", m, "--file", "-", "-n", "8", "--residency-policy", "off",
                input=PROMPT + "\n").stdout
    check(got == want, f"-f - gave {got!r}, -p {want!r}")
    # A second newline is the prompt's: the tokens differ.
    with open(path, "w") as f:
        f.write(PROMPT + "\n\n")
    other = c.run("run", "-m", m, "-f", path, "-n", "8", "--residency-policy", "off").stdout
    check(other != want, "only one trailing newline is dropped")
    expect_error_lines(c, ["run", "-m", m, "-f", path, "-p", "x"], 2,
                       "-p/--prompt and -f/--file both give the prompt")
    expect_error_lines(c, ["run", "-m", m, "-f", os.path.join(c.tmp, "none")], 1,
                       "cannot read")
    with open(path, "wb") as f:
        f.write(b"a\0b")
    expect_error_lines(c, ["run", "-m", m, "-f", path], 1, "NUL byte")


def case_report_stdout(c):
    m = c.model()
    cwd = os.path.join(c.tmp, "cwd")
    os.mkdir(cwd)
    p = c.run("run", "-m", m, "-p", PROMPT, "-n", "8", "--residency-report-json", "-", cwd=cwd)
    doc = json.loads(p.stdout)  # the report alone: one JSON document
    path = os.path.join(c.tmp, "report.json")
    with open(path, "w") as f:
        f.write(p.stdout)
    schema = os.path.join(c.schema_dir, "operation_report.schema.json")
    errors = validate_report.validate(schema, path)
    check(not errors, f"stdout report: {errors[:3]}")
    text = c.run("run", "-m", m, "-p", PROMPT, "-n", "8", "--residency-policy", "off").stdout
    check(text.strip() in p.stderr, f"the generated text {text!r} is on stderr")
    check(doc["output"]["n_generated_tokens"] == 8, "the report is this run's")
    check(doc["output"]["n_ctx"] == 256, f"n_ctx {doc['output']['n_ctx']}: the padded context")
    check(os.listdir(cwd) == [], f"a file was created: {os.listdir(cwd)}")


def case_inspect_json(c):
    m = c.model()
    doc = c.valid_inspect(c.run("inspect", "--json", m).stdout, "ramforge.inspect.inventory")
    check(len(doc["tensors"]) == 21, f"{len(doc['tensors'])} tensors")
    same = c.valid_inspect(c.run("inspect", "--json", "-m", m).stdout,
                           "ramforge.inspect.inventory")
    check(same["tensors"] == doc["tensors"], "-m MODEL is the operand")
    pc = c.valid_inspect(c.run("inspect", "--page-cache", "--json", m).stdout,
                         "ramforge.inspect.page_cache")
    copy = os.path.join(c.tmp, "copy.gguf")
    with open(m, "rb") as fi, open(copy, "wb") as fo:
        fo.write(fi.read())
    lst = c.valid_inspect(c.run("inspect", "--page-cache", "--json", "-m", m, copy).stdout,
                          "ramforge.inspect.page_cache_list")
    check([f["model"]["path"] for f in lst["files"]] == [m, copy], "files in order, -m first")
    # A broken document is refused: the validator can fail.
    pc["tensors"][0]["page_cache_resident_pages"] += 1
    check(validate_inspect.validate(c.schema_dir, pc), "a wrong count passes validation")


def table(text):
    lines = [ln for ln in text.splitlines() if ln]
    return lines[0].split(), [ln.split() for ln in lines[1:]]


def case_page_cache_columns(c):
    m = c.model()
    doc = json.loads(c.run("inspect", "--page-cache", "--json", m).stdout)
    tensors = {t["name"]: t for t in doc["tensors"]}
    p = c.run("inspect", "--page-cache", "-o", "name,res,nonres,unknown,pages,percent", m)
    head, rows = table(p.stdout.split("\n\n")[0])
    check(head == ["NAME", "RES", "NONRES", "UNKNOWN", "PAGES", "PERCENT"], f"heading {head}")
    check(len(rows) == len(tensors), f"{len(rows)} rows")
    for name, res, nonres, unknown, pages, pct in rows:
        t = tensors[name]
        check((int(res), int(nonres), int(unknown)) ==
              (t["page_cache_resident_pages"], t["page_cache_nonresident_pages"],
               t["page_cache_unknown_pages"]), f"{name}: counts")
        check(int(pages) == t["end_page"] - t["first_page"], f"{name}: pages")
        want = t["page_cache_resident_pages"] * 10000 // int(pages)
        check(pct == f"{want // 100}.{want % 100:02d}%", f"{name}: percent {pct}")
    # -n: the rows alone; lowercase names and '+' as fincore
    p = c.run("inspect", "--page-cache", "-n", "-o", "+file", m)
    lines = p.stdout.splitlines()
    check(len(lines) == len(tensors) and all(ln.endswith(m) for ln in lines),
          f"-n prints the rows alone: {lines[:2]}")
    # --by-layer: sums over the layer's tensors
    p = c.run("inspect", "--page-cache", "--by-layer", "-n", "-o", "name,tensors,res,pages", m)
    layers = {}
    for t in doc["tensors"]:
        key = ".".join(t["name"].split(".")[:2]) if t["name"].startswith("blk.") \
            else t["name"].split(".")[0]
        n, res, pages = layers.get(key, (0, 0, 0))
        layers[key] = (n + 1, res + t["page_cache_resident_pages"],
                       pages + t["end_page"] - t["first_page"])
    got = {r[0]: tuple(map(int, r[1:])) for r in (ln.split() for ln in p.stdout.splitlines())}
    check(got == layers, f"--by-layer {got} != {layers}")
    check(set(got) >= {"blk.0", "blk.1", "token_embd", "output"}, f"layers {sorted(got)}")
    # several files: one table each, headed by the path
    p = c.run("inspect", "--page-cache", "-o", "name", m, m)
    check(p.stdout.count(f"==> {m} <==") == 2, "each file headed")
    # misuse
    expect_error_lines(c, ["inspect", "-o", "name", m], 2, "need --page-cache")
    expect_error_lines(c, ["inspect", "--page-cache", "--json", "-n", m], 2, "not with --json")
    expect_error_lines(c, ["inspect", "--page-cache", "-o", "nmae", m], 2,
                       "unknown column 'nmae'")
    expect_error_lines(c, ["inspect", "--page-cache", "--by-layer", "-o", "index", m], 2,
                       "column INDEX does not apply with --by-layer")
    expect_error_lines(c, ["inspect", m, m], 2, "several only with --page-cache")


def case_iec_units(c):
    """Human output gives sizes in IEC units: no byte figure of 5+ digits on stderr."""
    import re
    m = c.model()
    p = c.run("run", "-m", m, "-n", "4", "--residency-policy", "memory-bound",
              "--memory-target", "100MiB", "--residency-report")
    # an input echoed in bytes beside its IEC form, "100.00 MiB (104857600 bytes)", is the
    # parsed value the issue 24 asks for; any other byte figure is raw
    raw = re.findall(r"(?<!\()\b\d{5,} bytes\b", p.stderr)
    check(not raw, f"raw byte figures in the human report: {raw[:5]}")
    check("target 100.00 MiB (104857600 bytes)" in p.stderr, "the target's parsed bytes")
    check("fits the soft target of 100.00 MiB" in p.stderr, "admission in IEC units")
    # Signed differences in the one IEC form: never "+0.00 MiB" or "-0.25 MiB" for KiB.
    small = re.findall(r"[+-]0\.\d\d [KMGT]iB", p.stderr)
    check(not small, f"differences below 1 in their unit: {small[:5]}")
    check(re.search(r"cgroup current - process RSS: +(unknown|[+-]\d+(\.\d\d [KMGT]iB| B))\n",
                    p.stderr), "cgroup current - process RSS signed, in IEC units")
    # 5 prompt tokens + 4: llama.cpp pads the context to 256 cells, and the report says so.
    check("context: 256 cells (-c, or prompt + -n without it, padded by llama.cpp" in p.stderr,
          "the padded context in the report")
    expect_error_lines(c, ["run", "-m", m, "--memory-target", "1Gi", "--safety-reserve", "2Gi"],
                       2, "--safety-reserve (2.00 GiB) must be below --memory-target (1.00 GiB)")
    # inspect's fit verdict (stdout) and a library's reason in an error line (stderr).
    p = c.run("inspect", "-c", "512", "--memory-limit", "1MiB", m, check_rc=1)
    verdict = [ln for ln in p.stdout.splitlines() if ln.startswith(("verdict:", "reason:"))]
    check(len(verdict) == 2 and all("hard limit of 1.00 MiB" in v for v in verdict) and
          not re.findall(r"\b\d{5,}\b", "".join(verdict)), f"fit verdict: {verdict}")
    check(re.search(r"\(usage [0-9.]+ [KMG]iB - reclaimable [0-9.]+ (B|[KMG]iB) \+ growth ",
                    verdict[1]), f"usage - reclaimable + growth in IEC units: {verdict[1]}")
    with open(m, "rb") as f:
        data = f.read()
    trunc = os.path.join(c.tmp, "iec-trunc.gguf")
    with open(trunc, "wb") as f:
        f.write(data[:len(data) - 100])
    p = expect_error_lines(c, ["inspect", trunc], 1, "past the end of the file")
    check(re.findall(r"\b\d{5,} bytes\b", p.stderr) == [], f"raw bytes: {p.stderr!r}")


CASES = {
    "iec_units": case_iec_units,
    "prompt_file": case_prompt_file,
    "report_stdout": case_report_stdout,
    "inspect_json": case_inspect_json,
    "page_cache_columns": case_page_cache_columns,
}

if __name__ == "__main__":
    run_main(CASES, Ctx, "ramforge-scripting-", schema_required=True)
