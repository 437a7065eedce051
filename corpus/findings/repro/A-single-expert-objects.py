"""Finding A as a standalone script: Megatron's code only, no harness imports.

Run with the Megatron venv's python:

    python A-single-expert-objects.py --megatron-path DIR [--control]

One gloo rank on CPU (TP, PP, EP 1), Megatron's parallel_state. A GPTModel of 2 MoE layers with E
experts (SequentialMLP, Megatron's local modules) is saved with dist_checkpointing.save from its own
sharded_state_dict. A HybridModel with the pattern "*E*E" (hybrid layers 1 and 3 are GPT layers 0 and
1's MoE blocks) builds its own sharded_state_dict, which Megatron's
retarget_sharded_state_dict_to_gpt_checkpoint points at the GPT checkpoint (what the training load path
does for a GPT->Hybrid load), then dist_checkpointing.load and the model's load_state_dict (strict).

The expert linears' _extra_state ShardedObjects hold None (local linears have no extra state); the
script writes {"layer": l, "expert": e} into the GPT save's objects (the payload only: keys and
offsets are Megatron's), so the load shows which object each hybrid expert received.

With E = 1 the hybrid's expert object is (1,)/(0,), which retargeting takes for the layer-axis
placeholder and replaces: the request asks .../shard_<l>_2 where the GPT save wrote
.../shard_<l>.0_2.1. --control runs E = 2, where every object loads. Exit 1 while E = 1 fails (the
finding reproduces), 0 when it loads every object right, 3 when the script itself could not run.

Declared shims and stand-ins (none touches the code under test):
- torch.cuda.synchronize -> no-op, torch.cuda.current_device -> "cpu": no GPU on the machine.
- filesystem_async._process_memory -> 0 when psutil is absent; _results_queue -> queue.Queue().
- hybrid_block.TENorm -> the local spec's norm (LNImpl): HybridStack hard-codes Transformer Engine's
  norm for its final norm; the local norm has the same weight and key.
- Layer specs: Megatron's hybrid specs need Transformer Engine, so the HybridStack spec is built from
  Megatron's local modules (get_gpt_layer_local_spec's submodules), each norm keyed as TE's spec keys
  it: attention input_layernorm -> self_attention.linear_qkv.layer_norm_ (as the local GPT spec maps
  it); the MoE layer keeps its pre_mlp_layernorm (TE's MoE layer has a real one, no key map). The GPT
  side is get_gpt_layer_local_spec with the same TE keying for its MoE layers: the local spec maps an
  MoE layer's pre_mlp_layernorm to mlp.linear_fc1.layer_norm_, a key TE's GPT MoE spec and the hybrid
  do not have (left as it is, no GPT MoE save would load into a hybrid at all).
"""

import argparse
import dataclasses
import os
import queue
import sys
import tempfile
import traceback

PATTERN, GPT_LAYERS = "*E*E", 2


def cpu_shims(torch):
    from megatron.core.dist_checkpointing.strategies import filesystem_async
    from megatron.core.models.gpt.gpt_layer_specs import LNImpl
    from megatron.core.models.hybrid import hybrid_block
    torch.cuda.synchronize = lambda *a, **k: None
    torch.cuda.current_device = lambda: "cpu"
    if not getattr(filesystem_async, "HAVE_PSUTIL", True):
        filesystem_async._process_memory = lambda: 0
    if getattr(filesystem_async, "_results_queue", "absent") is None:
        filesystem_async._results_queue = queue.Queue()
    hybrid_block.TENorm = LNImpl


def config(torch, layers, experts):
    from megatron.core.transformer.transformer_config import TransformerConfig
    return TransformerConfig(num_layers=layers, hidden_size=8, num_attention_heads=2, kv_channels=4,
                             ffn_hidden_size=16, normalization="RMSNorm", add_bias_linear=False,
                             num_moe_experts=experts, moe_ffn_hidden_size=8, moe_router_topk=1, moe_router_pre_softmax=True,
                             moe_grouped_gemm=False, use_cpu_initialization=True, perform_initialization=False,
                             params_dtype=torch.float32, pipeline_dtype=torch.float32)


def te_keyed_moe(submodules):
    """An MoE layer's submodules keyed as TE's: only the input norm is mapped (onto linear_qkv)."""
    return dataclasses.replace(submodules, sharded_state_dict_keys_map={
        "input_layernorm.": "self_attention.linear_qkv.layer_norm_"})


def gpt_model(torch, experts):
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.models.gpt.gpt_model import GPTModel
    spec = get_gpt_layer_local_spec(num_experts=experts, moe_grouped_gemm=False, normalization="RMSNorm")
    spec = dataclasses.replace(spec, submodules=te_keyed_moe(spec.submodules))
    return GPTModel(config(torch, GPT_LAYERS, experts), spec, vocab_size=32, max_sequence_length=64,
                    position_embedding_type="rope")


def hybrid_model(torch, experts):
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.models.hybrid.hybrid_block import HybridStack, HybridStackSubmodules
    from megatron.core.models.hybrid.hybrid_model import HybridModel
    from megatron.core.transformer.identity_op import IdentityOp
    from megatron.core.transformer.spec_utils import ModuleSpec
    from megatron.core.transformer.transformer_layer import MoETransformerLayer, TransformerLayer
    dense = get_gpt_layer_local_spec(normalization="RMSNorm").submodules
    attention = dataclasses.replace(te_keyed_moe(dense), pre_mlp_layernorm=IdentityOp, mlp=IdentityOp)
    moe = get_gpt_layer_local_spec(num_experts=experts, moe_grouped_gemm=False, normalization="RMSNorm").submodules
    moe = dataclasses.replace(moe, input_layernorm=IdentityOp, self_attention=IdentityOp,
                              sharded_state_dict_keys_map={})
    spec = ModuleSpec(module=HybridStack, submodules=HybridStackSubmodules(
        attention_layer=ModuleSpec(module=TransformerLayer, submodules=attention),
        moe_layer=ModuleSpec(module=MoETransformerLayer, submodules=moe)))
    return HybridModel(config(torch, len(PATTERN), experts), spec, vocab_size=32, max_sequence_length=64,
                       hybrid_layer_pattern=PATTERN, position_embedding_type="none")


def expert_objects(mapping, sd):
    """[(path, object)] of the expert linears' _extra_state objects (the model's flat sharded state dict)."""
    return [(path, v) for path, v in sd.items()
            if isinstance(v, mapping.ShardedObject) and ".mlp.experts." in v.key]


def rank_main(rank, megatron_path, directory, experts, results):
    try:
        sys.path.insert(0, megatron_path)
        import torch
        import torch.distributed as dist
        from megatron.core import dist_checkpointing, parallel_state
        from megatron.core.dist_checkpointing import mapping
        from megatron.core.dist_checkpointing.gpt_checkpoint_interop import (
            gpt_compatible_layer_maps, retarget_sharded_state_dict_to_gpt_checkpoint)

        dist.init_process_group("gloo", init_method="file://" + os.path.join(directory, "store"), rank=rank,
                                world_size=1)
        parallel_state.initialize_model_parallel(create_gloo_process_groups=False)
        cpu_shims(torch)
        ckpt = os.path.join(directory, "ckpt")
        os.makedirs(ckpt)
        gpt = gpt_model(torch, experts).sharded_state_dict()
        for _, obj in expert_objects(mapping, gpt):  # the payload names its source: (GPT layer, expert)
            obj.data = {"layer": obj.global_offset[0], "expert": obj.global_offset[1]}
        saved = sorted({o.unique_key for _, o in expert_objects(mapping, gpt)})
        dist_checkpointing.save(gpt, ckpt)

        model = hybrid_model(torch, experts)
        sd = model.sharded_state_dict()
        want = {}  # hybrid path -> (GPT layer, expert) it must receive
        maps = gpt_compatible_layer_maps(PATTERN)
        for path, obj in expert_objects(mapping, sd):
            hybrid_layer = int(obj.key.split(".")[2])
            want[path] = (maps.mlp_to_gpt[hybrid_layer], obj.global_offset[-1])
        retarget_sharded_state_dict_to_gpt_checkpoint(sd, maps)
        requested = sorted({o.unique_key for _, o in expert_objects(mapping, sd)})
        outcome = {"saved": saved, "requested": requested}
        try:
            loaded = dist_checkpointing.load(sd, ckpt)
        except BaseException as exc:  # noqa: BLE001 - Megatron's outcome (DCP's CheckpointException is a BaseException)
            lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
            outcome["load"] = f"{type(exc).__name__}: {(lines[-1] if lines else '')[:300]}"
        else:
            wrong = [f"{path} got {loaded[path]}" for path, (layer, e) in want.items()
                     if loaded.get(path) != {"layer": layer, "expert": e}]
            model.load_state_dict(loaded, strict=True)
            outcome["load"] = "ok" if not wrong else "wrong objects: " + "; ".join(wrong)
        results.put((experts, outcome))
    except BaseException:  # noqa: BLE001 - the script itself failed
        results.put((experts, {"script_error": traceback.format_exc()}))


def run(megatron_path, experts):
    import torch.multiprocessing as mp
    context = mp.get_context("spawn")
    results = context.Queue()
    with tempfile.TemporaryDirectory() as directory:
        p = context.Process(target=rank_main, args=(0, megatron_path, directory, experts, results))
        p.start()
        outcome = None
        for _ in range(300):  # up to 300 s, while the rank lives
            try:
                _, outcome = results.get(timeout=1)
                break
            except queue.Empty:
                if not p.is_alive():
                    break
        if outcome is None:
            outcome = {"script_error": f"the rank did not report (exit code {p.exitcode})"}
        p.join(timeout=30)
        if p.is_alive():
            p.kill()
    return outcome


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megatron-path", required=True)
    parser.add_argument("--control", action="store_true", help="E = 2, where every object loads")
    args = parser.parse_args()
    if not os.path.isfile(os.path.join(args.megatron_path, "megatron", "core", "__init__.py")):
        print(f"not a Megatron-LM checkout: {args.megatron_path}", file=sys.stderr)
        return 3
    experts = 2 if args.control else 1
    outcome = run(args.megatron_path, experts)
    if "script_error" in outcome:
        print(f"harness error (the script could not run):\n{outcome['script_error']}", file=sys.stderr)
        return 3
    print(f"'{PATTERN}', E = {experts}, rank 0")
    print("  GPT save wrote:    " + ", ".join(outcome["saved"]))
    print("  hybrid requested:  " + ", ".join(outcome["requested"]))
    print(f"  load: {outcome['load']}")
    fails = outcome["load"] != "ok"
    print(f"finding A {'reproduces' if fails else 'does not reproduce'} with E = {experts}")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
