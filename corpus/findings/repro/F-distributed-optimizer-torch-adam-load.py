"""Finding F as a standalone script: Megatron's code only, no harness imports.

Run with the Megatron venv's python:

    python F-distributed-optimizer-torch-adam-load.py --megatron-path DIR [--control]

Two gloo ranks on CPU, where neither Transformer Engine nor Apex is installed, so Megatron's optimizer
module falls back to torch's AdamW (its own choice, with a warning). A GPTModel of one dense layer (finding
B's config and Megatron's local spec) is built as training builds it under --bf16 --use-distributed-optimizer
(get_model: Float16Module, then DistributedDataParallel), get_megatron_optimizer gives Megatron's
DistributedOptimizer, and its states are created as a load creates them
(_init_optimizer_states_with_dummy_values). The model's and the optimizer's sharded state dicts are saved
with dist_checkpointing.save in the model-space format fully_reshardable (--dist-ckpt-optim-fully-reshardable,
the one a GPT->hybrid load requires), with training's metadata. The same model and optimizer, built again at
the same layout, load it as training's load_checkpoint does: dist_checkpointing.load, then load_state_dict on
the model and on the optimizer.

torch's AdamW keeps a per-parameter 'step' tensor. DistributedOptimizer.load_state_dict puts the checkpoint's
step into every parameter's state ("Native PyTorch state dict requires step"), and
load_parameter_state_from_fully_reshardable leaves 'step' out of the tensors it hands on ("Handle torch Adam
'step' state separately"), but _set_main_param_and_optimizer_states copies every tensor of the parameter's
state from those tensors: KeyError 'step'. So without Transformer Engine or Apex a run cannot resume its
distributed optimizer from a model-space checkpoint, even at the layout that saved it. --control saves and
loads the bucket-space format dp_reshardable (the default), which loads. Exit 1 while a rank's load raises
(the finding reproduces), 0 when both load, 3 when the script itself could not run.

Declared shims: finding B's (B-fresh-in-proj-under-gtp.py beside this file: its CPU shims, config and
run_ranks are reused, not repeated), and O's script's optimizer_on_cpu while the optimizer is built, asked
and loaded (torch.tensor asked for a CUDA device is made on the CPU, Tensor.type() of a CPU tensor answers its
CUDA type name, Tensor.cuda() is the identity: the fully_reshardable format copies each shard to CUDA before
gloo gathers it); none touches the code under test.
"""

import importlib.util
import os
import sys
import traceback


def script_beside(name, module_name):
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), name)
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def gpt_and_optimizer(b, torch):
    """Megatron's dense GPTModel under training's --bf16 wrappers and its DistributedOptimizer, states created."""
    from megatron.core import parallel_state
    from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.models.gpt.gpt_model import GPTModel
    from megatron.core.optimizer import OptimizerConfig, get_megatron_optimizer
    from megatron.core.transformer.module import Float16Module
    parallel_state.destroy_model_parallel()
    parallel_state.initialize_model_parallel(create_gloo_process_groups=False)
    config = b.config(torch, 1, 1, bf16=True)
    model = GPTModel(config, get_gpt_layer_local_spec(normalization="RMSNorm"), vocab_size=32, max_sequence_length=64,
                     position_embedding_type="rope")
    wrapped = DistributedDataParallel(config, DistributedDataParallelConfig(use_distributed_optimizer=True),
                                      Float16Module(config, model))
    optimizer = get_megatron_optimizer(
        OptimizerConfig(optimizer="adam", lr=1e-4, bf16=True, params_dtype=torch.bfloat16,
                        use_distributed_optimizer=True), [wrapped], use_gloo_process_groups=False)
    for part in getattr(optimizer, "chained_optimizers", [optimizer]):
        part._init_optimizer_states_with_dummy_values()
    return model, optimizer


def state(torch, model, optimizer, sharding, is_loading=False):
    from megatron.core import parallel_state
    with torch.no_grad():
        model_sd = model.sharded_state_dict()
    # Training's metadata with a distributed optimizer (checkpointing._build_sharded_state_dict_metadata).
    metadata = {"distrib_optim_sharding_type": sharding, "distrib_optim_fully_reshardable_mem_efficient": False,
                "singleton_local_shards": False, "chained_optim_avoid_prefix": True,
                "dp_cp_group": parallel_state.get_data_parallel_group(with_context_parallel=True)}
    return {"model": model_sd,
            "optimizer": optimizer.sharded_state_dict(model_sd, is_loading=is_loading, metadata=metadata)}


def rank_main(rank, megatron_path, directory, sharding, results):
    try:
        sys.path.insert(0, megatron_path)
        import torch
        import torch.distributed as dist
        from megatron.core import dist_checkpointing

        b = script_beside("B-fresh-in-proj-under-gtp.py", "finding_b_script")
        o = script_beside("O-distributed-optimizer-gtp-mixer.py", "finding_o_script")
        dist.init_process_group("gloo", init_method="file://" + os.path.join(directory, "store"), rank=rank,
                                world_size=b.WORLD)
        b.cpu_shims(torch)
        ckpt = os.path.join(directory, "ckpt")
        if rank == 0:
            os.makedirs(ckpt)
        with o.optimizer_on_cpu(torch):
            model, optimizer = gpt_and_optimizer(b, torch)
            outcome = {"inner": type(getattr(optimizer, "chained_optimizers", [optimizer])[0].optimizer).__name__}
            saved = state(torch, model, optimizer, sharding)
            dist.barrier()
            dist_checkpointing.save(saved, ckpt)
            dist.barrier()
            model, optimizer = gpt_and_optimizer(b, torch)
            try:
                loaded = dist_checkpointing.load(state(torch, model, optimizer, sharding, is_loading=True), ckpt)
                model.load_state_dict(loaded["model"], strict=True)
                optimizer.load_state_dict(loaded["optimizer"])
            except BaseException as exc:  # noqa: BLE001 - Megatron's outcome (DCP's CheckpointException is a BaseException)
                where = traceback.extract_tb(exc.__traceback__)[-1]
                outcome["load"] = (f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]} "
                                   f"({os.path.basename(where.filename)}:{where.lineno} in {where.name})")
        results.put((rank, outcome))
        dist.barrier()
        dist.destroy_process_group()
    except BaseException:  # noqa: BLE001 - the script itself failed
        results.put((rank, {"script_error": traceback.format_exc()}))


def main():
    b = script_beside("B-fresh-in-proj-under-gtp.py", "finding_b_script")
    args = b.parse_args(__doc__, "the bucket-space format dp_reshardable, which loads")
    if args is None:
        return 3
    sharding = "dp_reshardable" if args.control else "fully_reshardable"
    outcomes = b.run_ranks(rank_main, args.megatron_path, sharding)
    if outcomes is None:
        return 3
    fails = False
    for rank in sorted(outcomes):
        o = outcomes[rank]
        result = f"the load raised {o['load']}" if "load" in o else "model and optimizer state loaded"
        print(f"dense GPT, DistributedOptimizer over torch's {o['inner']}, {sharding} saved and loaded at the same "
              f"layout (TP 1, DP 2), rank {rank}: {result}")
        fails |= "load" in o
    print(f"finding F {'reproduces' if fails else 'does not reproduce'} ({sharding})")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
