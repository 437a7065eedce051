"""World tasks behind findings A and B on Megatron's real modules (issue 17; docs/megatron-findings.md): a
real GPTModel saved from its own sharded_state_dict, a real HybridModel's own sharded_state_dict
retargeted by Megatron's retarget_sharded_state_dict_to_gpt_checkpoint, dist_checkpointing.load and
the model's load_state_dict, as the training load path does. Models are the real-model factory's
(real_models/factory.py) under its declared CPU shims; parallel_state is Megatron's own for each
layout and given back to the world's groups afterwards."""

import os

from megatron_adapter import patches
from megatron_adapter.real_models import factory, roundtrip_models
from megatron_adapter.worlds import worker_context
from megatron_adapter.worlds.checkpoint_tasks import task_fresh_retarget_standin
from megatron_adapter.worlds.gdp_tasks import layout_dims

IN_PROJ = "decoder.layers.0.mixer.in_proj.weight"


def model_request(model, pattern, layers, hidden, attention_heads=1, experts=0, mamba=(1, 1, 1, 1)):
    """A factory request (docs/adapter-protocol.md, model_dump) for the findings' small models at TP, PP,
    EP, GTP 1: attention heads of `hidden` channels each; mamba = (heads, head_dim, groups, state)."""
    heads, head_dim, groups, state = mamba
    return {"model": model, "layers": layers, "pattern": pattern, "hidden": hidden,
            "num_attention_heads": attention_heads, "num_query_groups": attention_heads, "kv_channels": hidden,
            "ffn_hidden": 2 * hidden, "gated_mlp": False, "add_bias": False, "norm": "rms", "tp": 1, "pp": 1,
            "ep": 1, "etp": 1, "gtp": 1, "pad_alignment": 0, "num_experts": experts, "moe_ffn_hidden": hidden,
            "vocab": 32, "tied_embeddings": False, "mamba_heads": heads, "mamba_head_dim": head_dim,
            "mamba_groups": groups, "mamba_state": state}


def _save_gpt(ctx, req, directory, mark=None):
    """Builds the GPT of `req` on every rank and saves its own sharded state dict (after `mark(sd)`, when
    given) with dist_checkpointing.save. Returns the saved tree."""
    import torch.distributed as dist
    from megatron.core import dist_checkpointing
    factory.init_parallel_state(req)
    with patches.applied("model"), ctx.torch.no_grad():
        sd = factory.build_gpt(ctx.M, req).sharded_state_dict()
    if mark is not None:
        mark(sd)
    if ctx.rank == 0:
        os.makedirs(directory, exist_ok=True)
    dist.barrier()
    dist_checkpointing.save(sd, directory)
    dist.barrier()
    return sd


def _hybrid(ctx, req):
    """(model, its own sharded state dict) of the hybrid of `req` on this rank."""
    factory.init_parallel_state(req)
    with patches.applied("model"), ctx.torch.no_grad():
        model = factory.build_hybrid(ctx.M, req)["model"]
        return model, model.sharded_state_dict()


def _error(exc):
    """The exception's type, first and last message lines: DCP's CheckpointException carries each rank's
    traceback between them, and its last line is the error Megatron's load raised."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()] or [""]
    text = lines[0] if len(lines) == 1 else f"{lines[0][:200]} ... {lines[-1]}"
    return f"{type(exc).__name__}: {text[:500]}"


def task_fresh_retarget(ctx, p):
    """Finding B. Mamba: a real GPTModel saved at TP 1 (GTP 1), a real HybridModel of the pattern at the
    world's TP x GTP whose layer 0 is a Mamba layer (dims from the in_proj layout, hidden = cols); its
    own sharded state dict retargeted, then dist_checkpointing.load and load_state_dict (strict): what
    the fresh in_proj entry became, what the load handed back in its place, and whether the model took
    it. GDP (no real GDP layer in the factory yet): the stand-in mixer's sharded_state_dict retargeted
    and the handed-back value copied into the parameter (checkpoint_tasks.task_fresh_retarget_standin)."""
    from megatron.core import dist_checkpointing
    kind, d_inner, group_state, nheads, _ = layout_dims(list(p["sections"]), list(p["names"]))
    if kind != "mamba":
        return task_fresh_retarget_standin(ctx, p)
    M, pattern = ctx.M, p["pattern"]
    if d_inner % nheads:
        raise ValueError(f"a Mamba in_proj with d_inner {d_inner} over {nheads} heads")
    layers = M.interop.gpt_compatible_layer_maps(pattern).num_gpt_layers
    T = ctx.tp_size  # the sections are TP-local: one Mamba group and one attention head per TP rank
    gpt = model_request("gpt", pattern, layers, int(p["cols"]), attention_heads=T,
                        mamba=(nheads * T, d_inner // nheads, T, group_state))
    hybrid = dict(gpt, model="hybrid", gtp=ctx.gtp_size, tp=T, etp=T, pad_alignment=int(p["pad_for_alignment"]))
    try:
        _save_gpt(ctx, gpt, p["dir"])
        model, sd = _hybrid(ctx, hybrid)
        weight = model.decoder.layers[0].mixer.in_proj.weight
        roundtrip_models.retarget(M, {"model": sd}, pattern)
        entry = sd[IN_PROJ]
        out = {"entry_type": type(entry).__name__, "param_shape": list(weight.shape),
               "gtp_param": bool(getattr(weight, "is_gtp_weight_remat", False))}
        if isinstance(entry, M.LocalNonpersistentObject):
            obj = entry.unwrap()
            out["payload_shape"] = list(obj.shape) if hasattr(obj, "shape") else None
            out["payload_is_param"] = hasattr(obj, "data_ptr") and obj.data_ptr() == weight.data_ptr()
        try:
            loaded = dist_checkpointing.load(sd, p["dir"])
        except BaseException as exc:  # noqa: BLE001 - Megatron's outcome (CheckpointException is a BaseException)
            out["load_error"] = _error(exc)
            return out
        got = loaded.get(IN_PROJ)
        out["loaded_shape"] = list(got.shape) if hasattr(got, "shape") else None
        try:
            model.load_state_dict(loaded, strict=True)  # what training does with the loaded state dict
            out["copy_into_param"] = "ok"
        except Exception as exc:  # noqa: BLE001
            out["copy_into_param"] = _error(exc)
        return out
    finally:
        worker_context.release_task_groups(ctx)


def task_single_expert(ctx, p):
    """Finding A: a real GPTModel with E experts (SequentialMLP) over the GPT layers of the pattern,
    saved from its own sharded state dict, each expert linear's _extra_state object carrying
    {"layer", "expert"} of its place (local linears hold None there: the payload only is the harness's,
    keys and offsets are Megatron's); a real HybridModel of the pattern, its own sharded state dict
    retargeted, loaded and taken by load_state_dict (one rank). "load" maps each hybrid expert object,
    named `<its key>#<expert>`, to what it received."""
    from megatron.core import dist_checkpointing
    M = ctx.M
    E, pattern = int(p["experts"]), p["pattern"]
    maps = M.interop.gpt_compatible_layer_maps(pattern)
    gpt = model_request("gpt", pattern, maps.num_gpt_layers, 8, experts=E)

    def objects(sd):
        return [o for o in sd.values() if isinstance(o, M.ShardedObject) and ".mlp.experts." in o.key]

    def mark(sd):
        for o in objects(sd):
            o.data = {"layer": o.global_offset[0], "expert": o.global_offset[1]}

    try:
        saved = sorted(o.unique_key for o in objects(_save_gpt(ctx, gpt, p["dir"], mark)))
        model, sd = _hybrid(ctx, dict(gpt, model="hybrid"))
        experts = {id(o) for o in objects(sd)}
        names = {path: f"{o.key}#{o.global_offset[-1]}" for path, o in sd.items() if id(o) in experts}
        before = {names[path]: sd[path].unique_key for path in names}
        roundtrip_models.retarget(M, {"model": sd}, pattern)
        out = {"saved": saved, "hybrid_before": before,
               "requested": {names[path]: sd[path].unique_key for path in names}}
        try:
            loaded = dist_checkpointing.load(sd, p["dir"])
            model.load_state_dict(loaded, strict=True)
        except BaseException as exc:  # noqa: BLE001 - Megatron's outcome (CheckpointException is a BaseException)
            out["load_error"] = _error(exc)
            out["frame"] = worker_context.megatron_frame(exc.__traceback__)
            return out
        out["load"] = {names[path]: loaded[path] for path in names}
        return out
    finally:
        worker_context.release_task_groups(ctx)
