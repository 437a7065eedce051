#!/usr/bin/env bash
# The real tier's costs (issue 17), measured with the CLI's own timing and printed against baselines of the
# same run; nothing is asserted. Usage: bench/real_models_bench.sh [--gate] [BUILD_DIR]
#   - per real scenario (roundtrip --real --all, 4 -> 2 ranks): the whole scenario in its warm world (save
#     side: build, fill, save; load side: build, retarget, load, dump), dist_checkpointing's own save and load
#     against a memcpy of the same bytes, and the C++ checker's comparisons against a memcpy of the same bytes;
#   - with --gate: the gate's wall time against the snapshot, and the real-roundtrips group's share of it (read
#     off the gate's summary table).
set -euo pipefail
cd "$(dirname "$0")/.."
gate=0
if [ "${1:-}" = "--gate" ]; then gate=1; shift; fi
build=${1:-build}
bin=$build/bin/interop-harness
snapshot=$(bash ci/megatron-snapshot.sh)
keep=$(mktemp -d)
trap 'rm -rf "$keep"' EXIT
start=$(date +%s.%N)
"$bin" roundtrip --real --all --save-ranks 4 --load-ranks 2 --megatron-path "$snapshot" --keep "$keep" --json >"$keep/out.json" 2>"$keep/progress.txt"
end=$(date +%s.%N)
python3 - "$keep/report.json" "$start" "$end" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
wall = float(sys.argv[3]) - float(sys.argv[2])
print(f"roundtrip --real --all 4 -> 2: {wall:.1f} s wall for the run (adapter that describes the models, two mpirun worlds, verifier)")
print(f"{'scenario':32} {'warm save s':>11} {'warm load s':>11} {'save/memcpy':>11} {'load/memcpy':>11} {'elements':>9} {'check/memcpy':>12}")
for s in report:
    d = s["details"]
    v = d.get("verifier", {})
    ratio = lambda phase: d.get(f"throughput_{phase}", {}).get("ratio_to_memcpy", 0.0)
    print(f"{s['name']:32} {d.get('scenario_seconds_save', 0):11.2f} {d.get('scenario_seconds_load', 0):11.2f} "
          f"{ratio('save'):11.5f} {ratio('load'):11.5f} {v.get('elements_verified', 0):9d} {v.get('compare_vs_memcpy', 0):12.3f}")
PY
if [ "$gate" = 1 ]; then
  start=$(date +%s)
  "$bin" gate --target megatron --megatron-path "$snapshot" >"$keep/gate.txt" 2>&1 || true
  end=$(date +%s)
  echo "gate --target megatron (snapshot): $((end - start)) s wall; $(tail -1 "$keep/gate.txt")"
  grep -E '^real-roundtrips ' "$keep/gate.txt" | awk -v total=$((end - start)) '{printf "  of which the real-roundtrips group: %s s (%.0f%%)\n", $NF, 100 * $NF / total}'
fi
