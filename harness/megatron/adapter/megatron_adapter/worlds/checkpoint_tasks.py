"""World tasks that save and load for real through Megatron's dist_checkpointing (gloo, CPU): fresh
retargeting of the stand-in GDP mixer, the load orderings, and the seam's load_state."""

import os

from candidates import shard_split  # selects the candidate design per task (inactive unless installed)

from megatron_adapter.worlds.gdp_tasks import standin_mixer
from megatron_adapter.worlds.worker_context import decode_rows, first_column_checked, megatron_frame, row_code


# ---- real save and load through dist_checkpointing (item 3) -----------------------------------

def task_fresh_retarget_standin(ctx, p):
    """Finding B for the GDP mixer, which the real-model factory does not build yet (Mamba is built
    for real: finding_tasks.task_fresh_retarget): the stand-in mixer's sharded state dict under GTP,
    retargeted to a GPT checkpoint with the mixer's layer fresh (gpt_checkpoint_interop), then what the
    in_proj entry became and what a load hands back in place of the parameter
    (dist_checkpointing.load_preprocess + merge of the nonpersistent part, Megatron's own code)."""
    M = ctx.M
    mod, weight, mixer_cls = standin_mixer(ctx, p)
    prefix = "decoder.layers.0.mixer."
    sd = mixer_cls.sharded_state_dict(mod, prefix=prefix, sharded_offsets=(), metadata={"dp_cp_group": ctx.dp_cp_group})
    maps = M.interop.gpt_compatible_layer_maps(p["pattern"])
    M.interop.retarget_sharded_state_dict_to_gpt_checkpoint(sd, maps)
    entry = sd[prefix + "in_proj.weight"]
    out = {"entry_type": type(entry).__name__, "param_shape": list(weight.shape),
           "gtp_param": bool(getattr(weight, "is_gtp_weight_remat", False))}
    if isinstance(entry, M.LocalNonpersistentObject):
        obj = entry.unwrap()
        out["payload_shape"] = list(obj.shape) if hasattr(obj, "shape") else None
        out["payload_is_param"] = obj is weight or (hasattr(obj, "data_ptr") and obj.data_ptr() == weight.data_ptr())
        from megatron.core.dist_checkpointing.state_dict_utils import load_preprocess
        from megatron.core.dist_checkpointing.dict_utils import merge
        sharded, nonpersistent, factories = load_preprocess({"w": entry})
        loaded = {}
        merge(loaded, nonpersistent)
        got = loaded.get("w")
        out["loaded_shape"] = list(got.shape) if hasattr(got, "shape") else None
        try:
            weight.data.copy_(got)  # what load_state_dict's param.copy_(input) does
            out["copy_into_param"] = "ok"
        except Exception as exc:  # noqa: BLE001
            out["copy_into_param"] = f"{type(exc).__name__}: {str(exc)[:200]}"
    return out


def task_ordering(ctx, p):
    """Triage (c): the two load orderings of Megatron (serialization.load and
    MCoreTensorAwareStateDict.to_state_dict) on one rank tree whose in_proj factory builds what
    spec 4.7 says the shard split builds on an all-padding GTP rank: one LocalNonpersistentObject
    holding the (0, C) view; other ranks build their real piece. The factory is the candidate
    shard-split design's when it is installed (--candidate shard-split), else a plain
    ShardedTensorFactory that builds the same; everything else is Megatron's."""
    torch, M = ctx.torch, ctx.M
    import torch.distributed as dist
    from megatron.core import dist_checkpointing
    from megatron.core.dist_checkpointing.tensor_aware_state_dict import MCoreTensorAwareStateDict
    G, g, C, R = ctx.gtp_size, ctx.g, int(p["cols"]), int(p["shard_rows"])
    real = [max(0, min(R, int(p["rows"]) - x * R)) for x in range(G)]
    shard = torch.zeros(R, C, dtype=torch.float64)
    for j in range(real[g]):
        shard[j].fill_(row_code(g, j))
    key = "decoder.layers.0.mixer.in_proj.weight"

    def build(k, t, replica_id, flattened_range=None):
        if real[g] == 0:
            return [M.LocalNonpersistentObject(t[0:0])]
        return [M.ShardedTensor.from_rank_offsets(k + ".z", t[: real[g]], replica_id=replica_id)
                if G == 1 else M.ShardedTensor(k + ".z", t[: real[g]], t.dtype, (real[g], C), (sum(real), C),
                                              (sum(real[:g]), 0), None, replica_id, 0)]

    def merge(sub):
        part = sub[0]
        out = torch.zeros(R, C, dtype=torch.float64)
        out[: part.shape[0]] = part
        return out

    def tree(data):
        if shard_split.installed():  # the candidate's own factory over this rank's GTP shard entry
            orig = M.ShardedTensor.from_rank_offsets(key, data, (0, g, G), replica_id=(0, 0, 0))
            factory = shard_split.gtp_split_tensor_factory(M, orig, [int(p["rows"])], ["z"], g, 0, 1)
        else:
            factory = M.ShardedTensorFactory(key, data, build, merge, (0, 0, 0))
        return {"mixer": {"in_proj.weight": factory}, "local": M.LocalNonpersistentObject(500 + ctx.rank),
                "iteration": 7}

    # to_state_dict's nvidia_resiliency_ext guard is the worker's declared tensor_aware_state_dict.HAVE_NVRX patch
    out = {"factory": shard_split.LABEL if shard_split.installed() else "a stand-in of the design's factory"}
    d = p["dir"]
    if ctx.rank == 0:
        os.makedirs(d, exist_ok=True)
    dist.barrier()
    dist_checkpointing.save(tree(shard), d)
    dist.barrier()
    orders = (("serialization_load", lambda: dist_checkpointing.load(tree(torch.zeros(R, C, dtype=torch.float64)), d)),
              ("to_state_dict", lambda: MCoreTensorAwareStateDict.from_state_dict(tree(shard), algo="atomic")[0]
                      .to_state_dict(tree(torch.zeros(R, C, dtype=torch.float64)), algo="atomic")))
    for name, fn in orders[: 1 if p.get("serialization_only") else 2]:
        try:
            loaded = fn()
            codes, malformed = first_column_checked(loaded["mixer"]["in_proj.weight"], (R, C))
            out[name] = {"ok": True, "rows": decode_rows(codes), "keys": sorted(loaded),
                         **({"malformed": malformed} if malformed else {})}
        except Exception as exc:  # noqa: BLE001
            out[name] = {"ok": False, "error": f"{type(exc).__name__}: {str(exc)[:300]}",
                         "frame": megatron_frame(exc.__traceback__)}
        dist.barrier()
    return out


def _rows_tensor(torch, shape, codes):
    """A float64 tensor of `shape` whose index along dim 0 carries codes[i] (all other elements)."""
    t = torch.zeros(tuple(shape) if shape else (1,), dtype=torch.float64)
    for i, c in enumerate(codes):
        t[i].fill_(c) if t.dim() > 1 else t.__setitem__(i, c)
    return t if shape else t.reshape(())


def task_ckpt_save(ctx, p):
    """The harness's checkpoint written for real by Megatron's dist_checkpointing.save (one rank):
    every stored chunk as a ShardedTensor of row codes, objects, common values."""
    from megatron.core import dist_checkpointing
    save = _ckpt_tree(ctx, p)
    d = p["dir"]
    os.makedirs(d, exist_ok=True)
    dist_checkpointing.save(save, d, validate_access_integrity=False)
    return {"saved": len(save)}


def _ckpt_tree(ctx, p, replica_id=0):
    """The checkpoint's chunks, objects and common values as one state dict to save."""
    torch, M = ctx.torch, ctx.M
    save = {}
    boxes = {}
    for c in p["chunks"]:
        prepend = int(c["prepend_axis_num"])
        boxes.setdefault((c["key"], tuple(c["global_shape"])), []).append(
            (1,) * prepend + tuple(int(x) for x in c["local_shape"]))
    for i, c in enumerate(p["chunks"]):
        prepend = int(c["prepend_axis_num"])
        local = [int(x) for x in c["local_shape"]]
        data = _rows_tensor(torch, local, c["codes"])
        # the stored box, prepended axes as extent-1 dims of the data (DCP's chunk is the full box)
        data = data.reshape((1,) * prepend + tuple(local))
        gshape = tuple(c["global_shape"])
        shapes = set(boxes[(c["key"], gshape)])
        frag = None
        if len(shapes) == 1 and all(b and g % b == 0 for g, b in zip(gshape, tuple(data.shape))) \
                and all(o % b == 0 for o, b in zip(c["global_offset"], tuple(data.shape))):
            frag = tuple(g // b for g, b in zip(gshape, tuple(data.shape)))  # a regular grid
        save[f"chunk{i}"] = M.ShardedTensor(c["key"], data, data.dtype, tuple(data.shape), gshape,
                                            tuple(c["global_offset"]), frag, replica_id, 0)
    for j, (ukey, value) in enumerate(p["objects"]):
        key, _, rest = ukey.rpartition("/shard_")
        offsets, _, shape = rest.partition("_")
        save[f"object{j}"] = M.ShardedObject(key, ("ih-object", value), tuple(int(x) for x in shape.split(".")),
                                             tuple(int(x) for x in offsets.split(".")), replica_id)
    save.update(p["common"])
    return save


def _gtp_factory_for(ctx, f):
    """The real in_proj factory of this rank for a request's GTP factory leaf: the stand-in mixer
    of the leaf's layout in this world, its sharded_state_dict called (GatedDeltaProductMixer or
    MambaMixer, unbound: the GTP all-gather, pad strip and Megatron's split factory)."""
    key = f["key"]
    prefix = key[: -len("in_proj.weight")]
    mod, _, mixer_cls = standin_mixer(ctx, f)
    with shard_split.selected(f.get("design", "gather")):
        sd = mixer_cls.sharded_state_dict(mod, prefix=prefix, sharded_offsets=(), metadata={"dp_cp_group": ctx.dp_cp_group})
    return sd[prefix + "in_proj.weight"]


def _retargeted_factory(ctx, e):
    """A factory that Megatron's retargeting returned, made again the way it was made: the real
    factory from its recipe (codec.py: ssm/utils' split factory or apply_swiglu_sharded_factory)
    over a real tensor, then retarget_sharded_state_dict_to_gpt_checkpoint for its pattern, which
    wraps its build (the GPT layer axis). Megatron's load then builds, loads and merges it."""
    from megatron_adapter.codec import Codec
    torch, M = ctx.torch, ctx.M
    factory = Codec(M).leaf(e["entry"], "retargeted")
    if factory.data is not None:
        factory.data = torch.zeros(tuple(factory.data.shape), dtype=torch.float64)
    holder = {"x": factory}
    M.interop.retarget_sharded_state_dict_to_gpt_checkpoint(holder, M.interop.gpt_compatible_layer_maps(e["pattern"]))
    out = holder["x"]
    if isinstance(out, M.ShardedTensorFactory):
        # One rank's request alone in a one-rank world (as for the request's tensors in
        # task_load_state): the built entries are handed to torch as self-describing chunks, or torch
        # would place every fragment of their regular grid on this one rank. Only the grid
        # description changes; keys, boxes, data and Megatron's merge are untouched.
        # Prepended axes become extent-1 dims of the data (DCP's irregular chunks carry no
        # prepend_axis_num); Megatron's merge gets its loaded tensors back in the built shapes.
        inner, inner_merge, shapes = out.build_fn, out.merge_fn, []

        def items(x):
            return list(x) if isinstance(x, (list, tuple)) else list(x.values()) if isinstance(x, dict) else [x]

        def build_fn(*args, **kwargs):
            built = inner(*args, **kwargs)
            shapes.clear()
            for x in items(built):
                shapes.append(tuple(x.local_shape) if isinstance(x, M.ShardedTensor) else None)
                if isinstance(x, M.ShardedTensor):
                    p = x.prepend_axis_num
                    if p:
                        x.local_shape = (1,) * p + tuple(x.local_shape)
                        if x.data is not None:
                            x.data = x.data.reshape(x.local_shape)
                        x.prepend_axis_num = 0
                    x.axis_fragmentations = None
            return built

        def merge_fn(sub):
            if isinstance(sub, list):
                sub = [v.reshape(sh) if sh is not None and isinstance(v, torch.Tensor) else v for v, sh in zip(sub, shapes)]
            elif isinstance(sub, dict):
                sub = {k: v.reshape(sh) if sh is not None and isinstance(v, torch.Tensor) else v
                       for (k, v), sh in zip(sub.items(), shapes)}
            elif isinstance(sub, torch.Tensor) and shapes and shapes[0] is not None:
                sub = sub.reshape(shapes[0])
            return inner_merge(sub)
        out.build_fn, out.merge_fn = build_fn, merge_fn
    return out


def task_load_state(ctx, p):
    """The seam's load_state on Megatron's own code: the request tree built on every rank of the
    world (a GTP factory leaf is this rank's real in_proj factory, built by the mixer's
    sharded_state_dict on the stand-in; every other leaf as given), then loaded along p["order"]:
    serialization.load from the checkpoint in p["dir"], or MCoreTensorAwareStateDict.to_state_dict
    of an in-memory state dict holding the checkpoint's chunks (the local-checkpoint path). Factories
    are built, loaded and merged by Megatron's load path itself; every rank returns its tree."""
    torch, M = ctx.torch, ctx.M
    from megatron.core import dist_checkpointing
    requested = {}
    factories = p.get("factories") or {}

    def build(node, path):
        kind = node[0]
        if kind == "dict":
            return {k: build(v, path + (k,)) for k, v in node[1]}
        if kind == "list":
            return [build(v, path + (i,)) for i, v in enumerate(node[1])]
        e = node[1]
        if e["kind"] == "factory":
            return _gtp_factory_for(ctx, factories[str(e["factory_id"])])
        if e["kind"] == "retargeted_factory":
            return _retargeted_factory(ctx, e)
        if e["kind"] == "tensor":
            local = [int(x) for x in e["local_shape"]]
            prepend = int(e.get("prepend_axis_num", 0))
            full = (1,) * prepend + tuple(local)
            # one rank's request alone: described as an irregular chunk (same box, prepended axes as
            # extent-1 dims) so torch places no other fragment on this rank
            st = M.ShardedTensor(e["key"], torch.full(full, row_code(999, 0), dtype=torch.float64),
                                 torch.float64, full, tuple(e["global_shape"]), tuple(e["global_offset"]), None,
                                 tuple(e["replica_id"]) if isinstance(e.get("replica_id"), list) else e.get("replica_id", 0),
                                 0, allow_shape_mismatch=bool(e.get("allow_shape_mismatch")))
            requested[path] = tuple(local)
            return st
        if e["kind"] == "object":
            so = M.ShardedObject(e["key"], None, tuple(e["global_shape"]), tuple(e["global_offset"]),
                                 tuple(e["replica_id"]) if isinstance(e.get("replica_id"), list) else e.get("replica_id", 0))
            return so
        if e["kind"] == "local":
            return M.LocalNonpersistentObject(("ih-local", e.get("value")))
        return ("ih-plain", e.get("value"))

    tree = build(p["request"], ())
    if p["order"] == "to_state_dict":
        from megatron.core.dist_checkpointing.tensor_aware_state_dict import MCoreTensorAwareStateDict
        # This rank's local checkpoint holds every stored chunk (a superset of what it saved, so
        # every shard id the request asks is there); the atomic algorithm exchanges nothing.
        # cached_metadata given: the global integrity check of a save is not what is judged here.
        held = _ckpt_tree(ctx, p, replica_id=ctx.rank)
        tasd, _ = MCoreTensorAwareStateDict.from_state_dict(held, algo="atomic", cached_metadata=(None,) * 4)
        loaded = tasd.to_state_dict(tree, algo="atomic", validate_access_integrity=False)
    else:
        loaded = dist_checkpointing.load(tree, p["dir"], validate_access_integrity=False)

    def back(x, path=()):
        if isinstance(x, dict):
            return ["dict", [[k, back(v, path + (k,))] for k, v in x.items()]]
        if isinstance(x, list):
            return ["list", [back(v, path + (i,)) for i, v in enumerate(x)]]
        if isinstance(x, tuple) and len(x) == 2 and x[0] == "ih-local":
            return ["local", x[1]]
        if isinstance(x, tuple) and len(x) == 2 and x[0] == "ih-plain":
            return ["plain", x[1]]
        if isinstance(x, (tuple, list)) and len(x) == 2 and x[0] == "ih-object":
            return ["object", x[1]]
        if isinstance(x, torch.Tensor):
            if path in requested and x.numel() == math.prod(requested[path]):
                x = x.reshape(requested[path])
            # flatten(1), not reshape(rows, -1): a shard may hold no rows (a trimmed all-padding GTP shard)
            rows = (x.flatten(1)[:, 0] if x.dim() > 1 else x).tolist() if x.dim() else [float(x)]
            return ["tensor", list(x.shape), decode_rows(rows)]
        return ["value", x]

    import math
    return back(loaded)
