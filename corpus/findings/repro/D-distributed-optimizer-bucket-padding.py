"""Finding D as a standalone script: Megatron's code only, no harness imports.

Run with the Megatron venv's python:

    python D-distributed-optimizer-bucket-padding.py --megatron-path DIR [--control]

DIR is a Megatron-LM checkout, or the site-packages folder of an installed megatron-core (the release
0.19.2 reproduces; Megatron-LM's 32a03b77c5 fixed it). Two gloo ranks on CPU, TP 1 x DP 2. A GPTModel of
two dense layers (finding B's config and Megatron's local spec) in fp32, wrapped in DistributedDataParallel
as training wraps it with --use-distributed-optimizer --overlap-grad-reduce --ddp-bucket-size 600: the
gradient buffer is cut into three buckets, the first ending with 64 elements of padding (a bucket's end is
padded to a multiple of lcm(DP, 128)). get_megatron_optimizer gives Megatron's DistributedOptimizer; its
states are created as a load creates them (_init_optimizer_states_with_dummy_values), then each rank writes
into its own slice of every parameter's exp_avg and exp_avg_sq a value that names the element (parameter
number x 10,000 + the element's index in the parameter, + 5,000 for exp_avg_sq: exact in fp32).

The model's and the optimizer's sharded state dicts are saved with dist_checkpointing.save in the
model-space format fully_reshardable (--dist-ckpt-optim-fully-reshardable, training's metadata), and loaded
at the same layout into the same model and optimizer built again: dist_checkpointing.load of the
optimizer's own request (sharded_state_dict(is_loading=True)). Each rank compares every loaded
optimizer.state.exp_avg.<key> and exp_avg_sq.<key> (model space: the whole parameter) with what the saving
optimizer held. The optimizer's load_state_dict is not called: without Transformer Engine it raises
(finding F), and the wrong values are already in the checkpoint.

Before the fix, sharded_param_state_fully_reshardable cut each parameter's state out of the gathered
buffers (whose bucket-end padding is stripped) at the parameter's offset in the padded gradient buffer:
every parameter behind a padded bucket is saved with another parameter's state (and zeros past the end),
silently. --control keeps DDP's default single bucket, where the offsets agree. Exit 1 while a loaded
state is wrong (the finding reproduces), 0 when every element is right, 3 when the script itself could
not run.

Declared shims: finding B's (B-fresh-in-proj-under-gtp.py beside this file: its CPU shims, config and
run_ranks are reused, not repeated; F's script gives the sharded state dicts with training's metadata), and
O's script's optimizer_on_cpu while the optimizer is built, asked
and saved (torch.tensor asked for a CUDA device is made on the CPU, Tensor.type() of a CPU tensor answers
its CUDA type name, Tensor.cuda() is the identity: the fully_reshardable format copies each shard to CUDA
before it gathers); none touches the code under test.
"""

import importlib.util
import os
import sys
import traceback

BUCKET_ELEMENTS = 600
STATES = {"exp_avg": 0, "exp_avg_sq": 5000}  # state -> offset of its values


def script_beside(name, module_name):
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), name)
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def gpt_and_optimizer(b, torch, several_buckets):
    """Megatron's GPTModel (fp32) in DistributedDataParallel and its DistributedOptimizer, states created."""
    from megatron.core import parallel_state
    from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.models.gpt.gpt_model import GPTModel
    from megatron.core.optimizer import OptimizerConfig, get_megatron_optimizer
    parallel_state.destroy_model_parallel()
    parallel_state.initialize_model_parallel(create_gloo_process_groups=False)
    config = b.config(torch, 2, 1)
    model = GPTModel(config, get_gpt_layer_local_spec(normalization="RMSNorm"), vocab_size=32, max_sequence_length=64,
                     position_embedding_type="rope")
    ddp_config = (DistributedDataParallelConfig(use_distributed_optimizer=True, overlap_grad_reduce=True,
                                                bucket_size=BUCKET_ELEMENTS) if several_buckets
                  else DistributedDataParallelConfig(use_distributed_optimizer=True))
    wrapped = DistributedDataParallel(config, ddp_config, model)
    optimizer = get_megatron_optimizer(
        OptimizerConfig(optimizer="adam", lr=1e-4, params_dtype=torch.float32, use_distributed_optimizer=True),
        [wrapped], use_gloo_process_groups=False)
    for part in getattr(optimizer, "chained_optimizers", [optimizer]):
        part._init_optimizer_states_with_dummy_values()
    return model, optimizer


def fill_states(torch, model, optimizer):
    """Each rank's slice of every parameter's states takes the values that name its elements; returns
    {(model key, global offset): {state: the whole parameter's expected values}} (as the model's sharded state
    dict names the parameter: the layers of a GPT share a key, their offsets on the layer axis differ) and the
    buckets [(elements, of them unpadded)]."""
    number = {param: i + 1 for i, param in enumerate(model.parameters())}
    with torch.no_grad():
        keys = {sh.data: (sh.key, tuple(sh.global_offset)) for sh in model.sharded_state_dict().values()
                if hasattr(sh, "global_offset") and isinstance(getattr(sh, "data", None), torch.Tensor)}
    expected, buckets = {}, []
    for part in getattr(optimizer, "chained_optimizers", [optimizer]):
        buckets += [(bucket.grad_data.numel(), bucket.numel_unpadded) for buffer in part.buffers
                    for bucket in buffer.buckets]
        for gbuf_range_maps in part.gbuf_ranges:
            for bucket_maps in gbuf_range_maps.values():
                for bucket_map in bucket_maps:
                    for param, range_map in bucket_map["param_map"].items():
                        held = part._get_main_param_and_optimizer_states(param)
                        span = range_map["param"]
                        for state, offset in STATES.items():
                            whole = torch.arange(param.numel(), dtype=torch.float32) + number[param] * 10000 + offset
                            held[state].copy_(whole[span.start:span.end])
                            if param in keys:
                                expected.setdefault(keys[param], {})[state] = whole.view(param.shape)
    return expected, buckets


def loaded_states(torch, request, loaded):
    """{(state, model key, global offset): loaded tensor} of the optimizer's model-space entries: the request
    names each entry's key (optimizer.state.<state>.<model key>) and offsets (its parameter's), the load
    returns its tensor at the same place."""
    from megatron.core.dist_checkpointing.mapping import ShardedTensor
    out = {}

    def walk(req, got):
        if isinstance(req, dict):
            for k in req:
                walk(req[k], got[k])
        elif isinstance(req, (list, tuple)):
            for r, g in zip(req, got):
                walk(r, g)
        elif isinstance(req, ShardedTensor) and req.key.startswith("optimizer.state."):
            name, _, model_key = req.key[len("optimizer.state."):].partition(".")
            if name in STATES:
                out[(name, model_key, tuple(req.global_offset))] = got
    walk(request["optimizer"], loaded["optimizer"])
    return out


def rank_main(rank, megatron_path, directory, several_buckets, results):
    try:
        sys.path.insert(0, megatron_path)
        import torch
        import torch.distributed as dist
        from megatron.core import dist_checkpointing

        b = script_beside("B-fresh-in-proj-under-gtp.py", "finding_b_script")
        o = script_beside("O-distributed-optimizer-gtp-mixer.py", "finding_o_script")
        f = script_beside("F-distributed-optimizer-torch-adam-load.py", "finding_f_script")
        dist.init_process_group("gloo", init_method="file://" + os.path.join(directory, "store"), rank=rank,
                                world_size=b.WORLD)
        b.cpu_shims(torch)
        ckpt = os.path.join(directory, "ckpt")
        if rank == 0:
            os.makedirs(ckpt)
        with o.optimizer_on_cpu(torch):
            model, optimizer = gpt_and_optimizer(b, torch, several_buckets)
            expected, buckets = fill_states(torch, model, optimizer)
            saved = f.state(torch, model, optimizer, "fully_reshardable")
            dist.barrier()
            dist_checkpointing.save(saved, ckpt)
            dist.barrier()
            model, optimizer = gpt_and_optimizer(b, torch, several_buckets)
            request = f.state(torch, model, optimizer, "fully_reshardable", is_loading=True)
            loaded = dist_checkpointing.load(request, ckpt)
            got = loaded_states(torch, request, loaded)
        wrong, checked = [], 0
        for (model_key, offset), states in sorted(expected.items()):
            for name, want in states.items():
                checked += 1
                value = got.get((name, model_key, offset))
                if value is None or value.numel() != want.numel() or not torch.equal(value.float().view(-1),
                                                                                     want.view(-1)):
                    where = "missing" if value is None else f"holds {value.flatten()[:2].tolist()}..."
                    wrong.append(f"optimizer.state.{name}.{model_key} at {list(offset)} (want "
                                 f"{want.flatten()[:2].tolist()}..., {where})")
        results.put((rank, {"buckets": buckets, "checked": checked, "wrong": wrong}))
        dist.barrier()
        dist.destroy_process_group()
    except BaseException:  # noqa: BLE001 - the script itself failed
        results.put((rank, {"script_error": traceback.format_exc()}))


def main():
    b = script_beside("B-fresh-in-proj-under-gtp.py", "finding_b_script")
    args = b.parse_args(__doc__, "DDP's default single bucket, where the offsets agree")
    if args is None:
        return 3
    several = not args.control
    outcomes = b.run_ranks(rank_main, args.megatron_path, several)
    if outcomes is None:
        return 3
    fails = False
    for rank in sorted(outcomes):
        o = outcomes[rank]
        print(f"dense GPT, DistributedOptimizer, buckets (elements, unpadded) {o['buckets']}, fully_reshardable saved "
              f"and loaded at TP 1 x DP 2, rank {rank}: {len(o['wrong'])} of {o['checked']} loaded states wrong")
        for line in o["wrong"][:4]:
            print(f"    {line}")
        fails |= bool(o["wrong"]) or o["checked"] == 0
    print(f"finding D {'reproduces' if fails else 'does not reproduce'} "
          f"({'several buckets' if several else 'one bucket'})")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
