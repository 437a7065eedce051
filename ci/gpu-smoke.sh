#!/usr/bin/env bash
# The one script a GPU runner calls (docs/roundtrip.md, "GPU runners"): CUDA + NCCL round trips
# through Megatron's dist_checkpointing on whatever GPUs exist, every loaded element checked by
# the LibTorch verifier, in under 5 minutes. Prints one verdict line last:
#   gpu-smoke: PASS ... | gpu-smoke: FAIL ... | gpu-smoke: NOT RUN: no GPU ...
# Exit: 0 pass, 1 a scenario failed, 3 harness fault, 4 timeout, 77 not run (no GPU; never a pass).
# Env: IH_BUILD_DIR (default build/), INTEROP_MEGATRON_VENV (default ~/.cache/interop-harness/megatron-venv).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${IH_BUILD_DIR:-$root/build}
venv=${INTEROP_MEGATRON_VENV:-$HOME/.cache/interop-harness/megatron-venv}
py=$venv/bin/python
started=$(date +%s)
if [ ! -x "$py" ]; then
  echo "gpu-smoke: NOT RUN: no Megatron venv at $venv (run ci/install-megatron.sh)"
  exit 77
fi
gpus=$(timeout 120 "$py" -c 'import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)' 2>/dev/null | tail -n 1)
gpus=${gpus:-0}
if ! [ "$gpus" -gt 0 ] 2>/dev/null; then
  echo "gpu-smoke: NOT RUN: no GPU (torch.cuda.is_available() is false on $(hostname))"
  exit 77
fi
bin=$build/bin/interop-harness
if [ ! -x "$bin" ]; then  # built like every other job (the verifier is built by its first round trip)
  IH_BUILD_DIR=$build IH_BUILD_TARGETS=interop-harness bash "$root/ci/build.sh" >/dev/null || {
    echo "gpu-smoke: FAIL: cannot build interop-harness in $build"; exit 3; }
fi
# One GPU: the ranks share it (gloo carries the collectives, tensors live on the GPU);
# two or more: NCCL across them, a world-size change both ways.
if [ "$gpus" -ge 2 ]; then
  n=$(( gpus >= 4 ? 4 : 2 )); m=$(( n / 2 ))
  runs=("$n $m" "$m $n")
else
  runs=("2 1" "1 2")
fi
overall=0
summary=""
for pair in "${runs[@]}"; do
  set -- $pair
  echo "gpu-smoke: roundtrip --all --device cuda --save-ranks $1 --load-ranks $2"
  out=$(timeout 280 "$bin" roundtrip --all --device cuda --save-ranks "$1" --load-ranks "$2" --timeout 120 --json)
  rc=$?
  echo "$out"
  [ "$rc" = 124 ] && rc=4
  summary="$summary $1->$2:exit$rc"
  if [ "$rc" != 0 ] && { [ "$overall" = 0 ] || [ "$rc" -gt "$overall" ]; }; then overall=$rc; fi
done
secs=$(( $(date +%s) - started ))
if [ "$overall" = 0 ]; then
  echo "gpu-smoke: PASS on $gpus GPU(s) in ${secs}s:$summary"
else
  echo "gpu-smoke: FAIL on $gpus GPU(s) in ${secs}s:$summary"
fi
exit "$overall"
