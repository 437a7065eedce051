#!/usr/bin/env bash
# The gate's model_dump group against a Megatron checkout (issue 17), check by check through
# `interop-harness repro`: five clean checks must pass (exit 0), and each model-code mutant of
# megatron_adapter/mutants.py must fail a check of the group (exit 1, a finding; never 3 or 4).
#   model_dump_kills_test.sh INTEROP_HARNESS --megatron-path DIR
set -u
cli=$1
shift
worst=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT
expect() {
  local want=$1 token=$2
  shift 2
  "$cli" repro "$token" "$@" >"$log" 2>&1
  local rc=$?
  if [ "$rc" -eq "$want" ]; then
    echo "ok   exit $rc: $token"
  else
    echo "FAIL exit $rc (expected $want): $token"
    sed 's/^/     /' "$log" | tail -20
    worst=1
  fi
}
shift_args=("$@")
for token in \
  ih2:gate/model_dump/gpt_dense:target=megatron:crc=22adf12d \
  ih2:gate/model_dump/hybrid_moe:target=megatron:crc=cf29f136 \
  ih2:gate/model_dump/gpt_moe_e4_ep2:target=megatron:crc=3e9f8c35 \
  ih2:gate/model_dump/hybrid_gtp2_dp2:target=megatron:crc=1db065d8 \
  ih2:gate/model_dump/hybrid_cp2_tp2:target=megatron:crc=7b3da188; do
  expect 0 "$token" "${shift_args[@]}"
done
for token in \
  ih2:gate/model_dump/hybrid_m_star_dash:mutant=hybrid_layer_number_from_zero:target=megatron:crc=fecd38c4 \
  ih2:gate/model_dump/gpt_dense:mutant=output_layer_shape_strict:target=megatron:crc=8f907632 \
  ih2:gate/model_dump/gpt_moe_e4:mutant=experts_key_prefix_once:target=megatron:crc=271574bd \
  ih2:gate/model_dump/gpt_moe_e4_ep2:mutant=experts_replica_dense_dp:target=megatron:crc=d9d574b1 \
  ih2:gate/model_dump/gpt_dense_gtp2:mutant=gtp_replica_id_gtp_inclusive_dp:target=megatron:crc=f47cd3d8 \
  ih2:gate/model_dump/hybrid_gtp2_dp2:mutant=gtp_replica_rank_context_parallel:target=megatron:crc=6cf1ada1 \
  ih2:gate/model_dump/hybrid_cp2_tp2:mutant=dp_cp_group_without_cp:target=megatron:crc=a0faa048; do
  expect 1 "$token" "${shift_args[@]}"
done
echo "model_dump kills: $([ "$worst" -eq 0 ] && echo PASSED || echo FAILED)"
exit "$worst"
