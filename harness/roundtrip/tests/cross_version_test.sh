#!/usr/bin/env bash
# A self-consistent layout change against the snapshot (docs/roundtrip.md, "Cross-version round trips"): the
# SwiGLU halves W and V keyed at each other's offsets, planted by plant_swiglu_swap.py in a copy made now (never
# committed). Inside the changed tree every loaded element is right, yet its stored bytes fail the reference's
# layout; saved by the snapshot and loaded by the change, and the other way, the loaded elements are named wrong.
# Usage: cross_version_test.sh BINARY (exit 77: skipped, no snapshot)
set -uo pipefail
bin=$1
here=$(cd "$(dirname "$0")" && pwd)
snap=$(bash "$here/../../../ci/megatron-snapshot.sh" 2>/dev/null) || { echo "SKIP: no Megatron-LM snapshot"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 "$here/plant_swiglu_swap.py" "$snap" "$work/new" || { echo "SKIP: the snapshot lacks the code to change"; exit 77; }
fail() { echo "FAIL (cross_version $1): $2" >&2; exit 1; }
run() {  # NAME SAVE_TREE LOAD_TREE: one 2 -> 1 round trip of the SwiGLU scenario, its output in $work/NAME
  "$bin" roundtrip --real --scenario real_gpt_hybrid_swiglu_tied --save-ranks 2 --load-ranks 1 \
    --save-megatron-path "$2" --load-megatron-path "$3" >"$work/$1" 2>&1
  local rc=$?
  cat "$work/$1"
  [ "$rc" = 1 ] || fail "$1" "exit $rc, expected 1"
}
run new_to_new "$work/new" "$work/new"
grep -q '^FAIL real_gpt_hybrid_swiglu_tied: .* elements verified, 0 wrong;' "$work/new_to_new" ||
  fail new_to_new "the changed tree does not load its own checkpoint right (the change is not self-consistent)"
grep -Eq 'stored bytes: [1-9][0-9]* of [0-9]+ stored elements are not where the reference' "$work/new_to_new" ||
  fail new_to_new "the stored bytes were not found wrong"
grep -q 'stored bytes: .*; decoder.layers.mlp.linear_fc1.weight chunk at \[0, 128, 0\] of \[1, 64, 64\]: element \[0, 128, 0\] holds decoder.layers.mlp.linear_fc1.weight\[0, 128, 0\], the reference.s layout puts decoder.layers.mlp.linear_fc1.weight\[0, 0, 0\] there' "$work/new_to_new" ||
  fail new_to_new "the first wrong stored element is not named by key, chunk and element"
# The plan is the save tree's: the hybrid's first gate row is fc1's row 0 in the snapshot's layout, row 128 in the
# change's; loaded from the other tree it holds the other row.
for pair in "snapshot_to_new $snap $work/new 0 128" "new_to_snapshot $work/new $snap 128 0"; do
  set -- $pair
  run "$1" "$2" "$3"
  grep -Eq '^FAIL real_gpt_hybrid_swiglu_tied: .* elements verified, [1-9][0-9]* wrong;' "$work/$1" ||
    fail "$1" "no loaded element was found wrong"
  grep -q "misplaced: rank 0: model.decoder.layers.1.mlp.linear_fc1.weight: decoder.layers.mlp.linear_fc1.weight\\[0, $4, 0\\] (local \\[0, 0\\]) holds decoder.layers.mlp.linear_fc1.weight\\[0, $5, 0\\]" "$work/$1" ||
    fail "$1" "the first misplaced element is not named"
  grep -q 'the save tree and the load tree describe save rank 0.s model: model.decoder.layers.0.mlp.linear_fc1.weight (built tensor 0)' "$work/$1" ||
    fail "$1" "the two trees' descriptions are not said to differ"
done
echo "cross_version: PASS (the change round-trips with itself, its stored bytes and both cross-version loads fail, named)"
