#!/bin/bash
# Benchmark (not a test): `ramforge run` against llama.cpp's own examples/simple
# (built by the e2e tests from the pinned source as tests/e2e/llama-simple-ref) on
# the same model, prompt, token count and thread count (simple's default,
# GGML_DEFAULT_N_THREADS = 4), interleaved ABBA over REPS pairs. Prints each
# side's median tok/s over prompt + generation (examples/simple's own "decoded N
# tokens in S s"; ramforge's n_generated_tokens / (prompt_ns + decode_ns) from
# --residency-report-json) and the ratio ramforge/simple, and checks that the
# generated text is the same.
#
#     make build && make -C build llama-simple-ref    # (ctest builds it too)
#     bench/simple_parity.sh                          # TinyLlama-shaped Q8_0, 32 tokens, 5 pairs
#     bench/simple_parity.sh -m model.gguf -n 64 -r 7
#     BUILD=build-llama-check bench/simple_parity.sh  # against the second llama.cpp
#
# The model defaults to $BUILD/models/tinyllama-q8_0.gguf, generated when missing.
set -euo pipefail

BUILD=${BUILD:-build}
MODEL=
N=32
REPS=5
PROMPT="Hello my name is"
usage() { echo "usage: $0 [-m MODEL] [-n TOKENS] [-r PAIRS]" >&2; exit 2; }
while getopts "m:n:r:h" o; do
    case $o in
        m) MODEL=$OPTARG ;; n) N=$OPTARG ;; r) REPS=$OPTARG ;; *) usage ;;
    esac
done
RF=$BUILD/ramforge
SIMPLE=$BUILD/tests/e2e/llama-simple-ref
for b in "$RF" "$SIMPLE"; do
    [ -x "$b" ] || { echo "simple_parity: $b not built (make build; make -C $BUILD llama-simple-ref)" >&2; exit 1; }
done
if [ -z "$MODEL" ]; then
    MODEL=$BUILD/models/tinyllama-q8_0.gguf
    [ -f "$MODEL" ] || { mkdir -p "$(dirname "$MODEL")"; "$RF" mkmodel -P tinyllama -T q8_0 -q -o "$MODEL"; }
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$RF" --version

run_simple() {
    "$SIMPLE" -m "$MODEL" -n "$N" "$PROMPT" >"$tmp/simple.txt" 2>"$tmp/simple.err"
    sed -n 's/.*decoded \([0-9]*\) tokens in \([0-9.]*\) s.*/\1 \2/p' "$tmp/simple.err" |
        awk '{ printf "%.4f\n", $1 / $2 }'
}
run_ramforge() {
    "$RF" run -m "$MODEL" -p "$PROMPT" -n "$N" -t 4 \
        --residency-report-json "$tmp/r.json" >"$tmp/rf.txt" 2>/dev/null
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); t=d["timing"]
print("%.4f" % (d["output"]["n_generated_tokens"] / ((t["prompt_ns"] + t["decode_ns"]) / 1e9)))' "$tmp/r.json"
}

: >"$tmp/s"; : >"$tmp/f"
for i in $(seq "$REPS"); do
    if [ $((i % 2)) -eq 1 ]; then
        run_simple >>"$tmp/s"; run_ramforge >>"$tmp/f"
    else
        run_ramforge >>"$tmp/f"; run_simple >>"$tmp/s"
    fi
done
# examples/simple prints the prompt, then the generated text; ramforge the generated text.
if ! grep -qF -- "$(cat "$tmp/rf.txt")" "$tmp/simple.txt"; then
    echo "simple_parity: the generated text differs" >&2; exit 1
fi
median() { sort -g "$1" | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
s=$(median "$tmp/s"); f=$(median "$tmp/f")
printf 'examples/simple  %s tok/s (median of %s: %s)\n' "$s" "$REPS" "$(paste -sd' ' "$tmp/s")"
printf 'ramforge run     %s tok/s (median of %s: %s)\n' "$f" "$REPS" "$(paste -sd' ' "$tmp/f")"
awk -v f="$f" -v s="$s" 'BEGIN { printf "ratio ramforge/simple %.3f (same text)\n", f / s }'
