#!/usr/bin/env bash
# Strict flags and inputs, and verdicts that are never lost (docs/cli.md, "Flags, output places and
# standard output"): each case asserts the exit code and what the message says.
set -uo pipefail
cli="$1"
failures=0
tmp=$(mktemp -d /tmp/ih-cli-strict-XXXXXX)
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
pass() { echo "ok   $1"; }
fail() { echo "FAIL $1: $2"; failures=$((failures + 1)); }
check() {  # check NAME EXPECTED_RC EXPECTED_SUBSTRING -- COMMAND...
  local name="$1" want_rc="$2" want_text="$3"; shift 4
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [ "$rc" != "$want_rc" ] || [[ "$out" != *"$want_text"* ]]; then
    fail "$name" "rc=$rc (want $want_rc), output: ${out:0:600}"
  else
    pass "$name"
  fi
}
check_fast() {  # check_fast NAME MAX_SECONDS EXPECTED_RC EXPECTED_SUBSTRING -- COMMAND...: also timed
  local name="$1" max_s="$2"; shift 2
  local start=$SECONDS
  check "$name" "$@"
  if [ $((SECONDS - start)) -ge "$max_s" ]; then fail "$name-time" "took $((SECONDS - start)) s (limit $max_s s)"; fi
}
layout_args=(layout gdp --d-inner-local 10 --group-state-local 3 --nheads-local 2 --tp 2 --gtp 2 --pad-align 16 --cols 2)
tensor='{"kind":"tensor","key":"decoder.layers.1.self_attention.linear_qkv.weight","global_shape":[4],"global_offset":[0],"local_shape":[4],"axis_fragmentations":[1],"replica_id":0,"prepend_axis_num":0}'
tensor_with() {  # tensor_with OLD NEW: the tensor entry with one literal text replaced
  printf '%s' "${tensor/"$1"/"$2"}"
}
retarget_json() {  # retarget_json NAME EXPECTED_RC EXPECTED_SUBSTRING DOCUMENT
  printf '%s' "$4" >"$tmp/in.json"
  check "$1" "$2" "$3" -- bash -c "'$cli' retarget --pattern 'M*-' < '$tmp/in.json'"
}

# A flag given twice is refused, whatever its spelling; a switch is not a value flag.
check twice-target 2 'flag --target given twice' -- "$cli" gate --target megatron --target reference
check twice-inline 2 'flag --tp given twice' -- "$cli" "${layout_args[@]}" --tp=4
check twice-pattern 2 'given twice' -- bash -c "echo '[]' | '$cli' retarget --pattern 'M*-' --pattern=M"

# -h is --help in every command and subcommand.
for words in gate mutants mutate repro properties pin retarget layout roundtrip "pattern maps" "pattern make" "pattern check"; do
  # shellcheck disable=SC2086
  check "short-help-${words// /-}" 0 'usage: interop-harness' -- "$cli" $words -h
done

# Integer flags are range-checked.
check gpt-layers-negative 2 '--gpt-layers -3 is outside [0, 100000]' -- "$cli" pattern check 'M*-M*-' --gpt-layers -3
check gpt-layers-huge 2 'outside [0, 100000]' -- "$cli" pattern check 'M*-M*-' --gpt-layers 100001
check gpt-layers-pairs 0 'gpt pairing  yes' -- "$cli" pattern check 'M*-M*-' --gpt-layers 2
check pp-zero 2 'outside [1, 4096]' -- "$cli" pattern check 'M*-M*-' --pp 0
check gate-cases-zero 2 '--property-cases 0 is outside' -- "$cli" gate --property-cases 0
check gate-seed-negative 2 '--seed -1 is outside' -- "$cli" gate --seed -1
check properties-cases-zero 2 '--cases 0 is outside' -- "$cli" properties --cases 0
check properties-size 2 '--max-size 10001 is outside' -- "$cli" properties --max-size 10001
check layout-tp-negative 2 '--tp -1 is outside' -- "$cli" layout gdp --d-inner-local 10 --group-state-local 3 \
  --nheads-local 2 --tp -1 --gtp 2 --pad-align 16 --cols 2
check roundtrip-tp-zero 2 '--save-tp 0 is outside' -- "$cli" roundtrip --target megatron --save-tp 0
check roundtrip-ranks 2 '--save-ranks 65 is outside' -- "$cli" roundtrip --all --save-ranks 65
check mutate-max-zero 2 '--max-mutants 0 is outside' -- "$cli" mutate --target megatron --megatron-path . --max-mutants 0
check mutate-not-a-tree 2 'is not a Megatron-LM tree' -- "$cli" mutate --target megatron --megatron-path .
check mutate-needs-path 2 '--megatron-path is required' -- "$cli" mutate --target megatron
check gate-checks-from-stale 2 "no gate check is called 'gate/x/y'" -- "$cli" gate --checks-from <(printf 'gate/x/y\n')
# Typed state, parsed once at the edge: a --fault, a --target or a --seed that names nothing is refused by name.
check roundtrip-fault-word 2 "--fault 'kill:1': expected kill_save:R" -- "$cli" roundtrip --all --fault kill:1
check roundtrip-fault-rank 2 'rank 2 is not in a world of 2 ranks' -- "$cli" roundtrip --all --save-ranks 2 \
  --fault kill_save:2
check roundtrip-fault-extra 2 "--fault 'truncate:1'" -- "$cli" roundtrip --all --fault truncate:1
check roundtrip-target-word 2 "unknown target 'megatorn' (known: reference, megatron)" -- "$cli" roundtrip --all \
  --target megatorn
check gate-target-word 2 "unknown target 'megatorn' (known: reference, megatron)" -- "$cli" gate --target megatorn
check roundtrip-seed-negative 2 '--seed -1 is outside' -- "$cli" roundtrip --seed -1
check roundtrip-cross-one-tree 2 'a cross-version round trip needs --real with both' -- "$cli" roundtrip --real --all \
  --save-megatron-path /tmp
check roundtrip-cross-not-real 2 'a cross-version round trip needs --real with both' -- "$cli" roundtrip --all \
  --save-megatron-path /tmp --load-megatron-path /tmp
check gate-base-on-reference 2 '--base-megatron-path and --base-ref apply to --target megatron only' -- "$cli" gate \
  --base-megatron-path /tmp
check gate-base-without-new 2 '--base-megatron-path needs --target megatron --megatron-path NEW' -- "$cli" gate \
  --target megatron --base-megatron-path /tmp
check max-input-zero 2 '--max-input-bytes 0 is outside' -- bash -c "echo '[]' | '$cli' retarget --pattern 'M*-' --max-input-bytes 0"

# retarget reads at most --max-input-bytes, and stops reading an endless input promptly.
check_fast max-input-small 5 2 'larger than --max-input-bytes 1000' -- bash -c \
  "head -c 5000 /dev/zero | '$cli' retarget --pattern 'M*-' --max-input-bytes 1000"
check_fast max-input-endless 5 2 'larger than --max-input-bytes 1048576' -- bash -c \
  "'$cli' retarget --pattern 'M*-' --max-input-bytes 1048576 < /dev/zero"
check_fast max-input-default 60 2 'larger than --max-input-bytes 1073741824' -- bash -c \
  "'$cli' retarget --pattern 'M*-' < /dev/zero"
check max-input-fits 0 '"path":"a"' -- bash -c "echo '[{\"path\":\"a\",\"entry\":$tensor}]' | '$cli' retarget --pattern 'M*-' --max-input-bytes 100000"

# retarget's JSON is strict, and every error names the JSON place.
retarget_json json-baseline 0 '"path":"a"' "[{\"path\":\"a\",\"entry\":$tensor}]"
retarget_json json-negative-shape 2 'entries[1].entry.global_shape[0]: must be at least 0, got -4' \
  "[{\"path\":\"a\",\"entry\":$tensor},{\"path\":\"b\",\"entry\":$(tensor_with '"global_shape":[4]' '"global_shape":[-4]')}]"
retarget_json json-negative-offset 2 'entries[0].entry.global_offset[0]: must be at least 0' \
  "[{\"path\":\"a\",\"entry\":$(tensor_with '"global_offset":[0]' '"global_offset":[-4]')}]"
retarget_json json-negative-local 2 'entries[0].entry.local_shape[0]' \
  "[{\"path\":\"a\",\"entry\":$(tensor_with '"local_shape":[4]' '"local_shape":[-4]')}]"
retarget_json json-negative-replica 2 'entries[0].entry.replica_id' \
  "[{\"path\":\"a\",\"entry\":$(tensor_with '"replica_id":0' '"replica_id":-1')}]"
retarget_json json-count-overflow 2 'entries[0].entry.global_shape: the element count overflows 64 bits' \
  '[{"path":"a","entry":{"kind":"tensor","key":"w","global_shape":[4294967296,4294967296],"global_offset":[0,0],"local_shape":[4294967296,4294967296],"axis_fragmentations":[1,1],"replica_id":0,"prepend_axis_num":0}}]'
retarget_json json-offset-overflow 2 'entries[0].entry.global_offset[0]: offset + local_shape[0] overflows' \
  '[{"path":"a","entry":{"kind":"tensor","key":"w","global_shape":[9223372036854775807],"global_offset":[9223372036854775806],"local_shape":[2],"axis_fragmentations":null,"replica_id":0,"prepend_axis_num":0}}]'
retarget_json json-too-big 2 'must be a 64-bit integer' \
  "[{\"path\":\"a\",\"entry\":$(tensor_with '"global_shape":[4]' '"global_shape":[9223372036854775808]')}]"
retarget_json json-duplicate-key 2 'entries[0].entry.global_shape: the key is given twice' \
  "[{\"path\":\"a\",\"entry\":$(tensor_with '"global_shape":[4]' '"global_shape":[4],"global_shape":[8]')}]"
retarget_json json-duplicate-item-key 2 'entries[1].path: the key is given twice' \
  "[{\"path\":\"a\",\"entry\":$tensor},{\"path\":\"b\",\"path\":\"c\",\"entry\":$tensor}]"
retarget_json json-unknown-field 2 'entries[0].entry.global_shap: unknown field' \
  "[{\"path\":\"a\",\"entry\":$(tensor_with '"key"' '"global_shap":[4],"key"')}]"
retarget_json json-unknown-item-field 2 'entries[0].comment: unknown field' \
  "[{\"path\":\"a\",\"comment\":\"x\",\"entry\":$tensor}]"
retarget_json json-unknown-object-field 2 'entries[0].entry.local_shape: unknown field' \
  '[{"path":"o","entry":{"kind":"object","key":"o","global_shape":[1],"global_offset":[0],"replica_id":0,"local_shape":[1]}}]'
retarget_json json-unknown-data-field 2 'entries[0].entry.data.strides: unknown field' \
  "[{\"path\":\"a\",\"entry\":$(tensor_with '"key"' '"data":{"shape":[4],"dtype":"float32","blocks":[[0,0,4]],"strides":[1]},"key"')}]"

# pin --name is a plain file name: nothing is written outside the corpus.
token='ih1:property/gpt_to_hybrid_load:mutant=retarget_so_placeholder_prepended:spec=tp2pp4_to_tp4pp2:target=reference'
mkdir -p "$tmp/pin/corpus"
for bad in '../../escaped' '../escaped' 'a/b' '' '.hidden' '..'; do
  check "pin-name-'$bad'" 2 "--name '$bad'" -- "$cli" pin "$token" --reason r --name "$bad" --corpus "$tmp/pin/corpus"
done
if [ -n "$(find "$tmp/pin" -name '*.pin' -print -quit)" ] || [ -e "$tmp/escaped.pin" ]; then
  fail pin-name-nothing-written "$(find "$tmp" -name '*.pin')"
else
  pass pin-name-nothing-written
fi
check_fast pin-corpus-dev-full 5 2 "--corpus '/dev/full/regressions'" -- "$cli" pin "$token" --reason r --corpus /dev/full
check pin-name-plain 0 "pinned $tmp/pin/corpus/regressions/plain_name.pin" -- \
  "$cli" pin "$token" --reason r --name plain_name --corpus "$tmp/pin/corpus"

# --json is honoured by every listing: one JSON document on stdout.
json_listing() {  # json_listing NAME KEY COMMAND...
  local name="$1" key="$2"; shift 2
  local out rc
  out=$("$@" 2>/dev/null); rc=$?
  if [ "$rc" = 0 ] && python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); k=sys.argv[1]; assert d[k] and all("name" in x for x in d[k])' "$key" <<<"$out"; then
    pass "$name"
  else
    fail "$name" "rc=$rc, output: ${out:0:300}"
  fi
}
json_listing properties-list-json properties "$cli" properties --list --json
json_listing properties-list-mutants-json mutants "$cli" properties --list-mutants --json
json_listing gate-list-mutants-json mutants "$cli" gate --list-mutants --json
json_listing roundtrip-list-json scenarios "$cli" roundtrip --list --json

# Output places are checked before any work: refused at once, naming the path and why.
touch "$tmp/a-file"
check_fast report-dev-full 5 2 "--report '/dev/full': is a file or device, not a folder" -- \
  "$cli" gate --target megatron --report /dev/full
check_fast report-under-file 5 2 "is under '$tmp/a-file', which is a file" -- \
  "$cli" gate --target megatron --report "$tmp/a-file/report"
check_fast report-is-file 5 2 "--report '$tmp/a-file': is a file" -- "$cli" gate --report "$tmp/a-file"
check_fast report-empty 5 2 "--report '': an empty path" -- "$cli" gate --report ''
check_fast report-proc 5 2 "--report '/proc/ih-report'" -- "$cli" gate --report /proc/ih-report
if [ "$(id -u)" != 0 ]; then  # root writes into a read-only folder anyway
  mkdir -p "$tmp/read-only" && chmod 555 "$tmp/read-only"
  check_fast report-read-only 5 2 "--report '$tmp/read-only/r'" -- "$cli" gate --report "$tmp/read-only/r"
  check_fast svg-read-only 5 2 "--svg '$tmp/read-only/x.svg'" -- "$cli" "${layout_args[@]}" --svg "$tmp/read-only/x.svg"
fi
check_fast svg-dev-full 5 2 "--svg '/dev/full': cannot write" -- "$cli" "${layout_args[@]}" --svg /dev/full
check_fast svg-folder 5 2 "--svg '$tmp': is a folder" -- "$cli" "${layout_args[@]}" --svg "$tmp"
check_fast svg-under-file 5 2 "which is a file, not a folder" -- "$cli" "${layout_args[@]}" --svg "$tmp/a-file/x.svg"
check_fast svg-empty 5 2 "--svg '': an empty path" -- "$cli" "${layout_args[@]}" --svg ''
check svg-dev-null 0 'tp_rank' -- "$cli" "${layout_args[@]}" --json --svg /dev/null
check_fast keep-dev-full 5 2 "--keep '/dev/full'" -- "$cli" roundtrip --all --keep /dev/full
if [ -e "$tmp/a-file/report" ] || [ -s "$tmp/a-file" ]; then fail refusals-write-nothing "a refused run wrote"; else pass refusals-write-nothing; fi

# A reused report folder loses the earlier run's files (and keeps everything else).
report="$tmp/report"
mkdir -p "$report"
for f in layout-old_property.svg junit.xml summary.md report.json summary.md.partial keep-me.txt mine.svg; do
  echo stale >"$report/$f"
done
check report-reused 0 'gate: PASSED' -- "$cli" gate --property-cases 1 --report "$report"
leftovers=$(cd "$report" && ls)
if [ -e "$report/layout-old_property.svg" ] || [ -e "$report/summary.md.partial" ] || grep -q stale "$report/summary.md" ||
  [ ! -e "$report/keep-me.txt" ] || [ ! -e "$report/mine.svg" ] || [ ! -s "$report/junit.xml" ]; then
  fail report-folder-emptied "left: $leftovers"
else
  pass report-folder-emptied
fi

# A report that cannot be written at the end still leaves the console verdict, and exits 3.
late="$tmp/late-report"
"$cli" gate --property-cases 25 --report "$late" >"$tmp/late.out" 2>&1 &
gate_pid=$!
# The folder is made before the checks start; wait for it however slow the machine (a loaded CI
# runner took over 4 s), but never past the gate's own end.
for _ in $(seq 1 6000); do
  [ -d "$late" ] && break
  kill -0 "$gate_pid" 2>/dev/null || break
  sleep 0.02
done
rm -rf "$late" && touch "$late"  # the folder becomes a file while the checks run
wait "$gate_pid"; rc=$?
out=$(cat "$tmp/late.out")
if [ "$rc" = 3 ] && [[ "$out" == *"gate: PASSED"* ]] && [[ "$out" == *"ERROR:"*"$late"* ]] &&
  [[ "$out" == *"checks"* ]]; then
  pass report-late-failure-keeps-verdict
else
  fail report-late-failure-keeps-verdict "rc=$rc, output tail: $(tail -c 600 <<<"$out")"
fi

# A cross-version check's token replays across the base tree it names: without one (or where it is no checkout
# here) it is refused naming what is missing, exit 2, never replayed against the installed package.
mkdir -p "$tmp/new/megatron/core" && touch "$tmp/new/megatron/core/__init__.py"
cross_token() {  # cross_token [OPTION=VALUE...]: a well-formed token of a cross-version check (options sorted)
  python3 -c 'import sys, zlib
text = ":".join(["ih2:gate/real-roundtrip-cross/base-to-new_real_gpt_4_to_2"] + sorted(sys.argv[1:]))
print("%s:crc=%08x" % (text, zlib.crc32(text.encode())))' "megatron-path=$tmp/new" target=megatron "$@"
}
check repro-cross-no-base 2 "a cross-version check's token needs base-megatron-path=DIR, the BASE Megatron-LM tree" \
  -- "$cli" repro "$(cross_token)"
check repro-cross-base-not-here 2 "needs base-megatron-path $tmp/no-base to be a Megatron-LM checkout here" \
  -- "$cli" repro "$(cross_token "base-megatron-path=$tmp/no-base")"

# Standard output that cannot be written is exit 3, never exit 0.
stdout_full() {  # stdout_full NAME COMMAND...: stdout on /dev/full
  local name="$1"; shift
  local err rc
  err=$("$@" 2>&1 >/dev/full); rc=$?
  if [ "$rc" = 3 ] && [[ "$err" == *"ERROR: harness_error: cannot write standard output"* ]]; then
    pass "$name"
  else
    fail "$name" "rc=$rc, stderr: ${err: -300}"
  fi
}
stdout_full stdout-retarget bash -c "echo '[{\"path\":\"a\",\"entry\":$tensor}]' | '$cli' retarget --pattern 'M*-'"
stdout_full stdout-layout-json "$cli" "${layout_args[@]}" --json
stdout_full stdout-pattern-maps "$cli" pattern maps 'M*-M*-'
stdout_full stdout-help "$cli" gate --help
stdout_full stdout-gate-json "$cli" gate --property-cases 1 --json

echo "$failures failure(s)"
[ "$failures" = 0 ]
