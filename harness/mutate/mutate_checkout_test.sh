#!/usr/bin/env bash
# `mutate` end to end on the Megatron-LM snapshot, a handful of mutants (default suite, label megatron-checkout):
# the JSON's shape and honesty (each mutant's checks are those the coverage gives its line, a killed one names the
# checks that killed it among them), the snapshot untouched, and the base mode on a copy with one changed line
# mutating that line only; the same mutants with cold adapters (--cold-adapters) get the same outcomes as with the
# campaign's fork server, which served every adapter start. The checks are selected from the committed coverage
# (testdata/snapshot-coverage.json).
# No snapshot: exit 77 (skipped, never passed).
#   mutate_checkout_test.sh SOURCE_DIR BINARY
set -u
src=$1 bin=$2
snapshot=$(bash "$src/ci/megatron-snapshot.sh")
case $? in
  0) ;;
  3) echo "NOT RUN: no Megatron-LM snapshot here"; exit 77 ;;
  *) echo "ERROR: ci/megatron-snapshot.sh failed" >&2; exit 3 ;;
esac
file=megatron/core/dist_checkpointing/mapping.py
coverage=$src/harness/mutate/testdata/snapshot-coverage.json
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
before=$(sha256sum < "$snapshot/$file")
"$bin" mutate --target megatron --megatron-path "$snapshot" --files "$file" --coverage-json "$coverage" \
  --max-mutants 2 --seed 3 --json --report "$work/report" > "$work/stdout.json" 2> "$work/warm.log"
rc=$?
[ "$rc" = 0 ] || [ "$rc" = 1 ] || { echo "FAIL: mutate exited $rc"; cat "$work/warm.log"; exit 1; }
"$bin" mutate --target megatron --megatron-path "$snapshot" --files "$file" --coverage-json "$coverage" \
  --max-mutants 2 --seed 3 --json --cold-adapters > "$work/cold.json" 2> "$work/cold.log"
rc=$?
[ "$rc" = 0 ] || [ "$rc" = 1 ] || { echo "FAIL: mutate --cold-adapters exited $rc"; cat "$work/cold.log"; exit 1; }
[ "$(sha256sum < "$snapshot/$file")" = "$before" ] || { echo "FAIL: the snapshot's $file was edited"; exit 1; }
# The base mode: a copy whose line 135 changed; only that line is mutated.
cp -r "$snapshot" "$work/new"
sed -i '135s/return self.axis_fragmentations is not None/return (self.axis_fragmentations is not None)/' "$work/new/$file"
"$bin" mutate --target megatron --megatron-path "$work/new" --base-megatron-path "$snapshot" --files "$file" \
  --coverage-json "$coverage" --max-mutants 2 --json > "$work/base.json"
rc=$?
[ "$rc" = 0 ] || [ "$rc" = 1 ] || { echo "FAIL: mutate --base-megatron-path exited $rc"; exit 1; }
python3 - "$work" "$coverage" "$file" <<'PY'
import json, re, sys
work, coverage, file = sys.argv[1:]
contexts = json.load(open(coverage))["files"][file]["contexts"]
out = json.load(open(f"{work}/stdout.json"))
assert out == json.load(open(f"{work}/report/mutation.json")), "--json and --report differ"
assert len(out["mutants"]) == 2, out
for m in out["mutants"]:
    assert m["file"] == file and m["operator"].startswith("core/"), m
    assert m["diff"].startswith(f"--- a/{file}\n+++ b/{file}\n"), m["diff"]
    assert m["outcome"] in ("killed", "survived", "timeout", "incompetent", "equivalent"), m
    assert sorted(m["checks"]) == sorted(set(contexts[str(m["line"])])), m
    assert set(m["killed_by"]) <= set(m["checks"]) and bool(m["killed_by"]) == (m["outcome"] == "killed"), m
judged = [m for m in out["mutants"] if m["outcome"] in ("killed", "survived", "timeout")]
killed = [m for m in judged if m["outcome"] == "killed"]
assert out["score"] == (len(killed) / len(judged) if judged else None), out["score"]
assert killed, "no mutant of the two was killed: the checks no longer notice a broken mapping.py"
warm_log = open(f"{work}/warm.log").read()
served = re.search(r"warm adapters: (\d+) started by the fork server, (\d+) cold", warm_log)
assert served and int(served[1]) >= 3 and served[2] == "0", "not every adapter started warm:\n" + warm_log
assert "cold adapters (--cold-adapters)" in open(f"{work}/cold.log").read()
cold = json.load(open(f"{work}/cold.json"))
outcomes = lambda report: [(m["line"], m["operator"], m["outcome"], m["killed_by"]) for m in report["mutants"]]
assert outcomes(out) == outcomes(cold), f"warm and cold adapters disagree:\n{outcomes(out)}\n{outcomes(cold)}"
base = json.load(open(f"{work}/base.json"))
assert base["mutants"] and all(m["line"] == 135 for m in base["mutants"]), base
print("mutate: %d mutants (%d killed; the same outcomes with %s warm adapter starts and with cold ones), base "
      "mode: %d mutants on the changed line" % (len(out["mutants"]), len(killed), served[1], len(base["mutants"])))
PY
