#!/usr/bin/env bash
# The test command: installs what is missing, builds, runs the whole suite with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/build.sh
cd build
ctest --output-on-failure -j "$(nproc 2>/dev/null || echo 2)" --timeout 600 "$@"
