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
    differences are the differences of the figures they name;
  - policy.soft_target_bytes is target - reserve (null without a target
    above the reserve), and admission and plan repeat it;
  - application totals are the checked sums over the attempted boundaries
    (a missing delta makes its total null; with boundaries_dropped, the
    byte totals are at least the listed sums), accepted <= requested per
    boundary, release_mode repeats the policy's, and only a mutating policy
    attempts a release of its own (requested_by null: a budget release asked
    through exec's control channel may run under any policy);
  - plan.applied is policy.mutates, and selected lists min(selected_count,
    64) names (fewer only without an inventory), selected_truncated saying
    whether the count is above 64;
  - lifetime.state_counts sum to lifetime.resources (the inventory's tensor
    count), and release_failed lists min(ReleaseFailed, 32) resources (none
    without an inventory);
  - native.instance_id is the model's;
  - output.verify_session: token_fingerprint is that of its token_ids, and
    tokens_identical says whether they equal output.token_ids;
  - admission: the arithmetic redone from its inputs and cgroups (growth,
    request, anonymous, working set; per checked cgroup reclaimable, room,
    projected, fits and run room), the binding cgroup is the checked one
    with the least room (nearest on ties) and the charge and excess are
    its own, and a working set that does not fit a checked cgroup is a
    thrash;
  - residency.experts (a MoE model's routing): each layer's counts sum to
    its tokens x n_expert_used, the reuse distances to every selection, and
    an LRU hit rate is hits / selections with no more hits than reuses.
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


INT64_MAX = 2**63 - 1
MAX_SELECTED_NAMES = 64   # RF_REPORT_MAX_SELECTED_NAMES in src/core/report.c
MAX_RELEASE_FAILED = 32   # release_failed entries listed by src/core/report.c


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _checked_sum(values, lo, hi):
    """Sum of values, or None when one is not an integer or the sum leaves [lo, hi]."""
    total = 0
    for v in values:
        if not _is_int(v):
            return None
        total += v
        if not lo <= total <= hi:
            return None
    return total


def _section(doc, key):
    v = doc.get(key)
    return v if isinstance(v, dict) else {}


def _policy_errors(doc):
    errors = []
    pol = _section(doc, "policy")
    target, reserve = pol.get("target_bytes"), pol.get("reserve_bytes")
    want = target - reserve if _is_int(target) and _is_int(reserve) and target > reserve \
        else None
    if "soft_target_bytes" in pol and pol.get("soft_target_bytes") != want:
        errors.append("$.policy.soft_target_bytes: %r, target - reserve gives %r"
                      % (pol.get("soft_target_bytes"), want))
    soft = pol.get("soft_target_bytes")
    for sec in ("admission", "plan"):
        s = _section(doc, sec)
        decided = s.get("outcome") if sec == "admission" else s.get("profile_used")
        if decided is not None and s.get("soft_target_bytes") != soft:
            errors.append("$.%s.soft_target_bytes: %r but policy.soft_target_bytes is %r"
                          % (sec, s.get("soft_target_bytes"), soft))
    return errors


def _application_errors(doc):
    errors = []
    app, pol = _section(doc, "application"), _section(doc, "policy")
    bounds = app.get("boundaries")
    if not isinstance(bounds, list):
        return errors
    tried = [b for b in bounds if isinstance(b, dict) and b.get("attempted") is True]
    for key, lo, hi in (("requested_bytes", 0, INT64_MAX), ("accepted_bytes", 0, INT64_MAX),
                        ("observed_mapping_delta_bytes", -2**63, INT64_MAX),
                        ("observed_cgroup_delta_bytes", -2**63, INT64_MAX)):
        want = _checked_sum([b.get(key) for b in tried], lo, hi)
        if app.get("boundaries_dropped") == 0 and app.get(key) != want:
            errors.append("$.application.%s: %r, the attempted boundaries sum to %r"
                          % (key, app.get(key), want))
        # Some dropped: the total also covers them, so it is at least the listed byte counts.
        if app.get("boundaries_dropped") != 0 and lo == 0 and _is_int(app.get(key)) and \
                _is_int(want) and app.get(key) < want:
            errors.append("$.application.%s: %r, below the listed boundaries' sum %r"
                          % (key, app.get(key), want))
    for i, b in enumerate(bounds):
        req, acc = (b.get("requested_bytes"), b.get("accepted_bytes")) \
            if isinstance(b, dict) else (None, None)
        if _is_int(req) and _is_int(acc) and acc > req:
            errors.append("$.application.boundaries[%d]: accepted_bytes %d above "
                          "requested_bytes %d" % (i, acc, req))
    if app.get("release_mode") != pol.get("release_mode"):
        errors.append("$.application.release_mode: %r but policy.release_mode is %r"
                      % (app.get("release_mode"), pol.get("release_mode")))
    if [b for b in tried if b.get("requested_by") is None] and pol.get("mutates") is not True:
        errors.append("$.application: a release was attempted under a policy that does not "
                      "mutate")
    return errors


def _plan_errors(doc):
    errors = []
    plan, pol = _section(doc, "plan"), _section(doc, "policy")
    if plan.get("profile_used") is None:
        return errors
    if "applied" in plan and plan.get("applied") != pol.get("mutates"):
        errors.append("$.plan.applied: %r but policy.mutates is %r"
                      % (plan.get("applied"), pol.get("mutates")))
    count, names = plan.get("selected_count"), plan.get("selected")
    if _is_int(count) and isinstance(names, list):
        shown = min(count, MAX_SELECTED_NAMES)
        has_inventory = isinstance(_section(doc, "model").get("inventory"), dict)
        if len(names) > shown or (has_inventory and len(names) != shown):
            errors.append("$.plan.selected: %d names for selected_count %d"
                          % (len(names), count))
        if plan.get("selected_truncated") != (count > MAX_SELECTED_NAMES):
            errors.append("$.plan.selected_truncated: %r for selected_count %d"
                          % (plan.get("selected_truncated"), count))
    return errors


def _lifetime_errors(doc):
    errors = []
    lt = _section(doc, "lifetime")
    counts, n = lt.get("state_counts"), lt.get("resources")
    if not isinstance(counts, dict) or not _is_int(n):
        return errors
    if all(_is_int(v) for v in counts.values()) and sum(counts.values()) != n:
        errors.append("$.lifetime.state_counts: sum to %d, resources is %d"
                      % (sum(counts.values()), n))
    inv = _section(doc, "model").get("inventory")
    tensors = inv.get("totals", {}).get("n_tensors") if isinstance(inv, dict) else None
    if _is_int(tensors) and n != tensors:
        errors.append("$.lifetime.resources: %d but the inventory has %d tensors"
                      % (n, tensors))
    failed, n_failed = lt.get("release_failed"), counts.get("ReleaseFailed")
    if isinstance(failed, list) and _is_int(n_failed):
        want = min(n_failed, MAX_RELEASE_FAILED) if isinstance(inv, dict) else 0
        if len(failed) != want:
            errors.append("$.lifetime.release_failed: %d entries, ReleaseFailed counts %d"
                          % (len(failed), n_failed))
    return errors


def _admission_figures(adm):
    """growth, request, anonymous, working set and the inputs, redone as admission.h says."""
    inputs = {i.get("name"): i.get("bytes") for i in adm.get("inputs", [])
              if isinstance(i, dict)}
    pre = adm.get("phase") == "pre_load"
    rss, kv = inputs.get("process_rss"), inputs.get("kv_cache")
    if not _is_int(rss) or not _is_int(kv) or \
            (pre and not (_is_int(inputs.get("mapped_weights")) and
                          _is_int(inputs.get("repacked_weights")))):
        return inputs, None
    opt = lambda k: inputs.get(k) if _is_int(inputs.get(k)) else 0
    growth = kv + opt("graph_scratch") + opt("runtime") + \
        (opt("repacked_weights") + opt("loader_growth") + opt("page_tables") if pre else 0)
    request = rss + growth + (opt("mapped_weights") + opt("model_cached") if pre else 0)
    if pre and _is_int(inputs.get("load_release")):  # released during the load: copies once
        request = max(request - inputs["repacked_weights"], 0) + inputs["load_release"]
    want = {"growth_bytes": growth,
            "request_bytes": request,
            "anonymous_bytes": None, "working_set_bytes": None}
    if _is_int(inputs.get("anonymous")):
        want["anonymous_bytes"] = inputs["anonymous"] + growth
        if _is_int(inputs.get("file_working_set")) and not adm.get("file_in_memory"):
            want["working_set_bytes"] = inputs["file_working_set"] + want["anonymous_bytes"]
    return inputs, want


def _admission_cgroup_errors(i, c, growth, others_minus, cached, own=0, mlock=False,
                             locked=None, pre=False):
    """Errors of one checked cgroup of the admission section (own: the model mapping's
    resident unlocked bytes that count as reclaimable after the load, every policy; the
    level's clean mapped file pages less locked instead, when read and locked is known;
    before the load (pre), the level's clean mapped file pages when read: the programs'
    libraries and other files, reclaimable as well)."""
    errors = []
    mapped_file = c.get("mapped_file", {}).get("bytes")
    if pre and _is_int(mapped_file):
        own = mapped_file
    elif own is not None and _is_int(mapped_file) and _is_int(locked):
        own = max(0, mapped_file - locked)
    own = own or 0
    limit = c.get("limit", {}).get("bytes")
    usage = c.get("usage", {}).get("bytes")
    dropable = c.get("reclaimable_file", {}).get("bytes")
    if not (_is_int(limit) and _is_int(usage)):
        return ["$.admission.cgroups[%d]: checked without a limit and a usage" % i]
    reclaimable = min(dropable, usage) if _is_int(dropable) else 0
    others = max(0, usage - max(0, reclaimable - cached) - others_minus)
    if mlock:
        reclaimable = max(0, reclaimable - cached)
    mapped = min(own, usage - reclaimable)
    reclaimable += mapped
    base = usage - reclaimable
    want = {"reclaimable_bytes": reclaimable, "mapping_reclaimable_bytes": mapped,
            "room_bytes": max(0, limit - base),
            "projected_bytes": base + growth, "fits": base + growth <= limit,
            "run_room_bytes": max(0, limit - others)}
    for key, value in want.items():
        if c.get(key) != value:
            errors.append("$.admission.cgroups[%d].%s: %r, the figures give %r"
                          % (i, key, c.get(key), value))
    return errors


def _admission_errors(doc):
    errors = []
    adm = _section(doc, "admission")
    if adm.get("outcome") is None or not isinstance(adm.get("cgroups"), list):
        return errors
    inputs, want = _admission_figures(adm)
    if want is None:
        return errors
    for key, value in want.items():
        if adm.get(key) != value:
            errors.append("$.admission.%s: %r, the inputs give %r" % (key, adm.get(key), value))
    others_minus, cached = inputs.get("process_rss"), 0
    if adm.get("phase") == "pre_load" and _is_int(inputs.get("model_cached")):
        cached = inputs["model_cached"]
        others_minus += cached
    cgroups = adm["cgroups"]
    checked = [(i, c) for i, c in enumerate(cgroups) if isinstance(c, dict) and c.get("checked")]
    own = None  # after the load, every policy: the mapping's resident unlocked pages
    if adm.get("phase") != "pre_load" and _is_int(inputs.get("mapping_rss")) and \
            _is_int(inputs.get("locked")):
        own = max(0, inputs["mapping_rss"] - inputs["locked"])
    for i, c in checked:
        errors += _admission_cgroup_errors(i, c, want["growth_bytes"], others_minus, cached, own,
                                           adm.get("mlock_requested", False),
                                           inputs.get("locked"), adm.get("phase") == "pre_load")
    least = None
    for i, c in checked:
        if _is_int(c.get("room_bytes")) and (least is None or
                                              c["room_bytes"] < cgroups[least]["room_bytes"]):
            least = i
    marked = [i for i, c in enumerate(cgroups) if isinstance(c, dict) and c.get("binding")]
    if marked != ([] if least is None else [least]):
        errors.append("$.admission.cgroups: binding marked on %r, the least room is at %r"
                      % (marked, least))
    b = cgroups[least] if least is not None else {}
    name = b.get("dir") if least is not None else None
    charge = b.get("projected_bytes") if least is not None else None
    limit = b.get("limit", {}).get("bytes") if least is not None else None
    host = adm.get("host")
    if least is None and isinstance(host, dict) and host.get("binding"):
        charge, limit = host.get("projected_bytes"), host.get("room_bytes")
    level = "cgroup" if least is not None else "host" if charge is not None else None
    if adm.get("binding_level", level) != level:
        errors.append("$.admission.binding_level: %r, the figures give %r"
                      % (adm.get("binding_level"), level))
    excess = charge - limit if _is_int(charge) and _is_int(limit) and charge > limit else None
    for key, value in (("binding_cgroup", name), ("projected_charge_bytes", charge),
                       ("hard_excess_bytes", excess)):
        if adm.get(key) != value:
            errors.append("$.admission.%s: %r, the binding cgroup gives %r"
                          % (key, adm.get(key), value))
    # not_bound: the working set fits only because the limit cannot bind the model's pages
    if any(c.get("working_set_fits") is False for _, c in checked) and not adm.get("thrash") \
            and adm.get("cause") != "not_bound":
        errors.append("$.admission.thrash: false, but a cgroup's working set does not fit")
    return errors


def _experts_errors(doc):
    x = _section(doc, "residency").get("experts") or {}
    if x.get("tokens") is None:
        return []
    errors, n, k = [], x["n_expert"], x["n_expert_used"]
    for lay in x["layers"]:
        got, want = sum(lay["counts"]), lay["tokens"] * k  # bad ids are left out of counts
        if len(lay["counts"]) != n or not (got == want or (x["bad_ids"] and got < want)):
            errors.append(f"$.residency.experts layer {lay['layer']}: counts {sum(lay['counts'])}"
                          f" for {lay['tokens']} tokens of {k} experts")
    selections = sum(sum(lay["counts"]) for lay in x["layers"])
    if len(x["reuse_distance"]) != n + 1 or sum(x["reuse_distance"]) != selections:
        errors.append("$.residency.experts.reuse_distance: not every selection once")
    reuses = selections - (x["reuse_distance"][-1] if x["reuse_distance"] else 0)
    for h in x["lru_hit_rate"]:
        rate = h["hits"] / h["selections"] if h["selections"] else None
        if h["selections"] != selections or h["hits"] > reuses or \
                (rate is None) != (h["hit_rate"] is None) or \
                abs((rate or 0) - (h["hit_rate"] or 0)) > 1e-9:
            errors.append(f"$.residency.experts.lru_hit_rate: {h}")
    return errors


def _native_errors(doc):
    nat, model = _section(doc, "native"), _section(doc, "model")
    if "instance_id" in nat and nat.get("instance_id") != model.get("instance_id"):
        return ["$.native.instance_id: %r but model.instance_id is %r"
                % (nat.get("instance_id"), model.get("instance_id"))]
    return []


def _verify_errors(out):
    errors = []
    ver = out.get("verify_session")
    if not isinstance(ver, dict) or ver.get("run") is not True:
        return errors
    ids = ver.get("token_ids")
    if isinstance(ids, list) and all(_is_int(t) and -2**31 <= t < 2**31 for t in ids):
        want = token_fingerprint(ids)
        if ver.get("token_fingerprint") != want:
            errors.append("$.output.verify_session.token_fingerprint: %r, token_ids give %r"
                          % (ver.get("token_fingerprint"), want))
        same = ids == out.get("token_ids")
        if ver.get("tokens_identical") != same:
            errors.append("$.output.verify_session.tokens_identical: %r but the token ids %s"
                          % (ver.get("tokens_identical"), "match" if same else "differ"))
    return errors


def _semantic_errors(doc):
    errors = []
    if not isinstance(doc, dict):
        return errors
    errors += _policy_errors(doc) + _application_errors(doc) + _plan_errors(doc)
    errors += _lifetime_errors(doc) + _native_errors(doc) + _admission_errors(doc)
    errors += _experts_errors(doc)
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
        errors += _verify_errors(out)
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
