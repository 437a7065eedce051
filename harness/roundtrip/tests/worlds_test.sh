#!/usr/bin/env bash
# ctest cases of `interop-harness roundtrip` worlds mode that must FAIL in a named way
# (docs/roundtrip.md, "Worlds"): a Megatron-side mutant, a rank killed mid-save, a hung rank,
# a truncated checkpoint file, a GTP mutant whose merge leaves pad rows non-zero; and the GTP
# in_proj reloaded from local checkpoints by to_state_dict (same layout), clean and under that mutant;
# the real-model round trips (--real: Megatron's own GPTModel and HybridModel) and a layer swap in them;
# the training load path (load_checkpoint) with its GPT -> hybrid setup skipped; the DistributedOptimizer's
# model-space save under a save-side mutant (its gather keeps the bucket padding), and its load_state_dict past
# finding F under a load-side mutant (its model-space loader swaps the moments); a self-consistent format change
# (the Mamba in_proj's B and C chunk names traded in save and load alike) that only the stored bytes show.
# Usage: worlds_test.sh BINARY CASE (exit 77: skipped, the case cannot run here)
set -uo pipefail
bin=$1
case_name=$2
out=$(mktemp) err=$(mktemp) keep=$(mktemp -d)
trap 'rm -rf "$out" "$err" "$keep"' EXIT
small=(--scenario gpt_hybrid_pp_tp --save-ranks 2 --load-ranks 2 --keep "$keep")
expect_rc=1
case "$case_name" in
  mutant)   args=(--scenario gpt_hybrid_tp --save-ranks 2 --load-ranks 2 --keep "$keep" --json --mutant reverse_gpt_layers) ;;
  kill)     args=("${small[@]}" --fault kill_save:1) ;;
  hang)     args=("${small[@]}" --fault hang_load:1 --timeout 75); expect_rc=4 ;;
  truncate) args=("${small[@]}" --fault truncate) ;;
  gtp_mutant) args=(--scenario gdp_in_proj_gtp --save-ranks 2 --load-ranks 4 --keep "$keep" --mutant gtp_no_zero_fill) ;;
  gtp_local) args=(--scenario gdp_in_proj_gtp_local --save-ranks 2 --load-ranks 2 --keep "$keep" --json); expect_rc=0 ;;
  gtp_local_mutant) args=(--scenario gdp_in_proj_gtp_local --save-ranks 2 --load-ranks 2 --keep "$keep" --mutant gtp_no_zero_fill) ;;
  shard_split) args=(--scenario gdp_in_proj_shard_split --candidate shard-split --save-ranks 2 --load-ranks 4 --keep "$keep" --json); expect_rc=0 ;;
  shard_split_offset) args=(--scenario gdp_in_proj_shard_split --candidate shard-split --save-ranks 2 --load-ranks 4 --keep "$keep" --mutant candidate_piece_offset_no_tp_term) ;;
  shard_split_zero_fill) args=(--scenario gdp_in_proj_gather_to_shard_split --candidate shard-split --save-ranks 4 --load-ranks 2 --keep "$keep" --mutant candidate_no_zero_fill) ;;
  real_4_to_2) args=(--real --all --save-ranks 4 --load-ranks 2 --keep "$keep" --json); expect_rc=0 ;;
  real_2_to_4) args=(--real --all --save-ranks 2 --load-ranks 4 --keep "$keep" --json); expect_rc=0 ;;
  real_seed) args=(--real --seed 7 --save-ranks 4 --load-ranks 2 --keep "$keep" --json); expect_rc=0 ;;
  real_mutant) args=(--real --scenario real_gpt_hybrid_optimizer --save-ranks 2 --load-ranks 1 --keep "$keep" --json
                     --mutant reverse_gpt_layers) ;;
  real_training_mutant) args=(--real --scenario real_gpt_hybrid_training --save-ranks 2 --load-ranks 1 --keep "$keep" --json
                              --mutant training_skips_gpt_to_hybrid_setup) ;;
  real_distributed_optimizer_mutant)
    args=(--real --scenario real_gpt_hybrid_distributed_optimizer --save-ranks 2 --load-ranks 1 --keep "$keep" --json
          --mutant distributed_optimizer_gather_keeps_bucket_padding) ;;
  real_distributed_optimizer_load_mutant)
    args=(--real --scenario real_gpt_hybrid_distributed_optimizer --save-ranks 2 --load-ranks 1 --keep "$keep" --json
          --mutant distributed_optimizer_load_moments_swapped) ;;
  real_stored_layout_mutant)
    args=(--real --scenario real_hybrid_hybrid_tp --save-ranks 2 --load-ranks 1 --keep "$keep" --json
          --mutant split_names_traded) ;;
  *) echo "unknown case $case_name" >&2; exit 2 ;;
esac
"$bin" roundtrip "${args[@]}" >"$out" 2>"$err"
rc=$?
cat "$out" "$err"
fail() { echo "FAIL ($case_name): $*" >&2; exit 1; }
if [[ "$case_name" = gtp_* || "$case_name" = shard_split* || "$case_name" = real_* ]] &&
   grep -Eq 'NOT RUN (gdp_in_proj|real)_[a-z0-9_]*: no Megatron-LM checkout' "$out" "$err"; then
  echo "SKIP: no Megatron-LM snapshot with GDP + GTP"; exit 77
fi
[ "$rc" = "$expect_rc" ] || fail "exit $rc, expected $expect_rc"
all=$(cat "$out" "$err")
# grep over the whole output without a pipe: under pipefail, `echo "$all" | grep -q` fails when grep stops reading
# at its first match and echo, still writing a long output, dies of SIGPIPE (seen in CI as a false "did not FAIL").
output_has() { grep "$@" <<<"$all"; }
case "$case_name" in
  mutant)
    grep -q '"ok":false' "$out" || fail "JSON verdict is not ok:false"
    grep -q '"reason":"misplaced: rank 0: ' "$out" || fail "the failing scenario's JSON names no reason"
    grep -q '"elements_verified":0,' "$out" && fail "nothing was verified"
    output_has -Eq '"wrong_elements":[1-9]' || fail "no wrong elements counted"
    output_has -q 'misplaced: rank 0: .*decoder.layers.self_attention.linear_qkv.weight\[0, 0, 0\] (local \[0, 0\]) holds .*\[1, 0, 0\]' ||
      fail "the first wrong element is not named by key, rank and global index" ;;
  kill)
    output_has -q 'save rank 1 died without a result' || fail "the killed rank is not named"
    output_has -q 'checkpoint NOT complete and never loaded' || fail "the checkpoint is not reported incomplete"
    output_has -q 'load world' && fail "an incomplete checkpoint was loaded"
    [ -e "$keep/gpt/s_gpt_hybrid_pp_tp/checkpoint.complete" ] && fail "the checkpoint is marked complete"
    output_has -q ' 0 elements verified' || fail "elements were counted as verified" ;;
  hang)
    output_has -q 'hung rank 1 (pid [0-9]*): stage' || fail "the hung rank is not named"
    output_has -q 'ERROR: timeout' || fail "no timeout error" ;;
  gtp_mutant|gtp_local_mutant)
    output_has -Eq 'nonzero_pad: rank [0-9]+: decoder.layers.0.mixer.in_proj.weight: pad element \(local \[[0-9]+, [0-9]+\]\) holds' ||
      fail "no non-zero pad element named" ;;
  shard_split_zero_fill)
    output_has -q 'candidate shard-split design, not Megatron' || fail "the run does not say the design is the candidate"
    output_has -Eq 'nonzero_pad: rank [0-9]+: decoder.layers.0.mixer.in_proj.weight: pad element \(local \[[0-9]+, [0-9]+\]\) holds' ||
      fail "no non-zero pad element named" ;;
  shard_split_offset)
    output_has -Eq 'wrong by kind \{"(duplicated|misplaced)":[1-9]' || fail "no misplaced rows counted" ;;
  gtp_local|shard_split|real_seed)
    grep -q '"ok":true' "$out" || fail "JSON verdict is not ok:true"
    grep -Eq '"elements_verified":[1-9]' "$out" || fail "nothing was verified" ;;
  real_4_to_2|real_2_to_4)
    grep -q '"ok":true' "$out" || fail "JSON verdict is not ok:true"
    grep -q '"elements_verified":0,' "$out" && fail "a scenario verified nothing"
    grep -Eq '"wrong_elements":[1-9]' "$out" && fail "a scenario counted wrong elements"
    for name in real_gpt_hybrid_tp real_gpt_hybrid_swiglu_tied real_gpt_hybrid_pp real_gpt_hybrid_moe real_hybrid_hybrid_tp \
                real_gpt_hybrid_training real_hybrid_hybrid_gtp real_gpt_hybrid_gtp real_hybrid_hybrid_gdp_tp \
                real_gpt_hybrid_optimizer real_hybrid_hybrid_optimizer real_gpt_hybrid_training_optimizer \
                real_hybrid_hybrid_gdp_gtp; do
      grep -q "\"name\":\"$name\"" "$out" || fail "scenario $name did not run"
    done ;;
  real_mutant)
    grep -q '"ok":false' "$out" || fail "JSON verdict is not ok:false"
    output_has -Eq '"wrong_elements":[1-9]' || fail "no wrong elements counted"
    output_has -q 'misplaced: rank 0: model.decoder.layers.1.self_attention.linear_qkv.weight: decoder.layers.self_attention.linear_qkv.weight\[0, 0, 0\] (local \[0, 0\]) holds .*\[1, 0, 0\]' ||
      fail "the swapped layer's first wrong element is not named by path, key and global index"
    output_has -Eq 'wrong by part \{"model":[1-9][0-9]*,"optimizer":[1-9]' ||
      fail "the swapped layers' optimizer moments are not counted wrong beside their weights" ;;
  real_training_mutant)
    grep -q '"ok":false' "$out" || fail "JSON verdict is not ok:false"
    output_has -q 'HARNESS ERROR' && fail "the skipped setup was blamed on the harness"
    output_has -q "^FAIL real_gpt_hybrid_training: " || fail "the scenario did not FAIL"
    output_has -Eq "load failed: megatron_error: rank 0, stage 'load: megatron.training.checkpointing.load_checkpoint': .*decoder\.layers\.[0-9]+\.[a-z_.]+ from model not in state dict" ||
      fail "load_checkpoint's error does not name the hybrid key the GPT checkpoint lacks" ;;
  real_distributed_optimizer_mutant)  # a save-side mutant: the saved moments are wrong, named by key and index
    grep -q '"ok":false' "$out" || fail "JSON verdict is not ok:false"
    output_has -q 'HARNESS ERROR' && fail "the mutant's wrong state was blamed on the harness"
    output_has -Eq '"wrong_elements":[1-9]' || fail "no wrong elements counted"
    output_has -Eq 'rank 0: optimizer\.param_state\.[0-9]+\.(param|exp_avg|exp_avg_sq): [a-z_.]+\[[0-9, ]+\] \(local \[[0-9, ]+\]\) holds ' ||
      fail "no wrong optimizer element named by its key and global index"
    # What Megatron loaded is verified although the optimizer's load_state_dict then raises (finding F on CPU).
    output_has -Eq "load failed: megatron_error: .*KeyError: 'step'.* in _set_main_param_and_optimizer_states" ||
      fail "finding F's refusal is not reported beside the verified elements" ;;
  real_distributed_optimizer_load_mutant)  # a load_state_dict mutant: only the optimizer's own moments are wrong
    grep -q '"ok":false' "$out" || fail "JSON verdict is not ok:false"
    output_has -q 'HARNESS ERROR' && fail "the mutant's wrong state was blamed on the harness"
    output_has -Eq '[1-9][0-9]* of the elements compared are the DistributedOptimizer.s own states after its load_state_dict' ||
      fail "the optimizer's own states after its load_state_dict were not compared"
    output_has -Eq 'rank 0: after_load_state_dict/optimizer\.param_state\.[0-9]+\.exp_avg(_sq)?: [a-z_.]+\[[0-9, ]+\] \(local \[[0-9, ]+\]\) holds optimizer\.state\.exp_avg' ||
      fail "no swapped moment of the optimizer's own state named by its key and global index"
    output_has -Eq 'rank 0: optimizer\.' && fail "what Megatron's load returned was counted wrong: the mutant is in load_state_dict"
    output_has -Eq "load failed: megatron_error: .*KeyError: 'step'.* in _set_main_param_and_optimizer_states" ||
      fail "finding F's refusal (the unshimmed load) is not reported" ;;
  real_stored_layout_mutant)  # a self-consistent format change: only the stored bytes can tell
    grep -q '"ok":false' "$out" || fail "JSON verdict is not ok:false"
    output_has -q 'HARNESS ERROR' && fail "the traded chunks were blamed on the harness"
    output_has -Eq 'rank 0: [a-z_.0-9]+\[' && fail "a loaded element was counted wrong: the change reads back alike"
    output_has -Eq 'mixer\.(in_proj|conv1d)\.weight\.(B|C) chunk at \[[0-9, ]+\] of \[[0-9, ]+\]: element \[[0-9, ]+\] holds [^ ]*\.weight\.(B|C)\[[0-9, ]+\], the reference.s layout puts [^ ]*\.weight\.(B|C)' ||
      fail "no stored in_proj or conv1d chunk named with the element the reference's layout puts there" ;;
  truncate)
    output_has -Eq 'checkpoint_truncated: rank [0-9]+, .*checkpoint file __[0-9]+_[0-9]+\.distcp has [0-9]+ bytes; key [^ ]+ chunk' ||
      fail "no typed error naming file, key and rank"
    output_has -q ' 0 elements verified' || fail "elements were counted as verified" ;;
esac
echo "PASS ($case_name)"
