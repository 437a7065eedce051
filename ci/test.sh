#!/usr/bin/env bash
# The test command: installs what is missing (Debian packages, the Megatron venv), builds, and runs
# the whole suite with ctest. Opt-in campaigns (label "campaign") run with: ctest -L campaign.
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/build.sh
bash ci/install-megatron.sh >/dev/null
# The Megatron-LM snapshot beside the clone (../shared/megatron), extracted once before the tests that
# use it; without one those tests report skipped, never passed.
bash ci/megatron-snapshot.sh >/dev/null || echo "INFO: no Megatron-LM snapshot here: tests labelled megatron-checkout are skipped"
cd build
ctest --output-on-failure -j "$(nproc 2>/dev/null || echo 2)" --timeout 900 -LE campaign "$@"
