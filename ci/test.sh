#!/usr/bin/env bash
# The test command: installs what is missing (Debian packages, the Megatron venv), builds, and runs
# the whole suite with ctest. Opt-in campaigns (label "campaign") run with: ctest -L campaign.
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
ctest --output-on-failure -j "$(nproc 2>/dev/null || echo 2)" --timeout 900 -LE campaign "$@"
