#!/usr/bin/env bash
# A slip in Megatron's checkpoint path that the campaign found surviving (docs/megatron-findings.md), planted in a
# copy of the snapshot made now (plant_slip.py): the real scenario or gate check that closes it must FAIL for
# Megatron's reason, and PASS on the snapshot itself (so the failure is the slip's).
# Usage: planted_slip_test.sh BINARY SCENARIO SAVE_RANKS LOAD_RANKS FILE OLD NEW EXPECTED (exit 77: skipped, no
# snapshot or no such code); SCENARIO: a real round trip's scenario, or a gate check's name (gate/GROUP/CHECK,
# the ranks then empty: the check picks its own worlds);
# EXPECTED: an extended regular expression the failing round trip's output holds (Megatron's error, or the
# verifier's line naming what is wrong).
set -uo pipefail
bin=$1 scenario=$2 save_ranks=$3 load_ranks=$4 file=$5 old=$6 new=$7 expected=$8
here=$(cd "$(dirname "$0")" && pwd)
snap=$(bash "$here/../../../ci/megatron-snapshot.sh" 2>/dev/null) || { echo "SKIP: no Megatron-LM snapshot"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 "$here/plant_slip.py" "$snap" "$work/slip" "$file" "$old" "$new" || { echo "SKIP: the snapshot lacks the code"; exit 77; }
echo "$scenario" >"$work/checks.txt"
run() {  # NAME TREE: one round trip of the scenario (or the gate check), its output in $work/NAME.txt; prints its exit
  if [[ $scenario == gate/* ]]; then
    "$bin" gate --target megatron --megatron-path "$2" --checks-from "$work/checks.txt" >"$work/$1.txt" 2>&1
  else
    "$bin" roundtrip --real --scenario "$scenario" --save-ranks "$save_ranks" --load-ranks "$load_ranks" \
      --megatron-path "$2" >"$work/$1.txt" 2>&1
  fi
  echo $?
}
rc=$(run snapshot "$snap")
[ "$rc" = 0 ] || { cat "$work/snapshot.txt"; echo "FAIL: $scenario does not pass on the snapshot (exit $rc)" >&2; exit 1; }
rc=$(run slip "$work/slip")
cat "$work/slip.txt"
[ "$rc" = 1 ] || { echo "FAIL: the slip was not caught: exit $rc, expected 1" >&2; exit 1; }
grep -qE "$expected" "$work/slip.txt" || { echo "FAIL: the failure is not the slip's: $expected" >&2; exit 1; }
echo "planted slip caught: $file '$old' -> '$new' fails $scenario"
