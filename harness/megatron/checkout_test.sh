#!/usr/bin/env bash
# ctest wrapper for the tests labelled megatron-checkout: finds the Megatron-LM snapshot with
# ci/megatron-snapshot.sh and runs COMMAND... --megatron-path SNAPSHOT. No snapshot (the script
# exits 3): exit 77, which ctest reports as skipped (NOT RUN), never as passed.
#   checkout_test.sh SOURCE_DIR COMMAND [ARGS...]
set -u
src=$1
shift
snapshot=$(bash "$src/ci/megatron-snapshot.sh")
rc=$?
if [ "$rc" -eq 3 ]; then
  echo "NOT RUN: no Megatron-LM snapshot here (ci/megatron-snapshot.sh exited 3)"
  exit 77
elif [ "$rc" -ne 0 ] || [ -z "$snapshot" ]; then
  echo "ERROR: harness_error: ci/megatron-snapshot.sh failed with exit $rc" >&2
  exit 3
fi
echo "INFO: Megatron-LM snapshot $snapshot"
exec "$@" --megatron-path "$snapshot"
