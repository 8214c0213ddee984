#!/bin/bash
# Benchmark (not a test): decode tokens/s with the CPU node-dispatch
# observer off and on, measured side by side in one run, interleaved ABBA
# (off,on / on,off / ...), REPS repetitions each way; prints the medians and
# the ratio on/off (goal: >= 0.97) and checks the tokens are identical.
#
#     make build
#     bench/observer_bench.sh                       # TinyLlama-shaped Q8_0, 32 tokens, 5 reps
#     bench/observer_bench.sh -m model.gguf -n 64 -t 2 -r 7
#     bench/observer_bench.sh -s 4096               # "on" adds pre-dispatch sampling
#     BUILD=build-x bench/observer_bench.sh         # another build directory
#
# The model defaults to build/models/tinyllama-q8_0.gguf and is generated
# (ramforge mkmodel, ~15 s, 1.1 GiB) when missing. When `ramforge run`
# knows --observe-dispatch the script times the CLI (decode_ns and
# n_generated_tokens from --residency-report-json, one process per run);
# otherwise, or with RF_BENCH_DRIVER=1, it runs build/bench/observer_bench,
# which times forge_generate in one process with the model loaded once and
# then mincore page sampling (forge_model_sample_pages) over the model's
# mapping in pages/s. With -s PAGES (CLI only) the "on" side also samples up
# to PAGES pages of each weight source before dispatch
# (--dispatch-sample-pages), so the ratio is the cost of both. Last, util-linux fincore on the same file, timed, with
# its resident page count, to set beside ramforge's.
set -euo pipefail

BUILD=${BUILD:-build}
MODEL=
N=32
THREADS=
REPS=5
PROMPT="Hello my name is"
SAMPLE=

usage() {
    echo "usage: $0 [-m MODEL] [-n N] [-t THREADS] [-r REPS] [-p PROMPT] [-s PAGES]"
}
while getopts "m:n:t:r:p:s:h" opt; do
    case $opt in
    m) MODEL=$OPTARG ;;
    n) N=$OPTARG ;;
    t) THREADS=$OPTARG ;;
    r) REPS=$OPTARG ;;
    p) PROMPT=$OPTARG ;;
    s) SAMPLE=$OPTARG ;;
    h) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
    esac
done

if [ ! -x "$BUILD/ramforge" ]; then
    echo "observer_bench: $BUILD/ramforge: not built (run make build)" >&2
    exit 1
fi
if [ -z "$MODEL" ]; then
    MODEL=$BUILD/models/tinyllama-q8_0.gguf
    if [ ! -f "$MODEL" ]; then
        mkdir -p "$(dirname "$MODEL")"
        "$BUILD/ramforge" mkmodel --preset tinyllama --type q8_0 --seed 42 -o "$MODEL"
    fi
fi

# The whole help first: grep -q exiting early would SIGPIPE ramforge (pipefail).
run_help=$("$BUILD/ramforge" run --help 2>&1 || true)
if [ "${RF_BENCH_DRIVER:-0}" != 1 ] && grep -q -- --observe-dispatch <<<"$run_help"; then
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    targs=()
    [ -n "$THREADS" ] && targs=(-t "$THREADS")
    on=(--observe-dispatch)
    [ -n "$SAMPLE" ] && on+=(--dispatch-sample-pages "$SAMPLE")
    run() { # run NAME [extra args]: one generation, report to $tmp/NAME.json
        local name=$1
        shift
        "$BUILD/ramforge" run -m "$MODEL" -p "$PROMPT" -n "$N" "${targs[@]}" "$@" \
            --residency-report-json "$tmp/$name.json" >/dev/null
    }
    echo "observer_bench: $MODEL, $N tokens, threads ${THREADS:-default}, $REPS repetitions each way, interleaved ABBA (ramforge run; on: ${on[*]})"
    run warm-off
    run warm-on "${on[@]}"
    for i in $(seq 1 "$REPS"); do
        if [ $((i % 2)) -eq 1 ]; then
            run "off-$i"; run "on-$i" "${on[@]}"
        else
            run "on-$i" "${on[@]}"; run "off-$i"
        fi
    done
    /usr/bin/python3 - "$tmp" "$REPS" <<'EOF'
import json, statistics, sys
tmp, reps = sys.argv[1], int(sys.argv[2])
def rate(name):
    d = json.load(open(f"{tmp}/{name}.json"))
    n = d["output"]["n_generated_tokens"]
    ns = d["timing"]["decode_ns"]
    return (n - 1) * 1e9 / ns, d["output"]["token_fingerprint"]
off = [rate(f"off-{i}") for i in range(1, reps + 1)]
on = [rate(f"on-{i}") for i in range(1, reps + 1)]
print("  rep   off tok/s    on tok/s")
for i, (a, b) in enumerate(zip(off, on), 1):
    print(f"  {i:3d}  {a[0]:10.3f}  {b[0]:10.3f}")
m_off = statistics.median(r for r, _ in off)
m_on = statistics.median(r for r, _ in on)
ratio = m_on / m_off
print(f"median decode tokens/s: off {m_off:.3f}, on {m_on:.3f}; ratio on/off {ratio:.4f} "
      f"(goal >= 0.97: {'met' if ratio >= 0.97 else 'missed'})")
b_off, b_on = max(r for r, _ in off), max(r for r, _ in on)
print(f"best decode tokens/s: off {b_off:.3f}, on {b_on:.3f}; ratio on/off {b_on / b_off:.4f}")
same = len({fp for _, fp in off + on}) == 1
print("tokens identical off/on:", "yes" if same else "no")
sys.exit(0 if same else 1)
EOF
else
    if [ -n "$SAMPLE" ]; then
        echo "observer_bench: -s needs the ramforge run path (not RF_BENCH_DRIVER=1)" >&2
        exit 2
    fi
    if [ ! -x "$BUILD/bench/observer_bench" ]; then
        echo "observer_bench: $BUILD/bench/observer_bench: not built (run make build)" >&2
        exit 1
    fi
    targs=()
    [ -n "$THREADS" ] && targs=(-t "$THREADS")
    "$BUILD/bench/observer_bench" -m "$MODEL" -p "$PROMPT" -n "$N" "${targs[@]}" -r "$REPS" \
        --page-reps "$REPS"
fi

# fincore (util-linux) on the same file, right after: its own mincore walk,
# timed around the whole process (exec and output included).
if command -v fincore >/dev/null; then
    /usr/bin/python3 - "$MODEL" "$REPS" <<'EOF'
import os, statistics, subprocess, sys, time
path, reps = sys.argv[1], int(sys.argv[2])
page = os.sysconf("SC_PAGESIZE")
pages = (os.path.getsize(path) + page - 1) // page
rates, resident = [], None
for _ in range(reps):
    t0 = time.perf_counter()
    out = subprocess.run(["fincore", "-n", "-r", "-o", "PAGES", path],
                         check=True, capture_output=True, text=True).stdout
    rates.append(pages / (time.perf_counter() - t0))
    resident = int(out.split()[0])
print(f"fincore on the same file: {pages} file pages, median {statistics.median(rates):.0f} "
      f"pages/s over {reps} runs (whole process); resident {resident}")
EOF
else
    echo "fincore: not installed (util-linux)"
fi
