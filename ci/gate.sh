#!/usr/bin/env bash
# The main job: installs what is missing, builds, runs the gate on its built-in scenarios.
set -euo pipefail
cd "$(dirname "$0")/.."
IH_BUILD_TARGETS=interop-harness bash ci/build.sh
exec build/bin/interop-harness gate "$@"
