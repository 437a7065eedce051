#!/usr/bin/env bash
# A machine that has never had the Megatron venv: ci/test.sh with INTEROP_MEGATRON_VENV pointing at a
# folder that does not exist yet and a build folder that does not exist yet, running the round-trip
# tests. They need the venv's LibTorch at configure time, so this fails when ci/test.sh configures
# before it installs (a machine that already had the venv hides that). pip's cache keeps the install
# to a minute or two; the compiler cache keeps the build short (ci/build.sh).
# Usage: fresh_venv_test.sh SOURCE_DIR
set -uo pipefail
src=$(cd "$1" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/ih-fresh-venv.XXXXXX")
build=$src/build-fresh-venv.$$  # beside build/: the same depth, so the compiler cache hits
trap 'rm -rf "$work" "$build"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
export INTEROP_MEGATRON_VENV=$work/venv IH_BUILD_DIR=$build
[ ! -e "$INTEROP_MEGATRON_VENV" ] && [ ! -e "$build" ] || { echo "FAIL: venv or build folder exists already"; exit 1; }
log=$work/test.log
bash "$src/ci/test.sh" -R '^roundtrip_worlds_(4_to_2|2_to_4)$' >"$log" 2>&1
rc=$?
tail -n 25 "$log"
fail() { echo "FAIL: $*"; exit 1; }
[ "$rc" = 0 ] || fail "ci/test.sh exited $rc on a machine without a venv"
[ -x "$INTEROP_MEGATRON_VENV/bin/python" ] || fail "ci/test.sh did not install the venv at $INTEROP_MEGATRON_VENV"
grep -q '^configured ' "$build/roundtrip-verifier.txt" || fail "the build did not find the new venv's LibTorch: $(cat "$build/roundtrip-verifier.txt")"
grep -q '100% tests passed, 0 tests failed out of 2' "$log" || fail "the two round-trip tests did not both run and pass"
echo "PASS: fresh venv + clean build folder: ci/test.sh installed, configured with the venv's LibTorch, round trips passed"
