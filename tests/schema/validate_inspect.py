#!/usr/bin/python3
"""Validates `ramforge inspect --json` output against schema/inspect.schema.json
(`inspect -c N --json`, kind ramforge.fit_check: schema/fit_check.schema.json).

Usage: validate_inspect.py SCHEMA_DIR DOC.json
Exit status 0 with "ok: ..." when valid, 1 with the first problem otherwise.

As a module: validate(schema_dir, doc) returns a list of error strings.

The inspect schema refers to schema/operation_report.schema.json by its $id
for the parts both share (mappings, inventory totals and tensors); both are
loaded from SCHEMA_DIR and merged into one document before validating. Beyond the schema (strict integers, no duplicate
keys, as validate_report.py) it checks what a schema cannot state:
  - page_cache: per tensor, resident + nonresident + unknown pages equal its
    page range (end - first), and resident bytes are resident pages times
    the page size; the same sums for tensor_pages and the whole file;
  - the whole file's pages are ceil(size / page_bytes);
  - inventory: each tensor's page range holds its bytes at its offset;
  - experts (a MoE model): each slice at its tensor's offset + expert x slice
    bytes, its page range holding its bytes, its shared edges; routed + dense
    bytes are the inventory's logical bytes; a token's read is its dense and
    routed parts.
"""

import json
import os
import sys

import jsonschema

from validate_report import (_admission_errors, _describe, _no_constant, _no_duplicates,
                             _strict_validator)


def _load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)


def _page_cache_errors(doc, where):
    errors = []
    pb = doc["model"]["page_bytes"]
    size = doc["model"]["size_bytes"]
    if doc["model"]["file_pages"] != (size + pb - 1) // pb:
        errors.append(f"{where}.model.file_pages: {doc['model']['file_pages']} for {size} bytes")
    for i, t in enumerate(doc["tensors"]):
        if t["first_page"] is None:
            continue
        span = t["end_page"] - t["first_page"]
        known = (t["page_cache_resident_pages"] + t["page_cache_nonresident_pages"] +
                 t["page_cache_unknown_pages"])
        if known != span:
            errors.append(f"{where}.tensors[{i}]: resident+nonresident+unknown {known} != "
                          f"range {span}")
        if t["page_cache_resident_bytes"] != t["page_cache_resident_pages"] * pb:
            errors.append(f"{where}.tensors[{i}].page_cache_resident_bytes")
    pc = doc["page_cache"]
    for key, total in (("tensor_pages", "available_pages"), ("file", "pages")):
        s = pc[key]
        if s["resident_pages"] + s["nonresident_pages"] + s["unknown_pages"] != s[total]:
            errors.append(f"{where}.page_cache.{key}: the counts do not sum to {total}")
        if s["resident_bytes"] != s["resident_pages"] * pb:
            errors.append(f"{where}.page_cache.{key}.resident_bytes")
    if pc["file"]["pages"] != doc["model"]["file_pages"]:
        errors.append(f"{where}.page_cache.file.pages != model.file_pages")
    return errors


def _experts_errors(doc):
    x = doc.get("experts")
    if x is None:
        return []
    errors, pb, n = [], doc["page_bytes"], x["n_expert"]
    by_index = {t["index"]: t for t in doc["tensors"]}
    routed = 0
    for t in x["tensors"]:
        inv = by_index.get(t["index"])
        if inv is None or inv["name"] != t["name"] or \
                inv["logical_bytes"] != t["slice_bytes"] * n or \
                inv["file_offset_bytes"] != t["file_offset_bytes"]:
            errors.append(f"$.experts {t['name']}: not the inventory's tensor {t['index']}")
            continue
        routed += inv["logical_bytes"]
        if [s["expert"] for s in t["slices"]] != list(range(n)):
            errors.append(f"$.experts {t['name']}: slices are not experts 0..{n - 1}")
        for s in t["slices"]:
            off = t["file_offset_bytes"] + s["expert"] * t["slice_bytes"]
            end = off + s["bytes"]
            shared = (s["shared_first"], s["shared_last"])
            if s["file_offset_bytes"] != off or s["bytes"] != t["slice_bytes"] or \
                    (s["first_page"], s["end_page"]) != (off // pb, (end + pb - 1) // pb) or \
                    shared != (off % pb != 0, end % pb != 0):
                errors.append(f"$.experts {t['name']} expert {s['expert']}: slice {s}")
    if routed != x["routed_bytes"] or \
            x["routed_bytes"] + x["dense_bytes"] != doc["totals"]["logical_bytes"]:
        errors.append("$.experts: routed + dense bytes are not the inventory's")
    if x["token_read_bytes"] is not None and \
            x["token_read_bytes"] != x["token_read_dense_bytes"] + x["token_read_routed_bytes"]:
        errors.append("$.experts.token_read_bytes != dense + routed")
    return errors


def _semantic_errors(doc):
    kind = doc.get("kind")
    if kind == "ramforge.fit_check":
        return _admission_errors(doc)
    if kind == "ramforge.inspect.page_cache":
        return _page_cache_errors(doc, "$")
    if kind == "ramforge.inspect.page_cache_list":
        return [e for i, d in enumerate(doc["files"]) for e in _page_cache_errors(d, f"$.files[{i}]")]
    errors = []
    pb = doc["page_bytes"]
    for i, t in enumerate(doc["tensors"]):
        if not t["file_backed"] or t["logical_bytes"] == 0:
            continue
        m = doc["mappings"][t["mapping_index"]]
        start = t["file_offset_bytes"] - (m["map_offset_bytes"] or 0)
        first, end = start // pb, (start + t["logical_bytes"] + pb - 1) // pb
        base = (m["map_offset_bytes"] or 0) // pb
        if (t["first_page"] - base, t["end_page"] - base) != (first, end) and \
                (t["first_page"], t["end_page"]) != (first, end):
            errors.append(f"$.tensors[{i}] {t['name']}: pages [{t['first_page']},"
                          f"{t['end_page']}) do not hold bytes at {t['file_offset_bytes']}")
    return errors + _experts_errors(doc)


def validate(schema_dir, doc):
    """Error strings for doc (parsed JSON) against SCHEMA_DIR's inspect schema; [] when valid."""
    try:
        # inspect -c --json (kind ramforge.fit_check) has its own schema.
        name = "fit_check.schema.json" if isinstance(doc, dict) and \
            doc.get("kind") == "ramforge.fit_check" else "inspect.schema.json"
        schema = _load(os.path.join(schema_dir, name))
        report = _load(os.path.join(schema_dir, "operation_report.schema.json"))
        jsonschema.Draft202012Validator.check_schema(schema)
    except (OSError, ValueError, jsonschema.SchemaError) as e:
        return [f"schema: {str(e).splitlines()[0]}"]
    # One document for every jsonschema version (Debian's 4.10 resolves a remote
    # $ref's own "#/$defs/..." refs against the wrong document): the report's
    # $defs are merged in, and refs to them by $id made local.
    prefix = report["$id"] + "#/$defs/"
    schema.setdefault("$defs", {})
    clash = set(schema["$defs"]) & set(report["$defs"])
    if clash:
        return [f"schema: $defs both schemas define: {sorted(clash)}"]
    merged = json.loads(json.dumps(schema).replace(prefix, "#/$defs/"))
    merged["$defs"].update(report["$defs"])
    validator = _strict_validator(merged)
    errors = [_describe(e)
              for e in sorted(validator.iter_errors(doc), key=lambda e: list(map(str, e.path)))]
    return errors or _semantic_errors(doc)


def main(argv):
    if len(argv) != 3:
        print("usage: validate_inspect.py SCHEMA_DIR DOC.json", file=sys.stderr)
        return 1
    try:
        doc = _load(argv[2])
    except (OSError, ValueError) as e:
        print(f"validate_inspect: {argv[2]}: {e}")
        return 1
    errors = validate(argv[1], doc)
    if errors:
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        print(f"validate_inspect: {argv[2]}: {errors[0]}{more}")
        return 1
    print(f"ok: {argv[2]} is valid")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
