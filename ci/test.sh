#!/usr/bin/env bash
# The test command: installs what is missing (Debian packages, the Megatron venv), builds, and runs
# the default suite with ctest (label campaign left out: CI's 2 cores, aim under 30 minutes).
# IH_CAMPAIGN=1 runs the opt-in campaign instead (label campaign: over 90 minutes on 2 cores).
# IH_BUILD_DIR names another build folder (default build/).
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/install-deps.sh
# The venv before the configure: CMake finds the LibTorch of the round trips' verifier in it.
bash ci/install-megatron.sh >/dev/null
bash ci/build.sh
# The Megatron-LM snapshot beside the clone (../shared/megatron), extracted once before the tests that
# use it; without one those tests report skipped, never passed.
bash ci/megatron-snapshot.sh >/dev/null || echo "INFO: no Megatron-LM snapshot here: tests labelled megatron-checkout are skipped"
cd "${IH_BUILD_DIR:-build}"
if [ "${IH_CAMPAIGN:-0}" = 1 ]; then select=(-L campaign); else select=(-LE campaign); fi
ctest --output-on-failure -j "$(nproc 2>/dev/null || echo 2)" --timeout 900 "${select[@]}" "$@"
