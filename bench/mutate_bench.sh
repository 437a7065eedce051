#!/usr/bin/env bash
# mutate's speed (issue 32), measured in one run and printed, never asserted: the same N mutants (same seed,
# same coverage) of the snapshot's mapping.py judged (a) by the checks whose coverage reaches each line, adapters
# forked warm from the campaign's fork server (the default), (b) the same with cold adapters (--cold-adapters),
# and (c) by the whole gate per mutant; mutants per hour of each on this machine, the warm adapters' speedup
# (b)/(a) and check selection's speedup (c)/(a), with the load average before each run (the machine may be
# shared). Coverage: the committed harness/mutate/testdata/snapshot-coverage.json.
# Usage: bench/mutate_bench.sh [N] [BUILD_DIR] [RUNS]
#   N default 2; RUNS default "warm cold whole" (whole: a whole gate per mutant, minutes each; leave it out to
#   measure the warm adapters alone)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-2}
bin=${2:-build}/bin/interop-harness
runs=${3:-warm cold whole}
snapshot=$(bash ci/megatron-snapshot.sh)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
args=(mutate --target megatron --megatron-path "$snapshot" --files megatron/core/dist_checkpointing/mapping.py
      --coverage-json harness/mutate/testdata/snapshot-coverage.json --max-mutants "$n" --seed 3 --json)
run() {  # $1: name; the rest: extra flags. Wall seconds of the whole command (clean run included) into $work/$1.s
  local start end
  cut -d' ' -f1-3 /proc/loadavg > "$work/$1.load"
  start=$(date +%s.%N)
  "$bin" "${args[@]}" "${@:2}" > "$work/$1.json" 2> "$work/$1.log" || [ $? = 1 ]
  end=$(date +%s.%N)
  echo "$end - $start" | bc > "$work/$1.s"
}
for name in $runs; do
  case $name in
    warm) run warm ;;
    cold) run cold --cold-adapters ;;
    whole) run whole --whole-gate ;;
    *) echo "mutate_bench: unknown run $name (warm, cold, whole)" >&2; exit 2 ;;
  esac
done
python3 - "$work" "$n" "$(nproc)" $runs <<'PY'
import json, re, sys
work, n, cores, names = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
rows = {}
for name in names:
    seconds = float(open(f"{work}/{name}.s").read())
    report = json.load(open(f"{work}/{name}.json"))
    log = open(f"{work}/{name}.log").read()
    per_mutant = sum(m["seconds"] for m in report["mutants"]) / max(1, len(report["mutants"]))
    rows[name] = (per_mutant, [(m["line"], m["operator"], m["outcome"]) for m in report["mutants"]])
    served = re.search(r"warm adapters: \d+ started.*", log)
    print(f"{name:5s} {n} mutants in {seconds:7.1f} s (clean run included; load average before "
          f"{open(f'{work}/{name}.load').read().strip()}); {per_mutant:6.1f} s per mutant = "
          f"{3600 / per_mutant:6.1f} mutants/hour on {cores} cores; outcomes {[o for _, _, o in rows[name][1]]}"
          + (f"; {served[0]}" if served else ""))
if "warm" in rows and "cold" in rows:
    same = "the same outcomes" if rows["warm"][1] == rows["cold"][1] else "DIFFERENT OUTCOMES"
    print(f"warm adapters' speedup per mutant (cold / warm): {rows['cold'][0] / rows['warm'][0]:.2f}x ({same})")
if "warm" in rows and "whole" in rows:
    print(f"check selection's speedup per mutant (whole gate / selected checks): "
          f"{rows['whole'][0] / rows['warm'][0]:.1f}x")
PY
