#!/usr/bin/env bash
# The curve of issue 12: decode speed of a model under a memory limit that
# is a fraction of its file size, policy by policy, against the per-token
# bound t_c + max(0, W - R) / B. For each fraction it runs
#
#   ramforge bench -m MODEL -o OUTDIR/limit-FRACTION --conditions isolated-nonresident
#       --memory-limit FRACTION x file size --policies POLICIES -n N -t T -r R [BENCH_ARGS...]
#
# (each run in a fresh child memory cgroup, from the evicted isolated copy;
# needs root), then prints one table from the summary.json files: fraction,
# limit, policy, decode tok/s (median), ratio to off, bound tok/s, ratio of
# the per-token time to the bound, ratio to the overlap limit max(t_c,
# (W - R) / B) (issue 25), and from the runs' reports the medians of the
# bytes read from storage per decoded token, the achieved read bandwidth
# (streaming.decode) and, for the read-ahead window (--stream-read-ahead), the
# fraction of its read time the decode did not wait for; and, per fraction,
# the distinct token fingerprints of all its runs (1: tokens identical).
#
#   bench/streaming_curve.sh MODEL OUTDIR [BENCH_ARGS...]
#
# Environment: RAMFORGE (default build/ramforge), POLICIES (default
# off,streaming), FRACTIONS (default "0.4 0.5 0.6 0.75 0.9 1.1"), N (16),
# T (2), R (3). BENCH_ARGS go to every bench, e.g. --policy-args
# 'memory-bound=--memory-target 500MiB'. Exit 77 when not root.
set -euo pipefail
[ $# -ge 2 ] || { sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
MODEL=$1
OUT=$2
shift 2
RF=${RAMFORGE:-build/ramforge}
POLICIES=${POLICIES:-off,streaming}
FRACTIONS=${FRACTIONS:-0.4 0.5 0.6 0.75 0.9 1.1}
[ "$(id -u)" -eq 0 ] || { echo "streaming_curve: needs root (memory cgroups)" >&2; exit 77; }
[ -f "$MODEL" ] || { echo "streaming_curve: no model $MODEL" >&2; exit 2; }
# (the help is read whole first: grep -q would close the pipe early, and pipefail fail it)
if [[ ,$POLICIES, == *,streaming,* ]] && ! grep -qw streaming <<<"$("$RF" run --help)"; then
    echo "streaming_curve: $RF has no streaming policy; set POLICIES, e.g. POLICIES=off,observe" >&2
    exit 2
fi
size=$(stat -c %s "$MODEL")
mkdir -p "$OUT"
for f in $FRACTIONS; do
    limit=$(awk -v s="$size" -v f="$f" 'BEGIN { printf "%d", s * f }')
    echo "== limit $f x $size = $limit bytes" >&2
    "$RF" bench -m "$MODEL" -o "$OUT/limit-$f" -n "${N:-16}" -t "${T:-2}" -r "${R:-3}" -q \
        --conditions isolated-nonresident --memory-limit "$limit" --policies "$POLICIES" \
        --copy-dir "$OUT" "$@" >"$OUT/limit-$f.txt" || true
done
python3 - "$OUT" $FRACTIONS <<'PY'
import glob, json, os, statistics, sys
out, fractions = sys.argv[1], sys.argv[2:]
def f2(x):
    return "-" if x is None else f"{x:.2f}"
def decode_medians(d, cond, policy):
    """Medians over the runs' streaming.decode: MB read per token, GB/s, overlapped."""
    got = {"read_bytes_per_token": [], "read_bandwidth_bytes_per_s": [],
           "overlapped_fraction": []}
    for path in glob.glob(os.path.join(d, "runs", f"{cond}-{policy}-*.json")):
        dec = (json.load(open(path)).get("streaming") or {}).get("decode") or {}
        for k in got:
            if dec.get(k) is not None:
                got[k].append(dec[k])
    med = {k: statistics.median(v) if v else None for k, v in got.items()}
    scale = {"read_bytes_per_token": 1e6, "read_bandwidth_bytes_per_s": 1e9,
             "overlapped_fraction": 1}
    return [None if med[k] is None else med[k] / scale[k] for k in got]
print(f"{'fraction':>8} {'limit MiB':>9} {'policy':<14} {'runs':>5} {'decode tok/s':>12} "
      f"{'ratio':>6} {'bound tok/s':>11} {'x bound':>7} {'x overlap':>9} {'MB/token':>8} "
      f"{'GB/s':>5} {'overlapped':>10}")
for fr in fractions:
    path = os.path.join(out, f"limit-{fr}", "summary.json")
    if not os.path.exists(path):
        print(f"{fr:>8} (no summary: see {out}/limit-{fr}.txt)")
        continue
    s = json.load(open(path))
    lim = s["memory_limit"]["limit_bytes"] / 2**20
    fps = s.get("token_fingerprints") or []
    print(f"{fr:>8} tokens: {len(fps)} distinct fingerprint(s) over {s.get('runs_completed')} "
          f"runs {' '.join(fps)}")
    for g in s["groups"]:
        b = g.get("bound") or {}
        ov = None  # the overlap limit max(t_c, (W - R) / B), ns per token
        if None not in (b.get("t_c_ns"), b.get("w_bytes"), b.get("r_bytes"),
                        b.get("b_bytes_per_s"), b.get("decode_ns_per_token")):
            limit_ns = max(b["t_c_ns"], max(0, b["w_bytes"] - b["r_bytes"]) /
                           b["b_bytes_per_s"] * 1e9)
            ov = b["decode_ns_per_token"] / limit_ns if limit_ns > 0 else None
        mb, gbs, hid = decode_medians(os.path.join(out, f"limit-{fr}"), g.get("condition", ""),
                                      g["policy"])
        print(f"{fr:>8} {lim:>9.0f} {g['policy']:<14} {g['completed']:>2}/{g['runs']:<2} "
              f"{f2(g['median']['decode_tokens_per_s']):>12} "
              f"{f2(g['ratio_to_off'].get('decode_tokens_per_s')):>6} "
              f"{f2(b.get('bound_tokens_per_s')):>11} {f2(b.get('ratio_to_bound')):>7} "
              f"{f2(ov):>9} {f2(mb):>8} {f2(gbs):>5} {f2(hid):>10}")
PY
