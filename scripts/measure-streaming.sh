#!/bin/bash
# Runs `ramforge run` once in a fresh child memory cgroup (v1 or v2) with a
# hard limit, after evicting MODEL from the page cache with `vmtouch -e`
# (page cache is charged to the cgroup that first touches it: give it a
# private copy, not a file other processes use), and removes the cgroup on
# every exit. A single run by hand; `ramforge bench --memory-limit` does the
# same with repetitions and side-by-side policies. Root needed. The run's
# human report (stderr) is kept in REPORT.json.err.
#
#   scripts/measure-streaming.sh RAMFORGE MODEL LIMIT_BYTES REPORT.json [run options...]
#
# Prints one line, the fields named:
#   policy= limit= decode_s= tokens= fingerprint= read_bytes= majflt=
set -euo pipefail
[ $# -ge 4 ] || { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "measure-streaming: needs root (memory cgroups)" >&2; exit 77; }
command -v vmtouch >/dev/null || { echo "measure-streaming: needs vmtouch" >&2; exit 2; }
rf=$1 model=$2 limit=$3 report=$4
shift 4
if [ -d /sys/fs/cgroup/memory ]; then
    cg=/sys/fs/cgroup/memory/rf-stream-$$
    mkdir "$cg"
    trap 'rmdir "$cg" 2>/dev/null || { sleep 1; rmdir "$cg"; }' EXIT
    echo "$limit" > "$cg/memory.limit_in_bytes"
else
    cg=/sys/fs/cgroup/rf-stream-$$
    mkdir "$cg"
    trap 'rmdir "$cg" 2>/dev/null || { sleep 1; rmdir "$cg"; }' EXIT
    echo "$limit" > "$cg/memory.max"
fi
sync
vmtouch -e -q "$model"
( echo "$BASHPID" > "$cg/cgroup.procs"; exec "$rf" run -m "$model" --residency-report-json "$report" "$@" ) >/dev/null 2>"$report.err" || {
    echo "run failed: $(tail -n 3 "$report.err")" >&2
    exit 1
}
python3 - "$report" "$limit" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
io = (d.get("streaming") or {}).get("io") or {}
print("policy=%s limit=%s decode_s=%.2f tokens=%s fingerprint=%s read_bytes=%s majflt=%s" % (
      d["policy"]["profile"], sys.argv[2], d["timing"]["decode_ns"] / 1e9,
      d["output"]["n_generated_tokens"], d["output"]["token_fingerprint"],
      io.get("read_bytes"), io.get("major_faults")))
PY
