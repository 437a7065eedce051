#!/usr/bin/env bash
# ci/fuzz.sh [TARGET|all [SECONDS]]: libFuzzer campaigns (opt-in; not part of ci/test.sh).
#   bash ci/fuzz.sh pattern 30     one target for 30 s
#   bash ci/fuzz.sh                every target, IH_FUZZ_SECONDS each (default 60)
# Builds the targets with clang-14 and ASan/UBSan into build-fuzz/, runs each from a working copy
# of its seeds (corpus/<target>_fuzzer/ and corpus/fuzz_regressions/<target>/) with its .dict and
# .options, and prints libFuzzer's final stats. Afterwards:
#   - new inputs are merged into corpus/<target>_fuzzer/ with -merge=1 (only those that add
#     coverage; IH_FUZZ_MERGE=0 skips this, e.g. on a laptop);
#   - a crash is minimized into corpus/fuzz_regressions/<target>/ (ctest label fuzz replays it)
#     and the command that reproduces it is printed. The exit code is 1 when a target found one.
# Campaign logs: build-fuzz/logs/<target>.log. docs/guides/adding-a-fuzz-target.md explains more.
set -euo pipefail
cd "$(dirname "$0")/.."
all=(pattern state_dict gtp_layout checkpoint_keys adapter_reply repro_token cli_args)
targets=("${all[@]}")
if [ $# -ge 1 ] && [ "$1" != all ]; then
  case " ${all[*]} " in
    *" $1 "*) targets=("$1") ;;
    *) echo "ERROR: invalid_argument: unknown fuzz target '$1' (one of: ${all[*]})" >&2; exit 2 ;;
  esac
fi
seconds=${2:-${IH_FUZZ_SECONDS:-60}}
case "$seconds" in ''|*[!0-9]*) echo "ERROR: invalid_argument: SECONDS must be a whole number, got '$seconds'" >&2; exit 2 ;; esac

bash ci/install-deps.sh
# -fno-sanitize-recover: a UBSan report is a finding, as on OSS-Fuzz. vptr checks stay off: the
# targets call the seam through one virtual class, and its type check cost a third of the time.
flags="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all -fno-sanitize=vptr -fno-omit-frame-pointer"
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang-14 \
  -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_CXX_FLAGS="$flags" -DIH_BUILD_BENCH=OFF \
  "-DIH_LIB_FUZZING_ENGINE=-fsanitize=fuzzer,address,undefined" >/dev/null
cmake --build build-fuzz $(printf -- '--target %s_fuzzer ' "${targets[@]}")

status=0
mkdir -p build-fuzz/logs
for target in "${targets[@]}"; do
  bin=build-fuzz/bin/${target}_fuzzer
  seeds=corpus/${target}_fuzzer regressions=corpus/fuzz_regressions/${target}
  work=build-fuzz/corpus/${target} findings=build-fuzz/findings/${target} log=build-fuzz/logs/${target}.log
  mkdir -p "$seeds" "$work" "$findings"
  cp -n "$seeds"/* "$work"/ 2>/dev/null || true
  [ -d "$regressions" ] && cp -n "$regressions"/* "$work"/ 2>/dev/null || true
  options=()  # every key = value of the [libfuzzer] section becomes -key=value (OSS-Fuzz convention)
  if [ -f fuzz/${target}_fuzzer.options ]; then
    while IFS= read -r line; do
      case "$line" in ''|'#'*|'['*) continue ;; esac
      key=$(echo "${line%%=*}" | tr -d ' ') value=$(echo "${line#*=}" | tr -d ' ')
      [ -n "$key" ] && options+=(-"$key"="$value")
    done < fuzz/${target}_fuzzer.options
  fi
  [ -s fuzz/${target}_fuzzer.dict ] && options+=(-dict=fuzz/${target}_fuzzer.dict)
  echo "INFO: fuzzing ${target} for ${seconds}s ($bin ${options[*]:-})"
  rm -f "$findings"/crash-* "$findings"/leak-* "$findings"/timeout-* "$findings"/oom-*
  rc=0
  "$bin" "$work" ${options[@]+"${options[@]}"} -max_total_time="$seconds" -artifact_prefix="$findings/" \
    -print_final_stats=1 >"$log" 2>&1 || rc=$?
  # libFuzzer's own summary: the last status line, "Done N runs", and the final stats.
  grep -E '^#[0-9]+.*(DONE|pulse)|^Done [0-9]+ runs|^stat::' "$log" | tail -n 12 || true
  if [ "$rc" -ne 0 ]; then
    status=1
    grep -E 'INVARIANT VIOLATED|ERROR: (AddressSanitizer|UndefinedBehaviorSanitizer|libFuzzer)|runtime error' "$log" | head -n 5 || true
    mkdir -p "$regressions"
    for crash in "$findings"/crash-* "$findings"/timeout-* "$findings"/oom-* "$findings"/leak-*; do
      [ -e "$crash" ] || continue
      name=$(basename "$crash")
      "$bin" -minimize_crash=1 -runs=20000 ${options[@]+"${options[@]}"} -exact_artifact_path="$regressions/$name" \
        "$crash" >"$log.minimize" 2>&1 || true
      [ -s "$regressions/$name" ] || cp "$crash" "$regressions/$name"
      echo "ERROR: finding: ${target}: minimized into $regressions/$name"
      echo "REPRO: $bin $regressions/$name    (or any compiler: build/bin/${target}_replay $regressions/$name)"
    done
  elif [ "${IH_FUZZ_MERGE:-1}" != 0 ]; then
    before=$(find "$seeds" -type f | wc -l)
    "$bin" -merge=1 ${options[@]+"${options[@]}"} "$seeds" "$work" >"$log.merge" 2>&1 || true
    echo "INFO: ${target}: merged into $seeds: $before -> $(find "$seeds" -type f | wc -l) inputs"
  fi
done
exit $status
