#!/usr/bin/env bash
# What coverage costs a gate (issue 31): the Megatron gate against the snapshot run plain, then with --coverage
# (every Megatron process measured by coverage.py's sys.monitoring core, contexts per check; then combined and
# reported), in the same run; the ratio is printed, nothing is asserted. The coverage run's report folder is left in
# REPORT_DIR (default: a temporary folder, removed). Usage: bench/gate_coverage_bench.sh [BUILD_DIR] [REPORT_DIR]
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
bin=$build/bin/interop-harness
snapshot=$(bash ci/megatron-snapshot.sh) || exit $?
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
report=${2:-$work/report}
seconds() { python3 -c 'import time; print(time.monotonic())'; }
start=$(seconds)
"$bin" gate --target megatron --megatron-path "$snapshot" >"$work/plain.txt" 2>&1
plain_rc=$?
middle=$(seconds)
"$bin" gate --target megatron --megatron-path "$snapshot" --coverage --report "$report" >"$work/coverage.txt" 2>&1
coverage_rc=$?
end=$(seconds)
python3 - "$start" "$middle" "$end" "$plain_rc" "$coverage_rc" "$work/plain.txt" "$work/coverage.txt" <<'PY'
import sys
start, middle, end = map(float, sys.argv[1:4])
plain, covered = middle - start, end - middle
last = lambda path: open(path).read().rstrip().splitlines()[-1]
print(f"gate plain:      {plain:7.1f} s wall, exit {sys.argv[4]}: {last(sys.argv[6])}")
print(f"gate --coverage: {covered:7.1f} s wall, exit {sys.argv[5]}: {last(sys.argv[7])}")
print(f"coverage overhead: {covered / plain:.3f}x the plain gate ({100 * (covered / plain - 1):+.1f}%)")
PY
