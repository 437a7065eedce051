#!/usr/bin/env bash
# mutate's speed (issue 32), measured in one run and printed, never asserted: the same N mutants (same seed,
# same coverage) of the snapshot's mapping.py judged (a) by the checks whose coverage reaches each line and
# (b) by the whole gate per mutant; mutants per hour of each on this machine, and (b)/(a), check selection's
# speedup. Coverage: the committed harness/mutate/testdata/snapshot-coverage.json.
# Usage: bench/mutate_bench.sh [N] [BUILD_DIR]   (N default 2: (b) is a whole gate per mutant, minutes each)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-2}
bin=${2:-build}/bin/interop-harness
snapshot=$(bash ci/megatron-snapshot.sh)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
args=(mutate --target megatron --megatron-path "$snapshot" --files megatron/core/dist_checkpointing/mapping.py
      --coverage-json harness/mutate/testdata/snapshot-coverage.json --max-mutants "$n" --seed 3 --json)
run() {  # $1: name; the rest: extra flags. Wall seconds of the whole command (clean run included) into $work/$1.s
  local start end
  start=$(date +%s.%N)
  "$bin" "${args[@]}" "${@:2}" > "$work/$1.json" 2> "$work/$1.log" || [ $? = 1 ]
  end=$(date +%s.%N)
  echo "$end - $start" | bc > "$work/$1.s"
}
run selected
run whole --whole-gate
python3 - "$work" "$n" "$(nproc)" <<'PY'
import json, sys
work, n, cores = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rows = {}
for name in ("selected", "whole"):
    seconds = float(open(f"{work}/{name}.s").read())
    report = json.load(open(f"{work}/{name}.json"))
    per_mutant = sum(m["seconds"] for m in report["mutants"]) / max(1, len(report["mutants"]))
    rows[name] = (seconds, per_mutant, [m["outcome"] for m in report["mutants"]])
    print(f"{name:9s} {n} mutants in {seconds:7.1f} s (clean run included); {per_mutant:6.1f} s per mutant = "
          f"{3600 / per_mutant:6.1f} mutants/hour on {cores} cores; outcomes {rows[name][2]}")
print(f"check selection's speedup per mutant (whole gate / selected checks): {rows['whole'][1] / rows['selected'][1]:.1f}x")
PY
