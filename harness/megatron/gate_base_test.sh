#!/usr/bin/env bash
# The gate's base mode against the Megatron-LM snapshot (ctest megatron_checkout_gate_base, opt-in: three whole
# gates, about 10 minutes on 2 cores):
#   1. the snapshot against itself: an empty change, exit 0, "PASSED ..., against base: 0 worse, ..., 0 changed
#      lines not run" (a base turns coverage on);
#   2. a planted one-line slip in the checkpoint path (dist_checkpointing's sharding validation accepts a piece
#      saved by two main replicas: `shard_access_cnt >= 1` for `== 1`), gated against the snapshot, whose
#      verdicts come from the cache run 1 stored: exit 1, the worse checks listed first.
# No snapshot: exit 77 (skipped, never passed).   Usage: gate_base_test.sh INTEROP_HARNESS SOURCE_DIR
set -u
cli=$1
src=$2
snapshot=$(bash "$src/ci/megatron-snapshot.sh")
rc=$?
if [ "$rc" -eq 3 ]; then echo "NOT RUN: no Megatron-LM snapshot here"; exit 77; fi
[ "$rc" -eq 0 ] || { echo "ERROR: ci/megatron-snapshot.sh failed with exit $rc" >&2; exit 3; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL $1"; failures=$((failures + 1)); }

"$cli" gate --target megatron --megatron-path "$snapshot" --base-megatron-path "$snapshot" \
  --base-cache "$work/cache" >"$work/same.txt" 2>&1
rc=$?
tail -1 "$work/same.txt"
[ "$rc" -eq 0 ] || fail "same tree: exit $rc, not 0"
grep -q "^CHANGE against base .*: none (every check's verdict is the base's)$" "$work/same.txt" || fail "same tree: a change"
tail -1 "$work/same.txt" | grep -q "^gate: PASSED (.*), against base: 0 worse, 0 better, 0 other, .*, 0 changed lines not run$" ||
  fail "same tree: verdict line"

slip="$work/slip"
cp -r "$snapshot" "$slip"
file="$slip/megatron/core/dist_checkpointing/validation.py"
sed -i 's/if not torch.all(shard_access_cnt == 1):/if not torch.all(shard_access_cnt >= 1):/' "$file"
cmp -s "$file" "$snapshot/megatron/core/dist_checkpointing/validation.py" && fail "the slip was not planted"
"$cli" gate --target megatron --megatron-path "$slip" --base-megatron-path "$snapshot" --base-cache "$work/cache" \
  >"$work/slip.txt" 2>&1
rc=$?
sed -n '/^CHANGE against base/,/^$/p' "$work/slip.txt"
tail -1 "$work/slip.txt"
[ "$rc" -eq 1 ] || fail "slip: exit $rc, not 1"
grep -q "its verdicts from the cache" "$work/slip.txt" || fail "slip: the base was not read from the cache"
first=$(sed -n '/^CHANGE against base/{n;p;q}' "$work/slip.txt")
case "$first" in WORSE\ *) ;; *) fail "slip: the first change is not a worse one: $first" ;; esac
[ "$failures" -eq 0 ] && echo "gate base: 2 of 2 passed" || echo "gate base: $failures failure(s)"
[ "$failures" -eq 0 ]
