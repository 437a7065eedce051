"""Finding P as a standalone script: Megatron's code only, no harness imports.

Run with the Megatron venv's python:

    python P-float16-gtp-optimizer-key-prefix.py --megatron-path DIR [--control]

Two gloo ranks on CPU. The HybridModel "M*-" of finding B's script (B-fresh-in-proj-under-gtp.py, beside
this file: its model builders and CPU shims are reused, not repeated) is built at TP 1 x GTP 2
(pad_for_alignment 16): the Mamba mixer's in_proj is wrapped under GTP by Megatron's constructor. As
training builds it under --bf16 without --use-distributed-optimizer (get_model): the model is wrapped in
Float16Module and that in DistributedDataParallel, then classify_gtp_remat_chains names the GTP
parameters (training calls it after the DDP wrap), get_megatron_optimizer builds
Float16OptimizerWithFloat16Params over Adam, and its states are created by its own init_state_fn. Then
the optimizer's sharded_state_dict of the model's own sharded_state_dict is asked, with training's metadata.

Every optimizer entry is to be keyed `optimizer.state.<state>.<model key>`, a copy of the model entry it
belongs to. Under GTP the mixer's in_proj entry is a gather factory, so _backfill_gtp_sharded_param_map
rebuilds the in_proj's per-shard entry and keys it by the parameter's _debug_name: the dotted name on the
wrapped model, 'module.module.decoder.layers.0.mixer.in_proj.weight'. The same function strips those
'module.' prefixes (_strip_module_prefix) when it looks the name up among the model's keys, but not when it
keys the rebuilt entry. So the in_proj's states (exp_avg, exp_avg_sq, the fp32 main copy) are saved under a
key that names the wrappers and no model entry. --control builds the model at GTP 1, where nothing is
rebuilt. Exit 1 while an optimizer entry of a rank names no model key (the finding reproduces), 0 when
every one does, 3 when the script itself could not run.

Declared shims (besides B's, none touches the code under test): O's script's optimizer_on_cpu while the
optimizer is built and asked (torch.tensor asked for a CUDA device is made on the CPU, Tensor.type() of a
CPU tensor answers its CUDA type name, Tensor.cuda() is the identity).
"""

import importlib.util
import os
import sys
import traceback

STATE_PREFIX = "optimizer.state."


def script_beside(name, module_name):
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), name)
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def entry_keys(tree):
    """The checkpoint keys of a sharded state dict's entries (a factory's own key included)."""
    from megatron.core.dist_checkpointing.dict_utils import nested_values
    return {entry.key for entry in nested_values(tree) if getattr(entry, "key", None) is not None}


def rank_main(rank, megatron_path, directory, gtp, results):
    try:
        sys.path.insert(0, megatron_path)
        import torch
        import torch.distributed as dist
        from megatron.core import parallel_state
        from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig
        from megatron.core.optimizer import OptimizerConfig, get_megatron_optimizer
        from megatron.core.tensor_parallel.gtp_api import classify_gtp_remat_chains
        from megatron.core.transformer.module import Float16Module

        b = script_beside("B-fresh-in-proj-under-gtp.py", "finding_b_script")
        o = script_beside("O-distributed-optimizer-gtp-mixer.py", "finding_o_script")
        dist.init_process_group("gloo", init_method="file://" + os.path.join(directory, "store"), rank=rank,
                                world_size=b.WORLD)
        b.cpu_shims(torch)
        b.init_parallel_state(gtp)
        model = b.hybrid_model(torch, gtp)
        model.config.bf16, model.config.params_dtype = True, torch.bfloat16
        with o.optimizer_on_cpu(torch):
            wrapped = DistributedDataParallel(model.config, DistributedDataParallelConfig(),
                                              Float16Module(model.config, model))
            classify_gtp_remat_chains([wrapped])
            optimizer = get_megatron_optimizer(
                OptimizerConfig(optimizer="adam", lr=1e-4, bf16=True, params_dtype=torch.bfloat16),
                [wrapped], use_gloo_process_groups=False)
            for part in getattr(optimizer, "chained_optimizers", [optimizer]):
                part.init_state_fn(part.optimizer, part.config)
            with torch.no_grad():
                model_sd = model.sharded_state_dict()
            optimizer_sd = optimizer.sharded_state_dict(model_sd, is_loading=False, metadata={
                "singleton_local_shards": False, "chained_optim_avoid_prefix": True,
                "dp_cp_group": parallel_state.get_data_parallel_group(with_context_parallel=True)})
        model_keys = entry_keys(model_sd)
        # optimizer.state.<state>.<model key>: the state's name is one dotted word (exp_avg, fp32_param, ...)
        orphans = sorted(key for key in entry_keys(optimizer_sd) if key.startswith(STATE_PREFIX)
                         and key[len(STATE_PREFIX):].split(".", 1)[-1] not in model_keys)
        in_proj = sorted(key for key in model_keys if key.startswith(b.IN_PROJ))
        results.put((rank, {"orphans": orphans, "in_proj": in_proj}))
        dist.barrier()
        dist.destroy_process_group()
    except BaseException:  # noqa: BLE001 - the script itself failed
        results.put((rank, {"script_error": traceback.format_exc()}))


def main():
    b = script_beside("B-fresh-in-proj-under-gtp.py", "finding_b_script")
    args = b.parse_args(__doc__, "the model at GTP 1, where nothing is rebuilt")
    if args is None:
        return 3
    gtp = 1 if args.control else 2
    outcomes = b.run_ranks(rank_main, args.megatron_path, gtp)
    if outcomes is None:
        return 3
    fails = False
    for rank in sorted(outcomes):
        out = outcomes[rank]
        print(f"'{b.PATTERN}' TP 1 x GTP {gtp} p {b.PAD}, rank {rank}, Float16OptimizerWithFloat16Params under "
              f"DDP(Float16Module): the model keys the in_proj as {', '.join(out['in_proj'])}; optimizer keys "
              f"that name no model key: {', '.join(out['orphans']) or 'none'}")
        fails |= bool(out["orphans"])
    print(f"finding P {'reproduces' if fails else 'does not reproduce'} at GTP {gtp}")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
