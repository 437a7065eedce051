#!/usr/bin/env bash
# A cross-version round trip's cost (issue 31), against a same-tree one in the same run; nothing is asserted.
# Usage: bench/cross_version_bench.sh [BUILD_DIR [REPS]]
# One real scenario (real_gpt_hybrid_swiglu_tied, 2 -> 1 ranks) saved and loaded REPS times (default 2) in each
# mode, the modes interleaved: same tree (the snapshot for both worlds) and cross-version (saved by the snapshot,
# loaded by an unchanged copy of it elsewhere, so the load world imports another tree and a second adapter
# describes the models). Printed per run: the scenario's save side and load side in their warm worlds (build,
# fill, save; build, retarget, load, dump), their sum, and the command's wall time; then the medians' ratios.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
reps=${2:-2}
bin=$build/bin/interop-harness
snapshot=$(bash ci/megatron-snapshot.sh)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$snapshot" "$work/copy"
for rep in $(seq "$reps"); do
  for mode in same cross; do
    load_tree=$snapshot
    [ "$mode" = cross ] && load_tree=$work/copy
    keep=$work/$mode-$rep
    start=$(date +%s.%N)
    "$bin" roundtrip --real --scenario real_gpt_hybrid_swiglu_tied --save-ranks 2 --load-ranks 1 \
      --save-megatron-path "$snapshot" --load-megatron-path "$load_tree" --keep "$keep" --json >"$keep.json" 2>/dev/null
    echo "$mode $(python3 -c "import time; print(time.time())") $start" >"$keep.time"
  done
done
python3 - "$work" "$reps" <<'PY'
import json, statistics, sys
work, reps = sys.argv[1], int(sys.argv[2])
rows = {"same": [], "cross": []}
for rep in range(1, reps + 1):
    for mode in rows:
        report = json.load(open(f"{work}/{mode}-{rep}/report.json"))
        d = report[0]["details"]
        _, end, start = open(f"{work}/{mode}-{rep}.time").read().split()
        save, load = d["scenario_seconds_save"], d["scenario_seconds_load"]
        rows[mode].append((save, load, save + load, float(end) - float(start), "ok" if report[0]["ok"] else "not ok"))
print(f"{'mode':6} {'rep':>3} {'warm save s':>11} {'warm load s':>11} {'save+load s':>11} {'wall s':>7} outcome")
for mode, runs in rows.items():
    for i, (save, load, both, wall, outcome) in enumerate(runs, 1):
        print(f"{mode:6} {i:3} {save:11.2f} {load:11.2f} {both:11.2f} {wall:7.1f} {outcome}")
med = {m: (statistics.median(r[2] for r in runs), statistics.median(r[3] for r in runs)) for m, runs in rows.items()}
print(f"cross / same, medians: warm save+load {med['cross'][0] / med['same'][0]:.2f}x, wall {med['cross'][1] / med['same'][1]:.2f}x")
PY
