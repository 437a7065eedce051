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
if [ ! -f "$dest/megatron/core/__init__.py" ]; then
  rm -rf "$dest.partial"
  mkdir -p "$dest.partial"
  tar -xzf "$archive" -C "$dest.partial"
  rm -rf "$dest"
  mv "$dest.partial" "$dest"
fi
echo "$(cd "$dest" && pwd)"
