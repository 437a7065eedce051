"""Finding O as a standalone script: Megatron's code only, no harness imports.

Run with the Megatron venv's python:

    python O-distributed-optimizer-gtp-mixer.py --megatron-path DIR [--control]

Two gloo ranks on CPU. The HybridModel "M*-" of finding B's script (B-fresh-in-proj-under-gtp.py, beside
this file: its model builders and CPU shims are reused, not repeated) is built at TP 1 x GTP 2
(pad_for_alignment 16): the Mamba mixer's in_proj is wrapped under GTP by Megatron's constructor. As
training builds it, the model is wrapped in DistributedDataParallel (use_distributed_optimizer) and
get_megatron_optimizer builds Megatron's DistributedOptimizer over Adam; its states are created as a
load creates them (_init_optimizer_states_with_dummy_values). Then the optimizer's sharded_state_dict of
the model's own sharded_state_dict is asked in both reshardable formats a checkpoint save uses
(dp_reshardable, the default, and fully_reshardable, the one a GPT->hybrid load requires). A second model,
built alike, is wrapped without the distributed optimizer and get_megatron_optimizer builds FP32Optimizer
over Adam (training without --bf16 and without --use-distributed-optimizer), its states created by its own
init_state_fn; its sharded_state_dict is asked too.

Under GTP the mixer's sharded_state_dict keys the in_proj by a gather factory whose data is the
all-gathered in_proj, not the parameter, so the DistributedOptimizer (it finds a parameter's model entry
by identity) cannot find it: ValueError "Model param ... not in model_sharded_state_dict". Megatron's own
_backfill_gtp_sharded_param_map says distributed Adam is unaffected; only the Float16 optimizer path
backfills the entry. FP32Optimizer matches parameters to model entries by identity too, with no backfill:
ValueError "Param id ... does not match any model sharded param". --control builds the model at GTP 1, where both formats give a state dict. Exit 1
while a GTP rank's optimizer cannot give its sharded state dict (the finding reproduces), 0 when every
rank can, 3 when the script itself could not run.

Declared shims (besides B's, none touches the code under test): while the optimizer is built and asked,
torch.tensor asked for a CUDA device is made on the CPU (the optimizer's found-inf and scale scalars),
Tensor.type() of a CPU tensor answers the CUDA type name of its dtype (the DistributedOptimizer sorts
parameters into groups by CUDA type names), Tensor.cuda() is the identity (the fully_reshardable format
copies each shard to CUDA before gloo gathers it).
"""

import contextlib
import importlib.util
import os
import re
import sys
import traceback

FORMATS = ("dp_reshardable", "fully_reshardable")
FP32 = "FP32Optimizer"


def finding_b_script():
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "B-fresh-in-proj-under-gtp.py")
    spec = importlib.util.spec_from_file_location("finding_b_script", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def optimizer_on_cpu(torch):
    tensor, type_of, cuda = torch.tensor, torch.Tensor.type, torch.Tensor.cuda

    def host_tensor(*args, **kwargs):
        if str(kwargs.get("device", "")).startswith("cuda"):
            kwargs["device"] = "cpu"
        return tensor(*args, **kwargs)

    def cuda_type_name(self, *args, **kwargs):
        name = type_of(self, *args, **kwargs)
        if args or kwargs or not name.startswith("torch.") or name.startswith("torch.cuda."):
            return name
        return "torch.cuda." + name[len("torch."):]

    torch.tensor, torch.Tensor.type, torch.Tensor.cuda = host_tensor, cuda_type_name, lambda self, *a, **k: self
    try:
        yield
    finally:
        torch.tensor, torch.Tensor.type, torch.Tensor.cuda = tensor, type_of, cuda


def rank_main(rank, megatron_path, directory, gtp, results):
    try:
        sys.path.insert(0, megatron_path)
        import torch
        import torch.distributed as dist
        from megatron.core import parallel_state
        from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig
        from megatron.core.optimizer import OptimizerConfig, get_megatron_optimizer

        b = finding_b_script()
        dist.init_process_group("gloo", init_method="file://" + os.path.join(directory, "store"), rank=rank,
                                world_size=b.WORLD)
        b.cpu_shims(torch)
        b.init_parallel_state(gtp)
        model = b.hybrid_model(torch, gtp)
        outcome = {"in_proj": tuple(model.decoder.layers[0].mixer.in_proj.weight.shape)}
        with optimizer_on_cpu(torch):
            wrapped = DistributedDataParallel(model.config, DistributedDataParallelConfig(use_distributed_optimizer=True),
                                              model)
            optimizer = get_megatron_optimizer(
                OptimizerConfig(optimizer="adam", lr=1e-4, use_distributed_optimizer=True, params_dtype=torch.float32),
                [wrapped], use_gloo_process_groups=False)
            for part in getattr(optimizer, "chained_optimizers", [optimizer]):
                part._init_optimizer_states_with_dummy_values()
            for sharding in FORMATS:
                with torch.no_grad():
                    model_sd = model.sharded_state_dict()
                metadata = {"distrib_optim_sharding_type": sharding,
                            "dp_cp_group": parallel_state.get_data_parallel_group(with_context_parallel=True)}
                try:
                    optimizer.sharded_state_dict(model_sd, is_loading=False, metadata=metadata)
                    outcome[sharding] = "ok"
                except Exception as exc:  # noqa: BLE001 - Megatron's outcome
                    text = re.sub(r"Model param .* not in", "Model param <the in_proj's GTP shard> not in",
                                  " ".join(str(exc).split()))
                    outcome[sharding] = f"{type(exc).__name__}: {text[:200]}"
            model = b.hybrid_model(torch, gtp)
            wrapped = DistributedDataParallel(model.config, DistributedDataParallelConfig(use_distributed_optimizer=False),
                                              model)
            optimizer = get_megatron_optimizer(
                OptimizerConfig(optimizer="adam", lr=1e-4, use_distributed_optimizer=False, params_dtype=torch.float32),
                [wrapped], use_gloo_process_groups=False)
            for part in getattr(optimizer, "chained_optimizers", [optimizer]):
                part.init_state_fn(part.optimizer, part.config)
            with torch.no_grad():
                model_sd = model.sharded_state_dict()
            try:
                optimizer.sharded_state_dict(model_sd, is_loading=False, metadata={
                    "dp_cp_group": parallel_state.get_data_parallel_group(with_context_parallel=True)})
                outcome[FP32] = "ok"
            except Exception as exc:  # noqa: BLE001 - Megatron's outcome
                outcome[FP32] = f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
        results.put((rank, outcome))
        dist.barrier()
        dist.destroy_process_group()
    except BaseException:  # noqa: BLE001 - the script itself failed
        results.put((rank, {"script_error": traceback.format_exc()}))


def main():
    b = finding_b_script()
    args = b.parse_args(__doc__, "the model at GTP 1, where both formats hold")
    if args is None:
        return 3
    gtp = 1 if args.control else 2
    outcomes = b.run_ranks(rank_main, args.megatron_path, gtp)
    if outcomes is None:
        return 3
    fails = False
    for rank in sorted(outcomes):
        o = outcomes[rank]
        print(f"'{b.PATTERN}' TP 1 x GTP {gtp} p {b.PAD}, rank {rank}: in_proj parameter {o['in_proj']}; "
              + "; ".join(f"DistributedOptimizer.sharded_state_dict ({s}): {o[s]}" for s in FORMATS)
              + f"; FP32Optimizer.sharded_state_dict: {o[FP32]}")
        fails |= any(o[s] != "ok" for s in FORMATS + (FP32,))
    print(f"finding O {'reproduces' if fails else 'does not reproduce'} at GTP {gtp}")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
