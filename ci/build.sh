#!/usr/bin/env bash
# Configures and builds into build/ (shared by ci/test.sh and ci/gate.sh). Extra args go to cmake.
# IH_BUILD_TARGETS="a b" limits the build to those targets; IH_BUILD_DIR names another build folder.
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/install-deps.sh
jobs=$(nproc 2>/dev/null || echo 2)
build=${IH_BUILD_DIR:-build}
# One compiler cache for every build folder of this clone at the same depth (build/, build-fresh-venv/):
# paths under the clone are hashed relative to it, and the build folder's own path is not hashed.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-true}
# -O1 -g1 (line tables): backtraces keep file:line, and a cold build needs about 40% less CPU time
# than -O2 -g (docs/guides/reproducing-a-ci-failure.md, "Build time").
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DIH_DEBUG_INFO=lines -DIH_OPTIMIZE=1 "$@" >/dev/null
targets=()
for target in ${IH_BUILD_TARGETS:-}; do targets+=(--target "$target"); done
# A whole build includes the round trips' LibTorch verifier (EXCLUDE_FROM_ALL: it needs the venv's torch)
# where the configure found one; otherwise the first round-trip test builds it inside its own timeout,
# beside the other tests (on CI's 2 cores that took megatron_roundtrip past its 600 s).
if [ ${#targets[@]} = 0 ] && grep -q '^configured ' "$build/roundtrip-verifier.txt" 2>/dev/null; then
  targets=(--target all --target ih_roundtrip_verifier)
fi
cmake --build "$build" -j "$jobs" ${targets[@]+"${targets[@]}"}
