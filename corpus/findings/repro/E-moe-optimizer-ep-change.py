"""Finding E as a standalone script: Megatron's code only, no harness imports.

Run with the Megatron venv's python:

    python E-moe-optimizer-ep-change.py --megatron-path DIR [--control] [--optimizer fp32|distributed]

Two gloo ranks on CPU. A GPTModel of one MoE layer (2 experts, SequentialMLP from Megatron's local spec)
is built at EP 2: its expert parameters live on the expert groups (allreduce False), so
get_megatron_optimizer gives a ChainedOptimizer of two FP32Optimizers over Adam (dense, experts), as
training builds it without --bf16 and without a distributed optimizer. One Adam step on zero gradients
creates the states, and the model's and the optimizer's sharded state dicts are saved with
dist_checkpointing.save. The same GPTModel is then built at EP 1 (TP 1, DP 2): the experts are ordinary
parameters, so its optimizer is one FP32Optimizer. The model and optimizer state are loaded with
dist_checkpointing.load, then load_state_dict on the model and on the optimizer, as training's
load_checkpoint does.

Both sharded state dicts are asked for with training's metadata (checkpointing's
_build_sharded_state_dict_metadata without a distributed optimizer: chained_optim_avoid_prefix, so the
states' tensors keep their model keys at any chain length). The tensors load; the optimizer's
load_state_dict then raises in _filter_and_reorder_param_groups ("Could not find parameter group with key
... Available keys: (None, ...)"): the param groups saved by a chain of two are not where a chain of one
looks for them, so a run that changes whether experts have their own optimizer (EP to or from 1, or ETP
to or from TP) cannot resume its optimizer state. --control loads at EP 2 too, where the load succeeds. Exit 1 while a rank's load
raises (the finding reproduces), 0 when both load, 3 when the script itself could not run.

--optimizer distributed builds Megatron's DistributedOptimizer instead (training's
--use-distributed-optimizer; a chain of two DistributedOptimizers at EP 2, one at EP 1), its states
created as a load creates them (_init_optimizer_states_with_dummy_values), saved and loaded in the
fully_reshardable format (the one a GPT->hybrid load requires). Without Transformer Engine or Apex its
load stops at finding F (F-distributed-optimizer-torch-adam-load.py: KeyError 'step' in
_set_main_param_and_optimizer_states), which comes after the param groups are matched. So here E
reproduces when a rank's load raises anywhere before F's spot; the control passes when every rank
loads or reaches F's spot (its param groups matched).

Declared shims: finding B's (B-fresh-in-proj-under-gtp.py beside this file: its CPU shims, config and
run_ranks are reused, not repeated), and O's script's optimizer_on_cpu while the runs are built, saved and
loaded: torch.tensor(..., device='cuda') makes a CPU tensor (the optimizer's unit scale), a CPU float
tensor's type() names its CUDA type (FP32Optimizer accepts only torch.cuda.*Tensor parameters), and
Tensor.cuda() is the identity (the DistributedOptimizer's fully_reshardable format copies each shard to
CUDA before gloo gathers it); none touches the code under test.
"""

import importlib.util
import os
import sys
import traceback

EXPERTS = 2
F_SPOT = "_set_main_param_and_optimizer_states"  # where finding F stops a DistributedOptimizer's load


def optimizer_flag(parser):
    parser.add_argument("--optimizer", choices=("fp32", "distributed"), default="fp32",
                        help="FP32Optimizer (default) or the DistributedOptimizer (fully_reshardable)")


def script_beside(name, module_name):
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), name)
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def moe_gpt_and_optimizer(b, torch, ep, distributed):
    """Megatron's MoE GPTModel at EP `ep` (parallel_state initialised for it) and its optimizer
    (FP32Optimizer, or the DistributedOptimizer when `distributed`) with Adam's states created."""
    from megatron.core import parallel_state
    from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.models.gpt.gpt_model import GPTModel
    from megatron.core.optimizer import OptimizerConfig, get_megatron_optimizer
    parallel_state.destroy_model_parallel()
    parallel_state.initialize_model_parallel(expert_model_parallel_size=ep, create_gloo_process_groups=False)
    config = b.config(torch, 1, 1, num_moe_experts=EXPERTS, moe_ffn_hidden_size=16, moe_router_topk=1,
                      moe_router_pre_softmax=True, moe_grouped_gemm=False, expert_model_parallel_size=ep)
    model = GPTModel(config, get_gpt_layer_local_spec(num_experts=EXPERTS, moe_grouped_gemm=False,
                                                      normalization="RMSNorm"),
                     vocab_size=32, max_sequence_length=64, position_embedding_type="rope")
    wrapped = DistributedDataParallel(config, DistributedDataParallelConfig(use_distributed_optimizer=distributed),
                                      model)
    optimizer = get_megatron_optimizer(OptimizerConfig(optimizer="adam", lr=1e-4, params_dtype=torch.float32,
                                                       use_distributed_optimizer=distributed),
                                       [wrapped], use_gloo_process_groups=False)
    if distributed:
        for part in optimizer.chained_optimizers:
            part._init_optimizer_states_with_dummy_values()
        return model, optimizer
    for part in getattr(optimizer, "chained_optimizers", [optimizer]):
        params = [p for group in part.optimizer.param_groups for p in group["params"]]
        for p in params:
            p.grad = torch.zeros_like(p)
        part.optimizer.step()
        for p in params:
            p.grad = None
    return model, optimizer


def describe(optimizer):
    parts = getattr(optimizer, "chained_optimizers", [optimizer])
    return f"{type(optimizer).__name__} of {len(parts)}: " + ", ".join(type(p).__name__ for p in parts)


def state(model, optimizer, distributed, is_loading=False):
    from megatron.core import parallel_state
    model_sd = model.sharded_state_dict()
    # Training's metadata (checkpointing._build_sharded_state_dict_metadata).
    metadata = {"singleton_local_shards": False, "chained_optim_avoid_prefix": True,
                "dp_cp_group": parallel_state.get_data_parallel_group(with_context_parallel=True)}
    if distributed:
        metadata.update(distrib_optim_sharding_type="fully_reshardable",
                        distrib_optim_fully_reshardable_mem_efficient=False)
    return {"model": model_sd,
            "optimizer": optimizer.sharded_state_dict(model_sd, is_loading=is_loading, metadata=metadata)}


def rank_main(rank, megatron_path, directory, load_ep, distributed, results):
    try:
        sys.path.insert(0, megatron_path)
        import torch
        import torch.distributed as dist

        b = script_beside("B-fresh-in-proj-under-gtp.py", "finding_b_script")
        o = script_beside("O-distributed-optimizer-gtp-mixer.py", "finding_o_script")
        dist.init_process_group("gloo", init_method="file://" + os.path.join(directory, "store"), rank=rank,
                                world_size=b.WORLD)
        b.cpu_shims(torch)
        ckpt = os.path.join(directory, "ckpt")
        if rank == 0:
            os.makedirs(ckpt)
        with o.optimizer_on_cpu(torch):
            outcome = run_case(b, torch, ckpt, load_ep, distributed)
        results.put((rank, outcome))
        dist.barrier()
        dist.destroy_process_group()
    except BaseException:  # noqa: BLE001 - the script itself failed
        results.put((rank, {"script_error": traceback.format_exc()}))


def run_case(b, torch, ckpt, load_ep, distributed):
    """Saved at EP 2, loaded at EP `load_ep`: what was built and how the load ended."""
    import torch.distributed as dist
    from megatron.core import dist_checkpointing
    model, optimizer = moe_gpt_and_optimizer(b, torch, 2, distributed)
    outcome = {"saved": describe(optimizer)}
    with torch.no_grad():
        sd = state(model, optimizer, distributed)
    dist.barrier()
    dist_checkpointing.save(sd, ckpt)
    dist.barrier()

    model, optimizer = moe_gpt_and_optimizer(b, torch, load_ep, distributed)
    outcome["loading"] = describe(optimizer)
    try:
        loaded = dist_checkpointing.load(state(model, optimizer, distributed, is_loading=True), ckpt)
        model.load_state_dict(loaded["model"], strict=True)
        optimizer.load_state_dict(loaded["optimizer"])
    except BaseException as exc:  # noqa: BLE001 - Megatron's outcome (DCP's CheckpointException is a BaseException)
        text = " ".join(str(exc).split())
        where = traceback.extract_tb(exc.__traceback__)[-1]
        outcome["load"] = (f"{type(exc).__name__}: {text if len(text) < 2000 else text[:1500] + ' ... ' + text[-400:]}"
                           f" ({os.path.basename(where.filename)}:{where.lineno} in {where.name})")
        outcome["at_finding_f"] = isinstance(exc, KeyError) and exc.args == ("step",) and where.name == F_SPOT
    return outcome


def main():
    b = script_beside("B-fresh-in-proj-under-gtp.py", "finding_b_script")
    args = b.parse_args(__doc__, "loaded at EP 2 too, where the optimizer state loads", extra=optimizer_flag)
    if args is None:
        return 3
    load_ep = 2 if args.control else 1
    distributed = args.optimizer == "distributed"
    outcomes = b.run_ranks(rank_main, args.megatron_path, load_ep, distributed)
    if outcomes is None:
        return 3
    fails = False
    for rank in sorted(outcomes):
        o = outcomes[rank]
        result = f"the load raised {o['load']}" if "load" in o else "model and optimizer state loaded"
        if o.get("at_finding_f"):
            result += " (finding F's spot: the param groups were matched)"
        print(f"MoE GPT saved at EP 2 ({o['saved']}), rank {rank}; loaded at EP {load_ep} ({o['loading']}): {result}")
        fails |= "load" in o and not o.get("at_finding_f")
    print(f"finding E {'reproduces' if fails else 'does not reproduce'} (saved at EP 2, loaded at EP {load_ep})")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
