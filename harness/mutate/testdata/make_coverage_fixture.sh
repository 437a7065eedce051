#!/usr/bin/env bash
# Makes snapshot-coverage.json, the coverage that the default suite's mutate test selects checks from, by
# the simplest honest means until `gate --coverage` (dynamic contexts per check) exists: one gate run per
# check under coverage.py, the check's name its static context, forked world workers included.
# Usage: make_coverage_fixture.sh BINARY SNAPSHOT OUT.json CHECK...   (lines executed at import carry
# every check's context here: each process imports Megatron under one check.)
set -euo pipefail
bin=$1 tree=$(cd "$2" && pwd) out=$3
shift 3
venv=${INTEROP_MEGATRON_VENV:-$HOME/.cache/interop-harness/megatron-venv}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf '[run]\nparallel = true\ndata_file = %s/.coverage\nsource = %s/megatron\ncontext = ${IH_COVERAGE_CHECK}\npatch =\n    fork\n    _exit\n' \
  "$work" "$tree" > "$work/rc"
for check in "$@"; do
  printf '%s\n' "$check" > "$work/checks.txt"
  IH_COVERAGE_CHECK=$check COVERAGE_PROCESS_START=$work/rc COVERAGE_CORE=sysmon \
    "$bin" gate --target megatron --megatron-path "$tree" --checks-from "$work/checks.txt" --json > /dev/null
done
(cd "$work" && "$venv/bin/python" -m coverage combine --rcfile=rc -q . &&
  "$venv/bin/python" -m coverage json --rcfile=rc --show-contexts -q -o "$work/coverage.json")
"$venv/bin/python" - "$work/coverage.json" "$tree" "$out" <<'PY'
import json, sys
data, root, out = json.load(open(sys.argv[1])), sys.argv[2] + "/", sys.argv[3]
files = {f[len(root):]: {"executed_lines": v["executed_lines"], "contexts": v["contexts"]}
         for f, v in data["files"].items() if f.startswith(root) and f.endswith("dist_checkpointing/mapping.py")}
json.dump({"meta": {"note": "made by harness/mutate/testdata/make_coverage_fixture.sh", "show_contexts": True},
           "files": files},
          open(out, "w"), separators=(",", ":"))
PY
