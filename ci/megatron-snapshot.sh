#!/usr/bin/env bash
# Extracts the Megatron-LM source snapshot (../shared/megatron/*.tar.gz beside the clone, or
# $IH_MEGATRON_SNAPSHOT) under build/megatron-snapshot/, outside the tracked tree, once.
# Prints the folder to pass as --megatron-path; exits 3 with a reason when there is no snapshot.
set -euo pipefail
cd "$(dirname "$0")/.."
archive=${IH_MEGATRON_SNAPSHOT:-}
if [ -z "$archive" ]; then
  for candidate in ../shared/megatron/megatron-lm-*.tar.gz; do
    [ -f "$candidate" ] && archive=$candidate
  done
fi
if [ -z "$archive" ] || [ ! -f "$archive" ]; then
  echo "megatron-snapshot: no snapshot (set IH_MEGATRON_SNAPSHOT or place ../shared/megatron/megatron-lm-*.tar.gz)" >&2
  exit 3
fi
name=$(basename "$archive" .tar.gz)
dest=build/megatron-snapshot/$name
mkdir -p build/megatron-snapshot
# Tests ask for the snapshot in parallel: one extracts (under the lock), into a private folder, then
# renames it into place; the others wait and find it there.
exec 9>build/megatron-snapshot/.lock
flock -w 600 9 || { echo "megatron-snapshot: timed out waiting for another extraction" >&2; exit 4; }
if [ ! -f "$dest/megatron/core/__init__.py" ]; then
  partial=$(mktemp -d build/megatron-snapshot/.partial.XXXXXX)
  tar -xzf "$archive" -C "$partial"
  # Byte-compiled once here: every rank of every world imports Megatron, and where PYTHONDONTWRITEBYTECODE
  # is set (as on this project's machines) it would compile each module again in each process (~1.5 s of ~7 s).
  venv_python=${INTEROP_MEGATRON_VENV:-$HOME/.cache/interop-harness/megatron-venv}/bin/python
  if [ -x "$venv_python" ]; then "$venv_python" -m compileall -q -j 0 "$partial" >/dev/null ||
    echo "megatron-snapshot: byte-compiling failed; each import compiles at run time instead" >&2; fi
  rm -rf "$dest"
  mv "$partial" "$dest"
fi
echo "$(cd "$dest" && pwd)"
