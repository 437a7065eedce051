"""Finding S as a standalone script: Megatron's code only, no harness imports.

Run with the Megatron venv's python:

    python S-swiglu-fc1-under-gtp.py --megatron-path DIR [--control]

Two gloo ranks on CPU. A GPTModel of one layer with a SwiGLU MLP (gated_linear_unit; Megatron's local
modules) is built at TP 1 x GTP 2 (pad_for_alignment 0: every weight's rows divide by 2, so no weight is
padded and each keeps its global shape at any GTP size): its linear_fc1 is a ColumnParallelLinear that
Megatron's constructor wraps under GTP, 32 rows [W (16 rows); V (16 rows)] split into a (16, 8) shard per
GTP rank, so GTP rank 0 holds W and GTP rank 1 holds V. Each rank writes into its shard the number of the
row it holds (row i of GTP rank g is row g x 16 + i of the layer's fc1) and saves the model's own
sharded_state_dict with dist_checkpointing.save. The same GPTModel is then built at GTP 1 (TP 1 x DP 2),
its fc1 set to -1, and loaded with dist_checkpointing.load and load_state_dict (strict); each rank reads
back which row each row of fc1 now holds.

The MLP's sharded_state_dict wraps fc1 in the SwiGLU factory (apply_swiglu_sharded_factory), which
splits the tensor it is given into W and V halves. Under GTP it is given the GTP shard, not the layer's
TP-local weight, so it saves the halves of each shard as W and V pieces: GTP rank 0's W rows 8..15 land
in the checkpoint's V half and GTP rank 1's V rows 16..23 in its W half. Loaded without GTP (or at
another GTP size), fc1 rows 8..15 hold V's rows 16..23 and rows 16..23 hold W's rows 8..15, with no error.
--control saves at GTP 1 too, where every row comes back. Exit 1 while a rank loads a row that is not
its own (the finding reproduces), 0 when every row comes back, 3 when the script itself could not run.

Declared shims: finding B's (B-fresh-in-proj-under-gtp.py beside this file: its CPU shims, config and
run_ranks are reused, not repeated); none touches the code under test.
"""

import importlib.util
import os
import sys
import traceback

PAD = 0


def finding_b_script():
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "B-fresh-in-proj-under-gtp.py")
    spec = importlib.util.spec_from_file_location("finding_b_script", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def init_parallel_state(gtp):
    from megatron.core import parallel_state
    from megatron.core.tensor_parallel.generalized_tensor_parallelism import update_gtp_config
    parallel_state.destroy_model_parallel()
    update_gtp_config(pad_for_alignment=PAD)
    parallel_state.initialize_model_parallel(gtp_remat_size=gtp, create_gloo_process_groups=False)


def swiglu_gpt(b, torch, gtp):
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.models.gpt.gpt_model import GPTModel
    return GPTModel(b.config(torch, 1, gtp, gated_linear_unit=True), get_gpt_layer_local_spec(normalization="RMSNorm"),
                    vocab_size=32, max_sequence_length=64, position_embedding_type="rope")


def rank_main(rank, megatron_path, directory, save_gtp, results):
    try:
        sys.path.insert(0, megatron_path)
        import torch
        import torch.distributed as dist
        from megatron.core import dist_checkpointing, parallel_state

        b = finding_b_script()
        dist.init_process_group("gloo", init_method="file://" + os.path.join(directory, "store"), rank=rank,
                                world_size=b.WORLD)
        b.cpu_shims(torch)
        ckpt = os.path.join(directory, "ckpt")
        if rank == 0:
            os.makedirs(ckpt)
        init_parallel_state(save_gtp)
        saved = swiglu_gpt(b, torch, save_gtp)
        shard = saved.decoder.layers[0].mlp.linear_fc1.weight
        first_row = parallel_state.get_gtp_weight_remat_rank() * shard.shape[0]
        with torch.no_grad():
            shard.copy_(torch.arange(first_row, first_row + shard.shape[0], dtype=shard.dtype)[:, None]
                        .expand_as(shard))
            sd = saved.sharded_state_dict()
        outcome = {"saved shard": f"rows {first_row}..{first_row + shard.shape[0] - 1} of fc1, {tuple(shard.shape)}"}
        dist.barrier()
        dist_checkpointing.save(sd, ckpt)
        dist.barrier()

        init_parallel_state(1)
        loaded_model = swiglu_gpt(b, torch, 1)
        fc1 = loaded_model.decoder.layers[0].mlp.linear_fc1.weight
        with torch.no_grad():
            fc1.fill_(-1)
            sd = loaded_model.sharded_state_dict()
        try:
            loaded_model.load_state_dict(dist_checkpointing.load(sd, ckpt), strict=True)
            held = [int(v) for v in fc1[:, 0].tolist()]
            outcome["wrong rows"] = {r: v for r, v in enumerate(held) if v != r}
        except BaseException as exc:  # noqa: BLE001 - Megatron's outcome (DCP's CheckpointException is a BaseException)
            outcome["load"] = f"{type(exc).__name__}: {' '.join(str(exc).split())[-1200:]}"
        results.put((rank, outcome))
        dist.barrier()
        dist.destroy_process_group()
    except BaseException:  # noqa: BLE001 - the script itself failed
        results.put((rank, {"script_error": traceback.format_exc()}))


def main():
    b = finding_b_script()
    args = b.parse_args(__doc__, "saved at GTP 1 too, where every row comes back")
    if args is None:
        return 3
    save_gtp = 1 if args.control else 2
    outcomes = b.run_ranks(rank_main, args.megatron_path, save_gtp)
    if outcomes is None:
        return 3
    fails = False
    for rank in sorted(outcomes):
        o = outcomes[rank]
        if "load" in o:
            result = f"the load raised {o['load']}"
        elif o["wrong rows"]:
            result = f"{len(o['wrong rows'])} of 32 fc1 rows hold another row (row: the row it holds): {o['wrong rows']}"
        else:
            result = "every fc1 row holds its own"
        print(f"SwiGLU GPT saved at TP 1 x GTP {save_gtp} p {PAD}, rank {rank} (saved {o['saved shard']}); "
              f"loaded at GTP 1: {result}")
        fails |= "load" in o or bool(o["wrong rows"])
    print(f"finding S {'reproduces' if fails else 'does not reproduce'} (saved at GTP {save_gtp}, loaded at GTP 1)")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
