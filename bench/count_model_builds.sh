#!/usr/bin/env bash
# How many real models one `roundtrip --real` run builds, by process (the describing adapter, the save world, the
# load world), and its wall time; nothing is asserted. The count comes from bench/model_builds/sitecustomize.py
# (a wrapper of the adapter's one real-model builder, put on PYTHONPATH for this run only), so the same script
# measures any build of the harness. Usage:
#   [IH_BENCH_OUT=FILE] bench/count_model_builds.sh [BUILD_DIR] [roundtrip options...]
#   (default options: --all --save-ranks 4 --load-ranks 2; IH_BENCH_OUT keeps the run's output; IH_MEGATRON_PATH
#   names the checkout, else the snapshot of ci/megatron-snapshot.sh)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
shift || true
[ $# -gt 0 ] || set -- --all --save-ranks 4 --load-ranks 2
snapshot=${IH_MEGATRON_PATH:-$(cd "$here/.." && bash ci/megatron-snapshot.sh)}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
start=$(date +%s.%N)
code=0
IH_COUNT_MODEL_BUILDS=$log PYTHONPATH="$here/model_builds${PYTHONPATH:+:$PYTHONPATH}" \
  "$build/bin/interop-harness" roundtrip --real "$@" --megatron-path "$snapshot" >"${IH_BENCH_OUT:-/dev/null}" 2>&1 || code=$?
end=$(date +%s.%N)
python3 - "$log" "$start" "$end" "$code" "$*" <<'PY'
import collections, json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
wall = float(sys.argv[3]) - float(sys.argv[2])
print(f"roundtrip --real {sys.argv[5]}: exit {sys.argv[4]}, {wall:.1f} s wall, {len(rows)} real-model builds (one per rank each)")
for role, n in sorted(collections.Counter(r["role"] for r in rows).items()):
    print(f"  {role:12} {n:4d} builds in {len({r['pid'] for r in rows if r['role'] == role})} processes")
PY
