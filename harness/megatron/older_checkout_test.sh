#!/usr/bin/env bash
# ctest wrapper (label megatron-checkout): the gate against an older Megatron-LM checkout, one from
# before a real fix, named by IH_OLDER_MEGATRON (a directory holding megatron/). The gate must FAIL
# for Megatron's own reason: exit 1, at least one FAILED check, and no HARNESS ERROR or TIMEOUT (a
# patch that cannot apply or a world that cannot start is the harness's failure, exit 3, and fails
# this test). IH_OLDER_MEGATRON_FAILS="check,check" names checks that must be among the FAILED.
# Unset: exit 77 (ctest: skipped, never passed).
#   older_checkout_test.sh INTEROP_HARNESS
set -u
bin=$1
dir=${IH_OLDER_MEGATRON:-}
if [ -z "$dir" ]; then
  echo "NOT RUN: IH_OLDER_MEGATRON names no older Megatron-LM checkout"
  exit 77
fi
if [ ! -d "$dir/megatron/core" ]; then
  echo "ERROR: harness_error: IH_OLDER_MEGATRON=$dir holds no megatron/core" >&2
  exit 3
fi
out=$(mktemp)
trap 'rm -f "$out"' EXIT
nice "$bin" gate --target megatron --megatron-path "$dir" >"$out" 2>&1
rc=$?
grep -E '^(FAILED|HARNESS ERROR|TIMEOUT) |^gate: ' "$out"
fail() { echo "older checkout test: $*" >&2; exit 1; }
[ "$rc" -eq 1 ] || fail "gate exited $rc, want 1 (FAILED for Megatron's reason; 3 is a harness error)"
! grep -qE '^(HARNESS ERROR|TIMEOUT) ' "$out" || fail "a check ended in HARNESS ERROR or TIMEOUT"
! grep -qE 'PatchError|world_failed' "$out" || fail "a patch or a world start-up failed (the harness's failure)"
grep -qE '^FAILED ' "$out" || fail "no check FAILED"
IFS=, read -r -a want <<<"${IH_OLDER_MEGATRON_FAILS:-}"
for check in "${want[@]}"; do
  grep -qE "^FAILED .*: $check\$" "$out" || fail "check $check did not FAIL"
done
echo "older checkout test: the gate FAILED for Megatron's reason"
