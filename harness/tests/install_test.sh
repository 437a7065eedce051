#!/usr/bin/env bash
# Installs the harness into a temporary prefix, moves the prefix, and runs the installed binary from
# another folder: it must find its data through harness/install/data_dir.h, not the source tree.
# Usage: install_test.sh BUILD_DIR (interop-harness already built there).
set -uo pipefail
build="$1"
tmp=$(mktemp -d /tmp/ih-install-test-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL $1"; failures=$((failures + 1)); }
ok() { echo "ok   $1"; }

cmake --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; echo "FAIL install"; exit 1; }
mv "$tmp/prefix" "$tmp/moved"
bin="$tmp/moved/bin/interop-harness"
share="$tmp/moved/share/interop-harness"
for f in "$bin" "$share/harness/megatron/adapter/adapter.py" "$share/harness/megatron/adapter/roundtrip.py" \
         "$share/ci/install-megatron.sh"; do
  [ -e "$f" ] && ok "installed ${f#"$tmp"/moved/}" || fail "missing ${f#"$tmp"/moved/}"
done
ls "$share"/corpus/regressions/*.pin >/dev/null 2>&1 && ok "installed corpus/regressions" || fail "no pinned cases installed"
[ -e "$share/corpus/CMakeLists.txt" ] && fail "corpus/CMakeLists.txt installed" || ok "no build files in the data"

mkdir -p "$tmp/elsewhere" && cd "$tmp/elsewhere"
out=$("$bin" pattern maps --json 'M*-M*-' 2>&1); rc=$?
[ $rc -eq 0 ] && [[ "$out" == *'"ok":true'* ]] && ok "pattern maps from another folder" || fail "pattern maps: rc=$rc $out"
out=$("$bin" gate 2>&1); rc=$?
[ $rc -eq 0 ] && [[ "$out" == *"gate: PASSED"* ]] && ok "gate from another folder" || fail "gate: rc=$rc $(echo "$out" | tail -n 5)"
# A pinned case's token replays from the installed binary (its corpus is the installed one).
pin=$(ls "$share"/corpus/regressions/*.pin | head -n 1)
token=$(sed -n 's/^token: *//p' "$pin" | head -n 1)
[ -z "$token" ] && token=$(head -n 1 "$pin")
out=$("$bin" repro "$token" 2>&1); rc=$?
[ $rc -eq 0 ] && ok "repro of $(basename "$pin") from the installed binary" || fail "repro $token: rc=$rc $(echo "$out" | tail -n 3)"
echo "$failures failed"
[ "$failures" -eq 0 ]
