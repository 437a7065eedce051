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
echo "$(( 17 - failures )) passed, $failures failed"
[ "$failures" -eq 0 ]
