#!/usr/bin/env bash
# `interop-harness model dump` on the reference (docs/cli.md): valid configurations print the flat
# entry JSON of their rank; invalid ones are typed errors with exit 2 naming the problem.
#   model_dump_cli_test.sh INTEROP_HARNESS
set -u
cli=$1
fails=0
expect() {  # expect CODE TEXT ARGS...: exit CODE and TEXT in stdout+stderr
  local code=$1 text=$2
  shift 2
  local out rc
  out=$("$cli" model "$@" 2>&1)
  rc=$?
  if [ "$rc" -ne "$code" ] || ! grep -qF -- "$text" <<<"$out"; then
    echo "FAIL model $*: exit $rc (want $code), output lacks '$text':"
    echo "$out" | head -5
    fails=$((fails + 1))
  else
    echo "ok   model $* -> $code"
  fi
}
expect 0 '"key":"decoder.layers.self_attention.linear_qkv.weight"' dump --model gpt --rank 0 --json
expect 0 '"global_offset":[0,384,0]' dump --model gpt --tp 2 --rank 1 --json
expect 0 '"kind":"factory"' dump --model gpt --gated --rank 0 --json
expect 0 'decoder.layers.0.mixer.in_proj.weight' dump --model hybrid --pattern 'M*-M*-' --rank 0 --json
expect 0 'optimizer.state.exp_avg.' dump --model gpt --optimizer --rank 0 --json
expect 0 '"key":"optimizer.state.param.output_layer.weight"' dump --model gpt --optimizer --rank 0 --json
expect 0 '"path":"optimizer.param_state_sharding_type"' dump --model gpt --experts 2 --optimizer --rank 0 --json
expect 0 '"path":"optimizer.1.param_state_sharding_type"' dump --model hybrid --pattern 'M*E|M*-' --experts 2 --ep 2 --pp 2 --optimizer --rank 2 --json
expect 0 'mlp.experts.experts.linear_fc1.weight' dump --model gpt --experts 4 --ep 2 --rank 1
expect 0 '"key":"decoder.layers.0.mixer.conv1d.weight.K2"' dump --model hybrid --mixer gdp --rank 0 --json
expect 0 '"key":"decoder.layers.0.mixer.in_proj.weight.b2"' dump --model hybrid --mixer gdp --gtp 2 --rank 1 --json
expect 2 'num_attention_heads by tp: 8 is not divisible by 3' dump --model gpt --tp 3 --rank 0
expect 2 'rank 2 is outside the world of 2 ranks' dump --model gpt --tp 2 --rank 2
expect 2 "'X' is not a valid layer symbol" dump --model hybrid --pattern 'M*X' --rank 0
expect 2 'has MoE layers (E) but --experts is 0' dump --model hybrid --pattern 'M*E' --rank 0
expect 2 'has 3 pipeline segments but --pp is 1' dump --model hybrid --pattern 'M*|*-|E' --experts 2 --rank 0
expect 2 'layers 3 is not divisible by pp 2' dump --model gpt --layers 3 --pp 2 --rank 0
expect 2 '--rank is required' dump --model gpt
expect 2 '--model must be gpt or hybrid' dump --model bert --rank 0
expect 2 '--norm must be rms or layer' dump --model gpt --norm batch --rank 0
expect 2 'model takes dump' show --model gpt --rank 0
expect 2 '--pattern is for --model hybrid' dump --model gpt --pattern 'M*' --rank 0
expect 2 '--mixer is for --model hybrid' dump --model gpt --mixer gdp --rank 0
expect 2 '--mixer must be mamba or gdp' dump --model hybrid --mixer gdn --rank 0
expect 2 'num_experts by ep' dump --model gpt --experts 4 --ep 3 --rank 0
expect 2 'to use expert-parallel' dump --model gpt --ep 2 --rank 0
expect 2 'only supported when ETP==1' dump --model gpt --experts 2 --tp 2 --etp 2 --bias --rank 0
expect 2 'unknown target' dump --model gpt --rank 0 --target bogus
[ "$fails" -eq 0 ] && echo "model dump CLI: PASSED" || echo "model dump CLI: $fails FAILED"
[ "$fails" -eq 0 ]
