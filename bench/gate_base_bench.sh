#!/usr/bin/env bash
# What gating a change against its base costs (issue 31), in one run, against a baseline of the same run; nothing
# is asserted. Usage: bench/gate_base_bench.sh [BUILD_DIR]
#   1. a plain gate of the snapshot (the baseline);
#   2. the snapshot gated against itself as the base, cold: the base gated in the same process, then stored in a
#      fresh cache (also the check that the same tree on both sides is an empty delta);
#   3. the same, warm: the base's verdicts read back from the cache by the tree's content hash.
# Prints each wall time, exit code and verdict line, and the ratios of 2 and 3 to 1 (aim: under 2x).
# Run it alone (flock /tmp/ih-heavy.lock bench/gate_base_bench.sh): each gate is minutes of both cores.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
bin=$build/bin/interop-harness
snapshot=$(bash ci/megatron-snapshot.sh)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# timed NAME ARGS...: runs the gate, keeping its exit code and wall time in $work/NAME.{rc,s}, its output in .txt.
timed() {
  local name=$1
  shift
  local start end rc=0
  start=$(date +%s.%N)
  "$bin" gate --target megatron --megatron-path "$snapshot" "$@" >"$work/$name.txt" 2>&1 || rc=$?
  end=$(date +%s.%N)
  echo "$rc" >"$work/$name.rc"
  python3 -c "print(f'{float(\"$end\") - float(\"$start\"):.1f}')" >"$work/$name.s"
}

timed plain
timed base_cold --base-megatron-path "$snapshot" --base-cache "$work/cache"
timed base_warm --base-megatron-path "$snapshot" --base-cache "$work/cache"

python3 - "$work" <<'PY'
import sys
work = sys.argv[1]
read = lambda name, ext: open(f"{work}/{name}.{ext}").read().strip()
plain = float(read("plain", "s"))
print(f"gate against its base, on the snapshot ({read('plain', 'txt').count('INFO: [') } check lines in the plain run)")
for name, what in (("plain", "plain gate (baseline)"), ("base_cold", "--base-megatron-path, cold cache"),
                   ("base_warm", "--base-megatron-path, warm cache")):
    seconds = float(read(name, "s"))
    last = read(name, "txt").splitlines()[-1]
    print(f"{what:34} {seconds:8.1f} s  {seconds / plain:5.2f}x  exit {read(name, 'rc')}  {last}")
PY
