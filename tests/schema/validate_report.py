#!/usr/bin/python3
"""Validates a ramforge operation report against schema/operation_report.schema.json.

Usage: validate_report.py SCHEMA REPORT.json
Exit status 0 with "ok: ..." when the report is valid, 1 with a one-line
message naming the first problem (and how many there are) otherwise.

As a module: validate(schema_path, report_path) returns a list of error
strings, empty when the report is valid.

Beyond the JSON Schema (draft 2020-12, python3-jsonschema 4.10) it checks
what a schema cannot state:
  - integers are JSON integers: 1.0 is rejected (Python's jsonschema would
    accept it), and so are NaN/Infinity and duplicate object keys;
  - output.n_prompt_tokens / n_generated_tokens equal the lengths of the
    token id arrays, and token_fingerprint is FNV-1a 64 over the
    little-endian int32 bytes of token_ids;
  - the reconciliation repeats the ledger's figures, and its signed
    differences are the differences of the figures they name.
"""

import json
import struct
import sys

import jsonschema

FNV_OFFSET = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3

# reconciliation key -> ledger category it repeats
RECON_FROM_LEDGER = {
    "mapped_resident_bytes": "FileBackedResident",
    "process_rss_bytes": "ProcessRss",
    "cgroup_current_bytes": "CgroupCurrent",
    "cgroup_peak_bytes": "CgroupPeak",
}

# reconciliation difference -> (minuend, subtrahend)
RECON_DIFFERENCES = {
    "rss_minus_mapping_resident_bytes": ("process_rss_bytes", "mapped_resident_bytes"),
    "cgroup_current_minus_rss_bytes": ("cgroup_current_bytes", "process_rss_bytes"),
}


def token_fingerprint(tokens):
    """'fnv1a64:<16 hex>' over the little-endian int32 bytes of tokens."""
    h = FNV_OFFSET
    for b in struct.pack("<%di" % len(tokens), *tokens):
        h = ((h ^ b) * FNV_PRIME) & 0xFFFFFFFFFFFFFFFF
    return "fnv1a64:%016x" % h


def _no_duplicates(pairs):
    seen = {}
    for k, v in pairs:
        if k in seen:
            raise ValueError("duplicate key %r" % k)
        seen[k] = v
    return seen


def _no_constant(name):
    raise ValueError("non-JSON number %s" % name)


def _strict_validator(schema):
    """Draft 2020-12 validator whose "integer" accepts only int (not 1.0, not bool)."""
    base = jsonschema.Draft202012Validator
    checker = base.TYPE_CHECKER.redefine(
        "integer", lambda _c, v: isinstance(v, int) and not isinstance(v, bool))
    cls = jsonschema.validators.extend(base, type_checker=checker)
    return cls(schema)


MAX_MESSAGE = 200  # characters of one error message (instances can be large)


def _where(path):
    return "$" + "".join("[%d]" % p if isinstance(p, int) else ".%s" % p for p in path)


def _describe(error):
    """'$.path: message' for the most specific cause, bounded to MAX_MESSAGE."""
    while error.context:
        error = jsonschema.exceptions.best_match(error.context)
    msg = error.message
    if len(msg) > MAX_MESSAGE:
        msg = msg[:MAX_MESSAGE - 3] + "..."
    return "%s: %s" % (_where(error.absolute_path), msg)


def _semantic_errors(doc):
    errors = []
    out = doc.get("output")
    if isinstance(out, dict):
        for n_key, ids_key in (("n_prompt_tokens", "prompt_token_ids"),
                               ("n_generated_tokens", "token_ids")):
            ids = out.get(ids_key)
            if isinstance(ids, list) and out.get(n_key) != len(ids):
                errors.append("$.output.%s: %r but %s has %d ids"
                              % (n_key, out.get(n_key), ids_key, len(ids)))
        ids = out.get("token_ids")
        if isinstance(ids, list) and all(isinstance(t, int) and -2**31 <= t < 2**31 for t in ids):
            want = token_fingerprint(ids)
            if out.get("token_fingerprint") != want:
                errors.append("$.output.token_fingerprint: %r, token_ids give %r"
                              % (out.get("token_fingerprint"), want))
    ledger = doc.get("ledger")
    if isinstance(ledger, dict) and isinstance(ledger.get("entries"), list) \
            and isinstance(ledger.get("reconciliation"), dict):
        values = {e.get("category"): e.get("value_bytes")
                  for e in ledger["entries"] if isinstance(e, dict)}
        rec = ledger["reconciliation"]
        for key, cat in RECON_FROM_LEDGER.items():
            if cat in values and rec.get(key) != values[cat]:
                errors.append("$.ledger.reconciliation.%s: %r but ledger %s is %r"
                              % (key, rec.get(key), cat, values[cat]))
        for key, (a, b) in RECON_DIFFERENCES.items():
            va, vb = rec.get(a), rec.get(b)
            want = va - vb if isinstance(va, int) and isinstance(vb, int) else None
            if rec.get(key) != want:
                errors.append("$.ledger.reconciliation.%s: %r, %s - %s gives %r"
                              % (key, rec.get(key), a, b, want))
    return errors


def validate(schema_path, report_path):
    """Error strings for report_path against schema_path; [] when valid."""
    try:
        with open(schema_path, encoding="utf-8") as f:
            schema = json.load(f)
        jsonschema.Draft202012Validator.check_schema(schema)
    except (OSError, ValueError, jsonschema.SchemaError) as e:
        return ["schema %s: %s" % (schema_path, str(e).splitlines()[0])]
    try:
        with open(report_path, encoding="utf-8") as f:
            doc = json.load(f, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except (OSError, ValueError) as e:
        return ["report %s: %s" % (report_path, e)]
    validator = _strict_validator(schema)
    errors = [_describe(e)
              for e in sorted(validator.iter_errors(doc), key=lambda e: list(map(str, e.path)))]
    return errors + _semantic_errors(doc)


def main(argv):
    if len(argv) != 3:
        print("usage: validate_report.py SCHEMA REPORT.json", file=sys.stderr)
        return 1
    errors = validate(argv[1], argv[2])
    if errors:
        more = " (and %d more)" % (len(errors) - 1) if len(errors) > 1 else ""
        print("validate_report: %s: %s%s" % (argv[2], errors[0], more))
        return 1
    print("ok: %s is valid against %s" % (argv[2], argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
