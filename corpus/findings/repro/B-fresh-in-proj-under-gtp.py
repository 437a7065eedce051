"""Finding B as a standalone script: Megatron's code only, no harness imports.

Run with the Megatron venv's python:

    python B-fresh-in-proj-under-gtp.py --megatron-path DIR [--control]

Two gloo ranks on CPU. A GPTModel of one dense layer (Megatron's local modules) is saved at TP 1 x DP 2
with dist_checkpointing.save from its own sharded_state_dict. A HybridModel with the pattern "M*-" is
built at TP 1 x GTP 2 (pad_for_alignment 16): layer 0 is a Mamba layer (MambaMixer, its in_proj a
ColumnParallelLinear that Megatron's constructor wraps under GTP: 26 rows padded to 32, a (16, 8)
shard per rank), layers 1 and 2 take GPT layer 0's attention and MLP. Its own sharded_state_dict is
retargeted by Megatron's retarget_sharded_state_dict_to_gpt_checkpoint (the Mamba layer is fresh: its
entries become LocalNonpersistentObjects), then dist_checkpointing.load and the model's load_state_dict
(strict), as the training load path does.

The mixer's sharded_state_dict builds a gather factory for the GTP in_proj, whose data is the
all-gathered (26, 8) in_proj; retargeting wraps factory.data, so the load hands back (26, 8) for the
(16, 8) parameter. Each rank prints the fresh in_proj entry, the value the load hands back and what
load_state_dict did. --control builds the hybrid at GTP 1 (no gather factory), where the load keeps
the fresh in_proj. Exit 1 while a GTP rank's load fails (the finding reproduces), 0 when every rank
loads, 3 when the script itself could not run.

Declared shims and stand-ins (none touches the code under test):
- gtp_api.HAVE_GTP, mamba_mixer.HAVE_GTP -> True, mamba_mixer.is_gtp_param -> GTP's own: GTP is gated
  on Transformer Engine (needs a GPU); the mixer copied both at import. No GTP kernel runs here;
  torch.cuda.Event -> a stand-in that raises if used.
- torch.cuda.synchronize -> no-op, torch.cuda.current_device -> "cpu" (the Mamba mixer allocates its
  conv1d, A_log, D, dt_bias and norm there); filesystem_async._process_memory -> 0 when psutil is
  absent; _results_queue -> queue.Queue().
- Mamba without its kernels: mamba_mixer.HAVE_MAMBA_SSM -> True and ExtendedRMSNorm -> a CPU module with
  the gated norm's weight, sharded along axis 0 over TP as ExtendedRMSNorm shards it (its forward
  raises); HAVE_EINOPS -> True in mamba_mixer and mamba_context_parallel (einops is used only in
  forward); the mixer's get_cuda_rng_tracker -> a tracker whose fork() does nothing.
- hybrid_block.TENorm -> the local spec's norm (LNImpl): HybridStack hard-codes Transformer Engine's
  norm for its final norm.
- Layer specs: Megatron's hybrid specs need Transformer Engine, so the HybridStack spec is built from
  Megatron's local modules, each norm keyed as TE's spec keys it (Mamba norm. ->
  mixer.in_proj.layer_norm_, attention input_layernorm. -> self_attention.linear_qkv.layer_norm_, MLP
  pre_mlp_layernorm. -> mlp.linear_fc1.layer_norm_, as get_gpt_layer_local_spec maps GPT's).
- The hybrid's state dict is built under torch.no_grad(): gloo's CPU all_gather_into_tensor (the
  mixer's gather of the in_proj shards) writes through views, which autograd refuses while the
  parameter requires grad; NCCL writes the buffer in place.
"""

import argparse
import contextlib
import dataclasses
import os
import queue
import sys
import tempfile
import traceback

WORLD, PATTERN, PAD, HIDDEN = 2, "M*-", 16, 8
IN_PROJ = "decoder.layers.0.mixer.in_proj.weight"


def cpu_shims(torch):
    from megatron.core.dist_checkpointing.strategies import filesystem_async
    from megatron.core.models.gpt.gpt_layer_specs import LNImpl
    from megatron.core.models.hybrid import hybrid_block
    from megatron.core.ssm import mamba_context_parallel, mamba_mixer
    from megatron.core.tensor_parallel import gtp_api
    from megatron.core.tensor_parallel.generalized_tensor_parallelism import is_gtp_param

    class NoEvent:
        def __init__(self, *a, **k):
            pass

        def __getattr__(self, name):
            raise RuntimeError(f"shim: torch.cuda.Event.{name} called on CPU (a GTP kernel path ran)")

    class NoFork:
        def fork(self, *a, **k):
            return contextlib.nullcontext()

    class GatedNorm(torch.nn.Module):
        def __init__(self, hidden_size, eps=1e-5, group_size=None, norm_before_gate=True, device=None, dtype=None):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.empty(hidden_size, dtype=dtype))

        def forward(self, *a, **k):
            raise RuntimeError("shim: mamba_ssm's gated RMSNorm kernel is not available on CPU")

        def sharded_state_dict(self, prefix="", sharded_offsets=(), metadata=None):
            from megatron.core import parallel_state
            from megatron.core.transformer.utils import make_sharded_tensors_for_checkpoint
            return make_sharded_tensors_for_checkpoint(
                self.state_dict(prefix="", keep_vars=True), prefix, {"weight": 0}, sharded_offsets,
                tp_group=parallel_state.get_tensor_model_parallel_group(), dp_cp_group=metadata["dp_cp_group"])

    gtp_api.HAVE_GTP = True
    mamba_mixer.HAVE_GTP = True
    mamba_mixer.is_gtp_param = is_gtp_param
    torch.cuda.Event = NoEvent
    torch.cuda.synchronize = lambda *a, **k: None
    torch.cuda.current_device = lambda: "cpu"
    if not getattr(filesystem_async, "HAVE_PSUTIL", True):
        filesystem_async._process_memory = lambda: 0
    if getattr(filesystem_async, "_results_queue", "absent") is None:
        filesystem_async._results_queue = queue.Queue()
    mamba_mixer.HAVE_MAMBA_SSM = True
    mamba_mixer.ExtendedRMSNorm = GatedNorm
    mamba_mixer.HAVE_EINOPS = True
    mamba_context_parallel.HAVE_EINOPS = True
    mamba_mixer.get_cuda_rng_tracker = lambda *a, **k: NoFork()
    hybrid_block.TENorm = LNImpl


def config(torch, layers, gtp, **more):
    from megatron.core.transformer.transformer_config import TransformerConfig
    return TransformerConfig(num_layers=layers, hidden_size=HIDDEN, num_attention_heads=2, kv_channels=4,
                             ffn_hidden_size=16, normalization="RMSNorm", add_bias_linear=False,
                             gtp_weight_remat_size=gtp, mamba_num_heads=2, mamba_head_dim=4, mamba_num_groups=1,
                             mamba_state_dim=4, use_cpu_initialization=True, perform_initialization=False,
                             params_dtype=torch.float32, pipeline_dtype=torch.float32, **more)


def init_parallel_state(gtp):
    from megatron.core import parallel_state
    from megatron.core.tensor_parallel.generalized_tensor_parallelism import update_gtp_config
    parallel_state.destroy_model_parallel()
    update_gtp_config(pad_for_alignment=PAD)
    parallel_state.initialize_model_parallel(gtp_remat_size=gtp, create_gloo_process_groups=False)


def gpt_model(torch):
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.models.gpt.gpt_model import GPTModel
    return GPTModel(config(torch, 1, 1), get_gpt_layer_local_spec(normalization="RMSNorm"), vocab_size=32,
                    max_sequence_length=64, position_embedding_type="rope")


def hybrid_model(torch, gtp):
    from megatron.core.fusions.fused_bias_dropout import get_bias_dropout_add
    from megatron.core.models.gpt.gpt_layer_specs import LNImpl, get_gpt_layer_local_spec
    from megatron.core.models.hybrid.hybrid_block import HybridStack, HybridStackSubmodules
    from megatron.core.models.hybrid.hybrid_model import HybridModel
    from megatron.core.ssm.mamba_layer import MambaLayer, MambaLayerSubmodules
    from megatron.core.ssm.mamba_mixer import MambaMixer, MambaMixerSubmodules
    from megatron.core.ssm.mlp_layer import MLPLayer
    from megatron.core.tensor_parallel import ColumnParallelLinear, RowParallelLinear
    from megatron.core.transformer.identity_op import IdentityOp
    from megatron.core.transformer.spec_utils import ModuleSpec
    from megatron.core.transformer.transformer_layer import TransformerLayer
    dense = get_gpt_layer_local_spec(normalization="RMSNorm").submodules
    attention = dataclasses.replace(dense, pre_mlp_layernorm=IdentityOp, mlp=IdentityOp, sharded_state_dict_keys_map={
        "input_layernorm.": "self_attention.linear_qkv.layer_norm_"})
    mlp = dataclasses.replace(dense, input_layernorm=IdentityOp, self_attention=IdentityOp,
                              sharded_state_dict_keys_map={"pre_mlp_layernorm.": "mlp.linear_fc1.layer_norm_"})
    mamba = ModuleSpec(module=MambaLayer, submodules=MambaLayerSubmodules(
        norm=LNImpl, mixer=ModuleSpec(module=MambaMixer, submodules=MambaMixerSubmodules(
            in_proj=ColumnParallelLinear, out_proj=RowParallelLinear)),
        mamba_bda=get_bias_dropout_add, sharded_state_dict_keys_map={"norm.": "mixer.in_proj.layer_norm_"}))
    spec = ModuleSpec(module=HybridStack, submodules=HybridStackSubmodules(
        mamba_layer=mamba, attention_layer=ModuleSpec(module=TransformerLayer, submodules=attention),
        mlp_layer=ModuleSpec(module=MLPLayer, submodules=mlp)))
    return HybridModel(config(torch, len(PATTERN), gtp), spec, vocab_size=32, max_sequence_length=64,
                       hybrid_layer_pattern=PATTERN, position_embedding_type="none")


def rank_main(rank, megatron_path, directory, gtp, results):
    try:
        sys.path.insert(0, megatron_path)
        import torch
        import torch.distributed as dist
        from megatron.core import dist_checkpointing
        from megatron.core.dist_checkpointing.gpt_checkpoint_interop import (
            gpt_compatible_layer_maps, retarget_sharded_state_dict_to_gpt_checkpoint)
        from megatron.core.dist_checkpointing.mapping import LocalNonpersistentObject

        dist.init_process_group("gloo", init_method="file://" + os.path.join(directory, "store"), rank=rank,
                                world_size=WORLD)
        cpu_shims(torch)
        ckpt = os.path.join(directory, "ckpt")
        if rank == 0:
            os.makedirs(ckpt)
        init_parallel_state(1)
        with torch.no_grad():
            gpt = gpt_model(torch).sharded_state_dict()
        dist.barrier()
        dist_checkpointing.save(gpt, ckpt)
        dist.barrier()

        init_parallel_state(gtp)
        model = hybrid_model(torch, gtp)
        param = model.decoder.layers[0].mixer.in_proj.weight
        with torch.no_grad():
            sd = model.sharded_state_dict()
        retarget_sharded_state_dict_to_gpt_checkpoint(sd, gpt_compatible_layer_maps(PATTERN))
        entry = sd[IN_PROJ]
        outcome = {"param": tuple(param.shape), "entry": type(entry).__name__}
        if isinstance(entry, LocalNonpersistentObject):
            outcome["entry"] += f" of {tuple(entry.unwrap().shape)}"
        try:
            loaded = dist_checkpointing.load(sd, ckpt)
            outcome["handed back"] = tuple(loaded[IN_PROJ].shape)
            model.load_state_dict(loaded, strict=True)
            outcome["load_state_dict"] = "ok"
        except BaseException as exc:  # noqa: BLE001 - Megatron's outcome (DCP's CheckpointException is a BaseException)
            lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
            outcome["load_state_dict" if "handed back" in outcome else "load"] = (
                f"{type(exc).__name__}: {' '.join(lines)[:300]}")
        results.put((rank, outcome))
        dist.barrier()
        dist.destroy_process_group()
    except BaseException:  # noqa: BLE001 - the script itself failed
        results.put((rank, {"script_error": traceback.format_exc()}))


def run_ranks(rank_main, megatron_path, *args, world=WORLD):
    """rank_main(rank, megatron_path, directory, *args, results) on `world` spawned ranks sharing a
    temporary directory; {rank: outcome}, or None (after saying why) when the script itself failed."""
    import torch.multiprocessing as mp
    context = mp.get_context("spawn")
    results = context.Queue()
    outcomes = {}
    with tempfile.TemporaryDirectory() as directory:
        ranks = [context.Process(target=rank_main, args=(r, megatron_path, directory, *args, results))
                 for r in range(world)]
        for p in ranks:
            p.start()
        for _ in range(300):  # up to 300 s, while a rank lives
            try:
                rank, outcome = results.get(timeout=1)
                outcomes[rank] = outcome
            except queue.Empty:
                if not any(p.is_alive() for p in ranks):
                    break
            if len(outcomes) == world:
                break
        for p in ranks:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
    errors = [f"rank {r}:\n{o['script_error']}" for r, o in sorted(outcomes.items()) if "script_error" in o]
    if errors or len(outcomes) != world:
        print("harness error (the script could not run): " + ("\n".join(errors) or "not every rank reported"),
              file=sys.stderr)
        return None
    return outcomes


def parse_args(doc, control_help, extra=None):
    """--megatron-path DIR [--control] of a finding script, and the flags `extra(parser)` adds; None (after
    saying why) when DIR is no checkout."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--megatron-path", required=True)
    parser.add_argument("--control", action="store_true", help=control_help)
    if extra:
        extra(parser)
    args = parser.parse_args()
    if not os.path.isfile(os.path.join(args.megatron_path, "megatron", "core", "__init__.py")):
        print(f"not a Megatron-LM checkout: {args.megatron_path}", file=sys.stderr)
        return None
    return args


def main():
    args = parse_args(__doc__, "the hybrid at GTP 1, where the load holds")
    if args is None:
        return 3
    gtp = 1 if args.control else 2
    outcomes = run_ranks(rank_main, args.megatron_path, gtp)
    if outcomes is None:
        return 3
    fails = False
    for rank in sorted(outcomes):
        o = outcomes[rank]
        print(f"'{PATTERN}' TP 1 x GTP {gtp} p {PAD}, rank {rank}: the fresh in_proj (parameter {o['param']}) "
              f"became {o['entry']}; " + "; ".join(f"{k}: {v}" for k, v in o.items() if k not in ("param", "entry")))
        fails |= o.get("load_state_dict") != "ok"
    print(f"finding B {'reproduces' if fails else 'does not reproduce'} at GTP {gtp}")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
