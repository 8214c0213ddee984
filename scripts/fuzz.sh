#!/usr/bin/env bash
# Runs each libFuzzer harness of build-fuzz/ (built by `make fuzz`) for FUZZ_SECONDS with its
# seed corpus, one after the other (one core each).
#
#   scripts/fuzz.sh BUILD_DIR [HARNESS...]     (default: every fuzz_<name> in BUILD_DIR)
#
# Per harness: new inputs go to BUILD_DIR/fuzz-corpus/<name>/ (the seeds in
# tests/fuzz/corpus/<name>/ are read, never written), a crash, leak or timeout to
# BUILD_DIR/fuzz-crashes/<name>/ (libFuzzer's crash-*, leak-*, timeout-* files), the log to
# BUILD_DIR/fuzz-logs/<name>.log. Prints one line per harness: executions, coverage (cov, ft)
# and crashes; exits 1 when any harness found one. To keep a crash as a regression test, fix
# it and copy the file into tests/fuzz/corpus/<name>/ (`make check` replays it).
set -uo pipefail

build=${1:?usage: scripts/fuzz.sh BUILD_DIR [HARNESS...]}
shift
seconds=${FUZZ_SECONDS:-60}
src=$(cd "$(dirname "$0")/.." && pwd)
bin="$build/tests/fuzz"

if [ $# -eq 0 ]; then
    set -- $(cd "$bin" && ls fuzz_* 2>/dev/null | grep -v '\.' | sed 's/^fuzz_//')
fi
[ $# -gt 0 ] || { echo "fuzz: no harness in $bin (run make fuzz)" >&2; exit 1; }

failed=0
for h in "$@"; do
    corpus="$build/fuzz-corpus/$h" crashes="$build/fuzz-crashes/$h" log="$build/fuzz-logs/$h.log"
    mkdir -p "$corpus" "$crashes" "$(dirname "$log")"
    # -max_len: seeds are below 64 KiB; -rss_limit_mb: a harness never needs more.
    "$bin/fuzz_$h" -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=1024 \
        -print_final_stats=1 -artifact_prefix="$crashes/" \
        "$corpus" "$src/tests/fuzz/corpus/$h" >"$log" 2>&1
    rc=$?
    # libFuzzer's last status line: "#N  DONE  cov: C ft: F corp: ..." (or the last pulse)
    last=$(grep -E '^#[0-9]+' "$log" | tail -n 1)
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    cov=$(echo "$last" | sed -n 's/.*cov: \([0-9]*\).*/\1/p')
    ft=$(echo "$last" | sed -n 's/.*ft: \([0-9]*\).*/\1/p')
    n_crash=$(find "$crashes" -type f | wc -l)
    printf 'fuzz %-14s %ss  execs %-10s cov %-5s ft %-6s crashes %s%s\n' "$h" "$seconds" \
        "${runs:-?}" "${cov:-?}" "${ft:-?}" "$n_crash" "$([ $rc -ne 0 ] && echo "  (exit $rc, see $log)")"
    [ $rc -eq 0 ] && [ "$n_crash" -eq 0 ] || failed=1
done
exit $failed
