"""World tasks on Megatron's GDP/Mamba mixer code under GTP: the stand-in mixer whose in_proj Megatron's
wrap_module_params_gtp wraps, its save and merge, and GTP's writer election (docs/adapter-protocol.md)."""

from candidates import shard_split  # selects the candidate design per task (inactive unless installed)

from megatron_adapter.error_kinds import exception_facts
from megatron_adapter.worlds.worker_context import (decode_rows, first_column_checked, install_groups, megatron_frame,
                                                   row_code)


# ---- stand-ins ------------------------------------------------------------------------------

def _stand_in_classes(torch):
    from megatron.core.transformer.utils import ensure_metadata_has_dp_cp_group, make_sharded_tensors_for_checkpoint

    class InProj(torch.nn.Module):
        """Stands for TE's column-parallel in_proj: its sharded_state_dict is TE's (weight and bias
        TP-sharded on axis 0, the caller's dp_cp group) calling Megatron's own helper."""

        def __init__(self, weight, tp_group):
            super().__init__()
            self.weight = weight
            self._tp_group = tp_group

        def sharded_state_dict(self, prefix="", sharded_offsets=(), metadata=None):
            metadata = ensure_metadata_has_dp_cp_group(metadata)
            state_dict = self.state_dict(prefix="", keep_vars=True)
            return make_sharded_tensors_for_checkpoint(state_dict, prefix, {"weight": 0, "bias": 0}, sharded_offsets,
                                                       tp_group=self._tp_group, dp_cp_group=metadata["dp_cp_group"])

    class Conv(torch.nn.Module):
        def __init__(self, rows):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.zeros(rows, 1, 4, dtype=torch.float64))

    return InProj, Conv


def layout_dims(sections, names):
    """("gdp", d_inner, group_state, nheads, householder) or ("mamba", d_inner, group_state, nheads, 0)
    from an in_proj split layout."""
    if names == ["z", "x", "B", "C", "dt"]:
        return "mamba", sections[0], sections[2], sections[4], 0
    if "V0" not in names or names[0] != "z" or names[-1] != "a":
        raise ValueError(f"not a GDP or Mamba in_proj layout: {names}")
    m = sum(1 for n in names if n.startswith("V"))
    return "gdp", sections[0], sections[names.index("Q")], sections[-1], m


def full_weight(ctx, rows, cols):
    """The TP-local weight before GTP: row r of TP rank t holds row_code(t, r)."""
    torch = ctx.torch
    full = torch.empty(rows, cols, dtype=torch.float64)
    for r in range(rows):
        full[r].fill_(row_code(ctx.t, r))
    return full


def _wrap_gtp(ctx, module, pad_for_alignment, replica_group):
    """Megatron's own post-init GTP path: wrap_module_params_gtp pads and slices the weight (and
    leaves it alone when the GTP group has one rank), stamping the caller's replica group."""
    gtp = ctx.M.gtp
    saved = gtp.GTP_CONFIG.pad_for_alignment
    gtp.GTP_CONFIG.pad_for_alignment = pad_for_alignment
    try:
        _call_wrap(gtp, module, ctx.gtp_group, replica_group=replica_group)
    finally:
        gtp.GTP_CONFIG.pad_for_alignment = saved
    module.weight.requires_grad_(False)
    return module.weight


def _call_wrap(gtp, module, group, replica_group=None, is_grouped=False):
    """wrap_module_params_gtp with the arguments this checkout's signature has (older checkouts
    stamp no replica group: their writer election is then whatever their code does)."""
    import inspect
    params = inspect.signature(gtp.wrap_module_params_gtp).parameters
    kwargs = {}
    if "replica_group" in params:
        kwargs["replica_group"] = replica_group
    if "is_grouped" in params and is_grouped:
        kwargs["is_grouped"] = is_grouped
    gtp.wrap_module_params_gtp(module, ["weight"], group, **kwargs)


def standin_mixer(ctx, p):
    """A stand-in mixer (GDP or Mamba, by the layout's names) carrying the attributes and
    parameters that the mixer's sharded_state_dict reads, shaped as Megatron shapes them, with a
    GTP-wrapped in_proj. Returns (module, in_proj weight, the mixer class)."""
    torch = ctx.torch
    import types
    InProj, Conv = _stand_in_classes(torch)
    sections, names = list(p["sections"]), list(p["names"])
    kind, d_inner, group_state, nheads, m = layout_dims(sections, names)
    mod = torch.nn.Module()
    mod.d_inner_local_tp, mod.ngroups_local_tp, mod.d_state, mod.nheads_local_tp = d_inner, 1, group_state, nheads
    for name in ("A_log", "dt_bias", "D"):
        mod.register_parameter(name, torch.nn.Parameter(torch.zeros(nheads, dtype=torch.float64), requires_grad=False))
    in_proj = InProj(torch.nn.Parameter(full_weight(ctx, sum(sections), int(p["cols"])), requires_grad=False),
                     ctx.tp_group)
    weight = _wrap_gtp(ctx, in_proj, int(p["pad_for_alignment"]), ctx.dp_excl_group)
    if kind == "gdp":
        mod.num_householder = m
        mod.pg_collection = types.SimpleNamespace(tp=ctx.tp_group)
        mod.in_proj = in_proj
        mod.conv1d = Conv(d_inner * m + (1 + m) * group_state)
        return mod, weight, ctx.M.gdp.GatedDeltaProductMixer
    conv_dim = d_inner + 2 * group_state
    mod.tp_group = ctx.tp_group
    mod.register_parameter("conv1d_weight", torch.nn.Parameter(torch.zeros(conv_dim, 1, 4, dtype=torch.float64),
                                                               requires_grad=False))
    mod.register_parameter("conv1d_bias", torch.nn.Parameter(torch.zeros(conv_dim, dtype=torch.float64),
                                                             requires_grad=False))
    mod.in_proj = in_proj
    import importlib
    return mod, weight, importlib.import_module("megatron.core.ssm.mamba_mixer").MambaMixer


def _data_view(torch, tensor, base, base_id):
    """{"storage", "first_row", "rows"} when `tensor` is a row view of `base`, else None."""
    if tensor is None or base is None:
        return None
    if tensor.untyped_storage().data_ptr() != base.untyped_storage().data_ptr():
        return None
    if tensor.dim() == 0 or tensor.shape[1:] != base.shape[1:] or not tensor.is_contiguous():
        return None
    stride = base.stride(0) if base.dim() else 1
    delta = tensor.storage_offset() - base.storage_offset()
    if stride == 0 or delta % stride:
        return None
    return {"storage": base_id, "first_row": delta // stride, "rows": int(tensor.shape[0])}


def _st_json(st):
    return {"kind": "tensor", "key": st.key, "global_shape": list(st.global_shape),
            "global_offset": list(st.global_offset), "local_shape": list(st.local_shape),
            "axis_fragmentations": None if st.axis_fragmentations is None else list(st.axis_fragmentations),
            "replica_id": list(st.replica_id) if isinstance(st.replica_id, tuple) else st.replica_id,
            "prepend_axis_num": st.prepend_axis_num, "allow_shape_mismatch": bool(st.allow_shape_mismatch)}


# ---- tasks ----------------------------------------------------------------------------------

def task_ping(ctx, payload):
    return {"rank": ctx.rank, "coords": [ctx.d, ctx.t, ctx.g]}


def task_gdp_save(ctx, p):
    """Builds the stand-in GDP mixer and calls GatedDeltaProductMixer.sharded_state_dict unbound.
    Returns the GTP parameter's own entry (what the in_proj submodule built), the in_proj
    factory and its built pieces, with data described as views of the shard ("shard") or of the
    gathered buffer ("gathered"), and a check of the gathered rows' values."""
    torch, M = ctx.torch, ctx.M
    prefix = p.get("prefix", "decoder.layers.0.mixer.")
    mod, shard, mixer_cls = standin_mixer(ctx, p)
    metadata = {"dp_cp_group": ctx.dp_cp_group}
    param_sd = mod.in_proj.sharded_state_dict(prefix=prefix + "in_proj.", metadata=dict(metadata))
    param_entry = param_sd[prefix + "in_proj.weight"]
    out = {"param_entry": _st_json(param_entry), "param_entry_dtype": str(param_entry.dtype),
           "param_entry_view": _data_view(torch, param_entry.data, shard, "shard"),
           "shard_rows": int(shard.shape[0]), "pad_length": int(getattr(shard, "pad_length", 0))}
    out["mixer"] = mixer_cls.__name__
    try:
        with shard_split.selected(p.get("design", "gather")):
            sd = mixer_cls.sharded_state_dict(mod, prefix=prefix, sharded_offsets=(), metadata=metadata)
    except Exception as exc:  # noqa: BLE001 - reported per op: the parameter entry does not depend on it
        out["mixer_error"] = {"type": type(exc).__name__, "message": str(exc)[:3000],
                              "frame": megatron_frame(exc.__traceback__)}
        return out
    factory = sd[prefix + "in_proj.weight"]
    ctx.factories[p.get("case", "default")] = factory
    if isinstance(factory, M.ShardedTensorFactory):
        base = factory.data
        gathered = base is not None and base.untyped_storage().data_ptr() != shard.untyped_storage().data_ptr()
        base_id = "gathered" if gathered else "shard"
        out["factory"] = {"key": factory.key, "replica_id": list(factory.replica_id)
                          if isinstance(factory.replica_id, tuple) else factory.replica_id,
                          "data_rows": None if base is None else int(base.shape[0]), "base": base_id}
        built = factory.build()
        items = built if isinstance(built, list) else [built]
        pieces = []
        for x in items:
            if isinstance(x, M.ShardedTensor):
                pieces.append({"entry": _st_json(x), "view": _data_view(torch, x.data, base, base_id)})
            elif isinstance(x, M.LocalNonpersistentObject):
                obj = x.unwrap()
                pieces.append({"local": True, "rows": int(obj.shape[0]) if hasattr(obj, "shape") else None,
                               "view": _data_view(torch, obj, base, base_id) if hasattr(obj, "shape") else None})
            else:
                pieces.append({"other": type(x).__name__})
        out["pieces"] = pieces
        if gathered and base is not None:
            # The gathered buffer must be the TP-local weight's real rows, in order.
            want = [(ctx.t, r) for r in range(int(base.shape[0]))]
            codes, problem = first_column_checked(base, (int(base.shape[0]), int(p["cols"])))
            got = decode_rows(codes)
            out["gathered_rows_ok"] = got == want and problem is None
            if problem:
                out["gathered_rows_problem"] = f"the gathered buffer has {problem}"
            elif got != want:
                bad = next(i for i, (a, b) in enumerate(zip(got, want)) if a != b) if len(got) == len(want) else None
                out["gathered_rows_problem"] = (f"gathered {len(got)} rows, first wrong row {bad}: {got[bad] if bad is not None else ''}"
                                                if bad is not None else f"gathered {len(got)} rows, expected {len(want)}")
    else:
        out["factory"] = None
        out["entry"] = _st_json(factory) if isinstance(factory, M.ShardedTensor) else {"other": type(factory).__name__}
    return out


def task_gdp_save_unpatched(ctx, p):
    """task_gdp_save with the worker's GTP flag patches undone: shows they are still needed (Megatron then
    skips its GTP branch and trips on the shard's size)."""
    with ctx.gtp_patches.suspended():
        try:
            out = task_gdp_save(ctx, dict(p, case="unpatched"))
        except Exception as exc:  # noqa: BLE001
            return {"failed": True, "error": f"{type(exc).__name__}: {str(exc)[:300]}"}
    if out.get("mixer_error"):
        err = out["mixer_error"]
        return {"failed": True, "error": f"{err['type']}: {err['message'][:300]}", "frame": err.get("frame")}
    return {"failed": False, "pieces": len(out.get("pieces", []))}


def task_gdp_merge(ctx, p):
    """Calls the merge_fn of the factory task_gdp_save built for p["case"] on loaded tensors given
    as row codes (one list of codes per loaded tensor); returns the merged rows' codes and what is wrong with the
    merged tensor beyond its rows (its columns)."""
    torch = ctx.torch
    factory = ctx.factories.get(p.get("case", "default"))
    if factory is None:
        raise RuntimeError("no factory built for this case on this rank (call gdp_save first)")
    mine = p["per_rank"][ctx.rank] if isinstance(p.get("per_rank"), list) else p
    if mine is None:
        return None
    cols = int(p["cols"])

    def tensor(codes):
        t = torch.empty(len(codes), cols, dtype=torch.float64)
        for i, c in enumerate(codes):
            t[i].fill_(c)
        return t

    loaded = mine["loaded"]
    arg = tensor(loaded) if mine.get("bare") else [tensor(c) for c in loaded]
    merged = factory.merge_fn(arg)
    rows = int(merged.shape[0]) if merged.dim() else 0
    codes, problem = first_column_checked(merged, (rows, cols))
    return {"rows": rows, "codes": codes, "problem": problem}


def _rank_lists(gen, token):
    return [list(r) for r in gen.get_ranks(token)]


def task_election(ctx, p):
    """One rank of a writer-election world (spec addendum A): Megatron's RankGenerator builds the
    dense and expert grids of initialize_model_parallel; parallel_state is initialized by
    initialize_model_parallel itself (p["globals"]: the sizes it gets, possibly a foreign layout)
    or left uninitialized; the caller's GTP-excluded group is stamped on the parameter when
    p["caller"]. The parameter is wrapped by wrap_module_params_gtp and described by
    make_sharded_tensors_for_checkpoint, whose GTP branch elects the writer (gtp_replica_rank)."""
    torch, M = ctx.torch, ctx.M
    import torch.distributed as dist
    from megatron.core import parallel_state as ps
    size = dist.get_world_size()
    rank = dist.get_rank()
    w = p["world"]
    dense = ps.RankGenerator(tp=w["tp"], ep=1, dp=w["dp"], pp=1, cp=w["cp"],
                             order=ps._inject_gtp_remat_axis("tp-cp-ep-dp-pp", after="tp"), gtp_remat=w["gtp"])
    edp = size // (w["etp"] * w["ep"] * w["egtp"])
    expert = ps.RankGenerator(tp=w["etp"], ep=w["ep"], dp=edp, pp=1, cp=1,
                              order=ps._inject_gtp_remat_axis("tp-cp-ep-dp-pp", after="ep"), gtp_remat=w["egtp"])
    is_expert = bool(p["expert"])
    gen = expert if is_expert else dense
    wanted = {"tp": _rank_lists(gen, "tp"), "gtp": _rank_lists(gen, "gtp_remat"),
              "replica": _rank_lists(gen, "dp") if is_expert else _rank_lists(gen, "dp-cp"),
              "dp_cp_incl": _rank_lists(gen, "gtp_remat-dp") if is_expert else _rank_lists(gen, "gtp_remat-dp-cp"),
              "ep": _rank_lists(gen, "ep")}
    groups = {}
    for name, lists in wanted.items():  # every rank creates every group, in the same order
        for ranks in lists:
            g = dist.new_group(ranks, backend="gloo")
            if rank in ranks:
                groups[name] = (g, ranks)
    ps.destroy_model_parallel()
    if p.get("globals"):
        gl = p["globals"]
        ps.initialize_model_parallel(tensor_model_parallel_size=gl["tp"], context_parallel_size=gl["cp"],
                                     expert_model_parallel_size=gl["ep"], gtp_remat_size=gl["gtp"],
                                     expert_gtp_remat_size=gl["egtp"], expert_tensor_parallel_size=gl["etp"],
                                     create_gloo_process_groups=False)
    InProj, _ = _stand_in_classes(torch)
    from megatron.core.transformer.utils import make_sharded_tensors_for_checkpoint
    full = torch.empty(int(p["rows"]), int(p["cols"]), dtype=torch.float64)
    param = torch.nn.Parameter(full, requires_grad=False)
    if is_expert:
        param.allreduce = False  # a routed-expert weight: replicated over expert DP
    module = torch.nn.Module()
    module.weight = param
    gtp = M.gtp
    saved = gtp.GTP_CONFIG.pad_for_alignment
    gtp.GTP_CONFIG.pad_for_alignment = int(p["pad_for_alignment"])
    try:
        _call_wrap(gtp, module, groups["gtp"][0], is_grouped=is_expert,
                   replica_group=groups["replica"][0] if p.get("caller") else None)
    finally:
        gtp.GTP_CONFIG.pad_for_alignment = saved
    weight = module.weight
    offsets = ()
    if is_expert:
        ep_ranks = groups["ep"][1]
        offsets = ((0, ep_ranks.index(rank), len(ep_ranks)),)  # the expert axis experts prepend
    try:
        sd = make_sharded_tensors_for_checkpoint({"weight": weight}, p["key"][: -len("weight")], {"weight": 0}, offsets,
                                                 tp_group=groups["tp"][0], dp_cp_group=groups["dp_cp_incl"][0])
        entry = sd[p["key"]]
        out = {"entry": _st_json(entry), "view": _data_view(torch, entry.data, weight, "shard"),
               "gtp_param": bool(getattr(weight, "is_gtp_weight_remat", False))}
    except Exception as exc:  # noqa: BLE001
        out = {"error": {"type": type(exc).__name__, "message": str(exc)[:2000],
                         "frame": megatron_frame(exc.__traceback__), "facts": exception_facts(exc)}}
    finally:
        ps.destroy_model_parallel()  # the worker destroys this task's groups after it
    return out


def task_restore_parallel_state(ctx, payload):
    """parallel_state's globals pointed back at this world's own groups, which outlive a task (an
    election builds and destroys its own on a borrowed world): building them again would leak them."""
    install_groups(ctx)
    return True
