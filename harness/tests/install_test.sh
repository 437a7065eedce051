#!/usr/bin/env bash
# Installs the harness into a temporary prefix, moves the prefix, and runs the installed binary from
# another folder: it must find its data through harness/install/data_dir.h, not the source tree.
# Usage: install_test.sh BUILD_DIR [SOURCE_DIR] (interop-harness already built there). With SOURCE_DIR
# and `unshare -m` (root), the moved binary runs with the source tree hidden behind an empty folder,
# so nothing it needs may come from there.
set -uo pipefail
build="$1"
source_dir="${2:-}"
tmp=$(mktemp -d /tmp/ih-install-test-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL $1"; failures=$((failures + 1)); }
ok() { echo "ok   $1"; }

cmake --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; echo "FAIL install"; exit 1; }
mv "$tmp/prefix" "$tmp/moved"
bin="$tmp/moved/bin/interop-harness"
share="$tmp/moved/share/interop-harness"
for f in "$bin" "$share/harness/megatron/adapter/adapter.py" "$share/harness/megatron/adapter/roundtrip_world.py" \
         "$share/ci/install-megatron.sh"; do
  [ -e "$f" ] && ok "installed ${f#"$tmp"/moved/}" || fail "missing ${f#"$tmp"/moved/}"
done
ls "$share"/corpus/regressions/*.pin >/dev/null 2>&1 && ok "installed corpus/regressions" || fail "no pinned cases installed"
[ -e "$share/corpus/CMakeLists.txt" ] && fail "corpus/CMakeLists.txt installed" || ok "no build files in the data"

mkdir -p "$tmp/elsewhere" "$tmp/empty" && cd "$tmp/elsewhere"
run() { "$@"; }
if [ -n "$source_dir" ] && unshare -m true 2>/dev/null; then
  # A private mount namespace in which the source tree is an empty folder.
  run() { unshare -m bash -c 'mount --bind "$1" "$2" && shift 2 && exec "$@"' hide "$tmp/empty" "$source_dir" "$@"; }
  ok "source tree $source_dir hidden from the installed binary"
else
  echo "NOTE source tree not hidden (no SOURCE_DIR or no unshare): the binary could still read it"
fi
out=$(run "$bin" pattern maps --json 'M*-M*-' 2>&1); rc=$?
[ $rc -eq 0 ] && [[ "$out" == *'"ok":true'* ]] && ok "pattern maps from another folder" || fail "pattern maps: rc=$rc $out"
out=$(run "$bin" gate 2>&1); rc=$?
[ $rc -eq 0 ] && [[ "$out" == *"gate: PASSED"* ]] && ok "gate from another folder" || fail "gate: rc=$rc $(echo "$out" | tail -n 5)
     (a path under the source tree above means a call site still uses the compiled-in IH_DEFAULT_CORPUS_DIR /
      IH_SOURCE_DIR_PATH: use ih::install::corpus_dir() / adapter_dir() from harness/install/data_dir.h)"
# A pinned case's token replays from the installed binary (its corpus is the installed one): a case
# pinned on the reference must hold (exit 0), one pinned from a mutant must still fail on it (exit 1).
pin=$(grep -L "mutant=" "$share"/corpus/regressions/*.pin | head -n 1)
want=0
[ -z "$pin" ] && pin=$(ls "$share"/corpus/regressions/*.pin | head -n 1) && want=1
token=$(sed -n 's/^token: *//p' "$pin" | head -n 1)
out=$(run "$bin" repro "$token" 2>&1); rc=$?
[ $rc -eq $want ] && ok "repro of $(basename "$pin") from the installed binary (exit $rc)" ||
  fail "repro $token: rc=$rc (want $want) $(echo "$out" | tail -n 3)"
echo "$failures failed"
[ "$failures" -eq 0 ]
