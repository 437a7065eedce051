#!/usr/bin/env bash
# A libFuzzer campaign (opt-in; not part of ci/test.sh): builds the targets with clang-14 and
# ASan/UBSan into build-fuzz/, then runs each for IH_FUZZ_SECONDS (default 60) starting from
# corpus/<target>/ with its .dict and .options. Findings land in build-fuzz/findings/<target>/;
# replay one with build/bin/<target>_replay FILE, and pin it by copying it into corpus/<target>/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/install-deps.sh
seconds=${IH_FUZZ_SECONDS:-60}
flags="-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer"
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang-14 \
  -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_CXX_FLAGS="$flags" -DIH_BUILD_BENCH=OFF \
  "-DIH_LIB_FUZZING_ENGINE=-fsanitize=fuzzer,address,undefined" >/dev/null
targets=(pattern state_dict gtp_layout)
cmake --build build-fuzz $(printf -- '--target %s_fuzzer ' "${targets[@]}")
status=0
for target in "${targets[@]}"; do
  work=build-fuzz/corpus/${target}_fuzzer findings=build-fuzz/findings/${target}_fuzzer
  mkdir -p "$work" "$findings"
  cp -n corpus/${target}_fuzzer/* "$work"/ 2>/dev/null || true
  max_len=$(sed -n 's/^max_len *= *//p' fuzz/${target}_fuzzer.options)
  dict=()
  [ -s fuzz/${target}_fuzzer.dict ] && dict=(-dict=fuzz/${target}_fuzzer.dict)
  echo "INFO: fuzzing ${target} for ${seconds}s"
  if ! build-fuzz/bin/${target}_fuzzer "$work" ${dict[@]+"${dict[@]}"} -max_len="$max_len" \
       -max_total_time="$seconds" -artifact_prefix="$findings/" -print_final_stats=1 2>&1 | tail -n 12; then
    echo "ERROR: ${target}: a finding was saved under $findings/"; status=1
  fi
done
exit $status
