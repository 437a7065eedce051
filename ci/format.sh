#!/usr/bin/env bash
# Applies .clang-format to every tracked C++ file; `--check` only reports (ctest `format`).
set -euo pipefail
cd "$(dirname "$0")/.."
formatter=$(command -v clang-format-14 || command -v clang-format || true)
if [ -z "$formatter" ]; then
  echo "format: clang-format is not installed (bash ci/install-deps.sh installs it)" >&2
  exit 5
fi
mapfile -t files < <(git ls-files '*.cc' '*.h' 2>/dev/null || find . -path ./build -prune -o \( -name '*.cc' -o -name '*.h' \) -print)
if [ "${1:-}" = "--check" ]; then
  bad=0
  for file in "${files[@]}"; do
    "$formatter" --dry-run --Werror "$file" >/dev/null 2>&1 || { echo "format: $file is not formatted (bash ci/format.sh)"; bad=$((bad + 1)); }
  done
  echo "format: ${#files[@]} files, $bad not formatted"
  [ "$bad" -eq 0 ]
else
  "$formatter" -i "${files[@]}"
fi
