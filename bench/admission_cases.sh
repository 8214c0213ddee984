#!/usr/bin/env bash
# Runs the admission cases of issue 9 live, each in a child memory cgroup
# (v1) of the one this shell is in, and prints ramforge's verdict and the
# kernel's. Needs root and a cgroup v1 memory controller; every cgroup it
# makes is removed on exit, also on failure.
#
#   bench/admission_cases.sh [-b BUILD_DIR] [CASE...]     CASE: 1 2 3 (default all)
#
#   1  thrash: tinyllama Q8_0 (1.09 GiB, every weight read from the file) in
#      800 MiB, evicted copy first
#   2  reclaimable cache: another 1.1 GiB file read once in a 1.5 GiB cgroup,
#      then tinyllama Q4_0 with -c 4096
#   3  a limit on an ancestor: parent limited to 1 GiB, a sibling holding
#      400 MiB, the run in another child (tinyllama Q4_0)
set -euo pipefail
BUILD=build
while getopts "b:" o; do
    case $o in
    b) BUILD=$OPTARG ;;
    *) echo "usage: $0 [-b BUILD_DIR] [CASE...]" >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
CASES=("${@:-1 2 3}")
RF=$BUILD/ramforge
[ "$(id -u)" -eq 0 ] || { echo "admission_cases: needs root (cgroups)" >&2; exit 77; }
rel=$(awk -F: '$2 ~ /(^|,)memory(,|$)/ {print $3}' /proc/self/cgroup)
mnt=$(awk '$3 == "cgroup" && $4 ~ /(^|,)memory(,|$)/ {print $2; exit}' /proc/mounts)
[ -n "$mnt" ] && [ -n "$rel" ] || { echo "admission_cases: no cgroup v1 memory controller" >&2; exit 77; }
BASE="$mnt$rel/rf-admission-$$"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/rf-admission.XXXXXX")
SIBLING_PID=

cleanup() {
    [ -n "$SIBLING_PID" ] && kill "$SIBLING_PID" 2>/dev/null && wait "$SIBLING_PID" 2>/dev/null
    # A task that just exited may still be leaving the cgroup: retry for up to 5 s.
    for d in "$BASE/parent/sibling" "$BASE/parent/run" "$BASE/parent" "$BASE/run" "$BASE"; do
        for _ in $(seq 50); do
            [ -d "$d" ] || break
            rmdir "$d" 2>/dev/null && break
            sleep 0.1
        done
    done
    rm -rf "$WORK"
}
trap cleanup EXIT

model() { # preset type -> path (generated once under BUILD/models)
    local p="$BUILD/models/$1-$2.gguf"
    [ -f "$p" ] || "$RF" mkmodel -P "$1" -T "$2" --seed 42 -o "$p" >/dev/null
    echo "$p"
}

evicted_copy() { # src -> a copy of it, out of the page cache
    local dst="$WORK/$(basename "$1")"
    cp "$1" "$dst"
    sync "$dst"
    vmtouch -e "$dst" >/dev/null
    echo "$dst"
}

mkcg() { # dir limit_bytes
    mkdir -p "$1"
    echo "$2" >"$1/memory.limit_in_bytes"
}

# Runs ramforge run inside cgroup $1 with the rest as arguments; prints the verdicts.
run_in() {
    local cg=$1 json="$WORK/report.json"
    shift
    local f0 f1 rc=0
    f0=$(cat "$cg/memory.failcnt")
    sh -c 'echo $$ > "$1/cgroup.procs"; shift; exec "$@"' sh "$cg" \
        "$RF" run "$@" --residency-report-json "$json" >/dev/null 2>"$WORK/stderr" || rc=$?
    f1=$(cat "$cg/memory.failcnt")
    echo "  exit status: $rc"
    { grep -E "admission|warning" "$WORK/stderr" || true; } | sed "s/^/  stderr: /" | head -5
    [ -f "$json" ] && python3 - "$json" <<'EOF'
import json, sys
a = json.load(open(sys.argv[1]))["admission"]
b = a.get("before_load") or {}
print("  report: before the load outcome=%s cause=%s; after: outcome=%s cause=%s refused=%s "
      "binding=%s" % (b.get("outcome"), b.get("cause"), a.get("outcome"), a.get("cause"),
                      a.get("refused"), a.get("binding_cgroup")))
v = a.get("kernel_verdict") or {}
print("  kernel verdict: hit_limit=%s oom_killed=%s" % (v.get("hit_limit"), v.get("oom_killed")))
EOF
    echo "  memory.failcnt delta: $((f1 - f0))"
    rm -f "$json"
}

for c in ${CASES[@]}; do
    case $c in
    1)
        echo "case 1: tinyllama Q8_0, evicted copy, 800 MiB limit"
        m=$(evicted_copy "$(model tinyllama q8_0)")
        mkcg "$BASE" $((1 << 30)); mkcg "$BASE/run" $((800 << 20))
        run_in "$BASE/run" -m "$m" -n 8 -t 2
        rmdir "$BASE/run"
        ;;
    2)
        echo "case 2: 1.1 GiB of inactive page cache in a 1.5 GiB cgroup, tinyllama Q4_0 -c 4096"
        m=$(evicted_copy "$(model tinyllama q4_0)")
        big=$(evicted_copy "$(model tinyllama q8_0)")
        mkcg "$BASE" $((2 << 30)); mkcg "$BASE/run" $((1536 << 20))
        sh -c 'echo $$ > "$1/cgroup.procs"; exec cat "$2"' sh "$BASE/run" "$big" >/dev/null
        run_in "$BASE/run" -m "$m" -n 8 -t 2 -c 4096
        rm -f "$big"
        rmdir "$BASE/run"
        ;;
    3)
        echo "case 3: parent limited to 1 GiB, a sibling holding 400 MiB, tinyllama Q4_0"
        m=$(evicted_copy "$(model tinyllama q4_0)")
        mkcg "$BASE" $((4 << 30)); mkcg "$BASE/parent" $((1 << 30))
        mkdir -p "$BASE/parent/sibling" "$BASE/parent/run"
        sh -c 'echo $$ > "$1/cgroup.procs"; exec python3 -c "
import time; b = bytearray(400 << 20)
for i in range(0, len(b), 4096): b[i] = 1
time.sleep(600)"' sh "$BASE/parent/sibling" &
        SIBLING_PID=$!
        sleep 2
        run_in "$BASE/parent/run" -m "$m" -n 8 -t 2
        kill "$SIBLING_PID"; wait "$SIBLING_PID" 2>/dev/null || true; SIBLING_PID=
        rmdir "$BASE/parent/sibling" "$BASE/parent/run" "$BASE/parent"
        ;;
    *) echo "admission_cases: unknown case $c" >&2; exit 2 ;;
    esac
done
