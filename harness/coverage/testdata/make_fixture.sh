#!/usr/bin/env bash
# Regenerates coverage.json (README.md) with the Megatron venv's coverage.py.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
python=${INTEROP_MEGATRON_VENV:-$HOME/.cache/interop-harness/megatron-venv}/bin/python
data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT
IH_COVERAGE_DIR=$data IH_COVERAGE_SOURCE=$here/tree/megatron "$python" - "$here" <<'PY'
import sys
here = sys.argv[1]
sys.path.insert(0, here + "/../../megatron/adapter")
from megatron_adapter import coverage_run
coverage_run.start()
sys.path.insert(0, here + "/tree")
from megatron.core.dist_checkpointing import serialization as s
coverage_run.switch("gate/spec-invariants/a"); s.save({"b": 1, "a": 2})
coverage_run.switch("gate/real-roundtrips/b_4_to_2"); s.save({}); s.Loader().load_state_dict({})
coverage_run.save()
PY
"$python" -m coverage combine --quiet --data-file="$data/.coverage" "$data"
(cd "$here/tree" && "$python" -m coverage json --quiet --pretty-print --show-contexts --data-file="$data/.coverage" -o "$here/coverage.json")
