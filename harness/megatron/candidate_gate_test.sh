#!/usr/bin/env bash
# ctest (label megatron-checkout, through checkout_test.sh): the gate with the candidate shard-split
# design (not Megatron's code) against the snapshot runs every check (nothing NOT RUN: --require-all)
# and passes apart from finding C, reported as the candidate's known finding; with the declared fix
# --fix to_state_dict_order the same check passes and its pin is reported STALE.
#   candidate_gate_test.sh INTEROP_HARNESS --megatron-path SNAPSHOT
set -u
bin=$1
shift
out=$("$bin" gate --target megatron --candidate shard-split --require-all "$@" 2>&1)
rc=$?
echo "$out" | grep -v '^INFO: \[' | head -40
fail() { echo "FAIL: $*"; exit 1; }
[ "$rc" -eq 0 ] || fail "gate --candidate shard-split --require-all exited $rc (want 0)"
echo "$out" | head -1 | grep -q "candidate shard-split design, not Megatron's code" || fail "first line does not name the candidate"
echo "$out" | grep -q "^KNOWN FINDING properties: load_orders_agree" || fail "finding C not reported as the candidate's known finding"
echo "$out" | grep -q "^NOT RUN" && fail "a check did not run"
fixed=$("$bin" gate --target megatron --candidate shard-split --fix to_state_dict_order "$@" 2>&1)
rc=$?
echo "$fixed" | grep -v '^INFO: \[' | head -20
[ "$rc" -eq 0 ] || fail "gate with --fix to_state_dict_order exited $rc (want 0)"
echo "$fixed" | grep -q "^STALE FINDING properties: load_orders_agree" || fail "with the fix, finding C's pin is not reported STALE"
echo "$fixed" | grep -q "^KNOWN FINDING properties: load_orders_agree" && fail "with the fix, finding C still reproduces"
echo "PASS: candidate gate runs everything; finding C known without the fix, stale with it"
