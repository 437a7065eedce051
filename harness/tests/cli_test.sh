#!/usr/bin/env bash
# CLI contract tests: output lines and exit codes are an interface others script against.
set -uo pipefail
cli="$1"
failures=0
check() {  # check NAME EXPECTED_RC EXPECTED_SUBSTRING -- COMMAND...
  local name="$1" want_rc="$2" want_text="$3"; shift 4
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [ "$rc" != "$want_rc" ] || [[ "$out" != *"$want_text"* ]]; then
    echo "FAIL $name: rc=$rc (want $want_rc), output: $out"; failures=$((failures + 1))
  else
    echo "ok   $name"
  fi
}
check maps-json 0 '{"pattern":"M*-M*-","ok":true,"num_gpt_layers":2,"attention_to_gpt":[[1,0],[4,1]],"mlp_to_gpt":[[2,0],[5,1]],"fresh_init":[0,3]}' -- "$cli" pattern maps --json 'M*-M*-'
check maps-error-kind 2 '"error":{"kind":"mixed_mlp_kinds"' -- "$cli" pattern maps --json 'M*-M*E'
check maps-stdin 2 '{"pattern":"","ok":false,"error":{"kind":"empty_pattern"' -- bash -c "printf '*-\n\n' | '$cli' pattern maps --json -"
check maps-table 0 'fresh init  0 3' -- "$cli" pattern maps 'M*-M*-'
check make 0 'M*-M*-|M*-M*-' -- "$cli" pattern make --gpt-layers 4 --block 'M*-' --segments 2
check make-bad-segments 2 'does not divide' -- "$cli" pattern make --gpt-layers 4 --block 'M*-' --segments 3
check make-bad-block 2 'unbalanced' -- "$cli" pattern make --gpt-layers 4 --block 'M**-'
check check-pairs 0 'yes: one-to-one with a 2-layer' -- "$cli" pattern check 'M*-M*-' --gpt-layers 2
check check-mismatch 1 'not 3' -- "$cli" pattern check 'M*-M*-' --gpt-layers 3
check check-pp 1 'segments_not_divisible_by_pp' -- "$cli" pattern check 'M*-|M*-|*-' --pp 2
check retarget 0 '"key":"decoder.layers.self_attention.linear_qkv.weight","global_shape":[1,4]' -- bash -c \
  "echo '[{\"path\":\"a\",\"entry\":{\"kind\":\"tensor\",\"key\":\"decoder.layers.1.self_attention.linear_qkv.weight\",\"global_shape\":[4],\"global_offset\":[0],\"local_shape\":[4],\"axis_fragmentations\":[1],\"replica_id\":0,\"prepend_axis_num\":0}}]' | '$cli' retarget --pattern 'M*-'"
check retarget-bad-json 2 'ERROR: bad_json' -- bash -c "echo '[{\"path\":1}]' | '$cli' retarget --pattern 'M*-'"
check retarget-not-json 2 'ERROR: bad_json: not valid JSON' -- bash -c "echo '[' | '$cli' retarget --pattern 'M*-'"
check retarget-unknown-layer 2 'unknown_hybrid_layer' -- bash -c \
  "echo '[{\"path\":\"a\",\"entry\":{\"kind\":\"object\",\"key\":\"decoder.layers.7.x\",\"global_shape\":[1],\"global_offset\":[0],\"replica_id\":0}}]' | '$cli' retarget --pattern 'M*-'"
check unknown-flag 2 'unknown flag --bogus' -- "$cli" pattern maps --bogus x
check unknown-command 2 "unknown command 'nope'" -- "$cli" nope
check gate 0 'gate: PASSED' -- "$cli" gate
# Bad input to pattern, retarget and layout: exit 2, one typed `ERROR: <kind>: ...` line on stderr,
# nothing on stdout, never a crash or a hang (issue 11; limits in docs/cli.md).
typed_checks=0
check_typed_error() {  # check_typed_error NAME KIND SUBSTRING -- COMMAND... (stdin from /dev/null unless piped)
  local name="$1" kind="$2" want_text="$3"; shift 4
  local out err rc
  typed_checks=$((typed_checks + 1))
  err=$(timeout 30 "$@" 2>&1 >/dev/null); rc=$?
  out=$(timeout 30 "$@" 2>/dev/null)
  if [ "$rc" != 2 ] || [[ "$err" != "ERROR: $kind: "*"$want_text"* ]] || [[ "$out" == *ERROR* ]]; then
    echo "FAIL $name: rc=$rc (want 2), stderr: $err, stdout: ${out:0:200}"; failures=$((failures + 1))
  else
    echo "ok   $name"
  fi
}
deep=$(mktemp); pins=$(mktemp -d); trap 'rm -rf "$deep" "$pins"' EXIT
python3 -c "print('[' * 50000 + ']' * 50000)" > "$deep"
check_typed_error retarget-50000-deep bad_json 'nested deeper than 256' -- bash -c "'$cli' retarget --pattern 'M*-' < '$deep'"
check_typed_error layout-too-many-ranks invalid_argument '--tp 100000 is outside [1, 4096]' -- "$cli" layout gdp \
  --d-inner-local 10 --group-state-local 3 --nheads-local 2 --tp 100000 --gtp 1000 --pad-align 16 --cols 2
check_typed_error layout-rank-product invalid_argument 'ranks, above the report' -- "$cli" layout gdp \
  --d-inner-local 10 --group-state-local 3 --nheads-local 2 --tp 1000 --gtp 1000 --pad-align 16 --cols 2
check_typed_error layout-missing-gtp invalid_argument '--gtp is required' -- "$cli" layout gdp \
  --d-inner-local 10 --group-state-local 3 --nheads-local 2 --tp 2 --pad-align 16 --cols 2
check_typed_error layout-svg-missing-folder invalid_argument 'does not exist' -- "$cli" layout gdp \
  --d-inner-local 10 --group-state-local 3 --nheads-local 2 --tp 2 --gtp 2 --pad-align 16 --cols 2 --svg /nonexistent-ih/x.svg
check_typed_error make-1e18 invalid_argument "'1e18' is not an integer" -- "$cli" pattern make --gpt-layers 1e18 --block 'M*-'
check_typed_error make-huge invalid_argument 'above the limit of 100000' -- "$cli" pattern make --gpt-layers 1000000000000000000 --block 'M*-'
check_typed_error check-huge-pp invalid_argument '--pp 100000000 is outside' -- "$cli" pattern check 'M*-' --pp 100000000
check_typed_error maps-error-on-stderr mixed_mlp_kinds "pattern 'M*-M*E'" -- "$cli" pattern maps 'M*-M*E'
check_typed_error pattern-no-subcommand invalid_argument 'pattern needs a subcommand' -- "$cli" pattern
check layout-pad-align-shown 0 'p = 16 (not used with G = 1)' -- "$cli" layout gdp --d-inner-local 10 --group-state-local 3 \
  --nheads-local 2 --tp 2 --gtp 1 --pad-align 16 --cols 2
check pattern-make-help-stdout 0 'usage: interop-harness pattern make' -- bash -c "'$cli' pattern make --help 2>/dev/null"
# A property's known finding is matched on its typed violation (kind and case), not on its text: a
# pin of the violation a mutant's failure has is KNOWN FINDING; the same pin with another kind FAILS.
cp -r "$(dirname "$0")/../../corpus/." "$pins/"
pin_orders() {
  printf '%s\n' 'token: ih1:property/load_orders_agree:mutant=load_to_state_dict_baseline:target=reference' \
    "reason: the mutant loads in to_state_dict's baseline order" "violation: $1" >"$pins/findings/orders.reference.finding"
}
pin_orders 'to_state_dict_failed spec=all_padding_rank'
check property-pin-typed 0 'KNOWN FINDING properties: load_orders_agree' -- \
  "$cli" gate --corpus "$pins" --property-cases 5 --mutant load_to_state_dict_baseline
pin_orders 'to_state_dict_differs spec=all_padding_rank'
check property-pin-other-violation 1 "not the known finding: a violation the finding pinned in orders.reference.finding \
does not expect: to_state_dict_failed spec=all_padding_rank" -- \
  "$cli" gate --corpus "$pins" --property-cases 5 --mutant load_to_state_dict_baseline
typed_checks=$((typed_checks + 2))
echo "$(( 19 + typed_checks - failures )) passed, $failures failed"
[ "$failures" -eq 0 ]
